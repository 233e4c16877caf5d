// The request series (keyslice_requests_total, keyslice_request_errors_total,
// keyslice_request_duration_seconds, keyslice_eventual_reads_total,
// keyslice_dynamodb_pages_total) are counted
// in plain numbers and handed to prom-client at a scrape (process-metrics.ts).
// Checked against the dumb model: prom-client's own Counter and Histogram, fed
// the same requests one call at a time, must give the same text, alone and
// merged as the coordinator merges its routers' registries. The clock is the
// test's, so durations fall on bucket bounds exactly.
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OPERATION_NAMES, type OperationName } from '../shared/api.js';
import type { ErrorCode } from '../shared/errors.js';
import { REQUEST_SECONDS_BUCKETS } from '../shared/limits.js';
import { DYNAMODB_PAGE_SOURCES, EVENTUAL_ANSWERS, ProcessMetrics, type DynamoDbPageSource, type EventualAnswer } from '../coordinator/router/process-metrics.js';
import { parseExposition, total } from './prometheus-text.js';

const REQUEST_SERIES = /^(# (HELP|TYPE) )?keyslice_(request(s_total|_errors_total|_duration_seconds)|eventual_reads_total|dynamodb_pages_total)/;
const only = (text: string) => text.split('\n').filter((l) => REQUEST_SERIES.test(l)).join('\n');

/** The series as prom-client made them before: a counter and a histogram observed per request. */
function model(process: string) {
  const registry = new Registry();
  registry.setDefaultLabels({ process });
  const registers = [registry];
  const requests = new Counter({ name: 'keyslice_requests_total', help: 'operations the request path of this process ran, by operation', labelNames: ['op'], registers });
  const errors = new Counter({ name: 'keyslice_request_errors_total', help: 'operations that ended in an error, by operation and error code', labelNames: ['op', 'code'], registers });
  const seconds = new Histogram({ name: 'keyslice_request_duration_seconds', help: "time from an operation's start in this process to its answer, by operation", labelNames: ['op'], buckets: [...REQUEST_SECONDS_BUCKETS], registers });
  for (const op of OPERATION_NAMES) {
    requests.inc({ op }, 0);
    seconds.zero({ op });
  }
  /** A counter of one label, every value of it at 0 from the start (as process-metrics.ts writes them). */
  const oneLabel = (name: string, help: string, label: string, values: readonly string[]) => {
    const c = new Counter({ name, help, labelNames: [label], registers });
    for (const v of values) c.inc({ [label]: v }, 0);
    return (v: string) => c.inc({ [label]: v });
  };
  const eventual = oneLabel(
    'keyslice_eventual_reads_total',
    'eventually consistent reads (consistentRead false) this process routed, by what answered: a follower; the leader (its turn, or no follower connected); the leader after a follower could not answer (not caught up, at another epoch, unreachable, or silent for REPLICA_READ_TIMEOUT_MS)',
    'answered',
    EVENTUAL_ANSWERS,
  );
  const pages = oneLabel(
    'keyslice_dynamodb_pages_total',
    'Query and Scan pages the DynamoDB endpoint of this process answered, by what their items were written from: msgpack (the slice workers\' packed items written as JSON undecoded: no filter, projection, Select COUNT or ReturnConsumedCapacity), objects (decoded items) or none (an empty page answered without a read of the nodes: an empty segment of a parallel Scan, a Query continued past a hash-key-only table\'s one item)',
    'written',
    DYNAMODB_PAGE_SOURCES,
  );
  return {
    registry,
    eventualRead(answered: EventualAnswer) {
      eventual(answered);
    },
    dynamodbPage(written: DynamoDbPageSource) {
      pages(written);
    },
    request(op: OperationName, s: number, error: ErrorCode | null) {
      requests.inc({ op });
      seconds.observe({ op }, s);
      if (error !== null) errors.inc({ op, code: error });
    },
  };
}

afterEach(() => vi.restoreAllMocks());

describe('the request series', () => {
  it('are what prom-client counted request by request: every bucket bound, above the last, errors in first-seen order', async () => {
    let now = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const metrics = new ProcessMetrics('router-7');
    const reference = model('router-7');
    const durations = [0, ...REQUEST_SECONDS_BUCKETS, ...REQUEST_SECONDS_BUCKETS.map((b) => b * 1.5), 11, 30];
    const ops: OperationName[] = ['GetItem', 'PutItem', 'GetItems', 'BatchWrite'];
    const codes: (ErrorCode | null)[] = [null, null, 'ThroughputExceeded', null, 'TableNotFound', 'ConditionalCheckFailed'];
    let i = 0;
    for (const s of durations) {
      for (const op of ops) {
        const error = codes[i++ % codes.length];
        now = 0;
        const done = metrics.start(op);
        now = s * 1000;
        done(error);
        // The seconds as the metrics compute them from the clock (so the sums agree to the last bit).
        reference.request(op, (now - 0) / 1000, error);
      }
    }
    for (const answered of ['follower', 'follower', 'leader_after_follower'] as const) {
      metrics.eventualRead(answered);
      reference.eventualRead(answered);
    }
    for (const written of ['msgpack', 'objects', 'msgpack', 'none'] as const) {
      metrics.dynamodbPage(written);
      reference.dynamodbPage(written);
    }
    // Both the text of one process and the merge (JSON through AggregatorRegistry, as allProcesses does).
    expect(only(await metrics.text())).toBe(only(await reference.registry.metrics()));
    const merged = async (r: Registry) => AggregatorRegistry.aggregate([(await r.getMetricsAsJSON()).map((m) => ({ ...m, aggregator: 'sum' as const }))]).metrics();
    expect(only(await merged(metrics.registry))).toBe(only(await merged(reference.registry)));
    // Not a comparison of two empty texts: errors of several codes and requests in every bucket and above.
    const text = only(await metrics.text());
    expect(text.split('\n').filter((l) => l.startsWith('keyslice_request_errors_total{')).length).toBeGreaterThanOrEqual(6);
    expect(text).toContain('keyslice_request_duration_seconds_bucket{le="10",process="router-7",op="GetItem"} ' + durations.filter((s) => s <= 10).length);
    expect(text).toContain('keyslice_dynamodb_pages_total{written="msgpack",process="router-7"} 2');
  });

  it('merged as the coordinator merges its routers\' registries, each process keeps its series and they sum over processes', async () => {
    const routers = [new ProcessMetrics('router-1'), new ProcessMetrics('router-2'), new ProcessMetrics('coordinator')];
    // router-1 answered 3 pages from msgpack and 1 as objects, router-2 2 from msgpack, the coordinator none.
    for (const written of ['msgpack', 'objects', 'msgpack', 'msgpack'] as const) routers[0].dynamodbPage(written);
    for (let i = 0; i < 2; i++) routers[1].dynamodbPage('msgpack');
    const json = await Promise.all(routers.map((r) => r.registry.getMetricsAsJSON()));
    const text = await AggregatorRegistry.aggregate(json.map((metrics) => metrics.map((m) => ({ ...m, aggregator: 'sum' as const })))).metrics();
    const m = parseExposition(text);
    expect(total(m, 'keyslice_dynamodb_pages_total', { written: 'msgpack' })).toBe(5);
    expect(total(m, 'keyslice_dynamodb_pages_total', { written: 'objects' })).toBe(1);
    expect(total(m, 'keyslice_dynamodb_pages_total', { written: 'msgpack', process: 'router-1' })).toBe(3);
    expect(total(m, 'keyslice_dynamodb_pages_total', { written: 'objects', process: 'coordinator' }), 'every source from the start at 0').toBe(0);
    expect(text).toContain('keyslice_dynamodb_pages_total{written="objects",process="coordinator"} 0');
    expect(text).toContain('keyslice_dynamodb_pages_total{written="none",process="router-1"} 0');
  });
});

describe('writes sent again (ProcessMetrics.writeResent)', () => {
  afterEach(() => vi.restoreAllMocks());

  it('are each counted, and logged with why a line a second at most, the lines left out counted in the next', async () => {
    // sparseLog times its second on the monotonic clock (a wall clock stepped back held every line back for the step).
    let now = 1_000_000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    const lines: string[] = [];
    const metrics = new ProcessMetrics('router-3', (line) => lines.push(line));
    for (let i = 0; i < 100; i++) metrics.writeResent(i % 12, `copy ${i}: slice node lost the leadership`);
    expect(lines).toEqual(['a write on slice 0 was sent again after an unknown outcome: copy 0: slice node lost the leadership']);
    now = 1_000_999;
    metrics.writeResent(5, 'copy 100');
    expect(lines, 'within the second').toHaveLength(1);
    now = 1_001_000;
    metrics.writeResent(6, 'copy 101');
    expect(lines[1]).toBe('a write on slice 6 was sent again after an unknown outcome: copy 101 (and 100 more writes sent again since the last such line)');
    expect(await metrics.text()).toMatch(/^keyslice_writes_resent_total\{process="router-3"\} 102$/m);
  });
});

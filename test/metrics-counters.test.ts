// Counters a monitoring system can use, through real processes: the per-slice
// counters of the slice nodes grow by exactly the operations done (puts, gets,
// and puts refused at a per-slice capacity), in /metrics and in DescribeSlices;
// requests, errors and latency per operation count every request once; the
// exposition parses strictly; the process metrics are there; and with routers
// sharing the client port, every scrape shows every process's series.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import type { TableLoad } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { REQUEST_SECONDS_BUCKETS } from '../shared/limits.js';
import { useCluster } from './cluster-fixture.js';
import { parseExposition, samples, total, type Family } from './prometheus-text.js';

const WRITES_PER_SECOND = 20;
const c = useCluster({ nodes: 2, workers: 2, slices: 16, routers: 0, capacity: { readsPerSecond: 0, writesPerSecond: WRITES_PER_SECOND } });

async function scrape(url: string): Promise<Map<string, Family>> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  return parseExposition(await res.text());
}

/** Each outcome's count: 'ok' or the error code. */
async function outcomes(ps: Promise<unknown>[]): Promise<{ ok: number; throttled: number; other: number }> {
  const out = { ok: 0, throttled: 0, other: 0 };
  for (const r of await Promise.allSettled(ps)) {
    if (r.status === 'fulfilled') out.ok++;
    else if (r.reason instanceof KeysliceError && r.reason.code === 'ThroughputExceeded') out.throttled++;
    else out.other++;
  }
  return out;
}

const sum = (load: TableLoad, f: (s: TableLoad['slices'][number]) => number) => load.slices.reduce((a, s) => a + f(s), 0);

/** The table's counters in a scrape, summed over its slices and over its nodes (the two must agree). */
function tableCounters(m: Map<string, Family>, table: string) {
  const out: Record<string, number> = {};
  for (const k of ['reads', 'writes', 'read_bytes', 'write_bytes', 'throttled', 'duplicate_writes']) {
    out[k] = total(m, `keyslice_slice_${k}_total`, { table });
    expect(total(m, `keyslice_node_${k}_total`, { table }), `${k} per node and per slice`).toBe(out[k]);
  }
  return out;
}

const requests = (m: Map<string, Family>, op: string) => ({
  requests: total(m, 'keyslice_requests_total', { op }),
  histogram: total(m, 'keyslice_request_duration_seconds_count', { op }),
  throttled: total(m, 'keyslice_request_errors_total', { op, code: 'ThroughputExceeded' }),
  notFound: total(m, 'keyslice_request_errors_total', { op, code: 'TableNotFound' }),
});

describe('the strict exposition parser', () => {
  it('refuses what a scraper could misread', () => {
    const ok = '# HELP a_total x\n# TYPE a_total counter\na_total{l="v\\"q"} 3\n';
    expect(parseExposition(ok).get('a_total')!.samples[0]).toEqual({ name: 'a_total', labels: { l: 'v"q' }, value: 3 });
    expect(() => parseExposition(ok.slice(0, -1))).toThrow(/newline/);
    expect(() => parseExposition(ok + 'a_total{l="v\\"q"} 4\n')).toThrow(/repeats/);
    expect(() => parseExposition('# TYPE a counter\na -1\n')).toThrow(/negative/);
    expect(() => parseExposition('a 1\nb 1\na{x="1"} 1\n')).toThrow(/contiguous/);
    expect(() => parseExposition('a{x="1} 1\n')).toThrow(/label|sample/);
    expect(() => parseExposition('a 1\n# TYPE a gauge\n')).toThrow(/after the family/);
    expect(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n')).toThrow(/cumulative/);
    expect(() => parseExposition('# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n')).toThrow(/\+Inf/);
    expect(() => parseExposition('a one\n')).toThrow(/value/);
  });
});

describe('counters of one coordinator and two slice nodes', () => {
  it('grow by exactly the puts and gets done, and the bytes they stored and read', async () => {
    const T = 'counted';
    await c.client.createTable(T, { name: 'id', type: 'string' });
    const before = await scrape(c.cluster.url);
    expect(tableCounters(before, T)).toEqual({ reads: 0, writes: 0, read_bytes: 0, write_bytes: 0, throttled: 0, duplicate_writes: 0 });
    const reqBefore = { put: requests(before, 'PutItem'), get: requests(before, 'GetItem') };

    // Spread keys, a few at a time, so that no slice reaches its capacity of writes per second.
    const ids = Array.from({ length: 48 }, (_, i) => `key-${i}`);
    let puts = { ok: 0, throttled: 0, other: 0 };
    for (let i = 0; i < ids.length; i += 4) {
      const o = await outcomes(ids.slice(i, i + 4).map((id) => c.client.putItem(T, { id, v: 'x'.repeat(i) })));
      puts = { ok: puts.ok + o.ok, throttled: puts.throttled + o.throttled, other: puts.other + o.other };
    }
    expect(puts.other).toBe(0);
    const stored = (await Promise.all(ids.map((id) => c.client.getItem(T, id)))).filter((it) => it !== null).length;
    expect(stored).toBe(puts.ok);
    const missing = 5;
    await Promise.all(Array.from({ length: missing }, (_, i) => c.client.getItem(T, `absent-${i}`)));
    await expect(c.client.getItem('no_such_table', 'k')).rejects.toMatchObject({ code: 'TableNotFound' });

    const after = await scrape(c.cluster.url);
    const described = await c.client.describeSlices(T);
    const bytes = sum(described, (s) => s.bytes);
    expect(bytes).toBeGreaterThan(0);
    // Every item stored once and read once: the bytes written and read are the bytes stored.
    expect(tableCounters(after, T)).toEqual({ reads: ids.length + missing, writes: puts.ok, read_bytes: bytes, write_bytes: bytes, throttled: puts.throttled, duplicate_writes: 0 });
    // DescribeSlices carries the same counters, next to the rates, per slice, per node and per table.
    expect(described.complete).toBe(true);
    expect(described.totals).toEqual({ reads: ids.length + missing, writes: puts.ok, readBytes: bytes, writeBytes: bytes, throttled: puts.throttled, duplicateWrites: 0 });
    expect(sum(described, (s) => s.writes)).toBe(puts.ok);
    expect(described.nodes.reduce((a, n) => a + n.reads, 0)).toBe(ids.length + missing);
    expect(sum(described, (s) => s.writesPerSecond)).toBeGreaterThan(0);

    const put = requests(after, 'PutItem');
    const get = requests(after, 'GetItem');
    expect(put.requests - reqBefore.put.requests).toBe(ids.length);
    expect(put.histogram - reqBefore.put.histogram).toBe(ids.length);
    expect(put.throttled - reqBefore.put.throttled).toBe(puts.throttled);
    expect(get.requests - reqBefore.get.requests).toBe(ids.length + missing + 1);
    expect(get.histogram - reqBefore.get.histogram).toBe(ids.length + missing + 1);
    expect(get.notFound - reqBefore.get.notFound).toBe(1);
    // The histogram's buckets span sub-millisecond to seconds, and every request lands in one.
    const les = samples(after, 'keyslice_request_duration_seconds_bucket').filter((s) => s.labels.op === 'GetItem').map((s) => s.labels.le);
    expect(les).toEqual([...REQUEST_SECONDS_BUCKETS.map(String), '+Inf']);
    expect(total(after, 'keyslice_request_duration_seconds_sum', { op: 'GetItem' })).toBeGreaterThan(0);
  });

  it('count the puts refused at a slice\'s capacity as throttled, and only those', async () => {
    const T = 'throttled';
    await c.client.createTable(T, { name: 'id', type: 'string' });
    const before = await scrape(c.cluster.url);
    const reqBefore = requests(before, 'PutItem');
    const attempts = 5 * WRITES_PER_SECOND;
    const hot = await outcomes(Array.from({ length: attempts }, () => c.client.putItem(T, { id: 'hot', v: 'same size each time' })));
    expect(hot.other).toBe(0);
    expect(hot.throttled).toBeGreaterThan(0);
    expect(hot.ok).toBeGreaterThan(0);

    const after = await scrape(c.cluster.url);
    const described = await c.client.describeSlices(T);
    const itemBytes = sum(described, (s) => s.bytes); // the one item
    expect(tableCounters(after, T)).toEqual({ reads: 0, writes: hot.ok, read_bytes: 0, write_bytes: hot.ok * itemBytes, throttled: hot.throttled, duplicate_writes: 0 });
    const hotSlice = described.slices.find((s) => s.items === 1)!;
    expect(hotSlice).toMatchObject({ writes: hot.ok, throttled: hot.throttled, writeBytes: hot.ok * itemBytes });
    expect(total(after, 'keyslice_slice_throttled_total', { table: T, slice: String(hotSlice.slice) })).toBe(hot.throttled);
    const put = requests(after, 'PutItem');
    expect(put.requests - reqBefore.requests).toBe(attempts);
    expect(put.histogram - reqBefore.histogram).toBe(attempts);
    expect(put.throttled - reqBefore.throttled).toBe(hot.throttled);
  });

  it('read the same by many viewers at once, and never go back', async () => {
    const first = await scrape(c.cluster.url);
    const [scrapes, described] = await Promise.all([
      Promise.all(Array.from({ length: 6 }, () => scrape(c.cluster.url))),
      Promise.all(Array.from({ length: 6 }, () => c.client.describeSlices('counted'))),
    ]);
    for (const m of scrapes) {
      for (const table of ['counted', 'throttled']) expect(tableCounters(m, table)).toEqual(tableCounters(first, table));
    }
    for (const d of described) expect(d.totals).toEqual(described[0].totals);
    expect(described[0].totals.reads).toBe(tableCounters(first, 'counted').reads);
    // The scrapes themselves are requests of no operation: the operation counters stand still.
    expect(requests(scrapes[5], 'PutItem')).toEqual(requests(first, 'PutItem'));
  });

  it('serves the process metrics of the coordinator', async () => {
    const m = await scrape(c.cluster.url);
    expect(total(m, 'keyslice_process_cpu_user_seconds_total', { process: 'coordinator' })).toBeGreaterThan(0);
    expect(total(m, 'keyslice_process_resident_memory_bytes', { process: 'coordinator' })).toBeGreaterThan(0);
    expect(samples(m, 'keyslice_nodejs_eventloop_lag_seconds').map((s) => s.labels.process)).toEqual(['coordinator']);
    expect(m.get('keyslice_nodejs_gc_duration_seconds')?.type).toBe('histogram');
    expect(m.get('keyslice_requests_total')?.type).toBe('counter');
    expect(m.get('keyslice_request_duration_seconds')?.type).toBe('histogram');
    expect(m.get('keyslice_slice_writes_total')?.type).toBe('counter');
    expect(total(m, 'keyslice_process_metrics_complete')).toBe(1);
    expect(total(m, 'keyslice_metrics_complete')).toBe(1);
  });
});

describe('routers sharing the client port', () => {
  let cluster: LocalCluster;
  let dataDir: string;
  let clusterUrl = '';
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'keyslice-metrics-routers-'));
    cluster = await startLocalCluster({
      dataDir,
      nodes: 1,
      workers: 1,
      slices: 8,
      routers: 2,
      log: (line) => {
        const m = / cluster=(http:\/\/\S+)/.exec(line);
        if (m !== null) clusterUrl = m[1];
      },
    });
  });
  afterAll(async () => {
    await cluster?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('every scrape, whichever router answers, shows every process\'s series', async () => {
    expect(clusterUrl).toMatch(/^http:\/\//);
    const client = await KeysliceClient.connect(cluster.url);
    try {
      await client.createTable('routed', { name: 'id', type: 'string' });
      const viaWs = 30;
      for (let i = 0; i < viaWs; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => client.putItem('routed', { id: `ws-${i + j}` })));
      // HTTP requests on fresh connections: the kernel spreads them over the routers.
      const viaHttp = 20;
      for (let i = 0; i < viaHttp; i++) {
        const res = await fetch(`${cluster.url}/api/PutItem`, { method: 'POST', headers: { connection: 'close' }, body: JSON.stringify({ table: 'routed', item: { id: `http-${i}` } }), signal: AbortSignal.timeout(15_000) });
        expect(res.status).toBe(200);
      }
      const scrapes = [];
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${cluster.url}/metrics`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(15_000) });
        scrapes.push(parseExposition(await res.text()));
      }
      scrapes.push(await scrape(clusterUrl));
      for (const m of scrapes) {
        const processes = new Set(samples(m, 'keyslice_process_cpu_user_seconds_total').map((s) => s.labels.process));
        expect(processes).toEqual(new Set(['coordinator', 'router-1', 'router-2']));
        expect(total(m, 'keyslice_requests_total', { op: 'PutItem' })).toBe(viaWs + viaHttp);
        expect(total(m, 'keyslice_request_duration_seconds_count', { op: 'PutItem' })).toBe(viaWs + viaHttp);
        expect(total(m, 'keyslice_requests_total', { op: 'PutItem', process: 'coordinator' })).toBe(0);
        expect(total(m, 'keyslice_process_metrics_complete')).toBe(1);
        expect(total(m, 'keyslice_slice_writes_total', { table: 'routed' })).toBe(viaWs + viaHttp);
      }
    } finally {
      await client.close();
    }
  });
});

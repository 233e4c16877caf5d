// This process's own series for /metrics (docs/metrics.md), with prom-client, the
// well-kept Prometheus client for Node: requests, errors by code and latency per
// operation of the request path, and Node's process metrics (CPU, memory,
// event-loop lag, GC), all prefixed keyslice_ and labelled process="...".
//
// One registry per process, never prom-client's global one, so that nothing
// another module registers there leaks into our exposition.
//
// Routers started by the coordinator (node:cluster workers) share the client
// port, so a scrape reaches whichever router the kernel picks. To keep every
// counter steady however the scrape lands, the coordinator (the cluster
// primary) gathers each router's registry over the cluster's IPC channel and
// merges it with its own (prom-client's AggregatorRegistry.aggregate); every
// process keeps its own series by its process label, and a router asked for
// /metrics asks the coordinator for that merge. Whatever port is scraped, the
// answer is the same set of series.
import cluster from 'node:cluster';
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { OPERATION_NAMES, type OperationName } from '../../shared/api.js';
import { assert, type ErrorCode } from '../../shared/errors.js';
import { LOAD_REPORT_TIMEOUT_MS, REQUEST_SECONDS_BUCKETS } from '../../shared/limits.js';
import { sparseLog } from '../../shared/sparse-log.js';
import { ELECTION_REASONS, type ElectionReason } from '../metadata/failover.js';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** What answered an eventually consistent read (keyslice_eventual_reads_total's label). */
export const EVENTUAL_ANSWERS = ['follower', 'leader', 'leader_after_follower'] as const;
export type EventualAnswer = (typeof EVENTUAL_ANSWERS)[number];

/** What the items of a DynamoDB Query or Scan page were written from (keyslice_dynamodb_pages_total's label): the
 * slice workers' msgpack, written as JSON undecoded (reads.ts passesThrough), items decoded to objects, or none (an
 * empty page answered without a read of the nodes: reads.ts emptyPage). */
export const DYNAMODB_PAGE_SOURCES = ['msgpack', 'objects', 'none'] as const;
export type DynamoDbPageSource = (typeof DYNAMODB_PAGE_SOURCES)[number];

/** IPC messages between the coordinator and its routers (node:cluster). */
const ASK_ROUTER = 'keyslice:router-metrics?';
const ROUTER_ANSWER = 'keyslice:router-metrics';
const ASK_ALL = 'keyslice:all-metrics?';
const ALL_ANSWER = 'keyslice:all-metrics';

export class ProcessMetrics {
  readonly registry = new Registry();
  /** Requests, errors and latency per operation, counted in plain numbers (OpCounts) and handed to prom-client at
   * a scrape: its inc and observe hash their labels on every call, even on a child looked up once (about 7% of a
   * router's busy time at 256 requests in flight, bench/PROFILE.md). */
  private readonly perOp = new Map<OperationName, OpCounts>();
  /** Errors by operation and code, in the order each first happened (the order prom-client kept them in). */
  private readonly errorCounts = new Map<string, { labels: { op: OperationName; code: ErrorCode }; n: number }>();
  /** keyslice_eventual_reads_total per answer, counted the same way. */
  private readonly eventual: LabelCounts<EventualAnswer>;
  /** keyslice_dynamodb_pages_total per source, counted the same way. */
  private readonly dynamodbPages: LabelCounts<DynamoDbPageSource>;
  private readonly resent: Counter;

  /** Says why writes were sent again, a line a second at most (writeResent). */
  private readonly logResent: (line: string) => void;

  /** `process`: "coordinator", or "router-<id>" (the label that keeps each process's series apart); `log`: the
   * process's log. */
  constructor(
    readonly process: string,
    log: (line: string) => void = console.error,
  ) {
    this.logResent = sparseLog('writes sent again', log);
    this.registry.setDefaultLabels({ process });
    collectDefaultMetrics({ register: this.registry, prefix: 'keyslice_' });
    const registers = [this.registry];
    // Every operation's series exist from the start: a scraper sees 0, not nothing.
    for (const op of OPERATION_NAMES) this.perOp.set(op, new OpCounts(op));
    const perOp = this.perOp;
    const errorCounts = this.errorCounts;
    new Counter({
      name: 'keyslice_requests_total',
      help: 'operations the request path of this process ran, by operation',
      labelNames: ['op'],
      registers,
      collect() {
        this.reset();
        for (const c of perOp.values()) this.inc(c.labels, c.requests);
      },
    });
    new Counter({
      name: 'keyslice_request_errors_total',
      help: 'operations that ended in an error, by operation and error code',
      labelNames: ['op', 'code'],
      registers,
      collect() {
        this.reset();
        for (const e of errorCounts.values()) this.inc(e.labels, e.n);
      },
    });
    // prom-client's Registry reads a metric through its name, help, type, aggregator, get() and getForPromString()
    // (registry.js); its types name only its own classes, hence the cast.
    this.registry.registerMetric(new RequestSeconds(perOp) as unknown as Histogram<'op'>);
    this.eventual = new LabelCounts(registers, 'keyslice_eventual_reads_total', 'eventually consistent reads (consistentRead false) this process routed, by what answered: a follower; the leader (its turn, or no follower connected); the leader after a follower could not answer (not caught up, at another epoch, unreachable, or silent for REPLICA_READ_TIMEOUT_MS)', 'answered', EVENTUAL_ANSWERS);
    this.dynamodbPages = new LabelCounts(registers, 'keyslice_dynamodb_pages_total', 'Query and Scan pages the DynamoDB endpoint of this process answered, by what their items were written from: msgpack (the slice workers\' packed items written as JSON undecoded: no filter, projection, Select COUNT or ReturnConsumedCapacity), objects (decoded items) or none (an empty page answered without a read of the nodes: an empty segment of a parallel Scan, a Query continued past a hash-key-only table\'s one item)', 'written', DYNAMODB_PAGE_SOURCES);
    this.resent = new Counter({
      name: 'keyslice_writes_resent_total',
      help: 'writes this process sent again after an unknown outcome on a replicated slice (their leader was deposed, lost or silent with them in flight); each is applied once (request ids)',
      registers,
    });
    this.resent.inc(0);
  }

  /** Starts timing one operation; the returned function ends it (with its error code, if it failed). */
  start(op: OperationName): (error: ErrorCode | null) => void {
    const started = performance.now();
    const counts = this.perOp.get(op);
    assert(counts !== undefined, `${op} is an operation`);
    return (error) => {
      counts.observe((performance.now() - started) / 1000);
      if (error !== null) this.error(op, error);
    };
  }

  private error(op: OperationName, code: ErrorCode): void {
    const key = `${op} ${code}`;
    const e = this.errorCounts.get(key);
    if (e === undefined) this.errorCounts.set(key, { labels: { op, code }, n: 1 });
    else e.n++;
  }

  /** The coordinator's leader elections by why they started (ReplicaLeaders.electionsBy), read at each scrape; in its
   * registry, so that a router's /metrics (the coordinator's merge) has them too. Every reason from the start at 0. */
  countElections(electionsBy: Readonly<Record<ElectionReason, number>>): void {
    new Counter({
      name: 'keyslice_elections_total',
      help: 'leader elections of replicated slices the coordinator started, by why (docs/replication.md): a handover, a replica-set change its leader could not lead on, a leader lost, an election started again',
      labelNames: ['reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const reason of Object.keys(ELECTION_REASONS) as ElectionReason[]) this.inc({ reason }, electionsBy[reason]);
      },
    });
  }

  /** Counts one write of `slice` sent again after an unknown outcome (Router.send), and logs why (`why`: the error of
   * the copy whose outcome is unknown), so that a count that grows where it should not says which path it came by. */
  writeResent(slice: number, why: string): void {
    this.resent.inc();
    this.logResent(`a write on slice ${slice} was sent again after an unknown outcome: ${why}`);
  }

  /** Counts one eventually consistent read by what answered it (Router.read). */
  eventualRead(answered: EventualAnswer): void {
    this.eventual.count(answered);
  }

  /** Counts one Query or Scan page the DynamoDB endpoint answered, by what its items were written from (reads.ts). */
  dynamodbPage(written: DynamoDbPageSource): void {
    this.dynamodbPages.count(written);
  }

  /** This process's series, when it is the only one (a coordinator without routers, a router started by itself). */
  async text(): Promise<string> {
    return (await this.registry.metrics()) + completeLine(true);
  }

  /** In a router started by the coordinator: answers the coordinator's requests for this registry. */
  serveCoordinator(): void {
    assert(cluster.isWorker, 'only a router started by the coordinator serves its registry over IPC');
    process.on('message', (m: { type?: string; id?: number }) => {
      if (m?.type !== ASK_ROUTER) return;
      this.registry.getMetricsAsJSON().then((metrics) => process.send?.({ type: ROUTER_ANSWER, id: m.id, metrics }));
    });
  }

  /** In a router started by the coordinator: every process's series, from the coordinator; this
   * router's own, marked by keyslice_process_metrics_complete 0, if it does not answer in time. */
  async fromCoordinator(): Promise<string> {
    assert(cluster.isWorker, 'only a router started by the coordinator asks it for every process\'s metrics');
    const id = nextId++;
    const answer = new Promise<string | null>((resolve) => {
      const timer = setTimeout(() => done(null), 2 * LOAD_REPORT_TIMEOUT_MS);
      const onMessage = (m: { type?: string; id?: number; text?: string }) => {
        if (m?.type === ALL_ANSWER && m.id === id) done(m.text ?? null);
      };
      const done = (text: string | null) => {
        clearTimeout(timer);
        process.off('message', onMessage);
        resolve(text);
      };
      process.on('message', onMessage);
      process.send?.({ type: ASK_ALL, id });
    });
    return (await answer) ?? (await this.registry.metrics()) + completeLine(false);
  }

  /** In the coordinator with routers: answers routers that ask for every process's series. */
  serveRouters(): void {
    assert(cluster.isPrimary, 'the coordinator serves the merged metrics to its routers');
    cluster.on('message', (worker, m: { type?: string; id?: number }) => {
      if (m?.type !== ASK_ALL) return;
      this.allProcesses().then((text) => worker.isConnected() && worker.send({ type: ALL_ANSWER, id: m.id, text }));
    });
    cluster.on('message', (worker, m: { type?: string; id?: number; metrics?: MetricsJson }) => {
      if (m?.type !== ROUTER_ANSWER) return;
      pending.get(m.id!)?.(worker.id, m.metrics ?? []);
    });
  }

  /** In the coordinator: its own series and those of every router that answers within
   * LOAD_REPORT_TIMEOUT_MS, merged; keyslice_process_metrics_complete says whether all did. */
  async allProcesses(): Promise<string> {
    const routers = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined && w.isConnected());
    const id = nextId++;
    const answers = new Map<number, MetricsJson>();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(finish, LOAD_REPORT_TIMEOUT_MS);
      function finish() {
        clearTimeout(timer);
        pending.delete(id);
        resolve();
      }
      pending.set(id, (worker, metrics) => {
        answers.set(worker, metrics);
        if (answers.size === routers.length) finish();
      });
      for (const w of routers) w!.send({ type: ASK_ROUTER, id });
      if (routers.length === 0) finish();
    });
    const all = [await this.registry.getMetricsAsJSON(), ...answers.values()];
    return (await merge(all).metrics()) + completeLine(answers.size === routers.length);
  }
}

/** A counter with one label, counted in plain numbers as OpCounts are and handed to prom-client at a scrape; every
 * value of the label from the start at 0. */
class LabelCounts<V extends string> {
  private readonly counts: Map<V, { labels: Record<string, V>; n: number }>;

  constructor(registers: Registry[], name: string, help: string, label: string, values: readonly V[]) {
    const counts = new Map(values.map((v) => [v, { labels: { [label]: v }, n: 0 }]));
    this.counts = counts;
    new Counter({
      name,
      help,
      labelNames: [label],
      registers,
      collect() {
        this.reset();
        for (const c of counts.values()) this.inc(c.labels, c.n);
      },
    });
  }

  count(value: V): void {
    this.counts.get(value)!.n++;
  }
}

/** One operation's requests and their latency (keyslice_requests_total, keyslice_request_duration_seconds). */
class OpCounts {
  requests = 0;
  /** Requests by the first bucket of REQUEST_SECONDS_BUCKETS they fit in (`seconds <= bound`, as prom-client
   * sorts them), not cumulative; one slower than the last bound is in `requests` only (the +Inf bucket). */
  readonly buckets: number[] = REQUEST_SECONDS_BUCKETS.map(() => 0);
  /** Seconds over all requests. */
  seconds = 0;
  /** The label set of this operation's series, one object (prom-client caches the text of a shared one). */
  readonly labels: { op: OperationName };

  constructor(op: OperationName) {
    this.labels = { op };
  }

  observe(seconds: number): void {
    this.requests++;
    this.seconds += seconds;
    for (let i = 0; i < REQUEST_SECONDS_BUCKETS.length; i++) {
      if (seconds <= REQUEST_SECONDS_BUCKETS[i]) {
        this.buckets[i]++;
        return;
      }
    }
  }
}

type HistogramValue = { labels: Record<string, string | number>; sharedLabels?: { op: OperationName }; value: number; metricName: string };

/** keyslice_request_duration_seconds from the OpCounts: the values prom-client's Histogram gives for the same
 * requests, in its two forms: get() (every label in `labels`: what a merge of routers' registries reads) and
 * getForPromString() (the op label apart, in `sharedLabels`: what one registry's text is written from). */
class RequestSeconds {
  readonly name = 'keyslice_request_duration_seconds';
  readonly help = 'time from an operation\'s start in this process to its answer, by operation';
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(private readonly perOp: ReadonlyMap<OperationName, OpCounts>) {}

  async get() {
    return this.metric(true);
  }

  async getForPromString() {
    return this.metric(false);
  }

  /** Registry.resetMetrics: every count back to 0. */
  reset(): void {
    for (const c of this.perOp.values()) {
      c.requests = 0;
      c.seconds = 0;
      c.buckets.fill(0);
    }
  }

  private metric(joined: boolean) {
    const values: HistogramValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const c of this.perOp.values()) {
      const withOp = (labels: Record<string, string | number>): Pick<HistogramValue, 'labels' | 'sharedLabels'> =>
        joined ? { labels: { ...labels, op: c.labels.op } } : { labels, sharedLabels: c.labels };
      let cumulative = 0;
      REQUEST_SECONDS_BUCKETS.forEach((le, i) => {
        cumulative += c.buckets[i];
        values.push({ ...withOp({ le }), value: cumulative, metricName: bucketName });
      });
      values.push({ ...withOp({ le: '+Inf' }), value: c.requests, metricName: bucketName });
      values.push({ ...withOp({}), value: c.seconds, metricName: `${this.name}_sum` });
      values.push({ ...withOp({}), value: c.requests, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

let nextId = 0;
/** Requests of allProcesses() waiting for routers' registries, by id. */
const pending = new Map<number, (worker: number, metrics: MetricsJson) => void>();

/** One registry with every process's series. Each process's series carry its own process label,
 * so no two are summed; prom-client's per-metric aggregators (an average, the first value) are
 * set aside for a sum, which leaves each series as it is and drops none (its "omit" would drop
 * the process start times). */
function merge(registries: MetricsJson[]): Registry {
  return AggregatorRegistry.aggregate(registries.map((metrics) => metrics.map((m) => ({ ...m, aggregator: 'sum' as const }))));
}

function completeLine(complete: boolean): string {
  return [
    '# HELP keyslice_process_metrics_complete 1 if every router process (and the coordinator) reported its request and process series; 0: some are missing',
    '# TYPE keyslice_process_metrics_complete gauge',
    `keyslice_process_metrics_complete ${complete ? 1 : 0}`,
    '',
  ].join('\n');
}

// The studio's live feed. Once a second (while someone watches) the coordinator
// takes one sample of the cluster (nodes, moves) and of every table's load
// (DescribeSlices data, with the findings judged from it); every viewer is sent
// that same sample over Server-Sent Events, so ten viewers cost one sample, not
// ten. A sample holds only the slices with items or load; the summary of all
// tables is serialized once per sample, a table's detail once per sample and
// table that someone watches. The latest sample is kept whole; older ones only
// as the heat map's history (each table's id, ops and slice figures), bounded
// in seconds and in slice figures.
import { performance } from 'node:perf_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ClusterStatus, TableDescription, TableLoad } from '../../shared/api.js';
import { KeysliceError } from '../../shared/errors.js';
import {
  LOAD_REPORT_TIMEOUT_MS,
  STUDIO_HISTORY_CELLS_MAX,
  STUDIO_HISTORY_SECONDS,
  STUDIO_LINGER_MS,
  STUDIO_SAMPLE_MS,
  STUDIO_TRAIL_SAMPLES_MAX,
  STUDIO_VIEWER_BUFFER_BYTES,
  STUDIO_VIEWERS_MAX,
} from '../../shared/limits.js';
import { describe, type Catalog } from '../metadata/catalog.js';
import { gatherTableLoad } from '../metadata/load-report.js';
import type { Membership } from '../metadata/membership.js';
import { describePart } from '../router/primary-key.js';
import { judgeTable, JUDGED_OPS_PER_SECOND_MIN, type Finding, type TopKeySample } from './findings.js';

/** Figures per slice in a sample's cells: slice, reads/s, writes/s, bytes, items. */
const CELL = 5;

interface TableSample {
  id: number;
  description: TableDescription;
  /** null when no node answered; `partial` when some did not. */
  load: TableLoad | null;
  partial: boolean;
  error: string;
  findings: Finding[];
  /** CELL figures per slice with items or load, by slice. */
  cells: Float64Array;
  ops: number;
}

interface Sample {
  seq: number;
  at: number;
  cluster: ClusterStatus;
  tables: Map<string, TableSample>;
  cellCount: number;
  /** The part every viewer gets, serialized once. */
  summaryJson: string;
  /** Per watched table, serialized at most once. */
  detailJson: Map<string, string>;
}

/** What the heat map's history keeps of one table in a sample: the full sample
 * (load, findings, JSON) is kept only while it is the latest. */
interface TableCells {
  id: number;
  ops: number;
  cells: Float64Array;
}

interface HistorySample {
  at: number;
  tables: Map<string, TableCells>;
  cellCount: number;
}

interface Viewer {
  res: ServerResponse;
  table: string;
}

export class StudioFeed {
  /** Samples taken since the coordinator started: a viewer sees the same numbers as every other. */
  samplesTaken = 0;
  private readonly viewers = new Set<Viewer>();
  private history: HistorySample[] = [];
  private historyCells = 0;
  /** The last sample in full, for a viewer that joins between samples. */
  private latest: Sample | undefined;
  private readonly trails = new Map<number, TopKeySample[]>();
  private timer: NodeJS.Timeout | undefined;
  private sampling = false;
  private lastViewerAt = 0;

  constructor(
    private readonly catalog: Catalog,
    private readonly cluster: Membership,
  ) {}

  /** GET /studio/stream?table=<name>: Server-Sent Events, `hello` (the table's history) then `sample` once a second. */
  open(req: IncomingMessage, res: ServerResponse, table: string | null): void {
    if (this.viewers.size >= STUDIO_VIEWERS_MAX) {
      throw new KeysliceError('Unavailable', `the studio has ${STUDIO_VIEWERS_MAX} viewers already; close one and retry`);
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
    });
    req.socket.setNoDelay(true);
    const latest = this.latest;
    const viewer: Viewer = { res, table: table ?? (latest === undefined ? '' : busiestTable(latest)) };
    this.viewers.add(viewer);
    this.lastViewerAt = performance.now();
    res.on('close', () => {
      this.viewers.delete(viewer);
      this.lastViewerAt = performance.now();
    });
    res.write(`retry: 2000\nevent: hello\ndata: ${this.helloJson(viewer.table)}\n\n`);
    if (latest !== undefined) this.send(viewer, latest);
    this.start();
  }

  private start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), STUDIO_SAMPLE_MS);
    this.timer.unref();
    void this.tick();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    for (const v of this.viewers) v.res.end();
  }

  /** One sample for everyone; a tick that finds the last one still running is skipped, so work stays bounded. */
  private async tick(): Promise<void> {
    if (this.viewers.size === 0 && performance.now() - this.lastViewerAt > STUDIO_LINGER_MS) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    if (this.sampling) return;
    this.sampling = true;
    try {
      const sample = await this.takeSample();
      this.remember(sample);
      for (const v of this.viewers) this.send(v, sample);
    } catch (err) {
      console.error(`keyslice coordinator: studio sample failed: ${(err as Error).stack}`);
    } finally {
      this.sampling = false;
    }
  }

  private async takeSample(): Promise<Sample> {
    const at = Date.now(); // the sample's time, sent and shown: the wall clock
    const took = performance.now(); // how long it took: the monotonic clock
    const cluster = await this.cluster.status(false);
    const present = this.cluster.presentLinks();
    const ready = present.filter((l) => l.state === 'ready');
    const workerThreads = ready.reduce((a, l) => a + l.workerCount, 0);
    const names = this.catalog.names();
    const tables = new Map<string, TableSample>();
    await Promise.all(
      names.map(async (name) => {
        const table = this.catalog.get(name);
        const description = describe(table);
        let load: TableLoad | null = null;
        let partial = false;
        let error = '';
        if (present.length === 0) error = 'no slice node has joined yet';
        else {
          // Each node gets LOAD_REPORT_TIMEOUT_MS, as for /metrics: a node that hangs costs
          // every sample that long, not its request timeout, and its share is left out.
          const gathered = await gatherTableLoad(table, this.cluster, LOAD_REPORT_TIMEOUT_MS, describePart);
          partial = gathered.failures.length > 0;
          if (gathered.failures.length < present.length) load = gathered.load;
          else error = ready.length === 0 ? 'no slice node is reachable' : gathered.failures[0].error.message;
        }
        tables.set(name, this.judged(table.id, description, load, partial, error, workerThreads, at));
      }),
    );
    for (const id of [...this.trails.keys()]) if (![...tables.values()].some((t) => t.id === id)) this.trails.delete(id);
    // Each node's load is the sum over the tables (status(false) leaves it at zero).
    for (const t of tables.values()) {
      for (const n of t.load?.nodes ?? []) {
        const r = cluster.nodes.find((x) => x.node === n.node);
        if (r === undefined) continue;
        r.items += n.items;
        r.bytes += n.bytes;
        r.readsPerSecond += n.readsPerSecond;
        r.writesPerSecond += n.writesPerSecond;
      }
    }
    cluster.loadComplete = ready.length === present.length && [...tables.values()].every((t) => !t.partial && t.error === '');
    let cellCount = 0;
    for (const t of tables.values()) cellCount += t.cells.length / CELL;
    const seq = ++this.samplesTaken;
    const summary = {
      seq,
      at,
      /** How long this sample took the coordinator (all tables, all nodes). */
      tookMs: Math.round(performance.now() - took),
      sampleMs: STUDIO_SAMPLE_MS,
      cluster,
      tables: names.map((n) => summaryOf(tables.get(n)!)),
    };
    return { seq, at, cluster, tables, cellCount, summaryJson: JSON.stringify(summary), detailJson: new Map() };
  }

  private judged(id: number, description: TableDescription, load: TableLoad | null, partial: boolean, error: string, workerThreads: number, at: number): TableSample {
    if (load === null) return { id, description, load, partial, error, findings: [], cells: new Float64Array(0), ops: 0 };
    let trail = this.trails.get(id);
    if (trail === undefined) this.trails.set(id, (trail = []));
    const findings = judgeTable({ table: description, load, workerThreads, trail });
    const cells = new Float64Array(load.slices.length * CELL);
    let ops = 0;
    load.slices.forEach((s, i) => {
      cells.set([s.slice, s.readsPerSecond, s.writesPerSecond, s.bytes, s.items], i * CELL);
      ops += s.readsPerSecond + s.writesPerSecond;
    });
    const top = load.hotKeys[0];
    if (top !== undefined && ops >= JUDGED_OPS_PER_SECOND_MIN) {
      trail.push({ at, key: top.key, share: Math.min(1, top.opsPerSecond / ops) });
      if (trail.length > STUDIO_TRAIL_SAMPLES_MAX) trail.shift();
    }
    return { id, description, load, partial, error, findings, cells, ops };
  }

  /** Keeps the sample for the heat map, dropping the oldest past the time or size bound. */
  private remember(sample: Sample): void {
    this.latest = sample;
    const tables = new Map<string, TableCells>();
    for (const [name, t] of sample.tables) tables.set(name, { id: t.id, ops: t.ops, cells: t.cells });
    this.history.push({ at: sample.at, tables, cellCount: sample.cellCount });
    this.historyCells += sample.cellCount;
    const oldest = sample.at - STUDIO_HISTORY_SECONDS * 1000;
    while (this.history.length > 1 && (this.history[0].at < oldest || this.historyCells > STUDIO_HISTORY_CELLS_MAX)) {
      this.historyCells -= this.history.shift()!.cellCount;
    }
  }

  private send(viewer: Viewer, sample: Sample): void {
    const { res } = viewer;
    if (res.writableEnded || res.destroyed) return;
    // A viewer that does not keep up misses samples instead of making the coordinator queue them.
    if (res.writableLength > STUDIO_VIEWER_BUFFER_BYTES) return;
    // A viewer that named no table watches the busiest one (chosen once, so that its heat map stays one table's).
    if (viewer.table === '' && sample.tables.size > 0) viewer.table = busiestTable(sample);
    let detail = sample.detailJson.get(viewer.table);
    if (detail === undefined) {
      const t = sample.tables.get(viewer.table);
      detail = t === undefined ? 'null' : JSON.stringify(detailOf(viewer.table, t, sample.cluster));
      sample.detailJson.set(viewer.table, detail);
    }
    res.write(`event: sample\ndata: {"summary":${sample.summaryJson},"detail":${detail}}\n\n`);
  }

  /** The table's heat-map history: [at, [slice, reads/s, writes/s, bytes, ...]] per kept sample. */
  private helloJson(table: string): string {
    const columns: string[] = [];
    let id: number | undefined;
    for (let i = this.history.length - 1; i >= 0; i--) {
      const t = this.history[i].tables.get(table);
      if (t === undefined || (id !== undefined && t.id !== id)) break; // a table deleted and created again starts afresh
      id = t.id;
      const out: number[] = [];
      for (let c = 0; c < t.cells.length; c += CELL) out.push(t.cells[c], round(t.cells[c + 1]), round(t.cells[c + 2]), t.cells[c + 3]);
      columns.push(`[${this.history[i].at},[${out.join(',')}]]`);
    }
    columns.reverse();
    return `{"table":${JSON.stringify(table)},"sampleMs":${STUDIO_SAMPLE_MS},"historySeconds":${STUDIO_HISTORY_SECONDS},"history":[${columns.join(',')}]}`;
  }
}

function summaryOf(t: TableSample) {
  const load = t.load;
  return {
    name: t.description.name,
    shardingKey: t.description.shardingKey,
    sortingKey: t.description.sortingKey,
    evenDistribution: t.description.evenDistribution,
    items: load?.slices.reduce((a, s) => a + s.items, 0) ?? 0,
    bytes: load?.slices.reduce((a, s) => a + s.bytes, 0) ?? 0,
    readsPerSecond: round(load?.slices.reduce((a, s) => a + s.readsPerSecond, 0) ?? 0),
    writesPerSecond: round(load?.slices.reduce((a, s) => a + s.writesPerSecond, 0) ?? 0),
    slicesWithItems: load?.slices.filter((s) => s.items > 0).length ?? 0,
    maxOverMean: load?.maxOverMean ?? null,
    findings: t.findings.map((f) => f.pattern),
    partial: t.partial,
    error: t.error,
  };
}

/** One table in full: every slice with items or load as [slice, node index, items, bytes, reads/s, writes/s]. */
function detailOf(name: string, t: TableSample, cluster: ClusterStatus) {
  const nodeIndex = new Map(cluster.nodes.map((n, i) => [n.node, i]));
  const load = t.load;
  return {
    name,
    windowSeconds: load?.windowSeconds ?? 0,
    sliceCount: load?.sliceCount ?? cluster.sliceCount,
    slices: (load?.slices ?? []).map((s) => [s.slice, nodeIndex.get(s.node) ?? -1, s.items, s.bytes, round(s.readsPerSecond), round(s.writesPerSecond)]),
    hotKeys: (load?.hotKeys ?? []).map((k) => ({ ...k, opsPerSecond: round(k.opsPerSecond) })),
    maxOverMean: load?.maxOverMean ?? null,
    findings: t.findings,
    error: t.error,
    partial: t.partial,
  };
}

function busiestTable(sample: Sample): string {
  let best = '';
  let bestOps = -1;
  for (const [name, t] of sample.tables) if (t.ops > bestOps) [best, bestOps] = [name, t.ops];
  return best;
}

const round = (n: number) => Math.round(n * 10) / 10;

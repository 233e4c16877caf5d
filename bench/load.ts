// The load generator: a closed loop of --concurrency requests in flight over
// --connections WebSocket clients, against a running cluster (--url) or a local
// one it starts and stops itself. Workloads: put, get, range (see bench/README.md).
// Every loop is bounded by an op count and a deadline; latencies are measured
// per op with process.hrtime.bigint() and reported as p50/p99/max.
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeysliceClient } from '../coordinator/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { BATCH_WRITE_ITEMS_MAX, DURABILITY_DEFAULT, DURABILITY_MODES, ITEM_BYTES_MAX, PAGE_BYTES_MAX, PAGE_ITEMS_MAX, type DurabilityMode } from '../shared/limits.js';
import type { Item } from '../shared/values.js';

// ---- limits of the generator itself -----------------------------------------

const LOCAL_NODES = 2;
const LOCAL_WORKERS = 2;
/** A request with no answer after this long counts as an Unavailable error (the client's own timeout). */
const REQUEST_TIMEOUT_MS = 10_000;
/** get without a prior put preloads one item per key, at most this many. */
const GET_PRELOAD_ITEMS_MAX = 200_000;
/** range preloads devices of --range-items items each, at most this many items in all. */
const RANGE_PRELOAD_ITEMS_MAX = 100_000;
/** BatchWrite requests in flight while preloading. */
const PRELOAD_IN_FLIGHT = 16;
const PRELOAD_TIMEOUT_S = 300;
const PRELOAD_ATTEMPTS = 3;

// ---- command line -----------------------------------------------------------

type Workload = 'put' | 'get' | 'range';
const WORKLOADS: readonly Workload[] = ['put', 'get', 'range'];

interface Config {
  url: string | null;
  workloads: Workload[];
  connections: number;
  concurrency: number;
  ops: number;
  durationS: number;
  keys: number;
  itemBytes: number;
  rangeItems: number;
  json: boolean;
  keepTable: boolean;
  durability: DurabilityMode;
}

const FLAGS: { flag: string; value: string; help: string }[] = [
  { flag: 'url', value: 'http://host:port', help: 'a running cluster; without it a local cluster (2 slice nodes x 2 workers) is started for the run and stopped after it' },
  { flag: 'workload', value: 'list', help: 'put, get, range or a comma list run in order, e.g. put,get,range (default put,get,range)' },
  { flag: 'connections', value: 'N', help: 'client WebSocket connections (default 4)' },
  { flag: 'concurrency', value: 'N', help: 'requests in flight in total, spread over the connections (default 50)' },
  { flag: 'ops', value: 'N', help: 'at most this many ops per workload (default 100000)' },
  { flag: 'duration', value: 'S', help: 'at most this many seconds per workload, preloading not counted (default 20)' },
  { flag: 'keys', value: 'N', help: 'distinct sharding keys (devices) (default 10000)' },
  { flag: 'item-bytes', value: 'N', help: 'approximate item size: the payload is padded to it (default 200)' },
  { flag: 'range-items', value: 'N', help: 'items per range scan (GetItems limit) (default 100)' },
  { flag: 'durability', value: 'mode', help: `without --url: the slice nodes' durability, ${DURABILITY_MODES.join(' or ')} (default ${DURABILITY_DEFAULT})` },
  { flag: 'json', value: '', help: 'print the results as one JSON object on stdout (progress stays on stderr)' },
  { flag: 'keep-table', value: '', help: 'with --url: keep the bench table (by default it is deleted at the end)' },
  { flag: 'help', value: '', help: 'print this help' },
];

const USAGE = [
  'usage: node dist/bench/load.js [--url http://127.0.0.1:7100] [--workload put,get,range] [options]',
  '',
  'Runs each workload on a fresh table (sharding key "device", sorting key "seq") until',
  '--ops or --duration is reached, whichever comes first, and prints ops/s and latency.',
  '',
  ...FLAGS.map((f) => `  ${`--${f.flag}${f.value ? ' ' + f.value : ''}`.padEnd(26)} ${f.help}`),
].join('\n');

class UsageError extends Error {}

function parseCommandLine(argv: string[]): Config | 'help' {
  const raw = new Map<string, string>();
  const booleans = new Set(['json', 'keep-table', 'help']);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h') return 'help';
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (m === null) throw new UsageError(`unexpected argument "${arg}" (flags start with --; see --help)`);
    const name = m[1];
    if (!FLAGS.some((f) => f.flag === name)) throw new UsageError(`unknown flag --${name} (see --help)`);
    if (raw.has(name)) throw new UsageError(`--${name} is given twice`);
    if (booleans.has(name)) {
      if (m[2] !== undefined) throw new UsageError(`--${name} takes no value`);
      raw.set(name, 'true');
      continue;
    }
    const value = m[2] ?? argv[++i];
    if (value === undefined || (m[2] === undefined && value.startsWith('--'))) throw new UsageError(`--${name} needs a value (${FLAGS.find((f) => f.flag === name)!.value})`);
    raw.set(name, value);
  }
  if (raw.has('help')) return 'help';

  const int = (name: string, dflt: number, min: number, max: number): number => {
    const v = raw.get(name);
    if (v === undefined) return dflt;
    if (!/^[0-9]+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got "${v}"`);
    }
    return Number(v);
  };

  let url: string | null = null;
  const rawUrl = raw.get('url');
  if (rawUrl !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(rawUrl);
    } catch {
      throw new UsageError(`--url must be the cluster's address like http://127.0.0.1:7100, got "${rawUrl}"`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new UsageError(`--url must be the coordinator's http:// address (the client finds /ws itself), got "${rawUrl}"`);
    }
    if (parsed.pathname !== '/' || parsed.search !== '' || parsed.hash !== '') {
      throw new UsageError(`--url must be just scheme, host and port (http://host:port), got "${rawUrl}"`);
    }
    url = `${parsed.protocol}//${parsed.host}`;
  }

  const workloadText = raw.get('workload') ?? 'put,get,range';
  const workloads = workloadText.split(',').map((w) => w.trim());
  for (const w of workloads) {
    if (!(WORKLOADS as readonly string[]).includes(w)) throw new UsageError(`--workload: "${w}" is not one of ${WORKLOADS.join(', ')} (a comma list runs several in order)`);
  }
  if (new Set(workloads).size !== workloads.length) throw new UsageError(`--workload names a workload twice: "${workloadText}"`);

  const connections = int('connections', 4, 1, 1024);
  const concurrency = int('concurrency', 50, 1, 100_000);
  if (concurrency < connections) throw new UsageError(`--concurrency (${concurrency}) must be at least --connections (${connections}): each connection carries at least one request`);

  let durationS = 20;
  const rawDuration = raw.get('duration');
  if (rawDuration !== undefined) {
    durationS = Number(rawDuration);
    if (!/^[0-9]+(\.[0-9]+)?$/.test(rawDuration) || durationS <= 0 || durationS > 86_400) {
      throw new UsageError(`--duration must be a number of seconds above 0 and at most 86400, got "${rawDuration}"`);
    }
  }

  return {
    url,
    workloads: workloads as Workload[],
    connections,
    concurrency,
    ops: int('ops', 100_000, 1, 10_000_000),
    durationS,
    keys: int('keys', 10_000, 1, 10_000_000),
    itemBytes: int('item-bytes', 200, 1, ITEM_BYTES_MAX - 1024),
    rangeItems: int('range-items', 100, 1, PAGE_ITEMS_MAX),
    json: raw.has('json'),
    keepTable: raw.has('keep-table'),
    durability: durabilityArg(raw.get('durability'), url),
  };
}

function durabilityArg(v: string | undefined, url: string | null): DurabilityMode {
  if (v === undefined) return DURABILITY_DEFAULT;
  if (url !== null) throw new UsageError('--durability applies to the local cluster the bench starts; a running cluster (--url) has its own');
  if (!(DURABILITY_MODES as readonly string[]).includes(v)) throw new UsageError(`--durability must be one of ${DURABILITY_MODES.join(', ')}, got "${v}"`);
  return v as DurabilityMode;
}

// ---- the data set -------------------------------------------------------------

const deviceName = (d: number) => `dev-${d}`;
const rangeDeviceName = (d: number) => `range-${d}`;

/** Pads `payload` so that the item, counted as the store counts it (names + values), is about `itemBytes`. */
function makeItem(device: string, seq: number, padding: string): Item {
  return { device, seq, payload: padding };
}
function paddingFor(itemBytes: number, exampleDevice: string): string {
  const fixed = 'device'.length + exampleDevice.length + 'seq'.length + 8 + 'payload'.length;
  return 'x'.repeat(Math.max(0, itemBytes - fixed));
}

/** What this invocation has written, so that get and range read items that exist. */
class Written {
  /** put/get keys: device index and seq of each successful write. */
  device: Int32Array;
  seq: Int32Array;
  count = 0;
  /** Successful puts per device (for range over put's data). */
  perDevice: Int32Array;
  constructor(capacity: number, keys: number) {
    this.device = new Int32Array(capacity);
    this.seq = new Int32Array(capacity);
    this.perDevice = new Int32Array(keys);
  }
  add(d: number, s: number): void {
    if (this.count === this.device.length) {
      const grow = (a: Int32Array) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.device = grow(this.device);
      this.seq = grow(this.seq);
    }
    this.device[this.count] = d;
    this.seq[this.count] = s;
    this.count++;
    this.perDevice[d]++;
  }
}

// ---- running ops ------------------------------------------------------------

interface PreloadResult {
  reason: string;
  items: number;
  batches: number;
  seconds: number;
}

interface WorkloadResult {
  workload: Workload;
  preload: PreloadResult | null;
  stoppedBy: 'ops' | 'duration' | 'interrupt' | 'cluster-failure';
  /** Ops completed (answered or failed). */
  ops: number;
  ok: number;
  errors: Record<string, number>;
  seconds: number;
  /** Successful ops per second of wall time (start to the last answer). */
  opsPerSec: number;
  /** range only: items returned per second, and scans that returned fewer than --range-items. */
  items?: number;
  itemsPerSec?: number;
  shortScans?: number;
  /** Latency of successful ops, in ms. */
  latencyMs: { p50: number; p99: number; max: number; mean: number } | null;
  /** Ops completed in each whole second of the run (last partial second left out). */
  perSecond: number[];
}

let interrupted = false;
let clusterFailure: string | null = null;
const shouldStop = () => interrupted || clusterFailure !== null;

/** A closed loop: `concurrency` loops, each sending one op and awaiting it, until the op count or deadline. */
async function runLoad(
  workload: Workload,
  clients: KeysliceClient[],
  cfg: Config,
  op: (client: KeysliceClient, index: number) => Promise<number>,
  quiet: boolean,
): Promise<Omit<WorkloadResult, 'workload' | 'preload'>> {
  const latencies = new Float64Array(cfg.ops);
  let latencyCount = 0;
  let issued = 0;
  let completed = 0;
  let ok = 0;
  let items = 0;
  const errors: Record<string, number> = {};
  let errorCount = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(cfg.durationS * 1e9));
  let stoppedBy: WorkloadResult['stoppedBy'] = 'ops';

  const perSecond: number[] = [];
  let lastCompleted = 0;
  let ticks = 0;
  const ticker = setInterval(() => {
    ticks++;
    const delta = completed - lastCompleted;
    lastCompleted = completed;
    perSecond.push(delta);
    if (!quiet) {
      process.stderr.write(
        `[${workload}] ${String(ticks).padStart(3)}s  done ${completed.toLocaleString('en-US')}  last 1s ${delta.toLocaleString('en-US')} ops/s  errors ${errorCount}  in flight ${issued - completed}\n`,
      );
    }
  }, 1000);

  const loop = async (client: KeysliceClient) => {
    // Bounded by the op count (each turn claims one op) and by the deadline.
    while (issued < cfg.ops) {
      if (shouldStop()) return;
      if (process.hrtime.bigint() >= deadline) {
        stoppedBy = 'duration';
        return;
      }
      const index = issued++;
      const t0 = process.hrtime.bigint();
      try {
        const n = await op(client, index);
        const t1 = process.hrtime.bigint();
        latencies[latencyCount++] = Number(t1 - t0) / 1e6;
        ok++;
        items += n;
      } catch (err) {
        const code = err instanceof KeysliceError ? err.code : `ClientError(${err instanceof Error ? err.message : String(err)})`;
        errors[code] = (errors[code] ?? 0) + 1;
        errorCount++;
      }
      completed++;
    }
  };
  try {
    await Promise.all(Array.from({ length: cfg.concurrency }, (_, j) => loop(clients[j % clients.length])));
  } finally {
    clearInterval(ticker);
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (interrupted) stoppedBy = 'interrupt';
  else if (clusterFailure !== null) stoppedBy = 'cluster-failure';

  const sorted = latencies.subarray(0, latencyCount).sort();
  const pct = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i];
  return {
    stoppedBy,
    ops: completed,
    ok,
    errors,
    seconds,
    opsPerSec: ok / seconds,
    ...(workload === 'range' ? { items, itemsPerSec: items / seconds } : {}),
    latencyMs: sorted.length === 0 ? null : { p50: pct(50), p99: pct(99), max: sorted[sorted.length - 1], mean: sum / sorted.length },
    perSecond,
  };
}

/** Writes `count` items with BatchWrite, 25 per request, a few requests in flight. Bounded in count and time. */
async function preload(clients: KeysliceClient[], table: string, count: number, itemAt: (i: number) => Item, reason: string, quiet: boolean): Promise<PreloadResult> {
  const batches = Math.ceil(count / BATCH_WRITE_ITEMS_MAX);
  if (!quiet) process.stderr.write(`${reason}: preloading ${count.toLocaleString('en-US')} items with BatchWrite (${BATCH_WRITE_ITEMS_MAX} per batch, ${batches} batches)\n`);
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(PRELOAD_TIMEOUT_S) * 1_000_000_000n;
  let next = 0;
  const loop = async (client: KeysliceClient) => {
    while (next < batches) {
      if (shouldStop()) throw new Error(clusterFailure ?? 'interrupted');
      if (process.hrtime.bigint() >= deadline) throw new Error(`preloading did not finish within ${PRELOAD_TIMEOUT_S} s`);
      const b = next++;
      const puts: Item[] = [];
      for (let i = b * BATCH_WRITE_ITEMS_MAX; i < Math.min(count, (b + 1) * BATCH_WRITE_ITEMS_MAX); i++) puts.push(itemAt(i));
      for (let attempt = 1; ; attempt++) {
        try {
          await client.batchWrite(table, { puts });
          break;
        } catch (err) {
          const retry = err instanceof KeysliceError && err.retryable && attempt < PRELOAD_ATTEMPTS && !shouldStop();
          if (!retry) throw new Error(`preloading failed on batch ${b + 1} of ${batches}: ${err instanceof KeysliceError ? err.code + ': ' : ''}${(err as Error).message}`);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PRELOAD_IN_FLIGHT, batches) }, (_, j) => loop(clients[j % clients.length])));
  return { reason, items: count, batches, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

// ---- workloads ----------------------------------------------------------------

async function runWorkload(w: Workload, clients: KeysliceClient[], table: string, cfg: Config, written: Written, state: { putRan: boolean }): Promise<WorkloadResult> {
  const quiet = false;
  const padding = paddingFor(cfg.itemBytes, deviceName(cfg.keys - 1));
  process.stderr.write(`\n== ${w} ==\n`);

  if (w === 'put') {
    state.putRan = true;
    // Op i writes device i % keys, seq floor(i / keys): consecutive ops go to different devices.
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      const d = i % cfg.keys;
      const s = Math.floor(i / cfg.keys);
      await client.putItem(table, makeItem(deviceName(d), s, padding));
      written.add(d, s);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }

  if (w === 'get') {
    let pre: PreloadResult | null = null;
    if (written.count === 0) {
      const n = Math.min(cfg.keys, GET_PRELOAD_ITEMS_MAX);
      const reason = state.putRan ? 'put wrote no items' : 'no put ran before it in this invocation';
      pre = await preload(clients, table, n, (i) => makeItem(deviceName(i), 0, padding), reason, quiet);
      for (let i = 0; i < n; i++) written.add(i, 0);
    }
    let missing = 0;
    const r = await runLoad(w, clients, cfg, async (client) => {
      const j = Math.floor(Math.random() * written.count);
      const item = await client.getItem(table, { device: deviceName(written.device[j]), seq: written.seq[j] });
      if (item === null) {
        missing++;
        throw new KeysliceError('Internal', 'an item this run wrote was not found');
      }
      return 1;
    }, quiet);
    if (missing > 0) {
      // Count these under their own name: a written item that reads back as missing is a correctness problem, not load.
      r.errors.Internal -= missing;
      if (r.errors.Internal === 0) delete r.errors.Internal;
      r.errors.MissingItem = missing;
    }
    return { workload: w, preload: pre, ...r };
  }

  // range: devices that hold at least --range-items items each.
  let devices: string[] = [];
  for (let d = 0; d < cfg.keys; d++) if (written.perDevice[d] >= cfg.rangeItems) devices.push(deviceName(d));
  const wanted = Math.max(1, Math.min(cfg.keys, Math.floor(RANGE_PRELOAD_ITEMS_MAX / cfg.rangeItems)));
  let pre: PreloadResult | null = null;
  if (devices.length < wanted) {
    const reason = state.putRan
      ? `put left ${devices.length} devices with ${cfg.rangeItems}+ items (want ${wanted})`
      : 'no put ran before it in this invocation';
    const rangePadding = paddingFor(cfg.itemBytes, rangeDeviceName(wanted - 1));
    pre = await preload(clients, table, wanted * cfg.rangeItems, (i) => makeItem(rangeDeviceName(Math.floor(i / cfg.rangeItems)), i % cfg.rangeItems, rangePadding), `${reason}; ${wanted} devices x ${cfg.rangeItems} items`, quiet);
    devices = Array.from({ length: wanted }, (_, d) => rangeDeviceName(d));
  }
  let shortScans = 0;
  const condition = { between: [0, cfg.rangeItems - 1] as [number, number] };
  const r = await runLoad(w, clients, cfg, async (client) => {
    const device = devices[Math.floor(Math.random() * devices.length)];
    const res = await client.getItems({ table, shardingKey: device, sortingKey: condition, limit: cfg.rangeItems });
    if (res.items.length < cfg.rangeItems) shortScans++;
    return res.items.length;
  }, quiet);
  return { workload: w, preload: pre, ...r, shortScans };
}

// ---- output ---------------------------------------------------------------------

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0));

function printText(cfg: Config, where: string, table: string, results: WorkloadResult[]): void {
  const lines: string[] = [];
  lines.push('');
  lines.push(`keyslice load: ${where}`);
  lines.push(`  table ${table}; ${cfg.connections} connections, ${cfg.concurrency} requests in flight; bound per workload: ${fmt(cfg.ops)} ops or ${cfg.durationS} s`);
  lines.push(`  ${fmt(cfg.keys)} keys, items of about ${cfg.itemBytes} bytes, ${cfg.rangeItems} items per range scan; node ${process.version}, ${cpus().length} CPUs shared by client and cluster`);
  lines.push('');
  const head = ['workload', 'ops', 'errors', 'seconds', 'ops/s', 'items/s', 'p50 ms', 'p99 ms', 'max ms', 'stopped by'];
  const rows = results.map((r) => {
    const errs = Object.values(r.errors).reduce((a, b) => a + b, 0);
    return [
      r.workload,
      fmt(r.ops),
      fmt(errs),
      r.seconds.toFixed(1),
      fmt(r.opsPerSec),
      r.itemsPerSec === undefined ? '-' : fmt(r.itemsPerSec),
      r.latencyMs ? ms(r.latencyMs.p50) : '-',
      r.latencyMs ? ms(r.latencyMs.p99) : '-',
      r.latencyMs ? ms(r.latencyMs.max) : '-',
      r.stoppedBy,
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => '  ' + cells.map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  lines.push(line(head));
  for (const row of rows) lines.push(line(row));
  lines.push('');
  for (const r of results) {
    const notes: string[] = [];
    if (r.preload) notes.push(`${r.preload.reason}: preloaded ${fmt(r.preload.items)} items in ${r.preload.batches} BatchWrites in ${r.preload.seconds.toFixed(1)} s (not in the figures)`);
    const errs = Object.entries(r.errors);
    if (errs.length > 0) notes.push(`errors: ${errs.map(([code, n]) => `${code} ${fmt(n)}`).join(', ')}`);
    if (r.shortScans) notes.push(`${fmt(r.shortScans)} scans returned fewer than ${cfg.rangeItems} items`);
    const full = r.perSecond;
    if (full.length >= 2) notes.push(`ops per whole second: min ${fmt(Math.min(...full))}, max ${fmt(Math.max(...full))}`);
    for (const n of notes) lines.push(`  ${r.workload}: ${n}`);
  }
  lines.push('  latency: per successful op, send to answer, measured in the client (closed loop: includes client-side queueing).');
  console.log(lines.join('\n'));
}

// ---- main -------------------------------------------------------------------------

async function main(): Promise<number> {
  let cfg: Config | 'help';
  try {
    cfg = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`keyslice bench: ${err.message}`);
      return 2;
    }
    throw err;
  }
  if (cfg === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (cfg.rangeItems * cfg.itemBytes > PAGE_BYTES_MAX && cfg.workloads.includes('range')) {
    process.stderr.write(`keyslice bench: note: ${cfg.rangeItems} items of ${cfg.itemBytes} bytes exceed a ${PAGE_BYTES_MAX}-byte page; range scans will return fewer items\n`);
  }

  let cluster: LocalCluster | null = null;
  let dataDir: string | null = null;
  let stopping = false;
  const clients: KeysliceClient[] = [];

  const cleanup = async () => {
    stopping = true;
    await Promise.allSettled(clients.map((c) => c.close()));
    if (cluster !== null) {
      process.stderr.write('keyslice bench: stopping the local cluster\n');
      await cluster.stop();
    }
    if (dataDir !== null) rmSync(dataDir, { recursive: true, force: true });
  };
  // Last resort if we exit without cleanup: no cluster process outlives the bench.
  process.on('exit', () => {
    if (cluster === null) return;
    for (const p of [cluster.coordinator, ...cluster.nodes]) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  });
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) {
      process.stderr.write(`keyslice bench: ${signal} again; exiting now\n`);
      process.exit(130);
    }
    interrupted = true;
    process.stderr.write(`keyslice bench: ${signal}: stopping the run (partial results follow)\n`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let where: string;
  const results: WorkloadResult[] = [];
  let table = '';
  let failure: string | null = null;
  try {
    if (cfg.url === null) {
      dataDir = mkdtempSync(join(tmpdir(), 'keyslice-bench-'));
      process.stderr.write(`keyslice bench: starting a local cluster (${LOCAL_NODES} slice nodes x ${LOCAL_WORKERS} workers, durability ${cfg.durability}), data in ${dataDir}\n`);
      cluster = await startLocalCluster({ dataDir, nodes: LOCAL_NODES, workers: LOCAL_WORKERS, durability: cfg.durability });
      for (const p of [cluster.coordinator, ...cluster.nodes]) {
        p.child.on('exit', (code, signal) => {
          // A Ctrl-C in a terminal reaches the cluster's processes too: that exit is not a failure.
          if (!stopping && !interrupted && clusterFailure === null) clusterFailure = `${p.name} exited (${signal ?? code}) during the run`;
        });
      }
      if (interrupted) throw new Error('interrupted while the cluster started');
      where = `local cluster at ${cluster.url} (${LOCAL_NODES} slice nodes x ${LOCAL_WORKERS} workers + coordinator, all on this machine; durability ${cfg.durability})`;
    } else {
      where = `cluster at ${cfg.url}`;
    }
    const url = cluster?.url ?? cfg.url!;
    for (let i = 0; i < cfg.connections; i++) clients.push(await KeysliceClient.connect(url, { requestTimeoutMs: REQUEST_TIMEOUT_MS }));

    table = `bench-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`;
    await clients[0].createTable(table, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    process.stderr.write(`keyslice bench: ${where}; table ${table}\n`);

    const written = new Written(Math.min(cfg.ops, 1 << 20), cfg.keys);
    const state = { putRan: false };
    for (const w of cfg.workloads) {
      if (shouldStop()) break;
      try {
        results.push(await runWorkload(w, clients, table, cfg, written, state));
      } catch (err) {
        failure = `${w}: ${(err as Error).message}`;
        break;
      }
    }
    if (clusterFailure !== null) failure = failure ?? clusterFailure;
    if (cfg.url !== null && !cfg.keepTable && !interrupted) {
      await clients[0].deleteTable(table).catch((err) => process.stderr.write(`keyslice bench: could not delete table ${table}: ${err.message}\n`));
    }
  } catch (err) {
    await cleanup().catch(() => {});
    console.error(`keyslice bench: ${(err as Error).message}`);
    return interrupted ? 130 : 1;
  }
  await cleanup();

  if (cfg.json) {
    console.log(
      JSON.stringify(
        {
          date: new Date().toISOString(),
          node: process.version,
          cpus: cpus().length,
          cluster: cfg.url === null ? { local: true, nodes: LOCAL_NODES, workersPerNode: LOCAL_WORKERS, durability: cfg.durability } : { url: cfg.url },
          table,
          config: { ...cfg, json: undefined },
          results,
          ...(failure ? { failure } : {}),
          ...(interrupted ? { interrupted: true } : {}),
        },
        null,
        2,
      ),
    );
  } else {
    printText(cfg, where!, table, results);
    if (failure) console.log(`  FAILED: ${failure}`);
  }
  if (failure) console.error(`keyslice bench: ${failure}`);
  return interrupted ? 130 : failure ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`keyslice bench: ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);

// The load generator: a closed loop of --concurrency requests in flight over
// --connections WebSocket clients, against a running cluster (--url) or a local
// one it starts and stops itself. Workloads: put, get, update, mixed, batch, range,
// and the key-design workloads hotkey, lowcard, monotonic, usertime, timebucket (see
// bench/README.md); put, get, update and mixed choose keys by --keys-dist.
// Every loop is bounded by an op count and a deadline; latencies are measured
// per op with process.hrtime.bigint() and reported as p50/p95/p99/max. After each
// workload the table's DescribeSlices tells how evenly its load was spread.
import { cpus } from 'node:os';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { anyNumber, type OptionSpecs, readCommandLine, refuseCommandLine, UsageError, wholeNumber } from '../shared/cli-args.js';
import { KeysliceError } from '../shared/errors.js';
import type { KeySchema, TableLoad } from '../shared/api.js';
import {
  BATCH_WRITE_ITEMS_MAX,
  DURABILITY_DEFAULT,
  DURABILITY_MODES,
  EVEN_DISTRIBUTION_BUCKETS_MAX,
  ITEM_BYTES_MAX,
  PAGE_BYTES_MAX,
  PAGE_ITEMS_MAX,
  type DurabilityMode,
  type SliceCapacity,
} from '../shared/limits.js';
import type { Item } from '../shared/values.js';
import { KEYS_DISTS, ZIPF_S_DEFAULT, keyChooser, prng, workloadSeed, type KeysDist } from './keys.js';
import { benchTempDir, removeBenchDir, stopAllAtExit } from './stop-all.js';

// ---- limits of the generator itself -----------------------------------------

const LOCAL_NODES = 2;
const LOCAL_WORKERS = 2;
/** A request with no answer after this long counts as an Unavailable error (the client's own timeout). */
const REQUEST_TIMEOUT_MS = 10_000;
/** get without a prior put, and update and mixed, use the first item (seq 0) of at most this many
 * devices, and preload those that are missing. */
const POINT_KEYS_MAX = 200_000;
/** range preloads devices of --range-items items each, at most this many items in all. */
const RANGE_PRELOAD_ITEMS_MAX = 100_000;
/** BatchWrite requests in flight while preloading. */
const PRELOAD_IN_FLIGHT = 16;
const PRELOAD_TIMEOUT_S = 300;
const PRELOAD_ATTEMPTS = 3;
/** lowcard: the number of distinct sharding-key values (a status, a country, a device model). */
const LOWCARD_VALUES = 12;
/** hotkey: this many of every 10 writes go to the one hot device. */
const HOTKEY_SHARE_OF_10 = 9;
/** --capacity: a slice's read capacity is this many times its write capacity (DynamoDB: 3000 and 1000). */
const CAPACITY_READS_PER_WRITE = 3;
const CAPACITY_MAX = 10_000_000;

// ---- command line -----------------------------------------------------------

type Workload = 'put' | 'get' | 'update' | 'mixed' | 'batch' | 'range' | 'hotkey' | 'lowcard' | 'monotonic' | 'usertime' | 'timebucket';
const WORKLOADS: readonly Workload[] = ['put', 'get', 'update', 'mixed', 'batch', 'range', 'hotkey', 'lowcard', 'monotonic', 'usertime', 'timebucket'];
/** The workloads on the one shared table (they read what the others wrote). */
const SHARED_TABLE_WORKLOADS: readonly Workload[] = ['put', 'get', 'update', 'mixed', 'batch', 'range'];
/** The workloads whose keys --keys-dist chooses. */
const KEYS_DIST_WORKLOADS: readonly Workload[] = ['put', 'get', 'update', 'mixed'];
/** The workloads that report items/s besides ops/s. */
const ITEM_WORKLOADS: readonly Workload[] = ['range', 'batch'];

/** A table's key schema. put, get, update, mixed, batch and range share one table (get, update, mixed
 * and range read what put or batch wrote); each key-design workload gets a fresh table of its own, so
 * that its slice figures are its own. */
interface TableShape {
  shardingKey: KeySchema;
  sortingKey: KeySchema | null;
}
const DEVICE_SEQ: TableShape = { shardingKey: { name: 'device', type: 'string' }, sortingKey: { name: 'seq', type: 'number' } };
const SHAPES: Record<Workload, TableShape> = {
  put: DEVICE_SEQ,
  get: DEVICE_SEQ,
  update: DEVICE_SEQ,
  mixed: DEVICE_SEQ,
  batch: DEVICE_SEQ,
  range: DEVICE_SEQ,
  hotkey: DEVICE_SEQ,
  lowcard: DEVICE_SEQ,
  // What a user storing events by time would write: the timestamp is the key, nothing else.
  monotonic: { shardingKey: { name: 'ts', type: 'number' }, sortingKey: null },
  usertime: { shardingKey: { name: 'user', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } },
  // Events sharded by their day: every write of a run goes to today's key.
  timebucket: { shardingKey: { name: 'day', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } },
};
const evenApplies = (shape: TableShape) => shape.shardingKey.type === 'string' && shape.sortingKey !== null;
const describeShape = (shape: TableShape) =>
  `sharding key ${shape.shardingKey.name} (${shape.shardingKey.type})${shape.sortingKey ? `, sorting key ${shape.sortingKey.name} (${shape.sortingKey.type})` : ', no sorting key'}`;

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
  /** Key choice of put, get, update and mixed. */
  keysDist: KeysDist;
  /** zipfian: the exponent s. */
  zipfS: number;
  /** mixed: the share of its ops that are GetItem (the rest PutItem). */
  readFraction: number;
  /** Seeds the PRNG of every workload's key choice. */
  seed: number;
  json: boolean;
  keepTable: boolean;
  durability: DurabilityMode;
  /** Even distribution buckets for every table the bench creates (null: off). */
  even: number | null;
  /** Without --url: per-slice write capacity of the local cluster (reads: 3x); null: none. */
  capacity: SliceCapacity | null;
}

const FLAGS: { flag: string; value: string; help: string }[] = [
  { flag: 'url', value: 'http://host:port', help: 'a running cluster; without it a local cluster (2 slice nodes x 2 workers) is started for the run and stopped after it' },
  { flag: 'workload', value: 'list', help: `${WORKLOADS.join(', ')}, or a comma list run in order (default put,get,range)` },
  { flag: 'connections', value: 'N', help: 'client WebSocket connections (default 4)' },
  { flag: 'concurrency', value: 'N', help: 'requests in flight in total, spread over the connections (default 50)' },
  { flag: 'ops', value: 'N', help: 'at most this many ops per workload (default 100000)' },
  { flag: 'duration', value: 'S', help: 'at most this many seconds per workload, preloading not counted (default 20)' },
  { flag: 'keys', value: 'N', help: 'distinct sharding keys (devices) (default 10000)' },
  { flag: 'item-bytes', value: 'N', help: 'approximate item size: the payload is padded to it (default 200)' },
  { flag: 'range-items', value: 'N', help: 'items per range scan (GetItems limit, one page by forEachItemPage) (default 100)' },
  { flag: 'keys-dist', value: 'dist', help: `key choice of put, get, update and mixed: ${KEYS_DISTS.join(', ')} (default uniform; hotkey: 90% of ops to one key)` },
  { flag: 'zipf-s', value: 'S', help: `with --keys-dist zipfian: the exponent, above 0 and at most 5 (default ${ZIPF_S_DEFAULT})` },
  { flag: 'read-fraction', value: 'F', help: 'mixed: the share of GetItem ops, 0 to 1, the rest PutItem of the same keys (default 0.5; 0.95 for 95/5)' },
  { flag: 'seed', value: 'N', help: 'seed of the key-choice PRNG, so that runs draw the same keys (default 1)' },
  { flag: 'even', value: 'N', help: `create the tables with even distribution over N buckets (1 to ${EVEN_DISTRIBUTION_BUCKETS_MAX}); needs a string sharding key and a sorting key, so not with monotonic` },
  { flag: 'capacity', value: 'W', help: `without --url: each slice of the local cluster takes at most W writes and ${CAPACITY_READS_PER_WRITE}W reads per second (more get ThroughputExceeded; DynamoDB's partition: 1000)` },
  { flag: 'durability', value: 'mode', help: `without --url: the slice nodes' durability, ${DURABILITY_MODES.join(' or ')} (default ${DURABILITY_DEFAULT})` },
  { flag: 'json', value: '', help: 'print the results as one JSON object on stdout (progress stays on stderr)' },
  { flag: 'keep-table', value: '', help: 'with --url: keep the bench table (by default it is deleted at the end)' },
  { flag: 'help', value: '', help: 'print this help' },
];

const USAGE = [
  'usage: node dist/bench/load.js [--url http://127.0.0.1:7100] [--workload put,get,range] [options]',
  '',
  'Runs each workload until --ops or --duration is reached, whichever comes first, and prints',
  'ops/s, latency and how evenly the load fell on the slices (DescribeSlices max/mean).',
  'put, get, update, mixed, batch and range share a fresh table (sharding key "device", sorting',
  'key "seq"); each key-design workload (hotkey, lowcard, monotonic, usertime, timebucket) gets a fresh table',
  'of its own. --keys-dist chooses the keys of put, get, update and mixed.',
  '',
  ...FLAGS.map((f) => `  ${`--${f.flag}${f.value ? ' ' + f.value : ''}`.padEnd(26)} ${f.help}`),
].join('\n');

function parseCommandLine(argv: string[]): Config {
  const options: OptionSpecs = {};
  // --help is every command line's (readCommandLine); it prints USAGE, whose list names it.
  for (const f of FLAGS) if (f.flag !== 'help') options[f.flag] = f.value === '' ? { type: 'boolean' } : {};
  const { values } = readCommandLine(argv, options, USAGE);
  const raw = new Map<string, string>();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) raw.set(k, String(v));

  const int = (name: string, dflt: number, min: number, max: number): number => wholeNumber(name, raw.get(name), min, max, dflt);

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

  const decimal = (name: string, dflt: number, min: number, max: number, above = false): number => anyNumber(name, raw.get(name), min, max, { dflt, above });
  // Seconds: a fraction is fine, 0 is not (a workload with no time at all).
  const durationS = decimal('duration', 20, 0, 86_400, true);
  const onlyWith = (name: string, applies: boolean, why: string) => {
    if (raw.has(name) && !applies) throw new UsageError(`--${name} ${why}`);
  };
  const keysDistText = raw.get('keys-dist') ?? 'uniform';
  if (!(KEYS_DISTS as readonly string[]).includes(keysDistText)) throw new UsageError(`--keys-dist must be one of ${KEYS_DISTS.join(', ')}, got "${keysDistText}"`);
  const keysDist = keysDistText as KeysDist;
  onlyWith('keys-dist', workloads.some((w) => (KEYS_DIST_WORKLOADS as readonly string[]).includes(w)), `applies only to ${KEYS_DIST_WORKLOADS.join(', ')}, and --workload names none of them`);
  onlyWith('zipf-s', keysDist === 'zipfian', 'applies only with --keys-dist zipfian');
  onlyWith('read-fraction', workloads.includes('mixed'), 'applies only to the mixed workload, and --workload does not name it');

  let even: number | null = null;
  if (raw.has('even')) {
    even = int('even', 0, 1, EVEN_DISTRIBUTION_BUCKETS_MAX);
    const misfits = (workloads as Workload[]).filter((w) => !evenApplies(SHAPES[w]));
    if (misfits.length > 0) {
      throw new UsageError(
        `--even: even distribution needs a string sharding key (the bucket is appended to it) and a sorting key (the bucket is its hash); ` +
          misfits.map((w) => `${w}'s table has ${describeShape(SHAPES[w])}`).join('; ') +
          '. keyslice already places a slice by xxHash32 of the sharding key, so a monotonic key needs no hash prefix (and hash prefixes are not implemented)',
      );
    }
  }
  let capacity: SliceCapacity | null = null;
  if (raw.has('capacity')) {
    if (url !== null) throw new UsageError('--capacity applies to the local cluster the bench starts; a running cluster (--url) has its own (slice node flag --slice-writes-per-second)');
    const w = int('capacity', 0, 1, CAPACITY_MAX);
    capacity = { writesPerSecond: w, readsPerSecond: CAPACITY_READS_PER_WRITE * w };
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
    keysDist,
    zipfS: decimal('zipf-s', ZIPF_S_DEFAULT, 0, 5, true),
    readFraction: decimal('read-fraction', 0.5, 0, 1),
    seed: int('seed', 1, 0, 0xffff_ffff),
    json: raw.has('json'),
    keepTable: raw.has('keep-table'),
    durability: durabilityArg(raw.get('durability'), url),
    even,
    capacity,
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
const HOT_DEVICE = 'dev-hot';
const userName = (u: number) => `user-${u}`;

/** Pads `payload` so that the item, counted as the store counts it (names + values), is about `itemBytes`. */
function makeItem(device: string, seq: number, padding: string): Item {
  return { device, seq, payload: padding };
}
function paddingFor(itemBytes: number, exampleDevice: string): string {
  const fixed = 'device'.length + exampleDevice.length + 'seq'.length + 8 + 'payload'.length;
  return 'x'.repeat(Math.max(0, itemBytes - fixed));
}
/** An item of `shape`: its key attributes and a payload padded so that the item is about `itemBytes`. */
function keyedItem(shape: TableShape, sharding: string | number, sorting: number | null, padding: string): Item {
  const item: Item = { [shape.shardingKey.name]: sharding, payload: padding };
  if (shape.sortingKey !== null) item[shape.sortingKey.name] = sorting ?? 0;
  return item;
}
function paddingForShape(itemBytes: number, shape: TableShape, exampleSharding: string | number): string {
  const keyBytes = (k: KeySchema, v: string | number) => k.name.length + (typeof v === 'string' ? v.length : 8);
  const fixed = keyBytes(shape.shardingKey, exampleSharding) + (shape.sortingKey ? keyBytes(shape.sortingKey, 0) : 0) + 'payload'.length;
  return 'x'.repeat(Math.max(0, itemBytes - fixed));
}
/** A timestamp-like number that only grows: microseconds since the epoch at the start, plus the op index (unique per op). */
const timestampBase = () => Date.now() * 1000;


/** What this invocation has written, so that get, update, mixed and range read items that exist. */
class Written {
  /** put/batch keys: device index and seq of each successful write of a new item. */
  device: Int32Array;
  seq: Int32Array;
  count = 0;
  /** Successful writes of new items per device (for range over put's data). */
  perDevice: Int32Array;
  /** The seq the next new item of each device gets (put and batch write new items only). */
  nextSeq: Int32Array;
  /** 1 where the device's first item (seq 0) was written: the key set of update and mixed. */
  hasFirst: Uint8Array;
  constructor(capacity: number, keys: number) {
    this.device = new Int32Array(capacity);
    this.seq = new Int32Array(capacity);
    this.perDevice = new Int32Array(keys);
    this.nextSeq = new Int32Array(keys);
    this.hasFirst = new Uint8Array(keys);
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
    if (s === 0) this.hasFirst[d] = 1;
  }
}

// ---- running ops ------------------------------------------------------------

interface PreloadResult {
  reason: string;
  items: number;
  batches: number;
  seconds: number;
}

/** What DescribeSlices said right after a workload (its rates cover the last 10 s of whole seconds). */
interface SliceReport {
  sliceCount: number;
  windowSeconds: number;
  /** The busiest slice over the mean of all slices (1 = perfectly even; sliceCount = all on one slice). */
  maxOverMean: { items: number; reads: number; writes: number };
  slicesWithItems: number;
  slicesWritten: number;
  slicesRead: number;
  /** The hottest stored sharding keys (with even distribution: `<key>_<bucket>`). */
  hotKeys: { key: string; slice: number; opsPerSecond: number }[];
}

interface WorkloadResult {
  workload: Workload;
  table: string;
  keys: string;
  preload: PreloadResult | null;
  stoppedBy: 'ops' | 'duration' | 'interrupt' | 'cluster-failure';
  /** Ops completed (answered or failed). */
  ops: number;
  ok: number;
  errors: Record<string, number>;
  seconds: number;
  /** Successful ops per second of wall time (start to the last answer). */
  opsPerSec: number;
  /** range: items returned (per second), and scans that returned fewer than --range-items;
   * batch: items written (per second), and items that failed by code (in a BatchWrite that answered). */
  items?: number;
  itemsPerSec?: number;
  shortScans?: number;
  failedItems?: Record<string, number>;
  /** put, get, update, mixed, batch: how the keys were chosen. */
  keyChoice?: string;
  /** mixed: ops issued of each kind. */
  mix?: { reads: number; writes: number };
  /** Latency of successful ops, in ms (nearest-rank percentiles). */
  latencyMs: { p50: number; p95: number; p99: number; max: number; mean: number } | null;
  /** Ops completed in each whole second of the run (last partial second left out). */
  perSecond: number[];
  /** DescribeSlices of the workload's table right after it; null with `slicesError` if that failed. */
  slices: SliceReport | null;
  slicesError?: string;
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
): Promise<Omit<WorkloadResult, 'workload' | 'preload' | 'table' | 'keys' | 'slices' | 'slicesError'>> {
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
    ...(ITEM_WORKLOADS.includes(workload) ? { items, itemsPerSec: items / seconds } : {}),
    latencyMs: sorted.length === 0 ? null : { p50: pct(50), p95: pct(95), p99: pct(99), max: sorted[sorted.length - 1], mean: sum / sorted.length },
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
      let pending = puts;
      for (let attempt = 1; ; attempt++) {
        try {
          // Items that failed at run time (a node down, a slice at its --capacity) are sent again.
          const failures = await client.batchWrite(table, { puts: pending });
          if (failures.length === 0) break;
          const fatal = failures.find((f) => !f.retryable);
          if (fatal !== undefined || attempt >= PRELOAD_ATTEMPTS || shouldStop()) {
            const f = fatal ?? failures[0];
            throw new KeysliceError(f.code, `${failures.length} items failed, e.g. ${f.name}: ${f.message}`);
          }
          pending = failures.map((f) => pending[f.index]);
          await new Promise((r) => setTimeout(r, 100 * attempt));
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

type RunResult = Omit<WorkloadResult, 'table' | 'keys' | 'slices' | 'slicesError'>;

async function runWorkload(w: Workload, clients: KeysliceClient[], table: string, cfg: Config, written: Written, state: { writerRan: boolean }): Promise<RunResult> {
  const quiet = false;
  const padding = paddingFor(cfg.itemBytes, deviceName(cfg.keys - 1));
  process.stderr.write(`\n== ${w} ==\n`);

  // ---- key-design workloads: writes only, each on its own table ----
  const shape = SHAPES[w];
  const put = (client: KeysliceClient, sharding: string | number, sorting: number | null, pad: string) => client.putItem(table, keyedItem(shape, sharding, sorting, pad));
  if (w === 'hotkey') {
    // 9 of every 10 ops write the one hot device, under an increasing seq; the others go round the --keys devices.
    const pad = paddingForShape(cfg.itemBytes, shape, deviceName(cfg.keys - 1));
    let hotSeq = 0;
    let coldOps = 0;
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      if (i % 10 < HOTKEY_SHARE_OF_10) await put(client, HOT_DEVICE, hotSeq++, pad);
      else {
        const k = coldOps++;
        await put(client, deviceName(k % cfg.keys), Math.floor(k / cfg.keys), pad);
      }
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }
  if (w === 'lowcard') {
    // Every write goes to one of 12 devices, in turn, each under an increasing seq.
    const pad = paddingForShape(cfg.itemBytes, shape, deviceName(LOWCARD_VALUES - 1));
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      await put(client, deviceName(i % LOWCARD_VALUES), Math.floor(i / LOWCARD_VALUES), pad);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }
  if (w === 'monotonic') {
    // The sharding key is the timestamp itself (no sorting key): every write is a new, larger key.
    const base = timestampBase();
    const pad = paddingForShape(cfg.itemBytes, shape, base);
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      await put(client, base + i, null, pad);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }
  if (w === 'usertime') {
    // (user, timestamp): the users take turns over --keys; the timestamp only grows.
    const base = timestampBase();
    const pad = paddingForShape(cfg.itemBytes, shape, userName(cfg.keys - 1));
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      await put(client, userName(i % cfg.keys), base + i, pad);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }

  if (w === 'timebucket') {
    // (day, timestamp): the day is today's (UTC), as a time-bucketed key would be; the timestamp only grows.
    const base = timestampBase();
    const day = new Date().toISOString().slice(0, 10);
    const pad = paddingForShape(cfg.itemBytes, shape, day);
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      await put(client, day, base + i, pad);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r };
  }

  // ---- the shared table: put and batch write new items; get, update and mixed use what they wrote ----
  const seed = workloadSeed(cfg.seed, w);
  const pointKeys = Math.min(cfg.keys, POINT_KEYS_MAX);
  const firstItem = (d: number) => ({ device: deviceName(d), seq: 0 });
  /** The key set of update, mixed, and get with a non-uniform --keys-dist: the first item (seq 0) of devices
   * 0 .. pointKeys-1. Writes those that this invocation has not written yet. */
  const ensureFirstItems = async (): Promise<PreloadResult | null> => {
    const absent: number[] = [];
    for (let d = 0; d < pointKeys; d++) if (written.hasFirst[d] === 0) absent.push(d);
    if (absent.length === 0) return null;
    const reason =
      absent.length < pointKeys ? `${fmt(absent.length)} of its ${fmt(pointKeys)} keys were not written yet`
      : state.writerRan ? 'put and batch wrote none of its keys'
      : 'no put or batch ran before it in this invocation';
    const pre = await preload(clients, table, absent.length, (i) => makeItem(deviceName(absent[i]), 0, padding), reason, quiet);
    for (const d of absent) {
      written.add(d, 0);
      written.nextSeq[d] = Math.max(written.nextSeq[d], 1);
    }
    return pre;
  };
  /** get and mixed: a written item that reads back as missing is a correctness problem, not load: count it under its own name. */
  let missing = 0;
  const missingItem = () => {
    missing++;
    return new KeysliceError('Internal', 'an item this run wrote was not found');
  };
  const countMissing = (r: Awaited<ReturnType<typeof runLoad>>) => {
    if (missing === 0) return;
    r.errors.Internal -= missing;
    if (r.errors.Internal === 0) delete r.errors.Internal;
    r.errors.MissingItem = missing;
  };

  if (w === 'put') {
    state.writerRan = true;
    // Every op writes a new item: its device's next seq. uniform: op i writes device i % keys (as before
    // --keys-dist existed), so consecutive ops go to different devices; otherwise --keys-dist picks it.
    const keys = cfg.keysDist === 'uniform' ? null : keyChooser(cfg.keysDist, cfg.keys, cfg.zipfS, seed);
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      const d = keys === null ? i % cfg.keys : keys.next();
      const s = written.nextSeq[d]++;
      await client.putItem(table, makeItem(deviceName(d), s, padding));
      written.add(d, s);
      return 1;
    }, quiet);
    return { workload: w, preload: null, ...r, keyChoice: keys?.describe ?? `uniform: round robin over ${fmt(cfg.keys)} devices` };
  }

  if (w === 'batch') {
    state.writerRan = true;
    // Op i writes items i*25 .. i*25+24 of the workload in one BatchWrite; item j is a new item of device j % keys.
    const failedItems: Record<string, number> = {};
    const r = await runLoad(w, clients, cfg, async (client, i) => {
      const puts: Item[] = [];
      const devices: number[] = [];
      const seqs: number[] = [];
      for (let k = 0; k < BATCH_WRITE_ITEMS_MAX; k++) {
        const d = (i * BATCH_WRITE_ITEMS_MAX + k) % cfg.keys;
        devices.push(d);
        seqs.push(written.nextSeq[d]++);
        puts.push(makeItem(deviceName(d), seqs[k], padding));
      }
      const failures = await client.batchWrite(table, { puts });
      for (const f of failures) failedItems[f.code] = (failedItems[f.code] ?? 0) + 1;
      // An op none of whose items was written counts as an error (under the first item's code).
      if (failures.length === puts.length) throw new KeysliceError(failures[0].code, `all ${puts.length} items failed: ${failures[0].message}`);
      const failed = new Set(failures.map((f) => f.index));
      for (let k = 0; k < puts.length; k++) if (!failed.has(k)) written.add(devices[k], seqs[k]);
      return puts.length - failures.length;
    }, quiet);
    const keyChoice = `round robin over ${fmt(cfg.keys)} devices, ${BATCH_WRITE_ITEMS_MAX} new items per BatchWrite`;
    return { workload: w, preload: null, ...r, keyChoice, ...(Object.keys(failedItems).length > 0 ? { failedItems } : {}) };
  }

  if (w === 'get') {
    let pre: PreloadResult | null = null;
    let keyOf: () => { device: string; seq: number };
    let keyChoice: string;
    if (cfg.keysDist === 'uniform') {
      // Any item this invocation wrote, uniformly; without any, the first item of each device.
      if (written.count === 0) pre = await ensureFirstItems();
      const random = prng(seed);
      keyOf = () => {
        const j = Math.floor(random() * written.count);
        return { device: deviceName(written.device[j]), seq: written.seq[j] };
      };
      keyChoice = `uniform over the ${fmt(written.count)} items written`;
    } else {
      pre = await ensureFirstItems();
      const keys = keyChooser(cfg.keysDist, pointKeys, cfg.zipfS, seed);
      keyOf = () => firstItem(keys.next());
      keyChoice = `${keys.describe}, the first item of each device`;
    }
    const r = await runLoad(w, clients, cfg, async (client) => {
      if ((await client.getItem(table, keyOf())) === null) throw missingItem();
      return 1;
    }, quiet);
    countMissing(r);
    return { workload: w, preload: pre, ...r, keyChoice };
  }

  if (w === 'update') {
    // UpdateItem of an existing item: n = n + 1 (structured ADD), on the first item of a device.
    const pre = await ensureFirstItems();
    const keys = keyChooser(cfg.keysDist, pointKeys, cfg.zipfS, seed);
    const r = await runLoad(w, clients, cfg, async (client) => {
      await client.updateItem(table, firstItem(keys.next()), { add: { n: 1 } });
      return 1;
    }, quiet);
    return { workload: w, preload: pre, ...r, keyChoice: `${keys.describe}, the first item of each device` };
  }

  if (w === 'mixed') {
    // GetItem with probability --read-fraction, else PutItem (a full overwrite), of the same key set.
    const pre = await ensureFirstItems();
    const keys = keyChooser(cfg.keysDist, pointKeys, cfg.zipfS, seed);
    const mix = { reads: 0, writes: 0 };
    const r = await runLoad(w, clients, cfg, async (client) => {
      const d = keys.next();
      if (keys.random() < cfg.readFraction) {
        mix.reads++;
        if ((await client.getItem(table, firstItem(d))) === null) throw missingItem();
      } else {
        mix.writes++;
        await client.putItem(table, makeItem(deviceName(d), 0, padding));
      }
      return 1;
    }, quiet);
    countMissing(r);
    return { workload: w, preload: pre, ...r, keyChoice: `${keys.describe}, the first item of each device`, mix };
  }

  // range: devices that hold at least --range-items items each.
  let devices: string[] = [];
  for (let d = 0; d < cfg.keys; d++) if (written.perDevice[d] >= cfg.rangeItems) devices.push(deviceName(d));
  const wanted = Math.max(1, Math.min(cfg.keys, Math.floor(RANGE_PRELOAD_ITEMS_MAX / cfg.rangeItems)));
  let pre: PreloadResult | null = null;
  if (devices.length < wanted) {
    const reason = state.writerRan
      ? `put and batch left ${devices.length} devices with ${cfg.rangeItems}+ items (want ${wanted})`
      : 'no put or batch ran before it in this invocation';
    const rangePadding = paddingFor(cfg.itemBytes, rangeDeviceName(wanted - 1));
    pre = await preload(clients, table, wanted * cfg.rangeItems, (i) => makeItem(rangeDeviceName(Math.floor(i / cfg.rangeItems)), i % cfg.rangeItems, rangePadding), `${reason}; ${wanted} devices x ${cfg.rangeItems} items`, quiet);
    devices = Array.from({ length: wanted }, (_, d) => rangeDeviceName(d));
  }
  let shortScans = 0;
  const condition = { between: [0, cfg.rangeItems - 1] as [number, number] };
  // By forEachItemPage, the client's path for reading a range (getAllItems rides it too): the page goes to the
  // callback and nowhere else, where getItems' promise would hold it (bench/PROFILE.md, "forEachItemPage"). One page
  // (maxPages 1): the same one GetItems request as before, so that ops/s stay one request each. Items counted are
  // the page's items of that device, each looked at, as bench/redis-load.ts's range parses and checks each of its own.
  const r = await runLoad(w, clients, cfg, async (client) => {
    const device = devices[Math.floor(Math.random() * devices.length)];
    let read = 0;
    await client.forEachItemPage({ table, shardingKey: device, sortingKey: condition, limit: cfg.rangeItems }, (page) => {
      for (const item of page.items) if (item.device === device) read++;
    }, { maxPages: 1 });
    if (read < cfg.rangeItems) shortScans++;
    return read;
  }, quiet);
  return { workload: w, preload: pre, ...r, shortScans };
}

// ---- output ---------------------------------------------------------------------

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0));

function sliceReport(load: TableLoad): SliceReport {
  return {
    sliceCount: load.sliceCount,
    windowSeconds: load.windowSeconds,
    maxOverMean: load.maxOverMean,
    slicesWithItems: load.slices.filter((s) => s.items > 0).length,
    slicesWritten: load.slices.filter((s) => s.writesPerSecond > 0).length,
    slicesRead: load.slices.filter((s) => s.readsPerSecond > 0).length,
    hotKeys: load.hotKeys.slice(0, 3),
  };
}

/** A table as text: first column left-aligned, the others right-aligned. */
function textTable(head: string[], rows: string[][], leftAligned = new Set([0])): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => '  ' + cells.map((c, i) => (leftAligned.has(i) ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), ...rows.map(line)];
}

function printText(cfg: Config, where: string, results: WorkloadResult[]): void {
  const lines: string[] = [];
  lines.push('');
  lines.push(`keyslice load: ${where}`);
  lines.push(`  ${cfg.connections} connections, ${cfg.concurrency} requests in flight; bound per workload: ${fmt(cfg.ops)} ops or ${cfg.durationS} s; even distribution ${cfg.even === null ? 'off' : `${cfg.even} buckets`}`);
  lines.push(`  ${fmt(cfg.keys)} keys, items of about ${cfg.itemBytes} bytes, ${cfg.rangeItems} items per range scan; node ${process.version}, ${cpus().length} CPUs shared by client and cluster`);
  lines.push(`  key choice (put, get, update, mixed): ${cfg.keysDist}${cfg.keysDist === 'zipfian' ? ` s=${cfg.zipfS}` : ''}, seed ${cfg.seed}${cfg.workloads.includes('mixed') ? `; mixed: read fraction ${cfg.readFraction}` : ''}`);
  lines.push('');
  const head = ['workload', 'ops', 'errors', 'seconds', 'ops/s', 'items/s', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'stopped by'];
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
      r.latencyMs ? ms(r.latencyMs.p95) : '-',
      r.latencyMs ? ms(r.latencyMs.p99) : '-',
      r.latencyMs ? ms(r.latencyMs.max) : '-',
      r.stoppedBy,
    ];
  });
  lines.push(...textTable(head, rows, new Set([0, head.length - 1])));
  lines.push('');
  // How evenly each workload's load fell on the slices.
  // 0 means there was nothing of that kind (DescribeSlices answers 0 then).
  const ratio = (n: number) => (n === 0 ? '-' : n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const rate = (n: number) => (n >= 10 ? fmt(n) : n.toFixed(1));
  const sliceHead = ['workload', 'writes max/mean', 'reads max/mean', 'items max/mean', 'slices written', 'slices with items', 'hottest stored key (ops/s)', 'table keys'];
  const sliceRows = results.map((r) => {
    const s = r.slices;
    if (s === null) return [r.workload, '-', '-', '-', '-', '-', `DescribeSlices failed: ${r.slicesError ?? '?'}`, r.keys];
    const hot = s.hotKeys[0];
    return [
      r.workload,
      ratio(s.maxOverMean.writes),
      ratio(s.maxOverMean.reads),
      ratio(s.maxOverMean.items),
      `${fmt(s.slicesWritten)} of ${fmt(s.sliceCount)}`,
      `${fmt(s.slicesWithItems)} of ${fmt(s.sliceCount)}`,
      hot ? `${hot.key} (${rate(hot.opsPerSecond)})` : '-',
      r.keys,
    ];
  });
  lines.push(...textTable(sliceHead, sliceRows, new Set([0, 6, 7])));
  lines.push(`  slices: DescribeSlices right after each workload; max/mean = busiest slice / mean over all slices (1 is even, ${results[0]?.slices?.sliceCount ?? 'the slice count'} is all on one);`);
  lines.push('  rates are averages over its 10 s window of whole seconds. put, get, update, mixed, batch and range share one table, so each also sees what the ones before it wrote.');
  lines.push('');
  for (const r of results) {
    const notes: string[] = [];
    if (r.preload) notes.push(`${r.preload.reason}: preloaded ${fmt(r.preload.items)} items in ${r.preload.batches} BatchWrites in ${r.preload.seconds.toFixed(1)} s (not in the figures)`);
    const errs = Object.entries(r.errors);
    if (errs.length > 0) notes.push(`errors: ${errs.map(([code, n]) => `${code} ${fmt(n)}`).join(', ')}`);
    if (r.keyChoice) notes.push(`keys: ${r.keyChoice}`);
    if (r.mix) notes.push(`${fmt(r.mix.reads)} GetItem and ${fmt(r.mix.writes)} PutItem sent`);
    if (r.failedItems) notes.push(`failed items in answered BatchWrites: ${Object.entries(r.failedItems).map(([code, n]) => `${code} ${fmt(n)}`).join(', ')}`);
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
  let cfg: Config;
  try {
    cfg = parseCommandLine(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) refuseCommandLine(err.message, USAGE);
    throw err;
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
    if (dataDir !== null) removeBenchDir(dataDir);
  };
  // Last resort if we exit without cleanup: no process of ours outlives the bench, and its data folder goes.
  stopAllAtExit();
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
  /** The shared table of put, get, update, mixed, batch and range ('' until one of them runs), and every table this run created. */
  let table = '';
  const created: string[] = [];
  let failure: string | null = null;
  try {
    if (cfg.url === null) {
      dataDir = benchTempDir('keyslice-bench-');
      process.stderr.write(`keyslice bench: starting a local cluster (${LOCAL_NODES} slice nodes x ${LOCAL_WORKERS} workers, durability ${cfg.durability}), data in ${dataDir}\n`);
      cluster = await startLocalCluster({ dataDir, nodes: LOCAL_NODES, workers: LOCAL_WORKERS, durability: cfg.durability, ...(cfg.capacity ? { capacity: cfg.capacity } : {}) });
      for (const p of [cluster.coordinator, ...cluster.nodes]) {
        p.child.on('exit', (code, signal) => {
          // A Ctrl-C in a terminal reaches the cluster's processes too: that exit is not a failure.
          if (!stopping && !interrupted && clusterFailure === null) clusterFailure = `${p.name} exited (${signal ?? code}) during the run`;
        });
      }
      if (interrupted) throw new Error('interrupted while the cluster started');
      where = `local cluster at ${cluster.url} (${LOCAL_NODES} slice nodes x ${LOCAL_WORKERS} workers + coordinator, all on this machine; durability ${cfg.durability}; ${
        cfg.capacity ? `slice capacity ${cfg.capacity.writesPerSecond} writes/s, ${cfg.capacity.readsPerSecond} reads/s` : 'no slice capacity'
      })`;
    } else {
      where = `cluster at ${cfg.url}`;
    }
    const url = cluster?.url ?? cfg.url!;
    for (let i = 0; i < cfg.connections; i++) clients.push(await KeysliceClient.connect(url, { requestTimeoutMs: REQUEST_TIMEOUT_MS }));

    const tablePrefix = `bench-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`;
    const createFor = async (w: Workload): Promise<string> => {
      const shared = SHARED_TABLE_WORKLOADS.includes(w);
      if (shared && table !== '') return table;
      const name = shared ? tablePrefix : `${tablePrefix}-${w}`;
      const shape = SHAPES[w];
      await clients[0].createTable(name, shape.shardingKey, shape.sortingKey ?? undefined, cfg.even === null ? {} : { evenDistribution: { buckets: cfg.even } });
      created.push(name);
      if (shared) table = name;
      process.stderr.write(`keyslice bench: table ${name}: ${describeShape(shape)}, even distribution ${cfg.even === null ? 'off' : `${cfg.even} buckets`}\n`);
      return name;
    };
    process.stderr.write(`keyslice bench: ${where}\n`);

    const written = new Written(Math.min(cfg.ops, 1 << 20), cfg.keys);
    const state = { writerRan: false };
    for (const w of cfg.workloads) {
      if (shouldStop()) break;
      try {
        const t = await createFor(w);
        const r = await runWorkload(w, clients, t, cfg, written, state);
        const result: WorkloadResult = { ...r, table: t, keys: describeShape(SHAPES[w]), slices: null };
        try {
          result.slices = sliceReport(await clients[0].describeSlices(t));
        } catch (err) {
          result.slicesError = `${err instanceof KeysliceError ? err.code + ': ' : ''}${(err as Error).message}`;
        }
        results.push(result);
      } catch (err) {
        failure = `${w}: ${(err as Error).message}`;
        break;
      }
    }
    if (clusterFailure !== null) failure = failure ?? clusterFailure;
    if (cfg.url !== null && !cfg.keepTable && !interrupted) {
      for (const t of created) {
        await clients[0].deleteTable(t).catch((err) => process.stderr.write(`keyslice bench: could not delete table ${t}: ${err.message}\n`));
      }
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
          cluster: cfg.url === null ? { local: true, nodes: LOCAL_NODES, workersPerNode: LOCAL_WORKERS, durability: cfg.durability, capacity: cfg.capacity } : { url: cfg.url },
          table: table === '' ? null : table,
          tables: created,
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
    printText(cfg, where!, results);
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

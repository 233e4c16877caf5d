// The Redis side of npm run bench:scale: one client process that drives one
// Redis server or a Redis Cluster (--cluster) with the same shape as a
// bench/load.ts client drives keyslice: --connections connections (to each
// shard), --concurrency requests in flight, the same workloads in the same
// order over the same keys, each bounded by --ops and --duration. Prints one
// JSON object { results: [...] } on stdout in load.ts's terms (ops/s, items/s,
// p50/p99 ms, errors), which bench/scale.ts reads.
//   put    HSET of a new item (device i mod --keys, its next seq)
//   get    HGETALL of an item put wrote (without any: the first item of each device, preloaded)
//   range  ZRANGEBYLEX of 100 items of a device's sorted set (1000 devices x 100 items preloaded)
//   batch  25 new items' HSET in one pipeline (one per shard in a cluster)
// The data set of each process has a prefix of its own, as each load.ts client has its own table.
import { readCommandLine, refuseCommandLine, UsageError, wholeNumber } from '../shared/cli-args.js';
import { closedLoop, type Row, type Sample } from './driver.js';
import { ensureNpmPeers } from './peers.js';
import { RedisAdapter, type RedisCtor } from './redis-adapter.js';

/** As bench/load.ts: keys, item size, items per range, items per batch, range devices preloaded, get's preload bound. */
const KEYS = 10_000;
const ITEM_BYTES = 200;
const RANGE_ITEMS = 100;
const BATCH_ITEMS = 25;
const RANGE_PRELOAD_ITEMS_MAX = 100_000;
const POINT_KEYS_MAX = 200_000;
const WORKLOADS = ['put', 'get', 'range', 'batch'] as const;
type Workload = (typeof WORKLOADS)[number];

const USAGE = `usage: node dist/bench/redis-load.js --port P [--cluster] [--workload put,get,range,batch] [--duration S] [--ops N] [--connections N] [--concurrency N]`;

function parse(argv: string[]) {
  const text = { type: 'string' } as const;
  const { values: v } = readCommandLine(argv, { port: text, cluster: { type: 'boolean' }, workload: text, duration: text, ops: text, connections: text, concurrency: text }, USAGE);
  const workloads = (v.workload ?? 'put,get,range,batch').split(',') as Workload[];
  for (const w of workloads) if (!WORKLOADS.includes(w)) throw new UsageError(`--workload: "${w}" is not one of ${WORKLOADS.join(', ')}`);
  if (v.port === undefined) throw new UsageError('--port is needed (a Redis server, or any node of a Redis Cluster, on 127.0.0.1)');
  return {
    port: wholeNumber('port', v.port, 1, 65535),
    cluster: v.cluster === true,
    workloads,
    durationS: wholeNumber('duration', v.duration, 1, 3600, 10),
    ops: wholeNumber('ops', v.ops, 1, 100_000_000, 100_000),
    connections: wholeNumber('connections', v.connections, 1, 64, 4),
    concurrency: wholeNumber('concurrency', v.concurrency, 1, 10_000, 50),
  };
}

function paddingFor(exampleDevice: string): string {
  const fixed = 'device'.length + exampleDevice.length + 'seq'.length + 8 + 'payload'.length;
  return 'x'.repeat(Math.max(0, ITEM_BYTES - fixed));
}

interface Result {
  workload: Workload;
  opsPerSec: number;
  itemsPerSec?: number;
  errors: Record<string, number>;
  latencyMs: { p50: number; p99: number } | null;
  stoppedBy: Sample['stoppedBy'];
  preloadedItems: number;
}

async function main(): Promise<number> {
  let cfg: ReturnType<typeof parse>;
  try {
    cfg = parse(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) refuseCommandLine(err.message, USAGE);
    throw err;
  }
  let interrupted = false;
  process.on('SIGINT', () => (interrupted = true));
  process.on('SIGTERM', () => (interrupted = true));
  const stop = () => interrupted;
  const log = (line: string) => process.stderr.write(`redis-load ${process.pid}: ${line}\n`);
  const req = ensureNpmPeers(['ioredis'], log);
  const mod = req('ioredis') as { default?: RedisCtor } & RedisCtor;
  const Redis: RedisCtor = mod.default ?? mod;
  const prefix = `c${process.pid}:`;
  const redis = cfg.cluster ? await RedisAdapter.openCluster(Redis, cfg.port, cfg.connections, prefix) : await RedisAdapter.open(Redis, cfg.port, cfg.connections, prefix);

  const padding = paddingFor(`dev-${KEYS - 1}`);
  const nextSeq = new Uint32Array(KEYS);
  // What put and batch wrote (get reads a random one of them), bounded as load.ts bounds it.
  const writtenMax = Math.min(cfg.ops, 1 << 20);
  const writtenDevice = new Uint32Array(writtenMax);
  const writtenSeq = new Uint32Array(writtenMax);
  let written = 0;
  const wrote = (d: number, seq: number) => {
    if (written < writtenMax) {
      writtenDevice[written] = d;
      writtenSeq[written++] = seq;
    }
  };
  const newRow = (d: number): Row => {
    const seq = nextSeq[d]++;
    return { device: `dev-${d}`, seq, payload: padding };
  };

  const results: Result[] = [];
  let failure: string | null = null;
  try {
    for (const w of cfg.workloads) {
      if (interrupted) break;
      let preloaded = 0;
      let op: (c: number, i: number) => Promise<number>;
      if (w === 'put') {
        op = async (c, i) => {
          const d = i % KEYS;
          const row = newRow(d);
          await redis.put(c, row);
          wrote(d, row.seq);
          return 1;
        };
      } else if (w === 'batch') {
        op = async (c, i) => {
          const rows: Row[] = [];
          const devices: number[] = [];
          for (let k = 0; k < BATCH_ITEMS; k++) {
            const d = (i * BATCH_ITEMS + k) % KEYS;
            devices.push(d);
            rows.push(newRow(d));
          }
          await redis.putMany(c, rows);
          rows.forEach((r, k) => wrote(devices[k], r.seq));
          return rows.length;
        };
      } else if (w === 'get') {
        if (written === 0) {
          const n = Math.min(KEYS, POINT_KEYS_MAX);
          const rows = Array.from({ length: n }, (_, d) => newRow(d));
          await redis.load(rows);
          rows.forEach((r, d) => wrote(d, r.seq));
          preloaded = n;
        }
        op = async (c) => {
          const j = Math.floor(Math.random() * written);
          await redis.get(c, `dev-${writtenDevice[j]}`, writtenSeq[j]);
          return 1;
        };
      } else {
        // As load.ts: put's devices rarely hold 100 items, so range reads devices of their own.
        const devices = Math.max(1, Math.min(KEYS, Math.floor(RANGE_PRELOAD_ITEMS_MAX / RANGE_ITEMS)));
        const rangePadding = paddingFor(`range-${devices - 1}`);
        await redis.load(Array.from({ length: devices * RANGE_ITEMS }, (_, i) => ({ device: `range-${Math.floor(i / RANGE_ITEMS)}`, seq: i % RANGE_ITEMS, payload: rangePadding })));
        preloaded = devices * RANGE_ITEMS;
        op = async (c) => {
          const n = await redis.range(c, `range-${Math.floor(Math.random() * devices)}`, RANGE_ITEMS);
          if (n !== RANGE_ITEMS) throw new Error(`short range: ${n} items`);
          return n;
        };
      }
      let index = 0;
      const s = await closedLoop(cfg, cfg.ops, cfg.durationS, (c) => op(c, index++), stop);
      results.push({
        workload: w,
        opsPerSec: s.opsPerSec,
        ...(w === 'range' || w === 'batch' ? { itemsPerSec: s.itemsPerSec } : {}),
        errors: s.errors,
        latencyMs: s.ok === 0 ? null : { p50: s.p50, p99: s.p99 },
        stoppedBy: s.stoppedBy,
        preloadedItems: preloaded,
      });
      log(`${w}: ${Math.round(s.opsPerSec)} ops/s, p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms`);
    }
  } catch (err) {
    failure = (err as Error).message;
  } finally {
    await redis.close();
  }
  console.log(JSON.stringify({ target: cfg.cluster ? `Redis Cluster of ${redis.shardCount} shards` : 'one Redis server', redirects: redis.redirects, results, ...(failure ? { failure } : {}) }));
  if (failure) log(failure);
  return failure ? 1 : interrupted ? 130 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`redis-load: ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);

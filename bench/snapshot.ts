// Write latency while workers write snapshots: a local cluster (--nodes x --workers),
// --items preloaded, then PutItem and BatchWrite closed loops overwriting those
// items for --duration seconds with a small --snapshot-after-bytes, so that
// several snapshots of the whole data set happen during the run. Reports each
// op's p50/p99/p99.9/max and the snapshots seen (a .snap.tmp file appearing and
// its .snap replacing it, polled every SNAPSHOT_POLL_MS).
//   node dist/bench/snapshot.js [--items 300000] [--snapshot-after-bytes 8388608] [--workers 1] [--duration 30]
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { BATCH_WRITE_ITEMS_MAX, DURABILITY_DEFAULT, DURABILITY_MODES, type DurabilityMode } from '../shared/limits.js';
import { prng } from './keys.js';

const PRELOAD_IN_FLIGHT = 16;
const CONNECTIONS = 2;
const SNAPSHOT_POLL_MS = 20;
const REQUEST_TIMEOUT_MS = 30_000;
const PAD = 'x'.repeat(150); // ~200-byte items

const args = readCommandLine(
  process.argv.slice(2),
  {
    items: { default: '300000', help: 'items preloaded and then overwritten (about 200 bytes each)' },
    'snapshot-after-bytes': { default: String(8 * 1024 * 1024), help: 'the slice nodes\' snapshot threshold' },
    nodes: { default: '1', help: 'slice nodes' },
    workers: { default: '1', help: 'worker threads per slice node' },
    duration: { default: '30', help: 'seconds of measured writes' },
    puts: { default: '16', help: 'PutItem requests in flight' },
    batches: { default: '4', help: `BatchWrite requests (${BATCH_WRITE_ITEMS_MAX} puts each) in flight` },
    durability: { default: DURABILITY_DEFAULT, help: `slice node durability: ${DURABILITY_MODES.join(' | ')}` },
    seed: { default: '1', help: 'seed of the key choice' },
    json: { default: 'no', help: 'yes: print the result as one JSON line' },
  },
  'usage: node dist/bench/snapshot.js [options]',
).values;
const items = intArg('items', args.items, BATCH_WRITE_ITEMS_MAX, 50_000_000);
const snapshotAfterBytes = intArg('snapshot-after-bytes', args['snapshot-after-bytes'], 1024, 2 ** 40);
const nodes = intArg('nodes', args.nodes, 1, 16);
const workers = intArg('workers', args.workers, 1, 64);
const durationMs = intArg('duration', args.duration, 1, 3600) * 1000;
const putsInFlight = intArg('puts', args.puts, 0, 10_000);
const batchesInFlight = intArg('batches', args.batches, 0, 10_000);
const seed = intArg('seed', args.seed, 0, 2 ** 31);
if (!DURABILITY_MODES.includes(args.durability as DurabilityMode)) fail(`--durability must be one of ${DURABILITY_MODES.join(', ')}`);
const durability = args.durability as DurabilityMode;

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-snapshot-bench-'));
const cluster = await startLocalCluster({ dataDir, nodes, workers, durability, snapshotAfterBytes });
const stopAll = async () => {
  await cluster.stop();
  rmSync(dataDir, { recursive: true, force: true });
};
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));

const workerDirs = cluster.nodes.flatMap((n) => Array.from({ length: workers }, (_, w) => join(dataDir, n.name, `worker-${w}`)));
const itemOf = (i: number, v: number) => ({ device: `device-${i % 50_000}`, seq: i, v, pad: PAD });

/** Snapshots seen: each .snap.tmp from its first sighting to the sighting of its .snap. */
function watchSnapshots(): { stop: () => { count: number; msP50: number; msMax: number } } {
  const open = new Map<string, number>();
  const tookMs: number[] = [];
  const timer = setInterval(() => {
    const now = performance.now();
    for (const dir of workerDirs) {
      let files: string[];
      try {
        files = readdirSync(dir);
      } catch {
        continue; // not created yet
      }
      for (const f of files) if (f.endsWith('.snap.tmp') && !open.has(join(dir, f))) open.set(join(dir, f), now);
      for (const [tmp, since] of open) {
        if (tmp.startsWith(dir) && files.includes(tmp.slice(dir.length + 1, -'.tmp'.length))) {
          tookMs.push(now - since);
          open.delete(tmp);
        }
      }
    }
  }, SNAPSHOT_POLL_MS);
  return {
    stop: () => {
      clearInterval(timer);
      const sorted = tookMs.sort((a, b) => a - b);
      return { count: sorted.length, msP50: sorted[Math.floor(sorted.length / 2)] ?? 0, msMax: sorted.at(-1) ?? 0 };
    },
  };
}

function summary(latenciesMs: number[], seconds: number) {
  const s = Float64Array.from(latenciesMs).sort();
  const pct = (p: number) => (s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]);
  const r = (n: number) => Math.round(n * 10) / 10;
  return { ops: s.length, opsPerS: Math.round(s.length / seconds), p50: r(pct(50)), p99: r(pct(99)), p999: r(pct(99.9)), max: r(s.at(-1) ?? 0) };
}

try {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => KeysliceClient.connect(cluster.url, { requestTimeoutMs: REQUEST_TIMEOUT_MS })));
  await clients[0].createTable('snap', { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });

  const loadStart = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: PRELOAD_IN_FLIGHT }, async (_, l) => {
      while (next < items) {
        const from = next;
        next = Math.min(items, next + BATCH_WRITE_ITEMS_MAX);
        const puts = [];
        for (let i = from; i < next; i++) puts.push(itemOf(i, 0));
        await clients[l % CONNECTIONS].batchWrite('snap', { puts });
      }
    }),
  );
  process.stderr.write(`preloaded ${items} items in ${((performance.now() - loadStart) / 1000).toFixed(1)} s\n`);

  const r = prng(seed);
  const pick = () => Math.floor(r() * items);
  /** A BatchWrite may not name an item twice. */
  const distinct = (n: number) => {
    const chosen = new Set<number>();
    while (chosen.size < n) chosen.add(pick());
    return [...chosen];
  };
  const putMs: number[] = [];
  const batchMs: number[] = [];
  let errors = 0;
  const watch = watchSnapshots();
  const start = performance.now();
  const end = start + durationMs;
  let version = 0;
  const loop = async (l: number, batch: boolean) => {
    const client = clients[l % CONNECTIONS];
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        if (batch) await client.batchWrite('snap', { puts: distinct(BATCH_WRITE_ITEMS_MAX).map((i) => itemOf(i, ++version)) });
        else await client.putItem('snap', itemOf(pick(), ++version));
        (batch ? batchMs : putMs).push(performance.now() - t0);
      } catch {
        errors++;
      }
    }
  };
  await Promise.all([...Array.from({ length: putsInFlight }, (_, l) => loop(l, false)), ...Array.from({ length: batchesInFlight }, (_, l) => loop(l, true))]);
  const seconds = (performance.now() - start) / 1000;
  const snapshots = watch.stop();
  const result = {
    items,
    nodes,
    workers,
    snapshotAfterBytes,
    durability,
    seconds: Math.round(seconds),
    putItem: summary(putMs, seconds),
    batchWrite: summary(batchMs, seconds),
    errors,
    snapshots: { completed: snapshots.count, msP50: Math.round(snapshots.msP50), msMax: Math.round(snapshots.msMax) },
  };
  if (args.json === 'yes') console.log(JSON.stringify(result));
  else {
    console.log(`${items} items, ${nodes} node(s) x ${workers} worker(s), snapshot after ${snapshotAfterBytes} log bytes, durability ${durability}, ${result.seconds} s:`);
    for (const [name, s] of [['PutItem', result.putItem], ['BatchWrite', result.batchWrite]] as const) {
      console.log(`  ${name.padEnd(10)} ${String(s.ops).padStart(7)} ops ${String(s.opsPerS).padStart(6)}/s  p50 ${s.p50} ms  p99 ${s.p99} ms  p99.9 ${s.p999} ms  max ${s.max} ms`);
    }
    console.log(`  snapshots completed: ${snapshots.count} (.tmp to .snap: p50 ${result.snapshots.msP50} ms, max ${result.snapshots.msMax} ms); errors: ${errors}`);
  }
  await Promise.all(clients.map((c) => c.close()));
} finally {
  await stopAll();
}

// Slice moves: load N items into one slice node, add a second node and drain
// the first, so that every item moves; time the drain, and measure client
// latency (a closed loop of GetItem and PutItem, `--clients` in flight) before
// and during it. The coordinator runs at --replication-factor 1: a drain copies
// the slices' items (slice moves); replicated slices change their replica sets
// instead (docs/replication.md), and a 2-node cluster at the auto factor (R=2)
// refuses to drain one of its nodes.
//   node dist/bench/move.js [--items 100000] [--move-items-per-second 200000] [--clients 16]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { BATCH_WRITE_ITEMS_MAX, MOVE_ITEMS_PER_SECOND_DEFAULT } from '../shared/limits.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    items: { default: '100000', help: 'items to load and move (about 200 bytes each)' },
    'move-items-per-second': { default: String(MOVE_ITEMS_PER_SECOND_DEFAULT), help: 'the coordinator move throttle' },
    clients: { default: '16', help: 'requests in flight in the latency probe' },
    'baseline-seconds': { default: '5', help: 'how long to measure latency before the move' },
    slices: { default: '1024', help: 'slice count' },
  },
  'usage: node dist/bench/move.js [options]',
).values;
const items = intArg('items', args.items, 1, 10_000_000);
const clients = intArg('clients', args.clients, 1, 1000);
const baselineMs = intArg('baseline-seconds', args['baseline-seconds'], 1, 600) * 1000;
const MOVE_WAIT_MS = 600_000;

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-move-bench-'));
const procs: ManagedProcess[] = [];
const stopAll = async () => {
  await Promise.all(procs.map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
};
process.on('SIGINT', () => void stopAll().then(() => process.exit(130)));

async function status(url: string): Promise<ClusterStatus> {
  return (await (await fetch(`${url}/cluster/status`, { signal: AbortSignal.timeout(30_000) })).json()) as ClusterStatus;
}
async function post(url: string, action: string, node: string): Promise<void> {
  const res = await fetch(`${url}/cluster/${action}`, { method: 'POST', body: JSON.stringify({ node }), signal: AbortSignal.timeout(30_000) });
  if (res.status !== 200) throw new Error(`${action} ${node}: ${await res.text()}`);
}
async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function pct(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// Set to 'stop' when the run ends, however it ends: the probes stop with it (a failed run's requests fail at once).
let phase: 'before' | 'during' | 'stop' = 'before';
try {
  const coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, [], intArg('slices', args.slices, 1, 65536), undefined, ['--move-items-per-second', args['move-items-per-second'], '--rebalance', 'no', '--replication-factor', '1']);
  procs.push(coordinator);
  const first = await startSliceNode({ name: 'node-1', dataDir: join(dataDir, 'node-1'), port: 0, workers: 2, coordinator: coordinator.url });
  procs.push(first);
  // Its slices are placed in the map as it registers, before the coordinator's link has its Assigned: joined is both.
  await until('node-1 to join', async () => {
    const s = await status(coordinator.url);
    return s.unassignedSlices === 0 && s.nodes.every((n) => n.up);
  }, 30_000);
  const client = await KeysliceClient.connect(coordinator.url, { requestTimeoutMs: 60_000 });
  await client.createTable('moving', { name: 'id', type: 'string' });
  const pad = 'x'.repeat(150);
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < items) {
        const from = next;
        next = Math.min(items, next + BATCH_WRITE_ITEMS_MAX);
        const puts = [];
        for (let i = from; i < next; i++) puts.push({ id: `item-${i}`, pad });
        const failures = await client.batchWrite('moving', { puts });
        if (failures.length > 0) throw new Error(`load failed: ${failures[0].message}`);
      }
    }),
  );
  const second = await startSliceNode({ name: 'node-2', dataDir: join(dataDir, 'node-2'), port: 0, workers: 2, coordinator: coordinator.url });
  procs.push(second);
  await until('node-2 to join', async () => (await status(coordinator.url)).nodes.some((n) => n.node === second.url && n.up), 30_000);

  // The probe: each loop alternates a GetItem and a PutItem of random items.
  const lat = { before: [] as number[], during: [] as number[] };
  let errors = 0;
  const probe = async () => {
    for (let n = 0; n < 10_000_000 && phase !== 'stop'; n++) {
      const id = `item-${Math.floor(Math.random() * items)}`;
      const p = phase as 'before' | 'during' | 'stop';
      const t = process.hrtime.bigint();
      try {
        if (n % 2 === 0) await client.getItem('moving', id);
        else await client.putItem('moving', { id, pad, n });
      } catch {
        errors++;
      }
      if (p !== 'stop') lat[p].push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  };
  const probes = Array.from({ length: clients }, probe);
  await new Promise((r) => setTimeout(r, baselineMs));
  phase = 'during';
  const started = Date.now();
  await post(coordinator.url, 'drain', first.url);
  let moved: ClusterStatus | undefined;
  await until('node-1 to be drained', async () => {
    moved = await status(coordinator.url);
    return moved.nodes.find((n) => n.node === first.url)!.slices === 0 && moved.moves.inFlight.length === 0;
  }, MOVE_WAIT_MS);
  const seconds = (Date.now() - started) / 1000;
  phase = 'stop';
  await Promise.all(probes);
  const check = await client.getAllItems({ table: 'moving', limit: 10_000 });
  await client.close();

  const row = (name: string, l: number[]) => {
    const s = [...l].sort((a, b) => a - b);
    // A phase may have no op (a drain of a few items can end before a probe's request does): its figures are '-'.
    const f = (v: number | undefined, digits: number) => (v === undefined || Number.isNaN(v) ? '-' : v.toFixed(digits)).padStart(8);
    return `${name.padEnd(14)} ${String(s.length).padStart(8)} ${f(pct(s, 50), 2)} ${f(pct(s, 99), 2)} ${f(s.at(-1), 1)}`;
  };
  console.log(`moved ${moved!.moves.itemsMoved.toLocaleString('en-US')} items in ${moved!.moves.completed} slice moves (${moved!.moves.failed} rolled back) in ${seconds.toFixed(2)} s: ${Math.round(moved!.moves.itemsMoved / seconds).toLocaleString('en-US')} items/s (throttle ${args['move-items-per-second']} items/s)`);
  console.log(`latency probe: ${clients} in flight, GetItem and PutItem alternating; ${errors} errors`);
  console.log(`${'phase'.padEnd(14)} ${'ops'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'max ms'.padStart(8)}`);
  console.log(row('before move', lat.before));
  console.log(row('during move', lat.during));
  console.log(`after: ${check.length.toLocaleString('en-US')} items readable (loaded ${items.toLocaleString('en-US')})`);
} finally {
  phase = 'stop';
  await stopAll();
}

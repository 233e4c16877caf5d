// The replication core's own cost, R=1 against R=3, side by side: one slice's
// replicas (slice-worker/replication/replica.ts) on their real disks
// (replica-log.ts, one folder each, the chosen durability), in ONE process, with
// messages handed over at the next turn (no network). Writers keep --in-flight
// writes of --bytes each waiting for their commit. This is not the cluster's
// write throughput (slice nodes do not replicate yet: docs/replication.md); it
// says what ordering, shipping and the extra flushes of a majority cost.
//   node dist/bench/replication.js [--seconds 3] [--in-flight 64] [--bytes 200] [--durability fsync|os]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { DURABILITY_DEFAULT, DURABILITY_MODES, type DurabilityMode } from '../shared/limits.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { COORDINATOR, Replica, type ReplicationMessage } from '../slice-worker/replication/replica.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    seconds: { default: '3', help: 'how long each factor runs' },
    'in-flight': { default: '64', help: 'writes waiting for their commit at any time' },
    bytes: { default: '200', help: 'payload bytes per write' },
    durability: { default: DURABILITY_DEFAULT, help: `${DURABILITY_MODES.join(' | ')}` },
  },
  'usage: node dist/bench/replication.js [options]',
).values;
const seconds = intArg('seconds', args.seconds, 1, 600);
const inFlight = intArg('in-flight', args['in-flight'], 1, 100_000);
const bytes = intArg('bytes', args.bytes, 0, 1 << 20);
if (!DURABILITY_MODES.includes(args.durability as DurabilityMode)) fail(`--durability must be one of ${DURABILITY_MODES.join(', ')}`);
const durability = args.durability as DurabilityMode;

async function run(factor: number): Promise<{ perSecond: number; p50Ms: number; p99Ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'keyslice-replication-bench-'));
  try {
    let queue: { from: number; to: number; m: ReplicationMessage }[] = [];
    let scheduled = false;
    const waiting = new Map<number, { at: number; done: () => void }>();
    const deliver = () => {
      scheduled = false;
      const now = queue;
      queue = [];
      for (const { from, to, m } of now) if (to !== COORDINATOR) replicas[to].receive(from, m);
    };
    const replicas = Array.from({ length: factor }, (_, i) => {
      const { log } = ReplicaLog.open(join(dir, `replica-${i}`), durability);
      return new Replica(
        i,
        {
          send: (to, m) => {
            queue.push({ from: i, to, m });
            if (!scheduled) {
              scheduled = true;
              setImmediate(deliver);
            }
          },
          disk: log.diskFor(0),
          apply: () => {},
          restore: () => {},
          snapshotState: () => new Uint8Array(0),
          committed: (index) => {
            for (const [at, w] of waiting) {
              if (at > index) break;
              waiting.delete(at);
              w.done();
            }
          },
          now: () => performance.now(),
        },
        { promisedTerm: 0, snapshot: null, records: [], commitIndex: 0 },
      );
    });
    for (const r of replicas) r.receive(COORDINATOR, { type: 'Prepare', term: 1 });
    await new Promise((r) => setTimeout(r, 50));
    replicas[0].receive(COORDINATOR, { type: 'Lead', term: 1, followers: replicas.slice(1).map((r) => r.id), sets: [] });
    const leader = replicas[0];
    const payload = new Uint8Array(bytes).fill(7);
    const latencies: number[] = [];
    let done = 0;
    const until = performance.now() + seconds * 1000;
    const writer = async () => {
      while (performance.now() < until) {
        const at = performance.now();
        await new Promise<void>((resolve) => waiting.set(leader.propose(payload)!, { at, done: resolve }));
        latencies.push(performance.now() - at);
        done++;
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: inFlight }, writer));
    const elapsed = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    return { perSecond: done / elapsed, p50Ms: latencies[Math.floor(latencies.length / 2)], p99Ms: latencies[Math.floor(latencies.length * 0.99)] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`replication core, one process, durability ${durability}, ${inFlight} writes in flight of ${bytes} bytes, ${seconds} s each`);
const results: Record<number, number> = {};
for (const factor of [1, 3]) {
  const r = await run(factor);
  results[factor] = r.perSecond;
  console.log(`R=${factor}: ${Math.round(r.perSecond).toLocaleString('en-US')} commits/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms`);
}
console.log(`R=3 / R=1: ${(results[3] / results[1]).toFixed(2)}`);

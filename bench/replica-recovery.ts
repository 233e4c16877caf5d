// Times what a slice node's worker does at start with its replica log (docs/replication.md, bench/FAILOVER.md):
// reading the log back (ReplicaLog.open) and starting each slice's replica on a store (SliceReplicas: the
// committed records applied). Usage: node dist/bench/replica-recovery.js <worker folder> [--worker-index i --workers n] [--repeat k] [--checkpoint]
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { SliceStore } from '../slice-worker/partition.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { SliceReplicas } from '../slice-worker/replication/slice-replicas.js';
import { initHashing } from '../shared/hashing.js';
import { intArg, readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import { WORKERS_PER_NODE_DEFAULT, WORKERS_PER_NODE_MAX } from '../shared/limits.js';

const USAGE = 'usage: node dist/bench/replica-recovery.js <worker folder> [--worker-index 0 --workers 2] [--repeat 3] [--checkpoint]';
const { values: opts, positionals } = readCommandLine(
  process.argv.slice(2),
  { 'worker-index': { type: 'string', default: '0' }, workers: { type: 'string', default: String(WORKERS_PER_NODE_DEFAULT) }, repeat: { type: 'string', default: '3' }, checkpoint: { type: 'boolean', default: false } },
  USAGE,
  { positionals: true },
);
if (positionals.length !== 1) refuseCommandLine(`takes one worker folder, got ${positionals.length}`, USAGE);
const dir = positionals[0];
const workers = intArg('workers', opts.workers, 1, WORKERS_PER_NODE_MAX);
const workerIndex = intArg('worker-index', opts['worker-index'], 0, workers - 1);
const repeat = intArg('repeat', opts.repeat, 1, 1_000);
await initHashing();
for (let k = 0; k < repeat; k++) {
  const t0 = performance.now();
  const { log, recovery } = ReplicaLog.open(join(dir, 'replicas'), 'os');
  const t1 = performance.now();
  const store = new SliceStore(workerIndex, workers, Date.now, { readsPerSecond: 0, writesPerSecond: 0 });
  let records = 0;
  for (const s of log.sliceIds) records += log.durable(s).records.length;
  const t2 = performance.now();
  new SliceReplicas(0, store, log, () => {});
  const t3 = performance.now();
  console.log(`${log.sliceIds.length} slices, ${recovery.replayed} log records, ${records} replica records, ${store.itemCount} items: open ${Math.round(t1 - t0)} ms, replicas ${Math.round(t3 - t2)} ms`);
}

// --checkpoint: what the same start costs after the replicas compacted their logs and the log was checkpointed
// (what the worker does once the log passed its threshold).
if (opts.checkpoint) {
  const { log } = ReplicaLog.open(join(dir, 'replicas'), 'os');
  const store = new SliceStore(workerIndex, workers, Date.now, { readsPerSecond: 0, writesPerSecond: 0 });
  const replicas = new SliceReplicas(0, store, log, () => {});
  const t0 = performance.now();
  replicas.compact();
  await log.checkpoint();
  console.log(`checkpoint ${Math.round(performance.now() - t0)} ms`);
  for (let k = 0; k < repeat; k++) {
    const t1 = performance.now();
    const { log: again, recovery } = ReplicaLog.open(join(dir, 'replicas'), 'os');
    const t2 = performance.now();
    const s2 = new SliceStore(workerIndex, workers, Date.now, { readsPerSecond: 0, writesPerSecond: 0 });
    new SliceReplicas(0, s2, again, () => {});
    const t3 = performance.now();
    console.log(`after the checkpoint: ${recovery.replayed} log records, ${s2.itemCount} items: open ${Math.round(t2 - t1)} ms, replicas ${Math.round(t3 - t2)} ms`);
  }
}

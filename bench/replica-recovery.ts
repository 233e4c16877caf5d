// Times what a slice node's worker does at start with its replica log (docs/replication.md, bench/FAILOVER.md):
// reading the log back (ReplicaLog.open) and starting each slice's replica on a store (SliceReplicas: the
// committed records applied). Usage: node dist/bench/replica-recovery.js <worker folder> [--worker-index i --workers n] [--repeat k]
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { SliceStore } from '../slice-worker/partition.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { SliceReplicas } from '../slice-worker/replication/slice-replicas.js';
import { initHashing } from '../shared/hashing.js';

const [dir, ...rest] = process.argv.slice(2);
const opt = (name: string, d: number) => {
  const i = rest.indexOf(`--${name}`);
  return i >= 0 ? Number(rest[i + 1]) : d;
};
await initHashing();
const workerIndex = opt('worker-index', 0);
const workers = opt('workers', 2);
for (let k = 0; k < opt('repeat', 3); k++) {
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
if (rest.includes('--checkpoint')) {
  const { log } = ReplicaLog.open(join(dir, 'replicas'), 'os');
  const store = new SliceStore(workerIndex, workers, Date.now, { readsPerSecond: 0, writesPerSecond: 0 });
  const replicas = new SliceReplicas(0, store, log, () => {});
  const t0 = performance.now();
  replicas.compact();
  await log.checkpoint();
  console.log(`checkpoint ${Math.round(performance.now() - t0)} ms`);
  for (let k = 0; k < opt('repeat', 3); k++) {
    const t1 = performance.now();
    const { log: again, recovery } = ReplicaLog.open(join(dir, 'replicas'), 'os');
    const t2 = performance.now();
    const s2 = new SliceStore(workerIndex, workers, Date.now, { readsPerSecond: 0, writesPerSecond: 0 });
    new SliceReplicas(0, s2, again, () => {});
    const t3 = performance.now();
    console.log(`after the checkpoint: ${recovery.replayed} log records, ${s2.itemCount} items: open ${Math.round(t2 - t1)} ms, replicas ${Math.round(t3 - t2)} ms`);
  }
}

// A worker thread (piscina task module). Each thread owns the slices with
// slice % workerCount === workerIndex for its whole life: one writer, no locks.
// A task is one batch: packed slice ops in, packed results out.
import { move } from 'piscina';
import { workerData } from 'node:worker_threads';
import { decodeSliceOps, encodeSliceResults, type SliceOpResult } from '../shared/protocol.js';
import { SliceStore } from './partition.js';

const { workerIndex, workerCount } = workerData as { workerIndex: number; workerCount: number };
const store = new SliceStore(workerIndex, workerCount);

export default function runBatch(opsBytes: Uint8Array): unknown {
  const ops = decodeSliceOps(opsBytes);
  const results: SliceOpResult[] = new Array(ops.length);
  for (let i = 0; i < ops.length; i++) results[i] = store.execute(ops[i]);
  // Pack with a buffer we own (a copy), so the transfer cannot detach msgpackr's.
  const out = new Uint8Array(encodeSliceResults(results));
  return move(out);
}

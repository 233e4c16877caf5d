// A worker thread (piscina task module). Each thread owns the slices with
// slice % workerCount === workerIndex for its whole life: one writer, no locks.
//
// Tasks: 'open' recovers the worker's state from its folder (snapshot, then
// log); 'batch' runs one or more packed op batches, appends their changes to
// the log as one record (group commit) and only then returns the results, so
// nothing is acknowledged before it is as durable as the mode promises.
//
// Snapshots run between tasks, in steps, while batches go on (snapshot() below).
import { mkdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { workerData } from 'node:worker_threads';
import { assert } from '../shared/errors.js';
import { SNAPSHOT_STEP_MS, type DurabilityMode, type SliceCapacity } from '../shared/limits.js';
import { checkSliceOp, decodeSliceOps, encodeSliceResults, MalformedFrame, RESULT_ERROR, type SliceOpMessage, type SliceOpResult } from '../shared/protocol.js';
import { decodeEffects, encodeEffects, RECORD_KIND } from './log-format.js';
import { SliceStore } from './partition.js';

import { loadSnapshot, writeSnapshot } from './snapshot.js';
import { WriteAheadLog } from './wal.js';

export interface WorkerConfig {
  workerIndex: number;
  workerCount: number;
  dataDir: string;
  durability: DurabilityMode;
  snapshotAfterBytes: number;
  capacity: SliceCapacity;
}

/** `trusted[i]`: chunk i comes from the node itself (its assignment), not from a Batch frame. */
export type WorkerTask = { kind: 'open' } | { kind: 'batch'; chunks: Uint8Array[]; trusted: boolean[] };
/** One chunk's packed results, or why the chunk was refused whole (its bytes are not a list of ops). */
export type ChunkOutcome = Uint8Array | string;

export interface OpenSummary {
  items: number;
  snapshotItems: number;
  replayedRecords: number;
  tornBytes: number;
  ms: number;
}

const config = workerData as WorkerConfig;
const store = new SliceStore(config.workerIndex, config.workerCount, Date.now, config.capacity);
let log: WriteAheadLog | null = null;

function open(): OpenSummary {
  const started = performance.now();
  mkdirSync(config.dataDir, { recursive: true });
  const snapshot = loadSnapshot(config.dataDir, (e) => store.replay(e));
  const opened = WriteAheadLog.open(config.dataDir, config.durability, snapshot.lsn, (r) => {
    if (r.kind === RECORD_KIND.Effects) for (const e of decodeEffects(r.payload)) store.replay(e);
  });
  log = opened.log;
  return {
    items: store.itemCount,
    snapshotItems: snapshot.items,
    replayedRecords: opened.recovery.replayed,
    tornBytes: opened.recovery.tornBytes,
    ms: Math.round(performance.now() - started),
  };
}

function runBatches(chunks: Uint8Array[], trusted: boolean[]): ChunkOutcome[] {
  if (log === null) throw new Error('invariant broken: a batch reached the worker before it was opened');
  const out: ChunkOutcome[] = [];
  for (let c = 0; c < chunks.length; c++) {
    let ops: unknown[];
    try {
      ops = decodeSliceOps(chunks[c]);
    } catch (err) {
      if (!(err instanceof MalformedFrame)) throw err;
      out.push(err.message);
      continue;
    }
    // Each op is checked whole before it runs: a bad one gets its error, the others run.
    const results: SliceOpResult[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const problem = checkSliceOp(ops[i], trusted[c]);
      results[i] = problem === null ? store.execute(ops[i] as SliceOpMessage) : [RESULT_ERROR, 'MalformedRequest', problem];
    }
    out.push(encodeSliceResults(results));
  }
  const effects = store.takeEffects();
  if (effects.length > 0) log.append(RECORD_KIND.Effects, encodeEffects(effects));
  if (log.bytesSinceSnapshot >= config.snapshotAfterBytes && !snapshotting) {
    snapshotting = true;
    setImmediate(startSnapshot, log); // after this task has answered, not inside it
  }
  return out;
}

/** One snapshot at a time; a log that grows past the threshold meanwhile waits for the next one. */
let snapshotting = false;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function startSnapshot(wal: WriteAheadLog): void {
  snapshot(wal).then(
    () => {
      snapshotting = false;
    },
    (err) => {
      // Like a failed append: the disk is in trouble, so the worker fails and the node stops. Whatever
      // step failed, the files recover: the older snapshot and every segment since it, or the new
      // snapshot and the segments it does not cover.
      process.nextTick(() => {
        throw err;
      });
    },
  );
}

/** Starts a new log segment and takes a point-in-time view of the items, both between two tasks (so
 * the view is exactly the log up to the new segment); writes the view in steps, letting the tasks
 * that arrive run between them; only once the snapshot is durable drops the older segments. A crash
 * before that leaves the older snapshot and every segment since it, which recover as before. */
async function snapshot(wal: WriteAheadLog): Promise<void> {
  await wal.flush();
  const lsn = wal.nextLsn - 1;
  wal.startSegment();
  assert(wal.currentSegmentFirstLsn === lsn + 1, 'the segment after a snapshot point starts right after it');
  const view = store.snapshotView();
  await writeSnapshot(config.dataDir, lsn, view, { stepMs: SNAPSHOT_STEP_MS, between: nextTurn });
  await wal.dropSegmentsBefore(lsn + 1);
}

export default function run(task: WorkerTask): OpenSummary | ChunkOutcome[] {
  return task.kind === 'open' ? open() : runBatches(task.chunks, task.trusted);
}

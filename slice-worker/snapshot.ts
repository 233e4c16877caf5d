// A worker's snapshot: every item it holds, as of a log sequence number.
// Written to a temporary file, fsynced and renamed, so a snapshot file is
// either whole or absent; its records are checksummed like the log's and it
// ends with a record giving the item count.
//
// A snapshot is written in steps while the worker goes on serving: the items
// come from a point-in-time view (SliceStore.snapshotView), and each step
// encodes records for about `stepMs`, hands them to the file system (a write
// done off the thread) and then waits for `between`, which in the worker lets
// the batches that came in meanwhile run. So a worker stops serving for one
// step at a time, not for the whole snapshot.
//
// Files: snapshot-<last lsn covered, 16 digits>.snap. Only the newest is kept.
import { readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { open, readdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { syncDirAsync, writeAllAsync } from '../shared/durable-file.js';
import { assert } from '../shared/errors.js';
import type { Effect, SnapshotView } from './partition.js';
import { CorruptFileError, frameRecord, readRecords } from './record-file.js';
import { decodeEffects, decodeSnapshotEnd, encodeSnapshotEnd, RECORD_KIND } from './log-format.js';

const SNAPSHOT = /^snapshot-(\d{16})\.snap$/;
const snapshotName = (lsn: number) => `snapshot-${String(lsn).padStart(16, '0')}.snap`;

export interface SnapshotPacing {
  /** How long one step encodes records before it hands them to the file system (at least one record). */
  stepMs: number;
  /** Awaited between two steps: the worker lets waiting batches run here. */
  between: () => Promise<void>;
}

/** Writes a snapshot of `view` covering the log up to `lsn`, in steps; removes older snapshots once
 * the new one is durable. Answers the item count. Until it resolves, the older snapshot (and the log
 * segments the caller keeps) are what a restart recovers from. */
export async function writeSnapshot(dir: string, lsn: number, view: SnapshotView, pacing: SnapshotPacing): Promise<number> {
  const final = join(dir, snapshotName(lsn));
  const tmp = `${final}.tmp`;
  const file = await open(tmp, 'w');
  let count = 0;
  let seq = 1;
  try {
    let done = false;
    while (!done) {
      const started = performance.now();
      const records: Buffer[] = [];
      do {
        const chunk = view.nextChunk();
        done = chunk.exhausted;
        if (chunk.payload !== null) {
          // frameRecord copies the payload out of the encoder's reused buffer before the next chunk is encoded.
          records.push(frameRecord(seq++, RECORD_KIND.SnapshotItems, chunk.payload));
          count += chunk.count;
        }
      } while (!done && performance.now() - started < pacing.stepMs);
      if (done) {
        assert(count === view.items, `a snapshot holds the ${view.items} items of its view, wrote ${count}`);
        records.push(frameRecord(seq++, RECORD_KIND.SnapshotEnd, encodeSnapshotEnd({ items: count, lsn })));
      }
      await writeAllAsync(file, records.length === 1 ? records[0] : Buffer.concat(records));
      if (!done) await pacing.between();
    }
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, final);
  await syncDirAsync(dir);
  // The new snapshot is durable: older ones are no longer needed.
  for (const f of await readdir(dir)) if (SNAPSHOT.test(f) && f !== snapshotName(lsn)) await unlink(join(dir, f));
  return count;
}

/** Loads the newest snapshot into `apply`; returns the lsn it covers (0 if none). */
export function loadSnapshot(dir: string, apply: (e: Effect) => void): { lsn: number; items: number } {
  for (const f of readdirSync(dir)) if (f.endsWith('.snap.tmp')) unlinkSync(join(dir, f)); // never completed
  const newest = readdirSync(dir)
    .filter((f) => SNAPSHOT.test(f))
    .sort()
    .at(-1);
  if (newest === undefined) return { lsn: 0, items: 0 };
  const file = join(dir, newest);
  const lsn = Number(SNAPSHOT.exec(newest)![1]);
  const result = readRecords(file, readFileSync(file), 1);
  if (result.tornAt !== null) throw new CorruptFileError(file, result.tornAt, 'the snapshot is incomplete');
  const end = result.records.at(-1);
  if (end === undefined || end.kind !== RECORD_KIND.SnapshotEnd) throw new CorruptFileError(file, result.validBytes, 'the snapshot has no end record');
  let items = 0;
  for (const r of result.records) {
    if (r.kind !== RECORD_KIND.SnapshotItems) continue;
    for (const e of decodeEffects(r.payload)) {
      apply(e);
      items++;
    }
  }
  const summary = decodeSnapshotEnd(end.payload);
  if (summary.items !== items || summary.lsn !== lsn) {
    throw new CorruptFileError(file, end.offset, `the snapshot holds ${items} items up to record ${lsn}; its end record says ${summary.items} up to ${summary.lsn}`);
  }
  return { lsn, items };
}

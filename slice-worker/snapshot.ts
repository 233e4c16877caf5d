// A worker's snapshot: every item it holds, as of a log sequence number.
// Written to a temporary file, fsynced and renamed, so a snapshot file is
// either whole or absent; its records are checksummed like the log's and it
// ends with a record giving the item count.
//
// Files: snapshot-<last lsn covered, 16 digits>.snap. Only the newest is kept.
import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { syncDir, writeAll } from '../shared/durable-file.js';
import { SNAPSHOT_CHUNK_ITEMS } from '../shared/limits.js';
import type { Effect } from './partition.js';
import { CorruptFileError, frameRecord, readRecords } from './record-file.js';
import { decodeEffects, decodeSnapshotEnd, encodeEffects, encodeSnapshotEnd, RECORD_KIND } from './log-format.js';

const SNAPSHOT = /^snapshot-(\d{16})\.snap$/;
const snapshotName = (lsn: number) => `snapshot-${String(lsn).padStart(16, '0')}.snap`;

/** Writes a snapshot of `entries` covering the log up to `lsn`; removes older snapshots. */
export function writeSnapshot(dir: string, lsn: number, entries: Iterable<Effect>): number {
  const final = join(dir, snapshotName(lsn));
  const tmp = `${final}.tmp`;
  const fd = openSync(tmp, 'w');
  let count = 0;
  let seq = 1;
  try {
    const write = (kind: number, payload: Uint8Array) => {
      writeAll(fd, frameRecord(seq++, kind, payload));
    };
    let chunk: Effect[] = [];
    for (const e of entries) {
      chunk.push(e);
      if (chunk.length === SNAPSHOT_CHUNK_ITEMS) {
        write(RECORD_KIND.SnapshotItems, encodeEffects(chunk));
        count += chunk.length;
        chunk = [];
      }
    }
    if (chunk.length > 0) write(RECORD_KIND.SnapshotItems, encodeEffects(chunk));
    count += chunk.length;
    write(RECORD_KIND.SnapshotEnd, encodeSnapshotEnd({ items: count, lsn }));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, final);
  syncDir(dir);
  for (const f of readdirSync(dir)) if (SNAPSHOT.test(f) && f !== snapshotName(lsn)) unlinkSync(join(dir, f));
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

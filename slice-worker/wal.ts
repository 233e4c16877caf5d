// A worker's write-ahead log: numbered segments of checksummed records
// (record-file.ts), one record per batch of changes, appended and, in 'fsync'
// mode, fdatasync'ed before the batch is acknowledged. One log per worker, not
// per slice: a worker is the single writer of all its slices, so one append and
// one flush cover every write of a batch (group commit), whatever the slices.
//
// Files: wal-<first lsn, 16 digits>.log. A segment starts where the previous
// one ended; a snapshot (snapshot.ts) starts a new segment and, once the
// snapshot is durable, lets the older segments go. After a power loss in 'os'
// mode (open) a segment past a gap is renamed <name>.cut, out of the log.
import { close, closeSync, existsSync, fdatasync, fdatasyncSync, fsync, fsyncSync, ftruncateSync, openSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { syncDir, syncDirAsync, writeAll, writevAll } from '../shared/durable-file.js';
import { assert } from '../shared/errors.js';
import { LOG_MOVED_ASIDE_NAMES_MAX, LOG_WRITE_BYTES_MAX, type DurabilityMode } from '../shared/limits.js';
import { CorruptFileError, frameRecord, frameRecordParts, readRecords, recordBytes, type FileRecord } from './record-file.js';

const SEGMENT = /^wal-(\d{16})\.log$/;
const segmentName = (firstLsn: number) => `wal-${String(firstLsn).padStart(16, '0')}.log`;
/** What a segment moved aside at start ('os' mode, after a power loss) is renamed to: `<segment>.cut`, then `.cut-1`,
 * `.cut-2`... if an earlier start already moved one of that name aside. SEGMENT does not match it, so no later open,
 * firstSegmentLsn or dropSegmentsBefore sees it; it stays in the folder for the operator. */
const MOVED_ASIDE_SUFFIX = '.cut';

export interface LogRecovery {
  replayed: number;
  /** Bytes of torn records that were cut off (the last segment's, or in 'os' mode the segment the log now ends in), 0 if none. */
  tornBytes: number;
  /** 'os' mode, after a power loss kept a later segment and lost an earlier one's tail (the OS writes its page cache
   * out in any order): the segments after the break, moved aside (their new paths), empty if none. */
  movedAside: string[];
  /** The record the log ends at once opened (the snapshot's, `afterLsn`, if it holds none after it). */
  lastLsn: number;
}
/** What an open cut, in words for the node's start line (empty when it cut nothing). */
export function describeCuts(recovery: LogRecovery): string {
  const parts: string[] = [];
  if (recovery.tornBytes > 0) parts.push(`cut a torn tail of ${recovery.tornBytes} bytes`);
  if (recovery.movedAside.length > 0) {
    parts.push(`ended the log at record ${recovery.lastLsn} where a power loss left a gap ('os' mode), and moved the ${recovery.movedAside.length === 1 ? 'segment' : `${recovery.movedAside.length} segments`} after it aside: ${recovery.movedAside.join(', ')}`);
  }
  return parts.join('; ');
}

/** The record number the oldest segment in `dir` starts at, or null when there is none. */
export function firstSegmentLsn(dir: string): number | null {
  const firsts = readdirSync(dir)
    .map((f) => SEGMENT.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  return firsts.length === 0 ? null : Math.min(...firsts);
}

/** Renames a segment to a name SEGMENT does not match (MOVED_ASIDE_SUFFIX), never over an existing file. */
function moveAside(file: string): string {
  for (let n = 0; n < LOG_MOVED_ASIDE_NAMES_MAX; n++) {
    const aside = `${file}${MOVED_ASIDE_SUFFIX}${n === 0 ? '' : `-${n}`}`;
    if (existsSync(aside)) continue;
    renameSync(file, aside);
    return aside;
  }
  throw new Error(`cannot move ${file} aside: ${LOG_MOVED_ASIDE_NAMES_MAX} files of its name were moved aside before`);
}

export class WriteAheadLog {
  private fd: number;
  private segmentFirstLsn: number;
  /** Log bytes written since the last snapshot (or since start). */
  bytesSinceSnapshot = 0;

  private constructor(
    private readonly dir: string,
    private readonly mode: DurabilityMode,
    private nextLsnValue: number,
    fd: number,
    segmentFirstLsn: number,
  ) {
    this.fd = fd;
    this.segmentFirstLsn = segmentFirstLsn;
  }

  /** Opens the log in `dir`, handing every record after `afterLsn` (what the snapshot covers) to `replay` in order.
   * Cuts a torn tail off the last segment. A segment other than the last that is torn, or that the next one does not
   * follow (a gap), is corruption in 'fsync' mode: every record was synced before the next segment was started. In
   * 'os' mode it is what a power loss leaves (startSegment syncs the old segment off the thread, after the new one
   * exists): the log ends at its last whole record, unless the snapshot covers what is missing (the next segment starts
   * at most right after `afterLsn`), and the segments after the break are moved aside, not replayed past a gap. */
  static open(dir: string, mode: DurabilityMode, afterLsn: number, replay: (r: FileRecord) => void): { log: WriteAheadLog; recovery: LogRecovery } {
    const segments = readdirSync(dir)
      .map((f) => SEGMENT.exec(f))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => ({ file: join(dir, m[0]), firstLsn: Number(m[1]) }))
      .sort((a, b) => a.firstLsn - b.firstLsn);
    let nextLsn = afterLsn + 1;
    let replayed = 0;
    let replayedBytes = 0;
    let tornBytes = 0;
    const movedAside: string[] = [];
    /** The last segment kept and the record after its last one. */
    let tail: { file: string; firstLsn: number; end: number } | null = null;
    if (segments.length > 0 && segments[0].firstLsn > nextLsn) {
      throw new CorruptFileError(segments[0].file, 0, `the log starts at record ${segments[0].firstLsn} but the snapshot ends at ${afterLsn}: records are missing`);
    }
    for (let i = 0; i < segments.length; i++) {
      const { file, firstLsn } = segments[i];
      const next = segments.at(i + 1);
      const buf = readFileSync(file);
      const result = readRecords(file, buf, firstLsn);
      if (result.tornAt !== null) {
        if (next !== undefined && mode === 'fsync') throw new CorruptFileError(file, result.tornAt, 'a segment other than the last ends in an incomplete record');
        tornBytes += buf.length - result.validBytes;
        const fd = openSync(file, 'r+');
        ftruncateSync(fd, result.validBytes);
        fsyncSync(fd);
        closeSync(fd);
      }
      const segmentEnd = firstLsn + result.records.length;
      // A segment starts where the one before ended; in 'os' mode, after a lost tail, it may start later.
      if (next !== undefined && (next.firstLsn < segmentEnd || (next.firstLsn > segmentEnd && mode === 'fsync'))) {
        throw new CorruptFileError(next.file, 0, `segment starts at record ${next.firstLsn}, but the one before ends at ${segmentEnd - 1}`);
      }
      for (const r of result.records) {
        if (r.lsn <= afterLsn) continue;
        replay(r);
        replayed++;
        replayedBytes += recordBytes(r.payload);
      }
      nextLsn = Math.max(nextLsn, segmentEnd);
      tail = { file, firstLsn, end: segmentEnd };
      // What is missing between this segment and the next is covered by the snapshot: nothing after it is lost.
      if (next === undefined || next.firstLsn <= afterLsn + 1) continue;
      if (next.firstLsn === segmentEnd) continue;
      // 'os' mode, records missing past the snapshot: the log ends here, and what follows the gap is moved aside.
      for (const later of segments.slice(i + 1)) movedAside.push(moveAside(later.file));
      syncDir(dir);
      break;
    }
    let log: WriteAheadLog;
    if (tail !== null && tail.end === nextLsn) {
      log = new WriteAheadLog(dir, mode, nextLsn, openSync(tail.file, 'a'), tail.firstLsn);
    } else {
      // No segment, or ('os' mode, after a power loss) the last one kept ends before the snapshot's point: appending
      // there would leave a gap inside a segment, so the next record starts one of its own.
      log = new WriteAheadLog(dir, mode, nextLsn, -1, nextLsn);
      void log.startSegment(); // the first segment: its name is on disk when this returns, in either mode
    }
    // What a start replays counts toward the next snapshot: a process restarted more often than it writes its
    // threshold's worth would otherwise never take one, and each start would replay a longer log (bench/FAILOVER.md).
    log.bytesSinceSnapshot = replayedBytes;
    return { log, recovery: { replayed, tornBytes, movedAside, lastLsn: nextLsn - 1 } };
  }

  get nextLsn(): number {
    return this.nextLsnValue;
  }

  /** Appends one record; when this returns, it is as durable as the mode promises. */
  append(kind: number, payload: Uint8Array): number {
    const lsn = this.nextLsnValue;
    const bytes = frameRecord(lsn, kind, payload);
    writeAll(this.fd, bytes);
    if (this.mode === 'fsync') fdatasyncSync(this.fd);
    this.nextLsnValue++;
    this.bytesSinceSnapshot += bytes.length;
    return lsn;
  }

  /** Appends records (a checkpoint's, one per slice) in writes of about LOG_WRITE_BYTES_MAX, not synced: durable as the
   * mode promises once flush(true) answers (a checkpoint's steps call this between turns, and a sync of each step's
   * own would stall the worker; synced one by one per slice they stalled it for a sync per slice, and joined into one
   * write they held the whole checkpoint twice in memory). A payload is given whole or in parts (frameRecordParts);
   * either way it is written as it is, framed but not copied, in one writev per write (a copy into the frame and
   * another into the write cost a checkpoint more than its checksums: bench/README.md, "A compaction writes the items'
   * kept bytes"), so each must stay as it is until this returns (a view into an encoder's reused buffer, as msgpackr's are, is copied first). */
  appendAll(records: Iterable<[kind: number, payload: Uint8Array | readonly Uint8Array[]]>): void {
    let framed: Buffer[] = [];
    let framedBytes = 0;
    let count = 0;
    let written = 0;
    const write = () => {
      if (framed.length === 0) return;
      writevAll(this.fd, framed);
      written += framedBytes;
      framed = [];
      framedBytes = 0;
    };
    for (const [kind, payload] of records) {
      const parts = frameRecordParts(this.nextLsnValue + count++, kind, payload instanceof Uint8Array ? [payload] : payload);
      let bytes = 0;
      for (const p of parts) bytes += p.byteLength;
      if (framedBytes + bytes > LOG_WRITE_BYTES_MAX) write();
      framed.push(...parts);
      framedBytes += bytes;
    }
    write();
    this.nextLsnValue += count;
    this.bytesSinceSnapshot += written;
  }

  /** The lsn the current segment starts at. */
  get currentSegmentFirstLsn(): number {
    return this.segmentFirstLsn;
  }

  /** Flushes the current segment off this thread. In 'os' mode a segment can hold many MiB that the
   * OS has not written yet; flushing them here first keeps startSegment's own fsync short. In 'fsync' mode every
   * append was synced already, but for appendAll's (never synced): `unsynced` flushes those. */
  flush(unsynced = false): Promise<void> {
    if (this.mode === 'fsync' && !unsynced) return Promise.resolve(); // every append was flushed already
    const fd = this.fd;
    return new Promise((resolve, reject) => fdatasync(fd, (err) => (err === null ? resolve() : reject(err))));
  }

  /** Closes the current segment and starts a new one at the next lsn; answers once the old segment and the new
   * file's name are on disk. In 'fsync' mode that is before this returns, so that an acknowledged record (each is
   * synced as it is appended) cannot be lost with its file's name. In 'os' mode an append promises only what the
   * OS holds, which a process crash keeps, the new name included: the old segment's fsync and the folder's go off
   * the thread (each checkpoint and snapshot stalled the worker on them), and whoever drops the older segments
   * waits for the answer first, so they go only once what replaces them is on disk. */
  startSegment(): Promise<void> {
    const old = this.fd;
    this.segmentFirstLsn = this.nextLsnValue;
    this.fd = openSync(join(this.dir, segmentName(this.segmentFirstLsn)), 'a');
    this.bytesSinceSnapshot = 0;
    if (this.mode === 'fsync' || old < 0) {
      if (old >= 0) {
        fsyncSync(old);
        closeSync(old);
      }
      syncDir(this.dir);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => fsync(old, (err) => (err === null ? resolve() : reject(err))))
      .then(() => new Promise<void>((resolve, reject) => close(old, (err) => (err === null ? resolve() : reject(err)))))
      .then(() => syncDirAsync(this.dir));
  }

  /** Removes the segments that end before `firstKept` (a durable snapshot covers them). `firstKept`
   * is where a segment starts, the current one or an earlier one, so no segment is cut in two. */
  async dropSegmentsBefore(firstKept: number): Promise<void> {
    assert(firstKept <= this.segmentFirstLsn, `segments from ${firstKept} on are kept, and the current one starts at ${this.segmentFirstLsn}`);
    // Oldest first (the names are zero-padded): a crash midway leaves segments that still follow one another.
    const files = (await readdir(this.dir)).sort();
    assert(files.includes(segmentName(firstKept)), `a segment starts at record ${firstKept}`);
    for (const f of files) {
      const m = SEGMENT.exec(f);
      if (m !== null && Number(m[1]) < firstKept) await unlink(join(this.dir, f));
    }
    await syncDirAsync(this.dir);
  }
}

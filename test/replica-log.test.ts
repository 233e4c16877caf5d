// The disk of a worker's slice replicas (slice-worker/replication/replica-log.ts):
// what is read back after a restart is what the replicas wrote, per slice, as the
// replication core's own disk model says (applyDiskOp); a torn tail is cut; a
// checkpoint keeps the state and drops the older segments; and a process
// SIGKILLed while writing loses nothing that a sync had answered.
import { spawn } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Packr, Unpackr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { REPLICA_CHECKPOINT_AFTER_BYTES, REPLICA_CHECKPOINT_LOG_FACTOR } from '../shared/limits.js';
import { CorruptFileError, readRecords } from '../slice-worker/record-file.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { checksumMatches, makeRecord } from '../slice-worker/replication/replica-record.js';
import { applyDiskOp, emptyDurable, type DiskOp, type DurableReplica } from '../slice-worker/replication/replica.js';
import { describeCuts, WriteAheadLog } from '../slice-worker/wal.js';
import { RECORD_KIND } from '../slice-worker/log-format.js';
import { rng } from './cluster-fixture.js';
import { expectEqual } from './expect-equal.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'ks-replica-log-'));
  dirs.push(d);
  return d;
};

/** A valid next op for a slice whose durable state is `d`. */
function randomOp(d: DurableReplica, r: () => number): DiskOp {
  const snapIndex = d.snapshot?.index ?? 0;
  const last = snapIndex + d.records.length;
  const lastTerm = d.records.at(-1)?.term ?? d.snapshot?.term ?? 0;
  const x = r();
  if (x < 0.1) return { kind: 'promise', term: d.promisedTerm + 1 };
  if (x < 0.2 && last > d.commitIndex) return { kind: 'truncate', after: d.commitIndex + Math.floor(r() * (last - d.commitIndex)) };
  if (x < 0.35 && last > d.commitIndex) return { kind: 'commit', index: d.commitIndex + 1 + Math.floor(r() * (last - d.commitIndex)) };
  if (x < 0.4 && d.commitIndex > snapIndex) {
    const index = d.commitIndex;
    return { kind: 'snapshot', index, term: d.records[index - snapIndex - 1].term, state: new TextEncoder().encode(`state@${index}`) };
  }
  const count = 1 + Math.floor(r() * 3);
  const term = Math.max(lastTerm, d.promisedTerm, 1);
  return { kind: 'append', records: Array.from({ length: count }, (_, i) => makeRecord(term, last + 1 + i, new TextEncoder().encode(`v${last + 1 + i}-${r()}`))) };
}

const sync = (log: ReplicaLog, slice: number) => new Promise<void>((done) => log.diskFor(slice).sync(done));

/** Runs a checkpoint of `log` and calls `onTurn` at each event-loop turn until it is done. Bounded in time, not in
 * turns alone: a turn is microseconds, and the checkpoint first waits for the older segment's fdatasync (tens of MB
 * in these tests), which a disk other processes load took over 10,000 turns to answer. */
async function duringCheckpoint(log: ReplicaLog, onTurn: () => void | Promise<void>): Promise<void> {
  let done = false;
  const checkpointed = log.checkpoint().then(() => (done = true));
  const deadline = performance.now() + 30_000;
  for (let turn = 0; turn < 10_000_000 && !done && performance.now() < deadline; turn++) {
    await new Promise((r) => setImmediate(r));
    await onTurn();
  }
  await checkpointed;
}

describe('the replica log of a worker', () => {
  it('reads back, after each restart, exactly what the replicas of each slice wrote', async () => {
    const dir = tempDir();
    const r = rng(11);
    const model = new Map<number, DurableReplica>([1, 2, 1025].map((s) => [s, emptyDurable()]));
    let { log } = ReplicaLog.open(dir, 'fsync');
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 25; i++) {
        const slice = [1, 2, 1025][Math.floor(r() * 3)];
        const op = randomOp(model.get(slice)!, r);
        applyDiskOp(model.get(slice)!, op);
        log.diskFor(slice).write(op);
        if (r() < 0.3) await sync(log, slice);
      }
      await sync(log, 1);
      if (round % 4 === 2) await log.checkpoint(); // rounds 2, 6, 10: each slice's record in one write (and sync)
      ({ log } = ReplicaLog.open(dir, 'fsync'));
      for (const [slice, d] of model) expect(log.durable(slice), `slice ${slice} after round ${round}`).toEqual(d);
    }
    expect(log.sliceIds).toEqual([1, 2, 1025]);
  });

  it('reads back ops written field by field at every msgpack width: slice, term, index, list and payload lengths', async () => {
    // A flush's append and commit ops are written by hand (shared/protocol.ts putRecordList, putUint), not by msgpackr: each number
    // around the boundaries of fixint, 8, 16 and 32 bits and a double, lists of 15, 16, 65,535 and 65,536 records,
    // payloads of 255, 256, 65,535 and 65,536 bytes, in one flush and read back as the disk model says. Each width has a
    // slice of its own, and its commit lies past its snapshot (applyDiskOp keeps the larger of the two, which would hide a
    // commit written wrong). Commit-only slices (no snapshot, no records) check each commit value at each width itself.
    const dir = tempDir();
    const model = new Map<number, DurableReplica>();
    let { log } = ReplicaLog.open(dir, 'os');
    const widths = [0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 0x100000000, 2 ** 47]; // (a record's term and index fit 48 bits)
    const counts = [1, 15, 16, 0xffff, 0x10000, 2, 1, 3, 1];
    const lengths = [0, 1, 0xff, 0x100, 0xffff, 0x10000];
    const slices = [0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x10001, 0xffffffff];
    const commits = [0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 2 ** 32, 2 ** 47, Number.MAX_SAFE_INTEGER];
    const write = (slice: number, op: DiskOp) => {
      if (!model.has(slice)) model.set(slice, emptyDurable());
      applyDiskOp(model.get(slice)!, op);
      log.diskFor(slice).write(op);
    };
    widths.forEach((w, i) => {
      const slice = slices[i];
      const count = counts[i];
      write(slice, { kind: 'promise', term: w });
      write(slice, { kind: 'snapshot', index: w, term: w, state: new Uint8Array(lengths[i % lengths.length]).fill(i) });
      write(slice, { kind: 'append', records: Array.from({ length: count }, (_, k) => makeRecord(w, w + 1 + k, new Uint8Array(k < lengths.length ? lengths[(i + k) % lengths.length] : 1).fill(k & 0xff))) });
      write(slice, { kind: 'commit', index: w + 1 + (i % 2) * (count - 1) }); // its first record or its last
    });
    commits.forEach((c, k) => write(0x20000 + k, { kind: 'commit', index: c }));
    expect(new Set(model.keys()).size).toBe(widths.length + commits.length);
    for (const [slice, d] of model) if (slice < 0x20000) expect(d.commitIndex, `slice ${slice}`).toBeGreaterThan(d.snapshot!.index);
    await sync(log, 0);
    ({ log } = ReplicaLog.open(dir, 'os'));
    for (const [slice, d] of model) expectEqual(log.durable(slice), d, `slice ${slice}`);
    // A checkpoint's records are written field by field too, each slice's state as it is (checkpointParts): read back
    // the same, and each record the same values as msgpackr's pack of [slice, state] (what the build before wrote).
    await log.checkpoint();
    const checkpoints = readRecords('wal', readFileSync(join(dir, readdirSync(dir).find((f) => f.endsWith('.log'))!)), null).records;
    expect(checkpoints).toHaveLength(model.size);
    const plain = new Unpackr({ useRecords: false, mapsAsObjects: true });
    for (const r of checkpoints) {
      const [slice] = plain.unpack(r.payload) as [number];
      expectEqual(plain.unpack(r.payload), plain.unpack(new Packr({ useRecords: false }).pack([slice, model.get(slice)])), `slice ${slice}`);
    }
    ({ log } = ReplicaLog.open(dir, 'os'));
    for (const [slice, d] of model) expectEqual(log.durable(slice), d, `slice ${slice}`);
  });

  it('opens a log whose checkpoint msgpackr packed whole (as builds before checkpointParts wrote it)', () => {
    const dir = tempDir();
    const records = [makeRecord(3, 11, new Uint8Array(300).fill(1)), makeRecord(3, 12, new Uint8Array(0))];
    const states: [number, DurableReplica][] = [
      [5, { promisedTerm: 3, commitIndex: 11, snapshot: { index: 10, term: 2, state: new Uint8Array(70_000).fill(9) }, records }],
      [0x10000, { promisedTerm: 2 ** 40, commitIndex: 0, snapshot: null, records: [] }],
    ];
    const { log: wal } = WriteAheadLog.open(dir, 'os', 0, () => {});
    for (const s of states) wal.append(RECORD_KIND.ReplicaCheckpoint, new Packr({ useRecords: false }).pack(s));
    const { log } = ReplicaLog.open(dir, 'os');
    for (const [slice, d] of states) expect(log.durable(slice), `slice ${slice}`).toEqual(d);
  });

  it('cuts a torn tail and keeps every record before it', async () => {
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'fsync');
    const disk = log.diskFor(7);
    disk.write({ kind: 'promise', term: 1 });
    disk.write({ kind: 'append', records: [makeRecord(1, 1, new Uint8Array([1, 2, 3]))] });
    await sync(log, 7);
    const segment = readdirSync(dir).find((f) => f.endsWith('.log'))!;
    appendFileSync(join(dir, segment), Buffer.from([0, 0, 0, 40, 0, 0, 0, 0, 0, 9])); // a header cut short
    const again = ReplicaLog.open(dir, 'fsync');
    expect(again.recovery.tornBytes).toBe(10);
    expect(again.log.durable(7).records.map((x) => [x.term, x.index, [...x.payload]])).toEqual([[1, 1, [1, 2, 3]]]);
    expect(again.log.durable(7).promisedTerm).toBe(1);
  });

  it('after a power loss kept a checkpoint\'s segment and lost the tail of the one before: starts from the longest intact prefix in os mode, moving the later segment aside; refuses in fsync mode', async () => {
    // startSegment syncs the old segment off the thread after the new one exists, so in 'os' mode the page cache may
    // write the new segment out and lose the old one's tail. The node used to refuse to start (a torn segment other
    // than the last, or a gap between segments).
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    for (let i = 1; i <= 10; i++) {
      log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array([i]))] });
      await sync(log, 3); // a record each
    }
    const [oldName] = readdirSync(dir).filter((f) => f.endsWith('.log'));
    const oldBytes = readFileSync(join(dir, oldName));
    await log.checkpoint(); // a new segment, and the old one dropped
    for (let i = 11; i <= 12; i++) {
      log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array([i]))] });
      await sync(log, 3);
    }
    const [newName] = readdirSync(dir).filter((f) => f.endsWith('.log'));
    expect(newName).not.toBe(oldName);
    const lastRecord = readRecords(oldName, oldBytes, null).records.at(-1)!;
    // The power-loss images: the old segment's last record torn (a header cut short), or lost whole (a gap).
    for (const [lost, cut, torn] of [['torn', lastRecord.offset + 7, 7], ['gap', lastRecord.offset, 0]] as const) {
      const image = tempDir();
      cpSync(dir, image, { recursive: true });
      writeFileSync(join(image, oldName), oldBytes.subarray(0, cut));
      const fsyncImage = tempDir();
      cpSync(image, fsyncImage, { recursive: true });

      expect(() => ReplicaLog.open(fsyncImage, 'fsync'), `${lost}: fsync mode refuses`).toThrow(CorruptFileError);
      expect(readdirSync(fsyncImage).filter((f) => f.endsWith('.log')).sort(), `${lost}: fsync mode moves nothing`).toEqual([oldName, newName]);

      const opened = ReplicaLog.open(image, 'os');
      expect(opened.log.durable(3).records.map((r) => r.index), `${lost}: the intact prefix`).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(opened.recovery.tornBytes).toBe(torn);
      expect(opened.recovery.movedAside).toEqual([join(image, `${newName}.cut`)]);
      expect(opened.recovery.lastLsn).toBe(lastRecord.lsn - 1);
      expect(describeCuts(opened.recovery)).toContain(`${newName}.cut`);
      expect(readdirSync(image).filter((f) => f.includes('.log')).sort()).toEqual([oldName, `${newName}.cut`]);
      expect(readFileSync(join(image, `${newName}.cut`)), 'moved aside whole').toEqual(readFileSync(join(dir, newName)));
      // It goes on from there: a write, a restart that cuts nothing more, and a checkpoint that leaves the moved file be.
      opened.log.diskFor(3).write({ kind: 'append', records: [makeRecord(2, 10, new Uint8Array([99]))] });
      await sync(opened.log, 3);
      const again = ReplicaLog.open(image, 'os');
      expect(again.recovery.movedAside).toEqual([]);
      expect(again.recovery.tornBytes).toBe(0);
      expect(again.log.durable(3).records.map((r) => [r.term, r.index])).toEqual([...Array.from({ length: 9 }, (_, i) => [1, i + 1]), [2, 10]]);
      await again.log.checkpoint();
      expect(readdirSync(image).filter((f) => f.includes('.log')).length, `${lost}: one segment and the moved one`).toBe(2);
      expect(readdirSync(image)).toContain(`${newName}.cut`);
      expect(ReplicaLog.open(image, 'os').log.durable(3).records).toHaveLength(10);
    }
  });

  it('reads back a leader\'s barrier (an empty record) with its checksum whole', async () => {
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'fsync');
    log.diskFor(4).write({ kind: 'append', records: [makeRecord(2, 1, new Uint8Array(0))] });
    await sync(log, 4);
    const [barrier] = ReplicaLog.open(dir, 'fsync').log.durable(4).records;
    expect(barrier.payload).toHaveLength(0);
    expect(checksumMatches(barrier)).toBe(true);
  });

  it('forgets a dropped slice: not read back after a restart, left out of the next checkpoint, and a disk handed out before the drop writes nothing', async () => {
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'fsync');
    const before = log.diskFor(5);
    for (const slice of [5, 6]) {
      log.diskFor(slice).write({ kind: 'promise', term: 2 });
      log.diskFor(slice).write({ kind: 'append', records: [makeRecord(2, 1, new Uint8Array([slice]))] });
    }
    // Written and not synced yet: the drop writes it first, then forgets the slice.
    log.diskFor(5).write({ kind: 'commit', index: 1 });
    log.drop(5);
    before.write({ kind: 'append', records: [makeRecord(2, 2, new Uint8Array([9]))] }); // the dropped replica's handle
    await sync(log, 6);
    expect(log.sliceIds).toEqual([6]);
    let again = ReplicaLog.open(dir, 'fsync').log;
    expect(again.sliceIds).toEqual([6]);
    expect(again.durable(5), 'nothing but the term it promised').toEqual({ ...emptyDurable(), promisedTerm: 2 });
    expect(again.durable(6).records).toHaveLength(1);
    // A replica of slice 5 made later starts empty and is kept as any other.
    again.diskFor(5).write({ kind: 'promise', term: 7 });
    await sync(again, 5);
    await again.checkpoint();
    again.drop(6);
    await again.checkpoint();
    again = ReplicaLog.open(dir, 'fsync').log;
    expect(again.sliceIds).toEqual([5]);
    expect(again.durable(5)).toEqual({ ...emptyDurable(), promisedTerm: 7 });
  });

  it('keeps one segment after a checkpoint', async () => {
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    for (let i = 1; i <= 50; i++) log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array([i]))] });
    await sync(log, 3);
    await log.checkpoint();
    expect(readdirSync(dir).filter((f) => f.endsWith('.log'))).toHaveLength(1);
    expect(ReplicaLog.open(dir, 'os').log.durable(3).records).toHaveLength(50);
  });

  it('writes a compaction\'s snapshot into the checkpoint only, though ops after it were logged first; until that is durable, the older segments read back to the same records', async () => {
    // Each checkpoint used to pack, checksum and write every compacted slice's whole state twice: in the segment
    // the checkpoint then drops, and in the checkpoint (bench/README.md, replication on slice nodes).
    const dir = tempDir();
    const copy = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    const state = new Uint8Array(100_000).fill(7);
    const segmentBytes = () => readdirSync(dir).filter((f) => f.endsWith('.log')).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    for (let i = 1; i <= 50; i++) log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array([i]))] });
    log.diskFor(3).write({ kind: 'commit', index: 50 });
    await sync(log, 3);
    const before = segmentBytes();
    log.diskFor(3).compacted({ kind: 'snapshot', index: 50, term: 1, state }); // a compaction's
    // Turns pass before the checkpoint (a worker compacts its slices in steps): ops written and synced after the
    // snapshot are logged, the snapshot is not, and a crash then reads back the records it covers, with theirs.
    log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, 51, new Uint8Array([51]))] });
    await sync(log, 3);
    expect(log.durable(3).snapshot?.index).toBe(50);
    expect(log.snapshotsAwaitingCheckpoint).toBe(1);
    const checkpointed = log.checkpoint(); // its first step (the flush) runs now; the rest after a turn
    expect(segmentBytes() - before).toBeLessThan(1_000);
    cpSync(dir, copy, { recursive: true }); // a crash before the checkpoint is written: the records are there
    const crashed = ReplicaLog.open(copy, 'os').log.durable(3);
    expect([crashed.snapshot, crashed.records.length, crashed.commitIndex]).toEqual([null, 51, 50]);
    await checkpointed;
    expect(log.snapshotsAwaitingCheckpoint).toBe(0);
    const after = ReplicaLog.open(dir, 'os').log.durable(3);
    expect([after.snapshot?.index, after.snapshot?.state, after.records.length]).toEqual([50, state, 1]);
    // A snapshot a sync waits on (a follower installing its leader's) is logged before it is answered.
    log.diskFor(3).write({ kind: 'snapshot', index: 51, term: 1, state });
    let answered = false;
    log.diskFor(3).sync(() => (answered = true));
    const again = segmentBytes();
    const second = log.checkpoint();
    expect(answered).toBe(true);
    expect(segmentBytes() - again).toBeGreaterThan(state.length);
    await second;
  });

  it('reads back every committed record, or the compaction\'s snapshot in their place, after a crash at any turn of a checkpoint', async () => {
    // The older segments may go only once the checkpoint that holds the compaction's snapshot is on disk: a crash
    // between their removal and its write (or amid its syncs) would read back a slice without its records.
    for (const mode of ['os', 'fsync'] as const) {
      const dir = tempDir();
      const { log } = ReplicaLog.open(dir, mode);
      const state = new Uint8Array(100_000).fill(7);
      for (let i = 1; i <= 50; i++) log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array([i]))] });
      log.diskFor(3).write({ kind: 'commit', index: 50 });
      await sync(log, 3);
      log.diskFor(3).compacted({ kind: 'snapshot', index: 50, term: 1, state });
      log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, 51, new Uint8Array([51]))] });
      await sync(log, 3);
      let done = false;
      const checkpointed = log.checkpoint().then(() => (done = true));
      const seen = new Set<string>();
      for (let turn = 0; turn < 1_000 && !done; turn++) {
        // The process killed now: its folder as it is (an unlink running meanwhile on the thread pool may cut a copy short).
        const copy = tempDir();
        let copied = true;
        try {
          cpSync(dir, copy, { recursive: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          copied = false;
        }
        if (copied) {
          const d = ReplicaLog.open(copy, mode).log.durable(3);
          const found = d.snapshot === null ? `records ${d.records.length}` : `snapshot ${d.snapshot.index}, records ${d.records.length}`;
          expect([`${mode}: ${found}`, d.commitIndex]).toEqual([`${mode}: ${d.snapshot === null ? 'records 51' : 'snapshot 50, records 1'}`, 50]);
          if (d.snapshot !== null) expect(d.snapshot.state).toEqual(state);
          seen.add(found);
        }
        await new Promise((r) => setImmediate(r));
      }
      await checkpointed;
      expect([...seen].sort(), `${mode}: crashes before the checkpoint was written and after`).toEqual(['records 51', 'snapshot 50, records 1']);
    }
  });

  it('counts what a restart read back toward the next checkpoint, and knows the size of the checkpoint it starts with', async () => {
    // A node restarted more often than it writes a checkpoint's worth used to start counting from 0 each time, so
    // its log (and each restart's replay) only grew under repeated SIGKILLs (bench/FAILOVER.md).
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    for (let i = 1; i <= 50; i++) log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array(100))] });
    await sync(log, 3);
    const written = log.bytesSinceCheckpoint;
    expect(written).toBeGreaterThan(5_000);
    const again = ReplicaLog.open(dir, 'os').log;
    expect(again.bytesSinceCheckpoint).toBe(written);
    expect(again.checkpointBytes).toBe(0);
    await again.checkpoint();
    const size = again.checkpointBytes;
    expect(size).toBeGreaterThan(5_000);
    again.diskFor(3).write({ kind: 'commit', index: 50 });
    await sync(again, 3);
    const third = ReplicaLog.open(dir, 'os').log;
    expect(third.checkpointBytes).toBe(size);
    expect(third.bytesSinceCheckpoint).toBe(again.bytesSinceCheckpoint);
  });

  it('is due for a checkpoint after the floor of bytes, or REPLICA_CHECKPOINT_LOG_FACTOR times the last checkpoint if more', async () => {
    // A trigger at a fixed size re-encodes the whole live state ever more often per byte written as that state grows;
    // one relative to the last checkpoint keeps that rewrite a fixed share of what is written (bench/README.md).
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    const floor = 2_000; // --snapshot-after-bytes below REPLICA_CHECKPOINT_AFTER_BYTES: the floor
    for (let i = 1; i <= 50; i++) log.diskFor(3).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array(100))] });
    await sync(log, 3);
    expect(log.bytesSinceCheckpoint).toBeGreaterThan(floor);
    expect(log.checkpointDue(floor), 'past the floor, with no checkpoint yet').toBe(true);
    expect(log.checkpointDue(REPLICA_CHECKPOINT_AFTER_BYTES), 'below the default floor').toBe(false);
    await log.checkpoint();
    const size = log.checkpointBytes;
    expect(size).toBeGreaterThan(floor);
    // Single commits, each a small record, until just short of the factor times the checkpoint.
    let index = 0;
    for (;;) {
      const before = log.bytesSinceCheckpoint;
      index++;
      log.diskFor(3).write({ kind: 'commit', index: 50 });
      await sync(log, 3);
      const step = log.bytesSinceCheckpoint - before;
      if (log.bytesSinceCheckpoint + step >= REPLICA_CHECKPOINT_LOG_FACTOR * size) break;
      expect(index, 'bounded').toBeLessThan(100_000);
    }
    expect(log.bytesSinceCheckpoint).toBeGreaterThan(floor);
    expect(log.checkpointDue(floor), `${log.bytesSinceCheckpoint} bytes since a checkpoint of ${size}`).toBe(false);
    index++;
    log.diskFor(3).write({ kind: 'commit', index: 50 });
    await sync(log, 3);
    expect(log.checkpointDue(floor), `${log.bytesSinceCheckpoint} bytes since a checkpoint of ${size}`).toBe(true);
  });

  it('checkpoints without holding the whole checkpoint in memory at once (its records go in writes of LOG_WRITE_BYTES_MAX)', async () => {
    // Joined into one write, a checkpoint of 128 MiB of slice states raised the process's peak memory by 256 MiB (the
    // records framed, then concatenated), on top of the states it already held.
    const dir = tempDir();
    const module = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'slice-worker', 'replication');
    const SLICES = 32;
    const MIB = 4;
    const script = `
      const { ReplicaLog } = await import(${JSON.stringify(join(module, 'replica-log.js'))});
      const { log } = ReplicaLog.open(${JSON.stringify(dir)}, 'os');
      for (let s = 1; s <= ${SLICES}; s++) {
        const disk = log.diskFor(s);
        disk.write({ kind: 'promise', term: 1 });
        disk.write({ kind: 'snapshot', index: 1, term: 1, state: new Uint8Array(${MIB} * 1024 * 1024).fill(s) });
        await new Promise((done) => disk.sync(done));
      }
      globalThis.gc();
      const before = process.resourceUsage().maxRSS;
      await log.checkpoint();
      process.stdout.write(JSON.stringify({ grewKiB: process.resourceUsage().maxRSS - before }));`;
    const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (err += d));
    const code = await new Promise((r) => child.once('exit', r));
    expect([code, err]).toEqual([0, '']);
    const { grewKiB } = JSON.parse(out) as { grewKiB: number };
    expect(grewKiB / 1024, 'MiB the checkpoint added to the peak').toBeLessThan(SLICES * MIB); // ~60 here, as when each record was a write of its own (garbage the GC takes late)
    const { log } = ReplicaLog.open(dir, 'os');
    expect(log.sliceIds).toHaveLength(SLICES);
    for (const s of [1, SLICES]) expect(log.durable(s).snapshot!.state.every((b) => b === s)).toBe(true);
  });

  it('writes a checkpoint in steps, with turns between them: a write synced meanwhile is answered before the last slice\'s record (issue 14)', async () => {
    // Written in one turn, a worker's whole state held its thread for as long as packing and writing it took (0.4-1.3
    // s at 16 MB on a loaded host), and the coordinator's Pings to that worker waited (docs/replication.md, "A node
    // that answers"). Here 40 slices of 512 KiB each (20 MiB, far more than a SNAPSHOT_STEP_MS step packs): every turn
    // while the checkpoint runs looks at how many of its bytes are in the log, and one of them writes and syncs.
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'os');
    const SLICES = 40;
    for (let s = 1; s <= SLICES; s++) {
      log.diskFor(s).write({ kind: 'promise', term: 1 });
      log.diskFor(s).write({ kind: 'snapshot', index: 1, term: 1, state: new Uint8Array(512 * 1024).fill(s) });
    }
    await sync(log, 1);
    const before = log.bytesSinceCheckpoint; // the log so far; the checkpoint's segment starts again from 0
    const total = SLICES * 512 * 1024; // about: each record holds a state and a few bytes more
    /** log.bytesSinceCheckpoint at each turn while the checkpoint runs, once its segment began, and before its end. */
    const partway: number[] = [];
    let answeredAt = -1;
    await duringCheckpoint(log, () => {
      const b = log.bytesSinceCheckpoint;
      if (b === before || b === 0 || b >= total) return;
      partway.push(b);
      if (partway.length === 1) {
        log.diskFor(SLICES + 1).write({ kind: 'promise', term: 2 });
        log.diskFor(SLICES + 1).sync(() => (answeredAt = log.bytesSinceCheckpoint));
      }
    });
    expect(log.checkpointBytes).toBeGreaterThan(total);
    // Turns saw the checkpoint part written: more than one step, with turns between them.
    expect(partway.length, `turns that saw part of the checkpoint written (${partway.join(' ')})`).toBeGreaterThanOrEqual(2);
    // The write synced in the first of them was answered while the checkpoint's records were still being written.
    expect(answeredAt).toBeGreaterThan(0);
    expect(answeredAt).toBeLessThan(total);
    // And nothing is lost by the interleaving: every slice reads back whole, the late write with them.
    const { log: again } = ReplicaLog.open(dir, 'os');
    expect(again.sliceIds).toEqual(Array.from({ length: SLICES + 1 }, (_, i) => i + 1));
    for (const s of [1, SLICES]) expect(again.durable(s).snapshot!.state.every((b) => b === s)).toBe(true);
    expect(again.durable(SLICES + 1).promisedTerm).toBe(2);
  });

  it('a slice written to while a checkpoint runs, before its own record, reads back once the older segments are gone', async () => {
    // Records a flush logs between two steps land in the checkpoint's segment. For a slice whose checkpoint record
    // is yet to come, they came before it; once the older segments are dropped the log starts at the checkpoint, and
    // such an append replayed onto an empty slice (its earlier records went with the old segments) is a gap, which
    // open() refused ('a log grows without a gap'): the worker would not start again. open() leaves such ops out, as
    // the slice's record that follows replaces them.
    const dir = tempDir();
    const { log } = ReplicaLog.open(dir, 'fsync');
    const SLICES = 40;
    for (let s = 1; s <= SLICES; s++) {
      log.diskFor(s).write({ kind: 'promise', term: 1 });
      log.diskFor(s).write({ kind: 'append', records: [makeRecord(1, 1, new Uint8Array(256 * 1024).fill(s))] });
      log.diskFor(s).write({ kind: 'commit', index: 1 });
    }
    await sync(log, 1);
    /** log.bytesSinceCheckpoint when the writes below went in; -1 until then. */
    let wroteAt = -1;
    await duringCheckpoint(log, async () => {
      if (wroteAt >= 0 || log.bytesSinceCheckpoint === 0) return;
      // The first turn between steps: the last slice's record (slices go in the order they came) is not written yet.
      wroteAt = log.bytesSinceCheckpoint;
      log.diskFor(SLICES).write({ kind: 'append', records: [makeRecord(1, 2, new Uint8Array([7]))] });
      log.diskFor(SLICES).write({ kind: 'commit', index: 2 });
      await sync(log, SLICES);
      // And one written to, then dropped, before its record: its ops, then its drop record, no checkpoint record.
      log.diskFor(SLICES - 1).write({ kind: 'append', records: [makeRecord(2, 2, new Uint8Array([8]))] });
      log.diskFor(SLICES - 1).write({ kind: 'promise', term: 2 });
      await sync(log, SLICES - 1);
      log.drop(SLICES - 1);
    });
    // Between two steps, before the records of slices SLICES - 1 and SLICES (each record holds its slice's 256 KiB,
    // so under 39 of them were written): else the writes came after those records, and nothing here is tested.
    expect(wroteAt, 'checkpoint bytes in the log when a write went in between two steps').toBeGreaterThan(0);
    expect(wroteAt).toBeLessThan((SLICES - 1) * 256 * 1024);
    const { log: again } = ReplicaLog.open(dir, 'fsync');
    expect(again.sliceIds).toEqual(Array.from({ length: SLICES }, (_, i) => i + 1).filter((s) => s !== SLICES - 1));
    expect(again.durable(SLICES - 1)).toEqual({ promisedTerm: 2, snapshot: null, records: [], commitIndex: 0 });
    const last = again.durable(SLICES);
    expect(last.records.map((r) => r.index)).toEqual([1, 2]);
    expect(last.commitIndex).toBe(2);
    expect(again.durable(1).records.map((r) => r.index)).toEqual([1]);
  });

  it('still refuses a slice whose log has a gap that no checkpoint record after it covers', () => {
    // open() leaves out the ops of a slice that do not apply only until that slice's checkpoint record: one with none
    // after it is a gap in the slice's log, as before.
    const dir = tempDir();
    const { log: wal } = WriteAheadLog.open(dir, 'fsync', 0, () => {});
    const gapped: DiskOp = { kind: 'append', records: [makeRecord(1, 5, new Uint8Array([5]))] };
    wal.append(RECORD_KIND.ReplicaOps, new Packr({ useRecords: false }).pack([[3, gapped]]));
    expect(() => ReplicaLog.open(dir, 'fsync')).toThrow(/slices 3 has a gap that no checkpoint record after it covers/);
  });

  it('loses no synced write when killed at any turn of a checkpoint written while slices are written to', async () => {
    // The process killed at each turn of a stepped checkpoint (its folder copied as it is) while every turn appends
    // and syncs a record on one of the slices: each copy opens, and holds, for every slice, every record synced
    // before the copy, with no gap; and so does the log once the checkpoint dropped the older segments.
    for (const mode of ['os', 'fsync'] as const) {
      const dir = tempDir();
      const { log } = ReplicaLog.open(dir, mode);
      const SLICES = 12;
      const last = new Map<number, number>();
      for (let s = 1; s <= SLICES; s++) {
        log.diskFor(s).write({ kind: 'promise', term: 1 });
        log.diskFor(s).write({ kind: 'append', records: [makeRecord(1, 1, new Uint8Array(1024 * 1024).fill(s))] });
        last.set(s, 1);
      }
      await sync(log, 1);
      let done = false;
      const checkpointed = log.checkpoint().then(() => (done = true));
      let copies = 0;
      for (let turn = 0; turn < 1_000 && !done; turn++) {
        const s = 1 + ((SLICES - 1 - (turn % SLICES)) % SLICES); // the last slices first: their records come late
        const index = last.get(s)! + 1;
        log.diskFor(s).write({ kind: 'append', records: [makeRecord(1, index, new Uint8Array([index]))] });
        await sync(log, s);
        last.set(s, index);
        const copy = tempDir();
        try {
          cpSync(dir, copy, { recursive: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // a segment unlinked amid the copy
          continue;
        }
        copies++;
        const again = ReplicaLog.open(copy, mode).log;
        for (let k = 1; k <= SLICES; k++) {
          expect(again.durable(k).records.map((r) => r.index), `${mode}: slice ${k} after ${turn} turns`).toEqual(Array.from({ length: last.get(k)! }, (_, i) => i + 1));
        }
        await new Promise((r) => setImmediate(r));
      }
      await checkpointed;
      expect(copies, `${mode}: crashes amid the checkpoint`).toBeGreaterThanOrEqual(2);
      const again = ReplicaLog.open(dir, mode).log;
      for (let k = 1; k <= SLICES; k++) expect(again.durable(k).records.length, `${mode}: slice ${k} at the end`).toBe(last.get(k));
    }
  });

  it('loses nothing a sync answered when its process is SIGKILLed mid-write', async () => {
    const dir = tempDir();
    const module = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'slice-worker', 'replication');
    // The child appends one record per sync and prints each index once its sync is answered.
    const script = `
      const { ReplicaLog } = await import(${JSON.stringify(join(module, 'replica-log.js'))});
      const { makeRecord } = await import(${JSON.stringify(join(module, 'replica-record.js'))});
      const { log } = ReplicaLog.open(${JSON.stringify(dir)}, 'fsync');
      const disk = log.diskFor(9);
      for (let i = 1; i <= 1000000; i++) {
        disk.write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array(64).fill(i % 256))] });
        await new Promise((done) => disk.sync(done));
        process.stdout.write(i + '\\n');
      }`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (err += d));
    const until = Date.now() + 20_000;
    while (out.split('\n').length < 200 && Date.now() < until && child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(err).toBe('');
    const answered = out.split('\n').filter((l) => l !== '').map(Number);
    expect(answered.length).toBeGreaterThanOrEqual(199);
    const { log } = ReplicaLog.open(dir, 'fsync');
    const held = log.durable(9).records;
    expect(held.length).toBeGreaterThanOrEqual(answered.at(-1)!);
    held.forEach((rec, i) => expect(rec.index).toBe(i + 1));
  });
});

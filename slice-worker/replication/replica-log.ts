// The disk of a worker's slice replicas: what replica.ts writes (promises, records,
// cuts, commit points, snapshots) for every slice the worker replicates, in one
// write-ahead log (slice-worker/wal.ts: checksummed records, torn tail cut at
// start, corruption refused), so that one append and one flush cover every
// slice a task touched (group commit), as for the worker's own log.
//
// sync(done) of any slice's disk asks for that flush: the ops written so far, of
// every slice, become one record, appended and (in 'fsync' mode) fdatasync'ed at
// the end of the current turn (a microtask), and then the callbacks run in order.
// A failed append throws out of the flush: like the worker's log, the process
// stops rather than answer for what is not on disk.
//
// The log only grows until checkpoint(): it starts a new segment holding each
// slice's whole durable state (one record per slice) and then drops the older
// segments. A crash before the drop leaves old segments and the checkpoint, which
// replay to the same state (a checkpoint replaces what came before it).
//
// A compaction's snapshot (compacted(), which Replica.compact writes through) is not logged:
// its state is a copy of the slice's whole store, and it would be packed,
// checksummed and written twice, into a segment the checkpoint then drops. It
// goes into the log's view of the slice (what the next checkpoint writes) in its
// place among the slice's ops, and is durable only once that checkpoint is.
// Until then a restart replays the log without it: the records it covers are
// still there (they are committed, so on this disk, and records leave the log
// only with a checkpoint, which writes the view: with the snapshot), and the ops
// after it leave the same records past its index either way. A crash before the
// checkpoint loses the compaction, never a record; so a compaction may write its
// snapshots over many turns (a slice a step) and checkpoint once all are written.
//
// drop(slice) forgets a slice whose replica the node no longer holds: its records,
// snapshot and commit point, by a record that replays to nothing of them. All but
// the term it promised, which a replica made there later starts from, as a replica
// that restarts does: an election counted that promise to depose an older leader,
// which may still believe it leads and may still reach this node (replica.ts).
import { mkdirSync } from 'node:fs';
import { Packr, Unpackr } from 'msgpackr';
import { performance } from 'node:perf_hooks';
import { assert } from '../../shared/errors.js';
import { TRACE_STALLS } from '../../shared/stall-trace.js';
import { REPLICA_CHECKPOINT_AFTER_BYTES, REPLICA_CHECKPOINT_LOG_FACTOR, SNAPSHOT_STEP_MS, type DurabilityMode } from '../../shared/limits.js';
import { arrayHeader, binHeaderBytes, fixstr, putBinHeader, putUint, uintBytes } from '../../shared/msgpack-writer.js';
import { putRecordList, recordListBytes } from '../../shared/protocol.js';
import { RECORD_KIND } from '../log-format.js';
import { recordBytes } from '../record-file.js';
import { TRACE_TURNS, turns } from '../turn-trace.js';
import { firstSegmentLsn, WriteAheadLog, type LogRecovery } from '../wal.js';
import { applyDiskOp, emptyDurable, type DiskOp, type DurableReplica, type ReplicaDisk } from './replica.js';

const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true });
const APPEND_OP_HEAD = Uint8Array.from([0x82, ...fixstr('kind'), ...fixstr('append'), ...fixstr('records')]);
const COMMIT_OP_HEAD = Uint8Array.from([0x82, ...fixstr('kind'), ...fixstr('commit'), ...fixstr('index')]);

/** The msgpack of a flush's ops ([[slice, op], ...]) as open() reads it back: an append, the op of (about) every
 * record, written field by field (shared/protocol.ts putRecordList, as an Append's records), and a commit (as many:
 * a follower writes one with about every append, a leader one per slice and round) likewise; any other by packr.
 * The ops written by hand are the same values as packr's, not the same bytes: their map header is a fixmap (0x82,
 * APPEND_OP_HEAD, COMMIT_OP_HEAD) where msgpackr writes a map16 (de 00 02); keys and numbers are written as msgpackr
 * writes them. open()'s Unpackr reads both, so a log written before either way reads back the same
 * (test/replica-log.test.ts, every width).
 * Under writes spread over many slices a flush holds about an append and a commit per slice written, each append of
 * one record: msgpackr's walk over each map's keys was most of a flush, and its bytes a copy each. */
let opsBuffer = new Uint8Array(0);
let opsView = new DataView(opsBuffer.buffer);
function packOps(slices: readonly number[], ops: readonly DiskOp[], logs: readonly boolean[], count: number): Uint8Array {
  const head = arrayHeader(count);
  /** The bytes from packr of the ops not written by hand (neither an append nor a commit), in their order. */
  const packed: Uint8Array[] = [];
  let size = head.length;
  for (let i = 0; i < ops.length; i++) {
    if (!logs[i]) continue;
    const slice = slices[i];
    const op = ops[i];
    assert(Number.isSafeInteger(slice) && slice >= 0, 'a slice is a whole number');
    size += 1 + uintBytes(slice);
    if (op.kind === 'append') size += APPEND_OP_HEAD.length + recordListBytes(op.records);
    else if (op.kind === 'commit') {
      assert(Number.isSafeInteger(op.index) && op.index >= 0, 'a commit index is a whole number');
      size += COMMIT_OP_HEAD.length + uintBytes(op.index);
    } else {
      const bytes = Uint8Array.prototype.slice.call(packr.pack(op)); // a copy: packr's bytes view its reused buffer
      size += bytes.length;
      packed.push(bytes);
    }
  }
  // Into a buffer kept for the next flush: the log copies the payload as it frames it (WriteAheadLog.append).
  if (opsBuffer.byteLength < size) {
    opsBuffer = new Uint8Array(Math.max(size, 2 * opsBuffer.byteLength, 64 * 1024));
    opsView = new DataView(opsBuffer.buffer);
  }
  const out = opsBuffer.subarray(0, size);
  out.set(head, 0);
  let at = head.length;
  let next = 0;
  for (let i = 0; i < ops.length; i++) {
    if (!logs[i]) continue;
    const slice = slices[i];
    const op = ops[i];
    out[at++] = 0x92;
    at = putUint(out, opsView, at, slice);
    if (op.kind === 'append') {
      out.set(APPEND_OP_HEAD, at);
      at = putRecordList(out, opsView, at + APPEND_OP_HEAD.length, op.records);
    } else if (op.kind === 'commit') {
      out.set(COMMIT_OP_HEAD, at);
      at = putUint(out, opsView, at + COMMIT_OP_HEAD.length, op.index);
    } else {
      const bytes = packed[next++];
      out.set(bytes, at);
      at += bytes.length;
    }
  }
  assert(next === packed.length, 'every op packed by packr was written');
  assert(at === size, 'a flush\'s ops are as long as counted');
  return out;
}

const K_PROMISED = fixstr('promisedTerm');
const K_COMMIT = fixstr('commitIndex');
const K_SNAPSHOT = fixstr('snapshot');
const K_RECORDS = fixstr('records');
const SNAPSHOT_HEAD = Uint8Array.from([0x83, ...fixstr('index')]);
const K_TERM = fixstr('term');
const K_STATE = fixstr('state');

/** A checkpoint record's payload, [slice, state] (a DurableReplica: its four fields, the snapshot's three), in three
 * parts to be written one after another: what comes before the snapshot's state, the state as it is (a slice's
 * items, nearly all of the record), and the records after it; written field by field, as open() reads packr's
 * (test/replica-log.test.ts), so that the state is neither walked nor copied by packr, nor copied again into the
 * framed record and the write (WriteAheadLog.appendAll). */
function checkpointParts(slice: number, d: DurableReplica): Uint8Array[] {
  const s = d.snapshot;
  const headSize = 1 + uintBytes(slice) + 1 + K_PROMISED.length + uintBytes(d.promisedTerm) + K_COMMIT.length + uintBytes(d.commitIndex) + K_SNAPSHOT.length + (s === null ? 1 : SNAPSHOT_HEAD.length + uintBytes(s.index) + K_TERM.length + uintBytes(s.term) + K_STATE.length + binHeaderBytes(s.state.byteLength));
  const head = new Uint8Array(headSize);
  const headView = new DataView(head.buffer);
  let at = 0;
  head[at++] = 0x92;
  at = putUint(head, headView, at, slice);
  head[at++] = 0x84;
  head.set(K_PROMISED, at);
  at = putUint(head, headView, at + K_PROMISED.length, d.promisedTerm);
  head.set(K_COMMIT, at);
  at = putUint(head, headView, at + K_COMMIT.length, d.commitIndex);
  head.set(K_SNAPSHOT, at);
  at += K_SNAPSHOT.length;
  if (s === null) head[at++] = 0xc0;
  else {
    head.set(SNAPSHOT_HEAD, at);
    at = putUint(head, headView, at + SNAPSHOT_HEAD.length, s.index);
    head.set(K_TERM, at);
    at = putUint(head, headView, at + K_TERM.length, s.term);
    head.set(K_STATE, at);
    at = putBinHeader(head, at + K_STATE.length, s.state.byteLength);
  }
  assert(at === headSize, 'a checkpoint\'s head is as long as counted');
  const tail = new Uint8Array(K_RECORDS.length + recordListBytes(d.records));
  tail.set(K_RECORDS, 0);
  const end = putRecordList(tail, new DataView(tail.buffer), K_RECORDS.length, d.records);
  assert(end === tail.byteLength, 'a checkpoint\'s records are as long as counted');
  return s === null ? [head, tail] : [head, s.state, tail];
}

/** msgpack gives Buffers back; a replica's bytes compare as plain Uint8Arrays. */
const bytes = (b: Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

function revive(d: DurableReplica): DurableReplica {
  return {
    promisedTerm: d.promisedTerm,
    commitIndex: d.commitIndex,
    snapshot: d.snapshot === null ? null : { ...d.snapshot, state: bytes(d.snapshot.state) },
    records: d.records.map((r) => ({ ...r, payload: bytes(r.payload) })),
  };
}
function reviveOp(op: DiskOp): DiskOp {
  if (op.kind === 'append') return { kind: 'append', records: op.records.map((r) => ({ ...r, payload: bytes(r.payload) })) };
  if (op.kind === 'snapshot') return { ...op, state: bytes(op.state) };
  return op;
}

export class ReplicaLog {
  private readonly slices = new Map<number, DurableReplica>();
  /** Ops written and not flushed yet, as three lists of one entry per op: its slice, the op, and whether it goes to
   * the log (not a compaction's snapshot). Not a tuple per op: the replica log takes about 5.5 ops per R=3 put
   * on a worker, and each tuple was garbage of the flush (bench/PROFILE.md, 2026-11-28, branch r3alloc). */
  private pendingSlices: number[] = [];
  private pendingOps: DiskOp[] = [];
  private pendingLogs: boolean[] = [];
  /** The one place an op joins the pending lists, so that they stay one entry per op each. */
  private pend(slice: number, op: DiskOp, log: boolean): void {
    this.pendingSlices.push(slice);
    this.pendingOps.push(op);
    this.pendingLogs.push(log);
  }
  /** Compactions' snapshots in the view (slices) and not yet in a checkpoint: the next one writes them. */
  private unlogged = 0;
  private waiting: (() => void)[] = [];
  private flushQueued = false;
  /** slice -> how many times it was dropped: a disk handed out before a drop writes nothing after it. */
  private readonly drops = new Map<number, number>();
  /** slice -> the term its dropped replica had promised (drop): kept, and rewritten by each checkpoint. */
  private readonly promisedBeforeDrop = new Map<number, number>();
  /** Bytes of the last checkpoint (at start: the one the log begins with, 0 if none). */
  checkpointBytes = 0;
  /** While a checkpoint writes its steps. */
  private checkpointing = false;

  private constructor(private readonly wal: WriteAheadLog) {}

  /** Opens (or creates) the log in `dir` and reads every slice's durable state back. */
  static open(dir: string, mode: DurabilityMode): { log: ReplicaLog; recovery: LogRecovery } {
    const found = new Map<number, DurableReplica>();
    const promised = new Map<number, number>();
    let checkpointBytes = 0;
    /** Slices an op of which did not apply (an append past what the log read so far holds of the slice): a checkpoint
     * record of theirs must follow, and replaces what came before it; their ops until then are left out. A checkpoint
     * is written in steps, and a flush between two logs its slices' ops in the checkpoint's segment, so an op of a
     * slice whose record is yet to come precedes it there (it is in that record: the view it packs holds every op
     * flushed before). Once the older segments are dropped the log starts at that segment, and such an op replays
     * onto an empty slice. A slice still gapped when the log ends is a gap in its log, refused as before. */
    const gapped = new Set<number>();
    mkdirSync(dir, { recursive: true });
    // No snapshot file: a checkpoint is in the log itself, so the log starts where its oldest segment does.
    const { log: wal, recovery } = WriteAheadLog.open(dir, mode, (firstSegmentLsn(dir) ?? 1) - 1, (r) => {
      if (r.kind === RECORD_KIND.ReplicaOps) {
        for (const [slice, op] of unpackr.unpack(r.payload) as [number, DiskOp][]) {
          if (!found.has(slice)) found.set(slice, emptyDurable());
          const d = found.get(slice)!;
          if (!gapped.has(slice) && op.kind === 'append' && op.records.length > 0 && op.records[0].index !== (d.snapshot?.index ?? 0) + d.records.length + 1) gapped.add(slice);
          if (!gapped.has(slice)) applyDiskOp(d, reviveOp(op));
        }
      } else if (r.kind === RECORD_KIND.ReplicaDrop) {
        // [slice, promisedTerm]; the term is absent in a record written before it was kept.
        const [slice, term] = unpackr.unpack(r.payload) as [number, number?];
        const d = found.get(slice);
        found.delete(slice);
        gapped.delete(slice); // its ops before are gone with it; the term it promised is in the record
        const kept = Math.max(term ?? 0, d?.promisedTerm ?? 0, promised.get(slice) ?? 0);
        if (kept > 0) promised.set(slice, kept);
      } else if (r.kind === RECORD_KIND.ReplicaCheckpoint) {
        const [slice, state] = unpackr.unpack(r.payload) as [number, DurableReplica];
        found.set(slice, revive(state));
        gapped.delete(slice);
        checkpointBytes += recordBytes(r.payload);
      } else {
        throw new Error(`a replica log holds a record of kind ${r.kind} at ${r.lsn}`);
      }
    });
    assert(gapped.size === 0, `the replica log of slices ${[...gapped].join(', ')} has a gap that no checkpoint record after it covers`);
    const log = new ReplicaLog(wal);
    log.checkpointBytes = checkpointBytes;
    for (const [slice, d] of found) log.slices.set(slice, d);
    for (const [slice, term] of promised) log.promisedBeforeDrop.set(slice, term);
    return { log, recovery };
  }

  /** Compactions' snapshots written (flushed into the view) and not yet in a checkpoint's records. */
  get snapshotsAwaitingCheckpoint(): number {
    return this.unlogged;
  }

  /** Bytes appended since the last checkpoint (or start): when to compact. */
  get bytesSinceCheckpoint(): number {
    return this.wal.bytesSinceSnapshot;
  }

  /** Whether enough was written since the last checkpoint for the next: REPLICA_CHECKPOINT_AFTER_BYTES (or
   * `snapshotAfterBytes`, when smaller), or REPLICA_CHECKPOINT_LOG_FACTOR times the last checkpoint if more, so that
   * rewriting the live state costs a fixed share of each byte written, however large that state grows (a checkpoint
   * as large as a fixed threshold would start the next one at once). After a restart too: the checkpoint the log
   * starts with counts, and the log read back counts toward the next. */
  checkpointDue(snapshotAfterBytes: number): boolean {
    const floor = Math.min(snapshotAfterBytes, REPLICA_CHECKPOINT_AFTER_BYTES);
    return this.bytesSinceCheckpoint >= Math.max(floor, REPLICA_CHECKPOINT_LOG_FACTOR * this.checkpointBytes);
  }

  /** The slices this log holds anything of. */
  get sliceIds(): number[] {
    return [...this.slices.keys()].sort((a, b) => a - b);
  }

  /** What a replica of `slice` finds at start (a copy: the replica keeps its own). */
  durable(slice: number): DurableReplica {
    const d = this.slices.get(slice) ?? emptyDurable();
    // A replica made after a drop wrote a promise only for a newer term: the dropped one's may still be the larger.
    const promisedTerm = Math.max(d.promisedTerm, this.promisedBeforeDrop.get(slice) ?? 0);
    return { promisedTerm, snapshot: d.snapshot, records: [...d.records], commitIndex: d.commitIndex };
  }

  /** The disk of one slice's replica; its `compacted` leaves a compaction's snapshot out of the log: durable only once
   * the next checkpoint is (see above). */
  diskFor(slice: number): ReplicaDisk {
    const generation = this.drops.get(slice) ?? 0;
    return {
      write: (op) => {
        if ((this.drops.get(slice) ?? 0) !== generation) return; // a replica that was dropped: it holds nothing here
        this.pend(slice, op, true);
      },
      compacted: (op) => {
        assert(op.kind === 'snapshot', 'only a compaction\'s snapshot stays out of the log');
        if ((this.drops.get(slice) ?? 0) !== generation) return;
        this.pend(slice, op, false);
      },
      sync: (done) => {
        if (TRACE_TURNS) turns.logSyncs++;
        this.waiting.push(done);
        if (!this.flushQueued) {
          this.flushQueued = true;
          queueMicrotask(() => this.flush());
        }
      },
    };
  }

  /** Appends what was written as one record (durable as the mode promises), then answers the syncs. A compaction's
   * snapshot is left out of the record and goes into the view alone (compacted): a sync answered after it does not
   * make it durable, and needs not to (the log holds the records it covers until the next checkpoint). */
  flush(): void {
    this.flushQueued = false;
    const slices = this.pendingSlices;
    const ops = this.pendingOps;
    const logs = this.pendingLogs;
    const waiting = this.waiting;
    assert(slices.length === ops.length && logs.length === ops.length, 'the pending lists hold one entry per op each');
    this.pendingSlices = [];
    this.pendingOps = [];
    this.pendingLogs = [];
    this.waiting = [];
    if (ops.length > 0) {
      let logged = 0;
      for (let i = 0; i < logs.length; i++) if (logs[i]) logged++;
      if (logged > 0) this.wal.append(RECORD_KIND.ReplicaOps, packOps(slices, ops, logs, logged));
      if (TRACE_TURNS && logged > 0) {
        turns.logFlushes++;
        turns.logOps += logged;
        for (let i = 0; i < ops.length; i++) {
          if (!logs[i]) continue;
          if (ops[i].kind === 'commit') turns.commitOps++;
          else if (ops[i].kind === 'append') turns.appendOps++;
        }
      }
      for (let i = 0; i < ops.length; i++) {
        const slice = slices[i];
        const op = ops[i];
        const log = logs[i];
        if (!this.slices.has(slice)) this.slices.set(slice, emptyDurable());
        const d = this.slices.get(slice)!;
        if (!log) {
          // What makes leaving it out safe: it covers records the view (so the log) holds, or held and compacted into
          // a snapshot of its own, all committed (Replica.writeSnapshot asserts that much of the replica's).
          assert(op.kind === 'snapshot' && op.index > (d.snapshot?.index ?? 0) && op.index <= (d.snapshot?.index ?? 0) + d.records.length, 'a compaction\'s snapshot covers records the log holds');
          this.unlogged++;
        }
        applyDiskOp(d, op);
      }
    }
    for (const done of waiting) done();
  }

  /** Forgets what the log holds of `slice` (its node no longer holds a replica of it): what was written
   * before is flushed first (its syncs answered now, before the drop), then one record says the slice is
   * gone, so a restart does not bring it back, and the next checkpoint leaves it out. A replica of it made
   * later starts empty but for the term promised (durable). */
  drop(slice: number): void {
    this.flush();
    // Written by the syncs' answers just now.
    const keep = this.pendingSlices.map((s) => s !== slice);
    this.pendingOps = this.pendingOps.filter((_, i) => keep[i]);
    this.pendingLogs = this.pendingLogs.filter((_, i) => keep[i]);
    this.pendingSlices = this.pendingSlices.filter((_, i) => keep[i]);
    this.drops.set(slice, (this.drops.get(slice) ?? 0) + 1);
    const term = this.durable(slice).promisedTerm;
    if (!this.slices.delete(slice)) return;
    this.promisedBeforeDrop.set(slice, term);
    this.wal.append(RECORD_KIND.ReplicaDrop, packr.pack([slice, term]));
  }

  /** Writes every slice's durable state (the view, with the compactions' snapshots) into a new segment, and drops
   * the segments before it once that is durable. Until then the older segments replay, with what of the
   * checkpoint was written, to the same state: a crash anywhere in it loses at most the compactions.
   *
   * The slices' records go in steps of about SNAPSHOT_STEP_MS (at least one slice), with a turn between two, as a
   * compaction's snapshots do: written in one turn, a worker's whole state (16 MB after a minute of puts at R=3)
   * held its thread 0.4-1.3 s at load 17-19, growing with the data, and the coordinator's Pings waited behind it on
   * both workers of a node at once (they reach their thresholds together), so the node answered nothing for that
   * long and counted as silent (issue 14, docs/replication.md "A node that answers"). Records the worker logs
   * between two steps land among the checkpoint's, which changes nothing read back: a slice's checkpoint record is
   * its view as the log then holds it (flush updates the view as it appends), so it replaces that slice's records
   * before it and those after it apply on top. Once the older segments are gone, a slice's ops logged in this segment
   * before its record replay onto an empty slice: open() leaves out those that do not apply (gapped), as the record
   * replaces them; a slice dropped meanwhile has its drop record after its checkpoint
   * record, or is skipped (no longer in the view). */
  async checkpoint(): Promise<void> {
    assert(!this.checkpointing, 'one checkpoint at a time');
    this.checkpointing = true;
    try {
      await this.writeCheckpoint();
    } finally {
      this.checkpointing = false;
    }
  }

  /** Appends `records` (appendAll, not synced: flush(true) at the checkpoint's end) and answers how many bytes they
   * took in the log. */
  private appendCounted(records: Iterable<[number, Uint8Array | readonly Uint8Array[]]>): number {
    const before = this.wal.bytesSinceSnapshot;
    this.wal.appendAll(records);
    return this.wal.bytesSinceSnapshot - before;
  }

  private async writeCheckpoint(): Promise<void> {
    this.flush();
    await this.wal.flush();
    // Written meanwhile (a compaction's snapshot too, if one came): in the view the checkpoint holds, not after it.
    this.flush();
    // Every compaction's snapshot so far is in the view, so in the records below; one written from now on (none
    // is: the worker compacts only before it checkpoints) would stay counted for the next checkpoint.
    assert(this.pendingLogs.every((log) => log), 'a checkpoint holds every compaction\'s snapshot written before it');
    const unloggedAtStart = this.unlogged;
    const segmentOnDisk = this.wal.startSegment();
    segmentOnDisk.catch(() => {}); // awaited below, before the older segments go: a failure stops the worker there
    const first = this.wal.currentSegmentFirstLsn;
    // The promises of dropped replicas first: a checkpoint of a replica made again after its drop replaces them.
    // In writes of up to LOG_WRITE_BYTES_MAX, synced once all are written, off the thread (flush(true) below; at
    // 'fsync' the ops logged between the steps sync what came before them too). appendAll writes the payloads as
    // they are: packr's copied out of its reused buffer, a slice's state not copied (checkpointParts).
    const promised = this.promisedBeforeDrop;
    let bytes = this.appendCounted(
      (function* (): Generator<[number, Uint8Array]> {
        for (const [slice, term] of promised) yield [RECORD_KIND.ReplicaDrop, Uint8Array.prototype.slice.call(packr.pack([slice, term]))];
      })(),
    );
    const slices = this.slices;
    const ids = [...slices.keys()];
    let next = 0;
    const traceFrom = TRACE_STALLS ? performance.now() : 0;
    let longestStepMs = 0;
    while (next < ids.length) {
      if (next > 0) await new Promise((resolve) => setImmediate(resolve)); // the worker's tasks and messages run
      const stepFrom = performance.now();
      const until = stepFrom + SNAPSHOT_STEP_MS;
      bytes += this.appendCounted(
        (function* (): Generator<[number, Uint8Array | Uint8Array[]]> {
          while (next < ids.length) {
            const slice = ids[next++];
            const d = slices.get(slice); // dropped since the checkpoint began: its drop record is in the log
            if (d !== undefined) yield [RECORD_KIND.ReplicaCheckpoint, checkpointParts(slice, d)];
            if (performance.now() >= until) return;
          }
        })(),
      );
      longestStepMs = Math.max(longestStepMs, performance.now() - stepFrom);
    }
    if (TRACE_STALLS) console.log(`keyslice checkpoint at ${Date.now()} ms=${Math.round(performance.now() - traceFrom)} longestStepMs=${Math.round(longestStepMs)} bytes=${bytes} slices=${ids.length}`);
    this.unlogged -= unloggedAtStart;
    this.checkpointBytes = bytes;
    await this.wal.flush(true);
    await segmentOnDisk;
    assert(this.wal.currentSegmentFirstLsn === first, 'a checkpoint is one segment');
    // Only now may the segments go that hold the records those snapshots cover.
    await this.wal.dropSegmentsBefore(first);
  }
}

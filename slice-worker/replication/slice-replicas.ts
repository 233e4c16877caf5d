// The replicas of a worker's slices, on the worker's store: the bridge between the
// replication core (replica.ts, one Replica per slice) and the worker's
// partitions (partition.ts). worker.ts creates one per worker (docs/replication.md).
//
// - A record's payload is the effects of one task on one slice (log-format.ts),
//   so a follower applies a committed record with store.applyRecord(): replay(),
//   the path WAL recovery uses (a record of plain set-effects with replayPacked(),
//   its items held as their bytes until read); a table drop becomes a drop of that
//   table's part of each slice.
// - The leader executes writes against its store before they are committed (as
//   the worker does now) and proposes their effects; its own records (from its
//   election's barrier on, across a LeadOn too) are therefore already applied
//   when they commit and are skipped. It executes only
//   while its replica serves (its barrier is committed, so every older record it
//   holds is applied first). A deposed leader's store is rebuilt from its
//   snapshot and committed records (replayCommitted), dropping what it executed
//   that was never committed.
// - A write with a request id runs through execute(): once per id (applied-requests.ts). Its id and answer go in
//   the slice's record beside its effects, and in the replica's snapshot state, so every replica that applies
//   the record, and every one restored from a snapshot, remembers it (log-format.ts, ReplicatedChanges).
// - The disk is the worker's replica log (replica-log.ts).
import { performance } from 'node:perf_hooks';
import { assert } from '../../shared/errors.js';
import { isClientRequestId, MalformedFrame, requestIdOf, RESULT_ERROR, RESULT_OK, type SliceOpResult, type WriteOp } from '../../shared/protocol.js';
import { decodeReplicated, decodeReplicatedFromPeer, encodeReplicatedEach, encodeReplicatedItems, isPlainReplicated, isTextSet, type LoggedEffect, type ReplicatedChanges } from '../log-format.js';
import { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_DROP_TABLE, EFFECT_SET, type Effect, type SliceStore } from '../partition.js';
import { AppliedRequests, type AppliedList, type RequestAnswer } from './applied-requests.js';
import type { ReplicaLog } from './replica-log.js';
import { Replica, type ReplicaId, type ReplicaTiming, type ReplicationMessage } from './replica.js';
import type { ReplicaRecord } from './replica-record.js';

export interface SliceReplicaEvents {
  /** The leader of `slice` committed up to `index`: answers waiting on it may go. */
  committed?(slice: number, index: number): void;
  /** This worker stopped leading `slice`: answers still waiting have an unknown outcome. */
  deposed?(slice: number, term: number): void;
  /** A peer sent something for `slice` that its replica refused or dropped as malformed (Replica's host.malformed);
   * `from` null: found in a committed record (its sender is not known any more). */
  malformed?(slice: number, from: ReplicaId | null, why: string): void;
  /** The leader of `slice` holds its lease again: consistent reads waiting for it may be answered. */
  leased?(slice: number): void;
}

export class SliceReplicas {
  private readonly replicas = new Map<number, Replica>();
  /** Per slice, the writes with a request id that its replica applied (what a resend is answered from). */
  private readonly applied = new Map<number, AppliedRequests>();
  /** Per slice, the writes with a request id executed since the last propose(): they go in its next record. */
  private proposing = new Map<number, AppliedList>();
  /** The time of the writes executed since the last propose() (one per task: its records carry it). */
  private proposingAt = 0;
  /** Per slice, from its replica's first write of its term: the newest time its table held then (or that write's
   * wall time), and now() then. See timeOf. */
  private clocks = new Map<number, { term: number; at: number; since: number }>();
  /** A snapshot's state checked by checkState and its decoded changes, for the restore that follows in the same
   * synchronous Replica.onSnapshot (a whole slice's state, decoded twice in a row, cost a joining replica twice:
   * bench/README.md, "A follower decodes a payload twice"). Taken or dropped by the next restore of any slice. */
  private checkedState: { bytes: Uint8Array; changes: ReplicatedChanges } | null = null;

  constructor(
    private readonly self: ReplicaId,
    private readonly store: SliceStore,
    /** The worker's replica log (or, in the simulation, its seeded disk). */
    private readonly log: Pick<ReplicaLog, 'diskFor' | 'durable' | 'sliceIds'>,
    private readonly send: (slice: number, to: ReplicaId, message: ReplicationMessage) => void,
    private readonly events: SliceReplicaEvents = {},
    /** A monotonic clock in ms (Replica's host.now): the simulation passes its own. */
    private readonly now: () => number = () => performance.now(),
    /** When a write is executed (ms, the wall clock: records keep it across restarts and other replicas read it),
     * what bounds how long its id is remembered. */
    private readonly wallNow: () => number = Date.now,
    /** The lease and keep-alive period (the simulation's are shorter); absent: shared/limits.ts. */
    private readonly timing?: ReplicaTiming,
  ) {
    // At start, every slice the log holds comes back: its committed records are applied to the store.
    for (const slice of log.sliceIds) this.of(slice);
  }

  /** The replica of `slice`, started from the log on first use. */
  of(slice: number): Replica {
    let r = this.replicas.get(slice);
    if (r === undefined) {
      r = this.start(slice);
      this.replicas.set(slice, r);
    }
    return r;
  }

  receive(slice: number, from: ReplicaId, message: ReplicationMessage): void {
    this.of(slice).receive(from, message);
  }

  /** This worker's node is no longer a replica of `slice` (its replica set changed): its replica stops leading. */
  resign(slice: number): void {
    this.replicas.get(slice)?.resign();
  }

  /** The slices this worker holds a replica of (started from the log, or since). */
  held(): number[] {
    return [...this.replicas.keys()];
  }

  /** Forgets the replica of `slice` (its node no longer holds one: worker.ts drops its state too); a later
   * of(slice) starts one anew from the log, which the caller has emptied of it. */
  drop(slice: number): void {
    this.replicas.delete(slice);
    // Its remembered request ids go too: a replica started anew rebuilds them from the records and snapshot
    // it is sent, and AppliedRequests asserts that an id is added once.
    this.applied.delete(slice);
    this.proposing.delete(slice);
    this.clocks.delete(slice);
  }

  /** Whether this worker may execute writes of `slice` now. */
  serving(slice: number): boolean {
    return this.of(slice).serving;
  }

  /** Whether this worker's follower replica of `slice` may answer an eventually consistent read from its
   * store (Replica.readable: it heard from its leader lately and has applied what it last said is committed). */
  readable(slice: number): boolean {
    return this.replicas.get(slice)?.readable ?? false;
  }

  /** Runs a write on a slice this worker serves, once per request id: a write whose id the slice applied (a
   * router sent it again after an unknown outcome) gets the answer it got then, and nothing is applied (the
   * caller holds that answer, like any, until the slice's last record is committed: the first copy's record may
   * not be yet). A write that failed (its condition was false, the slice's capacity refused it) or changed
   * nothing (a delete of no item) applied nothing and is not remembered: evaluating it again, should it come
   * again, is correct, since the first copy is then as if it never came. */
  execute(op: WriteOp): SliceOpResult {
    const slice = op[2];
    assert(this.serving(slice), 'a write runs only where its slice is served');
    const id = requestIdOf(op);
    if (id === null) return this.store.execute(op);
    const instance = id[0];
    const counter = id[1];
    const applied = this.requestsOf(slice);
    const seen = applied.find(instance, counter);
    if (seen !== undefined) {
      this.store.countDuplicateWrite(op[1], slice);
      return [RESULT_OK, seen];
    }
    // A client's id names one write (its counter hashes the write): a write of its instance remembered with another
    // counter is the same id with another request, refused before it runs (a router's instance has many counters).
    if (isClientRequestId(id) && applied.knows(instance)) {
      return [RESULT_ERROR, 'IdempotentParameterMismatch', `slice ${slice} applied another write with this client's idempotency id (request [${instance}, ${counter}]); nothing was applied`];
    }
    const before = this.store.effectCount;
    const result = this.store.execute(op);
    if (result[0] === RESULT_OK && this.store.effectCount > before) {
      const answer = result[1] as RequestAnswer;
      if (this.proposing.size === 0) this.proposingAt = this.wallNow();
      let list = this.proposing.get(slice);
      if (list === undefined) this.proposing.set(slice, (list = { instances: [instance], counters: [], of: null, ats: this.timeOf(slice, applied), answers: null }));
      applied.add(instance, counter, list.ats as number, answer);
      // The record names each router instance once; `of` only once a second one comes (most tasks have one).
      let which = list.instances.indexOf(instance);
      if (which < 0) which = list.instances.push(instance) - 1;
      if (which > 0 && list.of === null) list.of = list.counters.map(() => 0);
      list.of?.push(which);
      // Answers only once one is not null (a plain put or delete answers nothing: most writes).
      if (answer !== null && list.answers === null) list.answers = list.counters.map(() => null);
      list.answers?.push(answer);
      list.counters.push(counter);
    }
    return result;
  }

  /** How many writes with a request id the replica of `slice` remembers (for tests and traces). */
  rememberedRequests(slice: number): number {
    return this.applied.get(slice)?.size ?? 0;
  }

  /** Proposes the effects of one task, one record per slice (with the task's writes of a request id on that
   * slice, execute()); answers [slice, index] for each.
   * Every slice touched must be served here (the caller checked before executing). */
  propose(effects: readonly LoggedEffect[]): [number, number][] {
    const bySlice = new Map<number, Effect[]>();
    const add = (slice: number, e: Effect) => {
      if (!bySlice.has(slice)) bySlice.set(slice, []);
      bySlice.get(slice)!.push(e);
    };
    for (const e of effects) {
      // Only a move's target records an item by its bytes (SliceStore.moveApply), and moves refuse replicated slices
      // (worker.ts runTask): a leader's changes name their items.
      assert(!isTextSet(e), 'a replicated slice\'s changes name their items');
      if (e[0] === EFFECT_SET || e[0] === EFFECT_DELETE) add(e[2], e);
      else if (e[0] === EFFECT_DROP_SLICE) add(e[1], e);
      else if (e[0] === EFFECT_DROP_TABLE) for (const [slice, r] of this.replicas) if (r.isLeader) add(slice, [EFFECT_DROP_SLICE, slice, e[1]]);
    }
    const out: [number, number][] = [];
    const requests = this.proposing;
    this.proposing = new Map();
    for (const slice of requests.keys()) assert(bySlice.has(slice), 'a remembered write changed its slice, so its record carries it');
    const parts: [Effect[], AppliedList | null][] = [];
    for (const [slice, list] of bySlice) parts.push([list, requests.get(slice) ?? null]);
    // The payloads in bySlice's order, as parts were made.
    const payloads = encodeReplicatedEach(parts);
    let i = 0;
    for (const slice of bySlice.keys()) {
      const index = this.of(slice).propose(payloads[i++]);
      if (index === null) throw new Error(`invariant broken: effects of slice ${slice} were made while this worker does not lead it`);
      out.push([slice, index]);
    }
    return out;
  }

  /** The leaders' heartbeat to their followers (resends what was not acknowledged, and the commit index) and
   * their keep-alives (Replica.tick). */
  tick(): void {
    for (const r of this.replicas.values()) if (r.isLeader) r.tick();
  }

  /** How many replicas lead, and how many of those serve (their barrier is committed), for a trace. */
  leadership(): { leading: number; serving: number } {
    let leading = 0;
    let serving = 0;
    for (const r of this.replicas.values()) {
      if (r.isLeader) leading++;
      if (r.serving) serving++;
    }
    return { leading, serving };
  }

  /** A compaction in two steps, so that a leader under steady writes compacts too: its store runs ahead of the
   * commit point (it executes writes before they commit), and a snapshot holds only what is committed. Here each
   * such leader takes its store's state, at its last record; the caller waits, bounded, while compactionPending()
   * (that record is committed within a round trip, and its followers hold it), then calls compact(). All at once:
   * a worker compacts in steps (compaction()); this is for tools and tests. */
  prepareCompaction(): void {
    for (const r of this.replicas.values()) r.prepareCompaction(this.stateIndex(r));
  }

  /** Whether a leader's prepared compaction still waits for its record to be committed or held by a follower. */
  compactionPending(): boolean {
    for (const r of this.replicas.values()) if (r.compactionPending) return true;
    return false;
  }

  /** Compacts every replica's log into a snapshot of its state as of what is committed (a leader's prepared state,
   * once committed; one that still runs ahead takes it now, for the next time); the caller then checkpoints the
   * replica log, which alone makes the snapshots durable (ReplicaLog.compacted). */
  compact(): void {
    for (const slice of this.replicas.keys()) this.compactOne(slice);
  }

  /** A compaction in steps, each encoding the state of one slice (compaction's step): between two steps the worker
   * runs its tasks, so its slices go on committing while it compacts, and the stall is one slice's encoding, not
   * every slice's (bench/PROFILE.md). Its snapshots are durable once the caller's checkpoint after it is. */
  compaction(): SliceCompaction {
    return new SliceCompaction(this, [...this.replicas.keys()]);
  }

  /** SliceCompaction's steps (a leader's prepare; a replica's compact): false when `slice` has no replica any more. */
  prepareOne(slice: number): boolean {
    const r = this.replicas.get(slice);
    if (r === undefined) return false;
    r.prepareCompaction(this.stateIndex(r));
    return true;
  }
  compactOne(slice: number): boolean {
    const r = this.replicas.get(slice);
    if (r === undefined) return false;
    r.compact(this.stateIndex(r));
    return true;
  }

  /** The index the store's state of replica `r`'s slice is at: a serving leader executed every write it proposed
   * (all at once, in the task that proposed them: nothing is executed and not yet proposed between two tasks); any
   * other replica applied committed records alone. */
  private stateIndex(r: Replica): number {
    assert(this.proposing.size === 0, 'a compaction runs between tasks');
    return r.serving ? r.lastIndex : r.appliedIndex;
  }

  /** The time a write of `slice` is remembered at: the task's wall time, but never further past the newest time
   * the slice's table held when this leader began writing than the time that has passed since (the monotonic
   * clock). A new leader whose wall clock is ahead of its predecessor's would otherwise stamp its first writes
   * minutes past the writes it took over, and forget at once ids whose resends are still on their way
   * (APPLIED_REQUESTS_KEPT_MS counts time passed, not clock skew); one whose clock is behind only remembers longer. */
  private timeOf(slice: number, applied: AppliedRequests): number {
    const term = this.replicas.get(slice)!.term;
    let c = this.clocks.get(slice);
    if (c === undefined || c.term !== term) this.clocks.set(slice, (c = { term, at: applied.newestAt ?? this.proposingAt, since: this.now() }));
    return Math.min(this.proposingAt, c.at + (this.now() - c.since));
  }

  /** Why a peer's records for `slice` cannot be applied, or null: each payload is a slice's changes
   * (decodeReplicatedFromPeer). A request id this replica remembers, or that another of the records names, is not
   * refused: a leader that forgot an id (the bounds of AppliedRequests) executes a copy of its write sent again as
   * new, and its followers may still remember the id (they forget it only once they apply the records that made the
   * leader forget it) or get both records in one Append. Refused, such a record would be sent again and refused
   * for ever, and the slice would commit nothing more. Applied in order, each record does what its leader did, and
   * an id still remembered keeps its first answer (AppliedRequests.addAll). */
  private checkRecords(slice: number, records: ReplicaRecord[]): string | null {
    for (const r of records) {
      if (r.payload.length === 0) continue; // a leader's barrier
      const problem = this.check(slice, r.payload, false);
      if (problem !== null) return `record ${r.index} of term ${r.term}: ${problem}`;
    }
    return null;
  }

  /** Why `bytes` (a record's payload, or a snapshot's state) are not changes of `slice`, or null. A record in the
   * common layout (set-effects of plain items) is read by its msgpack headers alone, no value built
   * (isPlainReplicated); any other, and a snapshot's state, is decoded whole to be checked, which decides what is
   * refused. A record's decoded changes are dropped: it is applied a round trip later (with the commit point that
   * covers it) and decoded again then (decodeReplicated). Kept decoded until then (in a WeakMap keyed by the bytes),
   * its items outlived the young generation's collections and cost a follower more than the second decode does
   * (bench/README.md, "A follower decodes a payload twice"). A snapshot's are kept in checkedState: its restore
   * follows at once. */
  private check(slice: number, bytes: Uint8Array, snapshot: boolean): string | null {
    this.checkedState = null;
    if (!snapshot && isPlainReplicated(bytes, slice)) return null;
    try {
      const changes = decodeReplicatedFromPeer(bytes, slice, snapshot);
      if (snapshot) this.checkedState = { bytes, changes };
      return null;
    } catch (err) {
      if (err instanceof MalformedFrame) return `${snapshot ? 'the state' : 'the payload'} is not a slice's changes (${err.message})`;
      throw err;
    }
  }

  private requestsOf(slice: number): AppliedRequests {
    let a = this.applied.get(slice);
    if (a === undefined) this.applied.set(slice, (a = new AppliedRequests()));
    return a;
  }

  private start(slice: number): Replica {
    // A compaction's snapshot (Replica.compact) goes to disk.compacted: of committed state, left out of the log until
    // the checkpoint (ReplicaLog.compacted). Any other snapshot (a follower installs its leader's) is logged, and
    // answered once durable.
    const disk = this.log.diskFor(slice);
    let found = this.log.durable(slice);
    if (found.promisedTerm === 0 && found.snapshot === null && found.records.length === 0 && this.store.owns(slice) && this.store.holdsItems(slice)) {
      // The slice had one replica (R=1), this worker's, and it is replicated from now on (a node joined): its
      // items are in the worker log alone. They become the replica's first state, a snapshot at index 1 of
      // term 1 (no election uses term 1), so that an election (largest last record) chooses this replica and
      // the others get them as a snapshot. Without it the replica started empty and the items were dropped.
      const state = encodeReplicatedItems(this.store.sliceEffectsText(slice), null);
      disk.write({ kind: 'snapshot', index: 1, term: 1, state });
      found = { promisedTerm: 0, snapshot: { index: 1, term: 1, state }, records: [], commitIndex: 1 };
    }
    // Set once constructed: the constructor already applies what the log holds as committed.
    let replica: Replica | undefined;
    replica = new Replica(
      this.self,
      {
        send: (to, m) => this.send(slice, to, m),
        disk,
        apply: (record) => {
          // A leader's own records were executed here before they were proposed (and their writes remembered):
          // those from its election's barrier on, of its term and, once it led on (LeadOn), of the terms it led before.
          if (replica?.isLeader === true && record.index >= replica.ownFrom) return;
          if (record.payload.length === 0) return;
          const requests = this.store.applyRecord(slice, record.payload);
          const known = requests === null ? 0 : this.requestsOf(slice).addAll(requests);
          if (known > 0) this.events.malformed?.(slice, null, `committed record ${record.index} of term ${record.term} names ${known} request ids applied already (their first answers are kept)`);
        },
        restore: (state) => {
          this.store.replay([EFFECT_DROP_SLICE, slice, null]);
          // The changes checkState decoded from these very bytes, if it just did; taken once (a later restore of the
          // same bytes, replayCommitted's, decodes them again: the store may hold and change what this one replays).
          const checked = this.checkedState !== null && this.checkedState.bytes === state ? this.checkedState.changes : null;
          this.checkedState = null;
          const { effects, requests } = state === null ? { effects: [], requests: null } : (checked ?? decodeReplicated(state));
          for (const e of effects) this.store.replay(e);
          this.applied.set(slice, new AppliedRequests(requests));
        },
        snapshotState: () => encodeReplicatedItems(this.store.sliceEffectsText(slice), this.requestsOf(slice).list()),
        committed: (index) => this.events.committed?.(slice, index),
        checkRecords: (records) => this.checkRecords(slice, records),
        checkState: (state) => this.check(slice, state, true),
        malformed: (from, why) => this.events.malformed?.(slice, from, why),
        leased: () => this.events.leased?.(slice),
        now: this.now,
        timing: this.timing,
        deposed: (term) => {
          // The store ran ahead of the commit point: put it back to exactly what is committed. The writes
          // executed since the last propose() go too (deposed inside a task: worker.ts takeControl between two
          // chunks): none is proposed, so no replica may remember its id.
          replica!.replayCommitted();
          this.proposing.delete(slice);
          this.events.deposed?.(slice, term);
        },
      },
      found,
    );
    return replica;
  }
}

/** One compaction of a worker's replicas, in steps (SliceReplicas.compaction), run between tasks (each step's
 * stateIndex asserts it): first each leader whose store runs past its commit point takes its state (prepare), a
 * slice a step; then the caller waits, bounded, while SliceReplicas.compactionPending() (those records commit within
 * a round trip); then each replica writes its snapshot (a leader the state it took, once committed; any other its
 * store's state now), a slice a step. A slice whose replica went meanwhile is skipped; a leader deposed meanwhile
 * dropped what it took (Replica.stepDown). The caller checkpoints the log after the last step. */
export class SliceCompaction {
  private phase: 'prepare' | 'compact' | 'done' = 'prepare';
  private next = 0;
  constructor(
    private readonly replicas: SliceReplicas,
    private readonly slices: number[],
  ) {}

  /** Runs steps until `until` (performance.now(); one step at least), and says what comes next: 'more' steps,
   * the caller's wait ('prepared': every leader took its state), or the checkpoint ('done'). */
  step(until: number): 'more' | 'prepared' | 'done' {
    for (;;) {
      if (this.phase === 'done') return 'done';
      if (this.next === this.slices.length) {
        this.next = 0;
        if (this.phase === 'prepare') {
          this.phase = 'compact';
          return 'prepared';
        }
        this.phase = 'done';
        return 'done';
      }
      const slice = this.slices[this.next++];
      if (this.phase === 'prepare') this.replicas.prepareOne(slice);
      else this.replicas.compactOne(slice);
      if (performance.now() >= until) return 'more';
    }
  }
}

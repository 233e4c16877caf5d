// One replica of one slice: the replication core as a pure state machine. It takes
// messages and calls, and acts only through what its host gives it (send, disk,
// apply), so that the same code runs under the seeded simulation
// (test/replication-sim.ts) and, later, in a slice node's worker. Protocol and
// why it loses no acknowledged write: docs/replication.md.
//
// Roles: a replica is a follower until the coordinator makes it the leader of a
// term (Prepare, then Lead); it stops leading as soon as it sees a larger term.
//  - The leader orders writes: propose() gives each its index in the slice's log
//    and the leader's term, writes it to its disk and ships it to the followers
//    (Append). A record is committed once a majority of the replicas hold it
//    durably and it is of the leader's own term (records of older terms are
//    committed with it, by log order); only then is its write acknowledged.
//  - A follower takes an Append only if its term is not older than the term it
//    promised, every record's checksum holds, the log before it matches (no gap,
//    same term at prevIndex), and then writes it and answers once it is durable.
//    A record of another term at the same index is a diverged tail: it is cut
//    (never below the commit point: asserted) and replaced by the leader's.
//  - Committed records are applied in index order, once, through host.apply: the
//    path WAL recovery uses on a real node.
//  - Prepare(term) fences: the replica promises the term durably (refusing every
//    older one from then on) before telling the coordinator its last (term, index).
//  - LeadOn(term, from): the leader of `from` leads on at the newer `term` with the followers and sets of a
//    replica-set change, keeping its records (its writes not yet committed commit with its new barrier): no
//    Prepare, no deposed leader. Refused by a replica that does not lead `from`.
import { assert } from '../../shared/errors.js';
import {
  REPLICATION_APPEND_RECORDS_MAX as APPEND_RECORDS_MAX,
  LEADER_HEARTBEAT_TIMEOUT_MS,
  REPLICA_KEEPALIVE_MS,
  REPLICA_LEASE_DRIFT,
  REPLICA_LEASE_MS,
  REPLICA_LEASE_PROBE_MS_MIN,
  REPLICA_READ_STALENESS_MS,
  REPLICA_RESEND_MS_MAX,
  REPLICA_TICK_MS,
} from '../../shared/limits.js';
import { COORDINATOR, type RefusalCode, type ReplicaId, type ReplicaRecord, type ReplicationMessage } from '../../shared/replication-protocol.js';
import { checksumMatches, makeRecord } from './replica-record.js';

// Keep-alives leave a leader at most a period and a tick apart: an idle follower stays readable through one lost.
assert(2 * (REPLICA_KEEPALIVE_MS + REPLICA_TICK_MS) <= REPLICA_READ_STALENESS_MS, 'a follower outlives one lost keep-alive');
// An idle leader's lease runs from its last round of keep-alives: the next round (a period and up to a tick later)
// must be answered before it runs out, with room for the answers' way back.
assert(REPLICA_LEASE_MS * (1 - REPLICA_LEASE_DRIFT) >= REPLICA_KEEPALIVE_MS + 2 * REPLICA_TICK_MS, 'an idle leader keeps its lease');
// A dead leader's lease has run out by about when the coordinator counts it gone: the lease adds to failover at most
// the time between the followers' last answers and the coordinator's last Pong.
assert(REPLICA_LEASE_MS <= LEADER_HEARTBEAT_TIMEOUT_MS, 'a lease is no longer than the leader timeout');
assert(REPLICA_LEASE_DRIFT > 0 && REPLICA_LEASE_DRIFT < 0.5, 'a leader uses most of its lease, never all of it');

/** Refusals of what was sent (damaged or malformed), not of where the refusing replica's log stands: the same records
 * would be refused again. */
const MALFORMED: ReadonlySet<RefusalCode> = new Set(['ChecksumMismatch', 'MalformedAppend', 'MalformedContents']);

export { COORDINATOR, type RefusalCode, type ReplicaId, type ReplicationMessage };
type AppendMessage = Extract<ReplicationMessage, { type: 'Append' }>;

/** What a replica writes; durable only once a later sync() has completed. */
export type DiskOp =
  | { kind: 'promise'; term: number }
  | { kind: 'append'; records: ReplicaRecord[] }
  /** Drop the records after `after` (a diverged tail). */
  | { kind: 'truncate'; after: number }
  /** A committed index (written lazily: after a crash, records past it wait for the leader's word). */
  | { kind: 'commit'; index: number }
  /** The applied state as of `index` (of term `term`); the records up to it are dropped. */
  | { kind: 'snapshot'; index: number; term: number; state: Uint8Array };

export interface ReplicaDisk {
  write(op: DiskOp): void;
  /** Writes a compaction's snapshot (compact(): of committed state, whose records the disk still holds), which a disk
   * may leave out of its log until a checkpoint (replica-log.ts), or write as any op. */
  compacted(op: DiskOp & { kind: 'snapshot' }): void;
  /** Calls `done` once every write before this call is as durable as the mode promises. In order. */
  sync(done: () => void): void;
}

/** What a replica finds on its disk at start. */
export interface DurableReplica {
  promisedTerm: number;
  snapshot: { index: number; term: number; state: Uint8Array } | null;
  /** The records after the snapshot, in order, without a gap. */
  records: ReplicaRecord[];
  commitIndex: number;
}

export const emptyDurable = (): DurableReplica => ({ promisedTerm: 0, snapshot: null, records: [], commitIndex: 0 });

/** The disk's meaning, in one place: what `ops` leave of `d` (a disk reads itself back with it). */
export function applyDiskOp(d: DurableReplica, op: DiskOp): void {
  const snapIndex = d.snapshot?.index ?? 0;
  switch (op.kind) {
    case 'promise':
      d.promisedTerm = Math.max(d.promisedTerm, op.term);
      return;
    case 'append':
      for (const r of op.records) {
        assert(r.index === snapIndex + d.records.length + 1, 'a log grows without a gap');
        d.records.push(r);
      }
      return;
    case 'truncate':
      d.records.length = Math.max(0, Math.min(d.records.length, op.after - snapIndex));
      return;
    case 'commit':
      d.commitIndex = Math.max(d.commitIndex, op.index);
      return;
    case 'snapshot': {
      const keepFrom = op.index - snapIndex;
      // Records past the snapshot that agree with it stay; otherwise the log starts after it.
      const at = d.records[keepFrom - 1];
      d.records = at !== undefined && at.term === op.term ? d.records.slice(keepFrom) : [];
      d.snapshot = { index: op.index, term: op.term, state: op.state };
      d.commitIndex = Math.max(d.commitIndex, op.index);
      return;
    }
  }
}

export interface ReplicaHost {
  send(to: ReplicaId, message: ReplicationMessage): void;
  disk: ReplicaDisk;
  /** A committed record, in index order, each once per start (after restore()). */
  apply(record: ReplicaRecord): void;
  /** Replace the applied state by a snapshot's (null: empty). */
  restore(state: Uint8Array | null): void;
  /** The applied state, to snapshot. */
  snapshotState(): Uint8Array;
  /** The leader's commit index grew: writes up to it may be acknowledged. */
  committed?(index: number): void;
  /** This replica stopped leading `term`: its writes not yet committed have an unknown outcome. */
  deposed?(term: number): void;
  /** A monotonic clock, in ms (performance.now on a node, the simulation's clock there): how long ago a follower
   * heard from its leader, when a leader's keep-alives are due, how long its lease runs. */
  now(): number;
  /** Why records a peer sent, which this replica does not hold yet, could not be applied (their payloads are not
   * the host's changes), or null. Asked before anything of them is written: a record is applied only once
   * committed, when it can no longer be refused. */
  checkRecords?(records: ReplicaRecord[]): string | null;
  /** The same for a snapshot's state, before it replaces anything. */
  checkState?(state: Uint8Array): string | null;
  /** A peer sent something this replica refused or dropped as malformed (not a stale term or a gap: what a
   * replica that follows the protocol never sends). For the host's log. */
  malformed?(from: ReplicaId, why: string): void;
  /** This leader's lease became valid again (consistent reads waiting for it may be answered: see leaseValid). */
  leased?(): void;
  /** The lease and keep-alive period (shared/limits.ts); the simulation, whose failover timing is shorter, its own. */
  timing?: ReplicaTiming;
}

export interface ReplicaTiming {
  leaseMs: number;
  keepAliveMs: number;
}
export const REPLICA_TIMING_DEFAULT: ReplicaTiming = { leaseMs: REPLICA_LEASE_MS, keepAliveMs: REPLICA_KEEPALIVE_MS };

/** What a leader knows of one of its followers: made anew for each term it leads (becomeLeader), dropped when it
 * stops leading or the follower leaves the set (settleSets). */
interface Follower {
  readonly id: ReplicaId;
  /** The index of the next record to send it: one past what was sent (in flight or acknowledged). Moved back by a
   * refusal (a gap, a diverged tail) or a probe, to resend from there. */
  next: number;
  /** The last index it said it holds durably (AppendOk): what a commit counts (leaderCommit). */
  match: number;
  /** The commit index it said it holds durably (and so has applied, and keeps across a restart): one that holds every
   * record and this commit point gets no heartbeat but the keep-alives (tick). */
  knownCommit: number;
  /** The commit index that the last Append, Snapshot or commit-carrying KeepAlive sent to it carried: past
   * knownCommit, an answer is awaited (awaiting). */
  sentCommit: number;
  /** When this leader began waiting for its answer: the send that found nothing of it unanswered (awaiting), or its
   * last AppendOk or Refused. A tick resends only once resendAfter has passed since. */
  waitFrom: number;
  /** Its round trips (an AppendOk's sentAt to its arrival): a smoothed mean and mean deviation, ms; null: none yet.
   * How long a tick waits for its answer (resendAfter, overdue). */
  roundTrip: { mean: number; dev: number } | null;
  /** When this leader last sent it an Append, a Snapshot or a KeepAlive with a commit point (tick): overdue. */
  lastSentAt: number;
  /** The sentAt of the KeepAlive that last carried it a commit point it lacked (tick), until answered: a KeepAliveOk to
   * it says the follower could not apply it (onKeepAliveOk); null: none unanswered. */
  commitKeepAliveAt: number | null;
  /** The latest send time (sentAt) of this leader's messages that it answered at this term: when the lease may begin
   * (renewLeaseFrom); -Infinity: none. */
  ackedSentAt: number;
}

export class Replica {
  private promisedTerm: number;
  private leading = false;
  private snapIndex: number;
  private snapTerm: number;
  /** The applied state at snapIndex (what a follower that the log no longer reaches is sent); null: empty. */
  private snapState: Uint8Array | null;
  /** records[i] has index snapIndex + 1 + i. */
  private records: ReplicaRecord[];
  private commit: number;
  private applied: number;
  // Leader state, valid while leading.
  /** What it knows of each follower, in the order the coordinator named them (Follower). */
  private readonly followers = new Map<ReplicaId, Follower>();
  /** The sets each of whose majorities a commit needs (one: itself and its followers; several while a
   * replica-set change is unsettled: joint majorities, docs/replication.md). */
  private quorums: ReplicaId[][] = [];
  /** What the leader's own disk holds durably. */
  private selfMatch = 0;
  /** The index of the barrier of the election that made this replica leader: it serves once that is committed (see
   * serving), and every record from it on is its own (its host executed them before proposing: ownFrom). A LeadOn
   * keeps it. */
  private leadFrom = 0;
  /** The index of the first record of the term it leads now (the election's barrier, or a LeadOn's): its commit
   * commits every record before it, and settles a replica-set change (leaderCommit). */
  private termFrom = 0;
  /** The REPLICA_KEEPALIVE_MS period of the clock in which this leader last sent its keep-alives (see tick). */
  private keptAlivePeriod = -1;
  /** When this leader's lease began: the latest send time that a majority of every set answered (itself counted). */
  private leaseFrom = -Infinity;
  /** When it last sent a round of keep-alives to renew its lease (renewLease). */
  private probedAt = -Infinity;
  // Follower state for leases.
  /** When (host.now) this replica last answered a leader (AppendOk, KeepAliveOk): that leader's lease may count on it
   * until LEASE_MS after, so a promise to a newer term tells the coordinator to wait that long (onPrepare). Starts at
   * the replica's start: it may have answered just before a crash. */
  private answeredAt: number;
  private readonly timing: ReplicaTiming;
  // Follower state for eventually consistent reads (see readable).
  /** The term of the leader whose Append, Snapshot (taken or refused for a gap) or KeepAlive it last had; 0: none since start. */
  private heardTerm = 0;
  /** The largest commit index that leader sent it. */
  private heardCommit = 0;
  /** When (host.now) it last heard from the leader of heardTerm: an Append, a Snapshot or a KeepAlive. */
  private heardAt = -Infinity;
  /** How far this replica's log is known to be the log of the leader of the term it promised (an Append or Snapshot
   * of that leader, taken: its records up to there are that leader's, and a leader never changes its log within
   * its term); 0: none since it promised the term or started. A KeepAlive's commit index is applied up to here. */
  private leaderMatch = 0;

  constructor(
    readonly id: ReplicaId,
    private readonly host: ReplicaHost,
    found: DurableReplica,
  ) {
    this.promisedTerm = found.promisedTerm;
    this.timing = host.timing ?? REPLICA_TIMING_DEFAULT;
    this.answeredAt = host.now();
    this.snapIndex = found.snapshot?.index ?? 0;
    this.snapTerm = found.snapshot?.term ?? 0;
    this.snapState = found.snapshot?.state ?? null;
    this.records = [...found.records];
    this.records.forEach((r, i) => assert(r.index === this.snapIndex + 1 + i && checksumMatches(r), 'a recovered log is whole'));
    host.restore(found.snapshot?.state ?? null);
    this.applied = this.snapIndex;
    this.commit = this.snapIndex;
    this.advanceCommit(Math.min(found.commitIndex, this.lastIndex));
  }

  get term(): number {
    return this.promisedTerm;
  }
  get isLeader(): boolean {
    return this.leading;
  }
  /** Leads, and its barrier is committed: every record of older terms it holds is applied, so a
   * host that executes writes against its applied state (a worker) may do so from now on. */
  get serving(): boolean {
    return this.leading && this.commit >= this.leadFrom;
  }
  /** While leading: the first index of the records it proposed itself since it was elected (its host executed
   * them before proposing; older ones it applies when committed). A LeadOn does not move it. */
  get ownFrom(): number {
    return this.leadFrom;
  }
  /** Leads, and holds a lease (docs/replication.md, "Leases"): a majority of every set it commits on (itself counted)
   * answered at its term a message it sent at leaseFrom, and less than LEASE_MS (less the drift margin) has passed
   * since by its clock. Every replica that answered will tell an election to wait until LEASE_MS has passed since it
   * answered (by its clock), and an election hears from a majority, so no other leader is named before this lease
   * ends, nor can a write be acknowledged by one: a consistent read answered now from this leader's store (what it
   * committed) misses no acknowledged write. */
  get leaseValid(): boolean {
    return this.leasedAt(this.host.now());
  }
  /** leaseValid at time `now` (host.now): what a message sent at `now` says of the lease (`leased`). */
  private leasedAt(now: number): boolean {
    return this.leading && now < this.leaseFrom + this.timing.leaseMs * (1 - REPLICA_LEASE_DRIFT);
  }
  /** A leader whose lease lapsed asks every follower for an answer now (a KeepAlive) rather than at the next period;
   * at most once per REPLICA_LEASE_PROBE_MS_MIN. */
  renewLease(): void {
    if (!this.leading) return;
    const now = this.host.now();
    if (now - this.probedAt < REPLICA_LEASE_PROBE_MS_MIN) return;
    this.probedAt = now;
    this.keepAliveAll(now, this.leaseValid);
  }
  /** A KeepAlive to every follower: asks each for an answer now, and carries the commit point. */
  private keepAliveAll(now: number, leased: boolean): void {
    for (const f of this.followers.keys()) this.host.send(f, { type: 'KeepAlive', term: this.promisedTerm, commitIndex: this.commit, sentAt: Math.floor(now), leased });
  }
  /** Whether a follower may answer an eventually consistent read from what it applied (docs/replication.md,
   * "Eventually consistent reads"): it heard from the leader of the term it promised since it started, and it
   * has applied every record up to the commit index that leader sent it. So a replica being built (new in the
   * set, catching up after a restart or a gap, installing a snapshot followed by records) never answers
   * "not found" for an item it has not got yet: it learns the leader's commit point from the first Append or
   * Snapshot, whether it takes it or refuses it for a gap, and stays unreadable until it applied that far. A
   * replica that restarted, or promised a newer term to an election, waits for its leader's first word. It may
   * still be behind a commit it has not heard of (the leader's next Append or heartbeat brings it: within a
   * tick once writes stop). And it heard from that leader within the last REPLICA_READ_STALENESS_MS, so a
   * follower cut off from its leader (or whose leader is frozen) stops answering that long after the last word
   * it had; an idle one that holds everything hears a KeepAlive every REPLICA_KEEPALIVE_MS (tick). A leader is
   * not readable here: its store runs ahead of the commit point, so its reads take the consistent path (held
   * until committed). */
  get readable(): boolean {
    return (
      !this.leading &&
      this.heardTerm === this.promisedTerm &&
      this.heardTerm > 0 &&
      this.applied >= this.heardCommit &&
      this.host.now() - this.heardAt <= REPLICA_READ_STALENESS_MS
    );
  }
  /** The index of the last record applied through host.apply. */
  get appliedIndex(): number {
    return this.applied;
  }
  get lastIndex(): number {
    return this.snapIndex + this.records.length;
  }
  get lastTerm(): number {
    return this.termAt(this.lastIndex)!;
  }
  get commitIndex(): number {
    return this.commit;
  }
  /** The record at `index`, if the log still has it. */
  recordAt(index: number): ReplicaRecord | undefined {
    return index > this.snapIndex ? this.records[index - this.snapIndex - 1] : undefined;
  }

  /** The term of the record at `index`; undefined when compacted into the snapshot or past the end. */
  private termAt(index: number): number | undefined {
    if (index === this.snapIndex) return this.snapTerm;
    if (index < this.snapIndex || index > this.lastIndex) return undefined;
    return this.records[index - this.snapIndex - 1].term;
  }

  // ---- the leader ----

  /** Orders a write: its index, or null when this replica does not lead (nothing was written). */
  propose(payload: Uint8Array): number | null {
    if (!this.leading) return null;
    const record = makeRecord(this.promisedTerm, this.lastIndex + 1, payload);
    this.appendLocal([record]);
    const term = this.promisedTerm;
    this.host.disk.sync(() => this.selfDurable(term, record.index));
    const round = this.appendRound(APPEND_RECORDS_MAX);
    for (const f of this.followers.values()) this.sendAppend(f, round);
    return record.index;
  }

  /** The leader's heartbeat: resends what a follower has not acknowledged (dropped frames) once it has waited its
   * round trips for the answer (resendAfter), and carries the commit index to a follower that holds every record in
   * a KeepAlive (folded per worker of the follower's node by the link: peer-links.ts byWorker), to one that does not in
   * the next Append or the probe.
   * Only a probe of one record: a follower that is frozen or cut off would otherwise get up to
   * APPEND_RECORDS_MAX records per slice per heartbeat, which its leader's node buffers and drops (a
   * slice node held 22 GB that way under SIGSTOP). Its acknowledgement brings the rest (onReply).
   * A follower that holds every record and has told that it holds the commit point durably gets no
   * heartbeat: it has nothing to learn (failure detection is the coordinator's, by Ping), and an idle
   * cluster would otherwise send one message per slice and follower every tick. Until that word
   * comes (a message dropped either way, a follower restarted) it gets the heartbeat. Once it has,
   * it gets a KeepAlive every REPLICA_KEEPALIVE_MS instead, so that it may go on answering eventually
   * consistent reads (readable). The period is the clock's, not the replica's own, so every leader of a
   * worker (one clock, one timer) sends its keep-alives in the same tick: one frame per destination node. */
  tick(): void {
    if (!this.leading) return;
    const now = this.host.now();
    const period = Math.floor(now / this.timing.keepAliveMs);
    const keepAlive = period !== this.keptAlivePeriod;
    this.keptAlivePeriod = period;
    const leased = this.leasedAt(now);
    // Probes from the same record (followers that lost the same Append) are one object: one round for the tick.
    let round: AppendRound | null = null;
    for (const f of this.followers.values()) {
      if (f.match >= this.lastIndex && f.knownCommit >= this.commit) {
        // Answered (KeepAliveOk): an idle leader's lease runs from its last round.
        if (keepAlive) this.host.send(f.id, { type: 'KeepAlive', term: this.promisedTerm, commitIndex: this.commit, sentAt: Math.floor(now), leased });
        continue;
      }
      // A follower with records or a commit point in flight whose answer may still come gets nothing: their answers
      // bring the rest, and the commit index comes with the next Append. Resending every tick to one not heard from
      // since the last tick sent the whole window in flight again once its answers came (round trips of 35-200 ms
      // under load, above the tick: 15-40% of the records followers got were copies); now only once it has been
      // silent for longer than its round trips (overdue), as for a lost message or a frozen follower.
      const awaiting = this.awaiting(f);
      if (awaiting && !this.overdue(f, now)) continue;
      if (!awaiting && f.match >= this.lastIndex) {
        // It holds every record and lacks only the commit point: a KeepAlive carries it, which the link folds with
        // the worker's other leaders' into one entry of numbers per worker of the follower's node (peer-links.ts
        // byWorker) rather than an Append each; the follower writes it before a sync and answers AppendOk after
        // (onKeepAlive). One that cannot (a restart lost what it knew of this leader's log) answers KeepAliveOk and
        // is probed at once (onKeepAliveOk); one whose answer does not come (a message lost) is awaited as for
        // records, and then probed with an Append below.
        f.waitFrom = now;
        f.lastSentAt = now;
        f.sentCommit = this.commit;
        f.commitKeepAliveAt = Math.floor(now);
        this.host.send(f.id, { type: 'KeepAlive', term: this.promisedTerm, commitIndex: this.commit, sentAt: Math.floor(now), leased });
        continue;
      }
      // The probe is a record the log holds, never the snapshot: a follower that lacks what the log holds says so
      // (LogGap, LogMismatch) and gets the snapshot in answer (onReply). Probing from its match (0 for every
      // follower of a leader just elected or led on, until it answers) sent a compacted leader's whole snapshot, at
      // each tick until the answer, to followers that held every record.
      this.probe(f, (round ??= new AppendRound(1, now, leased)));
    }
  }

  /** Sends follower `f` one record from its last acknowledged one (an empty Append when it holds every record),
   * which it answers AppendOk or with a refusal that says what it lacks. */
  private probe(f: Follower, round = this.appendRound(1)): void {
    f.next = Math.min(f.next, Math.max(f.match, this.snapIndex) + 1);
    f.waitFrom = round.now;
    this.sendAppend(f, round);
  }

  /** A KeepAliveOk at this leader's term renews its lease; one that answers the KeepAlive that carried the follower a
   * commit point (tick) says it could not apply it: its log is not known to be this leader's that far (leaderMatch:
   * it restarted, or promised the term without an Append of it since), else it would have answered AppendOk. It is
   * probed at once, as the tick would have after its wait (up to REPLICA_RESEND_MS_MAX; meanwhile it refused
   * eventually consistent reads, having heard of a commit point it has not applied). Once per such KeepAlive, and
   * only while nothing else is in flight to it (its answer brings the rest): no loop between the nodes. */
  private onKeepAliveOk(from: ReplicaId, term: number, sentAt: number): void {
    const f = this.leading && term === this.promisedTerm ? this.followers.get(from) : undefined;
    if (f === undefined) return;
    this.answered(f, sentAt);
    if (f.commitKeepAliveAt !== sentAt) return;
    f.commitKeepAliveAt = null;
    if (f.next > f.match + 1 || f.sentCommit <= f.knownCommit) return;
    this.probe(f);
  }

  /** Whether something sent to follower `f` is unanswered: records past what it acknowledged, or a commit index
   * past the one it said it holds. */
  private awaiting(f: Follower): boolean {
    return f.next > f.match + 1 || f.sentCommit > f.knownCommit;
  }

  /** How long a tick waits for follower `f`'s answer before it resends: its mean round trip and four deviations
   * (what TCP waits), at least a tick (as before: a follower with no round trip measured yet), at most
   * REPLICA_RESEND_MS_MAX (what a lost message or a frozen follower costs). */
  private resendAfter(f: Follower): number {
    const rt = f.roundTrip;
    return rt === null ? REPLICA_TICK_MS : Math.min(REPLICA_RESEND_MS_MAX, Math.max(REPLICA_TICK_MS, rt.mean + 4 * rt.dev));
  }

  /** Whether a tick resends to follower `f`, which has something unanswered: it has been silent for resendAfter, or
   * for its round trips' wait without the tick's floor (mean and four deviations, at most REPLICA_RESEND_MS_MAX)
   * since both its last answer and the last thing sent to it. Then every answer it may still send is overdue (writes
   * stopped and the last Append or its answer was lost). Under steady writes something was sent within that time, so
   * this never fires there (where a resend while answers were on their way sent the window in flight again); after
   * writes stop, one that fires for answers merely late sends again at most what was in flight. Without it, a lost
   * last Append waited a tick after the last answer however short the round trips (up to two ticks in all). After
   * long round trips the estimate is long too: no sooner than resendAfter then. */
  private overdue(f: Follower, now: number): boolean {
    const silent = now - f.waitFrom;
    if (silent >= this.resendAfter(f)) return true;
    const rt = f.roundTrip;
    // (+1: a round trip is measured from a sentAt rounded down to the ms, so up to 1 ms short.)
    return rt !== null && Math.min(silent, now - f.lastSentAt) >= Math.min(REPLICA_RESEND_MS_MAX, rt.mean + 4 * rt.dev + 1);
  }

  /** Applies again, from the snapshot, exactly the committed records: for a host whose state ran
   * ahead of the commit point (a deposed leader that had executed writes not yet committed). */
  replayCommitted(): void {
    this.host.restore(this.snapState);
    this.applied = this.snapIndex;
    while (this.applied < this.commit) {
      this.applied++;
      this.host.apply(this.recordAt(this.applied)!);
    }
  }

  /** A leader's host state whose index is past the commit point (prepareCompaction, compact): written as its
   * snapshot once that index is committed; null: none. */
  private compaction: { index: number; term: number; state: Uint8Array } | null = null;

  /** A leader whose host state (`stateIndex`: the index that state is at) runs past the commit point takes it now, to
   * write as its snapshot once committed (compact): under steady writes a leader always holds a record or two not
   * yet committed, and before it never compacted (its records grew in memory and in every checkpoint). Another
   * replica has nothing to prepare. */
  prepareCompaction(stateIndex: number): void {
    if (!this.leading || this.compaction !== null || stateIndex <= this.commit) return;
    this.takeState(stateIndex);
  }

  /** Whether a prepared compaction waits for its index to be committed, or for a follower to hold it (its
   * records, which that follower is sent rather than the whole state while they are in the log). */
  get compactionPending(): boolean {
    const c = this.compaction;
    if (c === null) return false;
    if (c.index > this.commit) return true;
    for (const f of this.followers.values()) if (f.match < c.index) return true;
    return false;
  }

  /** Writes a snapshot of the host's state, which is at `stateIndex` (a replica's applied index; a serving leader
   * that executes writes before they commit, as a worker does: its last index), and drops the records it covers.
   * A snapshot holds only what is committed: a state past the commit point is kept, and written by the first
   * compact() that finds its index committed (the records above it stay). */
  compact(stateIndex: number): void {
    const c = this.compaction;
    if (c !== null) {
      if (c.index > this.commit) return;
      this.compaction = null;
      return this.writeSnapshot(c.index, c.term, c.state);
    }
    if (stateIndex <= this.snapIndex) return;
    assert(stateIndex >= this.applied && stateIndex <= this.lastIndex, 'a host state is at least as new as what was applied to it');
    if (stateIndex > this.commit) return this.takeState(stateIndex);
    this.writeSnapshot(stateIndex, this.termAt(stateIndex)!, this.host.snapshotState());
  }

  private takeState(stateIndex: number): void {
    // Only a leader's host runs past the commit point: a follower applies committed records alone.
    assert(this.leading && stateIndex > this.snapIndex && stateIndex <= this.lastIndex, 'only a leader holds a state past the commit point');
    this.compaction = { index: stateIndex, term: this.termAt(stateIndex)!, state: this.host.snapshotState() };
  }

  /** A compaction's snapshot (compact alone writes one): through the disk's `compacted`. */
  private writeSnapshot(index: number, term: number, state: Uint8Array): void {
    assert(index <= this.commit && index > this.snapIndex && this.termAt(index) === term, 'a snapshot covers committed records this replica holds');
    this.host.disk.compacted({ kind: 'snapshot', index, term, state });
    this.snapState = state;
    this.records = this.records.slice(index - this.snapIndex);
    this.snapIndex = index;
    this.snapTerm = term;
  }

  /** Leads `term`: elected (Lead, after a Prepare), or leading on from an older term it led (LeadOn: `on`), which
   * keeps its log, what its host executed, and when it started serving. Both start the term with a barrier. */
  private becomeLeader(term: number, followers: ReplicaId[], sets: ReplicaId[][], on = false): void {
    assert(on === this.leading, 'a replica is elected while it does not lead, and leads on while it leads');
    // A leader that leads on keeps its prepared compaction: its log and store stay, so the state still matches its index.
    assert(on || this.compaction === null, 'a follower holds no prepared compaction');
    this.leading = true;
    this.followers.clear();
    const now = this.host.now();
    for (const id of followers) {
      if (id === this.id) continue;
      // next: from its end, as if it held every record (its answer or refusal says otherwise); match 0 until it answers.
      this.followers.set(id, { id, next: this.lastIndex + 1, match: 0, knownCommit: 0, sentCommit: 0, waitFrom: now, roundTrip: null, lastSentAt: now, commitKeepAliveAt: null, ackedSentAt: -Infinity });
    }
    this.quorums = sets.length > 0 ? sets.map((set) => [...set]) : [[this.id, ...this.followers.keys()]];
    // Every replica a commit counts is one this leader replicates to, and it leads for a set it is in.
    assert(this.quorums.every((set) => set.every((r) => r === this.id || this.followers.has(r))), 'a leader replicates to every replica of the sets its commits count');
    // (jointMajorityReach reads each set's median from its scratch, which holds older values past the set's own.)
    assert(this.quorums.every((set) => set.length > 0), 'a replica set is never empty (checkReplicationMessage refuses one)');
    // A replica outside the newest set (quorums[0]) leads only to carry an unsettled change: elected (not led on) by
    // joint majorities, it counts itself only in the sets it is in (jointMajorityReach) and steps down once its barrier
    // commits (leaderCommit). docs/replication.md, "A leader outside the newest set".
    assert(this.quorums[0].includes(this.id) || (!on && this.quorums.length > 1 && this.quorums.some((set) => set.includes(this.id))), 'a leader is a replica of the set it leads, or of an older set of an unsettled change it was elected to carry');
    this.leaseFrom = -Infinity;
    this.probedAt = -Infinity;
    this.selfMatch = 0;
    // A barrier of the new term: records of older terms that this leader holds are committed
    // with it (a leader counts replicas only for records of its own term). Its writes of the term it led before
    // a LeadOn were executed and may be waited on: they commit with it, and it goes on serving meanwhile.
    this.termFrom = this.propose(new Uint8Array(0))!;
    if (!on) this.leadFrom = this.termFrom;
    assert(this.promisedTerm === term, 'a leader leads the term it promised');
  }

  /** This replica's node left the slice's replica set: it stops leading. Its node drops what comes for the
   * slice from then on (the followers' answers, a newer term's Append), so a leader would otherwise go on
   * heartbeating the set it led until its node restarted. Its writes not yet committed have an unknown outcome. */
  resign(): void {
    this.stepDown(this.promisedTerm);
  }

  private stepDown(term: number): void {
    if (!this.leading) return;
    this.leading = false;
    this.followers.clear();
    // The state it took may hold writes that are never committed (a newer leader may cut their records).
    this.compaction = null;
    this.host.deposed?.(term);
  }

  private selfDurable(term: number, index: number): void {
    if (!this.leading || this.promisedTerm !== term) return;
    this.selfMatch = Math.max(this.selfMatch, index);
    this.leaderCommit();
  }

  /** A round of Appends at this time (host.now), of at most `recordsMax` records each: see AppendRound. */
  private appendRound(recordsMax: number): AppendRound {
    const now = this.host.now();
    return new AppendRound(recordsMax, now, this.leasedAt(now));
  }

  /** Sends follower `to` what it lacks from its `next` on: the Append of `round` that starts there (one object for
   * every follower of the round at that `next`), else a new one, or the snapshot when the log no longer has it. */
  private sendAppend(to: Follower, round: AppendRound = this.appendRound(APPEND_RECORDS_MAX)): void {
    const now = round.now;
    if (!this.awaiting(to)) to.waitFrom = now;
    to.lastSentAt = now;
    to.sentCommit = this.commit;
    const next = to.next;
    if (next <= this.snapIndex) {
      assert(this.snapState !== null, 'a compacted log has its snapshot');
      // The log no longer has what the follower lacks: send the state instead.
      this.host.send(to.id, { type: 'Snapshot', term: this.promisedTerm, index: this.snapIndex, lastTerm: this.snapTerm, state: this.snapState!, commitIndex: this.commit, sentAt: Math.floor(now), leased: round.leased });
      to.next = this.snapIndex + 1;
      return;
    }
    let m = round.append;
    if (m === null || m.prevIndex !== next - 1) {
      const from = next - this.snapIndex - 1;
      const records = this.records.slice(from, from + round.recordsMax);
      m = round.append = { type: 'Append', term: this.promisedTerm, prevIndex: next - 1, prevTerm: this.termAt(next - 1)!, records, commitIndex: this.commit, sentAt: Math.floor(now), leased: round.leased };
    } else {
      // A round lives for one call (propose, tick), in which nothing else runs: the leader's term, commit point and
      // log are those it was built with.
      assert(m.term === this.promisedTerm && m.commitIndex === this.commit && m.prevTerm === this.termAt(m.prevIndex), "a round's Append is of the leader's state when it is given again");
    }
    this.host.send(to.id, m);
    to.next = next + m.records.length;
  }

  private onReply(from: ReplicaId, m: ReplicationMessage & { type: 'AppendOk' | 'Refused' }): void {
    if (m.term > this.promisedTerm) {
      this.promise(m.term);
      return;
    }
    const f = this.leading && m.term === this.promisedTerm ? this.followers.get(from) : undefined;
    if (f === undefined) return;
    const now = this.host.now();
    f.waitFrom = now;
    if (m.type === 'AppendOk') {
      // Another process's word, not this one's state: a follower cannot hold a record its leader lacks.
      if (m.matchIndex > this.lastIndex) return this.host.malformed?.(from, `an AppendOk says it holds record ${m.matchIndex}; this leader's log ends at ${this.lastIndex} (dropped)`);
      this.measureRoundTrip(f, now - m.sentAt);
      this.answered(f, m.sentAt);
      if (m.matchIndex > f.match) f.match = m.matchIndex;
      if (m.commitIndex > f.knownCommit) f.knownCommit = m.commitIndex;
      if (f.next <= m.matchIndex) f.next = m.matchIndex + 1;
      this.leaderCommit();
      // The commit may have settled a change that `f` left (settleSets): it is sent nothing more.
      if (this.followers.get(from) === f && f.next <= this.lastIndex) this.sendAppend(f);
      return;
    }
    // A gap: start after the follower's last record. A diverged tail: start after its commit
    // point, which matches this log (a committed record is in every later leader's log).
    const from1 = m.code === 'LogGap' ? m.lastIndex + 1 : m.code === 'LogMismatch' ? m.commitIndex + 1 : f.match + 1;
    f.next = Math.max(f.match + 1, Math.min(f.next, from1));
    // A follower that found the records damaged or malformed refuses them again: they go again with the next
    // heartbeat's probe (tick), not at once, which made a loop between the nodes as fast as messages pass.
    if (MALFORMED.has(m.code)) return;
    this.sendAppend(f);
  }

  /** A round trip to follower `f` of `ms` (sentAt is whole ms, rounded down: at most 1 ms long). */
  private measureRoundTrip(f: Follower, ms: number): void {
    if (!(ms >= 0)) return; // sentAt from before a clock that restarted: no measure
    const rt = f.roundTrip;
    if (rt === null) return void (f.roundTrip = { mean: ms, dev: ms / 2 });
    rt.dev += (Math.abs(ms - rt.mean) - rt.dev) / 4;
    rt.mean += (ms - rt.mean) / 8;
  }

  /** Follower `from` answered, at this leader's term, a message sent at `sentAt`: the lease may begin later. */
  private answered(f: Follower, sentAt: number): void {
    if (sentAt <= f.ackedSentAt) return;
    f.ackedSentAt = sentAt;
    this.renewLeaseFrom();
  }

  private renewLeaseFrom(): void {
    const was = this.leaseValid;
    // The latest time a majority of every set answered a message sent at or after (the leader itself: now, so Infinity).
    const from = this.jointMajorityReach(false);
    this.leaseFrom = Math.max(this.leaseFrom, from);
    if (!was && this.leaseValid) this.host.leased?.();
  }

  /** The largest value that a majority of every set it commits on reaches: of what each replica holds durably
   * (`held`: its match, the leader's own selfMatch) or of the latest send time it answered (the leader's own: now,
   * so Infinity). Runs at every answer a leader takes, so it sorts in place, without an array or a closure a call.
   * The scratch is written over, never emptied: `length = 0` let V8 free its backing store, and the next push
   * allocated a new one, twice per AppendOk (bench/README.md, "Allocation per replicated put"). */
  private jointMajorityReach(held: boolean): number {
    let reach = Infinity;
    const values = this.reachScratch;
    for (const set of this.quorums) {
      let count = 0;
      for (const r of set) {
        const f = r === this.id ? null : this.followers.get(r)!;
        const v = f === null ? (held ? this.selfMatch : Infinity) : held ? f.match : f.ackedSentAt;
        // Insertion into descending order of values[0, count) (a set has a few replicas).
        let i = count++;
        while (i > 0 && values[i - 1] < v) {
          values[i] = values[i - 1];
          i--;
        }
        values[i] = v;
      }
      reach = Math.min(reach, values[Math.floor(set.length / 2)]);
    }
    return reach;
  }
  private readonly reachScratch: number[] = [];

  /** Commits the largest index that a majority holds durably, if it is of this leader's term. */
  private leaderCommit(): void {
    const before = this.commit;
    let carried = false;
    for (;;) {
      // The largest index that a majority of every set holds (one set but while a replica-set change is unsettled).
      const n = this.jointMajorityReach(true);
      if (n <= this.commit || this.termAt(n) !== this.promisedTerm) break;
      this.advanceCommit(n);
      // Its barrier committed on joint majorities: from now on its own set's majority commits, which may hold more.
      if (this.commit < this.termFrom || this.quorums.length === 1) break;
      // A leader outside the new set carried the change this far: the new set elects one of its own now (failover.ts
      // settle), by its majority alone, which holds every record committed here.
      if (!this.quorums[0].includes(this.id)) {
        carried = true;
        break;
      }
      this.settleSets();
    }
    if (this.commit > before) this.host.committed?.(this.commit);
    if (carried) {
      // Its followers learn the commit point first: the coordinator settles the change by any replica's commit term
      // (failover.ts settleIfHeld), so also where the carrier's own Pong never comes (its node died just after, its
      // link to the coordinator was cut); else the next election would need joint majorities again, and an older
      // set may have none left that answers. Not leased: it stops leading now.
      this.keepAliveAll(this.host.now(), false);
      // After its commits are told: its writes past the commit point have an unknown outcome, as any deposed leader's.
      this.stepDown(this.promisedTerm);
    }
  }

  /** Its barrier is committed on a majority of every set of an unsettled change: from now on a majority of
   * its own set (quorums[0], the new one) is enough, and a replica outside it is no longer replicated to.
   * Safe as the coordinator's own settling (coordinator/metadata/failover.ts): every write acknowledged
   * before is ordered before the barrier, so on a majority of the new set, and every later election hears
   * from a majority of the new set (alone once the coordinator settles the change, jointly until then), so
   * from a replica that holds each commit made on it. Without this a leader kept heartbeating a replica
   * that left the set (its node drops the messages) until its term ended. */
  private settleSets(): void {
    const own = this.quorums[0];
    this.quorums = [own];
    for (const f of this.followers.keys()) if (!own.includes(f)) this.followers.delete(f);
  }

  // ---- every replica ----

  receive(from: ReplicaId, m: ReplicationMessage): void {
    switch (m.type) {
      case 'Prepare':
        return this.onPrepare(from, m.term);
      case 'Lead':
        return this.onLead(from, m.term, m.followers, m.sets);
      case 'LeadOn':
        return this.onLeadOn(from, m);
      case 'Ping':
        return this.host.send(from, { type: 'Pong', seq: m.seq, term: this.promisedTerm, leading: this.leading, commitTerm: this.termAt(this.commit)!, lastIndex: this.lastIndex });
      case 'Append':
        return this.onAppend(from, m);
      case 'Snapshot':
        return this.onSnapshot(from, m);
      case 'KeepAlive':
        return this.onKeepAlive(from, m);
      case 'KeepAliveOk':
        return this.onKeepAliveOk(from, m.term, m.sentAt);
      case 'KeepAlives':
      case 'AppendOks':
      case 'Pings':
        return assert(false, `a slice node splits ${m.type} into one message per slice before a replica sees them`);
      case 'AppendOk':
      case 'Refused':
        return this.onReply(from, m);
      case 'Prepared':
      case 'Pong':
      case 'Pongs':
        return; // for the coordinator
    }
  }

  private refuse(to: ReplicaId, code: RefusalCode, message: string): void {
    if (MALFORMED.has(code)) this.host.malformed?.(to, message);
    this.host.send(to, { type: 'Refused', term: this.promisedTerm, code, message, lastIndex: this.lastIndex, commitIndex: this.commit });
  }

  /** Promises a newer term (durable before anything is answered on it) and stops leading an older one. */
  private promise(term: number): void {
    if (term <= this.promisedTerm) return;
    const old = this.promisedTerm;
    this.promisedTerm = term;
    this.leaderMatch = 0;
    this.host.disk.write({ kind: 'promise', term });
    this.stepDown(old);
  }

  private onPrepare(from: ReplicaId, term: number): void {
    if (term <= this.promisedTerm) return this.refuse(from, 'StaleTerm', `term ${term} is not newer than the term ${this.promisedTerm} this replica promised`);
    // A leader that promises a newer term stops leading (promise), and with it answering reads under its lease.
    const ledTerm = this.leading ? this.promisedTerm : 0;
    this.promise(term);
    // Taken now: everything written so far is in the sync below, and no record of an older term is taken from here on.
    const lastTerm = this.lastTerm;
    const lastIndex = this.lastIndex;
    this.host.disk.sync(() => {
      // It answers no older leader from the promise on, so the lease of the one it answered last (which may count
      // on that answer) runs out this long from now at the latest: the coordinator waits it out (failover.ts).
      const leaseWaitMs = Math.max(0, Math.ceil(this.answeredAt + this.timing.leaseMs - this.host.now()));
      this.host.send(from, { type: 'Prepared', term, lastTerm, lastIndex, leaseWaitMs, ledTerm });
    });
  }

  private onLead(from: ReplicaId, term: number, followers: ReplicaId[], sets: ReplicaId[][]): void {
    if (term !== this.promisedTerm || this.leading) {
      return this.refuse(from, 'StaleTerm', `asked to lead term ${term}; this replica promised term ${this.promisedTerm}${this.leading ? ' and leads it' : ''}`);
    }
    this.becomeLeader(term, followers, sets);
  }

  /** Leads on at a newer term without a Prepare: only the leader of `m.from`, still leading it. Safe because no
   * replica took any term between (the coordinator sends it only while no election ran since it elected this
   * leader, and takes the new term like an election's), so this leader holds every committed record, and its
   * own records of `m.from` are the only ones of that term (docs/replication.md, "Leading on across a replica-set
   * change"). The new term is written before the barrier (one sync makes both durable); not by promise(), which
   * would depose it. */
  private onLeadOn(from: ReplicaId, m: ReplicationMessage & { type: 'LeadOn' }): void {
    if (!this.leading || this.promisedTerm !== m.from || m.term <= m.from) {
      return this.refuse(from, 'StaleTerm', `asked to lead on at term ${m.term} from term ${m.from}; this replica ${this.leading ? 'leads' : 'promised'} term ${this.promisedTerm}`);
    }
    this.promisedTerm = m.term;
    this.host.disk.write({ kind: 'promise', term: m.term });
    this.becomeLeader(m.term, m.followers, m.sets, true);
  }

  private onAppend(from: ReplicaId, m: ReplicationMessage & { type: 'Append' }): void {
    if (m.term < this.promisedTerm) return this.refuse(from, 'StaleTerm', `a record of term ${m.term}; this replica promised term ${this.promisedTerm}`);
    // The whole frame is checked before anything of it is written.
    for (let i = 0; i < m.records.length; i++) {
      const r = m.records[i];
      if (!checksumMatches(r)) return this.refuse(from, 'ChecksumMismatch', `record ${r.index} of term ${r.term} fails its checksum; nothing of this append was applied`);
      if (r.index !== m.prevIndex + 1 + i || r.term > m.term || r.term < (i === 0 ? m.prevTerm : m.records[i - 1].term)) {
        return this.refuse(from, 'MalformedAppend', `record ${r.index} of term ${r.term} does not follow record ${m.prevIndex + i} in a log of term ${m.term}`);
      }
    }
    // The records this replica does not hold yet (those it holds, or has in its snapshot, are skipped below): none
    // may replace a committed one (a leader of a newer term holds every committed record), and their contents
    // must be what the host can apply, all of them before anything is taken.
    // Most Appends bring only records this replica lacks: then the list itself, not a copy (two lists and a closure per
    // Append, the most a follower's Append read allocated after the records: bench/PROFILE.md, "a follower's keys
    // beyond ASCII").
    const unheld = m.records.every(this.lacks, this) ? m.records : m.records.filter(this.lacks, this);
    if (unheld.length > 0 && unheld[0].index <= this.commit) {
      return this.refuse(from, 'MalformedAppend', `record ${unheld[0].index} of term ${unheld[0].term} would replace committed record ${unheld[0].index} of term ${this.termAt(unheld[0].index)}; nothing of this append was applied`);
    }
    const problem = unheld.length > 0 ? (this.host.checkRecords?.(unheld) ?? null) : null;
    if (problem !== null) return this.refuse(from, 'MalformedContents', `${problem}; nothing of this append was applied`);
    if (this.leading && m.term === this.promisedTerm) return this.refuse(from, 'StaleTerm', `two leaders of term ${m.term}`); // cannot happen: one Lead per term
    this.promise(m.term);
    this.heardFrom(m.term, m.commitIndex, m.leased);
    if (m.prevIndex > this.lastIndex) return this.refuse(from, 'LogGap', `the records start after index ${m.prevIndex}; this replica's log ends at ${this.lastIndex}`);
    let records = m.records;
    if (m.prevIndex < this.snapIndex) {
      // What this replica has in its snapshot is committed, so it is the leader's too.
      records = records.filter((r) => r.index > this.snapIndex);
      if (records.length === 0) return this.ackWhenDurable(from, m.term, m.prevIndex + m.records.length, m.commitIndex, m.sentAt, true);
    } else if (this.termAt(m.prevIndex) !== m.prevTerm) {
      return this.refuse(from, 'LogMismatch', `record ${m.prevIndex} is of term ${this.termAt(m.prevIndex)} here and ${m.prevTerm} at the leader`);
    }
    // Skip what this log already has; cut a diverged tail at the first record of another term.
    let k = 0;
    while (k < records.length && records[k].index <= this.lastIndex && this.termAt(records[k].index) === records[k].term) k++;
    const fresh = k === 0 ? records : records.slice(k);
    if (fresh.length > 0) {
      if (fresh[0].index <= this.lastIndex) {
        assert(fresh[0].index > this.commit, `a committed record is never cut (cut at ${fresh[0].index}, committed ${this.commit}): refused above`);
        this.host.disk.write({ kind: 'truncate', after: fresh[0].index - 1 });
        this.records.length = fresh[0].index - 1 - this.snapIndex;
        // (A leader of this term never sends another record where it sent one: this cuts past leaderMatch.)
        this.leaderMatch = Math.min(this.leaderMatch, this.lastIndex);
      }
      this.appendLocal(fresh);
    }
    this.ackWhenDurable(from, m.term, m.prevIndex + m.records.length, m.commitIndex, m.sentAt, true);
  }

  /** Whether this replica lacks record `r`: neither in its snapshot nor in its log at `r`'s term. */
  private lacks(r: ReplicaRecord): boolean {
    return r.index > this.snapIndex && !(r.index <= this.lastIndex && this.termAt(r.index) === r.term);
  }

  private onSnapshot(from: ReplicaId, m: ReplicationMessage & { type: 'Snapshot' }): void {
    if (m.term < this.promisedTerm) return this.refuse(from, 'StaleTerm', `a snapshot of term ${m.term}; this replica promised term ${this.promisedTerm}`);
    if (m.lastTerm > m.term) return this.refuse(from, 'MalformedContents', `a snapshot up to a record of term ${m.lastTerm} sent in term ${m.term}; nothing of it was applied`);
    // Its state replaces this replica's only past the commit point: checked whole before that (restore cannot refuse).
    const problem = m.index > this.commit ? (this.host.checkState?.(m.state) ?? null) : null;
    if (problem !== null) return this.refuse(from, 'MalformedContents', `the state of the snapshot at ${m.index}: ${problem}; nothing of it was applied`);
    this.promise(m.term);
    this.heardFrom(m.term, m.commitIndex, m.leased);
    if (m.index > this.commit) {
      // Replaces everything this replica applied (all of it is in the snapshot, which is committed).
      this.host.disk.write({ kind: 'snapshot', index: m.index, term: m.lastTerm, state: m.state });
      const keep = this.termAt(m.index) === m.lastTerm ? this.records.slice(m.index - this.snapIndex) : [];
      this.records = keep;
      this.snapIndex = m.index;
      this.snapTerm = m.lastTerm;
      this.snapState = m.state;
      this.host.restore(m.state);
      this.applied = m.index;
      this.commit = m.index;
    }
    this.ackWhenDurable(from, m.term, m.index, m.commitIndex, m.sentAt, true);
  }

  /** The leader of m.term still leads it. Answered with KeepAliveOk, which renews the leader's lease (nothing is
   * written: the answer says only that this replica has promised no newer term), or by a replica that promised a
   * newer term with StaleTerm, which tells a deposed leader, as it would an Append. */
  private onKeepAlive(from: ReplicaId, m: ReplicationMessage & { type: 'KeepAlive' }): void {
    if (m.term < this.promisedTerm) return this.refuse(from, 'StaleTerm', `a keep-alive of term ${m.term}; this replica promised term ${this.promisedTerm}`);
    // A leader sends it only to a replica that answered one of its Appends, so that promised its term durably: a
    // newer term (a replica that lost its disk) or a leader of its own term (cannot be: one Lead per term) is
    // dropped; the keep-alive brings no records, so it is no reason to promise a term.
    if (m.term !== this.promisedTerm || this.leading) return;
    this.heardFrom(m.term, m.commitIndex, m.leased);
    // A commit point it can apply (its log is the leader's that far) is written, and answered as an Append's is:
    // AppendOk once durable, saying it holds it. That is how a leader carries its commit point to a follower that
    // holds every record (tick), without a second message per slice.
    if (Math.min(m.commitIndex, this.leaderMatch) > this.commit) return this.ackWhenDurable(from, m.term, this.leaderMatch, m.commitIndex, m.sentAt, false);
    this.answeredAt = this.host.now();
    this.host.send(from, { type: 'KeepAliveOk', term: m.term, sentAt: m.sentAt });
  }

  /** Answers once what was written is durable, and only if no newer term came meanwhile (a newer
   * leader may have cut those records: an old leader must not count them). The answer carries the
   * commit index this replica held when it asked for the sync: its 'commit' write came before, so it is
   * durable now and survives a restart. (One learned in the callback is written after the sync and may
   * not be: a leader told that would stop sending heartbeats to a follower that lost it in a crash,
   * leaving its last committed records unapplied.) */
  private ackWhenDurable(to: ReplicaId, term: number, matchIndex: number, leaderCommit: number, sentAt: number, taken: boolean): void {
    assert(term === this.promisedTerm && matchIndex <= this.lastIndex, 'a follower acknowledges records it holds, at the term it promised');
    // What this message made of its log is the leader's log up to matchIndex (an Append or Snapshot it took).
    if (taken) this.leaderMatch = Math.max(this.leaderMatch, matchIndex);
    // What the leader has committed and this replica holds (as of the leader's records: its log up to matchIndex is
    // the leader's) is committed: applied and written now, before the sync below, so that the answer can say it
    // holds it durably. Learned in the sync's callback instead, it was written after that sync, and the leader,
    // told only the commit point from before, sent every slice written since a tick a second heartbeat.
    const upTo = Math.min(leaderCommit, matchIndex, this.lastIndex);
    if (upTo > this.commit && this.termAt(upTo) !== undefined) this.advanceCommit(upTo);
    const durableCommit = this.commit;
    this.host.disk.sync(() => {
      if (this.promisedTerm !== term || this.leading) return;
      this.answeredAt = this.host.now();
      this.host.send(to, { type: 'AppendOk', term, matchIndex, commitIndex: durableCommit, sentAt });
    });
  }

  /** The leader of `term` sent its commit index: what this follower must have applied before it may answer reads,
   * and, if that leader held its lease when it sent it (`leased`), for how long it may (readable). A leader that was
   * deposed without knowing it holds no lease since before the election that deposed it (leaseValid), so a
   * follower that still hears it and not the new leader (one left out of that election's majority, at R >= 5)
   * stops answering eventual reads REPLICA_READ_STALENESS_MS after that leader's last leased message at the
   * latest, as if it heard from nobody. */
  private heardFrom(term: number, commitIndex: number, leased: boolean): void {
    assert(term === this.promisedTerm, 'a follower hears from the leader of the term it promised');
    if (term !== this.heardTerm) {
      this.heardTerm = term;
      this.heardCommit = 0;
      this.heardAt = -Infinity;
    }
    this.heardCommit = Math.max(this.heardCommit, commitIndex);
    if (leased) this.heardAt = this.host.now();
  }

  private appendLocal(records: ReplicaRecord[]): void {
    this.host.disk.write({ kind: 'append', records });
    for (const r of records) {
      assert(r.index === this.lastIndex + 1, 'a log grows without a gap');
      this.records.push(r);
    }
  }

  private advanceCommit(index: number): void {
    if (index <= this.commit) return;
    assert(index <= this.lastIndex, 'only records this replica holds are committed');
    this.commit = index;
    this.host.disk.write({ kind: 'commit', index });
    while (this.applied < this.commit) {
      this.applied++;
      this.host.apply(this.recordAt(this.applied)!);
    }
  }
}

/** The Appends of one loop of a leader over its followers (propose, tick: each write goes to every follower in the same
 * call), sent at one time (`now`, with the lease as it stands then) and of at most `recordsMax` records each: the
 * followers that share `next` (the common case) get one object, which their host encodes once
 * (encodeReplicationMessage). It lives for that call only, so nothing the leader's state may change between calls
 * (term, commit point, lease, send time, log) can make it send an older Append. `append`: the last one it built. */
class AppendRound {
  append: AppendMessage | null = null;
  constructor(
    readonly recordsMax: number,
    readonly now: number,
    readonly leased: boolean,
  ) {}
}

// Failover of one slice's leader, as the coordinator drives it: a pure state
// machine (messages in, messages out through its host, the clock injected), run
// by the seeded simulation (test/replication-sim.ts) and meant for the
// coordinator's links. docs/replication.md says why it loses no acknowledged write.
//
// The coordinator asks the leader every pingIntervalMs whether it still leads the
// slice's term. With no such answer for heartbeatTimeoutMs (the leader died, froze,
// restarted and so leads nothing, or is cut off) it elects another:
//  1. a new term, larger than every term it used (persisted first: host.persistTerm);
//  2. Prepare(term) to every replica: each promises the term durably, so that none
//     takes a record of an older term from then on, and answers its last (term, index);
//  3. with answers from a majority of the replicas, the one with the largest
//     (last term, last index) leads: a write acknowledged by the old leader is
//     durable on a majority, every majority shares a replica with that one, and log
//     order makes the largest (last term, last index) hold it (chooseLeader below);
//  4. Lead(term) to it, and the map names it (host.publish), which routers follow.
// Without a majority within electionTimeoutMs it starts again with a newer term.
import { assert } from '../../shared/errors.js';
import { LEADER_ELECTION_TIMEOUT_MS, LEADER_HEARTBEAT_INTERVAL_MS, LEADER_HEARTBEAT_TIMEOUT_MS } from '../../shared/limits.js';
import type { ReplicaId, ReplicationMessage } from '../../shared/replication-protocol.js';

export interface FailoverTiming {
  pingIntervalMs: number;
  heartbeatTimeoutMs: number;
  electionTimeoutMs: number;
}

/** The coordinator's timing (shared/limits.ts); the simulation uses its own, shorter one. */
export const FAILOVER_TIMING_DEFAULT: FailoverTiming = {
  pingIntervalMs: LEADER_HEARTBEAT_INTERVAL_MS,
  heartbeatTimeoutMs: LEADER_HEARTBEAT_TIMEOUT_MS,
  electionTimeoutMs: LEADER_ELECTION_TIMEOUT_MS,
};

export interface FailoverHost {
  send(to: ReplicaId, message: ReplicationMessage): void;
  now(): number;
  /** Persist that `term` is used (before any replica hears of it), so it is never used twice. */
  persistTerm(term: number): void;
  /** The slice's new leader at `term`, in the map (persisted, then published to routers). */
  publish(leader: ReplicaId, term: number): void;
}

export interface LastRecord {
  lastTerm: number;
  lastIndex: number;
}

/** The replica to lead: the largest (last term, last index) among the answers, or null without
 * answers from a majority of `replicas`. Ties go to the replica listed first. */
export function chooseLeader(replicas: readonly ReplicaId[], answers: ReadonlyMap<ReplicaId, LastRecord>): ReplicaId | null {
  const counted = replicas.filter((r) => answers.has(r));
  if (counted.length < Math.floor(replicas.length / 2) + 1) return null;
  let best = counted[0];
  for (const r of counted) {
    const a = answers.get(r)!;
    const b = answers.get(best)!;
    if (a.lastTerm > b.lastTerm || (a.lastTerm === b.lastTerm && a.lastIndex > b.lastIndex)) best = r;
  }
  return best;
}

export class SliceFailover {
  private leader: ReplicaId | null;
  private term: number;
  private lastGoodAt: number;
  private pingSeq = 0;
  private lastPingAt = -Infinity;
  private election: { term: number; startedAt: number; answers: Map<ReplicaId, LastRecord> } | null = null;
  /** Elections started, for reports. */
  elections = 0;
  private voters: readonly ReplicaId[];

  constructor(
    private readonly replicas: readonly ReplicaId[],
    leader: ReplicaId | null,
    term: number,
    private readonly timing: FailoverTiming,
    private readonly host: FailoverHost,
    /** Which replica leads, from the answers (the simulation swaps in a wrong one to see its checker catch it). */
    private readonly choose: typeof chooseLeader = chooseLeader,
    /** Whose answers make the majority, when the replica set changed (docs/replication.md): the OLD set,
     * since an acknowledged write is durable on a majority of the set it was acknowledged in. Only
     * replicas of the new set that are also in it can be chosen. Null: the replicas themselves. */
    electorate: readonly ReplicaId[] | null = null,
  ) {
    assert(new Set(replicas).size === replicas.length && replicas.length >= 1, 'a slice\'s replicas are distinct');
    this.voters = electorate ?? replicas;
    assert(this.voters.some((r) => replicas.includes(r)), 'the old and the new replica set share a replica');
    this.leader = leader;
    this.term = term;
    this.lastGoodAt = host.now();
  }

  get currentLeader(): ReplicaId | null {
    return this.election === null ? this.leader : null;
  }
  get currentTerm(): number {
    return this.term;
  }

  tick(): void {
    const now = this.host.now();
    if (this.election !== null) {
      if (now - this.election.startedAt >= this.timing.electionTimeoutMs) this.startElection();
      return;
    }
    if (this.leader === null || now - this.lastGoodAt >= this.timing.heartbeatTimeoutMs) return this.startElection();
    if (now - this.lastPingAt >= this.timing.pingIntervalMs) {
      this.lastPingAt = now;
      this.host.send(this.leader, { type: 'Ping', seq: ++this.pingSeq });
    }
  }

  receive(from: ReplicaId, m: ReplicationMessage): void {
    if (m.type === 'Pong') {
      if (this.election !== null || from !== this.leader || m.term < this.term) return;
      if (m.term === this.term && m.leading) {
        this.lastGoodAt = this.host.now();
        // Its barrier (the term's first record) is committed: durable on a majority of this set, with every
        // write acknowledged before the set changed. From now on a majority of this set elects.
        if (m.commitTerm >= this.term) this.voters = this.replicas;
      }
      // It restarted (it leads nothing) or it promised a newer term: no need to wait out the timeout.
      else this.lastGoodAt = -Infinity;
      return;
    }
    if (m.type !== 'Prepared' || this.election === null || m.term !== this.election.term || !this.replicas.includes(from)) return;
    // Answers of the electorate only: a new replica (not in the old set) holds nothing to choose from.
    if (this.voters.includes(from)) this.election.answers.set(from, { lastTerm: m.lastTerm, lastIndex: m.lastIndex });
    const chosen = this.choose(this.voters, this.election.answers);
    if (chosen === null) return;
    assert(this.replicas.includes(chosen), 'the chosen leader is in the slice\'s replica set');
    const term = this.election.term;
    this.election = null;
    this.leader = chosen;
    this.term = term;
    this.lastGoodAt = this.host.now();
    this.host.publish(chosen, term);
    this.host.send(chosen, { type: 'Lead', term, followers: this.replicas.filter((r) => r !== chosen) });
  }

  private startElection(): void {
    const term = Math.max(this.term, this.election?.term ?? 0) + 1;
    assert(term > this.term, 'a leader term only grows');
    this.host.persistTerm(term);
    this.elections++;
    this.election = { term, startedAt: this.host.now(), answers: new Map() };
    for (const r of new Set([...this.replicas, ...this.voters])) this.host.send(r, { type: 'Prepare', term });
  }

  /** A majority of the replicas said they durably hold the barrier of a leader this failover elected (so
   * every write acknowledged before the set changed): a majority of them elects from now on. */
  settleElectorate(): void {
    this.voters = this.replicas;
  }
  /** Whether elections count the replicas themselves (not an older set's, after a change). */
  get electorateSettled(): boolean {
    return this.voters === this.replicas;
  }
  /** Whose answers an election counts. */
  get electorate(): readonly ReplicaId[] {
    return this.voters;
  }
  /** The coordinator lost its link to the leader: elect without waiting out the heartbeat timeout. */
  suspectLeader(): void {
    this.lastGoodAt = -Infinity;
  }
}

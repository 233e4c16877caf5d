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
//  4. Lead(term) to it, and the map names it (host.publish), which routers follow; but not before the lease of
//     the leader before has run out (each answer says how long that may take by its replica's clock), unless that
//     leader itself answered: it stopped leading when it promised (docs/replication.md, "Leases").
// Without a majority within electionTimeoutMs it starts again with a newer term.
//
// A replica-set change that keeps the elected leader, answering, in the set does not elect (changedTo): the
// leader leads on at a new term (LeadOn), with the change's sets, keeping its writes not yet committed. A
// leader that does not lead its term any more refuses, and an election follows at once.
import { assert } from '../../shared/errors.js';
import { CARRIER_AVOIDED_ANSWER_WAIT_SHARE, CARRIER_SETTLE_TIMEOUT_FACTOR, HANDOVER_TARGET_ANSWER_WAIT_SHARE, LEADER_ELECTION_TIMEOUT_MS, LEADER_HEARTBEAT_INTERVAL_MS, LEADER_HEARTBEAT_TIMEOUT_MS, LEADER_SLOW_TIMEOUT_FACTOR, WORKER_SILENT_AFTER_PING_INTERVALS, SETTLE_PROBE_FIRST_GAP_SHARE } from '../../shared/limits.js';
import type { ReplicaId, ReplicationMessage } from '../../shared/replication-protocol.js';

// The settle probes' first gap is a share of the ping interval, doubled per probe up to it (SliceFailover.tick): at 0
// the gap would stay 0 and every replica be pinged each tick until the change settles; above 1 the first gap would
// exceed the interval the doubling is capped at.
assert(SETTLE_PROBE_FIRST_GAP_SHARE > 0 && SETTLE_PROBE_FIRST_GAP_SHARE <= 1, `SETTLE_PROBE_FIRST_GAP_SHARE is in (0, 1], not ${SETTLE_PROBE_FIRST_GAP_SHARE}`);

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

/** Why an election started, one code each (keyslice_elections_total's `reason`, the coordinator's log): a
 * join, a drain or a remove should elect only where a leader was handed over (`handover`), where a handover before a
 * change was given up or the leader's node died (`change_leader_left`, `link_lost`), not because a change was made. */
export const ELECTION_REASONS = {
  start: 'no leader known (the coordinator started, or the slice became replicated)',
  handover: 'a leadership handover',
  change_leader_left: "a replica-set change took the leader's replica out",
  change_leader_silent: 'a replica-set change whose leader had not answered lately',
  change_chained: 'a replica-set change made before the one before it settled under an elected leader',
  leader_timeout: 'leader timeout',
  link_lost: 'link to the leader lost',
  leader_leads_nothing: 'leader leads nothing',
  newer_term: 'leader promised a newer term',
  lead_on_refused: 'leader could not lead on at the new term',
  carrier_unsettled: 'a replica outside the newest set that carries a change did not settle it in time',
  election_timeout: 'election timeout',
  unrecorded: 'the cluster map could not record the turn that started the election or named the leader',
} as const;
export type ElectionReason = keyof typeof ELECTION_REASONS;

export interface FailoverHost {
  send(to: ReplicaId, message: ReplicationMessage): void;
  now(): number;
  /** Persist that `term` is used (before any replica hears of it), so it is never used twice; `reason`: why the
   * election that takes it started, null: by a leader that leads on (LeadOn), not by an election. */
  persistTerm(term: number, reason: ElectionReason | null): void;
  /** The slice's new leader at `term`, in the map (persisted, then published to routers): from then on lastLead() names
   * it, once its Lead (or LeadOn) leaves. */
  publish(leader: ReplicaId, term: number): void;
  /** [term, replica] of the last Lead or LeadOn sent for the slice, as the map persisted it before it left (ClusterMap
   * lastLeadOf), the one record of it; replica null: not known (a map written before it was kept, or a time when the
   * slice had one replica), and the term then the map's (at least the last one a Lead was sent for, recorded before the
   * Lead leaves; it was that one unless a handover named a leader at a newer term before its election, and then no
   * replica led it: leases are waited out). An election's answer from that replica, or one that says it led that term,
   * ends the wait for leases (ledLast below). */
  lastLead(): readonly [number, ReplicaId | null];
  /** True: no Lead or LeadOn was ever sent for the slice (a new cluster's slice, its owners placed at the start or as
   * its nodes joined, by the map: ClusterMap.neverLed), so no replica ever led it and no lease of it can run
   * (leasesOut). Absent or false: one may have been (the simulation's and the stories' failovers, which begin
   * mid-history, wait leases out as before). */
  neverLed?(): boolean;
  /** Until when replica `r` is known to answer: the time of the first question (a Ping or Prepare) the coordinator sent
   * the worker of `r`'s node that runs this slice that nothing from that worker has followed since (kept across the drop
   * of a stuck worker's questions: OpenQuestions.workerSilentFrom), FIRST_ANSWER_GRACE_PING_INTERVALS later where that
   * worker is not known to replicate a slice yet (it may be dropping them until its assignment comes); now (or later)
   * when it owes no answer; -Infinity over a link that is not up. So a replica is judged on how long it takes to answer,
   * not on how long the coordinator took to ask (its pings go every ping interval rounded up to a tick, and not at all
   * while it stalls: issue 14), and by its own worker, not by another worker of its node that is stuck (which answers
   * none of this slice's questions). Liveness only: who is elected and how soon a leader is replaced; terms fence a
   * replaced leader and leases are waited out by the replicas' answers (leasesOut), whatever this says. Absent: every
   * replica counts as unheard (the simulation). */
  heardFrom?(r: ReplicaId): number;
}

/** How many of `n` replicas make a majority. */
export const majority = (n: number) => Math.floor(n / 2) + 1;

export interface LastRecord {
  lastTerm: number;
  lastIndex: number;
}
/** An answer to a Prepare: its last record, and until when (host.now) the lease of the leader it last answered may run. */
interface Promise_ extends LastRecord {
  leaseEndsBy: number;
  /** It led the last term a Lead was sent for, or it is the replica that Lead went to (host.lastLead): it held the
   * only lease that may still run, and holds none now. */
  ledLast: boolean;
  /** It holds a record of a term (lastTerm > 0) or it led one (ledTerm > 0): some replica led the slice, whatever the
   * host's record says (leasesOut). */
  saysLed: boolean;
}

/** The replica to lead: the largest (last term, last index) among the answers, or null without
 * answers from a majority of `replicas`. Ties go to the replica listed first. */
export function chooseLeader(replicas: readonly ReplicaId[], answers: ReadonlyMap<ReplicaId, LastRecord>): ReplicaId | null {
  const counted = replicas.filter((r) => answers.has(r));
  if (counted.length < majority(replicas.length)) return null;
  let best = counted[0];
  for (const r of counted) {
    const a = answers.get(r)!;
    const b = answers.get(best)!;
    if (a.lastTerm > b.lastTerm || (a.lastTerm === b.lastTerm && a.lastIndex > b.lastIndex)) best = r;
  }
  return best;
}

export const sameSet = (a: readonly ReplicaId[], b: readonly ReplicaId[]) => a.length === b.length && a.every((r) => b.includes(r));

/** The sets whose majorities a slice's elections and commits need besides `next`'s once its set changed to `next`:
 * `sets` (the set before and the older sets of its change if that had not settled, newest first) less any equal to
 * `next`. The failover applies it at a change (changedTo), and the cluster map records it with the change itself
 * (cluster-map.ts), so that a coordinator that restarts before the change settled elects by the same joint
 * majorities (docs/replication.md, "A coordinator that restarts"). */
export const setsBefore = (sets: readonly (readonly ReplicaId[])[], next: readonly ReplicaId[]): ReplicaId[][] => sets.filter((set) => !sameSet(set, next)).map((set) => [...set]);

/** What the cluster map persisted of a replicated slice, from which a coordinator that starts builds its failover
 * (SliceFailover.atStart). */
export interface PersistedSlice {
  /** The slice's replica set, leader first. */
  replicas: readonly ReplicaId[];
  /** The largest term any election of the slice used (ClusterMap.lastTermUsed). */
  termUsed: number;
  /** The sets before `replicas` whose change had not settled, newest first (ClusterMap.unsettledOf). */
  unsettled: readonly (readonly ReplicaId[])[];
}

export class SliceFailover {
  /** The failover of a slice as a coordinator that starts (or restarts) builds it: no known leader, so it elects at
   * once, by majorities of the slice's set AND of the sets of a change that had not settled (a majority of the new set
   * alone need not hold a write acknowledged on a majority of the old one: docs/replication.md, "A coordinator that
   * restarts"); the last Lead the map recorded comes from the host, as for every failover (host.lastLead). */
  static atStart(p: PersistedSlice, timing: FailoverTiming, host: FailoverHost, choose: typeof chooseLeader = chooseLeader): SliceFailover {
    return new SliceFailover(p.replicas, null, p.termUsed, timing, host, choose, p.unsettled);
  }
  /** The failover of a leadership handover (ReplicaLeaders.handOver): the same set, no leader until its election,
   * which waits a while for the answer of the replica handed to (listed first). The simulation's handovers are made
   * by it too (with its chooser), so that this wait runs under its faults. */
  static handOver(replicas: readonly ReplicaId[], termUsed: number, timing: FailoverTiming, host: FailoverHost, choose: typeof chooseLeader = chooseLeader): SliceFailover {
    return new SliceFailover(replicas, null, termUsed, timing, host, choose, [], 'handover');
  }

  private leader: ReplicaId | null;
  private term: number;
  private lastGoodAt: number;
  private lastPingAt = -Infinity;
  /** An election under way; `refused`: replicas that said they promised its term or a newer one without answering
   * it (a repeated Prepare, after a link came back), so will not answer it. */
  private election: { term: number; startedAt: number; answers: Map<ReplicaId, Promise_>; refused: Set<ReplicaId> } | null = null;
  /** Elections started, for reports. */
  elections = 0;
  /** Whether this failover's leader was told to lead on (LeadOn) and has not said (Pong) that it does yet. */
  private leadingOn = false;
  /** The term the leader led when it was last told to lead on (LeadOn's `from`): what it still leads if that LeadOn
   * never left (unrecorded). */
  private leadOnFrom = 0;
  /** The host recorded nothing of this failover's last turn and sent none of its messages (unrecorded): tick does it
   * again. */
  private redoDue = false;
  /** The replica sets whose majorities an election hears from and a leader's commit needs (joint majorities):
   * configs[0] is this failover's set; the others are the sets before it since the last settled change, newest
   * first. One set once the change settled (settleIfHeld). */
  private configs: readonly (readonly ReplicaId[])[];
  /** Every replica of every set in `configs` (those an election asks, those a leader replicates to); set with it. */
  private allMembers: readonly ReplicaId[];
  /** Whether this failover elected a leader (for its set) at some point; its term is `term`. */
  private published = false;
  private lastProbeAt = -Infinity;
  /** How long after the last settle probe the next one goes (tick): SETTLE_PROBE_FIRST_GAP_SHARE of the ping interval
   * after the first, doubled per probe after that up to the interval. The first probe, a tick after the leader was
   * elected, mostly comes before its barrier committed (the leader's own Pong still says the term before), and at a ping
   * interval each a change then waited a whole interval (500 ms) more to settle: a replica move's two changes, and its
   * catch-up, waited it twice. */
  private settleProbeGapMs: number;
  /** The replica a handover named (listed first), while the handover's own election has not named a leader: that
   * election waits a while for its answer (finishElection). Null for every other election: a failover that was a
   * handover keeps its reason (noLeaderBecause) for its lifetime, and a later election (a leader timeout after the new
   * leader froze) must not wait for a replica that led and died. */
  private handoverTo: ReplicaId | null;
  /** What each replica's latest Pong said of the term of its commit point. */
  private readonly commitTerms = new Map<ReplicaId, number>();
  /** A term whose leader (the one this failover elected or led on) said (Pong) that it led it and no longer does: not
   * leading at that term with a commit point of that term. It can have stopped only by itself (a carrier whose barrier
   * committed, Replica.leaderCommit; a leader whose node left the set, resign) or by a restart, and leads that term
   * never again (the one Lead of a term was taken): no lease of it runs (leasesOut). 0: none. */
  private stoppedLeading = 0;
  /** When the leader, a replica outside this set carrying the change (finishElection), was elected; null for a leader
   * of this set (install). */
  private carriedSince: number | null = null;

  constructor(
    readonly replicas: readonly ReplicaId[],
    leader: ReplicaId | null,
    term: number,
    private readonly timing: FailoverTiming,
    private readonly host: FailoverHost,
    /** Which replica leads, from the answers (the simulation swaps in a wrong one to see its checker catch it). */
    private readonly choose: typeof chooseLeader = chooseLeader,
    /** The sets before this one whose change has not settled, newest first (docs/replication.md): until the
     * change settles, an election needs a majority of each of them and of `replicas`, and so does every commit
     * of a leader it elects. Empty: no change under way. */
    older: readonly (readonly ReplicaId[])[] = [],
    /** Why it elects, with no leader given (its first election's reason). */
    private readonly noLeaderBecause: ElectionReason = 'start',
  ) {
    assert(new Set(replicas).size === replicas.length && replicas.length >= 1, 'a slice\'s replicas are distinct');
    this.configs = [replicas, ...older];
    this.allMembers = [...new Set(this.configs.flat())];
    this.leader = leader;
    this.term = term;
    this.lastGoodAt = host.now();
    this.settleProbeGapMs = timing.pingIntervalMs * SETTLE_PROBE_FIRST_GAP_SHARE;
    this.handoverTo = noLeaderBecause === 'handover' ? replicas[0] : null;
  }

  get currentLeader(): ReplicaId | null {
    return this.election === null ? this.leader : null;
  }
  get currentTerm(): number {
    return this.term;
  }

  /** The host (the coordinator) did not run for `ms` up to `now` (ReplicaLeaders.tick: a tick that came that late):
   * no Ping left and no Pong was read meanwhile, so that time is left out of the leader's silence (lastGoodAt) and of
   * the ages of the election under way and of the carrier's change, only the part after each began, as NodeLink.excuse
   * does for a node's silence. Else a coordinator stopped longer than the heartbeat timeout (SIGSTOP, a paused VM)
   * elected every slice anew at its first tick that looked at timeouts, whose leaders had answered until it stopped.
   * Liveness alone: terms fence every election, and a lease is waited out from its own answer's time, not from these. */
  excuse(ms: number, now = this.host.now()): void {
    assert(ms >= 0, 'a stall lasts a while');
    if (this.lastGoodAt !== -Infinity) this.lastGoodAt = Math.min(now, this.lastGoodAt + ms);
    if (this.election !== null) this.election.startedAt = Math.min(now, this.election.startedAt + ms);
    if (this.carriedSince !== null) this.carriedSince = Math.min(now, this.carriedSince + ms);
  }

  tick(): void {
    if (this.redoDue) {
      this.redoDue = false;
      // A LeadOn that never left: its leader still leads the term before, and is told again, at a newer term (the one
      // taken was never recorded; a term only grows). Anything else (a Lead that never left, an election whose
      // Prepares did not): an election at a newer term, as after a timeout but without waiting it out.
      if (this.election === null && this.leader !== null && this.leadingOn && this.lastGoodAt !== -Infinity) this.leadOn(this.leader, this.leadOnFrom, this.lastGoodAt);
      else if (this.election !== null || this.leader !== null) return this.startElection('unrecorded');
    }
    const now = this.host.now();
    this.settleIfHeld();
    if (!this.electorateSettled && this.published && now - this.lastProbeAt >= this.settleProbeGapMs) {
      // Asks every replica whether it holds the elected leader's barrier (Pong.commitTerm): see settleIfHeld.
      // The first probe leaves the first gap as it is: doubled there, the share named was never waited.
      if (this.lastProbeAt !== -Infinity) this.settleProbeGapMs = Math.min(2 * this.settleProbeGapMs, this.timing.pingIntervalMs);
      this.lastProbeAt = now;
      for (const r of this.members) if (r !== this.leader) this.host.send(r, { type: 'Ping', seq: 0 });
    }
    if (this.election !== null) {
      const e = this.election;
      // Named, or a majority answered and a lease is running out: the election ends once it has (not later than
      // LEASE_MS), not by its timeout.
      if (this.finishElection() !== 'not yet') return;
      // Replicas that promised the term and have not answered yet, on nodes that answer other slices: their answer
      // is slow (a node restarting or catching up), not lost. A newer term would make every replica promise again
      // and lose the answers already in, so the election waits, up to LEADER_SLOW_TIMEOUT_FACTOR times its timeout.
      const slow = this.members.some((r) => !e.answers.has(r) && !e.refused.has(r) && this.heardLately(r, now)) && now - e.startedAt < LEADER_SLOW_TIMEOUT_FACTOR * this.timing.electionTimeoutMs;
      if (now - e.startedAt >= this.timing.electionTimeoutMs && !slow) this.startElection('election_timeout');
      return;
    }
    if (this.leader === null) return this.startElection(this.noLeaderBecause);
    if (this.lastGoodAt === -Infinity) return this.startElection(this.suspectedFor);
    if (!this.leaderAnswering(now)) return this.startElection('leader_timeout');
    // A carrier that answers but has not settled its change (its barrier not on a majority of the newest set): the
    // slice has no serving leader meanwhile, so it does not lead without end (CARRIER_SETTLE_TIMEOUT_FACTOR). The
    // election is any election: a newer term, persisted, that the carrier promises (it stops leading), and leases
    // waited out by leasesOut.
    if (this.carriedSince !== null && !this.electorateSettled && now - this.carriedSince >= CARRIER_SETTLE_TIMEOUT_FACTOR * this.timing.heartbeatTimeoutMs) {
      return this.startElection('carrier_unsettled');
    }
    if (now - this.lastPingAt >= this.timing.pingIntervalMs) {
      this.lastPingAt = now;
      // Seq 0: nothing here reads a Pong's; the coordinator's OpenQuestions gives each Ping the seq its Pong answers.
      this.host.send(this.leader, { type: 'Ping', seq: 0 });
    }
  }

  receive(from: ReplicaId, m: ReplicationMessage): void {
    if (m.type === 'Pong') {
      if (this.members.includes(from)) this.commitTerms.set(from, m.commitTerm);
      if (from !== this.leader || m.term < this.term) return;
      // A commit point of its own term, the term still promised, not leading: it led the term and stepped down, or
      // restarted. Taken during an election too: a carrier's followers learn its commit point as it steps down, and
      // one of their Pongs may settle the change (and start the newest set's election) before the carrier's comes.
      if (m.term === this.term && !m.leading && m.commitTerm >= this.term) this.stoppedLeading = this.term;
      if (this.election !== null) return;
      if (m.term === this.term && m.leading) {
        this.lastGoodAt = this.host.now();
        this.leadingOn = false;
        // Its barrier (the term's first record) is committed: durable on a majority of this set, with every
        // write acknowledged before the set changed. From now on a majority of this set elects.
        // (It counted joint majorities for it: a majority of every set of the change holds it.)
        if (m.commitTerm >= this.term) this.settle();
      }
      // It restarted (it leads nothing) or it promised a newer term: no need to wait out the timeout.
      else this.suspect(m.term > this.term ? 'newer_term' : 'leader_leads_nothing');
      return;
    }
    if (m.type === 'Refused' && this.election !== null && m.term >= this.election.term && this.members.includes(from)) this.election.refused.add(from);
    // The leader refused to lead on (it did not lead its term any more: restarted, say): elect now, not after the timeout.
    if (m.type === 'Refused' && this.election === null && this.leadingOn && from === this.leader && m.term < this.term) {
      this.leadingOn = false;
      return this.suspect('lead_on_refused');
    }
    if (m.type !== 'Prepared' || this.election === null || m.term !== this.election.term || !this.members.includes(from)) return;
    if (this.election.answers.has(from)) return;
    const [lastLed, lastLedBy] = this.host.lastLead();
    this.election.answers.set(from, { lastTerm: m.lastTerm, lastIndex: m.lastIndex, leaseEndsBy: this.host.now() + m.leaseWaitMs, ledLast: (m.ledTerm > 0 && m.ledTerm === lastLed) || from === lastLedBy, saysLed: m.lastTerm > 0 || m.ledTerm > 0 });
    this.finishElection();
  }

  /** No lease of an older leader may still run: the last leader answered (it stopped leading when it promised), or
   * the answers whose reported wait is over are by themselves a majority of every set. The lease counted a majority
   * of its set, which shares a replica with that majority, and that replica's wait is over, so the lease ended. An
   * answer still waiting (a node that just restarted reports a full LEASE_MS, not knowing what it answered before
   * its crash) holds nothing up once enough others are past theirs: only some majority's waits matter, not all. */
  private leasesOut(answers: ReadonlyMap<ReplicaId, Promise_>): boolean {
    const now = this.host.now();
    // No replica ever led the slice: no Lead or LeadOn was sent for it (the host's record says none, and every one is
    // recorded before it leaves), nor by this failover (neverLed). A lease is held only by a leader, from a Lead or
    // LeadOn on, so none can run, and the first election of a new cluster's slice names its leader without waiting
    // out the full LEASE_MS each answer reports of a replica that just started. Wherever a Lead may have been sent (a
    // coordinator restarted on a map that records one, a slice led before its set shrank to one replica) the record
    // says so, and the answers' waits hold as below (docs/replication.md, "Leases"). An answer that holds a record of
    // a term, or led one, says a leader was there all the same (a map file put back from an older copy, or written since
    // by a coordinator that did not keep everLed, hides the Leads sent since): then the waits hold too. Only a
    // stricter rule: a slice never led has empty replica logs (a replica made from a set of one starts at term 0), and
    // its replicas led nothing.
    if (this.neverLed() && ![...answers.values()].some((p) => p.saysLed)) return true;
    for (const p of answers.values()) if (p.ledLast) return true;
    // The last leader said it stopped leading its term (stoppedLeading): a carrier once its barrier settled the
    // change, whose set then elects without asking it (settle), would otherwise cost the slice a whole lease more.
    if (this.stoppedLeading > 0 && this.stoppedLeading === this.host.lastLead()[0]) return true;
    return this.quorumAmong((r) => (answers.get(r)?.leaseEndsBy ?? Infinity) <= now);
  }

  /** No replica ever led the slice (see leasesOut, the rule it makes): no Lead or LeadOn was sent for it, by the host's
   * record (FailoverHost.neverLed) nor by this failover (whose Lead the record may not hold yet). */
  private neverLed(): boolean {
    return !this.published && this.host.neverLed?.() === true;
  }

  /** Names the leader once a majority answered and no lease of an older leader may still run: every leader before
   * the last one named had its lease run out before that one was named (this rule, by induction), and the last one's
   * lease counted on answers from a majority of its set, one of which is among the answers whose wait is over (two
   * majorities meet: leasesOut), and that replica's leaseEndsBy is no earlier than the lease's end. If the last leader
   * itself answered, it stopped leading (and serving reads) when it promised; if the replica it was answered from a
   * process started since (it leads nothing, ledTerm 0), the leader's process exited: a node's replicas live in the one
   * process that holds its data folder (data-folder-lock.ts), and a lease lives in the leader's process. The wait is measured by this clock from when each answer arrived,
   * which is later than it was sent. Whether it named one ('named'), waits only for a lease to run out ('leases'),
   * or cannot name one yet ('not yet': its timeout applies). */
  private finishElection(): 'named' | 'leases' | 'not yet' {
    if (this.election === null) return 'not yet';
    const answers = this.election.answers;
    // Joint majorities: a majority of every set of the change promised the term and answered. A write
    // acknowledged under any of them is on a majority of that set, so on a replica that answered.
    if (!this.quorumAmong((r) => answers.has(r))) return 'not yet';
    if (!this.leasesOut(answers)) return 'leases';
    // A handover's election (the replica handed to is listed first, so that it wins a tie) waits a while for that
    // replica's answer: a majority without it names the old leader again on a tie, both holding the same last record,
    // and the rebalancer hands it over again, an election more (seen at load 15 to 20 when 3 nodes at R=3 start: the
    // promise of the replica handed to, which waits for its sync, came after the two others'). Safe: a majority answered
    // already, more answers only add candidates. Bounded by half the election timeout, so that a replica handed to that
    // died or froze costs no election started again; then the answers in decide, as in any election. Not at all once
    // the node handed to is silent (heardLately; with no heardFrom, as in the simulation, the bound alone), nor in any
    // election after the handover's (handoverTo). So does the first election of a slice never led (neverLed) for the
    // map's leader, listed first, which no lease wait gives time to answer any more: on the tie of a new cluster's empty
    // logs a majority without it names another, and the rebalancer hands over again (32 of 1,024 slices at R=3 on 3
    // nodes, load 12, each a second election before every slice was led).
    const to = this.handoverTo ?? (this.neverLed() ? this.replicas[0] : null);
    const now = this.host.now();
    const awaited = to !== null && this.answerMayCome(to, now);
    if (awaited && now - this.election.startedAt < this.timing.electionTimeoutMs * HANDOVER_TARGET_ANSWER_WAIT_SHARE) return 'not yet';
    let chosen = this.choose(this.members.filter((r) => answers.has(r)), answers);
    if (chosen === null) return 'not yet';
    if (!this.replicas.includes(chosen)) {
      // The most up to date replica left the set (a node that still answers for it, e.g. a deposed leader whose
      // own replica was moved off it, with records no other replica took). The set's most up to date replica leads
      // if, in every set of the change, the answers with a log no further than its own meet every majority of the
      // set: a write acknowledged under a set is on a majority of it, so on one of those, so (log order, as in any
      // election) on it; records further than it were never acknowledged. For a set of 4 that is 2 answers, not 3
      // (meetsEveryMajority): a majority waited for a node of both sets that was killed while the replica that left
      // held the killed leader's last records alone, as every new election got the same answers.
      const inSet = this.choose(this.replicas.filter((r) => answers.has(r)), answers);
      // A majority of every set answered (quorumAmong above), this set's included.
      assert(inSet !== null, "a majority of the slice's replica set answered");
      const own = answers.get(inSet)!;
      const notFurther = (r: ReplicaId) => {
        const a = answers.get(r);
        return a !== undefined && (a.lastTerm < own.lastTerm || (a.lastTerm === own.lastTerm && a.lastIndex <= own.lastIndex));
      };
      // First a while for the answers still to come (from nodes that answer: heardLately) that could meet the rule,
      // each counted as no further (an answer further than `own` only makes this set's best further): a carrier
      // costs the slice a second election without a serving leader (CARRIER_AVOIDED_ANSWER_WAIT_SHARE), where the answer
      // missing when a majority of every set answered may come milliseconds later (in the simulation's runs with set
      // changes, seeds 300000 to 300499, 7 elected a carrier without this wait, 4 with it). Safe: more answers only
      // add candidates, and the rule below is the same.
      if (
        !this.meetsEveryMajority(notFurther) &&
        this.meetsEveryMajority((r) => notFurther(r) || this.answerMayCome(r, now)) &&
        now - this.election.startedAt < this.timing.electionTimeoutMs * CARRIER_AVOIDED_ANSWER_WAIT_SHARE
      )
        return 'not yet';
      // Otherwise the replica outside the set leads the joint sets, as Raft's leader outside its new configuration
      // does (docs/replication.md, "A leader outside the newest set"): it holds every committed record (the largest
      // (last term, last index) among a majority of every set), commits its barrier on joint majorities, and steps
      // down once that settles the change (settle), when this set elects alone. Waiting for a replica of the set that
      // holds its records never ends where a later change took out every replica of a set before that holds them
      // (chained changes; seeds 304751 and 300308 on stores of the simulation's chained runs did not converge, until
      // the settle probes' times changed its draws: replication-sim.test.ts says what its carrier seeds keep).
      if (this.meetsEveryMajority(notFurther)) chosen = inSet;
    }
    // The rule, asserted: a leader outside this set leads only the joint sets of a change that has not settled.
    assert(this.replicas.includes(chosen) || (!this.electorateSettled && this.members.includes(chosen)), "a replica outside the slice's replica set leads only the joint sets of an unsettled change it is in");
    const term = this.election.term;
    this.election = null;
    this.host.send(chosen, { type: 'Lead', term, ...this.install(chosen, term) });
    return 'named';
  }

  /** Names `leader` as leading `term` (elected, or leading on) here and in the map (host.publish); returns the
   * followers and sets its Lead or LeadOn carries. */
  private install(leader: ReplicaId, term: number): { followers: ReplicaId[]; sets: ReplicaId[][] } {
    this.leader = leader;
    this.term = term;
    this.lastGoodAt = this.host.now();
    this.published = true;
    this.handoverTo = null;
    this.leadingOn = false;
    this.carriedSince = this.replicas.includes(leader) ? null : this.host.now();
    // It leads this term: if it promises a later election's term, it stopped leading, and its lease with it (the map
    // records it as the last Lead: host.lastLead).
    this.host.publish(leader, term);
    // While the change is unsettled the leader replicates to every set's replicas and commits on joint majorities.
    const sets = this.configs.length > 1 ? this.configs.map((set) => [...set]) : [];
    return { followers: this.members.filter((r) => r !== leader), sets };
  }

  /** Whether the leader counts as answering (tick keeps it, changedTo lets it lead on): its last Pong at its term came
   * within the heartbeat timeout, or its node answers other slices' messages (heardLately) and the Pong is within
   * LEADER_SLOW_TIMEOUT_FACTOR times it. Such a leader is slow (its node busy with a restart's catch-up or many
   * elections), not gone: electing another would add a round of promises, barriers and catch-up for every such slice
   * on nodes as busy, and depose the leader that was about to serve. A frozen or dead node answers nothing and is
   * replaced after the timeout. */
  private leaderAnswering(now: number): boolean {
    const since = now - this.lastGoodAt;
    if (since < this.timing.heartbeatTimeoutMs) return true;
    return this.leader !== null && this.heardLately(this.leader, now) && since < LEADER_SLOW_TIMEOUT_FACTOR * this.timing.heartbeatTimeoutMs;
  }

  /** Whether replica `r` answered what the coordinator asked its worker of this slice (host.heardFrom) within 1.5 ping
   * intervals: a worker that answers pings (of any of its slices) does, a frozen one does not. Counted from the first
   * question it left unanswered, not from its last frame: a leader's worker is asked once per ping interval (rounded up
   * to a tick), so counted from its last frame it had a quarter of an interval to answer in, and a node whose answer
   * took 250 ms (a busy worker at load) counted as silent (issue 14, docs/replication.md "A node that answers"). Only an
   * answer to a question clears it (ReplicaLeaders' OpenQuestions), so a frozen leader's next Ping, sent within a ping
   * interval and a tick of the one its last Pong answered, makes it silent 2.5 ping intervals and a tick after that Pong
   * at the latest (1.35 s at the defaults): within the heartbeat timeout wherever it is 600 ms or more. A worker that
   * never answered a question of a slice its node still replicates (a new replica's, whose assignment may come after
   * its first questions) is given FIRST_ANSWER_GRACE_PING_INTERVALS more: one that never answers is silent 4.5 ping
   * intervals after its first question (2.25 s at the defaults). Per worker, not per node: another worker of the node
   * stuck does not take this slice's leader's allowance (leaderAnswering) nor its replicas' waits. */
  private heardLately(r: ReplicaId, now: number): boolean {
    return now - (this.host.heardFrom?.(r) ?? -Infinity) < WORKER_SILENT_AFTER_PING_INTERVALS * this.timing.pingIntervalMs;
  }

  /** Whether replica `r` may still answer the election under way, so that finishElection waits a while for it (a
   * handover's target, an answer that may avoid a carrier): it has neither answered nor refused, and its node answers
   * (heardLately; with no heardFrom, as in the simulation, only the caller's bound limits the wait). */
  private answerMayCome(r: ReplicaId, now: number): boolean {
    const e = this.election;
    assert(e !== null, 'an election is under way');
    return !e.answers.has(r) && !e.refused.has(r) && (this.host.heardFrom === undefined || this.heardLately(r, now));
  }

  /** Why the last election started (for the coordinator's log). */
  electionReason: ElectionReason = 'start';
  private suspectedFor: ElectionReason = 'leader_timeout';
  private suspect(why: ElectionReason): void {
    this.lastGoodAt = -Infinity;
    this.suspectedFor = why;
  }

  private startElection(why: ElectionReason): void {
    this.electionReason = why;
    const term = Math.max(this.term, this.election?.term ?? 0) + 1;
    assert(term > this.term, 'a leader term only grows');
    this.host.persistTerm(term, why);
    this.elections++;
    this.election = { term, startedAt: this.host.now(), answers: new Map(), refused: new Set() };
    for (const r of this.members) this.host.send(r, { type: 'Prepare', term });
  }

  /** The failover of the slice once its replica set changed to `next` (ReplicaLeaders.sync): until the change
   * settles, elections and commits need a majority of `next` and of this set (and of the sets before it whose
   * change had not settled either). */
  changedTo(next: readonly ReplicaId[], term: number, host: FailoverHost): SliceFailover {
    const older = setsBefore(this.configs, next);
    // The leader this failover elected (or told to lead on), in the new set, answering lately: it leads on. Only
    // with no election under way (currentLeader): then no replica took a term newer than the leader's. And only
    // once this failover's own change settled (as the coordinator changes sets: membership.ts), so that the sets
    // are the new one and the old one: a change made before the one before it settled elects, as before (with
    // no election between them, chained changes outpaced the leader, which could be taken out of the set holding
    // records no replica of the set had, and no election could finish: seeds 100005 and 100292 of the
    // simulation's chained changes). "Answering lately" by tick()'s rule (leaderAnswering): its last Pong within the heartbeat
    // timeout, or, where its node answers other slices (heardLately), within LEADER_SLOW_TIMEOUT_FACTOR times it (a
    // node busy with a join's catch-up is slow, not gone: seen at load 26, two moves' first changes elected their
    // leaders, whose Pongs were 1.5 s late, where tick() would have waited). Leading on a leader that stopped leading
    // costs no safety: it refuses, and the election follows at once. Otherwise the new failover elects, and says why
    // (ELECTION_REASONS).
    const leader = this.currentLeader;
    const answering = this.leaderAnswering(this.host.now());
    const why: ElectionReason | null =
      leader === null || !this.published || !this.electorateSettled ? 'change_chained' : !next.includes(leader) ? 'change_leader_left' : !answering ? 'change_leader_silent' : null;
    // The next failover chooses leaders as this one does (the simulation's deliberately unsafe chooser included).
    const f = new SliceFailover(next, null, Math.max(term, this.term, this.election?.term ?? 0), this.timing, host, this.choose, older, why ?? 'start');
    if (why === null) f.leadOn(leader!, this.term, this.lastGoodAt);
    return f;
  }

  /** Tells `leader`, which leads term `from` (the failover before this one elected it or told it to lead on), to lead
   * on at a new term with this change's sets (LeadOn): no Prepare, so it is not deposed and keeps its writes not
   * yet committed, which commit with its new barrier on joint majorities. Safe (docs/replication.md, "Leading on
   * across a replica-set change"): the new term is taken as an election's (persisted, larger than any used), no
   * replica promised a term between (no election ran since `from`'s), so the leader holds every committed record;
   * the new term has this one leader; and its commits, and the elections after it, count majorities of the new
   * set and of every set not settled before, as an elected leader's would. A leader that does not lead `from`
   * refuses it, and an election follows. `lastGoodAt`: when it last answered (Pong) the failover before; its clock
   * runs on from then, so that a slow leader led on across changes is replaced LEADER_SLOW_TIMEOUT_FACTOR times the
   * heartbeat timeout after its last answer, as without the change (install's fresh clock gave a leader 4.4 s late
   * a whole new allowance). */
  private leadOn(leader: ReplicaId, from: number, lastGoodAt: number): void {
    const term = this.term + 1;
    assert(term > from && this.election === null, 'a leader leads on at a newer term, with no election under way');
    this.host.persistTerm(term, null);
    this.host.send(leader, { type: 'LeadOn', term, from, ...this.install(leader, term) });
    this.leadingOn = true;
    this.leadOnFrom = from;
    this.lastGoodAt = lastGoodAt;
  }

  /** Every replica of every set of the change (those an election asks, those a leader replicates to). */
  get members(): readonly ReplicaId[] {
    return this.allMembers;
  }

  /** Whether a majority of each set of the change is among `up` (else no election can finish). */
  quorumAmong(up: (r: ReplicaId) => boolean): boolean {
    return this.configs.every((set) => set.filter(up).length >= majority(set.length));
  }

  /** Whether the replicas for which `holds` is true meet every majority of each set of the change: fewer than a
   * majority of the set are left out. A majority for a set of odd size; one less for an even one (2 of 4). */
  private meetsEveryMajority(holds: (r: ReplicaId) => boolean): boolean {
    return this.configs.every((set) => set.filter((r) => !holds(r)).length < majority(set.length));
  }

  /** The change is settled: the barrier of the leader elected for this set is committed on a majority of this set
   * and of every older set of the change, with every write acknowledged before it. From now on this set alone
   * elects (a leader elected before keeps counting joint majorities until its term ends, which is only stricter). */
  private settle(): void {
    assert(this.published && this.leader !== null && this.members.includes(this.leader), 'a change settles by the barrier of a leader elected for its sets');
    this.configs = [this.replicas];
    this.allMembers = this.replicas;
    // A leader outside this set (finishElection) led only to carry the change: it stepped down as its barrier
    // committed (Replica.leaderCommit), and this set elects one of its own now. Its lease counted a majority of this set
    // too, so the election waits it out as any (leasesOut).
    if (!this.replicas.includes(this.leader) && this.election === null) this.startElection('change_leader_left');
  }
  /** A change also settles when any replica of its sets says (Pong.commitTerm) that its commit point is a record
   * of the term this failover elected (or newer): a replica's commit point only moves to what its leader
   * committed, and that leader counted joint majorities, so its barrier is held by a majority of every set of the
   * change; even if the leader died before saying so itself (a majority of the old set may then never answer
   * again: a node killed just after a change). */
  private settleIfHeld(): void {
    if (this.electorateSettled || !this.published) return;
    if (this.members.some((r) => (this.commitTerms.get(r) ?? 0) >= this.term)) this.settle();
  }

  /** Whether the change (if any) settled: this set alone elects. */
  get electorateSettled(): boolean {
    return this.configs.length === 1;
  }
  /** The sets whose majorities an election needs, this one first. */
  get sets(): readonly (readonly ReplicaId[])[] {
    return this.configs;
  }
  /** Replica `to` can be reached again (its node restarted or reconnected): an election under way
   * that has no answer from it sends it the Prepare again, at the same term, instead of waiting out
   * the election timeout (the first Prepare went nowhere). A Prepare is safe to repeat: a replica
   * that promised the term already refuses it, and one answer per replica is counted. Not while a redo is due
   * (unrecorded): the election's term was never recorded, so no message of it may leave (a coordinator restarted then
   * would take that term again); the redo's election, at the next tick the runner gives this failover, asks it. */
  reachable(to: ReplicaId): void {
    const e = this.election;
    if (e === null || this.redoDue || e.answers.has(to) || !this.members.includes(to)) return;
    this.host.send(to, { type: 'Prepare', term: e.term });
  }
  /** The host could not record what this failover decided since its last turn (the cluster map's save failed: a term it
   * took, for an election or a LeadOn; a leader it named) and sent none of that turn's messages (replica-leaders.ts
   * flush). Its next tick does it again, at a newer term: a LeadOn lost so was otherwise never sent again, and its
   * leader, which answers Pings of the term before (ignored: receive), was replaced only after
   * LEADER_SLOW_TIMEOUT_FACTOR heartbeat timeouts, its node answering (4.5 s at the defaults, the change unsettled
   * meanwhile); an election whose Prepares never left waited out its timeout, up to that factor times it where the
   * replicas' nodes answer. Not on this call: the host's next save may fail too, and is tried after a backoff (a tick at
   * first, doubling per save failed in a row up to MAP_SAVE_RETRY_MS_MAX: replica-leaders.ts). */
  unrecorded(): void {
    this.redoDue = true;
  }
  /** Whether its next tick redoes a turn the host could not record (unrecorded): the host puts that tick off while its
   * saves keep failing (replica-leaders.ts, SaveBackoff), as it skips one without a quorum. */
  get redoPending(): boolean {
    return this.redoDue;
  }
  /** The coordinator lost its link to the leader: elect without waiting out the heartbeat timeout. */
  suspectLeader(): void {
    this.suspect('link_lost');
  }
}

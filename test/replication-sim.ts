// A seeded simulation of one slice's replicas, the coordinator's failover and the
// clients' routers, all in one process, driving the real replication core
// (slice-worker/replication/replica.ts, coordinator/metadata/failover.ts). The seed
// decides everything: the network (delay, so reorder; drop; duplicate; damage a
// record; partitions), the disk (fsync delay; a crash keeps what was synced and a
// random prefix of what was not), the clock, crashes and restarts, frozen leaders
// (SIGSTOP: nothing runs, then everything that waited), and the writers.
// An acknowledged-write checker judges the run: no acknowledged write lost,
// doubled or reordered, no write that nobody made, and every replica applying
// the same record at each index. Any failure names its seed; the same seed
// replays the same run.
import { assert, wasNotApplied } from '../shared/errors.js';
import { LEADER_HANDOVER_BEFORE_CHANGE_MS, LEADER_HEARTBEAT_TIMEOUT_MS, NODE_HEARTBEAT_TIMEOUT_MS, REPLICA_MOVE_UNDO_DOWN_MS, REPLICA_READ_STALENESS_MS, STUCK_WORKER_RETRY_MS_MAX, STUCK_WORKER_RETRY_MS_MIN } from '../shared/limits.js';
import { checkReplicationMessage, COORDINATOR, type ReplicaId, type ReplicationMessage } from '../shared/replication-protocol.js';
import { chooseLeader, majority, sameSet, setsBefore, SliceFailover, type ElectionReason, type LastRecord } from '../coordinator/metadata/failover.js';
import { answersWhenSilent, caughtUpForHandover, heardFromBy, OpenQuestions, workerSilenceMs } from '../coordinator/metadata/replica-leaders.js';
import { answersForStepBy, countsUpBy, drainStepCatchUp, keepAskingKept, leaderUntilElected } from '../coordinator/metadata/membership.js';
import { applyDiskOp, emptyDurable, Replica, type DiskOp, type DurableReplica, type ReplicaHost } from '../slice-worker/replication/replica.js';
import type { ReplicaRecord } from '../slice-worker/replication/replica-record.js';
import { SliceReplicas, type SliceCompaction } from '../slice-worker/replication/slice-replicas.js';
import { HeldAnswers, notServing } from '../slice-worker/replication/held-answers.js';
import { mayResend } from '../coordinator/router/router.js';
import { SliceStore } from '../slice-worker/partition.js';
import { decodeReplicated } from '../slice-worker/log-format.js';
import { EFFECT_SET, RESULT_ERROR, RESULT_OK, SliceOp, type SliceOpMessage, type SliceOpResult, type WriteCheck } from '../shared/protocol.js';
import { prng as rng } from '../bench/keys.js';

const STORE_SLICE = 3;
const STORE_TABLE = 1;

export interface SimOptions {
  seed: number;
  /** Faults stop at this sim time; then the run heals and must converge. */
  faultyMs?: number;
  /** Break the failover on purpose (the checker must catch it): promote the first replica that answers; 'indexFirst':
   * the most up to date by (last index, last term), the last index compared first. */
  unsafeChoice?: boolean | 'indexFirst';
  /** Run the replicas as a worker would (slice-worker/replication/slice-replicas.ts on a SliceStore): the
   * leader executes each write before it is committed and is rolled back when deposed. Writes are
   * distinct items, so the checker looks for lost and phantom items, not for order. Each is a put under
   * the condition that its item does not exist, with a request id, and the router sends it again after
   * an unknown outcome as well (router.ts): a copy applied twice would fail its condition, which the
   * checker counts as a failure. */
  store?: boolean;
  /** Replica-set changes (as keyslice drain and remove make them): none, or at a seeded rate; 'drain': drains
   * only; 'drain-down': drains only, each new replica placed on a node that is up (as the cluster map places them),
   * its node often killed at once, and a drain step whose new replica's node is down once its change settled undone,
   * the new replica placed on another node that is up if there is one (membership.ts undoStalledMoves); 'drain-dead':
   * drains only, and at the first drain's start another replica of the set is killed, for good or for a long while
   * (it may come back after it was replaced), sometimes with the one node that could take its place: the drain's
   * step replaces a replica it keeps that has been down DRAIN_DEAD_AFTER_MS (any crash) on a node that is up before
   * the drained replica leaves, and with no node up to take it goes on without (membership.ts drainReplicas); the run
   * converges with a replica killed for good left in the set, if one was; 'chained': also while the change before has not settled (as the
   * coordinator did before it waited); 'remove-frozen': removes only, each of the map's leader while it is up, as it
   * starts the replica it keeps first (the one the map's own rule names: changeSet), once it said that it holds the
   * leader's barrier, frozen for HANDOVER_FREEZE_MS, and
   * its handover not tried but waited for HANDOVER_BEFORE_CHANGE_MS (a handover given up), the replicas kept asked
   * meanwhile (as handOverTarget asks them each turn): the remove names the map's leader by leaderUntilElected, the
   * product's rule (removesNamingFrozen). Faults last 4 s. 'remove-down': removes only, each of the map's leader as
   * its node goes down (killed, or cut off from the coordinator and the replicas: its link lost, so no handover is
   * tried), one replica kept made silent at the same moment (frozen, or cut off from the coordinator alone, its link
   * open: up for the coordinator either way), half the time right after an election published the leader (its
   * followers may not have said yet that they hold its barrier); the remove comes PONG_AGE_MAX_MS (and the network's
   * longest delay) later, asks the replicas kept (membership.ts askKeptLately) and names the map's leader by
   * leaderUntilElected with its second choice, a replica that answers, by the silence the coordinator computes (OpenQuestions, workerSilenceMs,
   * answersWhenSilent: replica-leaders.ts) over the seeded network and clock (removesDownNamingSilent). Only these
   * runs track silence (its re-asks send Pings, which draw from the network's generator). Faults last 4 s. */
  setChanges?: boolean | 'drain' | 'drain-down' | 'drain-dead' | 'chained' | 'remove-frozen' | 'remove-down' | 'drain-silent';
  /** With setChanges 'drain-silent' (drains only, each of a replica that does not lead, its new replica on a node that
   * counts up; no crashes, partitions or other freezes, the network's drops, delays, duplicates and damage kept), who
   * is frozen (SIGSTOP: its link open, so up for the coordinator but for its silence) as each drain adds its new
   * replica, while the faults last: 'kept', a replica the step keeps (not the leader), for KEPT_FREEZE_MS: the step's
   * wait counts it down once silent past the node heartbeat bound (membership.ts answersForStepBy over countsUpBy, its
   * node's "last heard from" clock, and workerSilenceMs, its questions left unanswered: Membership.answersForStep), and the
   * drained replica leaves before it thaws; 'new', the new replica,
   * for NEW_FREEZE_MS: silent past the bound for SIM_MOVE_UNDO_MS, the step is undone and its replica placed on a node
   * that counts up (membership.ts undoStalledMoves), before it thaws; 'leader', the slice's leader, for
   * LEADER_FREEZE_MS: the failover, whose host.heardFrom is the coordinator's (replica-leaders.ts heardFromBy over the
   * simulation's questions), starts an election within the heartbeat timeout (and a few ticks) of the freeze, not
   * LEADER_SLOW_TIMEOUT_FACTOR times it; 'stuck', a replica the step keeps whose worker is stuck (it answers nothing)
   * while its node's event loop runs (it pongs: its node's "last heard from" clock stays young, so countsUp holds), for
   * KEPT_FREEZE_MS: the step's wait counts it down by the questions it leaves unanswered alone (membership.ts
   * answersForStepBy's silentMs) and goes on as for 'kept'; 'stuck-new', the new replica's worker stuck while its node
   * pongs, for NEW_FREEZE_MS: its questions unanswered past the bound (answersForStepBy) for SIM_MOVE_UNDO_MS, the step
   * is undone and its replica placed on a node that answers for a step, as for 'new'; 'unsaved', no freeze: half the
   * drains' replica-set changes made while the faults last are followed by a turn whose cluster-map save fails (the
   * failover's LeadOn, or its election's Prepares, not sent; the term it took and the leader it named not recorded; the
   * failover told: replica-leaders.ts flush, SliceFailover.unrecorded), the coordinator's links losing nothing (TCP):
   * the slice must be led again at the failover's term within UNSAVED_BOUND_MS. Each fails the run where it did
   * not, naming its seed. These
   * runs track silence as 'remove-down' does, and their failover has heardFrom. Faults last 4 s. */
  drainSilence?: 'kept' | 'new' | 'leader' | 'stuck' | 'stuck-new' | 'unsaved';
  /** With setChanges 'remove-down': the replica kept made silent is killed instead as the leader goes down, back (its
   * link up again) up to PONG_AGE_MAX_MS into the remove's wait for answers, and frozen as it starts, before it answers
   * anything: a replica whose link came up during the wait, which the rule's second choice may name (it owes no answer
   * for a while). askKeptLately's wait (membership.ts keepAskingKept) asks it until it has owed an answer
   * PONG_AGE_MAX_MS, long enough to count as silent; the run fails where the remove names it (frozen) although its link
   * came up within PONG_AGE_MAX_MS of the wait's start. */
  keptRestarts?: boolean;
  /** Break consistent reads on purpose (the read checker must catch it): a leader answers them whenever it serves,
   * lease or not, as before leases. */
  readsWithoutLease?: boolean;
  /** The coordinator restarts (at a seeded rate, and often just after a replica-set change): down for a while (what
   * was on its way to it is lost), then a new failover built from what the map persisted (SliceFailover.atStart), as
   * replica-leaders.ts builds it at start. */
  coordinatorRestarts?: boolean;
  /** Raft's counterexample to electing the longest log, once a run (see deposeWithTail): the leader A is cut off from
   * its followers and the coordinator while the router, its copy of the map cut off too, keeps sending it writes, which
   * it appends and cannot commit; B is elected, the router's map follows, and B commits a few writes; then B is killed
   * and A's link healed. A's log is then longer than those holding B's committed writes, and of an older term.
   * 'replace': and before B is killed, the set changes to put a spare node in place of a follower that holds B's
   * writes (B leads on), so that the longest log of the newest term is outside the new set (the election past a
   * replica that left). */
  deposedTail?: boolean | 'replace';
  /** Stall-then-deliver links, a few a run: one direction of one link (between two replicas, or between a replica and
   * the coordinator) holds everything sent on it for longer than an election and a lease (STALL_MS_MIN to
   * STALL_MS_MAX), then delivers it all at once, in the order sent or reordered; held messages go to what the ends
   * are by then (a replica that promised newer terms, a coordinator in a later election). The rest of the network
   * delays nothing past maxDelayMs (16 ms), so without these no message of an older term arrives a term late (a
   * Prepared during a later election, an old leader's Append after a new leader was chosen). And at R=3 two schedules,
   * one after the other, in which such a message does harm if it is taken: a replica's late answer to a Prepare
   * (lateAnswer), then a deposed leader's late Appends (lateAppend). Faults last 3 s, as deposedTail's. Drawn from
   * generators of their own. */
  stall?: boolean;
  /** Leaders that cannot commit for longer than their commit wait (noMajority): a few times a run, from
   * its own generator, the leader is cut off from its followers for longer than COMMIT_WAIT_MS, half the time with the
   * coordinator still hearing it lead (nothing commits and nobody replaces it, as when a majority is down), half the
   * time from the coordinator too while the writers' router, its map lagging, goes on sending it writes (a new leader
   * is elected meanwhile). Its held writes answer Unavailable, outcome unknown, when their commit wait runs out
   * (held-answers.ts, as on a node), and the router sends them again per its policy (router.ts mayResend): on stores
   * with their request ids, to the same leader (which answers a copy from memory once it commits) or to the next;
   * without ids (the plain runs) not at all. The router here waits ROUTER_WAIT_MS_PAST_COMMIT_WAIT for an answer, as
   * a router's NODE_REQUEST_TIMEOUT_MS is longer than REPLICA_COMMIT_WAIT_MS, so that the leader's answer comes first.
   * Faults last 3 s, as stall's. */
  commitTimeouts?: boolean;
  /** Break the failover on purpose (the checker must catch it): an answer to an older term's Prepare that arrives during
   * an election is counted as an answer to that election (as if SliceFailover.receive compared the terms with `>`). */
  countLateAnswers?: boolean;
  /** With setChanges 'drain': a drain's leadership handover freezes the replica handed to (SIGSTOP, where it is not the
   * drain's new replica) at once, for HANDOVER_FREEZE_MS: the coordinator counts a frozen node up (its link stays open,
   * as for nodes known by address), its handover's election names the old leader again at a term the frozen one
   * cannot hold, and past HANDOVER_BEFORE_CHANGE_MS from the handover's first try the step waits only for the new
   * replica and a majority of the set left (membership.ts drainStepCatchUp), so that the drained replica leaves while
   * the target is still frozen (drainStepsPastHandoverBound). Faults last 4 s. */
  handoverFreezes?: boolean;
  /** Break the handover bound on purpose (the case must see it): the drain step's catch-up never counts the handover
   * spent, as before membership.ts gave a frozen target up, so the step waits for the frozen replica. */
  handoverNeverSpent?: boolean;
  /** Break drainSilence 'unsaved' on purpose (the case must see it): the failover is not told that its turn was not
   * recorded (as replica-leaders.ts flush before SliceFailover.unrecorded). */
  brokenUnrecorded?: boolean;
}

export interface SimReport {
  seed: number;
  replicas: number;
  acked: number;
  ambiguous: number;
  /** Store mode: writes sent again after an unknown outcome. */
  resent: number;
  elections: number;
  crashes: number;
  freezes: number;
  refusals: Record<string, number>;
  snapshotsSent: number;
  /** Store mode: checkpoints started (each after a compaction in steps), and crashes of a node holding a
   * compaction's snapshot not yet in a completed checkpoint (between its steps, or during its checkpoint). */
  checkpoints: number;
  crashesBeforeCheckpoint: number;
  /** Replica-set changes made (drain steps count one each). */
  setChanges: number;
  /** Replica moves undone (their added replica taken out again: membership.ts undoStalledMoves), drain steps too. */
  movesUndone: number;
  /** Of the drain steps undone ('drain-down'), those whose new replica was placed on another node that is up in the same change. */
  drainStepsRedirected: number;
  /** 'drain-dead': replicas down DRAIN_DEAD_AFTER_MS that a drain step replaced (one out, one in, as remove does). */
  deadReplaced: number;
  /** 'drain-dead': of those, replicas whose node came back after it was replaced (it starts empty, out of the set). */
  replacedCameBack: number;
  /** 'drain-dead': drain steps that went on keeping a replica down that long, no node being up to take its place. */
  drainedKeepingDown: number;
  /** Replica-set changes whose leader was told to lead on (LeadOn) rather than elected again. */
  ledOn: number;
  /** Elections that named a replica outside the newest set, to carry an unsettled change (chained changes: failover.ts
   * finishElection); and of them, how many settled it (their barrier committed: they stepped down, the set electing its
   * own), not cut short by a later change or a coordinator restart. */
  carriers: number;
  carriersSettled: number;
  /** Elections that replaced a carrier that had not settled its change in time (failover.ts, 'carrier_unsettled'). */
  carrierTimeouts: number;
  /** Leadership handovers before a drain step or a remove (keyslice remove, a replacement) that takes out the leader's
   * replica (membership.ts drainReplicas and handOverLeaderships, ReplicaLeaders.handOver), and of those, the ones whose
   * election named the replica handed to (the change then led on); `removeHandovers`: of the handovers, those before a remove. */
  handovers: number;
  handedOver: number;
  removeHandovers: number;
  /** Handovers whose own election named a replica other than the one handed to (status's handoversGivenBack): the
   * old leader again, its log further (writes that reached it after its last Pong), or another replica. */
  handoversGivenBack: number;
  /** Writes answered "outcome unknown" by a leader that a handover's election deposed (HeldAnswers.deposed at the
   * term it led when handed over): writes that reached it between its last Pong and the Prepare, the ones that a
   * removed leader leading on through the change would have committed (docs/replication-notes.md). */
  handoverUnknown: number;
  /** Of those, writes the lagging router (handoverLaggingWriters) sent to the old leader after the handover began:
   * the window the lagging router is there to open (without it a few writes still on their way reach the old leader). */
  handoverUnknownLagging: number;
  /** Handovers during which a router with the map before kept writing to the old leader for a while. */
  handoverLaggingWriters: number;
  /** Handovers during which the replica handed to or the old leader was killed (a while) before the handover's election
   * named a leader (a kill drawn for later, once a leader was named, is an ordinary crash and not counted). */
  handoverKills: number;
  /** handoverFreezes: handovers whose target was frozen, and drain steps that took the drained replica out past the
   * handover's bound while a replica kept that is up had not said it holds the barrier (the frozen one, as a rule). */
  handoverFreezes: number;
  drainStepsPastHandoverBound: number;
  /** Drain steps after which the map named, as the slice's leader (to which writes are routed until it elects), a
   * replica that is frozen: none, as membership.ts names one that holds the barrier. */
  drainsNamingFrozen: number;
  /** 'remove-frozen': removes of the map's leader started with a replica kept frozen; of those made while the map
   * named the removed node, the ones where leaderUntilElected named a frozen replica as the slice's leader (none: it
   * names one that said lately, in a Pong at most PONG_AGE_MAX_MS old, that it holds the barrier), and the ones where it
   * named none (no leader elected, or no replica kept said so lately: the map's own rule names the first). */
  removeFreezes: number;
  removesNamingFrozen: number;
  removesUnnamed: number;
  /** 'remove-down': removes of the map's leader as its node went down, one replica kept silent (frozen or cut off from
   * the coordinator); of those, the ones where the map named the silent one or another frozen one as the slice's leader
   * (none: the rule's second choice is a replica that answers; removesDownNamingUntold apart), the ones named by that second choice (none said lately
   * that it holds the barrier), and the ones naming none (the failover's election had begun: no elected term). */
  removeDowns: number;
  removesDownNamingSilent: number;
  /** Of the removes that named a frozen or cut-off replica, those where it was not silent yet by what it was asked (its
   * link came up during the remove's wait for answers: asked too late to tell). */
  removesDownNamingUntold: number;
  removesDownAnswering: number;
  removesDownUnnamed: number;
  /** keptRestarts: removes whose restarted replica's link came up within PONG_AGE_MAX_MS of the wait's start, and of
   * those the ones where the rule's second choice was reached (no replica kept said lately it holds the barrier). */
  restartedKeptUp: number;
  restartedKeptSecondChoice: number;
  /** 'drain-silent': drains with a replica frozen as they added their new replica (drainSilence says which); 'kept':
   * the steps that went on while the kept replica was frozen, counted down by the step's wait; 'new': the steps undone
   * while the new replica was frozen, and of those the ones whose new replica went to another node (one counted up);
   * 'leader': the elections started within LEADER_ELECTION_BOUND_MS of the leader's freeze, and the most time from a
   * freeze to its election (ms). */
  drainSilences: number;
  drainStepsPastSilentKept: number;
  silentNewUndone: number;
  silentNewRedirected: number;
  /** 'drain-silent' with 'stuck-new': drain steps whose new replica went back onto a node whose worker is still stuck,
   * sooner than the retry's first wait (SIM_STUCK_RETRY_MS.min) after a step onto it was undone (the loop:
   * undone, placed back, undone again). */
  stuckPlacedBack: number;
  silentLeaderElections: number;
  silentLeaderElectionMsMax: number;
  /** 'drain-silent': freezes whose drain was still under way as they ended with no elected leader or an unsettled
   * change (the step waits for those, so the freeze's check says nothing). */
  silentUnchecked: number;
  /** drainSilence 'unsaved': turns whose map save failed, and the most time from one to the slice led again at its
   * failover's term (ms). */
  unsavedTurns: number;
  unsavedServedMsMax: number;
  /** Consistent reads answered (each checked: no write acknowledged before it started is missing). */
  reads: number;
  /** Of those, answered after the leader waited for its lease. */
  readsAfterLeaseWait: number;
  /** Reads refused: the leader did not serve, or got no lease in time. */
  readsRefused: number;
  /** Coordinator restarts, and of those, how many came while a replica-set change had not settled. */
  coordinatorRestarts: number;
  restartsUnsettled: number;
  /** deposedTail: schedules that came as far as killing B (a deposed leader's tail of an older term in place). */
  deposedTails: number;
  /** Elections that passed over a longer log of an older term: the leader named answered a newer last term than
   * another answer with a larger last index (the case Raft's comparison of the last term first is for). */
  longerOlderPassedOver: number;
  /** stall: stalls started, messages they held, and of those, how many arrived at an end that had moved to a newer
   * term by then, by message type (a replica's promised term, the coordinator's last term used). */
  stalls: number;
  stalledMessages: number;
  lateOlderTerm: Record<string, number>;
  /** stall: lateAnswer schedules that came as far as releasing X's held answers in the election after L's kill. */
  lateAnswers: number;
  /** stall: lateAppend schedules that came as far as releasing the old leader's held Appends to a follower that
   * promised a newer term. */
  lateAppends: number;
  /** Held writes a leader answered because its commit wait ran out (HeldAnswers.timedOut, summed over the nodes' lives),
   * and of those answers, how many reached the router while it still waited (each then resent or left unknown). */
  commitTimeouts: number;
  timeoutAnswers: number;
  /** Of the writes those answers reached, how many the router sent again (store mode: with their request ids). */
  resentAfterTimeout: number;
  /** commitTimeouts: the schedule's cuts made (the leader cut off from its followers for longer than the commit wait). */
  noMajorityCuts: number;
  simMs: number;
}

export class SimFailure extends Error {}

/** The options beyond the seed that a failure's replay needs (as a test case: runSimulation({seed, ...})). */
const replayOptions = (opts: SimOptions) => {
  const extra = Object.entries(opts).filter(([k, v]) => k !== 'seed' && v !== undefined && v !== false);
  return extra.length > 0 ? `, with ${extra.map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(', ')}` : '';
};

const ROUTER = -2;
const KEYS = 4;
const WRITERS = 4;
/** How long the router waits for a leader's answer, then counts the write's outcome unknown. */
const REQUEST_TIMEOUT_MS = 400;
const NOT_LEADER_RETRIES_MAX = 40;
const TICK_MS = 20;
const READERS = 2;
/** The replicas' lease and keep-alive period here: as the failover timing is (below), shorter than a node's, in the
 * same proportions (the lease no longer than the leader timeout, and longer than a keep-alive period and a tick). */
const SIM_REPLICA_TIMING = { leaseMs: 200, keepAliveMs: 100 };
/** How long a leader holds a read waiting for its lease (worker.ts: REPLICA_LEASE_WAIT_MS). */
const LEASE_WAIT_MS = 60;
/** The coordinator's failover timing here: as a node's (shared/limits.ts), shorter, in the same proportions. */
const SIM_FAILOVER_TIMING = { pingIntervalMs: 40, heartbeatTimeoutMs: 250, electionTimeoutMs: 200 };
/** How long a leader holds a write for its commit (worker.ts, held-answers.ts: REPLICA_COMMIT_WAIT_MS, the heartbeat
 * timeout plus an election's, so that a leader the coordinator stopped hearing from was usually replaced by then). */
const COMMIT_WAIT_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs + SIM_FAILOVER_TIMING.electionTimeoutMs;
/** A leadership handover's catch-up wait (LEADER_HANDOVER_WAIT_MS_MAX, 1 s against the 1.5 s heartbeat timeout). */
const HANDOVER_WAIT_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs * 0.7;
/** How long a drain step waits for its leader's handover before the slice elects (LEADER_HANDOVER_BEFORE_CHANGE_MS,
 * in the same proportion to the heartbeat timeout), and how long handoverFreezes freezes the target: past that bound,
 * an election and a few ticks. */
const HANDOVER_BEFORE_CHANGE_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs * (LEADER_HANDOVER_BEFORE_CHANGE_MS / LEADER_HEARTBEAT_TIMEOUT_MS);
const HANDOVER_FREEZE_MS = 2 * HANDOVER_BEFORE_CHANGE_MS;
/** How old a replica's Pong may be for the coordinator to count what it says (ReplicaLeaders.probeIntervalMs, two ping
 * intervals): a replica named the map's leader until the slice elects must have said lately that it holds the barrier. */
const PONG_AGE_MAX_MS = 2 * SIM_FAILOVER_TIMING.pingIntervalMs;
/** The router's wait with SimOptions.commitTimeouts: past the leader's commit wait and the network's delays there and
 * back (a node's router waits NODE_REQUEST_TIMEOUT_MS, 30 s, against a commit wait of 3.5 s). */
const ROUTER_WAIT_MS_PAST_COMMIT_WAIT = COMMIT_WAIT_MS + 2 * TICK_MS + 100;
const CONVERGE_MS_MAX = 30_000;
/** 'drain-silent': the coordinator's node heartbeat bound (NODE_HEARTBEAT_TIMEOUT_MS, past which a node silent with its
 * link open counts down: Membership.countsUp) and its wait before it undoes a step onto a node counted down
 * (REPLICA_MOVE_UNDO_DOWN_MS), in the same proportion to the heartbeat timeout as on nodes: 833 ms each. */
const SIM_NODE_HEARTBEAT_TIMEOUT_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs * (NODE_HEARTBEAT_TIMEOUT_MS / LEADER_HEARTBEAT_TIMEOUT_MS);
const SIM_MOVE_UNDO_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs * (REPLICA_MOVE_UNDO_DOWN_MS / LEADER_HEARTBEAT_TIMEOUT_MS);
/** The wait before a stuck worker nothing can ask by is tried again (OpenQuestions.stale: STUCK_WORKER_RETRY_MS_MIN..MAX),
 * in the same proportion to the node heartbeat bound: 833 ms doubling to 50 s. Unscaled (5 s against the simulation's
 * 833 ms bound), a worker that thawed stayed out of placement to the end of the faults, and no try was ever made. */
const SIM_STUCK_RETRY_MS = {
  min: SIM_NODE_HEARTBEAT_TIMEOUT_MS * (STUCK_WORKER_RETRY_MS_MIN / NODE_HEARTBEAT_TIMEOUT_MS),
  max: SIM_NODE_HEARTBEAT_TIMEOUT_MS * (STUCK_WORKER_RETRY_MS_MAX / NODE_HEARTBEAT_TIMEOUT_MS),
};
/** 'drain-silent' freezes: a kept replica past the bound and most of as long again (the step goes on in between); a
 * new replica past the bound, the undo's wait and as long again; a leader past the heartbeat timeout and an election. */
const KEPT_FREEZE_MS = 2 * SIM_NODE_HEARTBEAT_TIMEOUT_MS;
const NEW_FREEZE_MS = 3 * SIM_NODE_HEARTBEAT_TIMEOUT_MS;
const LEADER_FREEZE_MS = 3 * SIM_FAILOVER_TIMING.heartbeatTimeoutMs;
/** 'drain-silent': no freeze starts within this of the last one's end (the replica thawed catches up meanwhile). */
const SILENCE_QUIET_MS = 500;
/** 'drain-silent', drainSilence 'kept': how long before a frozen replica's thaw the others must have held the barrier for
 * its check to count (three ticks: the step looks once a tick). */
const CATCH_UP_SETTLE_MS = 3 * TICK_MS;
/** 'drain-silent', drainSilence 'leader': by when an election must have started after the leader froze: its heartbeat
 * timeout from its last Pong (one on its way may arrive up to the network's longest delay, 16 ms, after the freeze)
 * and two ticks (the failover looks once a tick); its node is silent (heardLately false) 1.5 ping intervals after its
 * first question left unanswered, within that. Counted as answering (heardFrom), it would be waited for
 * LEADER_SLOW_TIMEOUT_FACTOR (3) times the heartbeat timeout. */
const LEADER_ELECTION_BOUND_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs + 16 + 2 * TICK_MS;
/** 'drain-silent', drainSilence 'unsaved': by when the slice must be led again at its failover's term after a turn whose
 * map save failed: the normal failover bound, a heartbeat timeout and an election, the network's longest delay and two
 * ticks (1.5 s + an election at the defaults). The failover does the turn again at its next tick; without that a lost
 * LeadOn's leader, answering Pings of the term before, was kept LEADER_SLOW_TIMEOUT_FACTOR (3) heartbeat timeouts. */
const UNSAVED_BOUND_MS = SIM_FAILOVER_TIMING.heartbeatTimeoutMs + SIM_FAILOVER_TIMING.electionTimeoutMs + 16 + 2 * TICK_MS;
/** 'drain-dead': a drain replaces a replica it keeps whose node has been down this long (sim ms), as membership.ts after
 * DRAIN_REPLACE_DOWN_MS: scaled to the simulation's crashes (down 50 to 650 ms), so that some that were only
 * restarting are replaced and come back out of the set, as a slow restart on the coordinator would. */
const DRAIN_DEAD_AFTER_MS = 400;
/** How long a compaction waits for a leader's prepared state to commit (worker.ts: REPLICA_COMPACTION_WAIT_MS). */
const COMPACTION_WAIT_MS = 100;
/** A stalled link holds what it gets this long (opts.stall): more than a heartbeat timeout, an election and a lease
 * (250, 200 and 200 ms here), so that what it held arrives a term or more late. */
const STALL_MS_MIN = 500;
const STALL_MS_MAX = 3_000;

/** Events by (time, order of scheduling): a binary heap. */
class Clock {
  now = 0;
  private seq = 0;
  private heap: { at: number; seq: number; run: () => void }[] = [];
  at(delay: number, run: () => void): void {
    const e = { at: this.now + delay, seq: this.seq++, run };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }
  /** Runs the next event; false when none is left. */
  step(): boolean {
    const h = this.heap;
    if (h.length === 0) return false;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l], h[m])) m = l;
        if (r < h.length && before(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    this.now = top.at;
    top.run();
    return true;
  }
}
const before = (a: { at: number; seq: number }, b: { at: number; seq: number }) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

const copyDurable = (d: DurableReplica): DurableReplica => ({ promisedTerm: d.promisedTerm, snapshot: d.snapshot, records: [...d.records], commitIndex: d.commitIndex });

/** A replica's disk: what is durable, what was written since, and syncs that complete in order. As the replica log
 * (replica-log.ts), a compaction's snapshot (compacted) is not logged: it is in what a checkpoint writes (`written`,
 * the log's view) and in what a crash leaves (`durable`) only once a checkpoint started after it has completed. */
class SimDisk {
  durable: DurableReplica = emptyDurable();
  /** Every op written so far applied, compactions' snapshots too: what a checkpoint started now holds. */
  private written: DurableReplica = emptyDurable();
  /** Ops written and not yet on the disk, each with whether it is logged; pending[0] is op number `applied`. */
  private pending: [DiskOp, boolean][] = [];
  private applied = 0;
  private lastSyncAt = 0;
  /** Bumped at each crash: a sync of an earlier life completes nothing. */
  private life = 0;
  /** Compactions' snapshots written and not in a completed checkpoint: a crash now loses them (not their records). */
  uncheckpointed = 0;
  constructor(
    private readonly clock: Clock,
    private readonly random: () => number,
    /** The slowest fsync of this disk, ms: slow disks widen the windows where unsynced data is at risk. */
    private readonly syncMsMax: number,
  ) {}
  forLife(): { write(op: DiskOp): void; compacted(op: DiskOp & { kind: 'snapshot' }): void; sync(done: () => void): void; checkpoint(done: () => void): void } {
    const life = this.life;
    /** Once what was written before reached the disk (in order with the other syncs): `then`. */
    const later = (then: () => void) => {
      const target = this.applied + this.pending.length;
      const at = Math.max(this.lastSyncAt, this.clock.now + 0.2 + this.random() * this.syncMsMax);
      this.lastSyncAt = at;
      this.clock.at(at - this.clock.now, () => {
        if (life !== this.life) return;
        // Everything written before this sync reaches the disk, in order.
        this.reach(target - this.applied);
        then();
      });
    };
    const write = (op: DiskOp, logged: boolean) => {
      assert(life === this.life, 'a crashed replica writes nothing');
      this.pending.push([op, logged]);
      applyDiskOp(this.written, op);
    };
    return {
      write: (op) => write(op, true),
      compacted: (op) => {
        write(op, false);
        this.uncheckpointed++;
      },
      sync: (done) => later(done),
      checkpoint: (done) => {
        // The view as of now replaces what the log replays to once it, and every op written before it, is on the
        // disk; what is written meanwhile follows it. A crash before that leaves the older log, which replays to
        // the same records (the snapshots it lacks cover records it holds).
        const view = copyDurable(this.written);
        const upTo = this.applied + this.pending.length;
        const held = this.uncheckpointed;
        later(() => {
          // Syncs complete in order: nothing written after the checkpoint started is on the disk yet.
          assert(this.applied === upTo, 'a checkpoint completes once what was written before it is on the disk, and before what came after');
          this.durable = view;
          this.uncheckpointed -= held;
          done();
        });
      },
    };
  }
  /** `count` ops reach the disk: the logged ones are what a restart replays. */
  private reach(count: number): void {
    for (const [op, logged] of this.pending.splice(0, Math.max(0, count))) if (logged) applyDiskOp(this.durable, op);
    this.applied += Math.max(0, count);
  }
  /** A crash: what was synced stays, plus a random prefix of what was written since (a power loss). */
  crash(): void {
    this.life++;
    this.reach(Math.floor(this.random() * (this.pending.length + 1)));
    this.applied += this.pending.length;
    this.pending = [];
    this.written = copyDurable(this.durable);
    this.uncheckpointed = 0;
  }
  /** The node dropped the slice's replica (worker.ts dropLeftReplicas): nothing more of this disk completes. */
  retire(): void {
    this.life++;
    this.pending = [];
  }
  /** What a checkpoint started now would hold (every op written so far applied): read, not kept. */
  get view(): DurableReplica {
    return this.written;
  }
  /** A replica made again on a node that dropped one keeps the term it promised (replica-log.ts drop). */
  keepPromise(term: number): void {
    this.durable.promisedTerm = term;
    this.written.promisedTerm = term;
  }
  recovered(): DurableReplica {
    return copyDurable(this.durable);
  }
}

/** The replicated state: per key, the list of values appended to it, in log order. */
type State = Map<number, number[]>;
const enc = new TextEncoder();
const dec = new TextDecoder();
const encodeWrite = (key: number, value: number) => enc.encode(`${key}:${value}`);
const decodeWrite = (payload: Uint8Array) => dec.decode(payload).split(':').map(Number) as [number, number];
const encodeState = (s: State) => enc.encode(JSON.stringify([...s.entries()].sort((a, b) => a[0] - b[0])));
const decodeState = (b: Uint8Array | null): State => new Map(b === null ? [] : (JSON.parse(dec.decode(b)) as [number, number[]][]));

type PutOp = Extract<SliceOpMessage, [typeof SliceOp.Put, ...unknown[]]>;

interface Write {
  key: number;
  value: number;
  submittedAt: number;
  ackedAt?: number;
}

/** One seeded run; any failure, the checker's or a broken invariant of the code under test, names the seed. */
export function runSimulation(opts: SimOptions): SimReport {
  const changes: string[] = [];
  try {
    return simulate(opts, changes);
  } catch (err) {
    if (err instanceof SimFailure) throw err;
    throw new SimFailure(`seed ${opts.seed}: ${(err as Error).stack}${changes.length > 0 ? `; replica-set changes: ${changes.slice(-6).join('; ')}` : ''} (replay: KEYSLICE_SIM_SEED=${opts.seed} npx vitest run test/replication-sim.test.ts${replayOptions(opts)})`);
  }
}

function simulate(opts: SimOptions, changes: string[]): SimReport {
  const random = rng(opts.seed);
  const clock = new Clock();
  // deposedTail and stall runs longer: their schedules take up to about 2 s of the faults' time, and writes before and after them
  // are what an election may lose.
  const faultyMs = opts.faultyMs ?? (opts.handoverFreezes === true || opts.setChanges === 'remove-frozen' || opts.setChanges === 'remove-down' || opts.setChanges === 'drain-silent' ? 4_000 : (opts.deposedTail !== undefined && opts.deposedTail !== false) || opts.stall === true || opts.commitTimeouts === true ? 3_000 : 2_000);
  // The run's character, from its seed.
  const replicaCount = random() < 0.25 ? 5 : 3;
  const dropRate = random() * 0.1;
  const dupRate = random() * 0.05;
  const damageRate = random() * 0.02;
  const maxDelayMs = 1 + random() * 15;
  const crashPerSecond = random() < 0.8 ? random() * 3 : 0;
  const partitionPerSecond = random() < 0.6 ? random() * 3 : 0;
  const compactRate = random() * 0.2;
  const syncMsMax = random() < 0.5 ? 2 : 5 + random() * 40;
  /** Crashes of two nodes at once (a power cut of a rack): what only one of them held is at risk. */
  const pairCrashRate = random() * 0.5;
  /** Freezes of the leader (SIGSTOP): it runs nothing for a while, then everything that waited. */
  const freezePerSecond = random() < 0.5 ? random() * 2 : 0;
  /** Replica-set changes: a drain (add a replica, then take one out once the others hold the new leader's
   * barrier), a replacement (one out and one in at once, as keyslice remove refills), one in, one out. */
  const changePerSecond = opts.setChanges !== undefined && opts.setChanges !== false ? 0.5 + random() * 4 : 0;
  /** Nodes that hold no replica at first: a set change can place one there. */
  const nodeCount = replicaCount + (changePerSecond > 0 || opts.deposedTail === 'replace' ? 2 : 0);
  let faulty = true;

  const report: SimReport = { seed: opts.seed, replicas: replicaCount, acked: 0, ambiguous: 0, resent: 0, elections: 0, crashes: 0, freezes: 0, refusals: {}, snapshotsSent: 0, checkpoints: 0, crashesBeforeCheckpoint: 0, setChanges: 0, movesUndone: 0, drainStepsRedirected: 0, deadReplaced: 0, replacedCameBack: 0, drainedKeepingDown: 0, ledOn: 0, carriers: 0, carriersSettled: 0, carrierTimeouts: 0, handovers: 0, handedOver: 0, removeHandovers: 0, handoversGivenBack: 0, handoverUnknown: 0, handoverUnknownLagging: 0, handoverLaggingWriters: 0, handoverKills: 0, handoverFreezes: 0, drainStepsPastHandoverBound: 0, drainsNamingFrozen: 0, removeFreezes: 0, removesNamingFrozen: 0, removesUnnamed: 0, removeDowns: 0, removesDownNamingSilent: 0, removesDownNamingUntold: 0, removesDownAnswering: 0, removesDownUnnamed: 0, restartedKeptUp: 0, restartedKeptSecondChoice: 0, drainSilences: 0, drainStepsPastSilentKept: 0, silentNewUndone: 0, silentNewRedirected: 0, stuckPlacedBack: 0, silentLeaderElections: 0, silentLeaderElectionMsMax: 0, silentUnchecked: 0, unsavedTurns: 0, unsavedServedMsMax: 0, reads: 0, readsAfterLeaseWait: 0, readsRefused: 0, coordinatorRestarts: 0, restartsUnsettled: 0, deposedTails: 0, longerOlderPassedOver: 0, stalls: 0, stalledMessages: 0, lateOlderTerm: {}, lateAnswers: 0, lateAppends: 0, commitTimeouts: 0, timeoutAnswers: 0, resentAfterTimeout: 0, noMajorityCuts: 0, simMs: 0 };
  // Declared with its type, so that TypeScript narrows after a call to it (`w` is defined past `if (!w) fail(...)`).
  const fail: (why: string) => never = (why) => {
    throw new SimFailure(`seed ${opts.seed}: ${why}${changes.length > 0 ? `; replica-set changes: ${changes.slice(-6).join('; ')}` : ''} (replay: KEYSLICE_SIM_SEED=${opts.seed} npx vitest run test/replication-sim.test.ts${replayOptions(opts)})`);
  };

  /** What the coordinator asked each node and has not answered ('remove-down' only): the product's OpenQuestions, on
   * the simulation's clock, fed every Ping and Prepare the coordinator sends a node that is up (its link up) and every
   * answer that reaches it, so that a node frozen or cut off from it is silent from its first question left unanswered
   * (workerSilenceMs, of its worker of the one slice), as on the coordinator. A new one at each coordinator start; a node's are forgotten at its crash (its
   * link lost). One slice, one worker a node. */
  let silence = opts.setChanges === 'remove-down' || opts.setChanges === 'drain-silent' ? new OpenQuestions(() => 1, SIM_FAILOVER_TIMING.pingIntervalMs, SIM_STUCK_RETRY_MS) : null;
  /** 'drain-silent': when the coordinator last heard from each node (NodeLink.heardAt, one clock a link): any message
   * of its worker that reaches the coordinator (coordinatorReceive), and the pong to the ping Membership.pingLinks sends
   * every link each turn, which a node answers while its event loop runs (coordinatorTurn: up, not frozen, not cut off
   * from the coordinator). A frozen node's clock stops; it counts down NODE_HEARTBEAT_TIMEOUT_MS (scaled) later. */
  const heardAt: number[] = [];
  /** drainSilence 'stuck': until when a frozen replica's node still pongs (its worker stuck, its event loop running). */
  const pongsUntil: number[] = [];
  /** 'drain-silent': since when each node has not answered for a drain step (answersForStepNow; Membership's
   * unansweringSince, per slice there: one step at a time here, so per node): the undo of a step onto it waits
   * SIM_MOVE_UNDO_MS from then. */
  const unansweringSince = new Map<number, number>();
  /** 'drain-silent': when a step onto each node was last undone while its worker was stuck (its node pongs). */
  const undoneOffStuck = new Map<number, number>();
  /** 'drain-silent': a drain step's new replica goes to `n` (counted in stuckPlacedBack where that is the loop). */
  const placedOn = (n: number): void => {
    const stuck = frozenUntil[n] > clock.now && (pongsUntil[n] ?? 0) > clock.now;
    if (stuck && clock.now - (undoneOffStuck.get(n) ?? -Infinity) < SIM_STUCK_RETRY_MS.min) report.stuckPlacedBack++;
  };
  /** 'drain-silent', drainSilence 'leader': the frozen leader, when it froze and the largest term used then, until a
   * newer term is taken (an election, or a LeadOn) or the run fails for want of one. */
  let leaderWatch: { node: number; at: number; term: number } | null = null;
  /** 'drain-silent': when the last scheduled freeze ended. */
  let lastThawAt = -Infinity;
  /** 'drain-silent': when each replica's Pongs first said the commit term they say now (so it has held that term's
   * barrier at least since). */
  const commitTermFrom = new Map<number, number>();
  /** 'drain-silent': whether the coordinator counts node `n` up for placement and the undo of a step onto it
   * (Membership.countsUp): the product's rule (membership.ts countsUpBy) over the node's "last heard from" clock
   * (heardAt) and the scaled bound. */
  const countsUpNow = (n: number): boolean => countsUpBy(linkUp(n), clock.now - (heardAt[n] ?? 0), SIM_NODE_HEARTBEAT_TIMEOUT_MS);
  /** 'drain-silent': whether node `n` is up for a drain step's wait (Membership.answersForStep): the product's rule
   * (membership.ts answersForStepBy) over countsUpNow and the silence the coordinator computes from its questions of
   * the node's worker of the slice (workerSilenceMs, as ReplicaLeaders.workerSilentMs: kept across the drop of a stuck
   * worker's questions once a step onto it was undone), with the scaled bound. */
  const answersForStepNow = (n: number): boolean =>
    answersForStepBy(countsUpNow(n), silence === null ? 0 : workerSilenceMs(silence, n, STORE_SLICE, linkUp(n), clock.now), SIM_NODE_HEARTBEAT_TIMEOUT_MS);
  /** Where silence is tracked, nodes whose link to the coordinator went with a crash and has not come up again: a node
   * that starts while cut off from the coordinator cannot connect (a link that was up stays open through a cut, the
   * case of a node silent with its link open). */
  const linkLost = new Set<number>();
  /** Whether the coordinator counts node `n` up (its link up): as `up` where silence is not tracked. */
  const linkUp = (n: number) => up[n] && !linkLost.has(n);

  // ---- the network ----
  const up: boolean[] = Array(nodeCount).fill(true);
  /** A frozen node runs nothing until then; lives[i] counts its starts (what waited for a dead life is dropped). */
  const frozenUntil: number[] = Array(nodeCount).fill(0);
  const lives: number[] = Array(nodeCount).fill(0);
  function whenAwake(i: number, run: () => void, life = lives[i]): void {
    if (life !== lives[i]) return;
    if (frozenUntil[i] > clock.now) return clock.at(frozenUntil[i] - clock.now + random() * 0.1, () => whenAwake(i, run, life));
    run();
  }
  /** cut[a][b]: a and b cannot reach each other (both ways). Endpoint ids shifted by 2. */
  const cut = new Set<string>();
  const cutKey = (a: number, b: number) => (a < b ? `${a},${b}` : `${b},${a}`);
  /** A leader cut off from the coordinator (and, if `replicasToo`, from the other replicas), not from the router, until
   * `until` (and, if `mapToo`, the router from the coordinator): see tick. Kept apart from `cut`, which each new
   * partition redraws. */
  let isolated: { node: number; until: number; replicasToo: boolean; mapToo: boolean } | null = null;
  const isolatedApart = (a: number, b: number) => {
    if (isolated === null || clock.now >= isolated.until) return false;
    if ((a === isolated.node) === (b === isolated.node)) return isolated.mapToo && cutKey(a, b) === cutKey(COORDINATOR, ROUTER);
    const other = a === isolated.node ? b : a;
    return other === COORDINATOR || (other >= 0 && isolated.replicasToo);
  };
  /** Links a schedule cuts (lateAnswer, lateAppend), kept apart from `cut`, which each new partition redraws. */
  const scheduleCuts = new Set<string>();
  const reachable = (a: number, b: number) => !cut.has(cutKey(a, b)) && (scheduleCuts.size === 0 || !scheduleCuts.has(cutKey(a, b))) && !isolatedApart(a, b) && (a < 0 || up[a]) && (b < 0 || up[b]);
  /** Stalled links (opts.stall): `from` to `to` holds what it gets from its start until it is released (stallLink,
   * lateAnswer; at the latest when the faults stop), then delivers it all, in the order sent or reordered. */
  interface Stall {
    from: number;
    to: number;
    inOrder: boolean;
    held: (() => void)[];
    released: boolean;
  }
  const stalls: Stall[] = [];
  const stallRandom = rng(opts.seed ^ 0x57a11);
  function stallLinkNow(from: number, to: number, inOrder: boolean, forMs: number): Stall {
    const stall: Stall = { from, to, inOrder, held: [], released: false };
    stalls.push(stall);
    report.stalls++;
    clock.at(Math.min(forMs, faultyMs - clock.now), () => release(stall));
    return stall;
  }
  /** What the stall held arrives: at once in the order sent (events at one time run in the order scheduled), or spread
   * over the network's usual delay. */
  function release(stall: Stall): void {
    if (stall.released) return;
    stall.released = true;
    for (const run of stall.held) clock.at(stall.inOrder ? 0 : stallRandom() * maxDelayMs, run);
    stall.held = [];
  }
  /** Replication messages may come twice (the core must not care); a client's request may not: a
   * router sends a write once per attempt, and a second copy would be a second write. `held`: called as a message a
   * stalled link held arrives. */
  function deliverLater(from: number, to: number, run: () => void, duplicable = false, held?: () => void): void {
    if (!reachable(from, to)) return;
    // ('unsaved' runs: the coordinator's links lose nothing, as TCP does not, so that a LeadOn is lost only with its turn.)
    if (faulty && random() < dropRate && !(opts.drainSilence === 'unsaved' && (from === COORDINATOR || to === COORDINATOR))) return;
    const copies = duplicable && faulty && random() < dupRate ? 2 : 1;
    const stall = stalls.length > 0 ? stalls.find((s) => s.from === from && s.to === to && !s.released) : undefined;
    for (let c = 0; c < copies; c++) {
      if (stall === undefined) {
        clock.at(0.1 + random() * maxDelayMs, () => {
          if (!reachable(from, to)) return;
          if (to >= 0) whenAwake(to, () => reachable(from, to) && run());
          else run();
        });
        continue;
      }
      report.stalledMessages++;
      stall.held.push(() => {
        if (!reachable(from, to)) return;
        held?.();
        if (to >= 0) whenAwake(to, () => reachable(from, to) && run());
        else run();
      });
    }
  }
  /** Appends and snapshots sent (the idle check below counts them), but to a node killed for good: a leader keeps
   * trying a follower that never answers, as it would a node down for good left in the set on the coordinator. */
  let leaderMessages = 0;
  /** Nodes killed for good ('drain-dead'): they never start again, and the run converges without them. */
  const deadForGood = new Set<number>();
  /** The answers (last term, last index) the coordinator received to each term's Prepare (longerOlderPassedOver). */
  const answersOf = new Map<number, Map<ReplicaId, { lastTerm: number; lastIndex: number }>>();
  function send(from: number, to: number, message: ReplicationMessage): void {
    const problem = checkReplicationMessage(message);
    if (problem !== null) fail(`a replica sent a malformed ${message.type}: ${problem}`);
    if (message.type === 'Refused') report.refusals[message.code] = (report.refusals[message.code] ?? 0) + 1;
    if (message.type === 'Snapshot') report.snapshotsSent++;
    if ((message.type === 'Append' || message.type === 'Snapshot') && !deadForGood.has(to)) leaderMessages++;
    if (message.type === 'Lead') {
      const answers = answersOf.get(message.term);
      const chosen = answers?.get(to);
      if (chosen !== undefined && [...answers!.values()].some((a) => a.lastTerm < chosen.lastTerm && a.lastIndex > chosen.lastIndex)) report.longerOlderPassedOver++;
    }
    let m = message;
    if (m.type === 'Append' && m.records.length > 0 && faulty && random() < damageRate) {
      // Damage one record on the way: one payload byte, or its term.
      const i = Math.floor(random() * m.records.length);
      const r = m.records[i];
      const damaged: ReplicaRecord = r.payload.length > 0 && random() < 0.5 ? { ...r, payload: r.payload.map((b, j) => (j === 0 ? b ^ 1 : b)) } : { ...r, term: r.term + 1 };
      m = { ...m, records: m.records.map((x, j) => (j === i ? damaged : x)) };
    }
    // The coordinator's questions to a node whose link is up ('remove-down'): each Ping given its own seq (a copy: a
    // failover's message may go to several nodes), as ReplicaLeaders sends them.
    if (from === COORDINATOR && silence !== null && to >= 0 && linkUp(to)) {
      if (m.type === 'Ping') m = { ...m };
      silence.sent(to, [[STORE_SLICE, m]], clock.now);
    }
    const delivered = m;
    /** A stalled link's message arrives: counted if its end moved to a newer term meanwhile (made only in runs that
     * stall: a closure a message costs the other runs a few percent of their CPU). */
    const held = stalls.length === 0 ? undefined : () => {
      const now = to === COORDINATOR ? usedTerm : (replicas[to]?.term ?? 0);
      if ('term' in delivered && delivered.term < now) report.lateOlderTerm[delivered.type] = (report.lateOlderTerm[delivered.type] ?? 0) + 1;
    };
    if (to === COORDINATOR) {
      // What was on its way to a coordinator that restarted since is lost with its connections.
      const life = coordinatorLife;
      deliverLater(from, to, () => life === coordinatorLife && !coordinatorDown && coordinatorReceive(from, delivered), true, held);
    }
    // A node drops what comes for a slice its assignment does not list (slice-worker/main.ts, routeReplication): it
    // lists the set and, until the change settled, the older sets of the change (replica-leaders.ts assignReplication).
    else deliverLater(from, to, () => coordinator.members.includes(to) && replicas[to]?.receive(from, delivered), true, held);
  }

  // ---- replicas ----
  const disks = Array.from({ length: nodeCount }, () => new SimDisk(clock, random, syncMsMax));
  const states: State[] = Array.from({ length: nodeCount }, () => new Map());
  const replicas: (Replica | null)[] = Array(nodeCount).fill(null);
  /** The record applied at each index, by whichever replica applied it first: all must agree. */
  const appliedAt = new Map<number, number>();
  /** Writes the leader of node i ordered (or answered from memory, as a copy of one it applied) and has not
   * answered, held as a worker holds them (held-answers.ts: until the commit of its index, the leader's deposition, or
   * COMMIT_WAIT_MS), each under a ticket that names the router's request; new at each start (memory is lost in a crash). */
  const held: (HeldAnswers | null)[] = Array(nodeCount).fill(null);
  const heldRequests: Map<number, number>[] = Array.from({ length: nodeCount }, () => new Map());
  /** Set while a node's HeldAnswers ticks: what it answers then, it answers because a commit wait ran out. */
  let heldTicking = false;
  /** Store mode: each node's worker store and slice replicas (a new store at each start: memory is lost in a crash). */
  const stores: (SliceStore | null)[] = Array(nodeCount).fill(null);
  const sliceReplicas: (SliceReplicas | null)[] = Array(nodeCount).fill(null);
  let assignEpoch = 0;

  /** `node:term` of each leader a handover deposed, at the term it led (handoverUnknown). */
  const handedOverTerms = new Set<string>();
  /** Set while a node's HeldAnswers answers the writes a leader held when a handover's election deposed it. */
  let deposedByHandover = false;
  /** HeldAnswers.deposed for node i's leader of `term`, counting the answers where a handover deposed it. */
  function deposedOn(i: number, term: number): void {
    deposedByHandover = handedOverTerms.has(`${i}:${term}`);
    try {
      held[i]!.deposed(STORE_SLICE, term);
    } finally {
      deposedByHandover = false;
    }
  }
  /** Node i's held answers for this life, on the simulation's clock, its replica of the slice what they wait on. */
  function holdAnswers(i: number): void {
    if (held[i] !== null) report.commitTimeouts += held[i]!.timedOut;
    const requests = new Map<number, number>();
    heldRequests[i] = requests;
    held[i] = new HeldAnswers(
      () => replicas[i]!,
      () => clock.now,
      (ticket, results) => {
        const requestId = requests.get(ticket)!;
        requests.delete(ticket);
        if (deposedByHandover) {
          report.handoverUnknown++;
          if (laggingRequests.delete(requestId)) report.handoverUnknownLagging++;
        }
        answer(i, requestId, results[0], heldTicking);
      },
      // Writes only are held here (the readers wait for their lease by their own loop): no lease wait to give.
      { commitWaitMs: COMMIT_WAIT_MS },
    );
  }
  /** A write of `requestId` ran on node i's leader: answered now if its record is committed, else held. */
  function holdWrite(i: number, requestId: number, result: SliceOpResult): void {
    const ticket = held[i]!.hold([result], [[STORE_SLICE]], [false]);
    if (ticket === null) return answer(i, requestId, result);
    heldRequests[i].set(ticket, requestId);
  }

  /** Store mode: each node's disk of this life (its checkpoint), and the compaction it runs (as a worker does:
   * SliceCompaction's steps, a bounded wait for a leader's prepared state to commit, then the checkpoint), a step a
   * tick, so crashes, elections and writes come between its steps and during its checkpoint. */
  const onDisks: (ReturnType<SimDisk['forLife']> | null)[] = Array(nodeCount).fill(null);
  const compactions: ({ job: SliceCompaction; waitFrom: number; checkpointing: boolean } | null)[] = Array(nodeCount).fill(null);
  function compactionStep(i: number, start: boolean): void {
    let c = compactions[i];
    if (c === null) {
      if (!start) return;
      c = compactions[i] = { job: sliceReplicas[i]!.compaction(), waitFrom: -1, checkpointing: false };
    }
    if (c.checkpointing) return;
    if (c.waitFrom >= 0) {
      if (sliceReplicas[i]!.compactionPending() && clock.now - c.waitFrom < COMPACTION_WAIT_MS) return;
      c.waitFrom = -1;
    }
    const next = c.job.step(-Infinity); // one slice a step
    if (next === 'prepared') c.waitFrom = clock.now;
    if (next !== 'done') return;
    c.checkpointing = true;
    report.checkpoints++;
    const life = lives[i];
    onDisks[i]!.checkpoint(() => whenAwake(i, () => (compactions[i] = null), life));
  }

  /** Store mode: a snapshot at index n holds exactly the items of the state before it and the records up to n, as
   * this replica's disk holds them (when it holds them, of the snapshot's term: a follower sent its leader's may not). A
   * leader's state labelled with another index than the one it is at (its commit point: its store runs ahead of it)
   * fails here the first time it compacts with a record not yet committed. */
  function checkSnapshot(i: number, view: DurableReplica, op: DiskOp & { kind: 'snapshot' }): void {
    const from = view.snapshot?.index ?? 0;
    if (op.index < from || op.index > from + view.records.length) return;
    // A follower sent its leader's snapshot may hold records of an older term up to its index (a diverged tail, which
    // the snapshot replaces): only records of the snapshot's own term there are the same records (log matching).
    if ((op.index === from ? view.snapshot?.term : view.records[op.index - from - 1].term) !== op.term) return;
    const replay = (states: Uint8Array[]) => {
      const s = new SliceStore(0, 1);
      s.execute([SliceOp.Assign, 1, [STORE_SLICE]]);
      for (const bytes of states) for (const e of decodeReplicated(bytes).effects) s.replay(e);
      return [...s.entries()].filter((e) => e[0] === EFFECT_SET).map((e) => e[3] as string).sort().join();
    };
    const before = view.snapshot === null ? [] : [view.snapshot.state];
    const records = view.records.slice(0, op.index - from).filter((r) => r.payload.length > 0).map((r) => r.payload);
    if (replay([...before, ...records]) !== replay([op.state])) fail(`replica ${i} wrote a snapshot at index ${op.index} whose items are not those of its records up to it`);
  }

  function startOnStore(i: number): void {
    holdAnswers(i);
    const disk = disks[i];
    const onDisk = disk.forLife();
    const store = new SliceStore(0, 1);
    store.execute([SliceOp.Assign, ++assignEpoch, [STORE_SLICE]]);
    onDisks[i] = onDisk;
    compactions[i] = null;
    const log = {
      diskFor: () => ({
        write: (op: DiskOp) => {
          if (op.kind === 'snapshot') checkSnapshot(i, disk.view, op);
          onDisk.write(op);
        },
        compacted: (op: DiskOp & { kind: 'snapshot' }) => {
          checkSnapshot(i, disk.view, op);
          onDisk.compacted(op);
        },
        sync: (done: () => void) => onDisk.sync(() => whenAwake(i, done)),
      }),
      durable: () => disk.recovered(),
      sliceIds: disk.recovered().promisedTerm > 0 ? [STORE_SLICE] : [],
    };
    const sr = new SliceReplicas(
      i,
      store,
      log,
      (_slice, to, m) => send(i, to, m),
      {
        committed: (slice, index) => held[i]!.committed(slice, index),
        deposed: (_slice, term) => deposedOn(i, term),
        leased: (slice) => held[i]!.leased(slice),
      },
      () => clock.now,
      () => clock.now,
      SIM_REPLICA_TIMING,
    );
    stores[i] = store;
    sliceReplicas[i] = sr;
    replicas[i] = sr.of(STORE_SLICE);
  }

  function start(i: number): void {
    if (opts.store === true) return startOnStore(i);
    holdAnswers(i);
    const disk = disks[i];
    const onDisk = disk.forLife();
    const host: ReplicaHost = {
      send: (to, m) => send(i, to, m),
      // The kernel finishes a write while the process is stopped; the process hears of it when it runs.
      // A compaction's snapshot logged as any op (these runs take no checkpoints; the store runs' disk leaves it out of
      // the log until one, as replica-log.ts does).
      disk: { write: (op) => onDisk.write(op), compacted: (op) => onDisk.write(op), sync: (done) => onDisk.sync(() => whenAwake(i, done)) },
      apply: (r) => {
        const seen = appliedAt.get(r.index);
        if (seen !== undefined && seen !== r.checksum) fail(`replica ${i} applied a record at index ${r.index} that another replica applied differently`);
        appliedAt.set(r.index, r.checksum);
        if (r.payload.length === 0) return;
        const [key, value] = decodeWrite(r.payload);
        const list = states[i].get(key) ?? [];
        list.push(value);
        states[i].set(key, list);
      },
      restore: (bytes) => {
        states[i] = decodeState(bytes);
      },
      snapshotState: () => encodeState(states[i]),
      committed: (index) => held[i]!.committed(STORE_SLICE, index),
      deposed: (term) => deposedOn(i, term),
      now: () => clock.now,
      timing: SIM_REPLICA_TIMING,
    };
    replicas[i] = new Replica(i, host, disk.recovered());
  }
  for (let i = 0; i < nodeCount; i++) start(i);

  /** Since when each node that is down has been down (sim ms), as the coordinator's downSince. */
  const downSince = new Map<number, number>();
  /** 'drain-dead': nodes whose replica a drain replaced while they were down (counted if they come back). */
  const replacedWhileDown = new Set<number>();
  /** Node i crashes, and starts again `downMs` later (seeded when not given: drawn after the disk's loss, as always;
   * never for a node killed for good). */
  function crash(i: number, downMs?: number): void {
    if (!up[i]) return;
    report.crashes++;
    up[i] = false;
    downSince.set(i, clock.now);
    lives[i]++;
    frozenUntil[i] = 0;
    if (silence !== null) {
      silence.forget(i);
      linkLost.add(i);
    }
    replicas[i] = null;
    stores[i] = null;
    sliceReplicas[i] = null;
    if (compactions[i] !== null || disks[i].uncheckpointed > 0) report.crashesBeforeCheckpoint++;
    compactions[i] = null;
    // What it held is lost with it (held[i] is replaced at its start): those clients time out, the outcome unknown to them.
    disks[i].crash();
    clock.at(downMs ?? 50 + random() * 600, () => {
      if (deadForGood.has(i)) return;
      up[i] = true;
      downSince.delete(i);
      if (replacedWhileDown.delete(i)) report.replacedCameBack++;
      start(i);
    });
  }

  // ---- the coordinator ----
  let mapLeader: ReplicaId | null = null;
  let usedTerm = 0;
  /** What the map persisted besides (cluster-map.ts): the term and replica of the last Lead or LeadOn published, and
   * the sets before the slice's set whose change has not settled (recorded with the change, cleared once it settled). */
  let mapTerm = 0;
  let mapLastLead: [number, ReplicaId] | null = null;
  let mapUnsettled: number[][] = [];
  /** The coordinator's process: restarts counted, and whether it is down now. */
  let coordinatorLife = 0;
  let coordinatorDown = false;
  const ids = Array.from({ length: nodeCount }, (_, i) => i);
  const timing = SIM_FAILOVER_TIMING;
  /** drainSilence 'unsaved': a turn whose map save fails is under way: what the failover sends goes nowhere. */
  let turnUnsaved = false;
  const unsavedRandom = rng(opts.seed ^ 0x5a7ed);
  const failoverHost = {
    send: (to: ReplicaId, m: ReplicationMessage) => (turnUnsaved ? undefined : send(COORDINATOR, to, m)),
    now: () => clock.now,
    // 'drain-silent': the coordinator's own heardFrom (ReplicaLeaders.heardFrom) over the questions the simulation
    // tracks; elsewhere none, and every replica counts as unheard (failover.ts heardLately).
    ...(opts.setChanges === 'drain-silent' ? { heardFrom: (n: ReplicaId) => heardFromBy(silence!, n, STORE_SLICE, linkUp(n), clock.now) } : {}),
    persistTerm: (t: number, why: ElectionReason | null) => {
      assert(t > usedTerm, 'a term is used once');
      usedTerm = t;
      if (leaderWatch !== null) {
        report.silentLeaderElections++;
        report.silentLeaderElectionMsMax = Math.max(report.silentLeaderElectionMsMax, clock.now - leaderWatch.at);
        leaderWatch = null;
      }
      if (why === 'carrier_unsettled') report.carrierTimeouts++;
    },
    publish: (leader: ReplicaId, term: number) => {
      if (handedTo !== null && leader !== handedTo) report.handoversGivenBack++;
      handedTo = null;
      // As recordElections: a leader outside the set (carrying an unsettled change) is recorded, not made owner.
      if (set.includes(leader)) mapLeader = leader;
      else {
        report.carriers++;
        carrierTerm = term;
      }
      mapTerm = term;
      mapLastLead = [term, leader];
      published = true;
      publishedAt = clock.now;
    },
    lastLead: (): [number, ReplicaId | null] => mapLastLead ?? [mapTerm, null],
  };
  const choose: typeof chooseLeader =
    opts.unsafeChoice === true
      ? (replicas, answers) => (answers.size > Math.floor(replicas.length / 2) ? [...answers.keys()][0] : null)
      : opts.unsafeChoice === 'indexFirst'
        ? (replicas, answers) => {
            // chooseLeader with the two keys swapped.
            const counted = replicas.filter((r) => answers.has(r));
            if (counted.length <= Math.floor(replicas.length / 2)) return null;
            const further = (a: LastRecord, b: LastRecord) => a.lastIndex > b.lastIndex || (a.lastIndex === b.lastIndex && a.lastTerm > b.lastTerm);
            return counted.reduce((best, r) => (further(answers.get(r)!, answers.get(best)!) ? r : best));
          }
        : chooseLeader;
  /** The slice's replica set as the map holds it, and its failover (a new one at each change, as ReplicaLeaders.sync makes). */
  let set = ids.slice(0, replicaCount);
  let coordinator = new SliceFailover(set, null, 0, timing, failoverHost, choose);
  let elections = 0;
  /** Whether the current failover published a leader (the map names one elected for this set), and when it last did. */
  let published = false;
  let publishedAt = -Infinity;
  /** The term of a leader outside the set that the current failover elected, until its change settled (0: none). */
  let carrierTerm = 0;
  /** What each replica's latest Pong said of its commit point's term (the drain's catch-up check). */
  const commitTerms = new Map<number, number>();
  /** A drain under way: `node` leaves the set once every other replica holds the barrier of the leader elected for the larger set. */
  let draining: number | null = null;
  /** 'drain-down': the drain's new replica (null: none, when no node outside the set was up to take it). */
  let drainAdded: number | null = null;
  /** 'drain-silent': when the drain under way started (a check of a freeze tells its own drain from a later one). */
  let drainStartedAt = -1;
  /** 'drain-dead': whether the first drain killed its victim yet. */
  let victimKilled = false;
  /** A replica move to be undone (membership.ts undoStalledMoves): `node`, the one it added, leaves the set again once
   * the change that added it settled, caught up or not (its node down or not), and the set is the one before. */
  let undoing: number | null = null;
  /** The term of a leader told to lead on (LeadOn) that has not said (Pong) it leads it yet; 0: none. A chained
   * change waits for that answer, as it waits for an election to end: without it, chained changes came faster than
   * any message, unlike any coordinator's. */
  let ledOnUnanswered = 0;
  /** A leadership handover under way (ReplicaLeaders.handOver): the failover does not tick (no election) until `to`
   * said (Pong) that it holds `from`'s last record, after `from` said what that is a tick after the handover began, or
   * until `until`. */
  let hold: { from: number; to: number; since: number; until: number } | null = null;
  /** A handover's own draws (whether a router with the map before it keeps writing to the old leader, how long), apart
   * from the run's generator: the seed's other faults and writes stay what they were until a handover. */
  const handoverRandom = rng(opts.seed ^ 0x4a0d0);
  /** The replica a handover named, until its election names a leader (null: no handover's election under way). */
  let handedTo: ReplicaId | null = null;
  /** What each replica's latest Pong said of its last index, and when (a handover's catch-up wait). */
  const lastIndexes = new Map<number, { lastIndex: number; at: number }>();
  /** As ReplicaLeaders.holdsTerm with an age limit (membership.ts leaderUntilElected): replica `n`'s latest Pong, at most
   * PONG_AGE_MAX_MS old, said it holds a committed record of `term` or newer. (commitTerms and lastIndexes are set
   * by the same Pong.) */
  const holdsLately = (n: number, term: number) => (commitTerms.get(n) ?? 0) >= term && clock.now - (lastIndexes.get(n)?.at ?? -Infinity) <= PONG_AGE_MAX_MS;
  /** As holdsTerm with an age limit asks: a Ping to each replica of `nodes` that is up and whose latest Pong is half
   * that old or older, so that one that answers keeps a Pong young enough while the coordinator asks each turn. */
  function askLately(nodes: readonly number[]): void {
    for (const n of nodes) if (up[n] && clock.now - (lastIndexes.get(n)?.at ?? -Infinity) >= PONG_AGE_MAX_MS / 2) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
  }
  /** The map's leader when a change takes the map's leader's replica out, until the slice elects: the product's rule
   * (membership.ts leaderUntilElected), a node that is up (the coordinator counts a frozen one up, as one known by
   * address) holding the barrier of `term`, said lately; `rest` with it first. None (`named` undefined; or no leader
   * elected, as the coordinator asks for its elected term): the map's own rule (changeSet: the first replica). */
  const keptLeaderFirst = (rest: number[], term: number): { kept: number[]; named: number | undefined } => {
    // Where the simulation tracks silence ('remove-down'), with the rule's second choice as Membership.leaderUntilElected
    // gives it: a replica that answers (ReplicaLeaders.answers), one that held the barrier by a Pong of any age first.
    const tracked = silence;
    const otherwise =
      tracked === null
        ? undefined
        : { answers: (n: number) => answersWhenSilent(workerSilenceMs(tracked, n, STORE_SLICE, linkUp(n), clock.now, false), timing.pingIntervalMs), heldOnce: (n: number) => (commitTerms.get(n) ?? 0) >= term };
    const named = coordinator.currentLeader === null ? undefined : leaderUntilElected(rest, linkUp, (n) => holdsLately(n, term), otherwise);
    return { kept: named !== undefined ? [named, ...rest.filter((n) => n !== named)] : rest, named };
  };
  /** Whether the drain under way tried to hand its leader's leadership over (once per drain; if the election gives it
   * back, the step goes on and elects, as the coordinator does past LEADER_HANDOVER_BEFORE_CHANGE_MS). */
  let handoverTried: false | 'skipped' | 'handed' = false;
  /** When the change under way first looked for a replica to hand its leader's leadership to (null: not yet). */
  let handoverSoughtAt: number | null = null;
  /** keyslice remove of a node under way: `node`'s replica leaves, in one change, for one on `to` (null: none outside the
   * set, the set shrinks), once the leadership of `node`, if it leads and is up, was handed to a replica that stays. */
  let removing: { node: number; refill: boolean; until?: number; down?: { silenced: number; askedFrom?: number; upFrom?: Map<number, number> } } | null = null;
  function coordinatorReceive(from: number, received: ReplicationMessage): void {
    // As ReplicaLeaders.receive: an answer clears the question it answers and those before it (silence).
    silence?.answered(from, [[STORE_SLICE, received]]);
    // As NodeLink.readFrame: any frame from the node is heard from it.
    heardAt[from] = clock.now;
    const m = opts.countLateAnswers === true && received.type === 'Prepared' && received.term < usedTerm && coordinator.currentLeader === null ? { ...received, term: usedTerm } : received;
    if (m.type === 'Prepared') {
      if (!answersOf.has(m.term)) answersOf.set(m.term, new Map());
      answersOf.get(m.term)!.set(from, { lastTerm: m.lastTerm, lastIndex: m.lastIndex });
    }
    if (m.type === 'Pong' && m.commitTerm > (commitTerms.get(from) ?? -1)) commitTermFrom.set(from, clock.now);
    if (m.type === 'Pong') commitTerms.set(from, m.commitTerm);
    if (m.type === 'Pong') lastIndexes.set(from, { lastIndex: m.lastIndex, at: clock.now });
    if (m.type === 'Pong' && m.leading && m.term >= ledOnUnanswered) ledOnUnanswered = 0;
    // As ReplicaLeaders.receive: only what a replica of the sets of the change says reaches the failover.
    if (coordinator.members.includes(from)) coordinator.receive(from, m);
  }
  function changeSet(next: number[], why: string): void {
    assert(next.length >= 2 && new Set(next).size === next.length, 'a replicated slice keeps at least 2 distinct replicas');
    // One replica-set change at a time, as the coordinator makes them (cluster-map.ts save asserts it): only the chained
    // runs start one while the change before has not settled.
    if (opts.setChanges !== 'chained' && !coordinator.electorateSettled) fail(`a replica-set change (${why}) started before the one before it settled`);
    report.setChanges++;
    changes.push(`${clock.now.toFixed(1)} ms: ${why}: ${set.join(',')} -> ${next.join(',')}`);
    elections += coordinator.elections;
    // Before changedTo: a leader that leads on is published by it.
    published = false;
    carrierTerm = 0;
    // 'unsaved': the turn that follows the change (its LeadOn, or its election's Prepares) cannot be recorded: as
    // replica-leaders.ts flush, none of it is sent, the map keeps what it held, and the failover is told.
    const unsaved = opts.setChanges === 'drain-silent' && opts.drainSilence === 'unsaved' && faulty && unsavedRandom() < 0.5;
    const mapBefore = { usedTerm, mapTerm, mapLastLead, mapLeader, publishedAt };
    turnUnsaved = unsaved;
    coordinator = coordinator.changedTo(next, usedTerm, failoverHost);
    turnUnsaved = false;
    if (unsaved) {
      ({ usedTerm, mapTerm, mapLastLead, mapLeader, publishedAt } = mapBefore);
      published = false;
      if (opts.brokenUnrecorded !== true) coordinator.unrecorded();
      watchUnsaved(why);
    }
    if (coordinator.currentLeader !== null) report.ledOn++;
    ledOnUnanswered = coordinator.currentLeader !== null ? coordinator.currentTerm : 0;
    const before = set;
    // The map records the set before with the change (cluster-map.ts recordUnsettled), by the failover's rule.
    mapUnsettled = setsBefore([before, ...mapUnsettled], next);
    set = next;
    if (opts.coordinatorRestarts === true && random() < 0.3) clock.at(random() * 60, restartCoordinator);
    for (const n of before) if (!next.includes(n)) departed.add(n);
    releaseDeparted();
    // The map's leader, when it left the set, is replaced by the first replica until the election names one.
    if (mapLeader !== null && !set.includes(mapLeader)) mapLeader = set[0];
  }
  /** 'unsaved': the slice must be led again, by the failover's leader at the failover's term, within UNSAVED_BOUND_MS of
   * the turn whose save failed. */
  function watchUnsaved(why: string): void {
    report.unsavedTurns++;
    const at = clock.now;
    changes.push(`${at.toFixed(1)} ms: the turn after "${why}" not recorded (its messages not sent)`);
    const poll = () => {
      const l = coordinator.currentLeader;
      const r = l === null ? null : replicas[l];
      if (r !== null && r.isLeader && r.term === coordinator.currentTerm) {
        report.unsavedServedMsMax = Math.max(report.unsavedServedMsMax, clock.now - at);
        return;
      }
      if (clock.now - at >= UNSAVED_BOUND_MS)
        return fail(`the slice is not led at its failover's term ${coordinator.currentTerm} (leader ${l}, which ${r === null ? 'is no replica' : `leads ${r.isLeader ? `term ${r.term}` : 'nothing'}`}) at ${clock.now.toFixed(1)} ms, ${UNSAVED_BOUND_MS.toFixed(0)} ms after a turn whose map save failed at ${at.toFixed(1)} ms (replica-leaders.ts flush, SliceFailover.unrecorded)`);
      clock.at(1, poll);
    };
    clock.at(1, poll);
  }
  /** The coordinator's process stops (what it had on its way to it is lost) and starts again a while later, building
   * the slice's failover from what the map persisted, as replica-leaders.ts does at start. */
  function restartCoordinator(): void {
    if (coordinatorDown || !faulty) return;
    report.coordinatorRestarts++;
    if (!coordinator.electorateSettled) report.restartsUnsettled++;
    elections += coordinator.elections;
    coordinatorLife++;
    coordinatorDown = true;
    clock.at(20 + random() * 300, () => {
      coordinatorDown = false;
      published = false;
      carrierTerm = 0;
      ledOnUnanswered = 0;
      hold = null;
      handedTo = null;
      commitTerms.clear();
      if (silence !== null) silence = new OpenQuestions(() => 1, timing.pingIntervalMs, SIM_STUCK_RETRY_MS);
      coordinator = SliceFailover.atStart({ replicas: set, termUsed: usedTerm, unsettled: mapUnsettled }, timing, failoverHost, choose);
      changes.push(`${clock.now.toFixed(1)} ms: coordinator restarted (sets ${coordinator.sets.map((x) => x.join(',')).join(' and ')})`);
    });
  }
  /** Replicas that left the set, still listed by their assignment until the change settled (assignReplication). */
  const departed = new Set<number>();
  /** A node that left the set stops leading the slice when its assignment no longer lists it (worker.ts takeControl):
   * once the change settled (ReplicaLeaders.tick reassigns then). */
  function releaseDeparted(): void {
    for (const n of departed) {
      if (coordinator.members.includes(n)) continue;
      departed.delete(n);
      whenAwake(n, () => {
        if (coordinator.members.includes(n)) return;
        if (opts.store === true) sliceReplicas[n]?.resign(STORE_SLICE);
        else replicas[n]?.resign();
        // And drops the replica's state, disk and store (worker.ts dropLeftReplicas; a node that is down drops it
        // at its next assignment, before it answers anything for the slice): if a later change adds this node
        // again, its replica starts empty but for the term it promised (replica-log.ts drop), which deposed an older
        // leader that may still reach it.
        const promised = disks[n].recovered().promisedTerm;
        disks[n].retire();
        disks[n] = new SimDisk(clock, random, syncMsMax);
        disks[n].keepPromise(promised);
        states[n] = new Map();
        if (up[n]) start(n);
      });
    }
  }
  function randomChange(): void {
    const outside = ids.filter((n) => !set.includes(n));
    const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
    const kind = opts.setChanges === 'drain' || opts.setChanges === 'drain-down' ? 0 : random();
    // keyslice drain's node: the map's leader half the time where it is in the set, else any replica of it.
    const pickDrained = () => (mapLeader !== null && set.includes(mapLeader) && random() < 0.5 ? mapLeader : pick(set));
    /** keyslice drain's first step as the map places it, the new replica on a node outside the set that is up ('drain-dead',
     * 'drain-down'): answers the node drained and the node added, or null where no node outside is up (nothing drawn). */
    const startDrain = (): { node: number; added: number } | null => {
      const live = outside.filter((n) => up[n]);
      if (live.length === 0) return null;
      const node = pickDrained();
      const added = pick(live);
      draining = node;
      drainAdded = added;
      changeSet([...set, added], `drain ${node}, add`);
      return { node, added };
    };
    // As the coordinator: a set changes once a leader was elected for it and the change before it settled
    // (membership.ts: a drain's next step, keyslice remove and removal after a time down wait for both).
    if (draining !== null || undoing !== null || removing !== null || !published || (!coordinator.electorateSettled && (opts.setChanges !== 'chained' || ledOnUnanswered > 0))) return;
    if (opts.setChanges === 'remove-frozen') {
      // keyslice remove of the map's leader, up, whose handover will be given up, with the replica the map's own rule
      // would name frozen from now (SIGSTOP: up for the coordinator) until past the remove.
      const node = mapLeader;
      if (node === null || !set.includes(node) || !up[node] || frozenUntil[node] > clock.now || set.length < 3 || clock.now + HANDOVER_FREEZE_MS >= faultyMs) return;
      const first = set.filter((n) => n !== node)[0];
      // Frozen only once it said (Pong) that it holds the barrier of the elected leader's term: a replica that confirmed
      // the term and froze since, which only the age of its Pong tells apart. Asked now; a later draw freezes it.
      if (coordinator.currentLeader === null || (commitTerms.get(first) ?? 0) < coordinator.currentTerm) {
        send(COORDINATOR, first, { type: 'Ping', seq: 0 });
        return;
      }
      report.removeFreezes++;
      changes.push(`${clock.now.toFixed(1)} ms: remove ${node}, ${first} frozen for ${HANDOVER_FREEZE_MS.toFixed(0)} ms`);
      frozenUntil[first] = Math.max(frozenUntil[first], clock.now + HANDOVER_FREEZE_MS);
      removing = { node, refill: outside.length > 0, until: clock.now + HANDOVER_BEFORE_CHANGE_MS };
      handoverTried = 'skipped';
      removeStep();
      return;
    }
    if (opts.setChanges === 'drain-silent') {
      // keyslice drain of a replica that does not lead (no handover: what is under test is the step's wait), the new
      // replica placed on a node outside the set that the coordinator counts up (map.takesReplica: answersForStep).
      const candidates = set.filter((n) => n !== mapLeader);
      const live = outside.filter((n) => answersForStepNow(n));
      if (set.length < 3 || mapLeader === null || !set.includes(mapLeader) || live.length === 0) return;
      const node = pick(candidates);
      const added = pick(live);
      placedOn(added);
      draining = node;
      drainAdded = added;
      drainStartedAt = clock.now;
      changeSet([...set, added], `drain ${node}, add`);
      silenceDuringDrain(node, added);
      return;
    }
    if (opts.setChanges === 'drain-dead') {
      // keyslice drain, the new replica on a node that is up; at the first drain, another replica of the set is
      // killed for good as it starts (one that dies after its slice's step took the drained replica out keeps its
      // replica there until keyslice remove, as on the coordinator).
      if (set.length < 3) return;
      const drain = startDrain();
      if (drain === null) return;
      if (!victimKilled) {
        // Half for good; else back after a while, often after the drain replaced it. A quarter of the runs also kill
        // for good the node that could take its place (the one outside the set), so the drain goes on without.
        victimKilled = true;
        const victim = pick(set.filter((n) => n !== drain.node && n !== drain.added));
        const forGood = random() < 0.5;
        if (forGood) deadForGood.add(victim);
        changes.push(`${clock.now.toFixed(1)} ms: ${victim} killed${forGood ? ' for good' : ''}`);
        crash(victim, forGood ? undefined : DRAIN_DEAD_AFTER_MS * (0.5 + random() * 3));
        const spare = ids.filter((n) => !set.includes(n));
        if (random() < 0.25 && spare.length === 1) {
          deadForGood.add(spare[0]);
          changes.push(`${clock.now.toFixed(1)} ms: ${spare[0]} killed for good`);
          crash(spare[0]);
        }
      }
    } else if (kind < 0.4 && outside.length > 0 && set.length >= 3 && random() < 0.3) {
      // A replica move onto a node that joined, undone (membership.ts undoStalledMoves): a replica added, its node
      // often killed at once, then (undoStep) it leaves again and the set is the one before.
      const node = pick(outside);
      undoing = node;
      changeSet([...set, node], `move to ${node}, add`);
      if (random() < 0.6) clock.at(random() * 20, () => crash(node));
    } else if (opts.setChanges === 'drain-down' && set.length >= 3) {
      // keyslice drain, as the map places: the new replica on a node that is up; its node often killed at once.
      const drain = startDrain();
      if (drain === null) return;
      if (random() < 0.6) clock.at(random() * 20, () => crash(drain.added));
    } else if (kind < 0.4 && outside.length > 0 && set.length >= 3) {
      // keyslice drain: one more replica on another node, then (drainStep) the drained one leaves.
      const node = pickDrained();
      draining = node;
      drainAdded = pick(outside);
      changeSet([...set, drainAdded], `drain ${node}, add`);
    } else if (kind < 0.6 && outside.length > 0 && set.length >= 3) {
      // keyslice remove of a node (down or not), its replica refilled elsewhere in the same change (refused
      // where the replicas left would not be a majority of the set, as at R=2).
      const gone = pick(set);
      removing = { node: gone, refill: true };
      removeStep();
    } else if (kind < 0.8 && outside.length > 0) changeSet([...set, pick(outside)], 'add');
    else if (set.length >= 3) {
      removing = { node: pick(set), refill: false };
      removeStep();
    }
  }
  /** 'drain-silent': the freeze opts.drainSilence names, as the drain that took `drained` out added `added`, and the
   * run's check of what the coordinator then does (SimOptions.drainSilence). While the faults last, one at a time. */
  function silenceDuringDrain(drained: number, added: number): void {
    const who = opts.drainSilence;
    if (who === undefined || who === 'unsaved' || !faulty) return;
    const keptOne = who === 'kept' || who === 'stuck';
    const newOne = who === 'new' || who === 'stuck-new';
    const forMs = keptOne ? KEPT_FREEZE_MS : newOne ? NEW_FREEZE_MS : LEADER_FREEZE_MS;
    // One at a time, and not while a replica thawed lately may still be catching up.
    if (clock.now + forMs >= faultyMs || ids.some((n) => frozenUntil[n] > clock.now) || clock.now - lastThawAt < SILENCE_QUIET_MS) return;
    // A leader's freeze only where it leads on through the change (no election under way, which would replace it anyway).
    if (who === 'leader' && (coordinator.currentLeader === null || coordinator.currentLeader !== mapLeader)) return;
    const kept = set.filter((n) => n !== drained && n !== added && n !== mapLeader);
    const victim = keptOne ? kept[Math.floor(random() * kept.length)] : newOne ? added : mapLeader!;
    if (victim === undefined) return;
    report.drainSilences++;
    report.freezes++;
    const at = clock.now;
    frozenUntil[victim] = at + forMs;
    // A stuck worker: the replica runs nothing, but its node pongs (pingLinks) until the thaw.
    if (who === 'stuck' || who === 'stuck-new') pongsUntil[victim] = at + forMs;
    changes.push(`${at.toFixed(1)} ms: ${victim} (${who === 'stuck' ? 'a replica kept, its worker stuck' : who === 'kept' ? 'a replica kept' : who === 'new' ? 'the new replica' : who === 'stuck-new' ? 'the new replica, its worker stuck' : 'the leader'}) frozen for ${forMs.toFixed(0)} ms`);
    if (who === 'leader') {
      const watch = (leaderWatch = { node: victim, at, term: usedTerm });
      clock.at(LEADER_ELECTION_BOUND_MS, () => {
        if (leaderWatch === watch && !coordinatorDown) fail(`the leader ${victim}, frozen at ${at.toFixed(1)} ms, still leads at ${clock.now.toFixed(1)} ms with no election started (term ${usedTerm}): the failover counts a frozen leader as heard from (host.heardFrom: replica-leaders.ts heardFromBy)`);
      });
    }
    // Checked as it thaws (before anything it runs): the coordinator went on without it, where the slice had an elected
    // leader and a settled change then (else the step waits for those, frozen replica or not: silentUnchecked).
    clock.at(forMs - 0.01, () => {
      lastThawAt = clock.now;
      if (!published || coordinator.currentLeader === null || !coordinator.electorateSettled) {
        if (who !== 'leader' && draining === drained && drainStartedAt === at) report.silentUnchecked++;
        return;
      }
      // A step that could not have gone for want of others (the new replica, or a majority of those kept that answer,
      // holding the barrier less than CATCH_UP_SETTLE_MS: a slow catch-up) or led by the drained replica (its handover
      // waits) says nothing of the frozen one: unchecked.
      const term = coordinator.currentTerm;
      const heldLongEnough = (n: number) => (commitTerms.get(n) ?? 0) >= term && clock.now - (commitTermFrom.get(n) ?? Infinity) >= CATCH_UP_SETTLE_MS;
      const rest = set.filter((n) => n !== drained);
      const couldGo = mapLeader !== drained && drainAdded !== null && heldLongEnough(drainAdded) && rest.filter((n) => n !== victim && heldLongEnough(n)).length >= majority(rest.length);
      if (keptOne && draining === drained && drainStartedAt === at && !couldGo) {
        report.silentUnchecked++;
        return;
      }
      if (keptOne && draining === drained && drainStartedAt === at)
        fail(`the drain of ${drained} still waits at ${clock.now.toFixed(1)} ms for ${victim}, a replica it keeps ${who === 'stuck' ? 'whose worker is stuck (its node pongs)' : 'frozen'} since ${at.toFixed(1)} ms (silent past the node heartbeat bound, ${SIM_NODE_HEARTBEAT_TIMEOUT_MS.toFixed(0)} ms, it counts down for the step: membership.ts answersForStepBy, countsUpBy)`);
      if (newOne && set.includes(added) && drainAdded === added && drainStartedAt === at)
        fail(`the drain step of ${drained} onto ${added}, ${who === 'stuck-new' ? 'its worker stuck (its node pongs)' : 'frozen'} since ${at.toFixed(1)} ms, is not undone at ${clock.now.toFixed(1)} ms (silent past the node heartbeat bound, ${SIM_NODE_HEARTBEAT_TIMEOUT_MS.toFixed(0)} ms, then ${SIM_MOVE_UNDO_MS.toFixed(0)} ms not answering for the step: undoStalledMoves, answersForStepBy)`);
    });
  }
  /** 'drain-silent', as membership.ts undoStalledMoves and refillReplicas: a drain step whose new replica the coordinator
   * has not counted as answering for the step (answersForStepNow: silent past the bound, its link open, or its questions
   * unanswered that long while it pongs) for SIM_MOVE_UNDO_MS is undone, its new replica placed in the same change on
   * another node outside the set that answers for a step, as placement counts one up (map.takesReplica), if one does (else once
   * one does).
   * Whether it changed the set (else the step's own wait goes on: drainStepCatchUp keeps a new replica down behind). */
  function undoSilentStep(): boolean {
    const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
    const outsideUp = ids.filter((n) => !set.includes(n) && answersForStepNow(n));
    if (drainAdded === null) {
      if (outsideUp.length === 0) return true;
      drainAdded = pick(outsideUp);
      placedOn(drainAdded);
      changeSet([...set, drainAdded], `drain ${draining}, add ${drainAdded} (a node counts up again)`);
      return true;
    }
    const since = unansweringSince.get(drainAdded);
    if (answersForStepNow(drainAdded) || since === undefined || clock.now - since < SIM_MOVE_UNDO_MS) return false;
    const gone = drainAdded;
    report.movesUndone++;
    if (frozenUntil[gone] > clock.now) report.silentNewUndone++;
    if (frozenUntil[gone] > clock.now && (pongsUntil[gone] ?? 0) > clock.now) undoneOffStuck.set(gone, clock.now);
    drainAdded = outsideUp.length > 0 ? pick(outsideUp) : null;
    if (drainAdded !== null) placedOn(drainAdded);
    if (drainAdded !== null && frozenUntil[gone] > clock.now) report.silentNewRedirected++;
    changeSet([...set.filter((n) => n !== gone), ...(drainAdded !== null ? [drainAdded] : [])], `drain ${draining}, undo ${gone}${drainAdded !== null ? `, redirect to ${drainAdded}` : ''}`);
    return true;
  }
  /** 'remove-down': the map's leader goes down (killed, or cut off from the coordinator and the replicas) with one
   * replica kept made silent at the same moment (frozen, or cut off from the coordinator alone: up for it either way),
   * and is removed (removeStep) PONG_AGE_MAX_MS (and the network's longest delay) later, before the failover's election (its heartbeat timeout) where
   * the draws allow. Half the time at the first tick after an election published the leader, else at the run's change
   * rate. */
  function removeDown(): void {
    if (!faulty || removing !== null || !published || !coordinator.electorateSettled) return;
    const node = mapLeader;
    if (node === null || node !== coordinator.currentLeader || !up[node] || frozenUntil[node] > clock.now || set.length < 3 || clock.now + HANDOVER_FREEZE_MS >= faultyMs) return;
    const justElected = clock.now - publishedAt <= TICK_MS;
    if (!(justElected ? random() < 0.5 : random() < changePerSecond * (TICK_MS / 1000))) return;
    const rest = set.filter((n) => n !== node);
    const live = rest.filter((n) => up[n] && frozenUntil[n] <= clock.now);
    if (live.length === 0) return;
    const outside = ids.filter((n) => !set.includes(n));
    // Of those up and not frozen, the first (the map's own rule names the first that is up: a break that ignores silence
    // then names it) half the time.
    const silenced = random() < 0.5 ? live[0] : live[Math.floor(random() * live.length)];
    const frozen = random() < 0.5;
    const killed = random() < 0.5;
    report.removeDowns++;
    changes.push(`${clock.now.toFixed(1)} ms: remove ${node} (${killed ? 'killed' : 'cut off'}), ${silenced} ${opts.keptRestarts === true ? 'killed, back during the wait for answers and frozen' : frozen ? 'frozen' : 'cut off from the coordinator'} for ${HANDOVER_FREEZE_MS.toFixed(0)} ms`);
    const cuts = [cutKey(COORDINATOR, silenced)];
    if (opts.keptRestarts === true) {
      // Killed now, back once the remove's wait for answers began (its first tick at or after `until`, below) or up to
      // PONG_AGE_MAX_MS into it, and frozen as it starts: its link comes up during the wait, before it answered anything.
      cuts.pop();
      const waitFrom = Math.ceil((clock.now + PONG_AGE_MAX_MS + maxDelayMs + 1) / TICK_MS) * TICK_MS;
      const downMs = waitFrom - clock.now + random() * PONG_AGE_MAX_MS;
      crash(silenced, downMs);
      clock.at(downMs, () => {
        if (up[silenced]) frozenUntil[silenced] = Math.max(frozenUntil[silenced], clock.now + HANDOVER_FREEZE_MS);
      });
    } else if (frozen) {
      frozenUntil[silenced] = Math.max(frozenUntil[silenced], clock.now + HANDOVER_FREEZE_MS);
      cuts.pop();
    }
    if (killed) crash(node);
    else cuts.push(cutKey(COORDINATOR, node), ...rest.map((n) => cutKey(node, n)));
    for (const k of cuts) scheduleCuts.add(k);
    clock.at(HANDOVER_FREEZE_MS, () => {
      for (const k of cuts) scheduleCuts.delete(k);
    });
    // Past the age limit of a Pong the silenced one sent before, on its way still (maxDelayMs): the first rule cannot name
    // it by that Pong (a remove right after a freeze may, by the age limit's design: its Pong is young).
    removing = { node, refill: outside.length > 0, until: clock.now + PONG_AGE_MAX_MS + maxDelayMs + 1, down: { silenced } };
    handoverTried = 'skipped';
  }
  /** keyslice remove (membership.ts remove): a node's replica leaves in one change, refilled on `to` where a node is
   * outside the set; a node that is up and leads the slice first hands its leadership to a replica that stays
   * (handOverLeaderships), as a drain step does (handOverFirst), so that the change is led on. */
  function removeStep(): void {
    if (removing === null || !published || (!coordinator.electorateSettled && (opts.setChanges !== 'chained' || ledOnUnanswered > 0))) return;
    const { node, refill } = removing;
    // A change made meanwhile (deposedTail's replacement) took the node out: this remove is moot.
    if (!set.includes(node)) {
      removing = null;
      handoverTried = false;
      handoverSoughtAt = null;
      return;
    }
    const rest = set.filter((n) => n !== node);
    const down = removing.down;
    if (down !== undefined) {
      // 'remove-down': the operator's remove comes PONG_AGE_MAX_MS after the node went down (no handover: its link is
      // lost); then, as membership.ts askKeptLately, the replicas kept are asked until one said lately that it holds
      // the barrier, at least PONG_AGE_MAX_MS from the wait's start and from when the replica the second choice names
      // was found with its link up, at most twice that (a tick at a time: the coordinator's wait steps half a tick).
      // The rule is the product's own, keepAskingKept.
      if (clock.now < removing.until!) return;
      down.askedFrom ??= clock.now;
      const upFrom = (down.upFrom ??= new Map());
      for (const n of rest) if (!linkUp(n)) upFrom.delete(n);
      else if (!upFrom.has(n)) upFrom.set(n, clock.now);
      const term = coordinator.currentTerm;
      if (coordinator.currentLeader !== null && leaderUntilElected(rest, linkUp, (n) => holdsLately(n, term)) === undefined) {
        const { named } = keptLeaderFirst(rest, term);
        if (keepAskingKept(clock.now, down.askedFrom, upFrom, named, PONG_AGE_MAX_MS)) {
          askLately(rest);
          return;
        }
      }
    } else if (removing.until !== undefined && clock.now < removing.until) {
      // 'remove-frozen': the handover's wait, given up at its bound; the replicas kept asked meanwhile (handOverTarget).
      askLately(rest);
      return;
    }
    if (handOverFirst(node, rest, coordinator.currentTerm)) return;
    if (handoverTried === 'handed' && node !== coordinator.currentLeader) report.handedOver++;
    const frozenRemove = removing.until !== undefined && down === undefined;
    removing = null;
    handoverTried = false;
    handoverSoughtAt = null;
    // The map places the refill with the change (cluster-map.ts removeReplicatedNode), on a node outside the set that
    // is up then: placement skips nodes that are down. None up: the set is left a replica short. Where the map named
    // the removed node, it names the leader until the slice elects by the product's rule (membership.ts removeReplicated).
    const live = ids.filter((n) => !set.includes(n) && up[n]);
    const to = refill && live.length > 0 ? live[Math.floor(random() * live.length)] : null;
    const ledByLeaving = mapLeader === node;
    const { kept, named } = ledByLeaving ? keptLeaderFirst(rest, coordinator.currentTerm) : { kept: rest, named: undefined };
    if (down !== undefined) {
      // Counted where the map named the removed node and a leader was elected (else the map's own rule names one).
      const term = coordinator.currentTerm;
      if (named === undefined) report.removesDownUnnamed++;
      else {
        // A frozen or cut-off one named: one asked what it has not answered since the wait began (the rule's fault), or
        // one first asked later (its link came up during the wait, after a restart: it counts as answering for 1.5 ping
        // intervals after that question, which may outlast the wait).
        const upAt = down.upFrom?.get(down.silenced);
        const cameUp = opts.keptRestarts === true && upAt !== undefined && upAt > down.askedFrom! && upAt - down.askedFrom! <= PONG_AGE_MAX_MS;
        if (cameUp) report.restartedKeptUp++;
        if (cameUp && leaderUntilElected(rest, linkUp, (n) => holdsLately(n, term)) === undefined) report.restartedKeptSecondChoice++;
        if (cameUp && named === down.silenced && frozenUntil[named] > clock.now)
          fail(`a remove of ${node} names ${named} the slice's leader at ${clock.now.toFixed(1)} ms, frozen, whose link came up at ${upAt!.toFixed(1)} ms, ${(upAt! - down.askedFrom!).toFixed(1)} ms into the wait for answers begun at ${down.askedFrom!.toFixed(1)} ms: the wait (membership.ts keepAskingKept) ended before it had owed an answer ${PONG_AGE_MAX_MS} ms`);
        if (frozenUntil[named] > clock.now || scheduleCuts.has(cutKey(COORDINATOR, named))) {
          if ((silence!.firstAsked(named) ?? Infinity) > down.askedFrom!) report.removesDownNamingUntold++;
          else report.removesDownNamingSilent++;
        }
        if (leaderUntilElected(rest, linkUp, (n) => holdsLately(n, term)) === undefined) report.removesDownAnswering++;
      }
    }
    changeSet(to !== null ? [...kept, to] : kept, `${to !== null ? 'replace' : 'remove'} ${node}`);
    // Counted where the map named the removed node: the rule's choice, or none (no leader elected, or no replica kept
    // said lately that it holds the barrier: the map's own rule then names the first, frozen or not, as on the
    // coordinator).
    if (frozenRemove && ledByLeaving && named === undefined) report.removesUnnamed++;
    if (frozenRemove && named !== undefined && frozenUntil[named] > clock.now) report.removesNamingFrozen++;
  }
  /** As membership.ts before a change takes the leader's replica out (a drain step, keyslice remove of a node that is
   * up): its leadership is first handed to a replica that stays, up and saying (Pong) that it holds the leader's
   * barrier (handOverTarget; asked meanwhile, at most HANDOVER_WAIT_MS), so that the change is led on. Tried once per
   * change, in 4 of 5 (the others elect, as the coordinator does when a handover does not complete within
   * LEADER_HANDOVER_BEFORE_CHANGE_MS, so that both ways stay covered). Whether the change waits for it. */
  function handOverFirst(leaving: number, rest: number[], term: number): boolean {
    if (handoverTried !== false || leaving !== coordinator.currentLeader || mapLeader !== leaving || !coordinator.electorateSettled || !up[leaving]) return false;
    const to = rest.find((n) => up[n] && (commitTerms.get(n) ?? 0) >= term);
    handoverSoughtAt ??= clock.now;
    if (to === undefined && clock.now - handoverSoughtAt < HANDOVER_WAIT_MS) {
      for (const n of rest) if (up[n]) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
      return true;
    }
    handoverTried = to !== undefined && random() < 0.8 ? 'handed' : 'skipped';
    if (handoverTried !== 'handed') return false;
    handOver(leaving, to!);
    if (removing !== null) report.removeHandovers++;
    return true;
  }
  /** membership.ts undoStalledMoves: the move's new replica leaves once the change that added it settled. */
  function undoStep(): void {
    if (undoing === null || !published || coordinator.currentLeader === null || (!coordinator.electorateSettled && (opts.setChanges !== 'chained' || ledOnUnanswered > 0))) return;
    const node = undoing;
    undoing = null;
    report.movesUndone++;
    changeSet(set.filter((n) => n !== node), `move to ${node}, undo`);
  }
  /** membership.ts drainReplicas: the drained replica leaves once every other one holds the elected leader's barrier. */
  function drainStep(): void {
    if (draining === null || !published || coordinator.currentLeader === null || (!coordinator.electorateSettled && (opts.setChanges !== 'chained' || ledOnUnanswered > 0))) return;
    if (opts.setChanges === 'drain-down' && drainStepDown()) return;
    if (opts.setChanges === 'drain-dead' && replaceDead()) return;
    if (opts.setChanges === 'drain-silent' && undoSilentStep()) return;
    const term = coordinator.currentTerm;
    const rest = set.filter((n) => n !== draining);
    // As membership.ts drainReplicas: where the map will name the leader from those kept (the leaving replica leads in
    // it), each must have said lately that it holds the barrier, as leaderUntilElected asks, and is asked meanwhile.
    const ledByLeaving = mapLeader === draining;
    const holds = (n: number) => (ledByLeaving ? holdsLately(n, term) : (commitTerms.get(n) ?? 0) >= term);
    if (ledByLeaving) askLately(rest);
    if (opts.setChanges === 'drain-silent') {
      // membership.ts drainReplicas itself: drainStepCatchUp with up as the step counts it (answersForStep): a replica
      // kept that is silent past the node heartbeat bound (by its node's clock, or by the questions it leaves
      // unanswered) is not waited for, the new replica and a majority of those kept holding the barrier and answering are.
      const { behind, holdingUp } = drainStepCatchUp(rest, drainAdded ?? -1, holds, answersForStepNow);
      if (behind.length > 0 || holdingUp.length < majority(rest.length)) {
        for (const n of rest) if (up[n] && !holds(n)) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
        return;
      }
      if (rest.some((n) => frozenUntil[n] > clock.now && !holds(n))) {
        report.drainStepsPastSilentKept++;
        changes.push(`${clock.now.toFixed(1)} ms: drain ${draining}: ${rest.filter((n) => frozenUntil[n] > clock.now && !holds(n)).join(',')} frozen and behind, counted down`);
      }
    } else if (opts.handoverFreezes === true) {
      // membership.ts's rule itself: past the handover's bound, while the leaving replica still leads (its handover's
      // election gave it back), a replica kept from the set before that is up and behind is not waited for.
      const spent = opts.handoverNeverSpent !== true && handoverTried === 'handed' && coordinator.currentLeader === draining && clock.now - (handoverSoughtAt ?? clock.now) >= HANDOVER_BEFORE_CHANGE_MS;
      const { behind, holdingUp } = drainStepCatchUp(rest, drainAdded ?? -1, holds, (n) => up[n], spent);
      if (behind.length > 0 || holdingUp.length < majority(rest.length)) {
        for (const n of rest) if (up[n] && !holds(n)) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
        return;
      }
      if (spent && rest.some((n) => up[n] && !holds(n))) {
        report.drainStepsPastHandoverBound++;
        changes.push(`${clock.now.toFixed(1)} ms: drain ${draining}: past the handover's bound, ${rest.filter((n) => up[n] && !holds(n)).join(',')} behind`);
      }
    } else {
      // 'drain-dead', as drainStepCatchUp: a replica on a node that is down is not waited for, as long as the caught-up
      // ones that are up are a majority of the set left (one that held the barrier and went down counts for nothing).
      const waited = opts.setChanges === 'drain-dead' ? rest.filter((n) => up[n]) : rest;
      const behind = waited.filter((n) => !holds(n));
      if (behind.length > 0) {
        for (const n of behind) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
        return;
      }
      if (waited.length < majority(rest.length)) return;
      if (opts.setChanges === 'drain-dead' && rest.some((n) => !up[n] && clock.now - (downSince.get(n) ?? clock.now) >= DRAIN_DEAD_AFTER_MS)) report.drainedKeepingDown++;
    }
    // As membership.ts drainReplicas: the leader's replica leaves only once its leadership was handed to a replica that
    // stays (every one that is up holds the barrier by now, so one is found at once).
    if (handOverFirst(draining, rest, term)) return;
    if (handoverTried === 'handed' && draining !== coordinator.currentLeader) report.handedOver++;
    const node = draining;
    draining = null;
    drainAdded = null;
    handoverTried = false;
    handoverSoughtAt = null;
    // As membership.ts drainReplicas (dropLeavingReplicas' leader): where the map named the leaving replica, it names
    // by leaderUntilElected, the product's rule, a replica kept that is up and said lately that it holds the barrier,
    // not a frozen handover target (changeSet names set[0]).
    changeSet(ledByLeaving ? keptLeaderFirst(rest, term).kept : rest, `drain ${node}, remove`);
    // Counted where the step named the map's leader (the leaving one led): a frozen leader named before is not its doing.
    if (ledByLeaving && mapLeader !== null && frozenUntil[mapLeader] > clock.now) report.drainsNamingFrozen++;
  }
  /** ReplicaLeaders.handOver: the map names `to` (listed first, so that it wins the election's tie) at once, and a
   * failover for the same set elects once the hold ends (caughtUp), the replica with the largest last record leading. */
  function handOver(from: number, to: number): void {
    assert(set.includes(to) && to !== from && to !== draining && coordinator.electorateSettled, 'a leadership is handed to a replica that stays in a settled set');
    report.handovers++;
    changes.push(`${clock.now.toFixed(1)} ms: hand the leadership over ${from} -> ${to}`);
    elections += coordinator.elections;
    handedOverTerms.add(`${from}:${coordinator.currentTerm}`);
    set = [to, ...set.filter((n) => n !== to)];
    mapLeader = to;
    published = false;
    handedTo = to;
    // As ReplicaLeaders.handOver: its election waits a while for the answer of the replica handed to.
    coordinator = SliceFailover.handOver(set, usedTerm, timing, failoverHost, choose);
    // Half the time a router with the map before the handover (its batches on their way to the old leader's worker
    // before the node's new assignment, or its map late) keeps writing to the old leader for a while, up to past the
    // catch-up wait: writes that reach it after the Pong that the wait went by, which the handover's election
    // deposes (outcome unknown: handoverUnknown) or that make it the furthest, so that it is named again
    // (handoversGivenBack). The case a removed leader leading on through the change would spare
    // (docs/replication-notes.md, "A removed leader leading on").
    if (tailWritesTo === null && handoverRandom() < 0.5) {
      tailWritesTo = handoverTail = from;
      report.handoverLaggingWriters++;
      clock.at(handoverRandom() * HANDOVER_WAIT_MS * 1.5, () => {
        if (tailWritesTo === from) tailWritesTo = null;
        if (handoverTail === from) handoverTail = null;
      });
    }
    // And in about a quarter of them the replica handed to or the old leader is killed during the catch-up wait or the
    // election (back 50 to 650 ms later): the election names another without waiting past its bound for the answer
    // of a replica handed to that died, and the old leader's writes survive it or end with an unknown outcome.
    const kill = handoverRandom();
    if (opts.handoverFreezes === true && draining !== null && to !== drainAdded && faulty && clock.now + HANDOVER_FREEZE_MS < faultyMs) {
      // Frozen at once, before it can say it holds the old leader's last record: its election names the old leader again.
      report.handoverFreezes++;
      changes.push(`${clock.now.toFixed(1)} ms: ${to} frozen for ${HANDOVER_FREEZE_MS.toFixed(0)} ms`);
      frozenUntil[to] = Math.max(frozenUntil[to], clock.now + HANDOVER_FREEZE_MS);
    } else if (kill < 0.25 && opts.setChanges !== 'drain-silent') {
      // (Not in 'drain-silent' runs, which run only the freezes they check.)
      const victim = kill < 0.15 ? to : from;
      const after = handoverRandom() * (HANDOVER_WAIT_MS + timing.electionTimeoutMs);
      const downMs = 50 + handoverRandom() * 600;
      // Only while the faults run, and back before they stop (as the run's own crashes), so that the run's end at
      // rest (convergence, then a silent leader) sees none of it.
      const handing = coordinator;
      clock.at(after, () => {
        if (!faulty || !up[victim] || clock.now + downMs >= faultyMs) return;
        // Counted only where it lands before this handover's election named a leader (handedTo is cleared by its
        // publish, and by a coordinator restart, which replaces the failover): the case the counter's assertion is for.
        if (coordinator === handing && handedTo === to) report.handoverKills++;
        crash(victim, downMs);
      });
    }
    hold = { from, to, since: clock.now, until: clock.now + HANDOVER_WAIT_MS };
  }
  /** Whether a handover's hold still keeps its election back (ReplicaLeaders.handedOver); asks both meanwhile. */
  function holding(): boolean {
    if (hold === null) return false;
    if (clock.now >= hold.until || caughtUpForHandover(lastIndexes.get(hold.from), lastIndexes.get(hold.to), hold.since, TICK_MS)) {
      hold = null;
      return false;
    }
    for (const n of [hold.from, hold.to]) send(COORDINATOR, n, { type: 'Ping', seq: 0 });
    return true;
  }
  /** 'drain-dead', as membership.ts drainReplicas: a replica the drain keeps on a node killed for good is replaced, in
   * one change, on a node that is up outside the set, where the replicas left that are up are a majority of the set
   * (keyslice remove's rule); with no such node up the step waits (here a crashed node comes back), and while the
   * failover still names it leader (the coordinator elects another at once when its link closes, and a drain step
   * waits for an elected leader). Whether it changed the set or waits. */
  function replaceDead(): boolean {
    // Any replica the drain keeps on a node that is down, not its new one (an undo's) nor the leader (the failover
    // elects another first), whatever the reason it is down: the coordinator cannot tell a crash from a death.
    const dead = set.find((n) => n !== draining && n !== drainAdded && n !== coordinator.currentLeader && !up[n]);
    if (dead === undefined) return false;
    const spare = ids.filter((n) => !set.includes(n) && up[n]);
    // keyslice remove's rule, and with no node up to take its place the step goes on without (drainReplicas).
    if (spare.length === 0 || set.filter((n) => n !== dead && up[n]).length < majority(set.length)) return false;
    // Until it has been down that long it may be restarting: the step waits.
    if (clock.now - (downSince.get(dead) ?? clock.now) < DRAIN_DEAD_AFTER_MS) return true;
    report.deadReplaced++;
    if (!deadForGood.has(dead)) replacedWhileDown.add(dead);
    changeSet([...set.filter((n) => n !== dead), spare[Math.floor(random() * spare.length)]], `drain ${draining}, replace ${dead} (down ${(clock.now - downSince.get(dead)!).toFixed(0)} ms)`);
    return true;
  }
  /** 'drain-down', as membership.ts undoStalledMoves and refillReplicas: a drain step whose new replica's node is
   * down is undone, its new replica placed on another node that is up in the same change if there is one; with none
   * up, the drain waits, and a later step places one once a node is up. Whether it changed the set. */
  function drainStepDown(): boolean {
    const outsideUp = ids.filter((n) => !set.includes(n) && up[n]);
    const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
    if (drainAdded === null) {
      if (outsideUp.length === 0) return true; // nothing to take the replica: the drain waits
      drainAdded = pick(outsideUp);
      changeSet([...set, drainAdded], `drain ${draining}, add ${drainAdded} (a node is up again)`);
      return true;
    }
    if (up[drainAdded]) return false;
    const gone = drainAdded;
    const next = set.filter((n) => n !== gone);
    report.movesUndone++;
    drainAdded = outsideUp.length > 0 ? pick(outsideUp) : null;
    if (drainAdded !== null) {
      report.drainStepsRedirected++;
      next.push(drainAdded);
    }
    changeSet(next, `drain ${draining}, undo ${gone}${drainAdded !== null ? `, redirect to ${drainAdded}` : ''}`);
    return true;
  }

  // ---- writers, through a router that follows the map ----
  /** deposedTail: the leader the writers' router still names while its map lags (deposeWithTail); null: the map's. */
  let tailWritesTo: ReplicaId | null = null;
  /** The old leader a handover's lagging router writes to (tailWritesTo, while it names it), and the requests that router
   * sent it (handoverUnknownLagging). */
  let handoverTail: ReplicaId | null = null;
  const laggingRequests = new Set<number>();
  const writes = new Map<number, Write>();
  /** The router's requests waiting for an answer: each settles with the node's result, or 'timeout' (its wait ran
   * out); `timedOut`: the leader answered because its commit wait ran out. */
  const outcomes = new Map<number, (o: SliceOpResult | 'timeout', timedOut?: boolean) => void>();
  let nextValue = 1;
  let nextRequest = 1;
  const routerWaitMs = opts.commitTimeouts === true ? ROUTER_WAIT_MS_PAST_COMMIT_WAIT : REQUEST_TIMEOUT_MS;
  function answer(node: number, requestId: number, result: SliceOpResult, timedOut = false): void {
    deliverLater(node, ROUTER, () => outcomes.get(requestId)?.(result, timedOut));
  }
  function write(): void {
    if (!faulty) return;
    const w: Write = { key: Math.floor(random() * KEYS), value: nextValue++, submittedAt: clock.now };
    writes.set(w.value, w);
    attempt(w, 0);
  }
  const check: WriteCheck = { condition: { k: 'notExists', path: ['v'] }, returnOld: true, oldOnFailure: true };
  /** The write as the router sends it: on stores with its request id, the same on every copy (the router gives a
   * write its id once); the plain runs' replicas keep no ids (as a slice of one replica), so there it has none. */
  const putOf = (w: Write): PutOp => [SliceOp.Put, STORE_TABLE, STORE_SLICE, `${w.key}:${w.value}`, { v: w.value }, 16, check, opts.store === true ? [w.value % 3, w.value] : null];
  function attempt(w: Write, tries: number): void {
    const requestId = nextRequest++;
    const op = putOf(w);
    let settled = false;
    const settle = (o: SliceOpResult | 'timeout', timedOut = false) => {
      if (settled) return;
      settled = true;
      outcomes.delete(requestId);
      if (timedOut) report.timeoutAnswers++;
      if (o !== 'timeout' && o[0] === RESULT_OK) {
        w.ackedAt = clock.now;
        report.acked++;
        return clock.at(random() * 5, write);
      }
      // What the router reads of the error, its code and details (a node link makes a KeysliceError of a result; here
      // one a refused try, with its stack trace, made these runs measurably slower: they refuse many).
      const err = o === 'timeout' ? { code: 'Unavailable' as const, details: undefined } : { code: o[1], details: o.length === 4 ? o[3] : undefined };
      // The router's policy (router.ts): sent again if not applied (refused before it was ordered: to the leader the map
      // names by then), or after an unknown outcome if a copy changes nothing (a write with its request id: a copy
      // that was applied answers, not applies).
      if (mayResend(err, op, true) && tries < NOT_LEADER_RETRIES_MAX) {
        if (!wasNotApplied(err)) report.resent++;
        if (timedOut) report.resentAfterTimeout++;
        return clock.at(5 + random() * 20, () => attempt(w, tries + 1));
      }
      report.ambiguous++;
      clock.at(random() * 5, write);
    };
    outcomes.set(requestId, settle);
    clock.at(routerWaitMs, () => settle('timeout'));
    const leader = tailWritesTo ?? mapLeader;
    if (tailWritesTo !== null && tailWritesTo === handoverTail) laggingRequests.add(requestId);
    // The router's own refusal while its map names no leader (router.ts: no slice node for the slice yet): not applied.
    if (leader === null) return settle([RESULT_ERROR, 'Unavailable', `slice ${STORE_SLICE} has no leader in the router's map; retry`, { notApplied: true }]);
    deliverLater(ROUTER, leader, () => {
      const r = replicas[leader];
      if (r === null) return;
      if (opts.store === true) {
        // As a worker: execute against the store, then propose the effects (only while serving).
        // A worker's refusal of an op on a slice it does not serve (worker.ts refusalFor): its own answer, not applied.
        if (!r.serving) return answer(leader, requestId, notServing(STORE_SLICE, r.term));
        const store = stores[leader]!;
        const sr = sliceReplicas[leader]!;
        const put = sr.execute(op);
        if (put[0] !== RESULT_OK) fail(`write ${w.value}, sent again after an unknown outcome, was applied twice: ${put[1]}: ${put[2]}`);
        assert(put[1] === null, 'a first put of an item answers that there was no old one, and so does its copy');
        const effects = store.takeEffects();
        if (effects.length > 0) sr.propose(effects);
        // As worker.ts holds an answer: until the slice's last record is committed (a copy answered from memory
        // waits, like the first, for the record that applied it), at once if it already is.
        return holdWrite(leader, requestId, put);
      }
      const index = r.propose(encodeWrite(w.key, w.value));
      if (index === null) return answer(leader, requestId, notServing(STORE_SLICE, r.term));
      holdWrite(leader, requestId, [RESULT_OK, null]);
    });
  }
  for (let k = 0; k < WRITERS; k++) clock.at(random() * 10, write);

  // ---- readers, through a router whose copy of the map lags ----
  // Consistent reads go to the leader the router's copy of the map names; that copy comes from the coordinator over
  // the seeded network (cut in a partition), so a router may still send reads to a leader that was deposed without
  // knowing it (cut off from its followers and the coordinator, not from the router). Checked: a read never misses
  // a write acknowledged before it started. Not in store mode (its leader's store runs ahead of the commit point).
  // The readers draw from their own generator, so that the runs' faults and writes stay what their seeds made them.
  const readRandom = rng(opts.seed ^ 0x5eed);
  let routerLeader: ReplicaId | null = null;
  function toRouterLater(run: () => void): void {
    if (faulty && readRandom() < dropRate) return;
    clock.at(0.1 + readRandom() * maxDelayMs, run);
  }
  function read(): void {
    if (!faulty) return;
    const key = Math.floor(readRandom() * KEYS);
    const startedAt = clock.now;
    let settled = false;
    const settle = (values: number[] | null) => {
      if (settled) return;
      settled = true;
      if (values === null) report.readsRefused++;
      else {
        report.reads++;
        for (const w of writes.values()) {
          if (w.key === key && w.ackedAt !== undefined && w.ackedAt < startedAt && !values.includes(w.value)) {
            fail(`a consistent read of key ${key} started at ${startedAt.toFixed(1)} ms misses write ${w.value}, acknowledged at ${w.ackedAt.toFixed(1)} ms (a stale leader answered it)`);
          }
        }
      }
      clock.at(readRandom() * 10, read);
    };
    clock.at(REQUEST_TIMEOUT_MS, () => settle(null));
    const leader = routerLeader;
    if (leader === null) return settle(null);
    if (!reachable(ROUTER, leader)) return;
    const answer = (values: number[] | null) => {
      if (reachable(leader, ROUTER)) toRouterLater(() => settle(values));
    };
    toRouterLater(() => {
      if (!reachable(ROUTER, leader)) return;
      whenAwake(leader, () => {
        const r = replicas[leader];
        if (r === null || !r.serving) return answer(null);
        // Read now (as a worker executes it on arrival); answered once the leader holds its lease (worker.ts holds it).
        const values = [...(states[leader].get(key) ?? [])];
        if (opts.readsWithoutLease === true || r.leaseValid) return answer(values);
        r.renewLease();
        const life = lives[leader];
        const until = clock.now + LEASE_WAIT_MS;
        const wait = () =>
          whenAwake(leader, () => {
            if (replicas[leader] !== r || life !== lives[leader] || !r.isLeader) return answer(null);
            if (r.leaseValid) {
              report.readsAfterLeaseWait++;
              return answer(values);
            }
            if (clock.now >= until) return answer(null);
            clock.at(2, wait);
          });
        clock.at(2, wait);
      });
    });
  }
  if (opts.store !== true) for (let k = 0; k < READERS; k++) clock.at(readRandom() * 10, read);

  // ---- ticks and faults ----
  function tick(): void {
    // A coordinator that is down runs nothing: no failover, no map change, nothing to the router.
    if (!coordinatorDown && !holding()) coordinator.tick();
    if (carrierTerm > 0 && coordinator.electorateSettled) {
      report.carriersSettled++;
      carrierTerm = 0;
    }
    // As replica-leaders.ts recordSettled: the map drops the sets of a change once the failover counts it settled.
    if (!coordinatorDown) mapUnsettled = mapUnsettled.filter((u) => coordinator.sets.slice(1).some((o) => sameSet(o, u)));
    // The router's copy of the map follows the coordinator's, when the link between them carries it.
    if (!coordinatorDown && reachable(COORDINATOR, ROUTER)) {
      const named = mapLeader;
      toRouterLater(() => {
        if (reachable(COORDINATOR, ROUTER)) routerLeader = named;
      });
    }
    releaseDeparted();
    // A drain with a node killed for good goes on once the faults stop: the run converges on a set without it.
    if (!coordinatorDown && (faulty || opts.setChanges === 'drain-dead')) {
      drainStep();
      undoStep();
      removeStep();
      if (opts.setChanges === 'remove-down') removeDown();
      else if (faulty && random() < changePerSecond * (TICK_MS / 1000)) randomChange();
      // Its link back (ReplicaLeaders.linkUp): nothing is kept of its workers (OpenQuestions.forget), each of which took
      // its Assign before the link was ready in the product. Here it comes up whether the node is frozen or not
      // (keptRestarts freezes one as it starts): a product node's link is ready only after its Assigned, so a frozen one
      // stands for a node that froze (or whose worker stuck) right after it, which the product forgets all of too. A
      // link here is lost only with a crash (a cut keeps it open): flaps to a live process are played by
      // test/replica-map.test.ts and test/node-restart.test.ts, not here.
      if (silence !== null)
        for (const n of ids)
          if (linkLost.has(n) && up[n] && reachable(COORDINATOR, n)) {
            silence.forget(n);
            linkLost.delete(n);
          }
      // As Membership.pingLinks: every link pinged each turn; a node whose event loop runs (up, not frozen) and that the
      // coordinator reaches pongs (over its TCP connection: no drop, and the round trip within the tick).
      if (opts.setChanges === 'drain-silent') for (const n of ids) if (linkUp(n) && (frozenUntil[n] <= clock.now || (pongsUntil[n] ?? 0) > clock.now) && reachable(COORDINATOR, n)) heardAt[n] = clock.now;
      if (opts.setChanges === 'drain-silent') for (const n of ids) if (answersForStepNow(n)) unansweringSince.delete(n);
        else if (!unansweringSince.has(n)) unansweringSince.set(n, clock.now);
      // The coordinator asks again a node whose first open question is half a ping interval old (ReplicaLeaders.tick).
      if (silence !== null) for (const n of ids) if (linkUp(n)) silence.stale(n, clock.now, (slice) => slice === STORE_SLICE && coordinator.members.includes(n), () => send(COORDINATOR, n, { type: 'Ping', seq: 0 }), STORE_SLICE + 1);
    }
    for (const r of replicas) {
      if (r === null || frozenUntil[r.id] > clock.now) continue;
      r.tick();
      heldTicking = true;
      held[r.id]!.tick();
      heldTicking = false;
      const compact = random() < compactRate;
      // On stores, as a worker compacts (compactionStep): a leader's store runs ahead of the commit point, so a leader
      // holding uncommitted records takes its state and writes it once committed, at a later step or compaction.
      if (opts.store === true) compactionStep(r.id, compact);
      else if (compact) r.compact(r.appliedIndex);
    }
    // 'drain-silent' runs only the freezes they schedule (and the network's own faults), so that each tells its rule.
    if (faulty && opts.setChanges !== 'drain-silent') {
      const perTick = TICK_MS / 1000;
      if (random() < crashPerSecond * perTick) {
        // Half the time the leader: failover is what is under test.
        const first = mapLeader !== null && random() < 0.5 ? mapLeader : Math.floor(random() * nodeCount);
        crash(first);
        if (random() < pairCrashRate) {
          const second = Math.floor(random() * nodeCount);
          clock.at(random() * syncMsMax, () => crash(second));
        }
      }
      if (mapLeader !== null && up[mapLeader] && random() < freezePerSecond * perTick) {
        report.freezes++;
        frozenUntil[mapLeader] = Math.max(frozenUntil[mapLeader], clock.now + 100 + random() * 1_400);
      }
      if (opts.coordinatorRestarts === true && random() < perTick) restartCoordinator();
      if (random() < partitionPerSecond * perTick) {
        // A new partition: a random set of links cut (the coordinator and the router are endpoints too).
        cut.clear();
        const ends = [COORDINATOR, ROUTER, ...ids];
        for (let a = 0; a < ends.length; a++) for (let b = a + 1; b < ends.length; b++) if (random() < 0.3) cut.add(cutKey(ends[a], ends[b]));
      } else if (random() < 0.5 * perTick) cut.clear();
      if (mapLeader !== null && (isolated === null || clock.now >= isolated.until) && readRandom() < partitionPerSecond * perTick * 0.5) {
        // The leader cut off from the coordinator (and from every other replica), not from the router: it is deposed
        // without knowing it, while the router's copy of the map (its link to the coordinator cut too, at times)
        // still sends it reads. (Drawn from the readers' generator: the seed's other faults stay as they were.)
        // Cut off from the coordinator alone, its followers go on answering it (its lease runs on) until they promise
        // the new term: what the coordinator's wait for the lease is for.
        isolated = { node: mapLeader, until: clock.now + 200 + readRandom() * 1_000, replicasToo: readRandom() < 0.5, mapToo: readRandom() < 0.7 };
      }
    }
    clock.at(TICK_MS, tick);
  }
  clock.at(0, tick);
  clock.at(faultyMs, () => {
    faulty = false;
    cut.clear();
    isolated = null;
    tailWritesTo = handoverTail = null;
    scheduleCuts.clear();
  });

  // ---- a deposed leader's longer log of an older term (opts.deposedTail) ----
  /** Polls `ready` every `everyMs` while the faults last, for at most `forMs`; then `run` (not if the faults stopped). */
  function when(ready: () => boolean, everyMs: number, forMs: number, run: () => void): void {
    const until = clock.now + forMs;
    const poll = () => {
      if (!faulty) return;
      if (ready() || clock.now >= until) return run();
      clock.at(everyMs, poll);
    };
    poll();
  }
  /** One schedule (SimOptions.deposedTail), its draws from its own generator. Random faults go on meanwhile and may
   * spoil it (a partition that cuts B's followers, a crash of A): report.deposedTails counts those that reached B's kill. */
  function deposeWithTail(replace: boolean): void {
    const draw = rng(opts.seed ^ 0x7a11);
    const serving = (i: number | null) => i !== null && up[i] && replicas[i] !== null && replicas[i]!.serving && frozenUntil[i] <= clock.now;
    clock.at(100 + draw() * 300, () =>
      when(() => serving(coordinator.currentLeader), TICK_MS, 1_000, () => {
        const a = coordinator.currentLeader;
        if (!serving(a)) return;
        // A: cut off from the coordinator and its followers; the router too from the coordinator, so it keeps sending A writes.
        isolated = { node: a!, until: Infinity, replicasToo: true, mapToo: true };
        tailWritesTo = a;
        const tailUntil = clock.now + 400 + draw() * 600;
        const acks = 1 + Math.floor(draw() * 3);
        when(() => clock.now >= tailUntil && coordinator.currentLeader !== a && serving(coordinator.currentLeader), TICK_MS, 1_500, () => {
          const b = coordinator.currentLeader;
          if (!serving(b) || b === a || isolated?.node !== a) {
            // Spoilt (no other leader serves in time): A's link heals, the writers' router follows the map again.
            if (isolated?.node === a) isolated = null;
            tailWritesTo = null;
            return;
          }
          // B leads a newer term: the router's map follows it, and B commits a few writes.
          isolated = { ...isolated, mapToo: false };
          tailWritesTo = null;
          const ackedFrom = report.acked;
          when(() => report.acked >= ackedFrom + acks, 1, 500, () => {
            const kill = () => {
              if (isolated?.node === a) isolated = null;
              if (!up[b!]) return;
              report.deposedTails++;
              // B down long enough for an election among A and the followers (heartbeat timeout, a round, a lease).
              crash(b!, 500 + draw() * 400);
            };
            if (!replace) return kill();
            // A follower holding B's writes leaves the set for a spare node, B leading on, and B is killed before the
            // spare caught up: the newest term's records are outside the new set, A's longer tail inside it.
            when(() => published && coordinator.currentLeader === b && coordinator.electorateSettled, 1, 300, () => {
              const follower = set.find((n) => n !== a && n !== b);
              const spare = ids.find((n) => !set.includes(n) && up[n]);
              // (Only once the change before settled, as every change: the wait may have run out first.)
              if (coordinator.currentLeader !== b || !coordinator.electorateSettled || follower === undefined || spare === undefined) return kill();
              changeSet([...set.filter((n) => n !== follower), spare], `replace ${follower} (B ${b} leading, A ${a} cut off)`);
              kill();
            });
          });
        });
      }),
    );
  }
  if (opts.deposedTail !== undefined && opts.deposedTail !== false) deposeWithTail(opts.deposedTail === 'replace');

  // ---- stalled links (opts.stall) ----
  /** One direction of one link stalls from now for STALL_MS_MIN to STALL_MS_MAX, its ends drawn now (so that it may be
   * the leader's): a replica's link to the coordinator (its Prepared and Pong held), the coordinator's to a replica
   * (Prepare, Lead, LeadOn, Ping), or one between two replicas, half the time the leader's (its Appends and
   * keep-alives, or their answers). */
  function stallLink(): void {
    if (!faulty) return;
    const pick = <T>(xs: T[]) => xs[Math.floor(stallRandom() * xs.length)];
    const kind = stallRandom();
    const leader = coordinator.currentLeader;
    let from: number;
    let to: number;
    if (kind < 0.35) [from, to] = [pick(set), COORDINATOR];
    else if (kind < 0.5) [from, to] = [COORDINATOR, pick(set)];
    else {
      from = leader !== null && stallRandom() < 0.5 ? leader : pick(set);
      to = pick(set.filter((n) => n !== from));
      if (stallRandom() < 0.3) [from, to] = [to, from];
    }
    stallLinkNow(from, to, stallRandom() < 0.5, STALL_MS_MIN + stallRandom() * (STALL_MS_MAX - STALL_MS_MIN));
  }
  /** A replica's answer to a Prepare that arrives a term late (the story in replica-rules.test.ts, "counts only answers
   * to its own term's Prepare"), at R=3, from its own generator: while N leads, the coordinator loses its link to N and
   * elects (N answers); X's link to the coordinator stalls from then, so X's answer is held and N and Y elect; the new
   * leader L, cut off from Y, commits a few writes on itself and X; L is killed, and once the election after it is under
   * way (it needs X's answer: Y's alone is no majority) X's link delivers what it held, its answer to the older term
   * first. X's late answer says nothing of the records X took since, and Y holds none of them. */
  function lateAnswer(then: () => void): void {
    const draw = rng(opts.seed ^ 0x1a7e);
    const serving = (i: number | null) => i !== null && up[i] && replicas[i] !== null && replicas[i]!.serving && frozenUntil[i] <= clock.now;
    // N serves, and the other two follow its term.
    const ready = () => set.length === 3 && serving(coordinator.currentLeader) && coordinator.electorateSettled && set.every((i) => replicas[i] !== null && replicas[i]!.term === coordinator.currentTerm && frozenUntil[i] <= clock.now);
    clock.at(100 + draw() * 500, () =>
      when(ready, TICK_MS, 1_000, () => {
        const n = coordinator.currentLeader;
        if (!ready()) return then();
        const term = coordinator.currentTerm;
        const others = set.filter((i) => i !== n);
        const x = others[Math.floor(draw() * 2)];
        const stall = stallLinkNow(x, COORDINATOR, true, STALL_MS_MAX);
        const done = () => {
          release(stall);
          scheduleCuts.clear();
          then();
        };
        coordinator.suspectLeader();
        when(() => coordinator.currentTerm > term && serving(coordinator.currentLeader), TICK_MS, 1_000, () => {
          const l = coordinator.currentLeader;
          if (coordinator.currentTerm <= term || !serving(l) || l === x || !set.includes(x)) return done();
          const y = set.find((i) => i !== l && i !== x)!;
          scheduleCuts.add(cutKey(l!, y));
          const ackedUntil = report.acked + 1 + Math.floor(draw() * 3);
          when(() => report.acked >= ackedUntil, 1, 600, () => {
            scheduleCuts.clear();
            if (coordinator.currentLeader !== l || !up[l!]) return done();
            crash(l!, 400 + draw() * 400);
            when(() => (coordinator.currentLeader === null && reachable(y, COORDINATOR)) || !set.includes(x), 1, 600, () => {
              if (!stall.released) report.lateAnswers++;
              done();
            });
          });
        });
      }),
    );
  }
  /** An old leader's Appends that arrive after a new leader was chosen, at R=3, from its own generator: while L leads,
   * it is cut off from the coordinator and from Y while the writers' router, its map lagging, keeps sending it writes
   * (as deposedTail's); its link to X stalls, so X hears nothing of it; the coordinator elects among X and Y, and once X
   * promised the newer term, L's link delivers what it held: Appends of L's older term, which X must refuse (its
   * refusal tells L it was deposed). Then L's links heal. */
  function lateAppend(then: () => void): void {
    const draw = rng(opts.seed ^ 0xa99e);
    const serving = (i: number | null) => i !== null && up[i] && replicas[i] !== null && replicas[i]!.serving && frozenUntil[i] <= clock.now;
    const ready = () => set.length === 3 && serving(coordinator.currentLeader) && coordinator.electorateSettled && set.every((i) => replicas[i] !== null && replicas[i]!.term === coordinator.currentTerm && frozenUntil[i] <= clock.now);
    clock.at(50 + draw() * 200, () =>
      when(ready, TICK_MS, 1_000, () => {
        if (!ready()) return then();
        const l = coordinator.currentLeader!;
        const term = coordinator.currentTerm;
        const others = set.filter((i) => i !== l);
        const x = others[Math.floor(draw() * 2)];
        const y = others.find((i) => i !== x)!;
        scheduleCuts.add(cutKey(l, COORDINATOR));
        scheduleCuts.add(cutKey(l, y));
        tailWritesTo = l;
        const stall = stallLinkNow(l, x, draw() < 0.5, STALL_MS_MAX);
        const heal = () => {
          scheduleCuts.clear();
          if (tailWritesTo === l) tailWritesTo = null;
          then();
        };
        when(() => replicas[x] !== null && replicas[x]!.term > term, 1, 1_500, () => {
          if (replicas[x] === null || replicas[x]!.term <= term) {
            release(stall);
            return heal();
          }
          if (!stall.released) report.lateAppends++;
          release(stall);
          clock.at(200 + draw() * 400, heal);
        });
      }),
    );
  }
  /** SimOptions.commitTimeouts, from its own generator: one cut after another while the faults last, each once a
   * leader serves, for longer than the commit wait. Random faults go on meanwhile. */
  function noMajority(): void {
    const draw = rng(opts.seed ^ 0xc0317);
    const serving = (i: number | null) => i !== null && up[i] && replicas[i] !== null && replicas[i]!.serving && frozenUntil[i] <= clock.now;
    const isolatedNow = () => isolated !== null && clock.now < isolated.until;
    const next = () =>
      clock.at(50 + draw() * 300, () =>
        when(() => serving(coordinator.currentLeader) && !isolatedNow() && scheduleCuts.size === 0, TICK_MS, 1_000, () => {
          const l = coordinator.currentLeader;
          if (!serving(l) || isolatedNow() || scheduleCuts.size > 0) return next();
          report.noMajorityCuts++;
          const forMs = COMMIT_WAIT_MS + 100 + draw() * 700;
          if (draw() < 0.5) {
            // From its followers only: the coordinator still hears it lead (Pong), so nobody replaces it, and nothing
            // it takes commits until the cut heals; the router's resends come back to it.
            for (const n of set) if (n !== l) scheduleCuts.add(cutKey(l!, n));
            clock.at(forMs, () => {
              scheduleCuts.clear();
              next();
            });
            return;
          }
          // From the coordinator too, while the router's map lags (it keeps sending this leader writes): a new leader
          // is elected, and the old one learns it was deposed only once the cut heals.
          isolated = { node: l!, until: clock.now + forMs, replicasToo: true, mapToo: true };
          tailWritesTo = l;
          clock.at(forMs, () => {
            if (tailWritesTo === l) tailWritesTo = null;
            next();
          });
        }),
      );
    next();
  }
  if (opts.commitTimeouts === true) noMajority();
  if (opts.stall === true) {
    const count = 1 + Math.floor(stallRandom() * 3);
    for (let k = 0; k < count; k++) clock.at(stallRandom() * faultyMs * 0.8, stallLink);
    // Both schedules, one after the other (the late answer first: its schedule needs more of the faults' time).
    lateAnswer(() => lateAppend(() => {}));
  }

  /** Where the run stands, for a failure's message: the failover's sets, leader and term, and each replica's. */
  const stateNow = () =>
    `sets ${coordinator.sets.map((x) => x.join(',')).join(' and ')}, leader ${coordinator.currentLeader} at term ${coordinator.currentTerm}; ` +
    replicas.map((r, i) => (r === null ? `${i}: down` : `${i}: term ${r.term}${r.isLeader ? ' leading' : ''}, last ${r.lastIndex}, commit ${r.commitIndex}`)).join('; ');
  // ---- run: faults, then heal and converge ----
  const converged = () => {
    if (faulty || outcomes.size > 0 || up.some((u, i) => !u && !deadForGood.has(i)) || frozenUntil.some((t) => t > clock.now)) return false;
    const leader = coordinator.currentLeader;
    if (leader === null || !set.includes(leader) || replicas[leader] === null || !replicas[leader]!.isLeader) return false;
    const l = replicas[leader]!;
    return l.commitIndex === l.lastIndex && set.every((i) => deadForGood.has(i) || (replicas[i] !== null && replicas[i]!.commitIndex === l.commitIndex));
  };
  while (!converged()) {
    if (!clock.step()) fail('the event queue ran dry');
    if (clock.now > faultyMs + CONVERGE_MS_MAX) fail(`no leader with every replica caught up ${CONVERGE_MS_MAX} ms after the faults stopped (${stateNow()})`);
  }
  const runUntil = (t: number) => {
    while (clock.now < t) if (!clock.step()) fail('the event queue ran dry');
  };
  // At rest, a follower crashes (losing what it had not synced) and comes back: with no write to carry
  // the commit point, its leader's heartbeat must still bring it all (a leader skips the heartbeat of a
  // follower only once it said it holds the commit point durably).
  const restFrom = clock.now;
  crash(set.find((i) => i !== coordinator.currentLeader && up[i])!);
  while (!converged()) {
    if (!clock.step()) fail('the event queue ran dry');
    if (clock.now > restFrom + CONVERGE_MS_MAX) fail(`a follower that crashed at rest did not catch up within ${CONVERGE_MS_MAX} ms`);
  }
  // Then the leader falls silent: followers that hold every record and the commit point get nothing.
  runUntil(clock.now + 500);
  const sentBefore = leaderMessages;
  runUntil(clock.now + 1_000);
  if (leaderMessages > sentBefore) fail(`an idle leader sent ${leaderMessages - sentBefore} appends in 1 s to followers that hold everything`);
  // But its keep-alives keep them readable (eventually consistent reads) for longer than the staleness bound.
  runUntil(clock.now + REPLICA_READ_STALENESS_MS);
  for (const i of set) if (i !== coordinator.currentLeader && !deadForGood.has(i) && !replicas[i]!.readable) fail(`follower ${i} of an idle leader may not answer eventual reads (its keep-alives stopped)`);
  report.simMs = Math.round(clock.now);
  report.commitTimeouts += held.reduce((n, h) => n + (h?.timedOut ?? 0), 0);
  report.elections = elections + coordinator.elections;

  // ---- the checker ----
  if (opts.store === true) {
    const itemsOf = (i: number) => [...stores[i]!.entries()].filter((e) => e[0] === EFFECT_SET).map((e) => e[3] as string).sort();
    const leaderItems = itemsOf(coordinator.currentLeader!);
    // A replica killed for good and left in the set (no node was up to take its place) holds what it had: not checked.
    for (const i of set) {
      if (deadForGood.has(i)) continue;
      const mine = itemsOf(i);
      if (mine.join() !== leaderItems.join()) {
        const extra = mine.filter((k) => !leaderItems.includes(k));
        const missing = leaderItems.filter((k) => !mine.includes(k));
        fail(`replica ${i} holds other items than the leader once all caught up (${extra.length} more: ${extra.slice(0, 3).join(' ')}; ${missing.length} fewer: ${missing.slice(0, 3).join(' ')})`);
      }
    }
    const stored = new Set(leaderItems.map((k) => Number(k.split(':')[1])));
    for (const v of stored) if (!writes.has(v)) fail(`item of value ${v} is stored but no writer wrote it (a phantom)`);
    for (const w of writes.values()) if (w.ackedAt !== undefined && !stored.has(w.value)) fail(`acknowledged write ${w.value} (acknowledged at ${w.ackedAt.toFixed(1)} ms) is lost`);
    return report;
  }
  const final = states[coordinator.currentLeader!];
  const reference = encodeState(final);
  states.forEach((s, i) => {
    if (!set.includes(i) || deadForGood.has(i)) return;
    if (dec.decode(encodeState(s)) !== dec.decode(reference)) fail(`replica ${i} holds other values than the leader once all caught up`);
  });
  const position = new Map<number, number>();
  for (const [key, list] of final) {
    list.forEach((value, at) => {
      const w = writes.get(value);
      if (w === undefined) fail(`value ${value} is stored but no writer wrote it (a phantom)`);
      if (w.key !== key) fail(`value ${value} is stored under key ${key}, written to key ${w.key}`);
      if (position.has(value)) fail(`value ${value} is stored twice`);
      position.set(value, at);
    });
  }
  const acked = [...writes.values()].filter((w) => w.ackedAt !== undefined);
  for (const w of acked) if (!position.has(w.value)) fail(`acknowledged write ${w.value} (key ${w.key}, acknowledged at ${w.ackedAt!.toFixed(1)} ms) is lost`);
  // Acknowledged before another was submitted: stored before it (a linearizable append).
  for (const key of final.keys()) {
    const ofKey = acked.filter((w) => w.key === key).sort((a, b) => a.ackedAt! - b.ackedAt!);
    const later = [...writes.values()].filter((w) => w.key === key && position.has(w.value));
    for (const a of ofKey) {
      for (const b of later) if (b.submittedAt > a.ackedAt! && position.get(b.value)! < position.get(a.value)!) fail(`write ${b.value} was submitted after ${a.value} was acknowledged, and is stored before it`);
    }
  }
  return report;
}

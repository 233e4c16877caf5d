// The failover runner: one SliceFailover (failover.ts) per replicated slice, driven over the
// coordinator's node links (docs/replication.md). Messages to the nodes go as Replicate frames,
// every message for one node produced in one turn in one frame; answers come back on the same
// links. What a turn's elections decided (the terms they took, the leaders they chose) is written
// to the cluster map in one write at the end of the turn, BEFORE any Prepare or Lead of that turn
// leaves, so a term is never used twice and routers never see a leader the map does not hold.
//
// At start no slice has a known leader (a node leads nothing until told at a term), so every
// replicated slice is elected at once; the map's leader wins a tie. A leader that stops answering
// (heartbeat timeout), whose link is lost, or that answers it does not lead, is replaced.
//
// A replica set that changed (a node removed while down, a node joining to refill a set, a drain) is a
// new SliceFailover (SliceFailover.changedTo) whose elections, and the commits of the leaders they elect,
// need a majority of the new set AND of the old one (joint majorities) until the new leader's barrier is
// committed on both (Pong.commitTerm says so). A change that keeps the slice's leader in the set, answering,
// elects no one: the leader leads on at a new term (LeadOn), with the same joint majorities.
import { performance } from 'node:perf_hooks';
import { assert } from '../../shared/errors.js';
import { sparseLog } from '../../shared/sparse-log.js';
import { COORDINATOR_STALL_MS, FAILOVER_TICK_MS, FIRST_ANSWER_GRACE_PING_INTERVALS, LEADER_HANDOVER_WAIT_MS_MAX, MAP_SAVE_RETRY_MS_MAX, WORKER_SILENT_AFTER_PING_INTERVALS, OPEN_QUESTIONS_PER_WORKER_MAX, REPLICA_CATCH_UP_PROBE_MS, STUCK_WORKER_RETRY_MS_MAX, STUCK_WORKER_RETRY_MS_MIN, REPLICAS_LISTED_MAX, REPLICATION_FRAME_ENTRIES_MAX, SLICE_COUNT_MAX } from '../../shared/limits.js';
import type { AssignReplication, DecodedReplicateEntry } from '../../shared/protocol.js';
import { PING_NUMBERS, pingsOf, PONG_NUMBERS, unfoldPong, type ReplicaId, type ReplicationMessage } from '../../shared/replication-protocol.js';
import { slicesOfWorker, workerOf } from '../../shared/hashing.js';
import { backoffMs } from '../../shared/timeout.js';
import { TRACE_STALLS } from '../../shared/stall-trace.js';
import { savedOr, type ClusterMap, type Elected, type MapSaveError } from './cluster-map.js';
import { SaveBackoff } from './save-backoff.js';
import { ELECTION_REASONS, sameSet, SliceFailover, type ElectionReason, type FailoverTiming } from './failover.js';
import type { NodeLink } from './node-link.js';

interface Run {
  failover: SliceFailover;
  /** The replica set as the failover knows it, and as a sorted key to notice a change. */
  replicas: number[];
  key: string;
  /** When this failover last published a leader (0: not yet). */
  publishedAt: number;
  /** Whether the nodes were told (Assign) that its change settled: a replica that left the set is no longer listed. */
  settledSeen: boolean;
  /** A leadership handover (handOver): the election waits until `to` holds `from`'s last record, or `until`. */
  hold?: { from: number; to: number; since: number; until: number };
  /** The replica a handover went to, until its election named a leader (handoversGivenBack). */
  handedTo?: number;
}

/** What a replica's latest Pong said, and when it came. */
interface PongSeen {
  commitTerm: number;
  lastIndex: number;
  at: number;
}

const keyOf = (replicas: readonly number[]) => [...replicas].sort((a, b) => a - b).join(',');

/** A question the coordinator sent a node's worker (a Ping, or a Prepare of `term`) that no answer has followed. */
interface Question {
  slice: number;
  /** The Prepare's term; 0: a Ping. */
  term: number;
  /** Its number among the questions to its node, from 1 in the order sent (OpenQuestions.ask): a worker's questions
   * are in increasing order of it. A Ping's seq is it, modulo SEQS. */
  id: number;
  /** When it was sent (performance.now). */
  at: number;
}

/** What the coordinator keeps of one worker of a node (OpenQuestions): one record, so that what is kept of a worker
 * is made and dropped together. */
interface WorkerAsked {
  /** Its questions left unanswered, oldest first. */
  open: Question[];
  /** When it was last asked again (stale; -Infinity: not yet). */
  askedAgainAt: number;
  /** The slices of the Pings and Prepares it answered since the link came up that its node still replicates (stale
   * drops the others at each tick): it runs them, and answers a Ping of any of them. Empty: the worker is not known to
   * replicate a slice, and workerSilentFrom gives it the grace. All of them, not only the last: a worker that leads one
   * slice and last answered for another that then left its node (a move's old follower) still answers its leader's
   * Pings, and counted as unknown a frozen one kept its leaderships up to 2.25 s after its first question unanswered,
   * past the heartbeat timeout. */
  known: Set<number>;
  /** When the first question it left unanswered since its last answer was sent (undefined: none, or let go for a try).
   * Its open questions' first time while it owes some; kept where stale drops every one of them (their slices left its
   * node) after the first had gone unanswered WORKER_SILENT_AFTER_PING_INTERVALS ping intervals or more: a stuck worker
   * dropped nothing, it took nothing, and it has answered nothing since. Before it was kept, the undo of a step onto a
   * stuck worker settled, its questions of the undone slice were dropped, its node owed nothing, and rebalancing moved
   * the slice straight back onto it (undone again ~10 s later, without end). Placement asks it (workerSilentFrom:
   * Membership.answersForStep of the slice's worker); only an answer of this worker clears it (answered). */
  unansweredSince: number | undefined;
  /** Where unansweredSince is kept and its node replicates no slice of this worker (nothing to ask it by, so it cannot
   * answer): when it is let go, so that placement may try the worker again (a new replica's step asks it); and how many
   * times it was let go since the worker last answered (each try that goes unanswered waits twice as long). */
  tryAt: number | undefined;
  tries: number;
}

/** A new worker's record: nothing open, nothing kept (ask). */
function workerAsked(): WorkerAsked {
  return { open: [], askedAgainAt: -Infinity, known: new Set(), unansweredSince: undefined, tryAt: undefined, tries: 0 };
}

/** A Ping's seq is a msgpack uint32 (a whole number >= 0): its question's id modulo this. */
const SEQS = 2 ** 32;

/** What the coordinator asked each node that it has not answered, per worker there in the order sent (a Ping or a
 * Prepare of a slice), so that a worker counts as silent from the first question it left unanswered (failover.ts
 * heardLately of a slice's replica: workerSilentFrom) and only an answer to a question clears it: a Pong answers the Ping of its slice and seq (a Pongs,
 * one per slice; seqs given here, sent), a Prepared a Prepare of its slice and term, a Refused a Prepare of its slice whose term is at most the one
 * the replica says it promised (it took that Prepare). Other frames, and answers to questions of other workers,
 * clear nothing. A worker takes the coordinator's messages in the order sent (its node hands it a turn's at once, in
 * order), so an answer also clears the questions sent to that worker before the one it answers: the worker took
 * them, and answered them (a Prepared waits for its sync), or dropped them for a slice it does not replicate (not
 * yet: its Assign comes with a batch task, which a Replicate can overtake; or no longer). A worker not known to
 * replicate any slice its node still replicates (none of its answers since the link came up is of one) may be dropping
 * every question for want of its assignment, the ones asked again included: its silence counts from its first open
 * question FIRST_ANSWER_GRACE_PING_INTERVALS later (workerSilentFrom). */
export class OpenQuestions {
  /** node -> what is kept of each of its workers, indexed by worker (workerOf; an array, so that stale goes through
   * them in worker order); and the last id given one (ask), kept past forget so that a late Pong of a question
   * forgotten answers no newer one. */
  private readonly byNode = new Map<number, { workers: WorkerAsked[]; lastId: number }>();
  /** How much later a worker not known to replicate a slice its node still does counts from its first open question. */
  private readonly firstAnswerGraceMs: number;

  constructor(
    private readonly workerCount: (node: number) => number,
    /** The coordinator's ping interval (FailoverTiming): a worker's first open question is asked again each half of it
     * (stale); the grace of a worker not known to replicate a slice is counted in it (workerSilentFrom). */
    private readonly pingIntervalMs: number,
    /** The wait before a stuck worker nothing can ask by is tried again, doubling per try it leaves unanswered (stale):
     * STUCK_WORKER_RETRY_MS_MIN..MAX, which the simulation scales with its heartbeat bound as it scales the others. */
    private readonly stuckRetryMs: { min: number; max: number } = { min: STUCK_WORKER_RETRY_MS_MIN, max: STUCK_WORKER_RETRY_MS_MAX },
  ) {
    // A ping interval that is not a positive number (NaN) would make workerSilentFrom's times NaN, and its bound fire.
    assert(pingIntervalMs > 0 && Number.isFinite(pingIntervalMs), `the ping interval is a positive number of ms, not ${pingIntervalMs}`);
    this.firstAnswerGraceMs = FIRST_ANSWER_GRACE_PING_INTERVALS * pingIntervalMs;
  }

  private workerOf(node: number, slice: number): number {
    const n = this.workerCount(node);
    return n > 0 ? workerOf(slice, n) : 0;
  }

  /** A Replicate frame's entries go to `node` at `at`: its Pings and Prepares (a Pings folds several) are asked. Each
   * Ping is given its own seq here (its question's id), whatever its sender put (nothing else reads a Pong's), so
   * that its Pong answers it and no other: a worker drops a Ping of a slice it does not replicate (yet), and a Pong
   * matched to such an earlier Ping of its slice left the one it answered open, counted as unanswered (a follower's
   * probes and the re-asks all said seq 0: each re-ask's Pong then cleared the one before, and the last stood open
   * and was asked again, without end). */
  sent(node: number, entries: readonly DecodedReplicateEntry[], at: number): void {
    for (const [slice, m] of entries) {
      if (m.type === 'Pings') {
        for (let i = 0; i < m.slices.length; i += PING_NUMBERS) m.slices[i + 1] = this.ask(node, m.slices[i], 0, at).id % SEQS;
      } else if (m.type === 'Ping') m.seq = this.ask(node, slice, 0, at).id % SEQS;
      else if (m.type === 'Prepare') this.ask(node, slice, m.term, at);
    }
  }

  /** What is kept of `node`, made empty where nothing is yet. */
  private of(node: number) {
    let asked = this.byNode.get(node);
    if (asked === undefined) this.byNode.set(node, (asked = { workers: [], lastId: 0 }));
    return asked;
  }

  private ask(node: number, slice: number, term: number, at: number): Question {
    const asked = this.of(node);
    const worker = (asked.workers[this.workerOf(node, slice)] ??= workerAsked());
    const q = worker.open;
    // Kept (stale) where it owes nothing more: still from its first question unanswered, a new one asks it again.
    worker.unansweredSince ??= at;
    worker.tryAt = undefined;
    if (q.length >= OPEN_QUESTIONS_PER_WORKER_MAX) {
      // A worker that answers nothing (stuck, its link open) is asked on: bounded memory. The oldest stays (its time
      // decides silence, and its answer clears it alone); the newer half goes, folded into the question after it,
      // which takes the first one's time: in order, its answer (or a later one) says the worker took them all, and
      // until then the node's silence counts from the first. An answer to a folded-away one clears nothing by itself.
      const half = OPEN_QUESTIONS_PER_WORKER_MAX >> 1;
      q[half + 1].at = q[1].at;
      q.splice(1, half);
    }
    const question = { slice, term, id: ++asked.lastId, at };
    q.push(question);
    return question;
  }

  /** How many questions `node` owes (its workers' together). */
  openCount(node: number): number {
    let n = 0;
    for (const w of this.byNode.get(node)?.workers ?? []) n += w?.open.length ?? 0;
    return n;
  }

  /** Answers from `node` (one frame's entries, a Pongs one per slice): each clears the question it answers and those
   * sent to its worker before it. */
  answered(node: number, entries: readonly DecodedReplicateEntry[]): void {
    const asked = this.byNode.get(node);
    if (asked === undefined) return;
    const workers = asked.workers;
    // Per worker, how many of its questions (from the oldest) this frame answered: removed once, after the frame.
    const cut = new Map<number, number>();
    // A Pong: its Ping found by id (the seq the Ping was given) among its worker's questions not yet answered in this
    // frame (an answer to one before them clears nothing more), a binary search, so that a frame of k Pongs costs
    // O(k log n) whatever else is open (a scan per Pong, past a Refused that cleared more, cost k * n).
    const pong = (slice: number, seq: number) => {
      const w = this.workerOf(node, slice);
      const worker = workers[w];
      const q = worker?.open;
      const from = cut.get(w) ?? 0;
      if (q === undefined || from >= q.length) return;
      // The id of `seq` at or after the first open one's (ids of a worker's open questions span far fewer than SEQS).
      const id = q[from].id + ((((seq - q[from].id) % SEQS) + SEQS) % SEQS);
      // Mostly the next one (answers come in the order asked).
      let lo = q[from].id === id ? from : from + 1;
      let hi = lo === from ? from : q.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (q[mid].id < id) lo = mid + 1;
        else hi = mid;
      }
      if (lo < q.length && q[lo].id === id && q[lo].slice === slice && q[lo].term === 0) {
        cut.set(w, lo + 1);
        OpenQuestions.knows(worker, slice);
      }
    };
    // A Prepare's answer: the first open Prepare of its slice that it answers (one a replica an election: few). The
    // worker took that Prepare, so it replicates the slice, and answers a Ping of it (stale) as it would after a Pong.
    const prepare = (slice: number, answers: (term: number) => boolean) => {
      const w = this.workerOf(node, slice);
      const worker = workers[w];
      if (worker === undefined) return;
      const q = worker.open;
      for (let i = cut.get(w) ?? 0; i < q.length; i++) {
        if (q[i].slice === slice && q[i].term > 0 && answers(q[i].term)) {
          cut.set(w, i + 1);
          OpenQuestions.knows(worker, slice);
          return;
        }
      }
    };
    for (const [slice, m] of entries) {
      if (m.type === 'Pongs') {
        for (let i = 0; i < m.slices.length; i += PONG_NUMBERS) pong(m.slices[i], m.slices[i + 1]);
      } else if (m.type === 'Pong') pong(slice, m.seq);
      else if (m.type === 'Prepared') prepare(slice, (term) => term === m.term);
      else if (m.type === 'Refused') prepare(slice, (term) => term <= m.term);
    }
    for (const [w, n] of cut) {
      const worker = workers[w];
      worker.open.splice(0, n);
      // It answered: it runs. Its silence counts from its next question left open, if any.
      worker.unansweredSince = worker.open[0]?.at;
      worker.tryAt = undefined;
      worker.tries = 0;
    }
  }

  /** `worker` answered a question of `slice`: it replicates it. */
  private static knows(worker: WorkerAsked, slice: number): void {
    worker.known.add(slice);
  }

  /** When the first question `node` left unanswered was sent (undefined: it owes none). */
  firstAsked(node: number): number | undefined {
    let first: number | undefined;
    for (const w of this.byNode.get(node)?.workers ?? []) if (w !== undefined && w.open.length > 0 && !(w.open[0].at >= (first ?? Infinity))) first = w.open[0].at;
    return first;
  }

  /** `node`'s link went down or came up (ReplicaLeaders.linkLost, linkUp), or the node was removed: what was asked
   * before is not its to answer, and all that was kept of its workers goes, a stuck worker's time and tries with it.
   * While the link is down nothing reads them (workerSilenceMs: Infinity). And a coordinator's link is up (ready) only
   * once its node answered Assigned, which a slice node sends once every worker took its part of the Assign
   * (slice-worker/main.ts assign), on the thread that answers its Pings: at each link-up every worker of the node ran
   * since the link came back, whether the node restarted or only its link flapped, so none is known stuck (a worker
   * still stuck holds the link 'assigning': test/node-restart.test.ts). Kept across a flap to the same process (node
   * protocol 29's incarnation), a worker that had run held its stuck time, and placement did not try it for up to
   * STUCK_WORKER_RETRY_MS_MAX where nothing could ask it. Taking its Assign says that the worker runs, as an answer
   * does (answered drops its tries too), so a worker that sticks again after each flap is tried once per flap, as one
   * that sticks again after each answer is tried once per answer (a link flaps when its connection is lost: the
   * coordinator does not close one for a worker's silence). */
  forget(node: number): void {
    const asked = this.byNode.get(node);
    if (asked !== undefined) asked.workers = [];
  }

  /** Each worker of `node` whose first question left unanswered was sent half a ping interval before `now` or earlier
   * is asked again, each half ping interval as long as that question stays open: `again` is handed a slice to Ping,
   * once a worker per half interval however many it owes (bounded). The slice is one the worker answered for that the node
   * still replicates (`known`, kept to `stillAsked`), so that a worker that runs answers it whether or not the assignment of the slice it dropped is there
   * yet; else the first open question's own (and the worker is not known to replicate a slice: workerSilentFrom gives it the
   * grace). Its answer clears every question before it.
   * Asked again only once, and by the dropped question's slice, a worker whose assignment was still not there dropped
   * that Ping too, and with nothing later asked of it (a follower is not pinged once its change settled) its node
   * counted as silent without end (docs/replication.md, "A node that answers"). Asking again moves no question's time:
   * a frozen worker counts as silent from its first unanswered question (workerSilentFrom), as before. Questions of a slice
   * the node no longer replicates are dropped from the front (it dropped them, and nothing later may follow on that
   * worker), and its unansweredSince with them, unless it had answered nothing for WORKER_SILENT_AFTER_PING_INTERVALS ping
   * intervals then (stuck): kept, it is asked again as long as it stays, by a slice its node replicates on it (`known`,
   * else the first of the `sliceCount` slices of its worker that `stillAsked`), and is cleared by its answer alone; with
   * none to ask it by, it is let go after STUCK_WORKER_RETRY_MS_MIN (doubling per try left unanswered) so that
   * placement may try the worker again. */
  stale(node: number, now: number, stillAsked: (slice: number) => boolean, again: (slice: number) => void, sliceCount = 0): void {
    const asked = this.byNode.get(node);
    if (asked === undefined) return;
    const olderThan = now - this.pingIntervalMs / 2;
    const workers = this.workerCount(node);
    asked.workers.forEach((worker, w) => {
      // (One look per slice the worker answered for, at most the slices it holds: a Set's delete while iterating is safe.)
      for (const slice of worker.known) if (!stillAsked(slice)) worker.known.delete(slice);
      const q = worker.open;
      let dropped = false;
      while (q.length > 0 && !stillAsked(q[0].slice)) {
        q.shift();
        dropped = true;
      }
      // A worker drops a question of a slice its node no longer replicates, so a drop alone says nothing of it; one that
      // had answered nothing for WORKER_SILENT_AFTER_PING_INTERVALS ping intervals when its questions went is stuck, and
      // keeps its time (unansweredSince).
      if (dropped && !this.stuck(worker, now)) worker.unansweredSince = q[0]?.at;
      if (worker.unansweredSince === undefined || worker.askedAgainAt > olderThan || (q.length > 0 && q[0].at > olderThan)) return;
      worker.askedAgainAt = now;
      // Any slice it is known by will do: each is still the node's, and slices map to workers one way (workerOf). Else
      // its first open question's; else (its time kept, nothing open) any slice of this worker its node replicates.
      const by = worker.known.values().next().value ?? q[0]?.slice ?? this.sliceOfWorker(w, workers, sliceCount, stillAsked);
      if (by !== undefined) return again(by);
      // Nothing to ask it by: it cannot answer, so placement is let try it (the step of a new replica asks it), after a
      // wait that doubles at each try it leaves unanswered (a stuck worker: one try each STUCK_WORKER_RETRY_MS_MAX at most).
      if (worker.tryAt === undefined) worker.tryAt = now + backoffMs(worker.tries, this.stuckRetryMs.min, this.stuckRetryMs.max);
      else if (now >= worker.tryAt) {
        worker.unansweredSince = undefined;
        worker.tryAt = undefined;
        worker.tries++;
      }
    });
  }

  /** Whether `worker` has answered nothing for WORKER_SILENT_AFTER_PING_INTERVALS ping intervals at `now` (as an election
   * counts a node silent: answersWhenSilent): stuck, so its unansweredSince outlives the drop of its questions (stale). */
  private stuck(worker: WorkerAsked, now: number): boolean {
    return worker.unansweredSince !== undefined && !answersWhenSilent(now - worker.unansweredSince, this.pingIntervalMs);
  }

  /** A slice of worker `w` (of `workers`; 0: not known yet, one) among the first `sliceCount` that `replicated` says its
   * node replicates (slicesOfWorker), or undefined. */
  private sliceOfWorker(w: number, workers: number, sliceCount: number, replicated: (slice: number) => boolean): number | undefined {
    for (const slice of slicesOfWorker(w, Math.max(1, workers), sliceCount)) if (replicated(slice)) return slice;
    return undefined;
  }

  /** From when the worker of `node` that runs `slice` (workerOf) counts as answering nothing (undefined: it owes no
   * answer): its unansweredSince (kept across the drop of a stuck worker's questions: stale), FIRST_ANSWER_GRACE ping
   * intervals later where `grace` and it is not known to replicate a slice its node still replicates. The measure of every decision about one slice: placement's and a step's
   * (Membership.answersForStep), an election's (ReplicaLeaders.heardFrom of the slice's failover: its leader's
   * allowance, its handover target's and a carrier's wait, a slow replica's), and the map's leader until it elects
   * (ReplicaLeaders.answers, without the grace). Only the worker that runs the slice answers its Pings and
   * Prepares, so a node with one worker stuck is slow or silent for that worker's slices alone; counted per node
   * (a node-wide measure, its workers' first open questions together, since removed: nothing decided by it) it cost a
   * slow leader of another worker there its allowance. A worker not known to replicate a slice may drop every question,
   * those asked again included, until its assignment reaches it: counted from its first one, its replicas were silent
   * from 750 ms until it answered one asked after its assignment came (docs/replication.md, "A node that answers"), hence
   * the grace; one that answered one stays counted from its first open question (asked again by the slice it answered:
   * stale), so a frozen one is silent on time. */
  workerSilentFrom(node: number, slice: number, grace = true): number | undefined {
    const worker = this.byNode.get(node)?.workers[this.workerOf(node, slice)];
    // A worker that owes an answer has answered nothing since its first open question at least.
    assert(worker === undefined || worker.open.length === 0 || (worker.unansweredSince !== undefined && worker.unansweredSince <= worker.open[0].at), `node ${node}: a worker with open questions from ${worker?.open[0]?.at} counts as answering nothing from ${worker?.unansweredSince}`);
    if (worker?.unansweredSince === undefined) return undefined;
    // With the assertion above, never later than its first open question and the grace allow: the grace only delays
    // silence, by FIRST_ANSWER_GRACE_PING_INTERVALS at most, and a stuck worker's time kept across drops makes it sooner.
    return grace && worker.known.size === 0 ? worker.unansweredSince + this.firstAnswerGraceMs : worker.unansweredSince;
  }
}

/** How long the worker of `node` that runs `slice` has answered nothing at `now` (ms), by what it was asked
 * (`questions`: OpenQuestions.workerSilentFrom, its time kept across the drop of a stuck worker's questions, with the
 * grace of a worker not known to replicate a slice where `grace`); 0 where it owes none; Infinity where its node's link
 * is not up (`linkUp`). ReplicaLeaders.workerSilentMs on performance.now()'s clock (Membership.answersForStep of a
 * slice); the simulation's drain steps (test/replication-sim.ts, 'drain-silent') on its seeded clock. */
export function workerSilenceMs(questions: OpenQuestions, node: number, slice: number, linkUp: boolean, now: number, grace = true): number {
  return linkUp ? now - (questions.workerSilentFrom(node, slice, grace) ?? now) : Infinity;
}

/** When the silence of `node`'s worker of `slice` counts from at `now` (ReplicaLeaders.heardFrom, the slice's failover's
 * host.heardFrom: heardLately and answerMayCome in failover.ts): now less its silence (workerSilenceMs, with the
 * election's grace), -Infinity where its link is not up (`linkUp`). Per worker, not per node: only liveness hangs on it
 * (who is elected, how soon a leader is replaced), not safety, which terms give (a deposed leader's term is fenced by
 * the promises of a newer one) and leases (a leader's runs from its own answers, and an election waits it out by what
 * the replicas say: failover.ts leasesOut), whatever the coordinator counts as silent. ReplicaLeaders on
 * performance.now()'s clock; the simulation's failover (test/replication-sim.ts, 'drain-silent') on its seeded clock,
 * over its seeded network. */
export function heardFromBy(questions: OpenQuestions, node: number, slice: number, linkUp: boolean, now: number): number {
  return now - workerSilenceMs(questions, node, slice, linkUp, now);
}

/** Whether a node silent `silentMs` answers: less than WORKER_SILENT_AFTER_PING_INTERVALS ping intervals, as an election
 * counts it (failover.ts heardLately; ReplicaLeaders.answers, and the simulation's remove). */
export function answersWhenSilent(silentMs: number, pingIntervalMs: number): boolean {
  return silentMs < WORKER_SILENT_AFTER_PING_INTERVALS * pingIntervalMs;
}

/** A turn's messages to one node as its Replicate frame's entries: the Pings folded into one Pings per worker there
 * (node protocol 27; the worker unfolds them, each slice's Ping to its replica), after the other messages, which
 * keep their order. Last, so that a Ping is answered after whatever else the turn sent its slice, as a Ping sent a
 * moment later would be; a Pong says only what the replica holds when it answers. `workers`: the node's worker
 * count (its Hello); 0 before it (the link sends nothing then). */
export function foldPings(entries: readonly DecodedReplicateEntry[], workers: number): DecodedReplicateEntry[] {
  const out: DecodedReplicateEntry[] = [];
  const pings = new Map<number, [number, Extract<ReplicationMessage, { type: 'Ping' }>][]>();
  for (const e of entries) {
    const [slice, m] = e;
    if (m.type !== 'Ping' || !(workers > 0)) {
      out.push(e);
      continue;
    }
    const w = workerOf(slice, workers);
    let list = pings.get(w);
    if (list === undefined) pings.set(w, (list = []));
    list.push([slice, m]);
  }
  for (const list of pings.values()) {
    for (let i = 0; i < list.length; i += SLICE_COUNT_MAX) {
      const part = list.slice(i, i + SLICE_COUNT_MAX);
      out.push([part[0][0], pingsOf(part)]);
    }
  }
  return out;
}

/** What Assign's replication field says to node `node` (null: none of its slices has followers). A slice's set is
 * the map's, followed by the replicas of the older sets of a change that has not settled (`membersOf`: every
 * replica of every set of the change): a replica that left the set keeps its replica of the slice, and answers
 * for it, until the change settled, since the old set's majority may need it (a node of the old set killed
 * meanwhile would otherwise leave that set without a majority that answers). */
export function assignReplication(map: ClusterMap, node: number, membersOf: (slice: number) => readonly number[]): AssignReplication | null {
  const replicas: [number, number[]][] = [];
  const peers = new Set<number>();
  for (let s = 0; s < map.sliceCount; s++) {
    const inMap = map.replicasOf(s);
    const set = [...inMap, ...membersOf(s).filter((n) => !inMap.includes(n) && map.statusOf(n) !== 'removed')];
    if (set.length <= 1 || !set.includes(node)) continue;
    // The node refuses a longer list (protocol.ts): R + 1 while a drain's or move's step runs, R + 2 across an undone
    // drain step or a drain started during a move (limits.ts says why no change lists more).
    assert(set.length <= REPLICAS_LISTED_MAX, `slice ${s} lists ${set.length} replicas (${set.join(',')}), over ${REPLICAS_LISTED_MAX}`);
    replicas.push([s, set]);
    for (const n of set) if (n !== node) peers.add(n);
  }
  if (replicas.length === 0) return null;
  return { self: node, peers: [...peers].sort((a, b) => a - b).map((n) => [n, map.nodes[n]]), replicas };
}

/** A handover's catch-up rule (ReplicaLeaders.handOver; the simulation's handovers decide by it too): the new leader
 * `to` holds the old leader `from`'s last record, as both said (their latest Pongs, `at` on one clock) after the
 * handover began at `since`, the old one's answer at least `tickMs` later, once writes that were on their way
 * reached it. */
export function caughtUpForHandover(from: { lastIndex: number; at: number } | undefined, to: { lastIndex: number; at: number } | undefined, since: number, tickMs: number): boolean {
  return from !== undefined && to !== undefined && from.at >= since + tickMs && to.at >= from.at && to.lastIndex >= from.lastIndex;
}

export class ReplicaLeaders {
  private readonly runs = new Map<number, Run>();
  private outbox = new Map<number, DecodedReplicateEntry[]>();
  private used = new Map<number, number>();
  private elected = new Map<number, Elected>();
  private flushQueued = false;
  private lastStartLogAt = -Infinity;
  /** When the map's next save may be tried while saves fail in a row (a full or broken disk): the redo of the turns
   * they lost (SliceFailover.unrecorded), recordSettled, handOver and Membership's own map changes (mapSaveDue) wait for
   * it, so a failing disk costs a save, and each such slice a term and an `unrecorded` election, per
   * MAP_SAVE_RETRY_MS_MAX at most rather than per tick. The map tells it of every write (ClusterMap.onSave). */
  private readonly saves: SaveBackoff;
  /** recordSettled's line that the map could not be written (at most once a second: it tries again after the backoff). */
  private readonly logUnrecordedSettled = sparseLog('such', (line) => this.log(line));
  /** flush's line that a turn's elections could not be recorded (at most once a second: their failovers try again as
   * the save backoff allows, at first each tick). */
  private readonly logUnrecordedElections = sparseLog('such', (line) => this.log(line));
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  /** Elections started since this process started, by why (status; /metrics keyslice_elections_total). */
  readonly electionsBy = Object.fromEntries(Object.keys(ELECTION_REASONS).map((r) => [r, 0])) as Record<ElectionReason, number>;
  get elections(): number {
    return Object.values(this.electionsBy).reduce((a, b) => a + b, 0);
  }
  /** slice -> node -> what its latest Pong said; when each was last asked (probe). Both on performance.now()'s clock, as
   * every age and deadline here (a Pong's age, a handover's hold, a tick's lateness): a wall clock stepped (NTP, a VM
   * resumed) made a fresh Pong too old or an old one fresh, and ended a hold early or late. */
  private readonly pongs = new Map<number, Map<number, PongSeen>>();
  /** node -> slice -> the catch-up probe (holdsTerm's Ping): when it was last sent, and whether its Pong has not come
   * yet (that Pong is progress: onProgress). By node, so that a removed node's go at once with its Pongs (sync): its
   * index comes back with its url (ClusterMap.addNode), and what the process before said is not the new one's. */
  private readonly probes = new Map<number, Map<number, { at: number; out: boolean }>>();
  /** Something a membership turn's step waits for happened: a replica-set change settled, leaders were elected, a
   * replica answered a catch-up probe. Membership runs its placement and replica-move steps then (turnSoon), rather
   * than at its next turn, up to REBALANCE_INTERVAL_MS later: each move's catch-up cost a turn or two of waiting. */
  onProgress: () => void = () => {};
  /** How old a replica's answer may be for a handover to it (a node that stopped answering is not chosen). */
  get probeIntervalMs(): number {
    return this.timing.pingIntervalMs * 2;
  }
  private readonly tickMs: number;
  private lastTickAt = performance.now();
  /** Whether the last tick came late and looked at no timeout (tick). */
  private skippedLate = false;
  /** What each node was asked (a Ping or Prepare) and has not answered: its silence counts from the first (a node that
   * answers is slow, not gone: failover.ts heardLately). */
  private readonly questions: OpenQuestions;
  /** Leadership handovers done since this process started, for status; of them, those whose election named another
   * replica (the old leader, further than the one handed to). */
  handovers = 0;
  handoversGivenBack = 0;
  /** Replica-set changes whose leader led on (LeadOn) rather than being elected again, since this process started. */
  leadOns = 0;

  constructor(
    private readonly map: ClusterMap,
    /** links[i] talks to map.nodes[i] (Membership's array: it grows as nodes join). */
    private readonly links: readonly NodeLink[],
    private readonly timing: FailoverTiming,
    private readonly log: (line: string) => void,
    /** Owners changed (new epoch): every node gets its assignment again. */
    private readonly reassignAll: () => void,
  ) {
    this.tickMs = Math.min(FAILOVER_TICK_MS, timing.pingIntervalMs);
    this.saves = new SaveBackoff(this.tickMs);
    // Every write of the map counts, whoever made it: an operator's change, Membership's, ours.
    map.onSave = (ok) => (ok ? this.saves.saved() : this.saves.failed(performance.now()));
    this.questions = new OpenQuestions((node) => this.links[node]?.workerCount ?? 0, timing.pingIntervalMs);
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
    this.sync();
  }

  /** The slice's leader as the failover knows it (null: an election is under way or none ran yet). */
  leaderOf(slice: number): number | null {
    return this.runs.get(slice)?.failover.currentLeader ?? null;
  }

  /** A summary for status: replicated slices, those whose leader commits (led), those whose leader leads but cannot
   * commit yet (unsettledLed), elections run. */
  summary(): { replicated: number; led: number; unsettledLed: number; ledBy: number[]; elections: number; termMin: number; termMax: number } {
    const ledBy = this.map.nodes.map(() => 0);
    let led = 0;
    let unsettledLed = 0;
    let termMin = Infinity;
    let termMax = 0;
    for (const [slice, run] of this.runs) {
      const leader = run.failover.currentLeader;
      if (leader !== null && run.publishedAt > 0) {
        // A leader of a change that has not settled commits nothing, not even its own barrier, until a majority of
        // every set of the change holds it (its first commit is what settles the change): after a forced removal with
        // the old set's other replicas down it leads on, and takes no write, for as long as they stay down. Counted
        // apart, so that "led" means a slice that takes writes (status, and what waits for every slice to be led).
        if (!run.failover.electorateSettled) {
          unsettledLed++;
          continue;
        }
        led++;
        ledBy[leader]++;
      }
      termMin = Math.min(termMin, this.map.termOf(slice));
      termMax = Math.max(termMax, this.map.termOf(slice));
    }
    return { replicated: this.runs.size, led, unsettledLed, ledBy, elections: this.elections, termMin: termMin === Infinity ? 0 : termMin, termMax };
  }

  /** The map's change count (ClusterMap.changes) when sync() last followed it: every run's key is then its slice's
   * set's in the map, so sync() has nothing to do (it runs every tick, and a key is a sort and a join per slice:
   * bench/README.md, "Idle cluster") and current() need not compare keys until the map changes again. */
  private syncedChanges = -1;

  /** Follows the map's replica sets: a failover for each replicated slice, a new one when its set changed. */
  sync(): void {
    if (this.syncedChanges === this.map.changes) return;
    // Taken before the loop: a change made while it runs (none is: the failovers only queue what they decide) is
    // followed at the next call.
    this.syncedChanges = this.map.changes;
    let changed = false;
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      const replicas = this.map.replicasOf(slice);
      const run = this.runs.get(slice);
      if (replicas.length <= 1) {
        this.runs.delete(slice);
        continue;
      }
      const key = keyOf(replicas);
      if (run !== undefined && run.key === key) continue;
      changed = true;
      // A changed set: joint majorities of the new set and the old one (and of older ones not settled) until it settles.
      const failover =
        run === undefined
          ? // At start (or once a slice has replicas again): from what the map persisted, a change not settled included.
            SliceFailover.atStart({ replicas, termUsed: this.map.lastTermUsed(slice), unsettled: this.map.unsettledOf(slice) }, this.timing, this.host(slice))
          : run.failover.changedTo(replicas, this.map.lastTermUsed(slice), this.host(slice));
      const leadsOn = failover.currentLeader;
      if (run !== undefined) {
        this.log(`slice ${slice}: replicas ${run.replicas.join(',')} -> ${replicas.join(',')}; ${leadsOn !== null ? `node ${leadsOn} leads on at term ${failover.currentTerm}, committing` : 'electing'} by majorities of both sets`);
      }
      if (leadsOn !== null) this.leadOns++;
      // Only a change that some replica left has anything to tell once it settled.
      this.runs.set(slice, { failover, replicas, key, publishedAt: leadsOn !== null ? performance.now() : 0, settledSeen: failover.members.every((n) => replicas.includes(n)) });
    }
    // The nodes learn their new replica sets before this turn's Prepares leave (flush runs after).
    if (changed) this.reassignAll();
    // A removed node's Pongs and probes go (a map change removed it): kept, a Pong of the process before said that the
    // node, added again at the same index, held a term (holdsTerm, with no age limit: heldOnce) it never had.
    for (let node = 0; node < this.map.nodes.length; node++) {
      if (this.map.statusOf(node) !== 'removed') continue;
      this.probes.delete(node);
      for (const seen of this.pongs.values()) seen.delete(node);
    }
  }

  /** The term of the slice's leader when it was elected for the replica set the map holds now, and
   * published (null: an election for this set is under way or has not run yet). */
  electedTerm(slice: number): number | null {
    const run = this.current(slice);
    if (run === undefined || run.publishedAt === 0 || run.failover.currentLeader === null || !run.replicas.includes(run.failover.currentLeader)) return null;
    return run.failover.currentTerm === this.map.termOf(slice) ? run.failover.currentTerm : null;
  }

  /** Every replica of every set of the slice's change while it has not settled, else the map's set (what
   * Assign lists for the slice: assignReplication). */
  membersOf(slice: number): readonly number[] {
    return this.current(slice)?.failover.members ?? this.map.replicasOf(slice);
  }

  /** The sets whose majorities the slice's elections and commits need now: its set first, then those of a change that
   * has not settled (the map's set alone before sync() ran for it). */
  setsOf(slice: number): readonly (readonly number[])[] {
    return this.current(slice)?.failover.sets ?? [this.map.replicasOf(slice)];
  }

  /** Whether the slice's last replica-set change settled (its elections and commits count its set alone, not
   * joint majorities with the set before): true for a slice whose set has not changed since the start. */
  settled(slice: number): boolean {
    // No failover yet: the map's record (a set grown from one replica, before sync() ran for it, is not settled).
    if (!this.runs.has(slice)) return this.map.unsettledCountOf(slice) === 0;
    return this.current(slice)?.failover.electorateSettled ?? false;
  }

  /** The slice's run when it is for the replica set the map holds now (sync() not yet run for a change: none). */
  private current(slice: number): Run | undefined {
    const run = this.runs.get(slice);
    if (run === undefined || this.syncedChanges === this.map.changes) return run;
    return run.key === keyOf(this.map.replicasOf(slice)) ? run : undefined;
  }

  /** Whether node `node`'s replica of the slice said (Pong) that it durably holds a committed record of
   * term `term` or newer, so every record before that term's barrier, in a Pong at most `maxAgeMs` old (a replica
   * that said so and froze since does not hold it for a caller that asks for an answer of late). Asks it (a Ping, at
   * most every REPLICA_CATCH_UP_PROBE_MS) while it has not; with an age limit, also once its Pong is half that old, so
   * that a replica that answers, asked each turn, keeps one young enough (asked only once it is too old, it was too old
   * at one turn of three: two ping intervals against a 500 ms turn). */
  holdsTerm(slice: number, node: number, term: number, maxAgeMs = Infinity): boolean {
    const seen = this.pongs.get(slice)?.get(node);
    const now = performance.now();
    const age = seen === undefined ? Infinity : now - seen.at;
    const holds = seen !== undefined && seen.commitTerm >= term && age <= maxAgeMs;
    if (holds && age < maxAgeMs / 2) return true;
    let probes = this.probes.get(node);
    if (now - (probes?.get(slice)?.at ?? -Infinity) >= REPLICA_CATCH_UP_PROBE_MS && this.ready(node)) {
      if (probes === undefined) this.probes.set(node, (probes = new Map()));
      probes.set(slice, { at: now, out: true });
      this.host(slice).send(node, { type: 'Ping', seq: 0 });
    }
    return holds;
  }

  /** How long the worker of node `node` that runs `slice` has answered nothing, in ms (OpenQuestions.workerSilentFrom:
   * kept across the drop of a stuck worker's questions, cleared by its answer; with the grace of a worker not known to
   * replicate a slice where `grace`); 0 where it owes no answer, Infinity over a link that is not up. Whether a new
   * replica of `slice` may go to the node, whether it answers for a drain step (Membership.answersForStep), and whether
   * it answers for the map's leader until the slice elects (answers): the node's other workers' questions are not
   * this slice's. */
  workerSilentMs(node: number, slice: number, grace = true): number {
    return workerSilenceMs(this.questions, node, slice, this.ready(node), performance.now(), grace);
  }

  /** Whether node `node`'s replica of `slice` answers (answersWhenSilent): its worker silent less than
   * WORKER_SILENT_AFTER_PING_INTERVALS ping intervals, as an election counts it, but without the grace of a worker not
   * known to replicate a slice (workerSilentMs without it). The grace keeps an election from passing over a new replica
   * that drops questions until its assignment comes; a replica this names is a router's target until the slice elects
   * (Membership.leaderUntilElected), and must have answered what askKeptLately asked it (a Ping of `slice`, so of this
   * worker) 2 ping intervals before: with the grace, a frozen one whose worker had answered nothing since its link came
   * up (a node back from a restart, leading no slice) counted as answering until 4.5 ping intervals after that question,
   * and was named (found by the simulation's 'remove-down' runs: seed 1009 on stores). Per worker: a replica whose node
   * has another worker stuck answers for this slice, and is not passed over. A worker that owes no answer answers: one
   * never asked, frozen or not, is told apart only once asked (askKeptLately asks, then waits longer than this). */
  answers(node: number, slice: number): boolean {
    return answersWhenSilent(this.workerSilentMs(node, slice, false), this.timing.pingIntervalMs);
  }

  /** When the silence of node `node`'s worker of `slice` counts from (heardFromBy: workerSilentMs, with the election's
   * grace; now where it owes no answer), on performance.now()'s clock; -Infinity over a link that is not up: a frame
   * that came before the link was lost says nothing of the node since. The slice's failover's host.heardFrom. */
  private heardFrom(node: number, slice: number): number {
    return heardFromBy(this.questions, node, slice, this.ready(node), performance.now());
  }

  /** Hands each slice's leadership to its follower `to` (leadership rebalancing; docs/replication.md):
   * routing names `to` at once (the map's owner, a new epoch: one for all of them), so the old leader gets
   * no new writes; each election waits (at most LEADER_HANDOVER_WAIT_MS_MAX) until `to` holds the old
   * leader's last record, so that it wins the tie (the map's leader is listed first), then runs as any
   * election: the replica with the largest (last term, last index) leads, the old one if `to` is still
   * behind. Only for a slice whose leader was elected for its set and heard from; the others are left
   * out. Answers how many were handed over; where the map could not be saved, none, and `unsaved` (if given) is told
   * why, after the log. Its save is one of the map's (SaveBackoff: one file on one disk, told by the map): a failed one
   * counts in the backoff. Asked on a caller's turn (leadership rebalancing and a drain's handoffs, each membership
   * turn), none is tried while the backoff runs (0), so that a failing disk costs the map a save per backoff wait, not
   * one per turn. Asked with `unsaved` (keyslice remove, which is refused at the first failed save and so retries
   * nothing), it is tried whatever the backoff: waiting it out delayed the remove (up to MAP_SAVE_RETRY_MS_MAX, and
   * while other savers kept failing up to its whole handover bound) for no fewer failed saves. */
  handOver(moves: readonly { slice: number; to: number }[], unsaved?: (err: MapSaveError) => void): number {
    if (unsaved === undefined && !this.saves.due(performance.now())) return 0;
    const ok: { slice: number; to: number; from: number; key: string }[] = [];
    for (const { slice, to } of moves) {
      const run = this.runs.get(slice);
      if (run === undefined || run.hold !== undefined || run.publishedAt === 0 || !run.failover.electorateSettled) continue;
      const from = run.failover.currentLeader;
      if (from === null || from === to || !run.replicas.includes(to) || !this.ready(from) || !this.ready(to)) continue;
      // Only to a replica heard from lately: a frozen node keeps its link open but answers nothing.
      if (performance.now() - (this.pongs.get(slice)?.get(to)?.at ?? -Infinity) > this.probeIntervalMs) continue;
      if (this.current(slice) !== run || this.map.ownerOf(slice) !== from || ok.some((m) => m.slice === slice)) continue;
      ok.push({ slice, to, from, key: run.key });
    }
    if (ok.length === 0) return 0;
    const saved = savedOr(
      () => this.map.handOver(ok),
      (err) => {
        this.log(`cannot record ${ok.length} leadership handovers in the cluster map (${err.message}); none is tried again before a backoff (${this.saves.failing} saves failed in a row; at most ${MAP_SAVE_RETRY_MS_MAX} ms)`);
        unsaved?.(err);
      },
    );
    // (The map told the backoff: a failure counts, a success, the disk taking writes again, lets the redos waiting it out
    // go at the next tick.)
    if (saved === null) return 0;
    const now = performance.now();
    for (const { slice, to, from, key } of ok) {
      const replicas = this.map.replicasOf(slice);
      assert(replicas[0] === to && keyOf(replicas) === key, 'a handover changes the leader, not the replica set');
      const failover = SliceFailover.handOver(replicas, this.map.lastTermUsed(slice), this.timing, this.host(slice));
      this.runs.set(slice, { failover, replicas, key, publishedAt: 0, settledSeen: true, hold: { from, to, since: now, until: now + LEADER_HANDOVER_WAIT_MS_MAX }, handedTo: to });
    }
    this.handovers += ok.length;
    this.reassignAll();
    return ok.length;
  }

  /** Whether a handover's new leader holds the old one's last record, as both said after the handover began
   * (the old one's answer a tick later, once writes that were on their way reached it); asks both meanwhile. */
  private handedOver(slice: number, h: NonNullable<Run['hold']>): boolean {
    const seen = this.pongs.get(slice);
    if (caughtUpForHandover(seen?.get(h.from), seen?.get(h.to), h.since, FAILOVER_TICK_MS)) return true;
    for (const n of [h.from, h.to]) this.host(slice).send(n, { type: 'Ping', seq: 0 });
    return false;
  }

  /** Replication messages from node `node` (its link's frame); a worker's Pongs one slice's at a time. */
  receive(node: number, entries: DecodedReplicateEntry[]): void {
    this.traceHeard(node);
    this.questions.answered(node, entries);
    for (const [slice, message] of entries) {
      if (message.type === 'Pongs') {
        for (let i = 0; i < message.slices.length; i += PONG_NUMBERS) this.receiveOne(node, message.slices[i], unfoldPong(message, i));
      } else this.receiveOne(node, slice, message);
    }
  }

  /** KEYSLICE_TRACE_STALLS (shared/stall-trace.ts): node -> when its last frame came, for traceHeard alone. */
  private readonly lastFrameAt = new Map<number, number>();
  /** With KEYSLICE_TRACE_STALLS, a line per frame from `node` that came over 500 ms after its last one or after the first
   * question it left unanswered: `sinceFrame` is what the coordinator counted silence from before issue 14,
   * `sinceAsked` what it counts from now (heardLately takes either over 1.5 ping intervals, 750 ms, as silent; a worker
   * not known to replicate a slice yet is given more: OpenQuestions.workerSilentFrom). */
  private traceHeard(node: number): void {
    if (!TRACE_STALLS) return;
    const now = performance.now();
    const sinceFrame = now - (this.lastFrameAt.get(node) ?? now);
    const sinceAsked = now - (this.questions.firstAsked(node) ?? now);
    this.lastFrameAt.set(node, now);
    if (sinceFrame > 500 || sinceAsked > 500) console.log(`keyslice heard node ${node} at ${Date.now()} sinceFrame=${Math.round(sinceFrame)} sinceAsked=${Math.round(sinceAsked)} open=${this.questions.openCount(node)}`);
  }

  private receiveOne(node: number, slice: number, message: ReplicationMessage): void {
    const run = this.runs.get(slice);
    // A replica of an older set of an unsettled change answers too (its majority counts).
    if (run === undefined || !run.failover.members.includes(node)) return;
    if (message.type === 'Pong') {
      if (!this.pongs.has(slice)) this.pongs.set(slice, new Map());
      this.pongs.get(slice)!.set(node, { commitTerm: message.commitTerm, lastIndex: message.lastIndex, at: performance.now() });
      const probe = this.probes.get(node)?.get(slice);
      if (probe?.out) {
        probe.out = false;
        this.onProgress();
      }
    }
    run.failover.receive(node, message);
  }

  /** A node's link stopped being ready: its slices need a leader now, not after the heartbeat timeout. */
  linkLost(node: number): void {
    this.questions.forget(node);
    for (const run of this.runs.values()) if (run.failover.currentLeader === node) run.failover.suspectLeader();
    this.tick();
  }

  /** A node's link became ready: elections under way that wait for its answer ask it now. Nothing is kept of its
   * workers (OpenQuestions.forget): each of them took its Assign since the link came back. */
  linkUp(node: number): void {
    // What forget drops rests on this: a coordinator's link is ready only after its node's Assigned.
    assert(this.ready(node), `node ${node}: its link is up only once ready (its node said Assigned), not ${this.links[node]?.state}`);
    this.questions.forget(node);
    for (const run of this.runs.values()) run.failover.reachable(node);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }

  private ready(node: number): boolean {
    return this.links[node]?.state === 'ready';
  }

  private tick(): void {
    if (this.closed) return;
    // A tick that comes late by more than a few intervals means this process did not run meanwhile (a starved
    // machine, a long GC): the Pongs and Prepareds of that time wait unread in the sockets, and timers run before
    // them, so every leader would seem to have missed its heartbeat (seen under load: elections for all 1,024
    // slices at once, bench/FAILOVER.md). Such a tick looks at no timeout: the next one, after the sockets were
    // read, does. Never two in a row, so a coordinator that is always late still times out a frozen leader.
    const at = performance.now();
    const late = at - this.lastTickAt - this.tickMs;
    this.lastTickAt = at;
    if (late > COORDINATOR_STALL_MS && !this.skippedLate) {
      // Stopped (not only busy: nothing was sent meanwhile, so no answer waits to be read), the leaders' last Pongs
      // are as old as the stop: each failover leaves it out of their age (excuse), or the next tick timed every
      // leader out (a coordinator stopped 6 s: 12 of 12 slices elected anew, test/coordinator-stall.test.ts).
      for (const run of this.runs.values()) run.failover.excuse(late, at);
      this.skippedLate = true;
      return;
    }
    this.skippedLate = false;
    this.sync();
    const now = performance.now();
    let settled = false;
    for (const [slice, run] of this.runs) {
      if (!run.settledSeen && run.failover.electorateSettled) {
        // A replica that left the set (membersOf) no longer answers for the slice: its node's Assign drops it.
        run.settledSeen = true;
        settled = true;
      }
      if (run.hold !== undefined) {
        const h = run.hold;
        if (now < h.until && !this.handedOver(slice, h)) continue;
        if (now >= h.until) {
          const seen = this.pongs.get(slice);
          this.log(`slice ${slice}: the handover to ${this.map.nodes[h.to]} waited ${LEADER_HANDOVER_WAIT_MS_MAX} ms for it to hold the old leader's last record (it said index ${seen?.get(h.to)?.lastIndex ?? '?'}, ${this.map.nodes[h.from]} ${seen?.get(h.from)?.lastIndex ?? '?'}); it elects all the same`);
        }
        run.hold = undefined;
      }
      const f = run.failover;
      // Without a majority of each set connected no election can finish: wait rather than burn terms.
      if (f.currentLeader === null && !f.quorumAmong((n) => this.ready(n))) continue;
      // Its redo (a new term, a save) waits while the map's saves keep failing: a tick put off as one without a quorum,
      // nothing of its unrecorded turn sent meanwhile (reachable asks nothing while the redo is due); at most
      // MAP_SAVE_RETRY_MS_MAX, so a disk that is back is seen by the next redo's save.
      if (f.redoPending && !this.saves.due(performance.now())) continue;
      f.tick();
    }
    if (settled) {
      this.reassignAll();
      this.onProgress();
    }
    this.askAgain();
    this.recordSettled();
  }

  /** Asks again (a Ping) the first question each worker of each node left unanswered for half a ping interval, each
   * half interval while it stays open (OpenQuestions.stale): a worker drops one of a slice it does not replicate yet
   * (the Replicate overtook its Assign), and with no later question to that worker answered, nothing else would clear
   * it (a follower is not pinged once its change settled), and the node would count as silent while it answers. A
   * question of a slice the node no longer replicates is dropped. */
  private askAgain(): void {
    const now = performance.now();
    for (let node = 0; node < this.links.length; node++) {
      // A removed node's link closes without a state change (NodeLink.close): what was kept of its workers goes here.
      if (this.map.statusOf(node) === 'removed') this.questions.forget(node);
      if (!this.ready(node)) continue;
      this.questions.stale(
        node,
        now,
        (slice) => this.runs.get(slice)?.failover.members.includes(node) ?? false,
        (slice) => this.host(slice).send(node, { type: 'Ping', seq: 0 }),
        this.map.sliceCount,
      );
    }
  }

  /** Keeps the map's unsettled sets (cluster-map.ts) to those of the failovers: a change that settled is cleared (else a
   * coordinator started later would wait for majorities of sets no longer needed), as is a set that no failover ran
   * (two map changes in one turn). The map records a change with the change itself and so holds at least the failover's
   * sets (the same rule, setsBefore, from the same set before); this only drops sets. One write for all; a write that
   * fails is tried again once the save backoff allows (a map holding more sets than needed is only stricter). */
  private recordSettled(): void {
    const fix = new Map<number, number[][]>();
    for (const [slice, run] of this.runs) {
      const sets = run.failover.sets;
      if (sets.length - 1 === this.map.unsettledCountOf(slice) || this.current(slice) !== run) continue;
      const kept = this.map.unsettledOf(slice).filter((u) => sets.slice(1).some((o) => sameSet(o, u)));
      // Nothing to drop (the counts differ the other way): no write, which would be the same at every tick.
      if (kept.length < this.map.unsettledCountOf(slice)) fix.set(slice, kept);
    }
    if (fix.size === 0 || !this.saves.due(performance.now())) return;
    // Its outcome counts in the backoff through the map (onSave).
    savedOr(
      () => this.map.setUnsettled(fix),
      (err) => this.logUnrecordedSettled(`cannot record ${fix.size} settled replica-set changes in the cluster map (${err.message}); tried again after a backoff of up to ${MAP_SAVE_RETRY_MS_MAX} ms`),
    );
  }

  /** Whether a map change that a caller retries on its own turn (Membership's placement, drain steps, replica moves and
   * their undo, an automatic remove) may be tried now: not while the map's save backoff runs (saves failed in a row),
   * so that a failing disk costs the map one save per backoff wait whoever asks, not one per saver per turn. Its
   * outcome counts through the map (ClusterMap.onSave). */
  mapSaveDue(): boolean {
    return this.saves.due(performance.now());
  }

  private host(slice: number) {
    return {
      send: (to: ReplicaId, message: ReplicationMessage) => {
        let box = this.outbox.get(to);
        if (box === undefined) this.outbox.set(to, (box = []));
        box.push([slice, message]);
        this.queueFlush();
      },
      // Monotonic: an election waits out an old leader's lease by it (failover.ts), which a wall clock stepped
      // forward (an NTP step, a VM resumed) would end early; the questions' times are on the same clock.
      now: () => performance.now(),
      // Per worker: the slice's, which alone answers its Pings and Prepares (heardFromBy: liveness only, not safety).
      heardFrom: (node: number) => this.heardFrom(node, slice),
      persistTerm: (term: number, reason: ElectionReason | null) => {
        this.used.set(slice, Math.max(term, this.used.get(slice) ?? 0));
        if (reason !== null) this.electionsBy[reason]++;
        this.queueFlush();
      },
      // The map's record of the last Lead that left (recordElections writes it before the Lead leaves: flush).
      lastLead: () => this.map.lastLeadOf(slice) ?? [this.map.termOf(slice), null],
      // No Lead ever left (by the map's record, kept for good: ClusterMap.neverLed): a slice's first elections wait no
      // lease out, a new cluster's and one whose nodes joined after the coordinator started alike.
      neverLed: () => this.map.neverLed(slice),
      publish: (leader: ReplicaId, term: number) => {
        this.elected.set(slice, { slice, leader, term });
        const run = this.runs.get(slice);
        if (run !== undefined) {
          run.publishedAt = performance.now();
          if (run.handedTo !== undefined && run.handedTo !== leader) this.handoversGivenBack++;
          run.handedTo = undefined;
        }
        this.queueFlush();
      },
    };
  }

  private queueFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(() => this.flush());
  }

  /** The end of a turn: persist, then tell the nodes (Assign first, so a new leader routes its
   * slices when its Lead arrives), then the messages, one frame per node. */
  private flush(): void {
    this.flushQueued = false;
    const used = this.used;
    const published = [...this.elected.values()];
    const elected = published.filter((e) => {
      // A failover replaced within this turn (its set changed) may have published at a term the map moved past.
      // (A leader outside the set carries a change that has not settled: failover.ts finishElection.)
      return this.map.leaderPlaceOf(e.slice, e.leader) !== null && e.term > this.map.termOf(e.slice) && e.term <= Math.max(used.get(e.slice) ?? 0, this.map.lastTermUsed(e.slice));
    });
    const outbox = this.outbox;
    // Nor does its Lead (or LeadOn) leave: a coordinator that restarts takes the map's term for the last one a Lead
    // went to, and an election that hears a replica say it led that term names a leader without waiting out leases
    // (failover.ts, host.lastLead), which a leader of an unrecorded newer term may still hold.
    const unrecorded = new Set(published.filter((e) => !elected.includes(e)).map((e) => e.slice));
    if (unrecorded.size > 0) {
      for (const [node, entries] of outbox) outbox.set(node, entries.filter(([slice, m]) => !(unrecorded.has(slice) && (m.type === 'Lead' || m.type === 'LeadOn'))));
    }
    this.used = new Map();
    this.elected = new Map();
    this.outbox = new Map();
    if (this.closed) return;
    // The slices whose failovers took a term (an election, a LeadOn) or named a leader this turn: what a failed save
    // leaves unrecorded is theirs alone.
    const decided = new Set([...used.keys(), ...published.map((e) => e.slice)]);
    for (const [slice, term] of [...used]) if (term <= this.map.lastTermUsed(slice)) used.delete(slice);
    let ownersChanged = false;
    // Nodes that lose a slice's leadership because they stopped answering: what they hold unanswered is given up below.
    const deposed = new Set<number>();
    const named = new Map<number, number>();
    for (const e of elected) {
      const was = this.map.ownerOf(e.slice);
      named.set(e.slice, was);
      // A leader outside the set (carrying the change) is not made owner (recordElections): the owner keeps its place,
      // and is not deposed here either: routers (these links' included) keep sending the slice's writes to it until
      // the newest set's election, so a batch given up now would only be resent to it, and wait as long again
      // (docs/replication.md, "A leader outside the newest set").
      if (was >= 0 && was !== e.leader && this.map.leaderPlaceOf(e.slice, e.leader) === 'set') deposed.add(was);
    }
    if (used.size > 0 || elected.length > 0) {
      // Nothing this turn decided leaves unpersisted (a term taken, a leader named: their slices' messages).
      const recorded = savedOr(
        () => this.map.recordElections(used, elected),
        (err) => this.logUnrecordedElections(`cannot record elections in the cluster map (${err.message}); their messages are not sent, and their failovers do it again after a backoff (${this.saves.failing} saves failed in a row; at most ${MAP_SAVE_RETRY_MS_MAX} ms)`),
      );
      if (recorded === null) {
        // Each failover that decided something this turn does it again at a later tick (the next one after the first
        // failed save, then after a wait that doubles up to MAP_SAVE_RETRY_MS_MAX: tick), at a newer term
        // (SliceFailover.unrecorded): a LeadOn dropped here was never sent again, and its leader, pinging the term
        // before from a node that answers, was replaced only after LEADER_SLOW_TIMEOUT_FACTOR heartbeat timeouts; an
        // election whose Prepares were dropped waited out its timeout. The other slices' messages (Pings; Prepares of
        // terms recorded before, asked again) carry nothing unrecorded and leave: dropped too, a disk that fails at
        // each tick kept every leader unpinged, and each counted silent past the heartbeat timeout.
        for (const slice of decided) this.runs.get(slice)?.failover.unrecorded();
        for (const [node, entries] of outbox) outbox.set(node, entries.filter(([slice]) => !decided.has(slice)));
        deposed.clear();
      } else {
        ownersChanged = recorded.value;
        if (elected.length > 0) this.onProgress();
        const started = [...used.keys()].filter((slice) => !elected.some((e) => e.slice === slice));
        // Each election with its slice and reason where a turn starts a few (a join, a drain: each should be accounted
        // for); a storm of them (a coordinator that starts, a node lost) in one line a second at most.
        const reasonOf = (slice: number) => this.runs.get(slice)?.failover.electionReason ?? 'start';
        if (started.length > 0 && started.length <= 8) {
          this.log(`elections started: ${started.map((slice) => `slice ${slice} (${ELECTION_REASONS[reasonOf(slice)]}; replicas ${this.runs.get(slice)?.failover.sets.map((set) => set.join(',')).join(' and ')}, term ${used.get(slice)})`).join(', ')}`);
        } else if (started.length > 8 && performance.now() - this.lastStartLogAt >= 1_000) {
          this.lastStartLogAt = performance.now();
          const why = new Map<string, number>();
          for (const slice of started) {
            const r = ELECTION_REASONS[reasonOf(slice)];
            why.set(r, (why.get(r) ?? 0) + 1);
          }
          this.log(`elections started for ${started.length} slices (${[...why].map(([r, n]) => `${r}: ${n}`).join(', ')}; e.g. slice ${started[0]}: replicas ${this.runs.get(started[0])?.failover.sets.map((set) => set.join(',')).join(' and ')}, term ${used.get(started[0])})`);
        }
        const moved = elected.length;
        // Where the map named another (a handover whose election gave the leadership back), that one too.
        const other = (e: Elected) => (named.get(e.slice) !== e.leader && named.get(e.slice)! >= 0 ? ` (the map named ${this.map.nodes[named.get(e.slice)!]})` : '');
        if (moved > 0 && moved <= 8) for (const e of elected) this.log(`slice ${e.slice}: node ${this.map.nodes[e.leader]} leads at term ${e.term}${other(e)}`);
        else if (moved > 8) this.log(`${moved} slices elected their leaders (terms ${Math.min(...elected.map((e) => e.term))}..${Math.max(...elected.map((e) => e.term))})`);
      }
    }
    if (ownersChanged) this.reassignAll();
    for (const node of deposed) {
      const n = this.links[node]?.abandonInFlight(this.timing.heartbeatTimeoutMs, 'did not answer and lost the leadership of slices to an election') ?? 0;
      if (n > 0) this.log(`gave up ${n} batches that ${this.map.nodes[node]} did not answer for ${this.timing.heartbeatTimeoutMs} ms (it lost leaderships to an election)`);
    }
    for (const [node, entries] of outbox) {
      const link = this.links[node];
      if (link === undefined || this.map.statusOf(node) === 'removed') continue;
      // ClusterMap.neverLed's premise (no lease wait for a slice it says was never led): no Lead or LeadOn leaves
      // before the map records it (the filter above; recordElections saved this turn's).
      for (const [slice, m] of entries) if (m.type === 'Lead' || m.type === 'LeadOn') assert(!this.map.neverLed(slice), `slice ${slice}: a ${m.type} of term ${m.term} leaves only once the cluster map records it`);
      const frame = foldPings(entries, link.workerCount);
      // Its questions, in the order its workers take them: from the first one it leaves unanswered its silence counts.
      this.questions.sent(node, frame, performance.now());
      for (let i = 0; i < frame.length; i += REPLICATION_FRAME_ENTRIES_MAX) link.sendReplicate(frame.slice(i, i + REPLICATION_FRAME_ENTRIES_MAX));
    }
  }
}

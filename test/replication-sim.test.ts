// The replication core under the seeded simulation (test/replication-sim.ts):
// hundreds of runs with drops, delays, duplicates, damaged records, partitions,
// frozen leaders (SIGSTOP), crashes that lose unsynced data, deposed leaders
// holding longer logs of older terms and links that stall and then deliver what
// they held a term or more late, leaders that cannot commit within their
// commit wait (answered outcome unknown and resent), each checked by the
// acknowledged-write checker. A failure names its seed and how to replay it: KEYSLICE_SIM_SEED=<seed>
// runs that seed alone in each test (in each way a test runs its seeds: plain and on stores where it runs
// both), KEYSLICE_SIM_RUNS=<n> changes how many run, and KEYSLICE_SIM_SILENCE_RUNS=<n> how many runs each of the
// silence cases makes (drains with a replica kept, the new replica or the leader frozen; removes with a kept replica
// back during the wait), apart from the others: KEYSLICE_SIM_SILENCE_RUNS=1000 npx vitest run
// test/replication-sim.test.ts -t 'silence case' --testTimeout=0 runs 1,000 of each.
import { describe, expect, it } from 'vitest';
import { runSimulation, SimFailure, type SimOptions, type SimReport } from './replication-sim.js';

const only = process.env.KEYSLICE_SIM_SEED;
const runs = Number(process.env.KEYSLICE_SIM_RUNS ?? 400);
const BASE_SEED = 1_000;
/** The silence cases' runs each (below): KEYSLICE_SIM_SILENCE_RUNS, else a 32nd of `runs` (13 in CI). */
const silenceRuns = Number(process.env.KEYSLICE_SIM_SILENCE_RUNS ?? Math.ceil(runs / 32));
/** The runs of a test that runs half its seeds on stores: [seed, on stores] each, every other one on stores. A
 * one-seed replay runs its seed both plain and on stores, so that it reproduces either failure (whose message says
 * which: ", with store: true" for a run on stores). */
const halfOnStores = (count: number): [number, boolean][] =>
  only !== undefined ? [[Number(only), false], [Number(only), true]] : Array.from({ length: count }, (_, i) => [BASE_SEED + i, i % 2 === 1]);
/** Reports of runs and the sum of one figure over them. */
interface Runs {
  reports: SimReport[];
  sum: (f: (r: SimReport) => number) => number;
}
const summed = (reports: SimReport[]): Runs => ({ reports, sum: (f) => reports.reduce((a, r) => a + f(r), 0) });
/** `options` run over halfOnStores(count): each seed, every other one on stores. */
const halfOnStoresRun = (count: number, options: Omit<SimOptions, 'seed' | 'store'>): Runs =>
  summed(halfOnStores(count).map(([seed, store]) => runSimulation({ ...options, seed, store })));
/** The stall runs (below): a fifth of `runs`, half on stores, in place of a quarter of the plain ones (about as much CPU). */
const stallRuns = Math.ceil(runs / 5);
/** The commit-timeout runs (below): an eighth of `runs`, half on stores, in place of a fifth of the runs on stores
 * (these run 3 s of faults to their 2 s, so about as much CPU). */
const commitTimeoutRuns = Math.ceil(runs / 8);
/** The runs on stores alone: half of `runs`, less the fifth that went to the commit-timeout runs; at least one (with
 * KEYSLICE_SIM_RUNS of 1 or 2 the difference is 0, and the test's `acked > 0` would fail on no run). */
const storeRuns = Math.max(1, Math.ceil(runs / 2) - Math.ceil(runs / 5));
/** The plain runs: a quarter of `runs` went to the deposedTail runs (below), which cost about as much, and another
 * quarter to the stall runs. */
const plainRuns = Math.max(1, runs - 2 * Math.ceil(runs / 4));
/** [seed, on stores]: runs with chained set changes. These seeds broke the rule before elections and commits
 * counted joint majorities; since leaders send fewer heartbeats the seeded network draws differ, so they no
 * longer replay those runs: they stay as two more chained-change cases, not as proofs of that fix (the story
 * in replica-rules.test.ts is). */
const CHAINED_SEEDS: [number, boolean][] = [
  [52840, false],
  [50732, false],
];

describe('replication under a seeded simulation', () => {
  it(`loses, doubles and reorders no acknowledged write over ${only !== undefined ? `seed ${only}` : `${plainRuns} seeded runs`}`, () => {
    const seeds = only !== undefined ? [Number(only)] : Array.from({ length: plainRuns }, (_, i) => BASE_SEED + i);
    const { reports, sum } = summed(seeds.map((seed) => runSimulation({ seed })));
    const refusals: Record<string, number> = {};
    for (const r of reports) for (const [k, v] of Object.entries(r.refusals)) refusals[k] = (refusals[k] ?? 0) + v;
    console.log(
      `replication sim: ${reports.length} runs, ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.ambiguous)} with unknown outcome, ` +
        `${sum((r) => r.crashes)} crashes, ${sum((r) => r.freezes)} leader freezes, ${sum((r) => r.elections)} elections, ${sum((r) => r.snapshotsSent)} snapshots sent, refusals ${JSON.stringify(refusals)}; ` +
        `${sum((r) => r.reads)} consistent reads checked (${sum((r) => r.readsAfterLeaseWait)} after waiting for a lease), ${sum((r) => r.readsRefused)} refused`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    expect(sum((r) => r.reads)).toBeGreaterThan(0);
    if (only === undefined) {
      // The faults the runs are meant to exercise did happen (else the check above proves little).
      expect(sum((r) => r.crashes)).toBeGreaterThan(plainRuns / 2);
      expect(sum((r) => r.freezes)).toBeGreaterThan(plainRuns / 10);
      expect(sum((r) => r.elections)).toBeGreaterThan(plainRuns);
      for (const code of ['StaleTerm', 'LogGap', 'ChecksumMismatch', 'LogMismatch']) expect(refusals[code] ?? 0, code).toBeGreaterThan(0);
      expect(sum((r) => r.snapshotsSent)).toBeGreaterThan(0);
      expect(sum((r) => r.readsAfterLeaseWait)).toBeGreaterThan(0);
    }
  });

  it(`loses no acknowledged write, leaves no uncommitted one and applies a write sent again once, on replicas run as a worker runs them (${only !== undefined ? `seed ${only}` : `${storeRuns} runs`})`, () => {
    // slice-replicas.ts on SliceStores: leaders execute before commit and are rolled back when deposed.
    const seeds = only !== undefined ? [Number(only)] : Array.from({ length: storeRuns }, (_, i) => BASE_SEED + i);
    const { reports, sum } = summed(seeds.map((seed) => runSimulation({ seed, store: true })));
    // Writes there are sent again after an unknown outcome, with their request ids: each is applied once.
    console.log(
      `replication sim on stores: ${reports.length} runs, ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.resent)} sent again after an unknown outcome, ${sum((r) => r.ambiguous)} left with unknown outcome; ` +
        `${sum((r) => r.checkpoints)} checkpoints after compactions in steps, ${sum((r) => r.crashesBeforeCheckpoint)} crashes amid a compaction or before its checkpoint completed`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.resent)).toBeGreaterThan(0);
      // A compaction's snapshots are durable only with its checkpoint: crashes came between its steps and before then.
      expect(sum((r) => r.checkpoints)).toBeGreaterThan(runs);
      expect(sum((r) => r.crashesBeforeCheckpoint)).toBeGreaterThan(runs / 20);
    }
  });

  it(`loses no acknowledged write across replica-set changes: drains, undone replica moves, replacements, added and removed replicas, replicas that left dropping their state, with elections and crashes at any moment (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 2)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 2), { setChanges: true });
    console.log(
      `replication sim with set changes: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes (${sum((r) => r.movesUndone)} moves undone, ${sum((r) => r.ledOn)} led on by their leader, ` +
        `${sum((r) => r.handovers)} leadership handovers before a drain step or a remove took the leader's replica out (${sum((r) => r.removeHandovers)} before a remove), ${sum((r) => r.handedOver)} of them naming the replica handed to, ${sum((r) => r.handoversGivenBack)} whose election named another, ` +
        `${sum((r) => r.handoverUnknown)} writes answered outcome unknown by a leader a handover deposed (${sum((r) => r.handoverUnknownLagging)} from the lagging router), ${sum((r) => r.handoverLaggingWriters)} with a router writing to the old leader a while, ${sum((r) => r.handoverKills)} with the replica handed to or the old leader killed before its election named a leader), ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.handedOver)).toBeGreaterThan(0);
      // A handover's hard cases happened: writes from the lagging router reaching the old leader after the Pong its
      // catch-up wait went by, deposed with it (without that router a few writes on their way still are, so
      // handoverUnknown alone would not show it ran), elections naming another than the replica handed to, and a kill
      // landing before the handover's election named a leader.
      expect(sum((r) => r.handoverUnknownLagging)).toBeGreaterThan(0);
      expect(sum((r) => r.handoversGivenBack)).toBeGreaterThan(0);
      expect(sum((r) => r.handoverKills)).toBeGreaterThan(0);
      // keyslice remove and its replacement hand a leader's leadership over first too, as the coordinator does.
      expect(sum((r) => r.removeHandovers)).toBeGreaterThan(0);
      expect(sum((r) => r.setChanges)).toBeGreaterThan(reports.length);
      expect(sum((r) => r.movesUndone)).toBeGreaterThan(0);
      // Most changes keep an answering leader in the set, which then leads on (LeadOn) rather than being deposed.
      expect(sum((r) => r.ledOn)).toBeGreaterThan(sum((r) => r.setChanges) / 3);
    }
  });

  it(`loses no acknowledged write when a drain's new replica's node goes down: the step undone, and its replica placed on another node that is up, or on one once it is up (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 4)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 4), { setChanges: 'drain-down' });
    console.log(
      `replication sim, drains onto nodes that go down: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.movesUndone)} drain steps undone ` +
        `(${sum((r) => r.drainStepsRedirected)} redirected to a node that is up), ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.drainStepsRedirected)).toBeGreaterThan(0);
      expect(sum((r) => r.movesUndone)).toBeGreaterThan(sum((r) => r.drainStepsRedirected));
    }
  });

  it(`loses no acknowledged write when a drain's leadership handover target freezes: its election gives the leadership back, and past the handover's bound the drained replica leaves while the target is still frozen, the step waiting only for the new replica and a majority of the set left (membership.ts drainStepCatchUp) (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 8)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 8), { setChanges: 'drain', handoverFreezes: true });
    console.log(
      `replication sim, drains whose handover target freezes: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.handovers)} handovers (${sum((r) => r.handoverFreezes)} targets frozen, ${sum((r) => r.handoversGivenBack)} given back), ` +
        `${sum((r) => r.drainStepsPastHandoverBound)} drain steps past the handover's bound with a replica kept behind, ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    // The path is taken: a frozen target, its handover given back, the drained replica out while it is frozen (counted
    // only where drainStepCatchUp, the product's rule, let the step go on without the frozen replica).
    if (only === undefined) {
      expect(sum((r) => r.handoverFreezes)).toBeGreaterThan(reports.length / 8);
      expect(sum((r) => r.drainStepsPastHandoverBound)).toBeGreaterThan(0);
      // The map's leader after such a step, by the product's rule (membership.ts leaderUntilElected, which the
      // simulation's drain step calls), names no frozen replica.
      expect(sum((r) => r.drainsNamingFrozen), 'drain steps after which the map named a frozen replica as leader').toBe(0);
      // With the bound never spent (the rule before), the same freezes lose nothing and converge once the target
      // thaws (runSimulation throws otherwise).
      const before = halfOnStores(10).map(([seed, store]) => runSimulation({ seed, setChanges: 'drain', handoverFreezes: true, handoverNeverSpent: true, store }));
      expect(before.reduce((a, r) => a + r.handoverFreezes, 0)).toBeGreaterThan(0);
    }
  });

  it(`names as the map's leader, when a remove takes out the map's leader and its handover is given up, a replica kept that said lately it holds the barrier, not the frozen one the map's own rule names first (membership.ts leaderUntilElected) (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 8)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 8), { setChanges: 'remove-frozen' });
    console.log(
      `replication sim, removes of the leader with a replica kept frozen: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.removeFreezes)} removes with the first replica kept frozen, ` +
        `${sum((r) => r.removesNamingFrozen)} naming a frozen leader, ${sum((r) => r.removesUnnamed)} naming none (no leader elected, or none said lately it holds the barrier), ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      // The case is there: removes of the map's leader while the replica the map's own rule would name is frozen (it
      // confirmed the barrier before it froze, so only the age of its Pong tells it apart): 23 in the 50 runs, 15 of
      // them named by the rule (the others had no leader elected, or no replica kept said so lately).
      expect(sum((r) => r.removeFreezes)).toBeGreaterThan(reports.length / 4);
      expect(sum((r) => r.removeFreezes) - sum((r) => r.removesUnnamed), 'removes where the rule named a leader').toBeGreaterThan(reports.length / 8);
      // The product's rule names no frozen one: a frozen replica's last Pong is too old (naming the first kept replica
      // that is up, the rule before, or counting a Pong of any age, named a frozen one in most of them: 10 of 15).
      expect(sum((r) => r.removesNamingFrozen), 'removes after which the map named a frozen replica as leader').toBe(0);
    }
  });

  it(`names as the map's leader, when a remove takes out the map's leader as its node goes down (killed or cut off) with a replica kept frozen or cut off from the coordinator, a replica that answers by the silence the coordinator computes over the seeded network (membership.ts leaderUntilElected's second choice, replica-leaders.ts workerSilenceMs) (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 16)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 16), { setChanges: 'remove-down' });
    console.log(
      `replication sim, removes of a leader that is down with a replica kept silent: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.removeDowns)} removes, ` +
        `${sum((r) => r.removesDownNamingSilent)} naming a silent or frozen leader (${sum((r) => r.removesDownNamingUntold)} more naming one asked too late to tell), ${sum((r) => r.removesDownAnswering)} named by the second choice (a replica that answers), ${sum((r) => r.removesDownUnnamed)} naming none (no elected term), ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.removeDowns)).toBeGreaterThan(reports.length / 4);
      expect(sum((r) => r.removeDowns) - sum((r) => r.removesDownUnnamed), 'removes where the rule named a leader').toBeGreaterThan(reports.length / 8);
      // The second choice is reached (no replica kept said lately that it holds the barrier), and it names no silent one.
      expect(sum((r) => r.removesDownAnswering), 'removes named by the second choice').toBeGreaterThan(0);
      expect(sum((r) => r.removesDownNamingSilent), 'removes after which the map named a silent or frozen replica as leader').toBe(0);
      // Seeds (of 500 from 1,000) where a frozen or cut-off replica kept, whose worker had answered nothing since its
      // link came up (a restart), was named when its silence counted with the grace elections give such a worker
      // (ReplicaLeaders.answers before it counted without: 4.5 ping intervals after the question, against the remove's wait of 2).
      const graceSeeds: [number, boolean][] = [[1221, true], [1259, true], [1268, false], [1344, false]];
      const kept = graceSeeds.map(([seed, store]) => runSimulation({ seed, setChanges: 'remove-down', store }));
      expect(kept.reduce((a, r) => a + r.removesDownNamingSilent, 0), 'removes of the kept seeds naming a silent or frozen replica').toBe(0);
    }
  });

  // The coordinator's silence rules through its own code (SimOptions.drainSilence, keptRestarts): each run fails, naming
  // its seed, where the coordinator did not go on without the silent replica in time. Broken on purpose, each fails
  // at seed 1000, which CI runs (BASE_SEED on), so they replay there: membership.ts countsUpBy returning `up` (the
  // link's clock ignored) fails 'new' ("the drain step of 2 onto 4, frozen since 440.0 ms, is not undone at 2940.0
  // ms"; 'kept' passes, its unanswered questions count it down); answersForStepBy returning `countsUp` alone fails
  // 'stuck' ("the drain of 2 still waits at 2106.7 ms for 1, a replica it keeps whose worker is stuck (its node
  // pongs) since 440.0 ms"), returning true 'kept' and 'stuck'; replica-leaders.ts heardFromBy returning `now` (a
  // frozen node heard from) fails 'leader' ("the leader 0, frozen at 440.0 ms, still leads at 746.0 ms with no
  // election started"); keepAskingKept timing the wait from its start alone fails keptRestarts ("a remove of 0 names
  // 1 the slice's leader at 400.0 ms, frozen, whose link came up at 360.0 ms, 40.0 ms into the wait for answers
  // begun at 320.0 ms").
  it(`silence case: goes on with a drain step without a replica it keeps that froze (silent past the node heartbeat bound, by its link's clock and its questions, it counts down for the step: membership.ts answersForStepBy, countsUpBy, drainStepCatchUp), before it thaws (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'kept' });
    console.log(
      `replication sim, drains with a replica kept frozen: ${reports.length} runs, ${sum((r) => r.drainSilences)} freezes, ${sum((r) => r.drainStepsPastSilentKept)} drain steps that went on past a frozen replica kept, ` +
        `${sum((r) => r.silentUnchecked)} freezes unchecked (no elected leader, an unsettled change, or the others not caught up at the thaw), ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.drainSilences)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.drainStepsPastSilentKept)).toBeGreaterThan(reports.length / 2);
    }
  });

  it(`silence case: goes on with a drain step without a replica it keeps whose worker is stuck while its node pongs (counted up by its link's clock, but its questions unanswered past the node heartbeat bound: membership.ts answersForStepBy), before it thaws (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'stuck' });
    console.log(
      `replication sim, drains with a replica kept whose worker is stuck: ${reports.length} runs, ${sum((r) => r.drainSilences)} stuck, ${sum((r) => r.drainStepsPastSilentKept)} drain steps that went on past a stuck replica kept, ` +
        `${sum((r) => r.silentUnchecked)} unchecked (no elected leader, an unsettled change, or the others not caught up at the end), ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.drainSilences)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.drainStepsPastSilentKept)).toBeGreaterThan(reports.length / 2);
    }
  });

  it(`silence case: undoes a drain step whose new replica froze (silent past the node heartbeat bound, then the undo's wait: membership.ts countsUpBy, undoStalledMoves) and places it on a node that counts up, before it thaws (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'new' });
    console.log(
      `replication sim, drains whose new replica froze: ${reports.length} runs, ${sum((r) => r.drainSilences)} freezes, ${sum((r) => r.silentNewUndone)} steps undone while it was frozen (${sum((r) => r.silentNewRedirected)} placed on another node), ` +
        `${sum((r) => r.silentUnchecked)} freezes ending with no elected leader or an unsettled change, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.drainSilences)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.silentNewRedirected)).toBeGreaterThan(reports.length / 2);
    }
  });

  it(`silence case: undoes a drain step whose new replica's worker is stuck while its node pongs (counted up by its link's clock, its questions unanswered past the node heartbeat bound, then the undo's wait: membership.ts answersForStepBy, undoStalledMoves) and places it on a node that answers, before it thaws (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'stuck-new' });
    console.log(
      `replication sim, drains whose new replica's worker is stuck: ${reports.length} runs, ${sum((r) => r.drainSilences)} stuck, ${sum((r) => r.silentNewUndone)} steps undone while it was stuck (${sum((r) => r.silentNewRedirected)} placed on another node, ${sum((r) => r.stuckPlacedBack)} back on the stuck worker before the retry's wait), ` +
        `${sum((r) => r.silentUnchecked)} ending with no elected leader or an unsettled change, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    // Not placed back on the worker it was undone off while that stays stuck (OpenQuestions keeps its time across the
    // drop of its questions): a rule over what the node owes now put a later drain's new replica straight back on it
    // (6 of the 13 seeds before, each step then waiting for the thaw).
    expect(reports.map((r) => r.stuckPlacedBack), 'drain steps placed back on the stuck worker, before the retry').toEqual(reports.map(() => 0));
    if (only === undefined) {
      expect(sum((r) => r.drainSilences)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.silentNewRedirected)).toBeGreaterThan(reports.length / 2);
    }
  });

  it(`silence case: leads the slice again within a heartbeat timeout and an election of a turn whose cluster-map save failed, its LeadOn or Prepares not sent (replica-leaders.ts flush, SliceFailover.unrecorded); and catches a failover not told (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'unsaved' });
    console.log(
      `replication sim, drains with turns whose map save failed: ${reports.length} runs, ${sum((r) => r.unsavedTurns)} turns lost, led again at most ${Math.max(0, ...reports.map((r) => r.unsavedServedMsMax)).toFixed(1)} ms after one, ` +
        `${sum((r) => r.ledOn)} changes led on, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) expect(sum((r) => r.unsavedTurns)).toBeGreaterThan(reports.length / 2);
    // Broken on purpose (the failover not told, as before SliceFailover.unrecorded), the case fails: a lost LeadOn's
    // leader, answering Pings of the term before, is kept 3 heartbeat timeouts.
    const broken = Array.from({ length: 8 }, (_, i) => BASE_SEED + i).map((seed) => {
      try {
        runSimulation({ seed, setChanges: 'drain-silent', drainSilence: 'unsaved', brokenUnrecorded: true });
        return '';
      } catch (err) {
        if (!(err instanceof SimFailure)) throw err;
        return err.message;
      }
    });
    expect(broken.filter((m) => /not led at its failover's term/.test(m)).length, broken.join('\n')).toBeGreaterThan(0);
  });

  it(`silence case: elects within the heartbeat timeout when the leader freezes during a drain, its node silent by the coordinator's own heardFrom (replica-leaders.ts heardFromBy, failover.ts heardLately) (${only !== undefined ? `seed ${only}` : `${silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(silenceRuns, { setChanges: 'drain-silent', drainSilence: 'leader' });
    console.log(
      `replication sim, leaders frozen during a drain: ${reports.length} runs, ${sum((r) => r.drainSilences)} freezes, ${sum((r) => r.silentLeaderElections)} elections started after one, ` +
        `at most ${Math.max(0, ...reports.map((r) => r.silentLeaderElectionMsMax)).toFixed(1)} ms after it, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.drainSilences)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.silentLeaderElections)).toBe(sum((r) => r.drainSilences));
    }
  });

  it(`silence case: names no frozen replica whose link came up during a remove's wait for answers: the wait asks it long enough to count as silent (membership.ts keepAskingKept) (${only !== undefined ? `seed ${only}` : `${2 * silenceRuns} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(2 * silenceRuns, { setChanges: 'remove-down', keptRestarts: true });
    console.log(
      `replication sim, removes of a leader that is down with a replica kept back during the wait and frozen: ${reports.length} runs, ${sum((r) => r.removeDowns)} removes, ` +
        `${sum((r) => r.restartedKeptUp)} whose replica's link came up within ${2 * 40} ms of the wait's start (${sum((r) => r.restartedKeptSecondChoice)} reaching the rule's second choice), ${sum((r) => r.removesDownNamingSilent)} naming a silent one, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      expect(sum((r) => r.restartedKeptSecondChoice)).toBeGreaterThan(0);
      expect(sum((r) => r.removesDownNamingSilent)).toBe(0);
    }
  });

  it(`loses no acknowledged write when a replica of a drained set is killed, for good or for a while: the drain replaces one down 400 ms (sim time) on a node that is up (a node back after that starts out of the set), or goes on without with none up, and the run converges (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 8)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 8), { setChanges: 'drain-dead' });
    console.log(
      `replication sim, drains with a replica killed: ${reports.length} runs, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.deadReplaced)} replicas down replaced (${sum((r) => r.replacedCameBack)} of them came back after), ` +
        `${sum((r) => r.drainedKeepingDown)} drain steps went on keeping one (no node up to take it), ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    // Each way is taken: replaced, replaced and back, kept with no node up to take its place. (About half the runs
    // replace one: a victim killed for a while may be back within the wait, and a quarter of the runs have no node up
    // to take its place.)
    if (only === undefined) {
      expect(sum((r) => r.deadReplaced)).toBeGreaterThan(reports.length / 4);
      expect(sum((r) => r.replacedCameBack)).toBeGreaterThan(0);
      expect(sum((r) => r.drainedKeepingDown)).toBeGreaterThan(0);
    }
  });

  // Two more chained-change runs (see CHAINED_SEEDS: they no longer replay the runs that broke the old rule).
  for (const [seed, store] of CHAINED_SEEDS) {
    it(`keeps every acknowledged write over chained replica-set changes (seed ${seed}${store ? ', on stores' : ''})`, () => {
      expect(runSimulation({ seed, setChanges: 'chained', store }).acked).toBeGreaterThan(0);
    });
  }

  // Chained changes where a later change took out every replica holding the last records of a set before it (which
  // may be committed there), so that no replica of the newest set may lead: these seeds never converged (an election
  // every 200 ms naming no one). A replica outside the newest set now leads the joint sets until its barrier settles
  // the change, then steps down and the newest set elects its own (failover.ts finishElection; docs/replication.md,
  // "A leader outside the newest set"). Those seeds were 304751, 305276, 300308 and 302859 (on stores the last two):
  // since a change's settle probes come sooner after its election (failover.ts settleProbeGapMs) the draws differ and
  // none of them elects a carrier any more. These four, of the 400 runs of seeds 300000-300199, elect one (the case the
  // rule is for), but they are not replays of that bug: with the carrier election taken out (finishElection naming no
  // one where the set's best would lose records) each still converges and fails only on `carriers` (checked 2026-11-28,
  // fsrev). 301734 (one of the runs that never converged then, its draws changed since) and 301967 are replays: a sweep
  // of the chained runs of seeds 300200-301999, plain and on stores, without the carrier election found these two of
  // 3,600 runs that never converge ("no leader with every replica caught up 30000 ms after the faults stopped").
  for (const [seed, store] of [[301734, false], [301967, false], [300049, false], [300156, false], [300089, true], [300133, true]] as const) {
    it(`converges over chained replica-set changes that took out every replica of the newest set holding the last records, a replica outside it carrying the change (seed ${seed}${store ? ', on stores' : ''})`, () => {
      const report = runSimulation({ seed, setChanges: 'chained', store });
      expect(report.acked).toBeGreaterThan(0);
      // Elected, not necessarily settled: a later chained change may cut its term short (the draws decide; a carrier
      // settling its change is replica-rules.test.ts's story).
      expect(report.carriers).toBeGreaterThan(0);
    });
  }

  // Chained changes whose older set was left without a majority that answers, when a replica that left the set
  // stopped answering for the slice at once (these seeds did not converge then): it now answers until the change
  // settled, as its node's assignment lists it until then (replica-leaders.ts assignReplication).
  for (const seed of [300005, 300025, 300065, 300087]) {
    it(`converges over chained replica-set changes with replicas that left answering until the change settled (seed ${seed})`, () => {
      expect(runSimulation({ seed, setChanges: 'chained' }).acked).toBeGreaterThan(0);
    });
  }

  it(`loses no acknowledged write when the coordinator restarts, often in the middle of a replica-set change (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 2)} runs, half on stores`})`, () => {
    const { reports, sum } = halfOnStoresRun(Math.ceil(runs / 2), { setChanges: true, coordinatorRestarts: true });
    console.log(`replication sim with coordinator restarts: ${reports.length} runs, ${sum((r) => r.coordinatorRestarts)} restarts (${sum((r) => r.restartsUnsettled)} with a change unsettled), ${sum((r) => r.acked)} writes acknowledged`);
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) expect(sum((r) => r.restartsUnsettled)).toBeGreaterThan(reports.length / 4);
  });

  // A coordinator restarted while a replacement ({a,b,c} -> {a,b,d}, keyslice remove's refill) had not settled, which
  // built the slice's failover from the map's set alone (before the map kept the sets of an unsettled change): its
  // election heard a majority of the new set only, which need not hold what a majority of the old one acknowledged.
  // Seed 200132: replace 1 (0,1,2 -> 0,2,4) at 320 ms, the coordinator restarted at 380 ms, and a replica applied
  // another record at an index than one applied before; seed 201105 (on stores): replace 0 (0,1,2 -> 1,2,4), a
  // restart, and acknowledged write 7 lost. Since leaders wait for their followers' round trips before they resend,
  // and followers write the commit point before the sync they answer after, the seeded network draws differ:
  // 200132 no longer restarts the coordinator with a change unsettled, and 200134 (the next that does) stands in.
  // Since the simulation's handovers run the coordinator's handover failover (its election waits for the answer of
  // the replica handed to) and a router with the map before may write to the old leader meanwhile, 201105 no longer
  // restarts it with a change unsettled either; 201127 (replace 1, 0,1,2 -> 0,2,3, a restart before it settled,
  // the first on stores after 201105 that does so after a replacement) stands in.
  for (const [seed, store] of [[200134, false], [201127, true]] as const) {
    it(`keeps every acknowledged write when the coordinator restarts before a replacement of a replica settled (seed ${seed}${store ? ', on stores' : ''})`, () => {
      const r = runSimulation({ seed, setChanges: true, coordinatorRestarts: true, store });
      expect(r.restartsUnsettled).toBeGreaterThan(0);
      expect(r.acked).toBeGreaterThan(0);
    });
  }

  it(`loses no acknowledged write when a deposed leader holds a longer log of an older term than the replicas that hold a newer leader's writes, that leader killed, and in half the runs a replica holding them replaced by then (${only !== undefined ? `seed ${only}` : `${Math.ceil(runs / 4)} runs, half on stores`})`, () => {
    // Raft's counterexample to electing the longest log (SimOptions.deposedTail): an election that compares last
    // indexes before last terms, here or past a replica that left the set, elects the deposed leader and loses what
    // the newer one committed (20 and 7 of these 100 runs fail so: docs/replication-notes.md).
    // [seed, i]: the i-th run's way (a replacement or not, on stores or not); a one-seed replay runs its seed all four ways.
    const planned = only !== undefined ? [0, 1, 2, 3].map((i) => [Number(only), i]) : Array.from({ length: Math.ceil(runs / 4) }, (_, i) => [BASE_SEED + i, i]);
    const { reports, sum } = summed(planned.map(([seed, i]) => runSimulation({ seed, deposedTail: i % 2 === 1 ? 'replace' : true, store: (i >> 1) % 2 === 1 })));
    console.log(
      `replication sim, deposed leaders with longer logs of older terms: ${reports.length} runs, ${sum((r) => r.deposedTails)} newer leaders killed with a deposed one's tail in place, ` +
        `${sum((r) => r.longerOlderPassedOver)} elections that passed over a longer log of an older term, ${sum((r) => r.setChanges)} set changes, ${sum((r) => r.acked)} writes acknowledged`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      // The schedule mostly comes through the seed's other faults, and its elections see the case it is for.
      expect(sum((r) => r.deposedTails)).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.longerOlderPassedOver)).toBeGreaterThan(reports.length / 5);
    }
  });

  it(`loses no acknowledged write when links stall for longer than an election and a lease and then deliver what they held, a term or more late: answers to older Prepares during later elections, an old leader's Appends after a new leader was chosen (${only !== undefined ? `seed ${only}` : `${stallRuns} runs, half on stores`})`, () => {
    // SimOptions.stall: a few links a run, and at R=3 two schedules: a replica's answer to an older term's Prepare
    // brought into the election after the leader it then followed was killed (the story in replica-rules.test.ts), and
    // a deposed leader that does not know it whose Appends reach a follower that promised the newer term.
    const { reports, sum } = halfOnStoresRun(stallRuns, { stall: true });
    const late = (type: string) => sum((r) => r.lateOlderTerm[type] ?? 0);
    console.log(
      `replication sim with stalled links: ${reports.length} runs, ${sum((r) => r.stalls)} stalls holding ${sum((r) => r.stalledMessages)} messages, ` +
        `of which arrived a term or more late: ${late('Prepared')} Prepared, ${late('Append')} Append, ${late('Lead')} Lead; ${sum((r) => r.lateAnswers)} late answers brought into the election after the leader's kill, ` +
        `${sum((r) => r.lateAppends)} deposed leaders' Appends released to a follower of the newer term; ` +
        `${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.elections)} elections`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      // (The schedule makes 1-3 stalls a run; what they caught is the traffic's doing.)
      expect(sum((r) => r.stalledMessages)).toBeGreaterThan(sum((r) => r.stalls));
      expect(late('Prepared')).toBeGreaterThan(0);
      expect(late('Append')).toBeGreaterThan(0);
      expect(sum((r) => r.lateAnswers)).toBeGreaterThan(reports.length / 10);
      expect(sum((r) => r.lateAppends)).toBeGreaterThan(reports.length / 5);
    }
  });

  it(`answers a write its leader cannot commit within the commit wait with an unknown outcome, which the router resends per its policy and which applies once (${only !== undefined ? `seed ${only}` : `${commitTimeoutRuns} runs, half on stores`})`, () => {
    // SimOptions.commitTimeouts: the leader cut off from its followers for longer than its commit wait, a few times a
    // run; its held writes answered by the worker's own timeout path (held-answers.ts). On stores the router resends
    // them with their request ids (a copy applied twice fails its condition); the plain runs keep no ids, so an unknown
    // outcome stays unknown there (a resend could store a value twice, which the checker fails).
    const planned = halfOnStores(commitTimeoutRuns);
    const { reports, sum } = summed(planned.map(([seed, store]) => runSimulation({ seed, commitTimeouts: true, store })));
    const hit = reports.filter((r) => r.commitTimeouts > 0).length;
    const onStores = reports.filter((_, i) => planned[i][1]);
    console.log(
      `replication sim with leaders past their commit wait: ${reports.length} runs, ${sum((r) => r.noMajorityCuts)} leaders cut off from their followers, ` +
        `${hit} runs with a commit timeout (${sum((r) => r.commitTimeouts)} writes answered outcome unknown by it, ${sum((r) => r.timeoutAnswers)} of those answers reached the router in time); ` +
        `on stores ${onStores.reduce((a, r) => a + r.resentAfterTimeout, 0)} sent again after one (${onStores.reduce((a, r) => a + r.resent, 0)} after any unknown outcome); ${sum((r) => r.acked)} writes acknowledged, ${sum((r) => r.ambiguous)} left with unknown outcome`,
    );
    expect(sum((r) => r.acked)).toBeGreaterThan(0);
    if (only === undefined) {
      // The timeouts fire in most runs, and their answers reach the router (its wait is longer than the commit wait).
      expect(hit).toBeGreaterThan(reports.length / 2);
      expect(sum((r) => r.timeoutAnswers)).toBeGreaterThan(reports.length);
      expect(onStores.reduce((a, r) => a + r.resentAfterTimeout, 0)).toBeGreaterThan(0);
    }
  });

  it('catches a coordinator that counts an answer to an older term\'s Prepare in a later election: the answer says nothing of the records its replica took since', () => {
    // The story in replica-rules.test.ts ("counts only answers to its own term's Prepare"), here through stalled links
    // (SimOptions.stall): before them no answer arrived a term late, and the break failed none of CI's runs.
    const failure = firstFailure(1_040, 40, { stall: true, countLateAnswers: true });
    expect(failure).toMatch(/^seed \d+: [^]*(lost|applied a record|holds other)[^]*KEYSLICE_SIM_SEED=\d+/);
    // The same seed with the election's own rule passes: what failed was counting the late answer.
    expect(runSimulation({ seed: Number(/^seed (\d+)/.exec(failure!)![1]), stall: true }).acked).toBeGreaterThan(0);
  });

  it('catches a leader that answers consistent reads without a lease (as before leases): a deposed leader that does not know it answers an old value', () => {
    expect(firstFailure(7_000, 400, { readsWithoutLease: true })).toMatch(/^seed \d+: a consistent read of key \d+ started at [\d.]+ ms misses write \d+[^]*KEYSLICE_SIM_SEED=\d+/);
  });

  it('catches a coordinator that promotes any replica of a majority rather than the most up to date one', () => {
    // Its leader may lack a committed record that its followers hold: they refuse to cut it, and the slice never
    // converges (the run fails on that), unless the records are lost or applied differently first.
    const failure = firstFailure(5_000, 200, { unsafeChoice: true });
    expect(failure).toMatch(/^seed \d+: [^]*(lost|stored|applied a record|a committed record is never cut|no leader with every replica caught up)[^]*KEYSLICE_SIM_SEED=\d+/);
    // The same seed with the coordinator's choice as it is passes: what failed was the choice.
    expect(runSimulation({ seed: Number(/^seed (\d+)/.exec(failure!)![1]) }).acked).toBeGreaterThan(0);
  });

  it('catches a coordinator that compares the last index before the last term: it elects a deposed leader whose longer log is of an older term', () => {
    // Its leader lacks records of the newer term that a majority holds, committed: lost, or refused as a cut of
    // committed records (the run never converges). Before deposedTail runs, 4 of 400 plain runs failed so.
    const failure = firstFailure(1_000, 50, { deposedTail: true, unsafeChoice: 'indexFirst' });
    expect(failure).toMatch(/^seed \d+: [^]*(lost|stored|applied a record|holds other|a committed record is never cut|no leader with every replica caught up)[^]*KEYSLICE_SIM_SEED=\d+/);
    // The same seed with the coordinator's comparison as it is passes (its writes may all have had unknown outcomes).
    expect(() => runSimulation({ seed: Number(/^seed (\d+)/.exec(failure!)![1]), deposedTail: true })).not.toThrow();
  });
});

/** The message of the first of `count` seeds from `from` whose run with `opts` fails its checks; undefined when none does. */
function firstFailure(from: number, count: number, opts: Omit<SimOptions, 'seed'>): string | undefined {
  for (let seed = from; seed < from + count; seed++) {
    try {
      runSimulation({ ...opts, seed });
    } catch (err) {
      if (!(err instanceof SimFailure)) throw err;
      return err.message;
    }
  }
  return undefined;
}

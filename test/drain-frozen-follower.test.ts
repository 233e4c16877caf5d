// A drain whose leadership handover completes while another replica the step keeps is frozen (docs/replication.md,
// "A kept replica that freezes"), through real processes: 4 slice nodes at R=3 known by address (no heartbeats: a
// frozen node keeps its link open and stays up for the coordinator), under a small write load. The node A leading most
// slices is drained; the moment the cluster map names another replica G as the leader of one of its slices S (the
// drain's handover), the third replica F that S keeps (in S's set before the drain, not the drain's new replica) is
// frozen (SIGSTOP). G's election completes without F (A, G and the new replica are a majority), at a new term whose
// barrier F cannot hold. Checked, while F stays frozen: A's replica leaves S within the silence bound
// (NODE_HEARTBEAT_TIMEOUT_MS, after which the step counts F as down), the handover's wait and election and two drain
// turns of the freeze (and a margin for a loaded machine), S's handover never given back to A (the step went on
// because F is silent, not because a handover's bound was spent: test/drain-handover-bound.test.ts covers that), led
// by G in the first map without A; then, thawed, the drain ends and every acknowledged write reads back. Before, the step waited
// for F without end: up (its link open) and not holding the new term's barrier, it was behind for good.
import { describe, expect, it } from 'vitest';
import { LEADER_ELECTION_TIMEOUT_MS, LEADER_HANDOVER_WAIT_MS_MAX, NODE_HEARTBEAT_TIMEOUT_MS, REBALANCE_INTERVAL_MS } from '../shared/limits.js';
import { drainFirstHandover, elasticClusters, persistedMap, replicaIndexes, waitFor, frozenStory, untilDrainEnds } from './elastic-fixture.js';
import { freezeProcess, isFrozen, thawProcesses } from './freeze.js';

const cluster = elasticClusters();
/** From the freeze until A's replica has left S: F counted down once silent NODE_HEARTBEAT_TIMEOUT_MS (from the first
 * question it left unanswered, the handover's Prepare or a Ping, soon after the freeze), the handover's catch-up wait
 * and election before that, and a drain turn before each step. */
const STEP_DONE_MS = NODE_HEARTBEAT_TIMEOUT_MS + LEADER_HANDOVER_WAIT_MS_MAX + LEADER_ELECTION_TIMEOUT_MS + 2 * REBALANCE_INTERVAL_MS;
/** What a loaded machine adds on this test's clock (as drain-handover-bound's): generous, as it costs nothing in what
 * the test catches (without the fix the step never ends while F is frozen). */
const LOADED_MARGIN_MS = 8_000;

describe('a drain step whose handover completed, a replica it keeps frozen', () => {
  it('nodes known by address: the drained replica leaves, led by the replica handed to, while the kept replica stays frozen; every acknowledged write reads back', async () => {
    await frozenStory(cluster, { nodes: 4 }, async ({ e, lines, frozen }) => {
      // The drain's first handover to a replica of the set before the drain (as drain-handover-bound watches it): a
      // slice S that A leads, still holding A's replica, whose map names another leader G.
      const { victim, before, a, setsBefore, slice, to, givenUpBefore } = await drainFirstHandover(e);
      // F: the replica S keeps from the set before, other than G (not the drain's new replica).
      const f = setsBefore[slice].find((n) => n !== a && n !== to)!;
      const fProcess = e.nodes.find((p) => p.url === before.nodes[f])!;
      frozen.push(fProcess.child.pid!);
      const frozenAt = performance.now();
      await freezeProcess(fProcess.child.pid!);
      // Timed on the map on disk (status waits for each node's load report, which a frozen node never sends). The first
      // set on disk without A is kept: the map names its leader, which routers send the slice's writes to.
      let doneMs = -1;
      let firstWithoutA: number[] | null = null;
      // Whether the map named A as S's leader again (the handover's election gave it back): then the step could go on
      // past the handover's bound, the case drain-handover-bound covers, not this one.
      let givenBack = false;
      const bound = STEP_DONE_MS + LOADED_MARGIN_MS;
      await waitFor(
        () => {
          const set = replicaIndexes(persistedMap(e))[slice];
          if (set[0] === a) givenBack = true;
          if (!set.includes(a)) {
            firstWithoutA ??= set;
            doneMs = performance.now() - frozenAt;
          }
          return doneMs >= 0;
        },
        `slice ${slice}'s drain step to end while its kept replica F (node ${f}) is frozen`,
        bound,
        () => `slice ${slice}'s replicas on disk ${JSON.stringify(replicaIndexes(persistedMap(e))[slice])} (A ${a}, G ${to}, frozen ${f}); the coordinator's last handover lines: ${lines.filter((l) => /handover|handing|handed/.test(l)).slice(-2).join(' | ')}`,
        3,
      );
      // Status only for the log line: while F is frozen with its link open, status waits LOAD_REPORT_TIMEOUT_MS (2 s)
      // for F's load report, which never comes.
      if (process.env.KEYSLICE_TEST_LOG) {
        const givenUp = (await e.status()).replication.leaders.handoversGivenUp - givenUpBefore;
        console.log(`drain of node ${a}: slice ${slice} handed to ${to}, its kept replica ${f} frozen; A left it ${doneMs.toFixed(0)} ms after the freeze (protocol ${STEP_DONE_MS} ms, bound ${bound} ms); first set without A ${JSON.stringify(firstWithoutA)}; ${givenUp} handovers given up (of any slice: another slice's target may be F)`);
      }
      expect(doneMs, `the drain step of slice ${slice} after its kept replica froze, ms`).toBeLessThanOrEqual(bound);
      expect(givenBack, `slice ${slice}'s handover given back to A (its step then went on past the handover's bound, not after a completed handover)`).toBe(false);
      expect(firstWithoutA, `slice ${slice}'s set once A left: led by G (${to}), keeping the frozen F (${f})`).toEqual([to, ...firstWithoutA!.slice(1)]);
      expect(firstWithoutA, `slice ${slice}'s set once A left keeps F (a majority without it holds the barrier)`).toContain(f);
      expect(isFrozen(fProcess.child.pid!), 'F is still frozen').toBe(true);
      // Thawed, the drain ends (slices whose new replica went to F waited for it) and nothing is lost.
      expect(thawProcesses(frozen).map(String), 'F thawed').toEqual([]);
      await untilDrainEnds(e, victim.node, 'the drain to end, every slice led by the three nodes left');
    });
  }, 120_000);
});

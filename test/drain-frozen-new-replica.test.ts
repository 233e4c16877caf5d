// A drain whose NEW replica's node freezes (docs/replication.md, "A new replica that freezes"), through real processes:
// 5 slice nodes at R=3 known by address (no heartbeats: a frozen node keeps its link open and stays up for the
// coordinator), under a small write load. The node A holding most replicas is drained; the moment the map on disk names
// a new replica (joining) on some node F for one of A's slices, F is frozen (SIGSTOP). Checked, while F stays frozen:
// the drain ends (every set on disk has 3 replicas, none on A) within a bound from the protocol constants (F counted
// down once silent NODE_HEARTBEAT_TIMEOUT_MS, its steps undone --move-undo-down-ms (2 s here) later, placed again on
// another node and completed: catch-up, handover and election) and a margin; no slice's set takes F in after the freeze, and the
// slices whose new replica was F end without it, each undone once (not placed on F again). Then, thawed, status says
// the drain is over, and every acknowledged write reads back. Before, the step waited for F without end: up (its link
// open), and undoStalledMoves undid a step only for a node that was not up (placement, by map.isUp, would have put the
// new replica back on it).
import { describe, expect, it } from 'vitest';
import { LEADER_ELECTION_TIMEOUT_MS, LEADER_HANDOVER_WAIT_MS_MAX, NODE_HEARTBEAT_TIMEOUT_MS, REBALANCE_INTERVAL_MS } from '../shared/limits.js';
import { elasticClusters, persistedMap, replicaIndexes, waitFor, frozenStory, untilDrainEnds } from './elastic-fixture.js';
import { freezeProcess, isFrozen, thawProcesses } from './freeze.js';

const cluster = elasticClusters();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The map's joining replicas (-1: none), as the file keeps them (absent in a map with none). */
const joiningOf = (m: ReturnType<typeof persistedMap>): number[] => (m as unknown as { joining?: number[] }).joining ?? m.owners.map(() => -1);
/** The coordinator's --move-undo-down-ms here: the story waits it out, and 2 s rather than the default
 * REPLICA_MOVE_UNDO_DOWN_MS (5 s) is the same path (undoStalledMoves) 3 s sooner; still above its floor
 * REPLICA_MOVE_UNDO_DOWN_MS_MIN, and long past the node's freeze by then (it counts down only once silent
 * NODE_HEARTBEAT_TIMEOUT_MS). */
const UNDO_DOWN_MS = 2_000;
/** From the freeze until the drain ends: F silent NODE_HEARTBEAT_TIMEOUT_MS (from the first question it left unanswered,
 * a catch-up Ping soon after the freeze), then down UNDO_DOWN_MS, a turn to see it and one to undo; then the new replica
 * placed at the next turn, and its step: the handover's catch-up wait and election where A led the slice, and a turn to
 * drop A. */
const DRAIN_DONE_MS = NODE_HEARTBEAT_TIMEOUT_MS + UNDO_DOWN_MS + LEADER_HANDOVER_WAIT_MS_MAX + LEADER_ELECTION_TIMEOUT_MS + 5 * REBALANCE_INTERVAL_MS;
/** What a loaded machine adds on this test's clock (as drain-frozen-follower's): generous, as it costs nothing in what
 * the test catches (without the fix the drain never ends while F is frozen). */
const LOADED_MARGIN_MS = 8_000;

describe('a drain step whose new replica freezes', () => {
  it('nodes known by address: the step is undone and placed on another node, the drain ends while the node stays frozen; every acknowledged write reads back', async () => {
    await frozenStory(cluster, { nodes: 5, coordinatorArgs: ['--move-undo-down-ms', String(UNDO_DOWN_MS)] }, async ({ e, lines, frozen }) => {
      const st = await e.status();
      const victim = st.nodes.reduce((x, y) => (y.replicas > x.replicas ? y : x));
      const a = persistedMap(e).nodes.indexOf(victim.node);
      const res = await e.post('drain', victim.node);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      // The drain's first new replica on disk, polled every few ms (a step waits for its change to settle, an election,
      // then for the new replica to catch up: hundreds of ms at least).
      let f = -1;
      const startedAt = performance.now();
      for (let i = 0; i < 10_000 && f < 0 && performance.now() - startedAt < 30_000; i++) {
        f = joiningOf(persistedMap(e)).find((n) => n >= 0) ?? -1;
        if (f < 0) await sleep(3);
      }
      expect(f, 'the drain named a new replica').toBeGreaterThanOrEqual(0);
      const before = persistedMap(e);
      const fProcess = e.nodes.find((p) => p.url === before.nodes[f])!;
      frozen.push(fProcess.child.pid!);
      const frozenAt = performance.now();
      await freezeProcess(fProcess.child.pid!);
      // The slices whose step to F had not ended when it froze (F their new replica still), and those F was in at all.
      const atFreeze = persistedMap(e);
      const toF = joiningOf(atFreeze).flatMap((n, s) => (n === f ? [s] : []));
      expect(toF.length, `slices whose new replica is on F (node ${f}) when it froze`).toBeGreaterThan(0);
      const withF = new Set(replicaIndexes(atFreeze).flatMap((set, s) => (set.includes(f) ? [s] : [])));
      // Timed on the map on disk (status waits for each node's load report, which a frozen node never sends).
      let doneMs = -1;
      let tookF = '';
      const bound = DRAIN_DONE_MS + LOADED_MARGIN_MS;
      await waitFor(
        () => {
          const sets = replicaIndexes(persistedMap(e));
          sets.forEach((set, s) => {
            if (!set.includes(f)) withF.delete(s);
            else if (!withF.has(s)) tookF ||= `slice ${s}: ${JSON.stringify(set)}`;
          });
          if (sets.every((set) => set.length === 3 && !set.includes(a))) doneMs = performance.now() - frozenAt;
          return doneMs >= 0 || tookF !== '';
        },
        `the drain of node ${a} to end while the new replica F (node ${f}) of slices ${toF.join(',')} is frozen`,
        bound,
        () => `sets on disk ${JSON.stringify(replicaIndexes(persistedMap(e)))} (A ${a}, frozen ${f}); the coordinator's last undo and placement lines: ${lines.filter((l) => /undid|placement|drain:/.test(l)).slice(-3).join(' | ')}`,
        3,
      );
      if (process.env.KEYSLICE_TEST_LOG) console.log(`drain of node ${a}: new replica ${f} of slices ${toF.join(',')} frozen; the drain ended ${doneMs.toFixed(0)} ms after the freeze (protocol ${DRAIN_DONE_MS} ms, bound ${bound} ms)`);
      expect(tookF, `no slice takes the frozen F (node ${f}) in while it is frozen`).toBe('');
      const end = replicaIndexes(persistedMap(e));
      // Nor back in the change that undid its step (undo and placement save one map, so the set on disk never showed a
      // slice without F): each slice whose new replica was F is undone once at most (one that caught up just before the
      // freeze completes), none again.
      const undone = lines.flatMap((l) => /undid the replica moves and drain steps of (\d+) slices/.exec(l)?.[1] ?? []).reduce((n, k) => n + Number(k), 0);
      expect(undone, 'drain steps undone').toBeGreaterThan(0);
      expect(undone, `drain steps undone (slices ${toF.join(',')} went to F): each once at most, F not chosen again`).toBeLessThanOrEqual(toF.length);
      expect(toF.filter((s) => !end[s].includes(f)).length, `slices of ${toF.join(',')} (new replica on F, node ${f}) that end without F: those undone`).toBe(undone);
      expect(doneMs, 'the drain after its new replica froze, ms').toBeLessThanOrEqual(bound);
      expect(isFrozen(fProcess.child.pid!), 'F is still frozen').toBe(true);
      // Thawed, F is an ordinary node again: status answers, says the drain is over, and nothing is lost.
      expect(thawProcesses(frozen).map(String), 'F thawed').toEqual([]);
      await untilDrainEnds(e, victim.node, 'status to say the drain is over, every slice led');
    });
  }, 150_000);
});

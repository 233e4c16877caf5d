// A cluster map that cannot be saved, met by the coordinator's own tick (docs/replication.md, "Drain": a failed save,
// MapSaveError, is logged and tried again; anything else is thrown), through real processes: 4 slice nodes at R=3 under
// writes, one of them (D) killed, then a drain of another (A). A's slices whose set lacks D wait for D to take their new
// replica (placement skips nodes that are down), the others for D to catch up; nothing is saved meanwhile. Then the map
// file's temporary path is made a folder, so that its write fails (the tests run as root: permissions would not stop
// it), and D is started again: the tick's placement (refillReplicas), the drain's steps and the elections D's return
// starts try to save and fail. They share the map's one save backoff (ReplicaLeaders.mapSaveDue), so after each wait
// whichever asks first makes the save that fails: which one is logged is a race, so any of them counts.
// Checked: the coordinator says so in its log, keeps serving (status answers, writes are acknowledged) with the map on
// disk as it was, and once the fault is gone saves at a following tick and the drain ends; every acknowledged write
// reads back. Then keyslice remove of a node that holds replicas, whose save fails the same way: the remove answers
// a retryable error and changes nothing (the node keeps its link and its replicas, which take writes), and a retry once
// the fault is gone removes it. And keyslice remove --forget-data (R=1) whose save fails: undone, the node keeps its
// slices and serves them (its link, closed for the hand-over, opened again), and a retry removes it.
import { lstatSync, mkdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import { LEADER_HANDOVER_BEFORE_CHANGE_MS } from '../shared/limits.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { bulk, drainedOff, replicaSets, elasticClusters, led, persistedMap, untilSpread, seen, waitBalanced, waitFor, WriteLoad } from './elastic-fixture.js';

const cluster = elasticClusters();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Tries, and ms, that makeSaveFault waits at most for a save in flight to rename its temporary file away. */
const SAVE_IN_FLIGHT_TRIES_MAX = 200;
const SAVE_IN_FLIGHT_WAIT_MS = 5_000;

/** Makes the map file's temporary path `tmp` a folder, so that the coordinator's next save fails at its open (EISDIR).
 * The coordinator may be mid-save right then: a save (shared/state-file.ts writeStateFile, synchronous) holds `tmp` as
 * a plain file from its open to its rename, an fsync between (tens of ms under load), and mkdir meets it (EEXIST). So
 * while a plain file is there the mkdir is tried again, bounded in tries and time: a save renames its file away, and
 * once the mkdir succeeds no save can be in flight (each one after fails at its open). A plain file that stays (a save
 * that leaves its temporary file behind), or a folder already there, fails the test. */
async function makeSaveFault(tmp: string): Promise<void> {
  const until = performance.now() + SAVE_IN_FLIGHT_WAIT_MS;
  for (let tries = 1; ; tries++) {
    try {
      mkdirSync(tmp);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let plainFile = false;
      try {
        plainFile = lstatSync(tmp).isFile();
      } catch (gone) {
        // Renamed away between the mkdir and the look: tried again at once (still bounded in tries).
        if ((gone as NodeJS.ErrnoException).code === 'ENOENT' && tries < SAVE_IN_FLIGHT_TRIES_MAX) continue;
        throw gone;
      }
      if (!plainFile || tries >= SAVE_IN_FLIGHT_TRIES_MAX || performance.now() > until) {
        throw new Error(`${tmp} cannot be made a folder after ${tries} tries: ${plainFile ? 'the coordinator\'s temporary file stays there' : 'something other than a plain file is there'}`, { cause: err });
      }
    }
    await sleep(10);
  }
}

/** Each story's start: 4 slice nodes at R=3 with replicas and leaderships spread and every change settled, 100 bulk
 * items written, and writers under way. The fault is the map file's temporary path made a folder (makeSaveFault); end()
 * removes it if still there and stops the writers, whatever the removal throws (they would go on against the next
 * test's cluster). */
async function loadedCluster(log?: (line: string) => void) {
  const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3, log });
  await untilSpread(e, 90_000);
  await bulk(e, 100);
  const load = new WriteLoad(e.client, 'elastic', 4, 4);
  const tmp = join(e.dataDir, 'coordinator', 'cluster-map.json.tmp');
  let faulty = false;
  return {
    e,
    load,
    mapFile: join(e.dataDir, 'coordinator', 'cluster-map.json'),
    makeFault: async () => {
      await makeSaveFault(tmp);
      faulty = true;
    },
    clearFault: () => {
      rmdirSync(tmp);
      faulty = false;
    },
    end: async () => {
      try {
        if (faulty) rmdirSync(tmp);
      } finally {
        await load.stop();
      }
    },
  };
}

describe('a cluster map save that fails at the coordinator\'s tick', () => {
  it('is logged and tried again: the coordinator keeps serving, and saves once the map can be written', async () => {
    const lines: string[] = [];
    const { e, load, mapFile, makeFault, clearFault, end } = await loadedCluster((l) => lines.push(l));
    try {
      await sleep(300);
      const [a, d] = [e.nodes[0], e.nodes[3]];
      await stopProcess(d.child, 'SIGKILL');
      await waitFor(async () => {
        const st = await e.status();
        return led(st) && st.replication.leaders.unsettled === 0 && !st.nodes.find((n) => n.node === d.url)!.up;
      }, 'D down and every slice led by the 3 nodes left', 30_000, seen(e));
      const res = await e.post('drain', a.url);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      // At rest: each of A's slices waits on D (its new replica, or its catch-up), every change so far settled.
      await waitFor(
        async () => {
          const st = await e.status();
          const waits = st.moves.waiting.map((w) => w.why);
          return (
            led(st) &&
            st.replication.leaders.unsettled === 0 &&
            st.moves.waitingSlices === st.nodes.find((n) => n.node === a.url)!.replicas &&
            waits.some((w) => /no active node that is up is left to take its new replica/.test(w)) &&
            waits.every((w) => /no active node that is up is left|has not caught up yet/.test(w))
          );
        },
        "each of A's slices to wait on D, every change settled",
        60_000,
        seen(e),
      );
      // The fault first, then the map as it is: a save just before (the tick records settled changes a tick after
      // status says them settled) would otherwise make the file differ from what was read.
      await makeFault();
      const onDisk = readFileSync(mapFile, 'utf8');
      const stBefore = await e.status();
      const aReplicas = stBefore.nodes.find((n) => n.node === a.url)!.replicas;
      const failedAt = lines.length;
      await e.addNode(undefined, Number(new URL(d.url).port), d.name);
      // The tick tries to record a change (A's slices' new replica on D, a drain step, an election) and fails to save it.
      await waitFor(() => lines.slice(failedAt).some((l) => /cannot record .* in the cluster map \(cannot write the cluster map .*\)/.test(l)), "the tick's failed save to be logged", 30_000, seen(e));
      // Serving meanwhile: status answers, writes are acknowledged, and nothing of the failed changes is in force.
      const acks = load.acks;
      await sleep(1_500);
      expect(load.acks, 'writes acknowledged while the map cannot be saved').toBeGreaterThan(acks);
      const st = await e.status();
      expect(st.nodes.find((n) => n.node === d.url)!.up, 'D is back').toBe(true);
      expect(st.epoch, 'no change in force (a failed save leaves the map as it was)').toBe(stBefore.epoch);
      expect(st.nodes.find((n) => n.node === a.url)!.replicas, "A's replicas are all still there").toBe(aReplicas);
      expect(readFileSync(mapFile, 'utf8'), 'the map on disk is as it was').toBe(onDisk);
      clearFault();
      // Saved at a following tick: the drain goes on and ends, with A holding no replica.
      await waitFor(async () => drainedOff(a.url)(await e.status()), 'the drain of A to end once the map can be saved', 60_000, seen(e));
      const after = persistedMap(e);
      expect(after.owners.concat(after.followers.flat()).includes(after.nodes.indexOf(a.url)), 'A holds no replica in the map on disk').toBe(false);
      await load.finish(1_000, 100);
      if (process.env.KEYSLICE_TEST_LOG) console.log(`failed saves logged: ${lines.filter((l) => /cannot (record|write)/.test(l)).length}; ${load.acks} updates acknowledged, ${load.errors.length} failed`);
    } finally {
      await end();
    }
  }, 180_000);

  it('keyslice remove whose save fails answers a retryable error and leaves the node serving; a retry removes it', async () => {
    const { e, load, mapFile, makeFault, clearFault, end } = await loadedCluster();
    try {
      const a = e.nodes[0];
      await makeFault();
      // Read once the fault is in place (see above).
      const onDisk = readFileSync(mapFile, 'utf8');
      const before = (await e.status()).nodes.find((n) => n.node === a.url)!;
      // Its leaderships are handed over first: the first handover's save fails too, and the remove is refused then,
      // not after waiting out LEADER_HANDOVER_BEFORE_CHANGE_MS for handovers that cannot be recorded (and then failing
      // its own save).
      const asked = performance.now();
      const res = await e.post('remove', a.url);
      const answeredMs = performance.now() - asked;
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(answeredMs, 'ms the failed remove took').toBeLessThan(LEADER_HANDOVER_BEFORE_CHANGE_MS);
      expect(JSON.stringify(res.body)).toMatch(/"code":"Unavailable".*was not removed: cannot write the cluster map .*nothing was changed.*retry/);
      // Nothing changed: A is still in the cluster, up (its link open), with all its replicas; the map on disk as it was.
      const st = await e.status();
      const still = st.nodes.find((n) => n.node === a.url);
      expect(still, 'A is still in the cluster').toBeDefined();
      expect(still!.up, 'A is still up (its link open)').toBe(true);
      expect(still!.replicas, "A's replicas are all still there").toBe(before.replicas);
      expect(readFileSync(mapFile, 'utf8'), 'the map on disk is as it was').toBe(onDisk);
      // Serving: writes are acknowledged, A's replicas take them (its held items grow), every bulk item reads back.
      const acks = load.acks;
      await bulk(e, 100); // the same ids again: each is rewritten, on A's replicas too
      // The writers' updates acknowledged since the remove answered: polled (most come while bulk runs), bounded.
      await waitFor(() => load.acks > acks, 'writes acknowledged after the failed remove', 15_000, () => load.describe());
      for (let i = 0; i < 100; i += 10) expect(await e.client.getItem('elastic', `bulk-${i}`), `bulk-${i} reads`).not.toBeNull();
      const held = (await e.status()).nodes.find((n) => n.node === a.url)!.heldItems;
      const extra = Array.from({ length: 40 }, (_, i) => e.client.putItem('elastic', { id: `after-${i}` }));
      await Promise.all(extra);
      await waitFor(async () => (await e.status()).nodes.find((n) => n.node === a.url)!.heldItems > held, "A's replicas to take the new writes", 15_000, seen(e));
      clearFault();
      // The retry once the fault is gone removes it; its replicas are placed again on the 3 nodes left.
      const retried = await e.post('remove', a.url);
      expect(retried.status, JSON.stringify(retried.body)).toBe(200);
      expect((await e.status()).nodes.map((n) => n.node)).not.toContain(a.url);
      await waitFor(() => replicaSets(e).every((set) => set.length === 3 && !set.includes(a.url)), 'every slice to have 3 replicas without A', 60_000, seen(e));
      await load.finish(1_000, 100);
    } finally {
      await end();
    }
  }, 180_000);

  it('keyslice remove --forget-data whose save fails answers a retryable error, the node keeps its slices and serves them', async () => {
    // R=1: the node's slices are handed, empty, to the others, then the map that gives them to them cannot be saved.
    // Undone: the targets forget them and the node's link (closed for the hand-over) is opened again.
    const e = await cluster({ nodes: 3, slices: 12 });
    await waitBalanced(e, 60_000);
    await bulk(e, 60);
    const c = e.nodes[2];
    const tmp = join(e.dataDir, 'coordinator', 'cluster-map.json.tmp');
    let faulty = false;
    try {
      const before = (await e.status()).nodes.find((n) => n.node === c.url)!;
      expect(before.slices).toBeGreaterThan(0);
      await makeSaveFault(tmp);
      faulty = true;
      const mapFile = join(e.dataDir, 'coordinator', 'cluster-map.json');
      const onDisk = readFileSync(mapFile, 'utf8');
      const res = await fetch(`${e.coordinator.url}/cluster/remove`, { method: 'POST', body: JSON.stringify({ node: c.url, forgetData: true }), signal: AbortSignal.timeout(10_000) });
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(JSON.stringify(body)).toMatch(/"code":"Unavailable".*was not removed: cannot write the cluster map .*nothing was changed/);
      expect(readFileSync(mapFile, 'utf8'), 'the map on disk is as it was').toBe(onDisk);
      await waitFor(async () => (await e.status()).nodes.find((n) => n.node === c.url)?.up === true, 'C up again (its link opened again)', 15_000, seen(e));
      expect((await e.status()).nodes.find((n) => n.node === c.url)!.slices, 'C owns its slices still').toBe(before.slices);
      // Its data was not given up: every item reads back, those on C's slices too.
      for (let i = 0; i < 60; i++) expect(await e.client.getItem('elastic', `bulk-${i}`), `bulk-${i} reads`).not.toBeNull();
      rmdirSync(tmp);
      faulty = false;
      const retried = await fetch(`${e.coordinator.url}/cluster/remove`, { method: 'POST', body: JSON.stringify({ node: c.url, forgetData: true }), signal: AbortSignal.timeout(10_000) });
      expect(retried.status, JSON.stringify(await retried.json())).toBe(200);
      const st = await e.status();
      expect(st.nodes.map((n) => n.node)).not.toContain(c.url);
      expect(st.nodes.reduce((n, x) => n + x.slices, 0), 'every slice went to the 2 nodes left').toBe(12);
    } finally {
      if (faulty) rmdirSync(tmp);
    }
  }, 120_000);
});

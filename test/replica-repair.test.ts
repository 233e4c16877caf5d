// Repair of replicated slices through real processes (docs/replication.md): slice nodes that register
// themselves, R=3, every slice's replica set read back from the coordinator's cluster map.
//  - A node killed for good under writes is removed automatically after --remove-down-after-ms; its
//    slices are back to 3 replicas on the others, and nothing acknowledged is lost. With two of three
//    nodes down, nothing is removed (the one left is no majority), and status says why.
//  - keyslice drain of a node that leads and follows slices, under writes: each slice gets a replica on
//    another node, which catches up, before the draining node's replica leaves the set; nothing is
//    lost, the node ends holding no replica and counted by no change that has not settled, so it is removed at
//    once; stopped, the slices go on.
//  - A node SIGKILLed during a drain, before the drain's new replicas on it caught up: those are undone (the
//    slices back to 3 replicas on live nodes) and not placed on it again while it is down; once it is back the
//    drain finishes; nothing acknowledged is lost.
//  - keyslice remove of a node while another is down: refused (ReplicaMajorityDown, nothing changed) when some slice
//    would keep fewer replicas that are up than a majority of its set; with --force it is removed, those slices
//    have no leader that commits (status counts none of them led; one whose leader stays in the set leads on,
//    counted apart) until the node that is down is back, and then nothing acknowledged is lost.
//  - keyslice drain while another node is down: slices whose set holds the dead node's replica finish their drain
//    step without it; those that need a node up to take their new replica wait, and status and keyslice drain say
//    which and why; once the node is back the drain finishes; nothing acknowledged is lost.
//  - Items written at R=1 are kept when the cluster grows to R=2 and 3 (they were dropped: the first
//    replica of a slice started empty).
//  - Nodes that join one by one under writes: the first leads every slice at first, then the
//    leaderships are handed over until each node leads its share; nothing is lost.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { REPLICA_MOVE_UNDO_DOWN_MS_MIN } from '../shared/limits.js';
import { bulk, drainedOff, elasticClusters, led, persistedMap, replicaIndexes, replicaSets, seen, untilLed, waitFor, writesResent, WriteLoad, type Elastic } from './elastic-fixture.js';

const cluster = elasticClusters();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** --remove-down-after-ms of the first story, which waits it out twice: past its floor (REMOVE_DOWN_AFTER_MS_MIN) by a
 * second, the time the story checks that the node is still a member before it (it was 3 s). */
const REMOVE_AFTER_MS = 2_000;
/** keyslice drain's --timeout in the story of a drain with another node down, which waits it out. */
const DRAIN_GIVE_UP_S = 3;

/** Waits until the replica moves that the nodes' joining started are done and every change settled: the 4th
 * node to join takes its share of replicas (docs/replication.md), and the stories below start from a settled
 * cluster, whose replica sets they read before their kill or drain. */
async function rebalanced(e: Elastic, timeoutMs = 60_000): Promise<void> {
  await waitFor(async () => {
    const st = await e.status();
    return st.moves.pending === 0 && st.replication.leaders.unsettled === 0 && st.replication.leaders.moving === 0;
  }, 'the replica moves onto the nodes that joined to end', timeoutMs, seen(e));
}

/** 300 items, then 4 writers updating them; the victim is a node that leads slices. */
async function underWrites(e: Elastic) {
  await rebalanced(e);
  await untilLed(e);
  await bulk(e, 300);
  const load = new WriteLoad(e.client, 'elastic', 4, 8);
  await sleep(500);
  const st = await e.status();
  const victim = e.nodes.find((n) => (st.nodes.find((x) => x.node === n.url)?.slices ?? 0) > 0)!;
  return { load, victim };
}

describe('repair of replicated slices (R=3)', () => {
  it('a node killed for good under writes is removed after --remove-down-after-ms; its slices are back to 3 replicas, nothing is lost', async () => {
    const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3, coordinatorArgs: ['--remove-down-after-ms', String(REMOVE_AFTER_MS)] });
    const { load, victim } = await underWrites(e);
    expect(replicaSets(e).some((set) => set.includes(victim.url))).toBe(true);
    await stopProcess(victim.child, 'SIGKILL');
    const killedAt = Date.now();
    // Not before its time (the clock starts when the coordinator sees it down, after the kill): still a member
    // a second before --remove-down-after-ms has passed since the kill.
    await sleep(Math.max(0, killedAt + REMOVE_AFTER_MS - 1_000 - Date.now()));
    expect((await e.status()).nodes.some((n) => n.node === victim.url)).toBe(true);
    await waitFor(async () => !(await e.status()).nodes.some((n) => n.node === victim.url), 'the dead node to be removed automatically', 30_000, seen(e));
    await untilLed(e);
    await sleep(1_000);
    await load.stop();
    expect(load.acks).toBeGreaterThan(0);
    await load.verify(300);
    if (process.env.KEYSLICE_TEST_LOG) console.log(`auto-removal under writes: ${load.acks} updates acknowledged, ${load.errors.length} failed`);
    for (const set of replicaSets(e)) {
      expect(set.length).toBe(3);
      expect(new Set(set).size).toBe(3);
      expect(set).not.toContain(victim.url);
    }
    expect((await e.status()).replication.factor).toBe(3);

    // Two of the three left die at once: the one left is no majority of any slice, so neither is removed.
    const [a, b] = e.nodes.filter((n) => n !== victim);
    const killedAt2 = Date.now();
    await Promise.all([stopProcess(a.child, 'SIGKILL'), stopProcess(b.child, 'SIGKILL')]);
    // The coordinator records why it did not remove a node only once the node has been down --remove-down-after-ms
    // and the removal was tried (membership.ts autoRemove): the moment it would have been removed. Waiting for that
    // on both, rather than a fixed REMOVE_AFTER_MS + 3 s, checks the same thing; a node removed instead never shows it.
    let after: ClusterStatus | undefined;
    await waitFor(async () => {
      after = await e.status();
      return [a, b].every((n) => /not removed automatically/.test(after!.nodes.find((x) => x.node === n.url)?.problem ?? ''));
    }, 'both dead nodes to be refused automatic removal', 30_000, seen(e));
    expect(Date.now() - killedAt2).toBeGreaterThanOrEqual(REMOVE_AFTER_MS);
    for (const n of [a, b]) {
      const r = after!.nodes.find((x) => x.node === n.url);
      expect(r, `${n.url} is still a member`).toBeDefined();
      expect(r!.problem).toMatch(/not removed automatically: .*(no elected leader|not a majority)/);
    }
  }, 90_000);

  it('keyslice drain under writes: every slice gets a caught-up replica elsewhere before the node leaves its set; nothing is lost', async () => {
    const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3 });
    const { load, victim } = await underWrites(e);
    const held = replicaSets(e).filter((set) => set.includes(victim.url)).length;
    const ledByVictim = replicaSets(e).filter((set) => set[0] === victim.url).length;
    expect(held).toBeGreaterThan(0);
    const before = (await e.status()).replication.leaders;
    const resentBefore = await writesResent(e);
    const cli = join(import.meta.dirname, '..', 'dist', 'coordinator', 'cli', 'cli.js');
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'drain', victim.url, '--url', e.coordinator.url, '--timeout', '60'], { timeout: 70_000 });
    expect(stdout).toMatch(new RegExp(`draining ${victim.url} \\(${held} slices`));
    expect(stdout).toMatch(/holds no slices; "keyslice remove/);
    // Done only once no replica-set change that took its replicas out still counts it: a remove at once is not refused
    // (before, drain ended at 0 replicas, and a remove right after could be: "retry in a moment", InvalidState).
    const removed = await e.post('remove', victim.url);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    const after = await e.status();
    expect(after.nodes.map((n) => n.node)).not.toContain(victim.url);
    for (const set of replicaSets(e)) {
      expect(set.length).toBe(3);
      expect(new Set(set).size).toBe(3);
      expect(set).not.toContain(victim.url);
    }
    await untilLed(e);
    // What the drain's replica-set changes cost: writes sent again after an unknown outcome, and elections.
    const resent = (await writesResent(e)) - resentBefore;
    const leaders = (await e.status()).replication.leaders;
    const elections = leaders.elections - before.elections;
    // Each slice's two changes (a replica added, the drained one taken out) keep its leader unless the drained node
    // led it: its leader leads on at a new term. Before, both were elections (2 per replica drained, 18 for 9).
    expect(elections, `elections for ${held} replicas drained, ${ledByVictim} of them leaders`).toBeLessThan(held + ledByVictim);
    await sleep(500);
    // The drained and removed node can be stopped: the writes go on without it.
    await stopProcess(victim.child, 'SIGKILL');
    await load.finish(1_500, 300);
    if (process.env.KEYSLICE_TEST_LOG) {
      console.log(
        `drain under writes: ${load.acks} updates acknowledged, ${load.errors.length} failed (${[...new Set(load.errors.map((x) => x.message.slice(0, 80)))].join(' | ')}); ` +
          `drained ${held} replicas (${ledByVictim} leaders): ${resent} writes sent again after an unknown outcome, ${elections} elections, ${(leaders.ledOn ?? 0) - (before.ledOn ?? 0)} changes led on`,
      );
    }
  }, 90_000);

  it('a node killed during a drain, before the drain\'s new replicas on it caught up: those are undone, not put back on it, and the drain finishes once it is back; nothing is lost', async () => {
    // The undo bound at its floor, 1 s (--move-undo-down-ms; 5 s by default, which replica-map.test.ts and the
    // simulation keep): the story waits it out, and the node stays down throughout, so no restart races it.
    const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3, coordinatorArgs: ['--move-undo-down-ms', String(REPLICA_MOVE_UNDO_DOWN_MS_MIN)] });
    const { load, victim: drained } = await underWrites(e);
    const before = replicaSets(e);
    expect((await e.post('drain', drained.url)).status).toBe(200);
    // The drain's first step places a new replica of each slice the drained node holds (R + 1); the node that got
    // most of them is SIGKILLed as soon as they are seen, long before any can catch up (each needs the step's
    // change to settle and a catch-up check on the coordinator's 500 ms tick).
    let added = new Map<string, number[]>();
    for (const until = Date.now() + 30_000; added.size === 0 && Date.now() < until; await sleep(2)) {
      let sets: string[][];
      try {
        sets = replicaSets(e);
      } catch {
        continue; // the map file is being replaced
      }
      added = new Map();
      sets.forEach((set, s) => {
        for (const url of set) if (!before[s].includes(url)) added.set(url, [...(added.get(url) ?? []), s]);
      });
    }
    expect(added.size, 'the drain placed new replicas').toBeGreaterThan(0);
    const [killedUrl, steps] = [...added].reduce((a, b) => (b[1].length > a[1].length ? b : a));
    const killed = e.nodes.find((n) => n.url === killedUrl)!;
    await stopProcess(killed.child, 'SIGKILL');
    const killedAt = Date.now();
    // Within the undo bound (1 s down) plus the undo's change: each of those slices is back to its 3 replicas on
    // live nodes (its replica on the draining node kept: with 4 nodes no other node is up to take it), with a leader.
    await waitFor(
      async () => {
        const st = await e.status();
        const sets = replicaSets(e);
        return led(st) && steps.every((s) => sets[s].length === 3 && !sets[s].includes(killedUrl) && sets[s].includes(drained.url));
      },
      `the drain's new replicas on the killed node (slices ${steps.join(', ')}) to be undone`,
      30_000,
      seen(e),
    );
    const undoneMs = Date.now() - killedAt;
    const st = await e.status();
    expect(st.replication.leaders.movesUndone).toBeGreaterThanOrEqual(steps.length);
    // Not put back while the node is down: a few ticks later none of those slices holds a replica on it.
    await sleep(1_500);
    for (const s of steps) expect(replicaSets(e)[s]).not.toContain(killedUrl);
    // Back (same folder and port), it takes the drain's new replicas, and the drain finishes: every slice has 3
    // replicas on distinct live nodes, none on the drained one.
    await e.addNode(undefined, Number(new URL(killedUrl).port), killed.name);
    await waitFor(async () => {
      const now = await e.status();
      const r = now.nodes.find((x) => x.node === drained.url)!;
      return led(now) && r.replicas === 0 && now.replication.leaders.unsettled === 0;
    }, 'the drain to finish once the killed node is back', 60_000, seen(e));
    for (const set of replicaSets(e)) {
      expect(set.length).toBe(3);
      expect(new Set(set).size).toBe(3);
      expect(set).not.toContain(drained.url);
    }
    await sleep(500);
    await load.stop();
    expect(load.acks).toBeGreaterThan(0);
    await load.verify(300);
    if (process.env.KEYSLICE_TEST_LOG) {
      console.log(`node killed during a drain: ${steps.length} drain steps onto it undone ${undoneMs} ms after the kill; ${load.acks} updates acknowledged, ${load.errors.length} failed`);
    }
  }, 150_000);

  it('keyslice remove refuses when a slice would keep fewer live replicas than a majority; --force removes the node, and those slices elect once their replica that is down is back; nothing is lost', async () => {
    const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3 });
    await rebalanced(e);
    await untilLed(e);
    await bulk(e, 100);
    const load = new WriteLoad(e.client, 'elastic', 2, 8);
    // Two nodes that share slices, some of them led by a third node: removing one with the other down leaves those
    // slices one replica up of 3, and where that one leads it leads on (in the new set) but can commit nothing.
    // Of such pairs, the one that shares most slices.
    const sets = replicaSets(e);
    const shared = (a: string, b: string) => sets.filter((set) => set.includes(a) && set.includes(b)).length;
    const ledByThird = (a: string, b: string) => sets.filter((set) => set.includes(a) && set.includes(b) && set[0] !== a && set[0] !== b).length;
    const pairs = e.nodes.flatMap((a) => e.nodes.filter((b) => b !== a && ledByThird(a.url, b.url) > 0).map((b) => [a, b] as const));
    expect(pairs.length).toBeGreaterThan(0);
    const [removed, down] = pairs.reduce((p, q) => (shared(q[0].url, q[1].url) > shared(p[0].url, p[1].url) ? q : p));
    const stranded = shared(removed.url, down.url);
    expect(stranded).toBeGreaterThan(0);
    await stopProcess(down.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).nodes.find((n) => n.node === down.url)?.up === false, 'the killed node to be seen down', 30_000, seen(e));
    // Every slice still has a majority of its replicas up, so a leader: the refusal below is for the removal alone.
    await untilLed(e);
    const cli = join(import.meta.dirname, '..', 'dist', 'coordinator', 'cli', 'cli.js');
    const run = (args: string[]) =>
      promisify(execFile)(process.execPath, [cli, ...args, '--url', e.coordinator.url], { timeout: 20_000 }).then(
        (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
        (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
      );
    const refused = await run(['remove', removed.url]);
    expect(refused.code, refused.stdout).toBe(1);
    expect(refused.stderr).toMatch(new RegExp(`ReplicaMajorityDown: removing ${removed.url} would leave ${stranded} slices? without a majority of live replicas \\(e\\.g\\. slice \\d+: 1 of its 3 replicas up besides`));
    expect(refused.stderr).toContain(`until ${down.url} is back`);
    expect(refused.stderr).toContain('--force');
    // Nothing changed: the node is a member and holds its replicas.
    expect((await e.status()).nodes.find((n) => n.node === removed.url)?.status).toBe('active');
    expect(replicaSets(e).filter((set) => set.includes(removed.url)).length).toBe(sets.filter((set) => set.includes(removed.url)).length);

    // Per slice, from the persisted map: the largest term any election used or a leader led on at, and the last Lead or
    // LeadOn recorded ([term, node index]).
    const before = persistedMap(e);
    const forced = await run(['remove', removed.url, '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain(`removed ${removed.url}`);
    expect((await e.status()).nodes.map((n) => n.node)).not.toContain(removed.url);
    await stopProcess(removed.child, 'SIGKILL');
    // Those slices' changes cannot settle while the node that is down stays down: their elections and their leaders'
    // commits (a leader in the new set leads on) need a majority of the set before it, which only it can complete. The
    // other slices' changes settle.
    await waitFor(async () => (await e.status()).replication.leaders.unsettled === stranded, `${stranded} changes left unsettled`, 20_000, seen(e));
    // Status counts none of them led (they take no write), the other slices led; those whose leader stayed in the
    // set and leads on are counted apart (status counted them led, as if they took writes).
    await waitFor(async () => {
      const l = (await e.status()).replication.leaders;
      return l.led === l.replicated - stranded;
    }, `every slice but the ${stranded} stranded ones to be led`, 20_000, seen(e));
    await sleep(1_000);
    const { leaders } = (await e.status()).replication;
    expect(leaders.unsettled).toBe(stranded);
    expect(leaders.led).toBe(leaders.replicated - stranded);
    // Those counted apart are the stranded slices whose leader led on at the change (a LeadOn recorded at a term newer
    // than any before it, and no election since). Only a leader the coordinator heard from within 1.5 ping intervals
    // leads on (failover.ts changedTo); the others elect, which cannot finish. Under load, all of them may elect (seen
    // at load average 27: status counted none apart, and `> 0` failed), so the count is checked against the map.
    const after = persistedMap(e);
    const afterSets = replicaIndexes(after);
    const strandedSlices = sets.flatMap((set, slice) => (set.includes(removed.url) && set.includes(down.url) ? [slice] : []));
    const ledOn = strandedSlices.filter((slice) => {
      const l = after.lastLead[slice];
      return l !== null && l[0] > before.termsUsed[slice] && l[0] === after.termsUsed[slice] && afterSets[slice].includes(l[1]);
    });
    expect(leaders.unsettledLed, `stranded slices ${strandedSlices.join(', ')}; led on: ${ledOn.join(', ')}`).toBe(ledOn.length);
    // ...and once it is back they do, and every slice is back to 3 replicas without the removed node.
    await e.addNode(undefined, Number(new URL(down.url).port), down.name);
    await waitFor(async () => {
      const st = await e.status();
      return led(st) && st.replication.leaders.unsettled === 0 && replicaSets(e).every((set) => set.length === 3 && !set.includes(removed.url));
    }, 'every slice to have a leader and 3 replicas once the node is back', 60_000, seen(e));
    await sleep(500);
    await load.stop();
    expect(load.acks).toBeGreaterThan(0);
    await load.verify(100);
    if (process.env.KEYSLICE_TEST_LOG) console.log(`forced removal: ${stranded} slices stranded until the node was back; ${load.acks} updates acknowledged, ${load.errors.length} failed`);
  }, 120_000);

  it('keyslice drain with another node down: slices holding a replica on the dead node drain without it, the others wait and say why; back, the drain finishes; nothing is lost', async () => {
    const e = await cluster({ nodes: 4, slices: 12, replicationFactor: 3 });
    const { load, victim: drained } = await underWrites(e);
    const dead = e.nodes.find((n) => n !== drained)!;
    await stopProcess(dead.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).nodes.find((n) => n.node === dead.url)?.up === false, 'the killed node to be seen down', 30_000, seen(e));
    await untilLed(e);
    const sets = replicaSets(e);
    const withDead = sets.flatMap((set, s) => (set.includes(drained.url) && set.includes(dead.url) ? [s] : []));
    const withoutDead = sets.flatMap((set, s) => (set.includes(drained.url) && !set.includes(dead.url) ? [s] : []));
    expect(withDead.length).toBeGreaterThan(0);
    expect(withoutDead.length).toBeGreaterThan(0);
    const cli = join(import.meta.dirname, '..', 'dist', 'coordinator', 'cli', 'cli.js');
    // keyslice drain gives up after --timeout and then says why the slices wait (cli.ts follow: at its give-up, not only
    // past STALLED_SAY_WHY_MS): those slices wait from the drain's first tick (500 ms), so 3 s is enough to see them and
    // the drain's own wait no longer paces the story (it was 15 s, then 6).
    const drain = await promisify(execFile)(process.execPath, [cli, 'drain', drained.url, '--url', e.coordinator.url, '--timeout', String(DRAIN_GIVE_UP_S)], { timeout: 30_000 }).then(
      () => null,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    // With 4 nodes, one draining and one dead, the slices that do not hold a replica on the dead node have no node up
    // to take their new replica: the drain cannot finish, and keyslice drain says why when it gives up waiting.
    expect(drain?.code).toBe(1);
    expect(drain?.stderr).toMatch(new RegExp(`not finished after ${DRAIN_GIVE_UP_S} s \\(\\d+/\\d+ slices`));
    expect(drain?.stderr).toContain(`no active node that is up is left to take its new replica (${dead.url} is down)`);
    // The slices that hold a replica on the dead node are drained without it (before, they waited for it to say it
    // caught up): the drained node's replica left, the new one caught up, the dead one kept.
    await waitFor(async () => {
      const now = replicaSets(e);
      return withDead.every((s) => now[s].length === 3 && !now[s].includes(drained.url) && now[s].includes(dead.url));
    }, `the drain steps of slices ${withDead.join(', ')} to finish while ${dead.url} is down`, 40_000);
    const st = await e.status();
    expect(st.moves.waitingSlices).toBe(withoutDead.length);
    expect(st.moves.waiting.length).toBeGreaterThan(0); // else the checks below run on nothing
    for (const w of st.moves.waiting) {
      expect(withoutDead).toContain(w.slice);
      expect(w.node).toBe(drained.url);
      expect(w.why).toBe(`no active node that is up is left to take its new replica (${dead.url} is down)`);
    }
    // Back, it takes the new replicas of the slices that waited, and the drain finishes.
    await e.addNode(undefined, Number(new URL(dead.url).port), dead.name);
    await waitFor(async () => drainedOff(drained.url)(await e.status()), 'the drain to finish once the dead node is back', 60_000, seen(e));
    for (const set of replicaSets(e)) {
      expect(set.length).toBe(3);
      expect(set).not.toContain(drained.url);
    }
    await sleep(500);
    await load.stop();
    expect(load.acks).toBeGreaterThan(0);
    await load.verify(300);
    if (process.env.KEYSLICE_TEST_LOG) console.log(`drain with a node down: ${withDead.length} slices drained without it, ${withoutDead.length} waited; ${load.acks} updates acknowledged, ${load.errors.length} failed`);
  }, 150_000);

  it('leaderships spread over nodes that join one by one, under writes; nothing is lost', async () => {
    // Two nodes (R=2 by default), then a third under writes: R=3, and it takes its share of leaderships.
    const e = await cluster({ nodes: 2, slices: 12, replicationFactor: 'auto' });
    const load = new WriteLoad(e.client, 'elastic', 4, 8);
    await sleep(500);
    await e.addNode();
    let st: ClusterStatus | undefined;
    await waitFor(async () => (st = await e.status()).nodes.every((n) => n.slices === 4), 'each node to lead 4 slices', 30_000, seen(e));
    expect(st!.replication.leaders.handovers).toBeGreaterThan(0);
    await untilLed(e);
    await sleep(500);
    await load.stop();
    expect(load.acks).toBeGreaterThan(0);
    await load.verify(0);
    if (process.env.KEYSLICE_TEST_LOG) console.log(`leadership rebalancing under writes: ${load.acks} updates acknowledged, ${load.errors.length} failed; ${st!.replication.note}`);
  }, 90_000);

  it('a node restarted after a SIGKILL gets its share of leaderships back in a few map changes, not one per slice', async () => {
    // Under a SIGKILL every 3 s, handing leaderships back one map change (and 8 slices) at a time took tens of
    // seconds, so one node led nearly every slice and each kill failed them all over at once (bench/FAILOVER.md).
    const e = await cluster({ nodes: 3, slices: 192, replicationFactor: 3 });
    await untilLed(e, 60_000);
    await waitFor(async () => (await e.status()).nodes.every((n) => n.slices === 64), 'each node to lead 64 slices', 60_000, seen(e));
    const victim = e.nodes[0];
    await stopProcess(victim.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).nodes.find((n) => n.node === victim.url)?.slices === 0, 'the killed node\'s slices to be led by the others', 30_000, seen(e));
    await untilLed(e);
    const before = (await e.status()).epoch;
    await e.addNode(2, Number(new URL(victim.url).port), victim.name);
    let st: ClusterStatus | undefined;
    await waitFor(async () => (st = await e.status()).nodes.every((n) => n.slices === 64), 'the restarted node to lead 64 slices again', 60_000, seen(e));
    // 64 handovers: one map change for them, and a few for elections that gave a leadership back to a node whose
    // replica was still behind (one map change per handover, as before, is at least 64).
    expect(st!.epoch - before).toBeLessThan(40);
    if (process.env.KEYSLICE_TEST_LOG) console.log(`leaderships back to a restarted node: epoch ${before} -> ${st!.epoch}; ${st!.replication.note}`);
  }, 120_000);

  it('items written while the cluster had one node (R=1) are kept when nodes join and it replicates them (R=2, then 3)', async () => {
    const e = await cluster({ nodes: 1, slices: 4, replicationFactor: 'auto' });
    for (let i = 0; i < 40; i++) await e.client.putItem('elastic', { id: `r1-${i}`, v: i });
    for (const expected of [2, 3]) {
      await e.addNode();
      await waitFor(async () => (await e.status()).replication.factor === expected, `replication factor ${expected}`, 30_000, seen(e));
      await untilLed(e);
      const items = await e.client.getAllItems({ table: 'elastic' });
      expect(items.map((i) => i.v).sort((a, b) => (a as number) - (b as number))).toEqual(Array.from({ length: 40 }, (_, i) => i));
    }
    // Once every slice has its third replica and that change has settled (before, an election also needs a majority
    // of the old set of 2, so losing node 0 would stall the slice), the first node's copy is no longer needed: with it
    // stopped, the two others still serve every item. Nothing unsettled is not enough: a slice whose change to 2
    // replicas had not settled when the third node joined gets its third replica only at a placement tick after it
    // settled (ClusterMap.placeReplicas), so for a while it has 2, settled; killed then, node 0 was half of that set
    // and its change to 3 could never settle (it failed so at load 22). The map on disk is read before the status: a
    // set at 3 there is in the coordinator's map, its change counted unsettled until it settled.
    // Status counts the sets short of the factor (shortOfFactor): where it says none, the map on disk read after it
    // has every set at 3 (sets only grow in this test). Kept and asserted after the wait, which retries on a throw.
    let noneShortButMap: number[] | null = null;
    await waitFor(
      async () => {
        const full = replicaSets(e).every((set) => set.length === 3);
        const st = await e.status();
        const short = st.replication.leaders.shortOfFactor;
        const after = replicaSets(e).map((set) => set.length);
        if (short === 0 && after.some((n) => n !== 3)) noneShortButMap ??= after;
        return full && led(st) && st.replication.leaders.unsettled === 0 && short === 0;
      },
      'every slice at 3 replicas, its change settled',
      30_000,
      seen(e),
    );
    expect(noneShortButMap, 'replica-set sizes on disk when status said no slice was short of 3').toBeNull();
    await stopProcess(e.nodes[0].child, 'SIGKILL');
    await untilLed(e);
    expect((await e.client.getAllItems({ table: 'elastic' })).length).toBe(40);
  }, 90_000);
});

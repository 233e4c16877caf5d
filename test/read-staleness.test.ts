// How stale an eventually consistent read may be, through real processes (docs/replication.md, "Staleness"):
// a coordinator, its routers and three slice nodes at R=3, with elections held off (a leader timeout of a
// minute), so that a frozen leader (SIGSTOP) stays the leader and its followers are cut off from it, as
// in a partition the coordinator does not see. A follower answers only within REPLICA_READ_STALENESS_MS
// of its leader's last word; an idle follower hears a keep-alive and stays readable.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterStatus } from '../shared/api.js';
import { REPLICA_READ_STALENESS_MS } from '../shared/limits.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { useCluster } from './cluster-fixture.js';
import { freezeProcess } from './freeze.js';

// Read by the coordinator at start (useCluster's beforeAll, below): no election while the leader is frozen.
const leaderTimeoutBefore = process.env.KEYSLICE_LEADER_TIMEOUT_MS;
process.env.KEYSLICE_LEADER_TIMEOUT_MS = '60000';
const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3 });
afterAll(() => {
  if (leaderTimeoutBefore === undefined) delete process.env.KEYSLICE_LEADER_TIMEOUT_MS;
  else process.env.KEYSLICE_LEADER_TIMEOUT_MS = leaderTimeoutBefore;
});
const T = 'stale';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The leader's last keep-alive may still be on its way to (or queued in) a follower when the leader is frozen:
 * a follower stops answering at most this long after REPLICA_READ_STALENESS_MS (a loaded machine). */
const IN_FLIGHT_MS_MAX = 1_000;

/** Reads served per node (DescribeSlices), once every node answers (bounded). */
async function readsPerNode(): Promise<number[]> {
  const until = Date.now() + 10_000;
  for (;;) {
    const load = await c.client.describeSlices(T);
    if (load.complete) return c.cluster.nodes.map((n) => load.nodes.find((x) => x.node === n.url)?.reads ?? 0);
    if (Date.now() > until) throw new Error('describeSlices stayed incomplete for 10 s: a node does not answer');
    await sleep(200);
  }
}
const grew = (before: number[], after: number[]) => after.map((n, i) => n - before[i]);
const eventualGet = (id: string) => c.client.getItem(T, { id }, { consistentRead: false });

beforeAll(async () => {
  await c.client.createTable(T, { name: 'id', type: 'string' });
  // Every slice has an elected leader, and the leadership handovers that spread leaders over the nodes are over
  // (no new one for 2 s): the test freezes the node it found leading a slice, which must stay its leader.
  const until = Date.now() + 30_000;
  let handovers = -1;
  let sameSince = Date.now();
  for (;;) {
    const res = await fetch(`${c.cluster.url}${CLUSTER_API_PREFIX}status`, { headers: { [CLUSTER_SECRET_HEADER]: c.cluster.clusterSecret } });
    const { leaders } = ((await res.json()) as ClusterStatus).replication;
    if (leaders.handovers !== handovers || leaders.led !== leaders.replicated) [handovers, sameSince] = [leaders.handovers, Date.now()];
    if (leaders.replicated > 0 && Date.now() - sameSince >= 2_000) break;
    if (Date.now() > until) throw new Error(`leaders did not settle within 30 s (${leaders.led} of ${leaders.replicated} led, ${leaders.handovers} handovers)`);
    await sleep(200);
  }
});

/** The index of the node that leads the slice of `id`: the one that served 10 consistent reads of it. */
async function leaderOf(id: string): Promise<number> {
  const r0 = await readsPerNode();
  for (let i = 0; i < 10; i++) await c.client.getItem(T, { id });
  const at = grew(r0, await readsPerNode()).findIndex((n) => n === 10);
  expect(at).toBeGreaterThanOrEqual(0);
  return at;
}

describe('the staleness of eventually consistent reads (R=3, 3 nodes, no elections)', () => {
  it('an idle follower stays readable; one cut off from its frozen leader stops answering after the bound', async () => {
    await c.client.putItem(T, { id: 'k', v: 1 });
    const leaderAt = await leaderOf('k');

    // Idle for longer than the bound: the followers hold everything and get no heartbeat, only keep-alives, and
    // still answer their share of eventual reads (a follower that may not answer leaves its read to the leader).
    await sleep(REPLICA_READ_STALENESS_MS + 1_000);
    const r1 = await readsPerNode();
    for (let i = 0; i < 60; i++) expect((await eventualGet('k'))?.v).toBe(1);
    const idle = grew(r1, await readsPerNode());
    console.log(`idle ${REPLICA_READ_STALENESS_MS + 1_000} ms, then eventual reads per node ${idle.join('/')} (leader: node ${leaderAt})`);
    idle.forEach((n, i) => {
      if (i !== leaderAt) expect(n).toBeGreaterThanOrEqual(10);
    });

    // The leader is frozen past the bound. A read goes out every 50 ms (not awaited: one that reaches the frozen
    // leader waits for it): the followers answer theirs at first, and none sent once the bound (and the last
    // keep-alive's time in flight) has passed is answered before the leader wakes.
    expect(await leaderOf('k')).toBe(leaderAt); // still (no election, no handover)
    const leader = c.cluster.nodes[leaderAt];
    const FROZEN_MS = REPLICA_READ_STALENESS_MS + IN_FLIGHT_MS_MAX + 1_000;
    const reads: { sentMs: number; answeredMs: Promise<number> }[] = [];
    let thawedMs = Infinity;
    let frozenAt = Date.now();
    try {
      // From once every thread of it stopped: until then its worker threads may still send keep-alives.
      await freezeProcess(leader.child.pid!);
      frozenAt = Date.now();
      for (let i = 0; i < 200 && Date.now() - frozenAt < FROZEN_MS; i++) {
        const sentMs = Date.now() - frozenAt;
        reads.push({ sentMs, answeredMs: eventualGet('k').then((item) => (expect(item?.v).toBe(1), Date.now() - frozenAt)) });
        await sleep(50);
      }
    } finally {
      thawedMs = Date.now() - frozenAt;
      leader.child.kill('SIGCONT');
    }
    const done = await Promise.all(reads.map(async (r) => ({ sentMs: r.sentMs, answeredMs: await r.answeredMs })));
    const whileFrozen = done.filter((r) => r.answeredMs < thawedMs);
    const lastSent = Math.max(...whileFrozen.map((r) => r.sentMs));
    console.log(
      `leader frozen ${thawedMs} ms: ${whileFrozen.length} of ${done.length} eventual reads answered meanwhile (by followers), ` +
        `the last of them sent ${lastSent} ms after the freeze (bound ${REPLICA_READ_STALENESS_MS} ms)`,
    );
    expect(whileFrozen.length).toBeGreaterThanOrEqual(5); // the followers did answer at first
    expect(lastSent).toBeLessThan(REPLICA_READ_STALENESS_MS + IN_FLIGHT_MS_MAX);
    expect(done.filter((r) => r.sentMs >= REPLICA_READ_STALENESS_MS + IN_FLIGHT_MS_MAX).length).toBeGreaterThanOrEqual(5);

    expect(await leaderOf('k')).toBe(leaderAt); // it led the slice all along

    // Awake, the leader's next keep-alive makes its followers readable again (bounded wait).
    const until = Date.now() + 10_000;
    for (;;) {
      const r2 = await readsPerNode();
      for (let i = 0; i < 30; i++) expect((await eventualGet('k'))?.v).toBe(1);
      const again = grew(r2, await readsPerNode());
      if (again.every((n) => n > 0)) break;
      if (Date.now() > until) throw new Error(`the followers did not answer again within 10 s of the leader waking (reads per node ${again.join('/')})`);
      await sleep(200);
    }
  });
});

// Eventually consistent reads through real processes (docs/replication.md, "Eventually consistent reads"):
// a coordinator, its routers and three slice nodes, every slice on all three (R=3). A read with
// consistentRead false goes to any replica of its slice, followers included; once writes stop, every
// replica answers the last value within a bounded time (an idle follower learns the last commit point from
// its leader's heartbeat); and the reads really reach the followers: each node's read counter grows, where
// consistent reads of the same key grow the leader's alone.
import { CreateTableCommand, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ClusterStatus } from '../shared/api.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { parseExposition, total } from './prometheus-text.js';
import { useCluster } from './cluster-fixture.js';
import { dynamoClient } from './dynamodb-fixture.js';
import { freezeProcess } from './freeze.js';

const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3 });
const T = 'eventual';
/** Once writes stop, every replica answers the last value within this. */
const STALE_MS_MAX = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function status(): Promise<ClusterStatus> {
  const res = await fetch(`${c.cluster.url}${CLUSTER_API_PREFIX}status`, { headers: { [CLUSTER_SECRET_HEADER]: c.cluster.clusterSecret } });
  return (await res.json()) as ClusterStatus;
}

/** Reads served per node (the slice nodes' counters for the table, DescribeSlices). */
/** Reads served per node, once every node answers (a node just woken from SIGSTOP may miss a round: bounded wait). */
async function readsPerNode(table = T): Promise<Map<string, number>> {
  const until = Date.now() + 10_000;
  for (;;) {
    const load = await c.client.describeSlices(table);
    if (load.complete) return new Map(load.nodes.map((n) => [n.node, n.reads]));
    if (Date.now() > until) throw new Error('describeSlices stayed incomplete for 10 s: a node does not answer');
    await new Promise((r) => setTimeout(r, 200));
  }
}

function grew(before: Map<string, number>, after: Map<string, number>): number[] {
  return c.cluster.nodes.map((n) => (after.get(n.url) ?? 0) - (before.get(n.url) ?? 0));
}

/** keyslice_eventual_reads_total by its `answered` label, summed over the processes that route. */
async function eventualReads(): Promise<Record<string, number>> {
  const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  const m = parseExposition(await res.text());
  return Object.fromEntries(['follower', 'leader', 'leader_after_follower'].map((answered) => [answered, total(m, 'keyslice_eventual_reads_total', { answered })]));
}

/** Puts `id` and finds the node that leads its slice: the one that served 10 consistent reads of it. A node
 * woken from SIGSTOP by an earlier story gets leaderships handed back to it for a few seconds, which may split
 * the 10 reads over two nodes: then it asks again (at most 10 times). */
async function putOnLeader(id: string, v: string) {
  await c.client.putItem(T, { id, v });
  for (let attempt = 0; attempt < 10; attempt++) {
    const r0 = await readsPerNode();
    for (let i = 0; i < 10; i++) await c.client.getItem(T, { id });
    const leaderAt = grew(r0, await readsPerNode()).findIndex((n) => n === 10);
    if (leaderAt >= 0) return c.cluster.nodes[leaderAt];
    await sleep(500);
  }
  throw new Error(`no one node served 10 consistent reads of ${id} in 10 tries: its leadership kept moving`);
}

/** A follower learns that a put committed with its leader's next message (a tick, 100 ms, later on an idle
 * slice; later still on a loaded machine): waits until 30 eventual reads in a row see `v` (bounded). */
async function untilEventualReadsSee(read: () => Promise<unknown>, v: string, what: string) {
  const until = Date.now() + STALE_MS_MAX;
  for (let seen = 0; seen < 30; ) {
    seen = (await read()) === v ? seen + 1 : 0;
    if (seen < 30 && Date.now() > until) throw new Error(`eventual reads still missed the put of ${what} ${STALE_MS_MAX} ms after it (${seen} in a row saw it)`);
  }
}
/** The native API's eventual read of `id`'s v. */
const eventualV = (id: string) => async () => (await c.client.getItem(T, { id }, { consistentRead: false }))?.v;

beforeAll(async () => {
  await c.client.createTable(T, { name: 'id', type: 'string' });
  // Every slice has an elected leader (bounded).
  const until = Date.now() + 20_000;
  for (;;) {
    const { leaders } = (await status()).replication;
    if (leaders.replicated > 0 && leaders.led === leaders.replicated) break;
    if (Date.now() > until) throw new Error('not every slice has an elected leader');
    await sleep(200);
  }
});

describe('eventually consistent reads (R=3, 3 nodes)', () => {
  it('answer the last value from every replica within a bounded time once writes stop', async () => {
    const ids = Array.from({ length: 40 }, (_, i) => `k${i}`);
    for (const v of [1, 2]) await Promise.all(ids.map((id) => c.client.putItem(T, { id, v })));
    const stopped = Date.now();
    // Each pass reads every key three times in a row: the router takes the replicas in turn, so each
    // replica answers for each key. A pass with no stale answer: every replica holds the last value.
    let stale = 0;
    let lastStaleMs = 0;
    let clean = false;
    const passMs: number[] = [];
    for (let pass = 0; pass < 200 && !clean && Date.now() - stopped < 5 * STALE_MS_MAX; pass++) {
      const passStarted = Date.now();
      clean = true;
      for (const id of ids) {
        for (let k = 0; k < 3; k++) {
          const item = await c.client.getItem(T, { id }, { consistentRead: false });
          expect(item === null || item.v === 1 || item.v === 2).toBe(true); // a value once written, never another
          if (item?.v === 2) continue;
          stale++;
          clean = false;
          lastStaleMs = Date.now() - stopped;
        }
      }
      passMs.push(Date.now() - passStarted);
    }
    console.log(`eventual reads: last stale answer ${lastStaleMs} ms after the last write (${stale} stale answers; passes of 120 reads took ${passMs.join(', ')} ms)`);
    expect(clean).toBe(true);
    expect(lastStaleMs).toBeLessThan(STALE_MS_MAX);
    // And it stays so; the other read paths agree.
    for (const id of ids) {
      for (let k = 0; k < 3; k++) expect((await c.client.getItem(T, { id }, { consistentRead: false }))?.v).toBe(2);
    }
    const batch = await c.client.batchGet(T, ids.map((id) => ({ id })), { consistentRead: false });
    expect(batch.failures).toEqual([]);
    expect(batch.items.map((i) => i?.v)).toEqual(ids.map(() => 2));
    const range = await c.client.getItems({ table: T, shardingKey: 'k3', consistentRead: false });
    expect(range.items.map((i) => i.v)).toEqual([2]);
  });

  it('reach the followers: every node serves eventual reads of one key, only its leader consistent ones', async () => {
    await c.client.putItem(T, { id: 'hot', v: 'x' });
    const r0 = await readsPerNode();
    for (let i = 0; i < 60; i++) expect((await c.client.getItem(T, { id: 'hot' }))?.v).toBe('x');
    const r1 = await readsPerNode();
    const consistent = grew(r0, r1);
    expect(consistent.filter((n) => n > 0)).toEqual([60]); // the leader's node alone
    await untilEventualReadsSee(eventualV('hot'), 'x', 'hot');
    const r2 = await readsPerNode();
    const m0 = await eventualReads();
    for (let i = 0; i < 90; i++) expect((await c.client.getItem(T, { id: 'hot' }, { consistentRead: false }))?.v).toBe('x');
    const eventual = grew(r2, await readsPerNode());
    // /metrics counts what answered them (keyslice_eventual_reads_total): the same 90, most by a follower.
    const m1 = await eventualReads();
    const by = Object.fromEntries(Object.keys(m1).map((k) => [k, m1[k] - (m0[k] ?? 0)]));
    expect(by.follower + by.leader + by.leader_after_follower).toBe(90);
    expect(by.follower).toBeGreaterThanOrEqual(20);
    console.log(`reads of one key per node: consistent ${consistent.join('/')}, eventual ${eventual.join('/')}`);
    // Each of the three replicas answered a share (about a third; a follower that may not answer yet leaves its read to the leader).
    for (const n of eventual) expect(n).toBeGreaterThanOrEqual(10);
    expect(eventual.reduce((a, n) => a + n, 0)).toBe(90);
  });

  it('DynamoDB GetItem is eventually consistent unless ConsistentRead is true, as in DynamoDB', async () => {
    const ddb = dynamoClient(c.cluster.url);
    try {
      await ddb.send(new CreateTableCommand({ TableName: 'ddb', AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }], KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }], BillingMode: 'PAY_PER_REQUEST' }));
      await ddb.send(new PutItemCommand({ TableName: 'ddb', Item: { pk: { S: 'hot' }, v: { S: 'x' } } }));
      const get = async (consistent: boolean | undefined) => {
        const r = await ddb.send(new GetItemCommand({ TableName: 'ddb', Key: { pk: { S: 'hot' } }, ...(consistent === undefined ? {} : { ConsistentRead: consistent }) }));
        expect(r.Item?.v).toEqual({ S: 'x' });
      };
      const r0 = await readsPerNode('ddb');
      for (let i = 0; i < 30; i++) await get(true);
      const r1 = await readsPerNode('ddb');
      expect(grew(r0, r1).filter((n) => n > 0)).toEqual([30]);
      // Every follower has learned that the put committed (bounded) before reads count.
      await untilEventualReadsSee(async () => (await ddb.send(new GetItemCommand({ TableName: 'ddb', Key: { pk: { S: 'hot' } } }))).Item?.v?.S, 'x', 'ddb hot');
      const r2 = await readsPerNode('ddb');
      for (let i = 0; i < 60; i++) await get(i % 2 === 0 ? undefined : false);
      const eventual = grew(r2, await readsPerNode('ddb'));
      for (const n of eventual) expect(n).toBeGreaterThanOrEqual(5);
    } finally {
      ddb.destroy();
    }
  });

  it('are answered by the followers while the leader is frozen (SIGSTOP), before any election', async () => {
    const leader = await putOnLeader('hot', 'x');
    try {
      await freezeProcess(leader.child.pid!); // until every thread stopped, the leader's workers may still answer
      const frozenAt = Date.now();
      // The election takes the heartbeat timeout (1.5 s) at least: an answer before 1 s came from a follower.
      const answeredMs = await Promise.all(
        Array.from({ length: 30 }, async () => {
          expect((await c.client.getItem(T, { id: 'hot' }, { consistentRead: false }))?.v).toBe('x');
          return Date.now() - frozenAt;
        }),
      );
      const early = answeredMs.filter((ms) => ms < 1_000).length;
      console.log(`leader frozen: ${early} of 30 eventual reads answered within 1 s, the slowest after ${Math.max(...answeredMs)} ms`);
      expect(early).toBeGreaterThanOrEqual(15);
    } finally {
      leader.child.kill('SIGCONT');
    }
  });

  it('consistent reads in flight on a frozen leader (SIGSTOP) are sent again to the new one: slower, not failed', async () => {
    const leader = await putOnLeader('cold', 'y');
    try {
      await freezeProcess(leader.child.pid!);
      // Sent at once, so they are in flight on the frozen node when the failover gives it up (outcome unknown).
      const got = await Promise.allSettled(Array.from({ length: 20 }, () => c.client.getItem(T, { id: 'cold' })));
      const failed = got.filter((g) => g.status === 'rejected').map((g) => String((g as PromiseRejectedResult).reason));
      expect(failed).toEqual([]);
      for (const g of got) expect((g as PromiseFulfilledResult<{ v: string } | null>).value?.v).toBe('y');
    } finally {
      leader.child.kill('SIGCONT');
    }
  });

  it('pass over a frozen follower after one read timed out on it, instead of every third read waiting', async () => {
    const leader = await putOnLeader('warm', 'z');
    await untilEventualReadsSee(eventualV('warm'), 'z', 'warm');
    const follower = c.cluster.nodes.find((n) => n !== leader)!;
    try {
      await freezeProcess(follower.child.pid!);
      // One client connection: one router. Before, every third read waited REPLICA_READ_TIMEOUT_MS (1 s) on the
      // frozen follower; now the first such read does, and the follower gets none for REPLICA_SILENT_SKIP_MS.
      const tookMs: number[] = [];
      for (let i = 0; i < 30; i++) {
        const t0 = Date.now();
        expect((await c.client.getItem(T, { id: 'warm' }, { consistentRead: false }))?.v).toBe('z');
        tookMs.push(Date.now() - t0);
      }
      const slow = tookMs.filter((ms) => ms >= 900).length;
      console.log(`follower frozen: ${slow} of 30 eventual reads took 0.9 s or more (${tookMs.reduce((a, b) => a + b, 0)} ms in all)`);
      expect(slow).toBeLessThanOrEqual(2);
    } finally {
      follower.child.kill('SIGCONT');
    }
  });

  it('refuses a consistentRead that is not a boolean', async () => {
    await expect(c.client.getItem(T, { id: 'hot' }, { consistentRead: 'no' as unknown as boolean })).rejects.toThrow(/"consistentRead" must be true or false/);
  });
});

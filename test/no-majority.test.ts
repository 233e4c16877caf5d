// A leader that has lost its majority, through real processes (docs/replication.md, "What a client sees when a
// leader loses its majority"): a coordinator, a router and three slice nodes at R=3. The two nodes other than one
// that leads slices are frozen (SIGSTOP, by PID): that leader still answers the coordinator, so no election replaces
// it, and no majority takes its records. A write sent to it is answered, not held for the router's 30 s request
// timeout: the leader answers Unavailable, outcome unknown, after REPLICA_COMMIT_WAIT_MS; the router sends it again
// with its request id (answered from memory by the same leader, held again) until its failover bound is spent, and the
// client gets Unavailable with routerRetried and a message that says the outcome is unknown. Once the others are
// woken (SIGCONT) the write is there once or not at all, never twice, and the slice takes writes again.
import { beforeAll, describe, expect, it } from 'vitest';
import type { ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing } from '../shared/hashing.js';
import { FAILOVER_RETRY_MS_MAX, NODE_REQUEST_TIMEOUT_MS, REPLICA_COMMIT_WAIT_MS } from '../shared/limits.js';
import { leaderOf, led, metricSum, RECOVERY_MS_MAX, statusUntil, testLog, useCluster } from './cluster-fixture.js';
import { freezeProcess } from './freeze.js';

const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3, ...(testLog ? { log: testLog } : {}) });
const T = 'nomajority';
/** The longest the client may wait for its answer: the leader's bound on each of the router's tries, within the
 * router's failover bound, with room for a loaded host; well under the router's request timeout (30 s), which is
 * how long the write hung before the leader had a bound. */
const ANSWER_MS_MAX = FAILOVER_RETRY_MS_MAX + REPLICA_COMMIT_WAIT_MS + 4_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


/** The writes of the table answered from a remembered request id, over every node (since each started). */
const duplicateWrites = () => metricSum(c, 'keyslice_node_duplicate_writes_total', T);

beforeAll(async () => {
  await initHashing();
  await c.client.createTable(T, { name: 'id', type: 'string' });
  await statusUntil(c, 'every slice led', led, RECOVERY_MS_MAX);
});

describe('a leader whose followers are frozen (R=3, two of three nodes SIGSTOPped)', () => {
  it('answers a write Unavailable, outcome unknown, well under 30 s; once they wake the write is there at most once', async () => {
    expect(ANSWER_MS_MAX).toBeLessThan(NODE_REQUEST_TIMEOUT_MS);
    await statusUntil(c, 'every slice led', led, RECOVERY_MS_MAX);
    // A key, and the node that leads its slice (DescribeSlices); it is written once, so that an add applied twice
    // would show.
    const id = 'counter';
    await c.client.putItem(T, { id, n: 0 }); // DescribeSlices lists the slices that hold items
    const survivor = await leaderOf(c, T, id);
    const frozen: ManagedProcess[] = c.cluster.nodes.filter((n) => n !== survivor);
    expect(frozen).toHaveLength(2);
    const before = await duplicateWrites();

    let outcome: unknown;
    let took = -1;
    try {
      // Every thread stopped before the write goes out: a follower's worker threads that ran on would answer it.
      for (const n of frozen) await freezeProcess(n.child.pid!);
      const started = Date.now();
      const write = c.client.updateItem(T, { id }, { add: { n: 1 }, returnValues: 'new' }).then(
        (item) => `acknowledged: ${JSON.stringify(item)}`,
        (err: unknown) => err,
      );
      outcome = await Promise.race([write, sleep(ANSWER_MS_MAX).then(() => `no answer within ${ANSWER_MS_MAX} ms`)]);
      took = Date.now() - started;
    } finally {
      for (const n of frozen) process.kill(n.child.pid!, 'SIGCONT');
    }
    testLog?.(`no-majority: the write answered in ${took} ms: ${outcome instanceof Error ? outcome.message : String(outcome)}`);
    expect(outcome).toBeInstanceOf(KeysliceError);
    const err = outcome as KeysliceError;
    expect(err.code).toBe('Unavailable');
    expect(err.message).toMatch(/did not commit this write within \d+ ms .*outcome unknown/);
    // The router sent it again for as long as its bounds allow (no caller above it asks again), and it may have
    // been applied: not notApplied.
    expect(err.details?.routerRetried).toBe(true);
    expect(err.details?.notApplied).toBeUndefined();
    // The router gave up only once its failover wait was spent, not at the leader's first answer (REPLICA_COMMIT_WAIT_MS).
    expect(took).toBeGreaterThanOrEqual(FAILOVER_RETRY_MS_MAX);

    await statusUntil(c, 'every slice led after the freeze', led, RECOVERY_MS_MAX);
    // The router's copies reached the same leader, which answered them from the write's remembered id: within its
    // 10 s at least two more copies follow a first that took REPLICA_COMMIT_WAIT_MS, each held as long.
    expect((await duplicateWrites()) - before).toBeGreaterThanOrEqual(Math.floor(FAILOVER_RETRY_MS_MAX / REPLICA_COMMIT_WAIT_MS));
    // Applied once or not at all (the survivor still leads: its record commits once a follower answers).
    const n = (await c.client.getItem(T, { id }))?.n;
    testLog?.(`no-majority: n after the freeze: ${String(n)}`);
    expect([0, 1]).toContain(n);
    // The slice takes writes again, and the add lands on what is there.
    expect((await c.client.updateItem(T, { id }, { add: { n: 1 }, returnValues: 'new' }))?.n).toBe((n as number) + 1);
  }, 90_000);
});

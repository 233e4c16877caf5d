// bench:failover's run, short, through the same code (bench/failover-run.ts):
// 3 slice nodes with fsync durability, 6 writers, 3 SIGKILLs of a node in turn,
// each restarted. No acknowledged write may be lost, no item may appear that no
// writer attempted, every value is the one written, and the counts add up. At
// R=1 a killed node's slices answer Unavailable while it restarts, so success is
// not asserted (bench/FAILOVER.md has the figures); at R=1 durability alone keeps
// what was acknowledged.
//
// Then one write in flight on a leader that freezes (SIGSTOP), at R=3, through the coordinator's router: with the
// followers frozen, the leader takes the write (its writes counter goes up) and is frozen holding it, uncommitted,
// within its commit wait; the router's copy to the frozen leader gets no answer, the coordinator elects another
// replica and gives the frozen node's in-flight requests up (outcome unknown), and the router sends the write again
// with its request id to the new leader, which applies it once (an UpdateItem ADD: twice would show in the counter).
import { describe, expect, it } from 'vitest';
import { FAILOVER_DEFAULTS, startFailover } from '../bench/failover-run.js';
import { initHashing } from '../shared/hashing.js';
import type { ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { FAILOVER_RETRY_MS_MAX, LEADER_ELECTION_TIMEOUT_MS, LEADER_HEARTBEAT_TIMEOUT_MS, LOAD_REPORT_TIMEOUT_MS, REPLICA_COMMIT_WAIT_MS } from '../shared/limits.js';
import { leaderOf, led, metricSum, RECOVERY_MS_MAX, statusUntil, testLog, useCluster } from './cluster-fixture.js';
import { freezeProcess } from './freeze.js';
import { parseExposition, samples } from './prometheus-text.js';

describe('slice nodes SIGKILLed under load (real processes)', () => {
  it('loses no acknowledged write and makes none up', async () => {
    const r = await startFailover({ ...FAILOVER_DEFAULTS, mode: 'kill', replicationFactor: 1, writers: 6, cycles: 3, periodMs: 2000, workers: 1, settleMs: 20_000 }).result;
    expect(r.events).toHaveLength(3);
    expect(r.lost).toEqual([]);
    expect(r.phantoms).toEqual([]);
    expect(r.wrongValues).toEqual([]);
    expect(r.duplicates).toBe(0);
    // Every attempt is counted once: acknowledged, refused by code, timed out or its connection lost.
    const refused = Object.values(r.refused).reduce((a, n) => a + n, 0);
    expect(r.acknowledged + refused + r.timedOut + r.connectionLost).toBe(r.attempts);
    // What is stored is the acknowledged writes and some of those whose outcome was not known.
    expect(r.stored).toBe(r.acknowledged + r.unacknowledgedStored);
    expect(r.acknowledged).toBeGreaterThan(0);
    // Each killed node led slices that were written to, and they served again.
    for (const e of r.events) expect(e.slices).toBeGreaterThan(0);
    expect(r.failoverMs.unobserved).toBe(0);
  }, 90_000);
});

describe('a write in flight on a leader that freezes (R=3, real processes, through a router)', () => {
  const c = useCluster({ nodes: 3, slices: 12, replicationFactor: 3, ...(testLog ? { log: testLog } : {}) });
  const T = 'inflight';
  /** The longest the client may wait for its answer: a failover (the coordinator's heartbeat timeout, the lease the
   * frozen leader may still hold and an election) and the router's resend, within its failover bound, with room. */
  const ANSWER_MS_MAX = LEADER_HEARTBEAT_TIMEOUT_MS + LEADER_ELECTION_TIMEOUT_MS + FAILOVER_RETRY_MS_MAX;
  /** Between scrapes of the leader's writes counter: a round trip on 127.0.0.1, with room. */
  const POLL_MS = 300;
  /** A scrape of the coordinator's /metrics while two nodes are frozen: it waits LOAD_REPORT_TIMEOUT_MS for their
   * load, and leaves their series out. */
  const SCRAPE_MS_MAX = LOAD_REPORT_TIMEOUT_MS + 2_000;
  /** `node`'s keyslice_node_writes_total of table T (writes its slices admitted: counted when a leader runs one,
   * before its commit); null while the node's series is missing from the scrape. */
  const writesOn = async (node: ManagedProcess): Promise<number | null> => {
    const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(SCRAPE_MS_MAX) });
    const mine = samples(parseExposition(await res.text()), 'keyslice_node_writes_total').filter((x) => x.labels.table === T && x.labels.node === node.url);
    return mine.length === 0 ? null : mine.reduce((n, x) => n + x.value, 0);
  };
  /** Waits `ms`; `clear` drops the timer (a race's loser would keep the test process busy). */
  const timer = (ms: number) => {
    let t: NodeJS.Timeout | undefined;
    return { done: new Promise<void>((r) => (t = setTimeout(r, ms))), clear: () => clearTimeout(t) };
  };

  it('is sent again by the router to the new leader after the failover and applied exactly once', async () => {
    await initHashing();
    await c.client.createTable(T, { name: 'id', type: 'string' });
    await statusUntil(c, 'every slice led', led, RECOVERY_MS_MAX);
    const id = 'counter';
    await c.client.putItem(T, { id, n: 0 });
    const leader = await leaderOf(c, T, id);
    const followers = c.cluster.nodes.filter((n) => n !== leader);
    expect(followers).toHaveLength(2);
    const resentBefore = await metricSum(c, 'keyslice_writes_resent_total');
    const duplicatesBefore = await metricSum(c, 'keyslice_node_duplicate_writes_total', T);
    const leaderWritesBefore = await writesOn(leader);
    expect(leaderWritesBefore, 'the leader reports its writes while every node is up').not.toBeNull();

    let outcome: unknown;
    let took = -1;
    let heldMs = -1;
    let write: Promise<unknown> = Promise.resolve('not sent');
    const started = Date.now();
    try {
      try {
        // The followers first, so that the leader takes the write and holds it uncommitted (its Append waits in their
        // sockets), then the leader, once it took the write (its writes counter, counted when it runs one, went up);
        // then the followers wake, take that Append (or not: the new leader then has no copy) and elect one of them
        // once the leader's silence and lease are over.
        for (const f of followers) await freezeProcess(f.child.pid!);
        const sent = Date.now();
        write = c.client.updateItem(T, { id }, { add: { n: 1 }, returnValues: 'new' }).then(
          (item) => item,
          (err: unknown) => err,
        );
        // Bounded: the leader is to be frozen before its commit wait runs out, or it answers the write itself (outcome
        // unknown) and the router's resend goes to it again, not to a new leader. A scrape's answer from the leader
        // comes at once, but the scrape waits for the frozen followers' load (LOAD_REPORT_TIMEOUT_MS): each starts a
        // round trip with room after the last, and only while it can end within the commit wait.
        let leaderWrites = leaderWritesBefore;
        do {
          const pause = timer(POLL_MS);
          await pause.done;
          leaderWrites = (await writesOn(leader)) ?? leaderWrites;
        } while (leaderWrites === leaderWritesBefore && Date.now() - sent < REPLICA_COMMIT_WAIT_MS - LOAD_REPORT_TIMEOUT_MS - POLL_MS);
        testLog?.(`in-flight failover: the leader's writes counter went ${leaderWritesBefore} -> ${leaderWrites} within ${Date.now() - sent} ms`);
        expect(leaderWrites, 'the leader took the write (its writes counter) before it is frozen').toBe(leaderWritesBefore! + 1);
        await freezeProcess(leader.child.pid!);
        heldMs = Date.now() - sent;
      } finally {
        for (const f of followers) process.kill(f.child.pid!, 'SIGCONT');
      }
      // The leader held the write when it was frozen: its commit wait, which began when it took the write (after it was
      // sent), had not run out, so it had not answered; what answers the client is the router's resend elsewhere.
      expect(heldMs).toBeLessThan(REPLICA_COMMIT_WAIT_MS);
      const wait = timer(ANSWER_MS_MAX);
      try {
        outcome = await Promise.race([write, wait.done.then(() => `no answer within ${ANSWER_MS_MAX} ms`)]);
      } finally {
        wait.clear();
      }
      took = Date.now() - started;
    } finally {
      process.kill(leader.child.pid!, 'SIGCONT');
    }
    testLog?.(`in-flight failover: the write answered in ${took} ms: ${outcome instanceof Error ? outcome.message : JSON.stringify(outcome)}`);
    // Acknowledged, with the counter as one add left it: the copy the new leader ran (or answered from the first
    // copy's remembered id, if the followers took the frozen leader's record) applied once.
    expect(outcome).toMatchObject({ id, n: 1 });
    // The router sent it again (an unknown outcome, not a refusal): the frozen leader never answered it.
    expect((await metricSum(c, 'keyslice_writes_resent_total')) - resentBefore).toBeGreaterThanOrEqual(1);
    testLog?.(`in-flight failover: ${(await metricSum(c, 'keyslice_node_duplicate_writes_total', T)) - duplicatesBefore} copies answered from a remembered id`);
    // Another replica leads the slice now, and once the old leader is back and every slice led, the item was
    // written once: a later add lands on 1.
    expect((await leaderOf(c, T, id)).url).not.toBe(leader.url);
    await statusUntil(c, 'every slice led after the freeze', led, RECOVERY_MS_MAX);
    expect((await c.client.getItem(T, { id }))?.n).toBe(1);
    expect((await c.client.updateItem(T, { id }, { add: { n: 1 }, returnValues: 'new' }))?.n).toBe(2);
  }, 90_000);
});

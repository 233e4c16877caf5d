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
import { FAILOVER_RETRY_MS_MAX, LEADER_ELECTION_TIMEOUT_MS, LEADER_HEARTBEAT_TIMEOUT_MS, REPLICA_COMMIT_WAIT_MS } from '../shared/limits.js';
import {
  CLUSTER_SECRET_HEADER,
  decodeNodeFrame,
  decodeSliceResults,
  encodeNodeFrame,
  encodeSliceOps,
  NodeFrame,
  RESULT_OK,
  SliceOp,
  sliceSetOf,
  type CoordinatorNodeFrame,
  type StatsResult,
} from '../shared/protocol.js';
import { leaderOf, led, metricSum, RECOVERY_MS_MAX, statusUntil, testLog, useCluster } from './cluster-fixture.js';
import { freezeProcess } from './freeze.js';
import { epochOfRefusal, openNode } from './node-dial.js';
import { parseExposition, samples } from './prometheus-text.js';

describe('slice nodes SIGKILLed under load (real processes)', () => {
  it('loses no acknowledged write and makes none up', async () => {
    // A kill every second: the run's clock, not the restarts, paced it at 2 s (a restart is ready well within 1 s on a
    // quiet machine; one that takes longer is followed by the next kill at once, as at 2 s under load). The writers
    // reach every node between two kills all the same, and the last kill's failover is waited for (the run's lastWait).
    const r = await startFailover({ ...FAILOVER_DEFAULTS, mode: 'kill', replicationFactor: 1, writers: 6, cycles: 3, periodMs: 1000, workers: 1, settleMs: 20_000 }).result;
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
  /** Between reads of the leader's writes counter. */
  const POLL_MS = 20;
  /** One read of a node's counter that is not frozen: a round trip on 127.0.0.1 to its workers, with room for a loaded
   * host. */
  const READ_MS_MAX = 1_000;
  /** The cluster's first table: the coordinator numbers tables from 1 (checked: the first read, while every node is
   * up, is the coordinator's keyslice_node_writes_total of the node and table). */
  const TABLE_ID = 1;
  /**
   * A connection of the test's own to `node`, on which it reads the node's keyslice_node_writes_total of table T
   * (writes its slices admitted: counted when a leader runs one, before its commit) from the node itself: each worker
   * is asked a Stats, the load report's op, naming no slice, so that it answers from its counters alone (the
   * table's, over every slice it served), summed as the load report sums them. A scrape of the coordinator would wait
   * LOAD_REPORT_TIMEOUT_MS for the frozen followers' load. `read(deadline)` answers the count, or why there is none
   * by `deadline` (a Date.now() instant; each request waits the time left, at most READ_MS_MAX). The batch's epoch
   * is the node's: taken from its refusal of a batch at another (its first read's).
   */
  const writesCounter = async (node: ManagedProcess) => {
    const { ws, firstBytes } = await openNode(node.url, { [CLUSTER_SECRET_HEADER]: c.cluster.clusterSecret }, true);
    let workers: number;
    try {
      const hello = decodeNodeFrame(firstBytes!, 'coordinator');
      if (hello[0] !== NodeFrame.Hello) throw new Error(`the node's first frame is not its Hello: ${JSON.stringify(hello)}`);
      workers = hello[2];
      expect(workers, "the Hello's worker count").toBeGreaterThanOrEqual(1);
    } catch (err) {
      ws.terminate();
      throw err;
    }
    const waiting = new Map<number, (f: CoordinatorNodeFrame) => void>();
    ws.on('message', (data: Buffer) => {
      const f = decodeNodeFrame(data, 'coordinator');
      if (f[0] === NodeFrame.BatchReply || f[0] === NodeFrame.BatchError) waiting.get(f[1])?.(f);
    });
    let epoch = 0;
    let nextBatch = 1;
    const stats = encodeSliceOps([[SliceOp.Stats, TABLE_ID, sliceSetOf(0, [])]]);
    const ask = (worker: number, waitMs: number) =>
      new Promise<CoordinatorNodeFrame | null>((resolve) => {
        const id = nextBatch++;
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve(null);
        }, waitMs);
        waiting.set(id, (f) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(f);
        });
        ws.send(encodeNodeFrame([NodeFrame.Batch, id, epoch, [[worker, stats]]]));
      });
    const read = async (deadline = Infinity): Promise<number | string> => {
      // Two tries, both by `deadline`: the second at the epoch the node named in refusing the first (its first read, or
      // a map change).
      for (let attempt = 0; attempt < 2; attempt++) {
        const waitMs = Math.min(READ_MS_MAX, deadline - Date.now());
        if (waitMs <= 0) return `no time left to read (try ${attempt + 1})`;
        const answers = await Promise.all(Array.from({ length: workers }, (_, w) => ask(w, waitMs)));
        const named = answers.map(epochOfRefusal).find((e) => e !== null);
        if (named != null) {
          epoch = named;
          continue;
        }
        let writes = 0;
        for (const f of answers) {
          if (f === null) return `a worker did not answer within ${waitMs} ms`;
          if (f[0] !== NodeFrame.BatchReply) return `refused: ${JSON.stringify(f)}`;
          const [r] = decodeSliceResults(f[3]);
          if (r[0] !== RESULT_OK) return `Stats refused: ${JSON.stringify(r)}`;
          writes += (r[1] as StatsResult)[2][1];
        }
        return writes;
      }
      return `refused twice at the epoch the node named (${epoch})`;
    };
    return { read, close: () => ws.terminate() };
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
    let outcome: unknown;
    let took = -1;
    let heldMs = -1;
    let write: Promise<unknown> = Promise.resolve('not sent');
    let leaderWrites: Awaited<ReturnType<typeof writesCounter>> | undefined;
    try {
      leaderWrites = await writesCounter(leader);
      const leaderWritesBefore = await leaderWrites.read();
      const scrape = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
      const scraped = samples(parseExposition(await scrape.text()), 'keyslice_node_writes_total').filter((x) => x.labels.table === T && x.labels.node === leader.url);
      expect(scraped.length, "the scrape has the leader's series").toBeGreaterThan(0);
      // Above 0 (the put above was one of the leader's writes) before the two are compared: a Stats for a table the
      // node does not have answers zeros, so a wrong TABLE_ID would read 0 from every worker and match a scrape of 0.
      const scrapedWrites = scraped.reduce((n, x) => n + x.value, 0);
      expect(scrapedWrites, "the scrape counts the leader's writes of the table").toBeGreaterThan(0);
      expect(leaderWritesBefore, "read from the leader itself, its writes counter is the scrape's").toBe(scrapedWrites);
      const started = Date.now();
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
        // Bounded in count and time: the leader is to be frozen before its commit wait runs out, or it answers the
        // write itself (outcome unknown) and the router's resend goes to it again, not to a new leader. Its commit
        // wait begins when it takes the write, after it was sent: every read ends by `readsEnd`, the commit wait's
        // end counted from the send (each request waits only the time left), and a pause starts only while a read
        // can follow it. A read that gets no count (a worker late on a loaded host) is tried again.
        const readsEnd = sent + REPLICA_COMMIT_WAIT_MS;
        let leaderWritesNow: number | string = leaderWritesBefore;
        const moved = () => typeof leaderWritesNow === 'number' && leaderWritesNow !== leaderWritesBefore;
        for (let n = 0; n < REPLICA_COMMIT_WAIT_MS / POLL_MS && !moved() && Date.now() + POLL_MS < readsEnd; n++) {
          const pause = timer(POLL_MS);
          await pause.done;
          leaderWritesNow = await leaderWrites.read(readsEnd);
        }
        testLog?.(`in-flight failover: the leader's writes counter went ${leaderWritesBefore} -> ${leaderWritesNow} within ${Date.now() - sent} ms`);
        expect(leaderWritesNow, 'the leader took the write (its writes counter) before it is frozen').toBe((leaderWritesBefore as number) + 1);
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
      leaderWrites?.close();
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

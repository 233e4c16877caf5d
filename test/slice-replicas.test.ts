// The replicas of a slice on three workers' real stores and replica logs
// (slice-worker/replication/slice-replicas.ts), messages passed by hand: a write
// executed by the leader reaches the followers' partitions through the replay
// path; a deposed leader's store drops what it executed but never committed, and
// its diverged record is replaced by the new leader's; a restarted follower's
// store comes back from its replica log.
import { cpSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeReplicated, encodeReplicated } from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { COORDINATOR, type ReplicationMessage } from '../slice-worker/replication/replica.js';
import { SliceReplicas } from '../slice-worker/replication/slice-replicas.js';
import { ReplicaHarness } from './replica-harness.js';
import { EFFECT_SET, RESULT_OK, SliceOp, type Effect, type RequestId, type WriteOp } from '../shared/protocol.js';

const SLICE = 5;
const TABLE = 1;
const root = mkdtempSync(join(tmpdir(), 'ks-slice-replicas-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Worker {
  store: SliceStore;
  replicas: SliceReplicas;
}

describe('the replicas of a slice on workers\' stores', () => {
  it('replicates executed writes, rolls a deposed leader back to what is committed, and recovers a follower from its log', async () => {
    const committed: [number, number][] = [];
    const deposed: number[] = [];
    /** Sizes of the buffers behind the records' payloads sent, where larger than the payload: the worker posts
     * these messages to its node, and a view into msgpackr's reused buffer would be copied whole (32 KiB+). */
    const payloadsInLargerBuffers: [number, number][] = [];
    const h = new ReplicaHarness(join(root, 'basic'), SLICE, 3, {
      events: (i) => ({ committed: (_slice, index) => committed.push([i, index]), deposed: () => deposed.push(i) }),
      onMessage: ({ m }) => {
        if (m.type === 'Append') for (const r of m.records) if (r.payload.buffer.byteLength !== r.payload.byteLength) payloadsInLargerBuffers.push([r.payload.byteLength, r.payload.buffer.byteLength]);
      },
    });
    const { workers, cut } = h;
    const pump = () => h.pump();
    const elect = (leader: number, term: number, voters: number[]) => h.elect(leader, term, voters);
    const put = (w: Worker, key: string, v: number) => {
      expect(w.store.execute([SliceOp.Put, TABLE, SLICE, key, { k: key, v }, 20, null, null])[0]).toBe(0);
      return w.replicas.propose(w.store.takeEffects());
    };
    const items = (w: Worker) =>
      [...w.store.entries()].filter((e) => e[0] === EFFECT_SET && e[2] === SLICE).map((e) => `${e[3]}=${(e[4] as { v: number }).v}`).sort();

    await elect(0, 1, [0, 1, 2]);
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    const [[, first]] = put(workers[0], 'a', 1);
    await pump();
    expect(committed).toContainEqual([0, first]);
    h.later();
    workers[0].replicas.of(SLICE).tick(); // carries the commit index to the followers
    await pump();
    for (const w of workers) expect(items(w)).toEqual(['a=1']);

    // The leader is cut off and executes a write that no follower gets; 1 and 2 elect 1.
    cut.add('0-1').add('0-2');
    put(workers[0], 'b', 2);
    await pump();
    expect(items(workers[0])).toEqual(['a=1', 'b=2']);
    await elect(1, 2, [1, 2]);
    workers[1].store.execute([SliceOp.Assign, 2, [SLICE]]);
    put(workers[1], 'c', 3);
    await pump();
    h.later();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    expect(items(workers[2])).toEqual(['a=1', 'c=3']);

    // The old leader is back: it learns of term 2, stops leading, drops 'b', and takes the new leader's records.
    cut.clear();
    h.later();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    h.later();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    expect(deposed).toEqual([0]);
    expect(workers[0].replicas.of(SLICE).isLeader).toBe(false);
    expect(items(workers[0])).toEqual(['a=1', 'c=3']);

    // A follower restarted from its replica log has what was committed. (Its commit point is written
    // lazily, with its next flush: one more heartbeat makes that happen.)
    h.later();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    h.start(2);
    expect(items(workers[2])).toEqual(['a=1', 'c=3']);
    expect(payloadsInLargerBuffers).toEqual([]);
  });
});

describe('a leader that leads on across a replica-set change (LeadOn)', () => {
  it('keeps what it executed: its write of the term before commits with the new barrier, and is not applied again over a newer write of the same item', async () => {
    const deposed: number[] = [];
    const h = new ReplicaHarness(join(root, 'lead-on'), SLICE, 4, { events: (i) => ({ deposed: () => deposed.push(i) }) });
    const { workers, cut } = h;
    const put = (w: Worker, key: string, v: number) => {
      expect(w.store.execute([SliceOp.Put, TABLE, SLICE, key, { k: key, v }, 20, null, null])[0]).toBe(0);
      return w.replicas.propose(w.store.takeEffects());
    };
    const items = (w: Worker) =>
      [...w.store.entries()].filter((e) => e[0] === EFFECT_SET && e[2] === SLICE).map((e) => `${e[3]}=${(e[4] as { v: number }).v}`).sort();
    const leader = workers[0].replicas;
    // 0 leads term 1 over 0, 1, 2.
    for (const v of [0, 1, 2]) workers[v].replicas.receive(SLICE, COORDINATOR, { type: 'Prepare', term: 1 });
    await h.pump();
    leader.receive(SLICE, COORDINATOR, { type: 'Lead', term: 1, followers: [1, 2], sets: [] });
    await h.pump();
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    put(workers[0], 'x', 1);
    await h.pump();
    // Its followers cut off, it executes x=2 at term 1: not committed.
    cut.add('0-1').add('0-2');
    put(workers[0], 'x', 2);
    await h.pump();
    // The set becomes 0, 1, 2, 3: it leads on at term 2, still serving, and executes x=3.
    leader.receive(SLICE, COORDINATOR, { type: 'LeadOn', term: 2, from: 1, followers: [1, 2, 3], sets: [[0, 1, 2, 3], [0, 1, 2]] });
    expect([leader.of(SLICE).term, leader.serving(SLICE), deposed]).toEqual([2, true, []]);
    put(workers[0], 'x', 3);
    await h.pump();
    expect(items(workers[0])).toEqual(['x=3']);
    // The links come back: x=2 commits with the barrier of term 2 and x=3 after it, and every replica holds x=3.
    // (Applied again at its commit, x=2 would put the leader's store back to x=2 under x=3.)
    cut.clear();
    for (let i = 0; i < 4; i++) {
      h.later();
      leader.of(SLICE).tick();
      await h.pump();
    }
    expect(leader.of(SLICE).commitIndex).toBe(leader.of(SLICE).lastIndex);
    for (const w of workers) expect(items(w)).toEqual(['x=3']);
    expect(deposed).toEqual([]);
  });
});

describe('eventually consistent reads on a follower', () => {
  it('answers only once it has applied what its leader last said is committed: never while it is being built', async () => {
    const ITEMS = 300; // more records than one Append carries (REPLICATION_APPEND_RECORDS_MAX), so a new replica catches up in steps
    let queue: { from: number; to: number; m: ReplicationMessage }[] = [];
    const start = (i: number): Worker => {
      const store = new SliceStore(0, 1);
      const { log } = ReplicaLog.open(join(root, `reads-${i}`), 'fsync');
      return { store, replicas: new SliceReplicas(i, store, log, (_slice, to, m) => queue.push({ from: i, to, m })) };
    };
    const workers = [0, 1, 2, 3].map(start);
    const keys = (w: Worker) => [...w.store.entries()].filter((e) => e[0] === EFFECT_SET && e[2] === SLICE).length;
    /** Delivers one message at a time (letting the logs flush between them), calling `check` after each; bounded. */
    const pump = async (check: () => void = () => {}) => {
      for (let step = 0; step < 20_000; step++) {
        if (queue.length === 0) {
          await new Promise((r) => setImmediate(r));
          await new Promise((r) => setTimeout(r, 2));
          if (queue.length === 0) return;
        }
        const { from, to, m } = queue.shift()!;
        if (to !== COORDINATOR) workers[to].replicas.receive(SLICE, from, m);
        check();
      }
      throw new Error('messages still flowing after 20000 steps');
    };
    const elect = async (term: number, voters: number[], followers: number[]) => {
      for (const v of voters) workers[v].replicas.receive(SLICE, COORDINATOR, { type: 'Prepare', term });
      await pump();
      workers[0].replicas.receive(SLICE, COORDINATOR, { type: 'Lead', term, followers, sets: [] });
      await pump();
      expect(workers[0].replicas.serving(SLICE)).toBe(true);
    };

    await elect(1, [0, 1, 2], [1, 2]);
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    for (let i = 0; i < ITEMS; i++) {
      expect(workers[0].store.execute([SliceOp.Put, TABLE, SLICE, `k${i}`, { k: `k${i}`, v: i }, 20, null, null])[0]).toBe(0);
      workers[0].replicas.propose(workers[0].store.takeEffects());
    }
    await pump();
    workers[0].replicas.of(SLICE).tick(); // the commit index to the followers
    await pump();
    for (const f of [1, 2]) {
      expect(workers[f].replicas.readable(SLICE)).toBe(true);
      expect(keys(workers[f])).toBe(ITEMS);
      // The follower does not own the slice (a consistent read there is WrongOwner); its replica read answers.
      expect(workers[f].store.execute([SliceOp.Get, TABLE, SLICE, 'k7', null, false])[2]).toMatch(/not owned/);
      expect(workers[f].store.readReplica([SliceOp.ReplicaGet, TABLE, SLICE, 'k7', null, false])).toEqual([0, expect.objectContaining({ v: 7 })]);
    }
    // A replica new to the set (no state) and the leader itself are not readable.
    expect(workers[3].replicas.readable(SLICE)).toBe(false);
    expect(workers[0].replicas.readable(SLICE)).toBe(false);

    // The set grows to four: an election at term 2. Until the new leader speaks, no follower answers.
    for (const v of [0, 1, 2, 3]) workers[v].replicas.receive(SLICE, COORDINATOR, { type: 'Prepare', term: 2 });
    await pump();
    for (const f of [1, 2, 3]) expect(workers[f].replicas.readable(SLICE)).toBe(false);
    workers[0].replicas.receive(SLICE, COORDINATOR, { type: 'Lead', term: 2, followers: [1, 2, 3], sets: [] });
    // Replica 3 catches up from nothing, record by record in several Appends: whenever it says it may answer,
    // its store holds every item (all were committed before it joined); and it was seen partly built and not readable.
    let partlyBuiltSeen = false;
    await pump(() => {
      const n = keys(workers[3]);
      if (workers[3].replicas.readable(SLICE)) expect(n).toBe(ITEMS);
      else if (n > 0 && n < ITEMS) partlyBuiltSeen = true;
    });
    workers[0].replicas.of(SLICE).tick();
    await pump();
    expect(partlyBuiltSeen).toBe(true);
    for (const f of [1, 2, 3]) expect(workers[f].replicas.readable(SLICE)).toBe(true);
    expect(workers[3].store.readReplica([SliceOp.ReplicaGet, TABLE, SLICE, `k${ITEMS - 1}`, null, false])).toEqual([0, expect.objectContaining({ v: ITEMS - 1 })]);

    // A restarted follower has its committed items but waits for its leader's word before it answers.
    workers[0].replicas.of(SLICE).tick();
    await pump();
    workers[2] = start(2);
    expect(keys(workers[2])).toBe(ITEMS);
    expect(workers[2].replicas.readable(SLICE)).toBe(false);
  });
});

describe('a write sent twice', () => {
  it('is applied once, and its second copy gets the first one\'s answer: on the same leader, after a leader change, after a restart and a checkpoint', async () => {
    /** How far each worker's wall clock is ahead (ms). */
    const ahead = [0, 0, 0];
    const h = new ReplicaHarness(join(root, 'twice'), SLICE, 3, { wallNow: (i) => () => Date.now() + ahead[i] });
    const { workers, cut } = h;
    const pump = () => h.pump();
    let epoch = 0;
    const elect = async (leader: number, term: number, voters: number[]) => {
      await h.elect(leader, term, voters);
      workers[leader].store.execute([SliceOp.Assign, ++epoch, [SLICE]]);
    };
    /** ADD n 1 on item 'c', answering the new item: what a counter's client does. */
    const increment = (id: RequestId): WriteOp => [SliceOp.Update, TABLE, SLICE, 'c', { base: { k: 'c' }, actions: [{ k: 'add', path: ['n'], n: 1 }], condition: null, oldOnFailure: false, returnValues: 'new' }, id];
    /** The leader runs a write as its worker does (worker.ts): executed once per id, then the task's effects proposed. */
    const run = (w: Worker, op: WriteOp) => {
      const result = w.replicas.execute(op);
      const effects = w.store.takeEffects();
      if (effects.length > 0) w.replicas.propose(effects);
      return { result, effects: effects.length };
    };
    const settle = async (leader: number) => {
      await pump();
      workers[leader].replicas.of(SLICE).tick(); // the commit index to the followers
      await pump();
    };
    const counter = (w: Worker) => (w.store.execute([SliceOp.Get, TABLE, SLICE, 'c', null, false])[1] as { n?: number } | null)?.n ?? null;
    const counterOnReplica = (w: Worker) => ([...w.store.entries()].find((e) => e[0] === EFFECT_SET && e[2] === SLICE && e[3] === 'c')?.[4] as { n: number } | undefined)?.n ?? null;

    await elect(0, 1, [0, 1, 2]);
    const first = run(workers[0], increment([0xfeedc0de, 1]));
    expect(first.result).toEqual([RESULT_OK, expect.objectContaining({ n: 1 })]);
    expect(first.effects).toBe(1);
    await settle(0);

    // Sent again to the same leader (its answer was lost): the first answer, nothing applied, no record.
    const again = run(workers[0], increment([0xfeedc0de, 1]));
    expect(again).toEqual({ result: first.result, effects: 0 });
    expect(counter(workers[0])).toBe(1);

    // The leader is frozen out; 1 leads. The copy sent there is answered from what 1 applied from the log.
    await elect(1, 2, [1, 2]);
    expect(run(workers[1], increment([0xfeedc0de, 1]))).toEqual({ result: first.result, effects: 0 });
    expect(counter(workers[1])).toBe(1);
    // A new write is applied (once), and answers its own new value.
    expect(run(workers[1], increment([0xbeef, 2])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 2 })]);
    await settle(1);

    // A write the leader executed but never got committed (its followers cut off) was not applied: the leader
    // elected next executes its copy as new, once, and the deposed one forgets its own.
    cut.add('1-0').add('1-2');
    expect(run(workers[1], increment([0xfeedc0de, 3])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 3 })]);
    await pump();
    await elect(2, 3, [0, 2]);
    expect(run(workers[2], increment([0xfeedc0de, 3])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 3 })]);
    expect(run(workers[2], increment([0xfeedc0de, 3])).effects).toBe(0);
    cut.clear();
    await settle(2);
    await settle(2);
    for (const w of workers) expect(counterOnReplica(w)).toBe(3);

    // Every replica remembers the ids through a restart from its replica log, and through a checkpoint of it
    // (the records compacted into a snapshot, which carries the ids).
    await settle(2);
    h.start(0);
    expect(workers[0].replicas.rememberedRequests(SLICE)).toBe(3);
    workers[0].replicas.compact();
    await workers[0].log.checkpoint();
    h.start(0);
    expect(counterOnReplica(workers[0])).toBe(3);
    expect(workers[0].replicas.rememberedRequests(SLICE)).toBe(3);
    await elect(0, 4, [0, 1, 2]);
    for (const [id, n] of [[[0xfeedc0de, 1], 1], [[0xbeef, 2], 2], [[0xfeedc0de, 3], 3]] as [RequestId, number][]) {
      expect(run(workers[0], increment(id))).toEqual({ result: [RESULT_OK, expect.objectContaining({ n })], effects: 0 });
    }
    expect(counter(workers[0])).toBe(3);

    // A worker's task may hold its node's new assignment between two chunks (worker.ts takeControl): a write
    // executed before it, on a slice the assignment takes away, is never proposed (its leader resigned, its
    // store went back to what is committed, its answer is unknown). Its id must go with it: carried in the
    // slice's next record (the replica leads it again), every follower would remember a write none applied,
    // and answer its resend without applying it.
    expect(workers[0].replicas.execute(increment([0xfeedc0de, 4]))).toEqual([RESULT_OK, expect.objectContaining({ n: 4 })]);
    workers[0].replicas.resign(SLICE);
    workers[0].store.takeEffects();
    expect(counter(workers[0])).toBe(3);
    await pump();
    await elect(0, 5, [0, 1, 2]);
    expect(run(workers[0], increment([0xfeedc0de, 5])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 4 })]);
    await settle(0);
    await settle(0);
    await elect(1, 6, [0, 1, 2]);
    expect(run(workers[1], increment([0xfeedc0de, 4]))).toEqual({ result: [RESULT_OK, expect.objectContaining({ n: 5 })], effects: 1 });
    await settle(1);
    await settle(1);
    for (const w of workers) expect(counterOnReplica(w)).toBe(5);

    // The next leader's wall clock is two minutes ahead (a node whose clock was stepped, or is not synced). The
    // write its predecessor applied a moment ago, whose answer was lost, is still remembered after the new
    // leader's first write: the bound counts time passed, not how far one clock is from another.
    expect(run(workers[1], increment([0xfeedc0de, 6])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 6 })]);
    await settle(1);
    ahead[2] = 120_000;
    await elect(2, 7, [0, 1, 2]);
    expect(run(workers[2], increment([0xfeedc0de, 7])).result).toEqual([RESULT_OK, expect.objectContaining({ n: 7 })]);
    expect(run(workers[2], increment([0xfeedc0de, 6]))).toEqual({ result: [RESULT_OK, expect.objectContaining({ n: 6 })], effects: 0 });
    expect(counter(workers[2])).toBe(7);
  });
});

describe('a replica dropped from a node (it left the slice\'s set)', () => {
  it('keeps the term it promised: a leader deposed by an election it voted in gets no acknowledgement from a replica made there later', async () => {
    // Slice SLICE at R=3 on workers 0, 1, 2; 0 leads term 1. 0 is cut off (frozen, say) and 1 and 2 elect 1 at term 2:
    // a majority of 0's set promised term 2, which is what keeps 0 from committing anything more. Then worker 2's
    // node leaves the set (the change settles without it) and drops the replica, as worker.ts dropLeftReplicas
    // does; later a move puts a replica of the slice on that node again. Old leader 0, back, still believes it
    // leads term 1 with followers 1 and 2; 1 is out of its reach. If the new replica on 2 had forgotten the
    // promise, it would take 0's records and 0 would count {0, 2} as a majority of its set: a write acknowledged
    // by a deposed leader, that no later leader holds.
    const committed: [number, number][] = [];
    const h = new ReplicaHarness(join(root, 'dropped'), SLICE, 3, { events: (i) => ({ committed: (_slice, index) => committed.push([i, index]) }) });
    const { cut } = h;
    const workers = h.workers.map((w) => w.replicas);
    const stores = h.workers.map((w) => w.store);
    const logs = h.workers.map((w) => w.log);
    // Bounded, not an error: with the promise forgotten, old leader 0 and the new replica go on talking.
    const pump = () => h.pump(true);
    const elect = (leader: number, term: number, voters: number[]) => h.elect(leader, term, voters, true);
    const put = (w: number, key: string) => {
      expect(stores[w].execute([SliceOp.Put, TABLE, SLICE, key, { k: key }, 20, null, null])[0]).toBe(0);
      return workers[w].propose(stores[w].takeEffects())[0][1];
    };

    // 2 hears nothing from 0 (so 0 believes 2 holds nothing: a leader that froze soon after its election).
    cut.add('0-2');
    await elect(0, 1, [0, 1, 2]);
    stores[0].execute([SliceOp.Assign, 1, [SLICE]]);
    put(0, 'a');
    await pump();
    cut.add('0-1');
    await elect(1, 2, [1, 2]);

    // Worker 2's replica leaves: resigned, then dropped with its items and its replica-log state (dropLeftReplicas).
    workers[2].resign(SLICE);
    logs[2].flush();
    workers[2].drop(SLICE);
    stores[2].forgetSlice(SLICE);
    logs[2].drop(SLICE);
    // A replica of the slice is made there again (a later move), and old leader 0 reaches it, not 1.
    cut.delete('0-2');
    const late = put(0, 'b');
    for (let i = 0; i < 5; i++) {
      workers[0].of(SLICE).tick();
      await pump();
    }
    expect(committed.filter(([w, index]) => w === 0 && index >= late), 'the deposed leader commits nothing').toEqual([]);
    expect(workers[2].of(SLICE).term, 'the new replica took no record of term 1').toBe(2);
    expect(logs[2].durable(SLICE).promisedTerm, 'the dropped replica\'s promise is kept').toBe(2);
    // Across a restart and a checkpoint too.
    await logs[2].checkpoint();
    expect(ReplicaLog.open(join(root, 'dropped', 'worker-2'), 'fsync').log.durable(SLICE).promisedTerm).toBe(2);
  });
});

describe('a leader under steady writes', () => {
  it('compacts its log though it always holds a record not yet committed: its records stay bounded, and a restart reads the same items back', async () => {
    // Each round: a write the followers have not acknowledged yet when the worker asks for a compaction and
    // checkpoint (as under load: a record or two always in flight), then the round trip that commits it.
    // Before, a leader compacted only when it held nothing uncommitted: under steady writes, never.
    const ROUNDS = 60;
    const h = new ReplicaHarness(join(root, 'steady'), SLICE, 3);
    const leader = () => h.workers[0];
    await h.elect(0, 1, [0, 1, 2]);
    leader().store.execute([SliceOp.Assign, 1, [SLICE]]);
    const items = (w: Worker) =>
      [...w.store.entries()].filter((e) => e[0] === EFFECT_SET && e[2] === SLICE).map((e) => `${e[3]}=${(e[4] as { v: number }).v}`).sort();
    let kept = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const w = leader();
      expect(w.store.execute([SliceOp.Put, TABLE, SLICE, `k${i % 7}`, { k: `k${i % 7}`, v: i }, 20, null, null])[0]).toBe(0);
      w.replicas.propose(w.store.takeEffects());
      // The worker's compaction: leaders take their state, a bounded wait for it to commit, then compact and checkpoint.
      w.replicas.prepareCompaction();
      await h.pump();
      expect(w.store.execute([SliceOp.Put, TABLE, SLICE, `k${(i + 3) % 7}`, { k: `k${(i + 3) % 7}`, v: i }, 20, null, null])[0]).toBe(0);
      w.replicas.propose(w.store.takeEffects());
      w.replicas.compact();
      await w.log.checkpoint();
      await h.pump();
      kept = Math.max(kept, w.log.durable(SLICE).records.length);
    }
    const r = leader().replicas.of(SLICE);
    expect(r.lastIndex).toBeGreaterThan(2 * ROUNDS);
    // The log on disk (what every checkpoint holds and a restart reads back) and the records in memory stay few.
    expect(kept).toBeLessThanOrEqual(4);
    expect(r.recordAt(r.lastIndex - 8)).toBeUndefined();
    // The leader restarts from its log: the same items as before, and as the followers hold.
    leader().replicas.of(SLICE).tick();
    await h.pump();
    const before = items(leader());
    expect(before.length).toBe(7);
    // Its commit point is written lazily (with the next sync): flushed here, as the next write's would.
    leader().log.flush();
    h.start(0);
    expect(items(h.workers[0])).toEqual(before);
    for (const f of [1, 2]) expect(items(h.workers[f])).toEqual(before);
  });
});

describe('a deposed leader that has not heard of the new term yet', () => {
  it('takes the new leader\'s record of a write it executed itself and never committed (the router sent it again there), rather than refusing it as naming an id applied already', async () => {
    // 0 leads term 1 and executes a write with id [7, 2] while cut off from 1 and 2: never committed, but 0's replica
    // remembers the id (execute() adds it). 1 and 2 elect 1 at term 2; 0 gets neither the Prepare nor 1's barrier.
    // The router sends the write again to 1, which applies it as new, in a record after its barrier. That Append is
    // the first word of term 2 to reach 0: it deposes 0, whose store and remembered ids go back to what is
    // committed (replayCommitted), so the record is 0's to take. Refused instead ("applied already"), 0 stayed a
    // leader of term 1 until 1's next heartbeat, and logged a protocol violation that no peer made.
    const malformed: string[] = [];
    const h = new ReplicaHarness(join(root, 'resent-to-new-leader'), SLICE, 3, { events: () => ({ malformed: (_slice, _from, why) => malformed.push(why) }) });
    const { workers, cut } = h;
    const increment = (id: RequestId): WriteOp => [SliceOp.Update, TABLE, SLICE, 'c', { base: { k: 'c' }, actions: [{ k: 'add', path: ['n'], n: 1 }], condition: null, oldOnFailure: false, returnValues: 'new' }, id];
    const run = (w: Worker, op: WriteOp) => {
      const result = w.replicas.execute(op);
      const effects = w.store.takeEffects();
      if (effects.length > 0) w.replicas.propose(effects);
      return result;
    };
    const counterOnReplica = (w: Worker) => ([...w.store.entries()].find((e) => e[0] === EFFECT_SET && e[2] === SLICE && e[3] === 'c')?.[4] as { n: number } | undefined)?.n ?? null;

    await h.elect(0, 1, [0, 1, 2]);
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    expect(run(workers[0], increment([7, 1]))).toEqual([RESULT_OK, expect.objectContaining({ n: 1 })]);
    await h.pump();
    workers[0].replicas.of(SLICE).tick();
    await h.pump();
    cut.add('0-1').add('0-2');
    expect(run(workers[0], increment([7, 2]))).toEqual([RESULT_OK, expect.objectContaining({ n: 2 })]);
    await h.pump();
    await h.elect(1, 2, [1, 2]);
    workers[1].store.execute([SliceOp.Assign, 2, [SLICE]]);
    cut.clear();
    expect(run(workers[1], increment([7, 2]))).toEqual([RESULT_OK, expect.objectContaining({ n: 2 })]);
    await h.pump();
    expect(malformed, 'nothing a peer sent was malformed').toEqual([]);
    expect(workers[0].replicas.of(SLICE).isLeader, 'the Append of term 2 deposed 0').toBe(false);
    for (let i = 0; i < 3; i++) {
      workers[1].replicas.of(SLICE).tick();
      await h.pump();
    }
    for (const w of workers) expect(counterOnReplica(w)).toBe(2);
    expect(malformed).toEqual([]);
  });
});

describe('a write sent again after its leader forgot its id (the bounds of applied requests)', () => {
  it('is a record its followers take, though they still remember the id or get both copies in one append: the slice goes on committing', async () => {
    // Answers of 200 KB: a slice remembers about two of them (APPLIED_REQUEST_BYTES_PER_SLICE_MAX). The leader forgets
    // W1's id once it executes W3; follower 1 forgets it only once it applies W3, when it learns that W3 is committed.
    // A copy of W1 sent again before then is executed as new (the id is gone: the bound's documented cost) and
    // proposed after W3. Follower 2, cut off meanwhile, gets W1 and its copy in one append. Each applies the
    // records in order, as the leader executed them (an id it still remembers keeps its first answer:
    // AppliedRequests.addAll). Refused instead, neither follower took the copy nor anything after it, ever: the
    // leader sent it again on every refusal, and the slice committed nothing more.
    const malformed: string[] = [];
    const committed: number[] = [];
    const h = new ReplicaHarness(join(root, 'forgotten-id'), SLICE, 3, {
      events: (i) => ({ malformed: (_slice, _from, why) => malformed.push(why), committed: (_slice, index) => i === 0 && committed.push(index) }),
    });
    const { workers, cut } = h;
    const big = 'b'.repeat(200 * 1024);
    const write = (id: RequestId, key: string): WriteOp => [SliceOp.Update, TABLE, SLICE, key, { base: { k: key }, actions: [{ k: 'set', path: ['big'], value: { k: 'value', v: big } }, { k: 'add', path: ['n'], n: 1 }], condition: null, oldOnFailure: false, returnValues: 'new' }, id];
    const run = (w: Worker, op: WriteOp) => {
      const result = w.replicas.execute(op);
      const effects = w.store.takeEffects();
      const at = effects.length > 0 ? w.replicas.propose(effects)[0][1] : null;
      return { result, at };
    };
    const heartbeats = async () => {
      // Bounded: refused, a leader sends its records again at once.
      for (let i = 0; i < 5; i++) {
        h.later();
        workers[0].replicas.of(SLICE).tick();
        await h.pump(true);
      }
    };
    const n = (w: Worker, key: string) => ([...w.store.entries()].find((e) => e[0] === EFFECT_SET && e[2] === SLICE && e[3] === key)?.[4] as { n: number } | undefined)?.n ?? null;
    await h.elect(0, 1, [0, 1, 2]);
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    cut.add('0-2');
    expect(run(workers[0], write([7, 1], 'a')).result[0]).toBe(RESULT_OK);
    await heartbeats();
    expect(workers[1].replicas.rememberedRequests(SLICE)).toBe(1);
    run(workers[0], write([7, 2], 'b'));
    run(workers[0], write([7, 3], 'c'));
    expect(workers[0].replicas.rememberedRequests(SLICE), 'the leader forgot W1').toBe(2);
    const again = run(workers[0], write([7, 1], 'a'));
    expect(again.at, 'executed as new').not.toBeNull();
    await heartbeats();
    expect(committed.at(-1), 'the copy of W1 is committed').toBe(again.at);
    cut.clear();
    await heartbeats();
    for (const w of workers) expect([n(w, 'a'), n(w, 'b'), n(w, 'c')]).toEqual([2, 1, 1]);
    for (const w of workers) expect(w.replicas.rememberedRequests(SLICE)).toBe(2);
    expect(malformed).toEqual([]);
  });
});

describe('a leader whose record its followers refuse as malformed', () => {
  it('sends it again once a heartbeat, not at once on every refusal (which went on at the network\'s speed)', async () => {
    // A payload that is not a slice's changes (a leader's bug, a damaged log): every follower refuses it
    // MalformedContents, for as long as the leader holds it. Each refusal answered by an Append at once made a loop
    // between the nodes as fast as they could pass messages; a heartbeat's probe sends it again REPLICA_TICK_MS later.
    const refusals: string[] = [];
    const h = new ReplicaHarness(join(root, 'malformed-resend'), SLICE, 3, { onMessage: (s) => s.m.type === 'Refused' && refusals.push(s.m.code) });
    await h.elect(0, 1, [0, 1, 2]);
    h.workers[0].replicas.of(SLICE).propose(Uint8Array.of(0xc1));
    await h.pump(); // throws past 50 rounds of messages
    expect(refusals).toEqual(['MalformedContents', 'MalformedContents']);
    for (let i = 0; i < 3; i++) {
      h.workers[0].replicas.of(SLICE).tick();
      await h.pump();
    }
    expect(refusals.length).toBeLessThanOrEqual(2 + 3 * 2);
  });
});

describe('a follower sent a record whose item holds a number that is not finite', () => {
  it('refuses it as MalformedContents, applies none of it, and goes on taking good records of another leader', async () => {
    // validateValue refuses NaN and Infinity with a KeysliceError (ValidationError), not MalformedFrame: let past the
    // follower's check, it threw out of SliceReplicas.receive, which on a worker is out of its batch port's message
    // handler (batch-port.ts onFrame), so the worker thread failed and its node died (main.ts die), on every
    // follower the leader sent it to, again after each restart while the leader held the record.
    const refusals: string[] = [];
    const h = new ReplicaHarness(join(root, 'not-finite'), SLICE, 3, { onMessage: (s) => s.m.type === 'Refused' && refusals.push(s.m.code) });
    await h.elect(0, 1, [0, 1, 2]);
    h.workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    const item = (w: Worker, key: string) => [...w.store.entries()].find((e) => e[0] === EFFECT_SET && e[2] === SLICE && e[3] === key)?.[4] ?? null;
    const bad = encodeReplicated([[EFFECT_SET, TABLE, SLICE, 'bad', { k: 'bad', v: [1, NaN] }, 20] as Effect], null);
    h.workers[0].replicas.of(SLICE).propose(bad);
    await h.pump();
    expect(refusals).toEqual(['MalformedContents', 'MalformedContents']);
    for (const w of [1, 2]) expect(item(h.workers[w], 'bad'), `follower ${w} applied none of it`).toBeNull();
    // The followers still serve: worker 1 leads term 2 (its log holds nothing of the bad record) and 2 takes its writes.
    await h.elect(1, 2, [1, 2]);
    h.workers[1].store.execute([SliceOp.Assign, 2, [SLICE]]);
    expect(h.workers[1].store.execute([SliceOp.Put, TABLE, SLICE, 'good', { k: 'good', v: 1 }, 20, null, null])[0]).toBe(0);
    h.workers[1].replicas.propose(h.workers[1].store.takeEffects());
    for (let i = 0; i < 3; i++) {
      h.later();
      h.workers[1].replicas.of(SLICE).tick();
      await h.pump(true);
    }
    expect(item(h.workers[2], 'good')).toMatchObject({ k: 'good', v: 1 });
    expect(item(h.workers[2], 'bad')).toBeNull();
  });
});

describe('a follower sent a record whose key is not a byte string', () => {
  it('refuses it as MalformedContents, applies none of it, and goes on taking records and compacting', async () => {
    // Every key the store makes is a byte string (shared/key-encoding.ts); a snapshot's state writes a key's chars
    // as one or two bytes of UTF-8 each and asserts so (log-format.ts keyUtf8Bytes). The arrival check asked only
    // for a string: a follower took a key with a char past 0xff, and its next compaction failed that assertion,
    // which on a worker fails its thread. Both reads of the check refuse it: the header read (setEffectsEnd) leaves
    // such UTF-8 to the whole decode, whose check (checkSliceChanges) refuses it.
    const refusals: string[] = [];
    const malformed: string[] = [];
    const h = new ReplicaHarness(join(root, 'not-a-byte-string'), SLICE, 3, {
      onMessage: (s) => s.m.type === 'Refused' && refusals.push(s.m.code),
      events: () => ({ malformed: (_slice, _from, why) => malformed.push(why) }),
    });
    await h.elect(0, 1, [0, 1, 2]);
    h.workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    const item = (w: number, key: string) => [...h.workers[w].store.entries()].find((e) => e[0] === EFFECT_SET && e[2] === SLICE && e[3] === key)?.[4] ?? null;
    const bad = encodeReplicated([
      [EFFECT_SET, TABLE, SLICE, 'fine\u00e9', { k: 'fine' }, 20],
      [EFFECT_SET, TABLE, SLICE, 'k\u4e2d', { k: 'bad' }, 20],
    ] as Effect[], null);
    h.workers[0].replicas.of(SLICE).propose(bad);
    await h.pump();
    expect(refusals).toEqual(['MalformedContents', 'MalformedContents']);
    expect(malformed.length).toBe(2);
    for (const why of malformed) expect(why).toContain('is not an encoded key (a byte string: char codes 0 to 255)');
    for (const w of [1, 2]) expect([item(w, 'fine\u00e9'), item(w, 'k\u4e2d')], `follower ${w} applied none of it`).toEqual([null, null]);
    // The followers still serve: worker 1 leads term 2 and 2 takes its writes, then each compacts.
    await h.elect(1, 2, [1, 2]);
    h.workers[1].store.execute([SliceOp.Assign, 2, [SLICE]]);
    expect(h.workers[1].store.execute([SliceOp.Put, TABLE, SLICE, 'good\u00ff', { k: 'good', v: 1 }, 20, null, null])[0]).toBe(0);
    h.workers[1].replicas.propose(h.workers[1].store.takeEffects());
    for (let i = 0; i < 3; i++) {
      h.later();
      h.workers[1].replicas.of(SLICE).tick();
      await h.pump(true);
    }
    expect(item(2, 'good\u00ff')).toMatchObject({ k: 'good', v: 1 });
    for (const w of [1, 2]) h.workers[w].replicas.compact();
    expect(item(2, 'k\u4e2d')).toBeNull();
  });
});

describe('a compaction in steps (SliceCompaction, as a worker runs it between tasks)', () => {
  it('encodes one slice a step while every slice goes on committing, keeps its snapshots out of the log until the checkpoint, and a crash after any step or amid the checkpoint reads every committed item back', async () => {
    // Before, a worker encoded every slice's state in one turn (21-457 ms on a busy 2-core machine, bench/PROFILE.md),
    // and every slice it leads or follows committed nothing meanwhile.
    const SLICES = [11, 12, 13, 14, 15, 16];
    const dir = join(root, 'steps');
    const { log } = ReplicaLog.open(dir, 'os');
    const store = new SliceStore(0, 1);
    const committed = new Map<number, number>();
    const replicas = new SliceReplicas(0, store, log, () => {}, { committed: (slice, index) => committed.set(slice, index) });
    const turn = () => new Promise((r) => setImmediate(r));
    store.execute([SliceOp.Assign, 1, SLICES]);
    // Each slice led by this worker alone (a set of one commits once its own log has the record).
    for (const s of SLICES) {
      replicas.receive(s, COORDINATOR, { type: 'Prepare', term: 1 });
      replicas.receive(s, COORDINATOR, { type: 'Lead', term: 1, followers: [], sets: [] });
    }
    await turn();
    let n = 0;
    /** A write on each slice (of 150 keys a slice, ~1 KB each); answers each slice's index. */
    const putAll = () => {
      const key = `k${n++ % 150}`;
      return new Map(
        SLICES.map((s) => {
          expect(store.execute([SliceOp.Put, TABLE, s, key, { k: key, v: n, pad: 'x'.repeat(1_000) }, 1_040, null, null])[0]).toBe(RESULT_OK);
          return replicas.propose(store.takeEffects())[0];
        }),
      );
    };
    const items = (st: SliceStore) => [...st.entries()].filter((e) => e[0] === EFFECT_SET).map((e) => `${e[2]}/${e[3]}=${(e[4] as { v: number }).v}`).sort();
    const segmentBytes = () => readdirSync(dir).filter((f) => f.endsWith('.log')).reduce((b, f) => b + statSync(join(dir, f)).size, 0);
    let crashes = 0;
    /** The process killed now: its log as it is on disk (at 'os', what the OS holds) read back by a new worker. */
    const crashReadsBack = () => {
      log.flush(); // the commit points, written lazily with the next sync
      const copy = join(root, `steps-crash-${crashes++}`);
      cpSync(dir, copy, { recursive: true });
      const again = new SliceStore(0, 1);
      again.execute([SliceOp.Assign, 1, SLICES]);
      new SliceReplicas(0, again, ReplicaLog.open(copy, 'os').log, () => {});
      expect(items(again)).toEqual(items(store));
    };
    for (let i = 0; i < 150; i++) putAll();
    await turn();
    for (const s of SLICES) expect(committed.get(s)).toBe(replicas.of(s).lastIndex);
    const before = segmentBytes();
    const stateBytes = store.itemCount * 1_000;
    expect(store.itemCount).toBe(150 * SLICES.length);

    const job = replicas.compaction();
    let steps = 0;
    for (let next: string = 'more'; next !== 'done'; steps++) {
      expect(steps).toBeLessThan(3 * SLICES.length);
      const written = log.snapshotsAwaitingCheckpoint;
      next = job.step(-Infinity); // as little as one step may be: one slice
      log.flush();
      expect(log.snapshotsAwaitingCheckpoint - written).toBeLessThanOrEqual(1);
      // Between two steps the worker's tasks run, and their writes commit.
      const proposed = putAll();
      await turn();
      for (const [s, index] of proposed) expect(committed.get(s)).toBe(index);
      crashReadsBack();
    }
    // Every slice compacted (its records before the snapshot gone from memory), none of the states in the log yet.
    expect(log.snapshotsAwaitingCheckpoint).toBe(SLICES.length);
    for (const s of SLICES) expect(replicas.of(s).recordAt(2)).toBeUndefined();
    // What was logged meanwhile is the writes between the steps (about 1.5 KB each), not the slices' states.
    expect(segmentBytes() - before).toBeLessThan(stateBytes / 4);

    const checkpointed = log.checkpoint(); // its first flush runs now, the rest after a turn
    crashReadsBack();
    await checkpointed;
    expect(log.snapshotsAwaitingCheckpoint).toBe(0);
    crashReadsBack();
    // The checkpoint holds the snapshots: each slice starts from its own, past the 150 writes before the compaction,
    // with the records written after its step.
    const { log: reopened } = ReplicaLog.open(dir, 'os');
    for (const s of SLICES) {
      expect(reopened.durable(s).snapshot!.index).toBeGreaterThan(150);
      expect(reopened.durable(s).records.length).toBeLessThanOrEqual(steps + 1);
    }
  });
});

describe('a task that writes several slices a worker leads', () => {
  it('proposes to each slice the record of its own writes, each payload apart from the others', async () => {
    const h = new ReplicaHarness(join(root, 'task-slices'), SLICE, 1);
    const w = h.workers[0];
    const slices = [SLICE, SLICE + 1, SLICE + 2];
    for (const s of slices) {
      w.replicas.receive(s, COORDINATOR, { type: 'Prepare', term: 1 });
      await h.pump();
      w.replicas.receive(s, COORDINATOR, { type: 'Lead', term: 1, followers: [], sets: [] });
      await h.pump();
      expect(w.replicas.of(s).isLeader).toBe(true);
    }
    w.store.execute([SliceOp.Assign, 1, slices]);
    // One task's writes, the slices interleaved and one written twice.
    for (const [s, key] of [[SLICE + 2, 'c'], [SLICE, 'a'], [SLICE + 2, 'd'], [SLICE + 1, 'b']] as const) {
      expect(w.store.execute([SliceOp.Put, TABLE, s, key, { k: key }, 20, null, null])[0]).toBe(0);
    }
    const proposed = w.replicas.propose(w.store.takeEffects());
    expect(proposed.map(([s]) => s).sort()).toEqual(slices);
    const keysOf = (s: number, index: number) => decodeReplicated(w.replicas.of(s).recordAt(index)!.payload).effects.map((e) => [e[2], e[3]]);
    const keys = Object.fromEntries(proposed.map(([s, index]) => [s, keysOf(s, index)]));
    expect(keys).toEqual({ [SLICE]: [[SLICE, 'a']], [SLICE + 1]: [[SLICE + 1, 'b']], [SLICE + 2]: [[SLICE + 2, 'c'], [SLICE + 2, 'd']] });
  });
});

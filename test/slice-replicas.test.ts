// The replicas of a slice on three workers' real stores and replica logs
// (slice-worker/replication/slice-replicas.ts), messages passed by hand: a write
// executed by the leader reaches the followers' partitions through the replay
// path; a deposed leader's store drops what it executed but never committed, and
// its diverged record is replaced by the new leader's; a restarted follower's
// store comes back from its replica log.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SliceStore } from '../slice-worker/partition.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { COORDINATOR, type ReplicationMessage } from '../slice-worker/replication/replica.js';
import { SliceReplicas } from '../slice-worker/replication/slice-replicas.js';
import { EFFECT_SET, SliceOp } from '../shared/protocol.js';

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
    let queue: { from: number; to: number; m: ReplicationMessage }[] = [];
    /** Links that drop what is sent on them: "a-b". */
    const cut = new Set<string>();
    const committed: [number, number][] = [];
    const deposed: number[] = [];
    const start = (i: number): Worker => {
      const store = new SliceStore(0, 1);
      const { log } = ReplicaLog.open(join(root, `worker-${i}`), 'fsync');
      const replicas = new SliceReplicas(i, store, log, (_slice, to, m) => queue.push({ from: i, to, m }), {
        committed: (_slice, index) => committed.push([i, index]),
        deposed: () => deposed.push(i),
      });
      return { store, replicas };
    };
    const workers = [0, 1, 2].map(start);
    const toCoordinator: ReplicationMessage[] = [];
    /** Sizes of the buffers behind the records' payloads sent, where larger than the payload: the worker posts
     * these messages to its node, and a view into msgpackr's reused buffer would be copied whole (32 KiB+). */
    const payloadsInLargerBuffers: [number, number][] = [];
    /** Delivers messages (and lets the logs flush) until none is left; bounded. */
    const pump = async () => {
      for (let round = 0; round < 50; round++) {
        await new Promise((r) => setImmediate(r));
        const now = queue;
        queue = [];
        if (now.length === 0) return;
        for (const { from, to, m } of now) {
          if (m.type === 'Append') for (const r of m.records) if (r.payload.buffer.byteLength !== r.payload.byteLength) payloadsInLargerBuffers.push([r.payload.byteLength, r.payload.buffer.byteLength]);
          if (cut.has(`${from}-${to}`) || cut.has(`${to}-${from}`)) continue;
          if (to === COORDINATOR) toCoordinator.push(m);
          else workers[to].replicas.receive(SLICE, from, m);
        }
      }
      throw new Error('messages still flowing after 50 rounds');
    };
    const elect = async (leader: number, term: number, voters: number[]) => {
      for (const v of voters) workers[v].replicas.receive(SLICE, COORDINATOR, { type: 'Prepare', term });
      await pump();
      workers[leader].replicas.receive(SLICE, COORDINATOR, { type: 'Lead', term, followers: [0, 1, 2].filter((i) => i !== leader), sets: [] });
      await pump();
      expect(workers[leader].replicas.serving(SLICE)).toBe(true);
    };
    const put = (w: Worker, key: string, v: number) => {
      expect(w.store.execute([SliceOp.Put, TABLE, SLICE, key, { k: key, v }, 20, null])[0]).toBe(0);
      return w.replicas.propose(w.store.takeEffects());
    };
    const items = (w: Worker) =>
      [...w.store.entries()].filter((e) => e[0] === EFFECT_SET && e[2] === SLICE).map((e) => `${e[3]}=${(e[4] as { v: number }).v}`).sort();

    await elect(0, 1, [0, 1, 2]);
    workers[0].store.execute([SliceOp.Assign, 1, [SLICE]]);
    const [[, first]] = put(workers[0], 'a', 1);
    await pump();
    expect(committed).toContainEqual([0, first]);
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
    workers[1].replicas.of(SLICE).tick();
    await pump();
    expect(items(workers[2])).toEqual(['a=1', 'c=3']);

    // The old leader is back: it learns of term 2, stops leading, drops 'b', and takes the new leader's records.
    cut.clear();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    workers[1].replicas.of(SLICE).tick();
    await pump();
    expect(deposed).toEqual([0]);
    expect(workers[0].replicas.of(SLICE).isLeader).toBe(false);
    expect(items(workers[0])).toEqual(['a=1', 'c=3']);

    // A follower restarted from its replica log has what was committed. (Its commit point is written
    // lazily, with its next flush: one more heartbeat makes that happen.)
    workers[1].replicas.of(SLICE).tick();
    await pump();
    workers[2] = start(2);
    expect(items(workers[2])).toEqual(['a=1', 'c=3']);
    expect(payloadsInLargerBuffers).toEqual([]);
  });
});

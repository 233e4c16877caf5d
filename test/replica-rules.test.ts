// The rules of one slice replica (slice-worker/replication/replica.ts), told as
// short stories: what a follower refuses and why, that a write is committed only
// once a majority holds it durably, that a diverged tail is cut and a deposed
// leader acknowledges nothing. Messages and disk syncs move only when a story says so.
import { describe, expect, it } from 'vitest';
import { chooseLeader, SliceFailover, type ElectionReason } from '../coordinator/metadata/failover.js';
import { CARRIER_AVOIDED_ANSWER_WAIT_SHARE, CARRIER_SETTLE_TIMEOUT_FACTOR, HANDOVER_TARGET_ANSWER_WAIT_SHARE, REPLICA_KEEPALIVE_MS, REPLICA_LEASE_DRIFT, REPLICA_LEASE_MS, REPLICA_READ_STALENESS_MS, REPLICA_RESEND_MS_MAX, REPLICA_TICK_MS } from '../shared/limits.js';
import { decodeReplicationMessage, encodeReplicationMessage } from '../shared/protocol.js';
import { makeRecord } from '../slice-worker/replication/replica-record.js';
import { applyDiskOp, COORDINATOR, emptyDurable, Replica, type DiskOp, type ReplicaHost, type ReplicaTiming, type ReplicationMessage } from '../slice-worker/replication/replica.js';

interface Sent {
  from: number;
  to: number;
  m: ReplicationMessage;
}

/** Replicas 0..n-1 with hand-driven messages, disks and clock (`clock.now`, ms), with `timing` if given. */
function group(n: number, timing?: ReplicaTiming) {
  const clock = { now: 0 };
  const outbox: Sent[] = [];
  const syncs: (() => void)[][] = Array.from({ length: n }, () => []);
  const written: DiskOp[][] = Array.from({ length: n }, () => []);
  const applied: number[][] = Array.from({ length: n }, () => []);
  const committed: number[] = [];
  const deposed: number[] = [];
  const hostOf = (i: number): ReplicaHost => ({
    send: (to, m) => outbox.push({ from: i, to, m }),
    // A compaction's snapshot is written as any op: restart() replays it with the rest.
    disk: { write: (op) => written[i].push(op), compacted: (op) => written[i].push(op), sync: (done) => syncs[i].push(done) },
    apply: (r) => applied[i].push(r.index),
    restore: () => {},
    snapshotState: () => new Uint8Array(0),
    committed: (index) => i === 0 && committed.push(index),
    deposed: (term) => deposed.push(term),
    now: () => clock.now,
    timing,
  });
  const replicas = Array.from({ length: n }, (_, i) => new Replica(i, hostOf(i), emptyDurable()));
  const take = (pred: (s: Sent) => boolean) => {
    const out = outbox.filter(pred);
    for (const s of out) outbox.splice(outbox.indexOf(s), 1);
    return out;
  };
  return {
    clock,
    replicas,
    outbox,
    written,
    applied,
    committed,
    deposed,
    /** Moves the clock past the longest a leader waits for an answer before it resends (Replica.resendAfter). */
    later() {
      clock.now += REPLICA_RESEND_MS_MAX;
    },
    /** Replica i restarts from what it wrote (every write durable: call sync(i) first), its messages on their way lost. */
    restart(i: number) {
      const found = emptyDurable();
      for (const op of written[i]) applyDiskOp(found, op);
      syncs[i].length = 0;
      take((s) => s.from === i || s.to === i);
      replicas[i] = new Replica(i, hostOf(i), found);
    },
    /** Completes replica i's pending syncs (its writes are durable). */
    sync(i: number) {
      for (const done of syncs[i].splice(0)) done();
    },
    /** Delivers every message to `to` (replicas only; the coordinator's are returned). */
    deliver(to: number) {
      const msgs = take((s) => s.to === to);
      if (to !== COORDINATOR) for (const s of msgs) replicas[to].receive(s.from, s.m);
      return msgs;
    },
    /** The coordinator makes replica `leader` lead `term`: Prepare to `voters` (all by default), their disks
     * synced, their answers taken, then Lead to the voters but itself, with the unsettled `sets` if any. */
    elect(leader: number, term: number, { voters = replicas.map((_, i) => i), sets = [] as number[][] } = {}) {
      for (const i of voters) replicas[i].receive(COORDINATOR, { type: 'Prepare', term });
      for (const i of voters) this.sync(i);
      take((s) => s.to === COORDINATOR);
      replicas[leader].receive(COORDINATOR, { type: 'Lead', term, followers: voters.filter((i) => i !== leader), sets });
    },
  };
}

const payload = (s: string) => new TextEncoder().encode(s);
const refusals = (sent: Sent[]) => sent.filter((s) => s.m.type === 'Refused').map((s) => (s.m as { code: string }).code);

/** A failover host's record of the last Lead, as the cluster map keeps it: the leader published last (its Lead left),
 * else `before` (the map's term, nobody known: a map from before it was kept, or nothing led yet). */
/** Elects replica 0 of `g` and commits 12 writes, each answered by both followers within `roundTripMs` (half each way):
 * the leader's round-trip estimate is then about `roundTripMs`. */
function steadyWrites(g: ReturnType<typeof group>, roundTripMs: number): void {
  g.elect(0, 1);
  const roundTrip = () => {
    g.clock.now += roundTripMs / 2;
    for (const i of [1, 2]) {
      g.deliver(i);
      g.sync(i);
    }
    g.clock.now += roundTripMs / 2;
    g.deliver(0);
  };
  g.sync(0);
  roundTrip();
  for (let w = 0; w < 12; w++) {
    g.replicas[0].propose(payload(`w${w}`));
    g.sync(0);
    roundTrip();
  }
}

function lastLeadOf(published: readonly [number, number][], before: [number, number | null] = [0, null]): [number, number | null] {
  const last = published.at(-1);
  return last === undefined ? before : [last[1], last[0]];
}

/** The timing and a host that sends nothing and records what it publishes, for an election story of SliceFailover. */
function electionStory(published: [number, number][], now: () => number = () => 0) {
  const timing = { pingIntervalMs: 100, heartbeatTimeoutMs: 300, electionTimeoutMs: 2_000 };
  const host = { send: () => {}, now, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published) };
  return { timing, host };
}

// A term-6 election's answer, of a replica whose last record (of term 5) is lastIndex.
const preparedAt6 = (lastIndex: number): ReplicationMessage => ({ type: 'Prepared', term: 6, lastTerm: 5, lastIndex, leaseWaitMs: 0, ledTerm: 0 });

// [0, 1, 2], led by 0 at term 5, changed to `to`; the election of term 6 started and given these answers (replica,
// last index) in turn. heardFrom, where given, is the host's (finishElection's wait for answers that may spare a carrier).
function electionAfterChange(to: number[], answers: [number, number][], heardFrom?: (r: number) => number) {
  const published: [number, number][] = [];
  const story = electionStory(published);
  const host = heardFrom ? { ...story.host, heardFrom } : story.host;
  const changed = new SliceFailover([0, 1, 2], 0, 5, story.timing, host).changedTo(to, 5, host);
  changed.tick();
  for (const [r, lastIndex] of answers) changed.receive(r, preparedAt6(lastIndex));
  return { published, changed };
}

describe('a slice replica', () => {
  it('commits a write only once a majority holds it durably, and followers apply it only once committed', () => {
    const g = group(3);
    g.elect(0, 1);
    const index = g.replicas[0].propose(payload('a'));
    expect(index).toBe(2); // after the new term's barrier
    g.deliver(1);
    g.deliver(2);
    g.deliver(0); // nothing yet: followers answer only once durable
    expect(g.committed).toEqual([]);
    g.sync(1);
    g.deliver(0);
    expect(g.committed).toEqual([]); // one follower durable, the leader not yet: 1 of 3
    g.sync(0);
    expect(g.committed).toEqual([1, 2]); // the barrier, then the write, as the leader's own syncs complete
    expect(g.applied[0]).toEqual([1, 2]);
    expect(g.applied[1]).toEqual([]); // learns the commit index with the next append
    g.replicas[0].tick();
    g.deliver(1);
    g.sync(1);
    expect(g.applied[1]).toEqual([1, 2]);
  });

  it('while a replica-set change is unsettled, commits only what a majority of the new set AND of the old set holds', () => {
    // Replicas 0, 1, 2 were the set; 0, 3, 4 are the new one (two nodes replaced). Leader 0 replicates to all four others.
    const g = group(5);
    g.elect(0, 1, { sets: [[0, 3, 4], [0, 1, 2]] });
    g.replicas[0].propose(payload('a'));
    g.sync(0);
    for (const i of [1, 2, 3, 4]) g.deliver(i);
    for (const i of [3, 4]) g.sync(i);
    g.deliver(0);
    // 3 of the 5 (all of the new set) hold it, but only 1 of the old set: an election among the old set's
    // majority (1 and 2) would not find it, so it is not committed.
    expect(g.committed).toEqual([]);
    g.sync(1);
    g.deliver(0);
    expect(g.committed.at(-1)).toBe(2); // the barrier and the write, once 0 and 1 (a majority of the old set) hold them
  });

  it('once its barrier is committed on both sets of a change, replicates to its own set alone; and stops leading when its node leaves the set', () => {
    // Replicas 0, 1, 2 were the set; 0, 1, 3 are the new one (2 replaced by 3). Leader 0.
    const g = group(4);
    g.elect(0, 1, { sets: [[0, 1, 3], [0, 1, 2]] });
    const leader = g.replicas[0];
    g.sync(0);
    g.outbox.splice(0); // the barrier's appends are lost but for replica 1's
    g.later();
    leader.tick();
    expect(g.outbox.map((s) => s.to).sort()).toEqual([1, 2, 3]); // each set's replicas, until the barrier commits
    g.deliver(1);
    g.outbox.splice(0);
    g.sync(1);
    g.deliver(0);
    expect(g.committed).toEqual([1]); // 0 and 1: a majority of both sets
    g.outbox.splice(0);
    // Replica 2 left the set: its node drops what comes for the slice, so it would be sent a heartbeat each
    // tick forever. Replica 3, new and not caught up, still gets one.
    g.later();
    leader.tick();
    expect(g.outbox.map((s) => s.to).sort()).toEqual([1, 3]);
    g.outbox.splice(0);
    leader.propose(payload('a'));
    expect(g.outbox.map((s) => s.to).sort()).toEqual([1, 3]);
    g.outbox.splice(0);
    g.sync(0);
    g.later();
    leader.tick(); // replica 3 is probed from its first record, and gets the rest as it answers
    for (let round = 0; round < 3; round++) {
      g.deliver(3);
      g.sync(3);
      g.deliver(0);
    }
    expect(g.replicas[3].lastIndex).toBe(2);
    expect(g.committed.at(-1)).toBe(2); // 0 and 3: a majority of the new set is enough now
    // The map moves the leader's own node out of the set (a drain): it stops leading and sends nothing more.
    leader.resign();
    expect(leader.isLeader).toBe(false);
    expect(g.deposed).toEqual([1]);
    expect(leader.propose(payload('b'))).toBeNull();
    g.outbox.splice(0);
    leader.tick();
    expect(g.outbox).toEqual([]);
  });

  it('sends nothing more to a replica that left the set once its own answer settled the change, though it lacks records', () => {
    // Replicas 0, 1, 2 were the set; 0, 1, 3 are the new one (2 replaced by 3). Leader 0; replica 1 is silent.
    const g = group(4);
    g.elect(0, 1, { sets: [[0, 1, 3], [0, 1, 2]] });
    const leader = g.replicas[0];
    leader.propose(payload('a'));
    leader.propose(payload('b'));
    g.sync(0);
    g.outbox.splice(0); // every append lost: each follower is probed with one record, the barrier
    g.later();
    leader.tick();
    g.deliver(3);
    g.sync(3);
    g.deliver(0); // 0 and 3: a majority of the new set holds the barrier, 0 alone of the old one
    expect(g.committed).toEqual([]);
    g.deliver(2);
    g.sync(2);
    g.deliver(0); // 0 and 2: the old set's majority; the barrier commits and the change settles
    expect(g.committed).toEqual([1]);
    // Replica 2 lacks records 2 and 3, but its node drops what comes for the slice: it is sent nothing.
    expect(g.outbox.filter((s) => s.to === 2)).toEqual([]);
  });

  /** Two replicas; replica 1 has promised term 3 (a Prepare, synced, answered), and what it wrote so far. */
  const promisedFollower = () => {
    const g = group(2);
    const f = g.replicas[1];
    f.receive(COORDINATOR, { type: 'Prepare', term: 3 });
    g.sync(1);
    g.deliver(COORDINATOR);
    return { g, f, before: g.written[1].length };
  };

  it('refuses a record of an older term, a gap, a damaged record and records that do not follow, and writes nothing of them', () => {
    const { g, f, before } = promisedFollower();
    const r1 = makeRecord(2, 1, payload('x'));
    f.receive(0, { type: 'Append', term: 2, prevIndex: 0, prevTerm: 0, records: [r1], commitIndex: 0, sentAt: 0, leased: true });
    f.receive(0, { type: 'Append', term: 3, prevIndex: 4, prevTerm: 3, records: [makeRecord(3, 5, payload('y'))], commitIndex: 0, sentAt: 0, leased: true });
    const damaged = { ...makeRecord(3, 2, payload('z')), payload: payload('Z') };
    f.receive(0, { type: 'Append', term: 3, prevIndex: 0, prevTerm: 0, records: [makeRecord(3, 1, payload('w')), damaged], commitIndex: 0, sentAt: 0, leased: true });
    f.receive(0, { type: 'Append', term: 3, prevIndex: 0, prevTerm: 0, records: [makeRecord(3, 1, payload('w')), makeRecord(3, 3, payload('v'))], commitIndex: 0, sentAt: 0, leased: true });
    const sent = g.deliver(0);
    expect(refusals(sent)).toEqual(['StaleTerm', 'LogGap', 'ChecksumMismatch', 'MalformedAppend']);
    expect((sent[0].m as { message: string }).message).toBe('a record of term 2; this replica promised term 3');
    expect((sent[1].m as { message: string }).message).toBe("the records start after index 4; this replica's log ends at 0");
    expect((sent[2].m as { message: string }).message).toBe('record 2 of term 3 fails its checksum; nothing of this append was applied');
    expect(f.lastIndex).toBe(0);
    expect(g.written[1].length).toBe(before);
  });

  it('refuses an Append whose bytes were damaged on the wire (read by hand: readAppend) with ChecksumMismatch, and writes nothing of it', () => {
    const { g, f, before } = promisedFollower();
    const m = { type: 'Append' as const, term: 3, prevIndex: 0, prevTerm: 0, records: [makeRecord(3, 1, payload('first')), makeRecord(3, 2, payload('second'))], commitIndex: 0, sentAt: 0, leased: true };
    const bytes = Uint8Array.from(encodeReplicationMessage(m));
    // One bit of the second record's payload flipped: still an Append laid out as a leader writes one, so the follower
    // reads it by hand, and it is the checksum that refuses it.
    const at = Buffer.from(bytes).indexOf('second');
    expect(at).toBeGreaterThan(0);
    bytes[at + 2] ^= 0x01;
    const damaged = decodeReplicationMessage(bytes, 0, 'node', 7);
    expect(damaged).toEqual({ ...m, records: [m.records[0], { ...m.records[1], payload: payload('sebond') }] });
    f.receive(0, damaged);
    const sent = g.deliver(0);
    expect(refusals(sent)).toEqual(['ChecksumMismatch']);
    expect((sent[0].m as { message: string }).message).toBe('record 2 of term 3 fails its checksum; nothing of this append was applied');
    expect(f.lastIndex).toBe(0);
    expect(g.written[1].length).toBe(before);
    // The same bytes undamaged are taken whole.
    f.receive(0, decodeReplicationMessage(Uint8Array.from(encodeReplicationMessage(m)), 0, 'node', 7));
    expect(f.lastIndex).toBe(2);
  });

  it('refuses what a peer that breaks the protocol sends (a committed record replaced, a snapshot of a newer term, an AppendOk past the log), writes nothing of it, and goes on', () => {
    const g = group(2);
    g.elect(0, 1);
    g.replicas[0].propose(payload('a'));
    g.deliver(1);
    g.sync(1);
    g.sync(0);
    g.deliver(0);
    g.replicas[0].tick();
    g.deliver(1);
    g.sync(1);
    const f = g.replicas[1];
    expect(f.commitIndex).toBe(2);
    const before = g.written[1].length;
    g.deliver(0);
    // Record 2 is committed here, of term 1: a "leader" of term 1 that sends another record 2 (after the barrier, of
    // the same term as the barrier it follows) breaks the protocol; cutting a committed record was an assertion.
    f.receive(0, { type: 'Append', term: 2, prevIndex: 1, prevTerm: 1, records: [makeRecord(2, 2, payload('other'))], commitIndex: 2, sentAt: 0, leased: false });
    f.receive(0, { type: 'Snapshot', term: 1, index: 9, lastTerm: 2, state: payload('s'), commitIndex: 9, sentAt: 0, leased: false });
    const sent = g.deliver(0);
    expect(refusals(sent)).toEqual(['MalformedAppend', 'MalformedContents']);
    expect((sent[0].m as { message: string }).message).toBe('record 2 of term 2 would replace committed record 2 of term 1; nothing of this append was applied');
    expect((sent[1].m as { message: string }).message).toBe('a snapshot up to a record of term 2 sent in term 1; nothing of it was applied');
    expect(g.written[1].length).toBe(before);
    expect([f.lastIndex, f.commitIndex, f.term]).toEqual([2, 2, 1]);
    // The leader is told of a record it never wrote (it was an assertion): the word is dropped, nothing moves.
    g.replicas[0].receive(1, { type: 'AppendOk', term: 1, matchIndex: 99, commitIndex: 0, sentAt: 0 });
    expect(g.replicas[0].isLeader).toBe(true);
    expect(g.replicas[0].propose(payload('b'))).toBe(3);
  });

  it('cuts a diverged tail past the commit point and takes the new leader\'s records', () => {
    const g = group(3);
    g.elect(0, 1);
    g.replicas[0].propose(payload('a'));
    // Replica 1 gets the barrier and 'a'; replica 2 gets nothing. Then the leader writes two more
    // records that only it holds, and is replaced.
    g.deliver(1);
    g.outbox.splice(0);
    g.replicas[0].propose(payload('b'));
    g.replicas[0].propose(payload('c'));
    g.outbox.splice(0);
    for (const i of [0, 1, 2]) g.sync(i);
    g.outbox.splice(0);
    expect(g.replicas[0].lastIndex).toBe(4);
    expect(g.replicas[1].lastIndex).toBe(2);
    // Replicas 1 and 2 elect 1 (term 2); replica 0 is away.
    for (const i of [1, 2]) g.replicas[i].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    for (const i of [1, 2]) g.sync(i);
    g.deliver(COORDINATOR);
    g.replicas[1].receive(COORDINATOR, { type: 'Lead', term: 2, followers: [0, 2], sets: [] });
    g.replicas[1].propose(payload('d'));
    // Replica 0 is back: its records 3 and 4 (term 1) are cut for the leader's 3 and 4 (term 2).
    for (let round = 0; round < 6; round++) {
      g.deliver(0);
      g.deliver(2);
      for (const i of [0, 1, 2]) g.sync(i);
      g.deliver(1);
    }
    expect(g.written[0]).toContainEqual({ kind: 'truncate', after: 2 });
    expect(g.replicas[0].recordAt(3)!.term).toBe(2);
    expect(g.replicas[0].recordAt(4)!.payload).toEqual(payload('d'));
    expect(g.replicas[0].lastIndex).toBe(4);
  });

  it('stops a deposed leader from acknowledging: a follower that promised a newer term refuses it, and the leader steps down', () => {
    const g = group(3);
    g.elect(0, 1);
    for (const i of [1, 2]) g.replicas[i].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    g.replicas[0].propose(payload('late'));
    for (const i of [0, 1, 2]) g.sync(i);
    g.deliver(1);
    g.deliver(2);
    for (const i of [0, 1, 2]) g.sync(i);
    const answers = g.deliver(0);
    expect(refusals(answers)).toContain('StaleTerm');
    expect(g.committed).toEqual([]);
    expect(g.deposed).toEqual([1]);
    expect(g.replicas[0].isLeader).toBe(false);
    expect(g.replicas[0].propose(payload('after'))).toBeNull();
  });

  it('answers a Prepare only once its promise of the new term is durable', () => {
    const g = group(1);
    g.replicas[0].receive(COORDINATOR, { type: 'Prepare', term: 4 });
    expect(g.deliver(COORDINATOR)).toEqual([]);
    g.sync(0);
    // A replica that just started may have answered a leader just before (its lease counts on that): wait it out.
    expect(g.deliver(COORDINATOR).map((s) => s.m)).toEqual([{ type: 'Prepared', term: 4, lastTerm: 0, lastIndex: 0, leaseWaitMs: REPLICA_LEASE_MS, ledTerm: 0 }]);
    expect(g.written[0][0]).toEqual({ kind: 'promise', term: 4 });
  });

  it('does not acknowledge to an old leader a record that became durable after the replica promised a newer term', () => {
    const g = group(2);
    g.elect(0, 1);
    g.deliver(1); // the barrier of term 1, written by replica 1 but not yet durable
    g.replicas[1].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    g.sync(1);
    expect(g.deliver(0).map((s) => s.m.type)).toEqual([]);
  });

  it('does not commit a record of an older term by counting replicas, only with one of its own term', () => {
    const g = group(3);
    g.elect(0, 1);
    g.replicas[0].propose(payload('a')); // records 1 (barrier) and 2, term 1, on replica 0 only
    g.outbox.splice(0);
    g.sync(0);
    // Replica 0 leads again at term 2; its barrier (record 3) does not reach anyone yet, but records 1-2 reach replica 1.
    for (const i of [0, 1, 2]) g.replicas[i].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    for (const i of [0, 1, 2]) g.sync(i);
    g.deliver(COORDINATOR);
    g.replicas[0].receive(COORDINATOR, { type: 'Lead', term: 2, followers: [1, 2], sets: [] });
    g.sync(0);
    g.outbox.splice(0);
    const old = [g.replicas[0].recordAt(1)!, g.replicas[0].recordAt(2)!];
    g.replicas[1].receive(0, { type: 'Append', term: 2, prevIndex: 0, prevTerm: 0, records: old, commitIndex: 0, sentAt: 0, leased: true });
    g.sync(1);
    g.deliver(0);
    // Records 1-2 are on 2 of 3 replicas, but they are of term 1: nothing is committed.
    expect(g.committed).toEqual([]);
    // The barrier was lost on the way; replica 1 has just answered, so a tick now waits for the answer to what is
    // in flight, and one a round trip's wait later (no answer came) resends from its last record.
    g.replicas[0].tick();
    expect(g.outbox.filter((s) => s.to === 1)).toEqual([]);
    g.later();
    g.replicas[0].tick();
    g.deliver(1);
    g.sync(1);
    g.deliver(0);
    expect(g.committed).toEqual([3]);
  });
  it('resends a follower that does not answer one record per heartbeat, and the rest once it answers', () => {
    // A frozen follower used to get up to 256 records per slice per heartbeat, which its leader's node
    // buffered for it (22 GB under SIGSTOP in bench:failover). Only what it acknowledges brings more.
    const g = group(3);
    g.elect(0, 1);
    for (let i = 0; i < 300; i++) g.replicas[0].propose(payload(`w${i}`));
    g.deliver(2); // replica 2 takes the first appends, then stops answering (frozen)
    g.outbox.splice(0); // what it would answer is lost, and so is everything sent to replica 1
    const records = (sent: Sent[]) => sent.reduce((n, s) => n + (s.m.type === 'Append' ? s.m.records.length : 0), 0);
    for (let t = 0; t < 5; t++) {
      g.later();
      g.replicas[0].tick();
      const toFrozen = g.outbox.filter((s) => s.to === 2);
      expect(toFrozen.length).toBe(1);
      expect(records(toFrozen)).toBe(1);
      g.outbox.splice(0);
    }
    // Replica 1 answers the probe: the leader sends it everything after it, in full appends.
    g.later();
    g.replicas[0].tick();
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to === 1));
    g.deliver(1);
    g.sync(1);
    g.deliver(0);
    expect(records(g.outbox.filter((s) => s.to === 1))).toBeGreaterThan(1);
  });

  it('sends followers that share `next` one Append, encoded once, and a follower at another `next` its own', () => {
    // The leader builds an Append once per call for the followers at the same `next` (AppendRound in replica.ts), and
    // the worker encodes that object once (encodeReplicationMessage): the same bytes must be right for each of them.
    const g = group(3);
    steadyWrites(g, 2);
    const text = (m: ReplicationMessage) => (m.type === 'Append' ? m.records.map((r) => new TextDecoder().decode(r.payload)) : []);
    const a = g.replicas[0].propose(payload('a'))!;
    const appends = g.outbox.filter((s) => s.m.type === 'Append');
    expect(appends.map((s) => s.to)).toEqual([1, 2]);
    expect(appends[1].m, 'one object for both followers').toBe(appends[0].m);
    const bytes = encodeReplicationMessage(appends[0].m);
    expect(encodeReplicationMessage(appends[1].m), 'encoded once').toBe(bytes);
    for (const s of appends) expect(decodeReplicationMessage(Uint8Array.from(bytes), 0, 'node', 7)).toEqual(s.m);
    // Replica 2 loses it; replica 1 holds it. The next write goes to both from the same `next` (it advances on send).
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to === 1));
    g.deliver(1);
    g.sync(1);
    g.deliver(0);
    g.replicas[0].propose(payload('b'));
    g.outbox.splice(0);
    // Neither answers within the wait: both are probed with one record in the same tick, from where each stands, with
    // every other field the same (a sharing that looked past prevIndex or the records would send 2 record b).
    g.later();
    g.replicas[0].tick();
    const probes = g.outbox.filter((s) => s.m.type === 'Append');
    expect(probes.map((s) => [s.to, (s.m as { prevIndex: number }).prevIndex, text(s.m)])).toEqual([
      [1, a, ['b']],
      [2, a - 1, ['a']],
    ]);
    for (const s of probes) expect(decodeReplicationMessage(Uint8Array.from(encodeReplicationMessage(s.m)), 0, 'node', 7)).toEqual(s.m);
    // Both answer, get the rest, and apply the same log.
    for (let round = 0; round < 4; round++) {
      g.sync(0);
      for (const i of [1, 2]) {
        g.deliver(i);
        g.sync(i);
      }
      g.deliver(0);
      g.replicas[0].tick();
    }
    expect(g.applied[1]).toEqual(g.applied[0]);
    expect(g.applied[2]).toEqual(g.applied[0]);
    expect(g.applied[0].at(-1)).toBe(a + 1);
  });

  it('gives an Append again only within the call that built it: one sent since with another commit point, lease or send time is new', () => {
    // A lease of 1,501 ms, of which a leader uses 1,425.95: it lapses within a ms, so Appends sent in that ms say
    // `leased` true and then false (sentAt is whole ms). A stale `leased: true` would let a follower answer eventually
    // consistent reads (readable) on the word of a leader that holds no lease.
    const g = group(3, { leaseMs: 1_501, keepAliveMs: REPLICA_KEEPALIVE_MS });
    steadyWrites(g, 2);
    const x = g.replicas[0].propose(payload('x'))!;
    const sentX = g.clock.now;
    const [p1, p2] = g.outbox.filter((s) => s.m.type === 'Append').map((s) => s.m);
    expect(p2, 'one object for both followers in one call').toBe(p1);
    // Replica 1 takes x; replica 2 loses it. Its answer comes late, in the ms its lease (from sentX) lapses.
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to === 1));
    g.deliver(1);
    g.sync(1);
    const leaseEnd = sentX + 1_501 * (1 - REPLICA_LEASE_DRIFT);
    g.clock.now = Math.floor(leaseEnd) + 0.25;
    g.deliver(0);
    expect(g.replicas[0].leaseValid).toBe(true);
    expect(g.outbox).toEqual([]);
    /** Replica `to` says it lacks record x: the leader sends it x again, from the same `next`. */
    const gap = (to: number) => {
      g.replicas[0].receive(to, { type: 'Refused', term: 1, code: 'LogGap', message: 'gap', lastIndex: x - 1, commitIndex: 0 });
      const sent = g.outbox.splice(0);
      expect(sent.map((s) => [s.to, s.m.type])).toEqual([[to, 'Append']]);
      const m = sent[0].m as Extract<ReplicationMessage, { type: 'Append' }>;
      expect([m.prevIndex, m.records.map((r) => r.index)]).toEqual([x - 1, [x]]);
      return m;
    };
    const a1 = gap(2);
    expect(a1).toMatchObject({ commitIndex: x - 1, sentAt: Math.floor(leaseEnd), leased: true });
    // The leader's own sync commits x (its lease as it was): the same Append but for the commit point is a new one.
    g.sync(0);
    expect(g.outbox).toEqual([]);
    const a2 = gap(2);
    expect(a2).not.toBe(a1);
    expect(a2).toMatchObject({ commitIndex: x, sentAt: a1.sentAt, leased: true });
    // The lease lapses within that ms: the same but `leased`.
    g.clock.now = leaseEnd;
    expect(g.replicas[0].leaseValid).toBe(false);
    const a3 = gap(2);
    expect(a3).not.toBe(a2);
    expect(a3).toMatchObject({ commitIndex: x, sentAt: a2.sentAt, leased: false });
    // A ms later: the same but sentAt.
    g.clock.now += 1;
    const a4 = gap(2);
    expect(a4).not.toBe(a3);
    expect(a4).toMatchObject({ commitIndex: x, sentAt: a3.sentAt + 1, leased: false });
    // Replica 2 takes a3 and applies x, but hears from a leader with no lease: it stops answering eventually
    // consistent reads REPLICA_READ_STALENESS_MS after the last leased word it had (steadyWrites').
    g.replicas[2].receive(0, a3);
    g.sync(2);
    expect(g.applied[2].at(-1)).toBe(x);
    g.clock.now = sentX + REPLICA_READ_STALENESS_MS + 1;
    expect(g.replicas[2].readable).toBe(false);
  });

  it('resends what a follower lost within REPLICA_RESEND_MS_MAX and a tick, even after one round trip of seconds', () => {
    // A follower frozen (SIGSTOP) for 10 s answers the barrier when it wakes: one round trip of 10 s, the first measured
    // (a mean of 10 s and four deviations of 5 s each, 30 s, uncapped). The next write's Append to it is lost.
    const g = group(3);
    g.elect(0, 1);
    g.sync(0);
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to === 1));
    g.clock.now = 10_000;
    g.deliver(1);
    g.sync(1);
    g.deliver(0);
    g.replicas[0].propose(payload('a'));
    g.outbox.splice(0);
    const from = g.clock.now;
    let probedAt: number | null = null;
    for (let t = 0; t < 100 && probedAt === null; t++) {
      g.clock.now += REPLICA_TICK_MS;
      g.replicas[0].tick();
      if (g.outbox.splice(0).some((s) => s.to === 1 && s.m.type === 'Append' && s.m.records.length === 1)) probedAt = g.clock.now;
    }
    expect(probedAt).not.toBeNull();
    expect(probedAt! - from).toBeLessThanOrEqual(REPLICA_RESEND_MS_MAX + REPLICA_TICK_MS);
  });

  it('does not resend the appends in flight to a follower that answers, and probes one that stopped answering', () => {
    // The heartbeat used to resend from the last acknowledged record at every tick: under load, the whole
    // window in flight went out again each tick (about a fifth of a leader's replication bytes). Then it resent to
    // a follower not heard from since the last tick: with round trips above a tick (35-200 ms under load), the
    // window went out again once the answers on their way came. Now a leader waits for a follower's answer as long
    // as its round trips take (a tick at least, REPLICA_RESEND_MS_MAX at most) before it resends.
    const g = group(3);
    g.elect(0, 1);
    g.clock.now = 60;
    g.deliver(1);
    g.sync(1);
    g.deliver(0); // replica 1 acknowledged the barrier, a 60 ms round trip
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to !== 2)); // replica 2 hears nothing, ever
    for (const w of ['a', 'b', 'c']) g.replicas[0].propose(payload(w));
    const inFlight = g.outbox.splice(0).filter((s) => s.to === 1);
    expect(inFlight.map((s) => (s.m.type === 'Append' ? s.m.records.map((r) => r.index) : []))).toEqual([[2], [3], [4]]);
    g.clock.now = 60 + REPLICA_TICK_MS; // a tick after its answer, within its round trips' wait (60 + 4 x 30 ms)
    g.replicas[0].tick();
    expect(g.outbox.filter((s) => s.to === 1)).toEqual([]); // its answers are on their way: nothing again
    const probe = g.outbox.splice(0).filter((s) => s.to === 2);
    expect(probe.map((s) => (s.m.type === 'Append' ? s.m.records.length : -1))).toEqual([1]); // replica 2 never answered: probed
    g.outbox.push(...inFlight);
    g.deliver(1);
    g.sync(1);
    g.deliver(0);
    expect(g.replicas[0].commitIndex).toBe(0); // the leader's own disk has not synced yet
    expect(g.outbox.filter((s) => s.to === 1)).toEqual([]); // and none of the answers sent anything again
    // Replica 1 stops answering: ticks within its wait send nothing, the first past it probes from its last record.
    g.replicas[0].propose(payload('d'));
    g.outbox.splice(0);
    g.clock.now += REPLICA_TICK_MS;
    g.replicas[0].tick();
    expect(g.outbox.splice(0).filter((s) => s.to === 1)).toEqual([]);
    g.later();
    g.replicas[0].tick();
    const resent = g.outbox.splice(0).filter((s) => s.to === 1);
    expect(resent.map((s) => (s.m.type === 'Append' ? [s.m.prevIndex, s.m.records.length] : []))).toEqual([[4, 1]]);
  });

  it('stops the heartbeat of a follower once it said it holds every record and the commit point durably, which one heartbeat does, even if a heartbeat is lost', () => {
    const g = group(3);
    g.elect(0, 1);
    g.replicas[0].propose(payload('a'));
    for (const i of [1, 2]) g.deliver(i);
    for (const i of [0, 1, 2]) g.sync(i);
    g.deliver(0);
    expect(g.committed).toEqual([1, 2]);
    expect(g.applied[1]).toEqual([]); // the followers hold both records but do not know they are committed
    const heartbeat = () => {
      g.replicas[0].tick();
      return g.outbox.filter((s) => s.from === 0).map((s) => s.to);
    };
    // The heartbeat to follower 1 is lost; follower 2 learns the commit point, and writes it before the sync that
    // its answer waits for, so the answer says it holds it durably. (Before, it was written after that sync, the
    // answer said the commit point from before, and every slice written since a tick got a second heartbeat.)
    expect(heartbeat()).toEqual([1, 2]);
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to !== 1));
    g.deliver(2);
    expect(g.applied[2]).toEqual([1, 2]);
    expect(g.written[2].at(-1)).toEqual({ kind: 'commit', index: 2 });
    expect(g.deliver(0)).toEqual([]); // not before the sync
    g.sync(2);
    expect(g.deliver(0).map((s) => (s.m as { commitIndex: number }).commitIndex)).toEqual([2]);
    // Follower 1 has not answered: it gets the heartbeat again once its wait is over; follower 2 needs none.
    expect(heartbeat()).toEqual([]);
    g.later();
    expect(heartbeat()).toEqual([1]);
    g.deliver(1);
    g.sync(1);
    expect(g.applied[1]).toEqual([1, 2]);
    expect(g.deliver(0).map((s) => [s.from, (s.m as { commitIndex: number }).commitIndex])).toEqual([[1, 2]]);
    // Both hold everything and said so: an idle leader sends nothing, until it has something new.
    expect(heartbeat()).toEqual([]);
    g.clock.now += REPLICA_TICK_MS; // (a keep-alive period starts at 1,000 ms)
    expect(heartbeat()).toEqual([]);
    g.replicas[0].propose(payload('b'));
    expect(g.outbox.filter((s) => s.from === 0).map((s) => s.to)).toEqual([1, 2]);
  });

  it('under steady writes whose round trips outlast a tick, sends each record once to each follower, in one Append per write, and carries the commit point without Appends', () => {
    // Measured on a loaded 2-core machine at 256 writes in flight (bench/PROFILE.md): 5.5-6 Appends per write where
    // 2 are needed, 15-40% of the records followers got were copies. Here one slice: a write every 130 ms, each
    // message 60 ms on its way (round trips of 120 ms, above the 100 ms tick), disks that sync at once.
    const g = group(3);
    g.elect(0, 1);
    const ONE_WAY_MS = 60;
    const WRITE_EVERY_MS = 130;
    const inFlight: { at: number; s: Sent }[] = [];
    const sent: Sent[] = [];
    let duplicates = 0;
    let proposals = 0;
    const step = (until: number, write: boolean) => {
      for (; g.clock.now < until; g.clock.now += 5) {
        if (write && g.clock.now % WRITE_EVERY_MS === 0 && g.replicas[0].propose(payload(`w${g.clock.now}`)) !== null) proposals++;
        if (g.clock.now % REPLICA_TICK_MS === 0) g.replicas[0].tick();
        for (const s of g.outbox.splice(0)) {
          sent.push(s);
          inFlight.push({ at: g.clock.now + ONE_WAY_MS, s });
        }
        for (let k = 0; k < inFlight.length; ) {
          if (inFlight[k].at > g.clock.now) {
            k++;
            continue;
          }
          const { s } = inFlight.splice(k, 1)[0];
          const to = g.replicas[s.to];
          if (s.m.type === 'Append') for (const r of s.m.records) if (r.index <= to.lastIndex) duplicates++;
          to.receive(s.from, s.m);
        }
        for (let i = 0; i < 3; i++) g.sync(i);
      }
    };
    step(1_000, false); // the barrier, committed and carried to the followers
    sent.splice(0);
    duplicates = 0;
    step(11_000, true);
    step(12_000, false); // writes stop: the last commit point reaches the followers
    const appends = sent.filter((s) => s.from === 0 && s.m.type === 'Append');
    expect(proposals).toBeGreaterThan(70);
    expect(duplicates).toBe(0);
    expect(appends.length).toBeLessThanOrEqual(2 * proposals + 2);
    // Each follower holds and has applied every write, and said so: the leader sends it nothing more but keep-alives.
    const last = g.replicas[0].lastIndex;
    expect([g.replicas[0].commitIndex, g.applied[1].at(-1), g.applied[2].at(-1)]).toEqual([last, last, last]);
    sent.splice(0);
    step(13_000, false);
    expect(sent.filter((s) => s.from === 0).map((s) => s.m.type)).toEqual(['KeepAlive', 'KeepAlive']);
  });

  it('applies the commit point of a KeepAlive only as far as its log is known to be that leader\'s, not over records of an older term', () => {
    // At R=5: replicas 0 (the old leader) and 4 (its follower) hold records of term 1 that never committed; replicas
    // 1, 2 and 3 elect 1 at term 2, whose records at those indexes are others, committed. 0 and 4 promised term 2 too
    // (their answers came late), so they take its KeepAlives, but nothing of its records has reached them yet.
    const g = group(5);
    const commits = (i: number) => g.written[i].filter((op) => op.kind === 'commit').map((op) => (op as { index: number }).index);
    g.elect(0, 1);
    for (const i of [1, 2, 3, 4]) g.deliver(i);
    for (const i of [0, 1, 2, 3, 4]) g.sync(i);
    g.deliver(0);
    expect(g.replicas[0].commitIndex).toBe(1); // the barrier, on every replica
    // Leader 0 writes two records (term 1, at 2 and 3) that reach replica 4 alone; 4's answers are lost.
    g.replicas[0].propose(payload('lost-a'));
    g.replicas[0].propose(payload('lost-b'));
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to === 4));
    g.deliver(4);
    for (const i of [0, 4]) g.sync(i);
    g.outbox.splice(0);
    g.elect(1, 2);
    const toStale = (s: Sent) => s.to === 0 || s.to === 4;
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => !toStale(s)));
    g.replicas[1].propose(payload('x'));
    // Its Append of 'x' reaches 4, which refuses it (record 2 is of term 1 there): no evidence that 4's log is this
    // leader's. The refusal is lost.
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to !== 0));
    g.deliver(4);
    expect(refusals(g.outbox.filter((s) => s.from === 4))).toEqual(['LogMismatch']);
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.from !== 4));
    for (const i of [2, 3]) g.deliver(i);
    for (const i of [1, 2, 3]) g.sync(i);
    g.deliver(1);
    expect(g.replicas[1].commitIndex).toBe(3);
    for (const i of [0, 4]) expect([g.replicas[i].term, g.replicas[i].lastIndex, g.replicas[i].commitIndex, g.replicas[i].recordAt(3)!.term]).toEqual([2, 3, 1, 1]);
    // The leader's lease probe goes to every follower with its commit point, 3: applied, records 2 and 3 of term 1
    // there would be writes that never committed (and 4 took them from a leader: of term 1, not of this one).
    g.replicas[1].renewLease();
    expect(g.outbox.filter(toStale).map((s) => [s.to, s.m.type, (s.m as { commitIndex: number }).commitIndex])).toEqual([
      [0, 'KeepAlive', 3],
      [4, 'KeepAlive', 3],
    ]);
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter(toStale));
    for (const i of [0, 4]) {
      g.deliver(i);
      g.sync(i);
      expect([g.applied[i], g.replicas[i].commitIndex, commits(i)]).toEqual([[1], 1, [1]]);
    }
    expect(g.outbox.map((s) => s.m.type)).toEqual(['KeepAliveOk', 'KeepAliveOk']);
    g.outbox.splice(0);
    // The leader's probes find the diverged tails, and term 2's records replace them before they are applied.
    for (let round = 0; round < 8 && !(g.replicas[0].commitIndex === 3 && g.replicas[4].commitIndex === 3); round++) {
      g.later();
      g.replicas[1].tick();
      g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => toStale(s) || (s.to === 1 && (s.from === 0 || s.from === 4))));
      for (const i of [0, 4]) {
        g.deliver(i);
        g.sync(i);
      }
      g.deliver(1);
      g.sync(1);
    }
    for (const i of [0, 4]) {
      expect(g.applied[i]).toEqual([1, 2, 3]);
      expect([2, 3].map((k) => g.replicas[i].recordAt(k)!.term)).toEqual([2, 2]);
      expect(new TextDecoder().decode(g.replicas[i].recordAt(3)!.payload)).toBe('x');
    }
  });

  it('probes at once a follower that answers a KeepAlive\'s commit point with KeepAliveOk (it restarted): it has the commit point within a tick, not after the leader\'s wait', () => {
    // First round trips of 200 ms: the leader waits REPLICA_RESEND_MS_MAX (200 + 4 x 100, capped) for these followers.
    // Before, a restarted follower (its log not known to be this leader's: leaderMatch 0) answered the commit point's
    // KeepAlive with KeepAliveOk, got the probe that lets it apply it only after that wait, and meanwhile refused
    // eventually consistent reads.
    const g = group(3);
    g.elect(0, 1);
    g.sync(0);
    for (const i of [1, 2]) g.deliver(i);
    for (const i of [1, 2]) g.sync(i);
    g.clock.now = 200;
    g.deliver(0);
    g.replicas[0].propose(payload('a'));
    for (const i of [1, 2]) g.deliver(i);
    for (const i of [0, 1, 2]) g.sync(i);
    g.clock.now = 400;
    g.deliver(0);
    expect([g.replicas[0].commitIndex, g.replicas[1].commitIndex]).toEqual([2, 1]);
    g.restart(1);
    expect([g.replicas[1].lastIndex, g.replicas[1].commitIndex, g.replicas[1].readable]).toEqual([2, 1, false]);
    const sent: Sent[] = [];
    const from = g.clock.now;
    let appliedAt: number | null = null;
    for (let t = 0; t < 10 && appliedAt === null; t++) {
      g.clock.now += REPLICA_TICK_MS;
      g.replicas[0].tick();
      for (let round = 0; round < 10 && g.outbox.length > 0; round++) {
        for (const i of [1, 2, 0]) {
          sent.push(...g.outbox.filter((s) => s.to === i));
          g.deliver(i);
          g.sync(i);
        }
      }
      if (g.replicas[1].commitIndex === 2) appliedAt = g.clock.now;
    }
    expect(appliedAt).not.toBeNull();
    expect(appliedAt! - from).toBeLessThanOrEqual(REPLICA_TICK_MS);
    expect(g.applied[1]).toEqual([1, 1, 2]); // record 1 before the restart and again at it, then the commit point's
    expect(g.replicas[1].readable).toBe(true);
    // One probe per KeepAliveOk (an empty Append: it holds every record), and nothing between the nodes after.
    expect(sent.filter((s) => s.to === 1).map((s) => (s.m.type === 'Append' ? `Append ${s.m.records.length}` : s.m.type))).toEqual(['KeepAlive', 'Append 0']);
    expect(sent.filter((s) => s.from === 1).map((s) => s.m.type)).toEqual(['KeepAliveOk', 'AppendOk']);
    g.clock.now += REPLICA_TICK_MS;
    g.replicas[0].tick();
    expect(g.outbox).toEqual([]);
  });

  it('resends a lost last Append within a round trip and a tick once writes stop, not after a tick\'s floor', () => {
    // Round trips of 20 ms (10 ms each way). The last write's Append is lost: nothing else is in flight, so no answer
    // can still come once its round trips' time has passed since it was sent. Before, the tick waited at least a
    // tick after the last answer (REPLICA_TICK_MS), and up to REPLICA_RESEND_MS_MAX after long round trips.
    const g = group(3);
    const ROUND_TRIP_MS = 20;
    steadyWrites(g, ROUND_TRIP_MS);
    const last = g.replicas[0].propose(payload('last'))!;
    g.sync(0);
    g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to !== 1)); // lost on its way to replica 1
    g.clock.now += ROUND_TRIP_MS / 2;
    g.deliver(2);
    g.sync(2);
    g.clock.now += ROUND_TRIP_MS / 2;
    g.deliver(0);
    expect(g.replicas[0].commitIndex).toBe(last);
    const sentAt = g.clock.now - ROUND_TRIP_MS;
    // Ticks half a tick apart from the send; the first past its round trip resends.
    let resentAt: number | null = null;
    for (let t = 0; t < 10 && resentAt === null; t++) {
      g.clock.now = sentAt + REPLICA_TICK_MS / 2 + t * REPLICA_TICK_MS;
      g.replicas[0].tick();
      const resent = g.outbox.splice(0).filter((s) => s.to === 1 && s.m.type === 'Append');
      if (resent.length > 0) {
        expect(resent.map((s) => (s.m.type === 'Append' ? s.m.records.map((r) => r.index) : []))).toEqual([[last]]);
        resentAt = g.clock.now;
      }
    }
    expect(resentAt).not.toBeNull();
    expect(resentAt! - sentAt).toBeLessThanOrEqual(ROUND_TRIP_MS + REPLICA_TICK_MS);
  });

  it('resends nothing to a follower whose answers are late while writes go on: something was sent to it within its round trips', () => {
    // Round trips of 10 ms, then replica 1 pauses for 60 ms (what is sent to it waits) while a write comes every 5 ms
    // and replica 2 answers. A tick 52 ms into the pause finds replica 1 silent past its round trips' estimate, but
    // the last Append to it 2 ms old: its answers are late, not lost (Replica.overdue). This guards the last-send
    // clause of overdue() (the build before the early resend passes it too, by its 100 ms floor): without the clause
    // the tick resends, rewinding the follower and sending the window in flight again once its answers came (in a
    // simulation of such pauses every 400 ms under writes every 5 ms: 288 copies in 2,169 records).
    const g = group(3);
    const ROUND_TRIP_MS = 10;
    steadyWrites(g, ROUND_TRIP_MS);
    const held: Sent[] = [];
    const start = g.clock.now;
    for (let t = 5; t <= 60; t += 5) {
      g.clock.now = start + t;
      g.replicas[0].propose(payload(`p${t}`));
      g.sync(0);
      if (t === 50) {
        g.clock.now += 2;
        g.replicas[0].tick();
      }
      held.push(...g.outbox.filter((s) => s.to === 1));
      g.outbox.splice(0, g.outbox.length, ...g.outbox.filter((s) => s.to !== 1));
      g.deliver(2);
      g.sync(2);
      g.deliver(0);
    }
    const records = held.flatMap((s) => (s.m.type === 'Append' ? s.m.records.map((r) => r.index) : []));
    expect(records.length).toBe(12);
    expect(new Set(records).size).toBe(records.length);
  });

  it('lets a follower answer eventual reads only while it hears from its leader: kept alive when idle, not after the bound when cut off', () => {
    const g = group(3);
    const seen: Sent[] = [];
    let lastWord = 0; // when follower 1 last heard from the leader
    /** Delivers every message and completes every sync until nothing is left (bounded), noting what was sent. */
    const settle = () => {
      for (let round = 0; g.outbox.some((s) => s.to !== COORDINATOR); round++) {
        expect(round).toBeLessThan(20);
        seen.push(...g.outbox.filter((s) => s.to !== COORDINATOR));
        if (g.outbox.some((s) => s.from === 0 && s.to === 1)) lastWord = g.clock.now;
        for (const i of [0, 1, 2]) g.deliver(i);
        for (const i of [0, 1, 2]) g.sync(i);
      }
    };
    /** `ms` of the leader's ticks, each followed by every message delivered. */
    const run = (ms: number) => {
      for (const end = g.clock.now + ms; g.clock.now < end; ) {
        g.clock.now += REPLICA_TICK_MS;
        g.replicas[0].tick();
        settle();
      }
    };
    g.elect(0, 1);
    g.replicas[0].propose(payload('a'));
    settle();
    run(3 * REPLICA_TICK_MS); // the commit point to the followers, and their word that they hold it durably
    expect(g.applied[1]).toEqual([1, 2]);
    expect([g.replicas[1].readable, g.replicas[2].readable]).toEqual([true, true]);

    // Idle: no heartbeat (the followers hold everything), but a KeepAlive every REPLICA_KEEPALIVE_MS, answered (the lease).
    seen.length = 0;
    const IDLE_MS = 4 * REPLICA_READ_STALENESS_MS;
    for (let t = 0; t < IDLE_MS; t += REPLICA_TICK_MS) {
      run(REPLICA_TICK_MS);
      expect([g.replicas[1].readable, g.replicas[2].readable]).toEqual([true, true]);
      expect(g.replicas[0].leaseValid).toBe(true);
    }
    expect(new Set(seen.map((s) => `${s.from}->${s.to} ${s.m.type}`))).toEqual(new Set(['0->1 KeepAlive', '0->2 KeepAlive', '1->0 KeepAliveOk', '2->0 KeepAliveOk']));
    const perFollower = IDLE_MS / REPLICA_KEEPALIVE_MS;
    expect(seen.length).toBeGreaterThanOrEqual(4 * (perFollower - 1));
    expect(seen.length).toBeLessThanOrEqual(4 * (perFollower + 1));

    // The leader is frozen (or cut off): its followers answer for REPLICA_READ_STALENESS_MS after its last word, then not.
    expect(seen.filter((s) => s.to === 1).at(-1)!.m).toMatchObject({ type: 'KeepAlive', term: 1, commitIndex: 2, leased: true });
    expect(g.clock.now - lastWord).toBeLessThan(REPLICA_KEEPALIVE_MS);
    g.clock.now = lastWord + REPLICA_READ_STALENESS_MS;
    expect([g.replicas[1].readable, g.replicas[2].readable]).toEqual([true, true]);
    g.clock.now += 1;
    expect([g.replicas[1].readable, g.replicas[2].readable]).toEqual([false, false]);

    // It wakes deposed (its followers promised a newer term meanwhile): its keep-alive is refused, and it steps down.
    for (const i of [1, 2]) g.replicas[i].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    g.replicas[0].tick(); // a new keep-alive period
    for (const i of [1, 2]) g.deliver(i);
    expect(refusals(g.deliver(0))).toEqual(['StaleTerm', 'StaleTerm']);
    expect(g.deposed).toEqual([1]);
  });
});

describe('a leader that leads on across a replica-set change (LeadOn)', () => {
  it('keeps its writes not yet committed, which commit with its new barrier on a majority of the new set and of the old one; a replica that does not lead the term refuses', () => {
    // Replicas 0, 1, 2 are the set, 0 leads term 1; then the set becomes 0, 1, 3 (2 replaced by 3).
    const g = group(4);
    g.elect(0, 1, { voters: [0, 1, 2] });
    const leader = g.replicas[0];
    const round = (ids: number[]) => {
      for (let k = 0; k < 6; k++) {
        g.later();
        leader.tick();
        g.sync(0);
        for (const i of ids) {
          g.deliver(i);
          g.sync(i);
        }
        g.deliver(0);
      }
      g.outbox.splice(0);
    };
    round([1, 2]);
    expect(g.committed).toEqual([1]);
    // A write in flight: its appends are lost, so no follower holds it.
    expect(leader.propose(payload('a'))).toBe(2);
    g.sync(0);
    g.outbox.splice(0);
    expect(g.committed).toEqual([1]);
    const leadOn: ReplicationMessage = { type: 'LeadOn', term: 2, from: 1, followers: [1, 2, 3], sets: [[0, 1, 3], [0, 1, 2]] };
    // Replica 1 does not lead term 1: it refuses, and changes nothing.
    g.replicas[1].receive(COORDINATOR, { ...leadOn, followers: [0, 2, 3], sets: [[1, 0, 3], [0, 1, 2]] });
    expect(refusals(g.deliver(COORDINATOR))).toEqual(['StaleTerm']);
    expect(g.replicas[1].term).toBe(1);
    leader.receive(COORDINATOR, leadOn);
    // Not deposed: it still leads and serves, at term 2, with the write of term 1 kept and a barrier of term 2 after it.
    expect(g.deposed).toEqual([]);
    expect([leader.isLeader, leader.serving, leader.term, leader.lastIndex, leader.ownFrom]).toEqual([true, true, 2, 3, 1]);
    expect(g.written[0].slice(-2)).toEqual([{ kind: 'promise', term: 2 }, { kind: 'append', records: [expect.objectContaining({ term: 2, index: 3 })] }]);
    // A copy of the LeadOn (or a late one) is refused: it leads term 2 now.
    leader.receive(COORDINATOR, leadOn);
    expect(refusals(g.deliver(COORDINATOR))).toEqual(['StaleTerm']);
    // The new set's majority (0 and 3) holds it all, the old set's only 0: nothing more is committed.
    round([3]);
    expect(g.committed).toEqual([1]);
    // And 2 (0 and 2: a majority of the old set): the write of term 1 commits with the barrier of term 2.
    round([2]);
    expect(g.committed.at(-1)).toBe(3);
    expect(g.applied[0]).toEqual([1, 2, 3]);
    // Its barrier committed on both sets: from now on it replicates to its own set alone.
    leader.propose(payload('b'));
    expect(g.outbox.map((s) => s.to).sort()).toEqual([1, 3]);
  });

  it('is what the coordinator sends when a set changes and its elected leader, answering, stays in it; a refusal brings an election at once', () => {
    let now = 0;
    const sent: { to: number; m: ReplicationMessage }[] = [];
    const terms: [number, ElectionReason | null][] = [];
    const published: [number, number][] = [];
    const timing = { pingIntervalMs: 100, heartbeatTimeoutMs: 300, electionTimeoutMs: 2_000 };
    const host = {
      send: (to: number, m: ReplicationMessage) => sent.push({ to, m }),
      now: () => now,
      persistTerm: (t: number, reason: ElectionReason | null) => terms.push([t, reason]),
      publish: (leader: number, term: number) => published.push([leader, term]),
      lastLead: () => lastLeadOf(published),
    };
    const f = new SliceFailover([0, 1, 2], null, 0, timing, host);
    f.tick();
    for (const r of [0, 1, 2]) f.receive(r, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    expect(f.currentLeader).toBe(0);
    now += 50;
    f.receive(0, { type: 'Pong', seq: 1, term: 1, leading: true, commitTerm: 1, lastIndex: 4 });
    sent.length = 0;
    // 2 is replaced by 3: leader 0 stays, and leads on at term 2 (no Prepare).
    const g = f.changedTo([0, 1, 3], 1, host);
    expect(terms).toEqual([[1, 'start'], [2, null]]);
    expect(published.at(-1)).toEqual([0, 2]);
    expect(sent).toEqual([{ to: 0, m: { type: 'LeadOn', term: 2, from: 1, followers: [1, 3, 2], sets: [[0, 1, 3], [0, 1, 2]] } }]);
    expect([g.currentLeader, g.currentTerm, g.electorateSettled]).toEqual([0, 2, false]);
    // A change before that one settled elects (chained changes do not lead on).
    sent.length = 0;
    const chained = g.changedTo([0, 1, 4], 2, host);
    expect(chained.currentLeader).toBeNull();
    expect(sent).toEqual([]);
    // The leader refuses (it restarted and leads nothing): an election starts at the next tick, not after the timeout.
    g.receive(0, { type: 'Refused', term: 1, code: 'StaleTerm', message: 'asked to lead on', lastIndex: 4, commitIndex: 4 });
    g.tick();
    expect(sent.filter((s) => s.m.type === 'Prepare').map((s) => s.to)).toEqual([0, 1, 3, 2]);
    expect(terms.at(-1)).toEqual([3, 'lead_on_refused']);
    // The chained change elects, and says why.
    chained.tick();
    expect(terms.at(-1)?.[1]).toBe('change_chained');
    // A leader that has not answered within the heartbeat timeout is not told to lead on: the change elects.
    sent.length = 0;
    const h = new SliceFailover([0, 1, 2], null, 0, timing, host);
    h.tick();
    for (const r of [0, 1, 2]) h.receive(r, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    expect(h.currentLeader).toBe(0);
    now += timing.heartbeatTimeoutMs;
    const silent = h.changedTo([0, 1, 3], 9, host);
    expect(silent.currentLeader).toBeNull();
    silent.tick();
    expect(terms.at(-1)?.[1]).toBe('change_leader_silent');
    // One that takes the leader's replica out elects too (a handover before the change is the coordinator's: membership.ts).
    const left = new SliceFailover([0, 1, 2], null, 19, timing, host);
    left.tick();
    for (const r of [0, 1, 2]) left.receive(r, { type: 'Prepared', term: 20, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    left.receive(0, { type: 'Pong', seq: 1, term: 20, leading: true, commitTerm: 20, lastIndex: 4 });
    expect([left.currentLeader, left.electorateSettled]).toEqual([0, true]);
    const out = left.changedTo([1, 2, 3], 20, host);
    out.tick();
    expect(terms.at(-1)?.[1]).toBe('change_leader_left');
    // A leader whose Pong is late but whose node answers other slices (heardFrom) is slow, not gone: it leads on, as
    // tick() would keep it, up to LEADER_SLOW_TIMEOUT_FACTOR times the timeout; past that the change elects.
    let heard = now;
    const busy = { ...host, heardFrom: () => heard };
    const slow = new SliceFailover([0, 1, 2], null, 29, timing, busy);
    slow.tick();
    for (const r of [0, 1, 2]) slow.receive(r, { type: 'Prepared', term: 30, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    slow.receive(0, { type: 'Pong', seq: 1, term: 30, leading: true, commitTerm: 30, lastIndex: 4 });
    now += 2 * timing.heartbeatTimeoutMs;
    heard = now;
    const on = slow.changedTo([0, 1, 3], 30, busy);
    expect(on.currentLeader).toBe(0);
    expect(terms.at(-1)).toEqual([31, null]);
    // The led-on leader's clock runs on from its last Pong, not from the LeadOn: the new failover replaces it at
    // LEADER_SLOW_TIMEOUT_FACTOR times the timeout after that Pong, its node heard all along (before: 3x more after the change).
    now += timing.heartbeatTimeoutMs - 1;
    heard = now;
    on.tick();
    expect(terms.at(-1)).toEqual([31, null]);
    now += 1;
    heard = now;
    on.tick();
    expect(terms.at(-1)).toEqual([32, 'leader_timeout']);
    // A change that comes that late does not lead on (the failover before asked, at the same point of its clock).
    expect(slow.changedTo([0, 1, 4], 31, busy).currentLeader).toBeNull();
    // One rule with tick() (leaderAnswering): a Pong within the heartbeat timeout is answering, whatever else its node
    // sent lately; tick() keeps such a leader, and a change leads on with it (before, the change elected).
    heard = -Infinity;
    const fresh = new SliceFailover([0, 1, 2], null, 39, timing, busy);
    fresh.tick();
    for (const r of [0, 1, 2]) fresh.receive(r, { type: 'Prepared', term: 40, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    fresh.receive(0, { type: 'Pong', seq: 1, term: 40, leading: true, commitTerm: 40, lastIndex: 4 });
    now += timing.heartbeatTimeoutMs - 1;
    fresh.tick();
    expect(terms.at(-1)).toEqual([40, 'start']);
    expect(fresh.changedTo([0, 1, 3], 40, busy).currentLeader).toBe(0);
    expect(terms.at(-1)).toEqual([41, null]);
  });
});

describe('a new term\'s first heartbeat', () => {
  it('probes a follower that has not answered in the term yet with a record its log holds, not its snapshot: a compacted leader that leads on sends no snapshot to followers that hold every record', () => {
    const g = group(4);
    g.elect(0, 1);
    const leader = g.replicas[0];
    const pump = () => {
      for (let k = 0; k < 8; k++) {
        for (let i = 0; i < 4; i++) g.sync(i);
        for (const i of [1, 2, 3]) g.deliver(i);
        g.deliver(0);
      }
    };
    pump();
    for (let k = 0; k < 5; k++) {
      leader.propose(payload(`w${k}`));
      pump();
      leader.tick();
      pump();
    }
    expect(leader.commitIndex).toBe(leader.lastIndex);
    leader.compact(leader.appliedIndex);
    g.outbox.splice(0);
    // 3 joins the set; 0 leads on at term 2, and its first tick comes before any follower answered the barrier.
    leader.receive(COORDINATOR, { type: 'LeadOn', term: 2, from: 1, followers: [1, 2, 3], sets: [[0, 1, 2, 3], [0, 1, 2]] });
    g.outbox.splice(0);
    g.clock.now += REPLICA_TICK_MS;
    leader.tick();
    // Probing from index 1 (its match in the new term, 0, plus one) sent its whole snapshot to 1 and 2, which hold
    // every record, at every such tick.
    expect(g.outbox.filter((s) => s.m.type === 'Snapshot').map((s) => s.to)).toEqual([]);
    // The probes' answers bring each follower where it belongs: 3, empty, gets the snapshot then; all catch up.
    pump();
    leader.tick();
    pump();
    expect(leader.commitIndex).toBe(leader.lastIndex);
    for (const i of [1, 2, 3]) expect(g.replicas[i].lastIndex).toBe(leader.lastIndex);
  });
});

describe('a leader\'s lease (consistent reads on a leader deposed without knowing it)', () => {
  /** Delivers every message among `among` and completes their syncs until nothing is left; messages to others are dropped. */
  const settleAmong = (g: ReturnType<typeof group>, among: number[]) => {
    for (let round = 0; g.outbox.some((s) => s.to !== COORDINATOR); round++) {
      expect(round).toBeLessThan(20);
      for (const s of [...g.outbox]) if (s.to !== COORDINATOR && (!among.includes(s.to) || !among.includes(s.from))) g.outbox.splice(g.outbox.indexOf(s), 1);
      for (const i of among) g.deliver(i);
      for (const i of among) g.sync(i);
    }
  };
  const LEASE_USED_MS = REPLICA_LEASE_MS * (1 - REPLICA_LEASE_DRIFT);
  /** Replica 0, which last led `ledTerm`, promises `term`: it stops leading, its lease ends at once, and its Prepared says which term it led. */
  const promiseEndsLease = (g: ReturnType<typeof group>, term: number, ledTerm: number) => {
    g.replicas[0].receive(COORDINATOR, { type: 'Prepare', term });
    expect(g.replicas[0].leaseValid).toBe(false);
    g.sync(0);
    expect(g.deliver(COORDINATOR).map((s) => s.m)).toMatchObject([{ type: 'Prepared', term, ledTerm }]);
  };

  it('holds a lease from the send time of what a majority answered, renews it with a round of keep-alives, and loses it when it promises a newer term', () => {
    const g = group(3);
    g.elect(0, 1);
    expect(g.replicas[0].leaseValid).toBe(false); // nothing answered yet
    g.clock.now = 10; // the barrier goes out at 10 (elect sent it at 0; sent again below)
    g.outbox.splice(0);
    g.clock.now = 10;
    g.replicas[0].renewLease();
    g.sync(0);
    settleAmong(g, [0, 1]); // replica 2 hears nothing: one answer and the leader itself are a majority of 3
    expect(g.replicas[0].leaseValid).toBe(true);
    g.clock.now = 10 + LEASE_USED_MS - 1;
    expect(g.replicas[0].leaseValid).toBe(true);
    g.clock.now = 10 + LEASE_USED_MS;
    expect(g.replicas[0].leaseValid).toBe(false);
    // A read finding no lease asks for one at once: a KeepAlive to each follower (saying the leader holds none).
    g.replicas[0].renewLease();
    expect(g.outbox.map((s) => [s.to, s.m.type, (s.m as { leased?: boolean }).leased])).toEqual([[1, 'KeepAlive', false], [2, 'KeepAlive', false]]);
    g.replicas[0].renewLease(); // at most one round per REPLICA_LEASE_PROBE_MS_MIN
    expect(g.outbox.length).toBe(2);
    settleAmong(g, [0, 2]);
    expect(g.replicas[0].leaseValid).toBe(true);
    // A follower's answer to an older message does not move the lease back, nor forward.
    g.replicas[0].receive(1, { type: 'KeepAliveOk', term: 1, sentAt: 0 });
    g.clock.now = 10 + 2 * LEASE_USED_MS;
    expect(g.replicas[0].leaseValid).toBe(false);
    g.clock.now = 10 + LEASE_USED_MS + LEASE_USED_MS - 1;
    expect(g.replicas[0].leaseValid).toBe(true);
    // Prepare for a newer term: it stops leading, and its lease with it; its answer says it led term 1.
    promiseEndsLease(g, 2, 1);
  });

  it('has a follower that promises a newer term tell the coordinator how long the lease it last counted on may run', () => {
    const g = group(3);
    g.clock.now = 5_000; // long after the replicas started
    g.elect(0, 1);
    g.sync(0);
    settleAmong(g, [0, 1, 2]); // the followers answered the barrier at 5,000
    g.clock.now = 5_300;
    g.replicas[1].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    g.sync(1);
    expect(g.deliver(COORDINATOR).map((s) => s.m)).toEqual([{ type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 1, leaseWaitMs: REPLICA_LEASE_MS - 300, ledTerm: 0 }]);
    // It answers the old leader nothing more: its keep-alive is refused, and no answer moves the wait.
    g.replicas[0].renewLease();
    g.deliver(1);
    expect(refusals(g.deliver(0))).toEqual(['StaleTerm']);
    g.clock.now = 5_000 + REPLICA_LEASE_MS + 1;
    g.replicas[2].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    g.sync(2);
    expect(g.deliver(COORDINATOR).map((s) => (s.m as { leaseWaitMs: number }).leaseWaitMs)).toEqual([0]);
  });

  it('at R=5, does not keep a follower readable for eventual reads with the keep-alives of a leader that a majority deposed', () => {
    const g = group(5);
    g.clock.now = 5_000;
    g.elect(0, 1);
    g.sync(0);
    const runAmong = (ms: number, among: number[]) => {
      for (const end = g.clock.now + ms; g.clock.now < end; ) {
        g.clock.now += REPLICA_TICK_MS;
        g.replicas[0].tick();
        settleAmong(g, among);
      }
    };
    runAmong(3 * REPLICA_KEEPALIVE_MS, [0, 1, 2, 3, 4]);
    expect(g.replicas[4].readable).toBe(true);
    // Replicas 1-3 promise term 2 (a new leader's election) and no longer hear 0; replica 4 still hears 0, not them.
    for (const i of [1, 2, 3]) g.replicas[i].receive(COORDINATOR, { type: 'Prepare', term: 2 });
    runAmong(REPLICA_READ_STALENESS_MS + REPLICA_LEASE_MS, [0, 4]);
    expect(g.replicas[0].isLeader).toBe(true); // it does not know
    expect(g.replicas[0].leaseValid).toBe(false);
    expect(g.replicas[4].readable).toBe(false); // before leases, its keep-alives kept replica 4 answering
  });

  it('after a LeadOn, holds no lease until a majority of each of the change\'s sets answered at the new term; answers of the old term do not count', () => {
    // 0 leads term 1 over 0-3 and holds a lease; the set becomes 0, 1, 3 (2 leaves) and 0 leads on at term 2.
    const g = group(4);
    g.elect(0, 1);
    g.sync(0);
    settleAmong(g, [0, 1, 2, 3]);
    expect(g.replicas[0].leaseValid).toBe(true);
    g.clock.now = 100;
    g.replicas[0].receive(COORDINATOR, { type: 'LeadOn', term: 2, from: 1, followers: [1, 2, 3], sets: [[0, 1, 3], [0, 1, 2, 3]] });
    expect([g.replicas[0].isLeader, g.replicas[0].term]).toEqual([true, 2]);
    // The lease of term 1 is not carried over: it counted the old set, and once the change settles only the new one elects.
    expect(g.replicas[0].leaseValid).toBe(false);
    // An answer at term 1 to a message sent after the LeadOn (a follower that has not taken term 2 yet) counts for nothing.
    g.replicas[0].receive(1, { type: 'KeepAliveOk', term: 1, sentAt: 100 });
    g.replicas[0].receive(3, { type: 'KeepAliveOk', term: 1, sentAt: 100 });
    expect(g.replicas[0].leaseValid).toBe(false);
    // 3 answers term 2's barrier: a majority of the new set (0, 3), not of the old one (2 of 4).
    g.sync(0);
    settleAmong(g, [0, 3]);
    expect(g.replicas[0].leaseValid).toBe(false);
    // 2 hears term 2 from the next tick's appends (a keep-alive of a term it has not taken is dropped) and answers.
    g.clock.now += REPLICA_TICK_MS;
    g.replicas[0].tick();
    settleAmong(g, [0, 2, 3]);
    expect(g.replicas[0].leaseValid).toBe(true);
    // It promises a later election's term: its answer says it led term 2, which the coordinator recorded with the LeadOn.
    promiseEndsLease(g, 3, 2);
  });
});

describe('the coordinator\'s wait for the old leader\'s lease', () => {
  const timing = { pingIntervalMs: 100, heartbeatTimeoutMs: 300, electionTimeoutMs: 200 };
  const setup = () => {
    let now = 1_000;
    const published: [number, number][] = [];
    // Replica 0 got the Lead of term 1 (not known: a map written before the last Lead was kept), and the map's term is
    // 2: a handover named another leader before its election.
    const host = { send: () => {}, now: () => now, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published, [1, null]) };
    const f = new SliceFailover([0, 1, 2], null, 2, timing, host);
    f.tick(); // Prepare(3) to all
    return { f, published, at: (t: number) => (now = t) };
  };

  it('names no leader before the leases its answers report have run out, even past the election timeout', () => {
    const { f, published, at } = setup();
    f.receive(1, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 400, ledTerm: 0 });
    f.receive(2, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 100, ledTerm: 0 });
    expect(published).toEqual([]);
    at(1_399);
    f.tick();
    expect(published).toEqual([]); // not started again at a newer term either (timeout 200 ms)
    at(1_400);
    f.tick();
    expect(published).toEqual([[1, 3]]);
  });

  it('waits for nothing when the last leader itself promised the new term (it stopped leading, and reading, then)', () => {
    const { f, published } = setup();
    f.receive(1, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 1_000, ledTerm: 0 });
    f.receive(0, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 0, ledTerm: 1 });
    expect(published).toEqual([[0, 3]]);
  });

  it('needs only a majority whose waits are over: a replica that just restarted (a full wait, not knowing what it answered before) holds nothing up', () => {
    const { f, published, at } = setup();
    f.receive(1, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 100, ledTerm: 0 });
    f.receive(0, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 1_500, ledTerm: 0 }); // restarted: leads nothing
    f.receive(2, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 200, ledTerm: 0 });
    at(1_199);
    f.tick();
    expect(published).toEqual([]); // only 1's wait is over: not a majority
    at(1_200);
    f.tick();
    expect(published).toEqual([[0, 3]]); // 1 and 2 are: the lease, on a majority, had one of them (before: at 2,500)
  });

  it('waits for nothing when the replica the last Lead went to answered from a process started since (it leads nothing): the lease died with the process that held it', () => {
    let now = 1_000;
    const published: [number, number][] = [];
    for (const lastLedBy of [0, null]) {
      published.length = 0;
      const host = { send: () => {}, now: () => now, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published, [1, lastLedBy]) };
      const f = new SliceFailover([0, 1, 2], null, 2, timing, host);
      f.tick();
      f.receive(1, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 1_200, ledTerm: 0 });
      // Node 0 restarted: its replica leads nothing, and (started just now) reports a full wait.
      f.receive(0, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 1_500, ledTerm: 0 });
      // Not knowing who led term 1 (a coordinator that restarted), it waits the leases out.
      expect(published).toEqual(lastLedBy === null ? [] : [[0, 3]]);
    }
  });

  it('counts only the leader of the last term it sent a Lead for: one of an older term may be deposed, not the last', () => {
    const { f, published, at } = setup();
    // Replica 2 says it led term 2, a term no Lead was sent for here (it cannot have; whoever led, the answer is not
    // the last leader's): the lease of the leader of term 1, replica 0, which has not answered, is waited out.
    f.receive(1, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 300, ledTerm: 0 });
    f.receive(2, { type: 'Prepared', term: 3, lastTerm: 1, lastIndex: 5, leaseWaitMs: 0, ledTerm: 2 });
    expect(published).toEqual([]);
    at(1_300);
    f.tick();
    expect(published).toEqual([[1, 3]]);
  });

  it('counts a LeadOn as the last Lead: the leader told to lead on answers (for the new term, or for the one before if the LeadOn never came: the same replica, which stopped leading when it promised), and nothing is waited for', () => {
    for (const ledTerm of [2, 1]) {
      let now = 1_000;
      const published: [number, number][] = [];
      const host = { send: () => {}, now: () => now, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published) };
      const f = new SliceFailover([0, 1, 2], null, 0, timing, host);
      f.tick();
      for (const r of [0, 1, 2]) f.receive(r, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
      expect(published).toEqual([[0, 1]]);
      now += 50;
      f.receive(0, { type: 'Pong', seq: 1, term: 1, leading: true, commitTerm: 1, lastIndex: 4 });
      // 2 is replaced by 3: 0 leads on at term 2.
      const g = f.changedTo([0, 1, 3], 1, host);
      expect([g.currentLeader, g.currentTerm, ...host.lastLead()]).toEqual([0, 2, 2, 0]);
      // It stops answering; the election (term 3) hears from 0 and 1, a majority of both sets.
      now += timing.heartbeatTimeoutMs + 1;
      g.tick();
      g.receive(1, { type: 'Prepared', term: 3, lastTerm: 2, lastIndex: 5, leaseWaitMs: 1_000, ledTerm: 0 });
      g.receive(0, { type: 'Prepared', term: 3, lastTerm: 2, lastIndex: 5, leaseWaitMs: 0, ledTerm });
      expect(published.at(-1)).toEqual([0, 3]);
    }
  });
});

describe('the choice of a new leader', () => {
  it('needs answers from a majority, and takes the largest last term before the largest last index', () => {
    const answers = new Map([
      [1, { lastTerm: 3, lastIndex: 10 }],
      [2, { lastTerm: 4, lastIndex: 7 }],
    ]);
    expect(chooseLeader([0, 1, 2, 3, 4], answers)).toBeNull();
    answers.set(4, { lastTerm: 4, lastIndex: 8 });
    expect(chooseLeader([0, 1, 2, 3, 4], answers)).toBe(4);
    expect(chooseLeader([1, 2, 4], new Map([[1, { lastTerm: 3, lastIndex: 10 }], [2, { lastTerm: 4, lastIndex: 7 }]]))).toBe(2);
  });
});

describe('the coordinator\'s election of one slice', () => {
  it('asks a replica that comes back during an election at once, at the same term, rather than after the election timeout', () => {
    let now = 0;
    const sent: { to: number; m: ReplicationMessage }[] = [];
    const terms: number[] = [];
    const published: [number, number][] = [];
    const timing = { pingIntervalMs: 100, heartbeatTimeoutMs: 300, electionTimeoutMs: 2_000 };
    const f = new SliceFailover([0, 1, 2], 0, 1, timing, {
      send: (to, m) => sent.push({ to, m }),
      now: () => now,
      persistTerm: (t) => terms.push(t),
      publish: (leader, term) => published.push([leader, term]),
      lastLead: () => lastLeadOf(published),
    });
    // Leader 0 is killed while replica 2 is still restarting: the Prepares to both go nowhere.
    f.suspectLeader();
    f.tick();
    expect(terms).toEqual([2]);
    expect(sent.map((s) => [s.to, s.m.type])).toEqual([[0, 'Prepare'], [1, 'Prepare'], [2, 'Prepare']]);
    sent.length = 0;
    now += 50;
    f.receive(1, { type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(f.currentLeader).toBeNull(); // one answer of three
    // Replica 1 answered already; replica 2's node is reachable again: only it is asked, at the same term.
    f.reachable(1);
    f.reachable(2);
    expect(sent).toEqual([{ to: 2, m: { type: 'Prepare', term: 2 } }]);
    sent.length = 0;
    now += 50;
    f.receive(2, { type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 5, leaseWaitMs: 0, ledTerm: 0 });
    // Elected 100 ms after the kill, well before the election timeout, without a second term.
    expect(published).toEqual([[1, 2]]);
    expect(terms).toEqual([2]);
    expect(sent).toEqual([{ to: 1, m: { type: 'Lead', term: 2, followers: [0, 2], sets: [] } }]);
    sent.length = 0;
    f.reachable(0); // no election under way: nothing to ask
    expect(sent).toEqual([]);
  });
  it('a handover\'s election waits a while for the replica handed to, which wins the tie with the old leader: a majority without it would name the old leader again', () => {
    let now = 0;
    const published: [number, number][] = [];
    const { timing, host } = electionStory(published, () => now);
    // Handed to 1 (listed first); 0 led, and 1 and 2 hold its last record (term 4, index 7), as 0 does.
    const f = SliceFailover.handOver([1, 0, 2], 4, timing, host);
    f.tick(); // Prepare(5) to all
    f.receive(0, { type: 'Prepared', term: 5, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 4 });
    f.receive(2, { type: 'Prepared', term: 5, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([]); // a majority, but not the one handed to (before: 0 led again, the tie going to the answers in)
    now += 100;
    f.receive(1, { type: 'Prepared', term: 5, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[1, 5]]);
    // Only the handover's own election waits: once 1 led, a leader timeout (1 froze) with a majority answering
    // publishes at once, not half an election timeout later (the failover was a handover's for its lifetime).
    now += timing.heartbeatTimeoutMs;
    f.tick(); // Prepare(6): 1 timed out
    const asked = now;
    f.receive(0, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 9, leaseWaitMs: 0, ledTerm: 4 });
    f.receive(2, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 9, leaseWaitMs: 0, ledTerm: 0 });
    for (let i = 0; i < 40 && published.length === 1; i++) {
      now += 50;
      f.tick();
    }
    expect([`published after ${now - asked} ms`, published.at(-1)]).toEqual(['published after 0 ms', [0, 6]]);
    // One that never answers (its node froze) holds the election up half its timeout, not to a new term: the answers in decide.
    const g = SliceFailover.handOver([1, 0, 2], 9, timing, host);
    g.tick();
    g.receive(0, { type: 'Prepared', term: 10, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 5 });
    g.receive(2, { type: 'Prepared', term: 10, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    now += timing.electionTimeoutMs * HANDOVER_TARGET_ANSWER_WAIT_SHARE - 1;
    g.tick();
    expect(g.currentLeader).toBeNull();
    now += 1;
    g.tick();
    expect(published.at(-1)).toEqual([0, 10]);
    // Nor does it wait for one whose node is silent (heardFrom: the coordinator hears nothing from it lately).
    const silentTo = { ...host, heardFrom: (r: number) => (r === 1 ? -Infinity : now) };
    const h = SliceFailover.handOver([1, 0, 2], 14, timing, silentTo);
    h.tick();
    h.receive(0, { type: 'Prepared', term: 15, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 10 });
    h.receive(2, { type: 'Prepared', term: 15, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(published.at(-1)).toEqual([0, 15]);
    // One heard lately is waited for, as without heardFrom.
    const k = SliceFailover.handOver([1, 0, 2], 19, timing, { ...host, heardFrom: () => now });
    k.tick();
    k.receive(0, { type: 'Prepared', term: 20, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 15 });
    k.receive(2, { type: 'Prepared', term: 20, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(k.currentLeader).toBeNull();
    k.receive(1, { type: 'Prepared', term: 20, lastTerm: 4, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    expect(published.at(-1)).toEqual([1, 20]);
  });
  it('counts only answers to its own term\'s Prepare: a late answer to an older one says nothing of the records its replica took since', () => {
    const published: [number, number][] = [];
    const { timing, host } = electionStory(published);
    const f = new SliceFailover([0, 1, 2], null, 0, timing, host);
    f.tick(); // Prepare(1) to all
    f.receive(1, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(2, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[1, 1]]);
    // 0 promised term 1 too, and its answer is held up on its link. Leader 1 commits records 1..5 on 1 and 0; 2 holds
    // the barrier alone. 1 dies, and the next election hears 2 and, at last, 0's answer to term 1: a majority of
    // answers, but 0's is its log before it took 1..5, and 2 would lose them.
    f.suspectLeader();
    f.tick(); // Prepare(2) to all
    f.receive(0, { type: 'Prepared', term: 1, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(2, { type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 1, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[1, 1]]);
    f.receive(0, { type: 'Prepared', term: 2, lastTerm: 1, lastIndex: 5, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[1, 1], [0, 2]]);
  });

  it('elects a replica of the new set when the most up to date answer comes from the replica that left it (its records were never acknowledged)', () => {
    const published: [number, number][] = [];
    const { timing, host } = electionStory(published);
    // Replica 0 led [0, 1, 2, 3] and is moved off (its replica leaves); it took records 102..103 that no other
    // replica holds, so they were not acknowledged (a majority of [0, 1, 2, 3] never held them).
    const changed = new SliceFailover([0, 1, 2, 3], 0, 5, timing, host).changedTo([1, 2, 3], 5, host);
    changed.tick();
    changed.receive(0, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 103, leaseWaitMs: 0, ledTerm: 0 });
    changed.receive(1, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 101, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([]); // no majority of [1, 2, 3] answered
    changed.receive(2, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 100, leaseWaitMs: 0, ledTerm: 0 });
    // Of [0, 1, 2, 3], 1 and 2 answered no further than replica 1: every majority of it (3 of 4) holds one of them,
    // so a write acknowledged under it is on one of them, so on 1.
    expect(published).toEqual([[1, 6]]);
  });

  it('elects a replica of the new set, with a node of both sets killed, when the replica that left took the killed leader\'s last records', () => {
    // The replica-join story: a move's drop changed [0, 1, 2, 3] to [0, 1, 3] (2 left; 3 joined), and 0, which led, was
    // killed before the change settled, having sent its last records (its LeadOn barrier) to 2 alone. The old set's
    // majority needs 2 (answering until the change settles), and the answers no further than 1 are 1 and 3: two of
    // [0, 1, 2, 3], which every majority of it meets, so 1 holds every acknowledged write. Waiting for a majority (3)
    // of them waited for the killed node to come back (CI: no leader within 20 s), as every new election got the
    // same answers.
    let now = 0;
    const published: [number, number][] = [];
    const { timing, host } = electionStory(published, () => now);
    // 0 led on at term 6 (its LeadOn barrier is of term 6), so the election's terms are newer.
    const changed = new SliceFailover([0, 1, 2, 3], 0, 6, timing, host).changedTo([0, 1, 3], 6, host);
    for (let round = 0; round < 3 && published.length === 0; round++) {
      changed.tick();
      const term = 7 + round;
      changed.receive(2, { type: 'Prepared', term, lastTerm: 6, lastIndex: 104, leaseWaitMs: 0, ledTerm: 0 });
      changed.receive(1, { type: 'Prepared', term, lastTerm: 5, lastIndex: 103, leaseWaitMs: 0, ledTerm: 0 });
      changed.receive(3, { type: 'Prepared', term, lastTerm: 5, lastIndex: 102, leaseWaitMs: 0, ledTerm: 0 });
      now += timing.electionTimeoutMs * 4;
    }
    expect(published).toEqual([[1, 7]]);
  });

  it('does not elect past the replicas that left when the answers no further than the new set\'s best are fewer than half of an even set: one that left carries the change', () => {
    // The rule's edge for a set of even size: 2 of 4 answers no further than the candidate meet every majority of
    // the set, 1 does not. A coordinator restarted with [0, 1, 2, 4] to [0, 1, 3] unsettled (two replicas out at once,
    // as chained changes leave them); 0 is down. Records 11 and 12 may be acknowledged under [0, 1, 2, 4] on 0, 2 and 4
    // (3 of 4), so neither 1 nor 3 may lead: of [0, 1, 2, 4], only 1 answered no further than 1 (the best of [0, 1, 3]).
    const published: [number, number][] = [];
    const { timing, host } = electionStory(published);
    // 0's node is down: the coordinator heard nothing from it lately (the others' nodes answer), so no answer of 0 is
    // waited for (finishElection's wait for answers that would spare a carrier).
    const f = SliceFailover.atStart({ replicas: [0, 1, 3], termUsed: 5, unsettled: [[0, 1, 2, 4]] }, timing, { ...host, heardFrom: (r: number) => (r === 0 ? -Infinity : 0) });
    f.tick();
    f.receive(2, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 12, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(4, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 12, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(1, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 10, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(3, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 9, leaseWaitMs: 0, ledTerm: 0 });
    // A majority of each set answered, but 1 would lose records 11 and 12: 2, the furthest (listed before 4), leads the
    // joint sets to carry the change (Raft's leader outside its new configuration), rather than wait for 0.
    expect(published).toEqual([[2, 6]]);
  });

  it('counts an answer of a newer last term as further than the new set\'s best, whatever its last index: the replica that left carries the change', () => {
    // [0, 1, 2] to [0, 1, 3] unsettled when the coordinator restarted; 0 is down. 0 led term 6, and its barrier (record
    // 100, term 6) is on 0 and 2, a majority of [0, 1, 2], so it may be committed; 1, cut off meanwhile, kept a tail
    // of term 5 up to 103 that was never committed. 2's (6, 100) is further than 1's (5, 103) (the term first, as in
    // any election), so 1 may not lead: of [0, 1, 2], only 1 answered no further than it.
    const published: [number, number][] = [];
    let now = 0;
    const { timing, host } = electionStory(published, () => now);
    const f = SliceFailover.atStart({ replicas: [0, 1, 3], termUsed: 6, unsettled: [[0, 1, 2]] }, timing, host);
    f.tick();
    f.receive(2, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 100, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(1, { type: 'Prepared', term: 7, lastTerm: 5, lastIndex: 103, leaseWaitMs: 0, ledTerm: 0 });
    f.receive(3, { type: 'Prepared', term: 7, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    // Not 1. 0's answer could still let 0 lead (it would be no further than 0's own), so the election waits for it
    // a while (the simulation's host, as this one, says nothing of which nodes answer: the bound alone)...
    expect(published).toEqual([]);
    now = timing.electionTimeoutMs * CARRIER_AVOIDED_ANSWER_WAIT_SHARE - 1;
    f.tick();
    expect(published).toEqual([]);
    // ...then 2, which holds the barrier, leads the joint sets until it commits there.
    now += 1;
    f.tick();
    expect(published).toEqual([[2, 7]]);
  });

  it('does not elect past the replica that left when the new set holds a record of the old set on too few replicas, and waits for the answer that may spare a carrier', () => {
    // [0, 1, 2] replaced by [1, 2, 3]: record 8 may be acknowledged on 0 and 1 (a majority of the old set).
    const { published, changed } = electionAfterChange([1, 2, 3], [[0, 8], [2, 7], [3, 0]]);
    // 2 would lose record 8 (only one of [0, 1, 2] answered no further than it). 1's answer, still to come from a node
    // that answers, may make 1 the set's best: the election waits for it rather than name 0 to carry the change (a
    // carrier takes no routed write and costs a second election that waits out its lease).
    expect(published).toEqual([]);
    changed.receive(1, preparedAt6(8));
    expect(published).toEqual([[1, 6]]);
  });

  it('names the replica that left to carry the change at once where no answer still to come could let a replica of the new set lead', () => {
    // [0, 1, 2] replaced by [2, 3, 4] (two out: a replacement and a move at once, as a restarted coordinator may find
    // them): records 8 and 9 are on 0 and 1, a majority of [0, 1, 2], and on no replica of [2, 3, 4] that answered. Even
    // if 2 answered no further than 3, 0 and 1 would be left out of [0, 1, 2]: a majority. No wait: 0 carries.
    const { published, changed } = electionAfterChange([2, 3, 4], [[3, 0], [4, 0], [0, 9]]);
    expect(published).toEqual([]);
    changed.receive(1, preparedAt6(9));
    expect(published).toEqual([[0, 6]]);
  });
});

describe('a replica outside the newest set that carries a chained change (Raft\'s leader outside its new configuration)', () => {
  it('is elected by the joint majorities when a later change took out every replica of the new set that holds the last records of a set before it, and the new set elects its own once the carrier\'s barrier settled the change', () => {
    // The simulation's chained runs (seed 301095 on stores, when first counted): [0, 1, 2] -> [0, 1, 4] (replace 2), and
    // before that settled [0, 1, 4] -> [0, 4] (remove 1). Record 16 is on 1 and 2 alone, a majority of [0, 1, 2], so it
    // may be committed, and neither is in [0, 4]: no replica of [0, 4] may lead. Before, every election heard a majority
    // of every set and named no one, for good.
    const published: [number, number][] = [];
    const sent: { to: number; m: ReplicationMessage }[] = [];
    const timing = { pingIntervalMs: 100, heartbeatTimeoutMs: 300, electionTimeoutMs: 2_000 };
    const host = { send: (to: number, m: ReplicationMessage) => sent.push({ to, m }), now: () => 0, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published) };
    const first = new SliceFailover([0, 1, 2], null, 5, timing, host);
    first.tick();
    for (const r of [0, 1, 2]) first.receive(r, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 10, leaseWaitMs: 0, ledTerm: 0 });
    first.receive(0, { type: 'Pong', seq: 1, term: 6, leading: true, commitTerm: 6, lastIndex: 11 });
    const ledOn = first.changedTo([0, 1, 4], 6, host);
    expect(published).toEqual([[0, 6], [0, 7]]); // 0, in the new set and answering, leads on at 7
    const chained = ledOn.changedTo([0, 4], 7, host);
    expect(chained.sets).toEqual([[0, 4], [0, 1, 4], [0, 1, 2]]);
    sent.length = 0;
    chained.tick();
    expect(chained.electionReason).toBe('change_chained');
    chained.receive(0, { type: 'Prepared', term: 8, lastTerm: 7, lastIndex: 15, leaseWaitMs: 0, ledTerm: 7 });
    chained.receive(4, { type: 'Prepared', term: 8, lastTerm: 0, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    chained.receive(1, { type: 'Prepared', term: 8, lastTerm: 7, lastIndex: 16, leaseWaitMs: 0, ledTerm: 0 });
    chained.receive(2, { type: 'Prepared', term: 8, lastTerm: 7, lastIndex: 16, leaseWaitMs: 0, ledTerm: 0 });
    // 1, the furthest (before 2, listed later), leads the joint sets: it replicates to every replica of them and
    // commits on a majority of each.
    expect(published).toEqual([[0, 6], [0, 7], [1, 8]]);
    const lead = sent.find((s) => s.m.type === 'Lead')!;
    expect(lead).toEqual({ to: 1, m: { type: 'Lead', term: 8, followers: [0, 4, 2], sets: [[0, 4], [0, 1, 4], [0, 1, 2]] } });
    expect(chained.electorateSettled).toBe(false);
    // Its barrier committed (a majority of every set holds it), it stepped down (Replica.leaderCommit) and says so: the
    // change settles and [0, 4] elects alone, without asking 1 or 2.
    sent.length = 0;
    chained.receive(1, { type: 'Pong', seq: 1, term: 8, leading: false, commitTerm: 8, lastIndex: 17 });
    chained.tick();
    expect(chained.sets).toEqual([[0, 4]]);
    expect(chained.electionReason).toBe('change_leader_left');
    expect(sent.map((s) => [s.to, s.m.type, (s.m as { term?: number }).term])).toEqual([[0, 'Prepare', 9], [4, 'Prepare', 9]]);
    // 0 and 4 answered the carrier a moment ago, so each says its lease may run a while yet; but the carrier said it
    // stopped leading term 8 (its Pong: not leading, its commit point of term 8), so no lease runs: 0 leads at once.
    chained.receive(0, { type: 'Prepared', term: 9, lastTerm: 8, lastIndex: 17, leaseWaitMs: 1_000, ledTerm: 0 });
    chained.receive(4, { type: 'Prepared', term: 9, lastTerm: 8, lastIndex: 17, leaseWaitMs: 1_000, ledTerm: 0 });
    expect(published.at(-1)).toEqual([0, 9]);
    expect(chained.currentLeader).toBe(0);
  });

  it('ends the wait for leases by the carrier\'s Pong that comes after a follower\'s commit term settled the change', () => {
    // [0, 1, 2] to [1, 2, 3] with 0 carrying: record 8 on 0 and 1, 1's node down.
    const { published, changed } = electionAfterChange([1, 2, 3], [[0, 8], [2, 7], [3, 0]], (r) => (r === 1 ? -Infinity : 0));
    expect(published).toEqual([[0, 6]]);
    // 0's barrier (9) committed on 0 and 2 of [0, 1, 2] and 2 and 3 of [1, 2, 3]; it told 2 and 3, and stepped down.
    // 2's Pong comes first: the change settles and [1, 2, 3] elects, 2 and 3 reporting a lease that may run a while.
    changed.receive(2, { type: 'Pong', seq: 0, term: 6, leading: false, commitTerm: 6, lastIndex: 9 });
    changed.tick();
    expect(changed.sets).toEqual([[1, 2, 3]]);
    changed.receive(2, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 9, leaseWaitMs: 1_000, ledTerm: 0 });
    changed.receive(3, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 9, leaseWaitMs: 1_000, ledTerm: 0 });
    expect(published).toEqual([[0, 6]]);
    // Then the carrier's own Pong: it stopped leading term 6, so no lease runs.
    changed.receive(0, { type: 'Pong', seq: 1, term: 6, leading: false, commitTerm: 6, lastIndex: 9 });
    changed.tick();
    expect(published).toEqual([[0, 6], [2, 7]]);
  });

  it('elects again when a carrier that answers has not settled its change within CARRIER_SETTLE_TIMEOUT_FACTOR heartbeat timeouts', () => {
    const published: [number, number][] = [];
    let now = 0;
    const reasons: (string | null)[] = [];
    const { timing, host: base } = electionStory(published, () => now);
    const host = { ...base, persistTerm: (_t: number, why: string | null) => reasons.push(why), heardFrom: (r: number) => (r === 1 ? -Infinity : now) };
    // [0, 1, 2] to [1, 2, 3] with 0 carrying (record 8 on 0 and 1 alone, 1's node down). 2 and 3 never take its records
    // (their links to 0 cut): its barrier is on no majority of [1, 2, 3], so the change never settles.
    const changed = new SliceFailover([0, 1, 2], 0, 5, timing, host).changedTo([1, 2, 3], 5, host);
    changed.tick();
    changed.receive(0, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 8, leaseWaitMs: 0, ledTerm: 0 });
    changed.receive(2, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 7, leaseWaitMs: 0, ledTerm: 0 });
    changed.receive(3, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 0, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[0, 6]]);
    const bound = CARRIER_SETTLE_TIMEOUT_FACTOR * timing.heartbeatTimeoutMs;
    // 0 answers every ping, leading term 6 with its commit point of term 5: it is not silent, and leads on until the bound.
    const answerFor = (until: number, term: number) => {
      for (; now < until; now += timing.pingIntervalMs) {
        changed.receive(0, { type: 'Pong', seq: 1, term, leading: true, commitTerm: 5, lastIndex: 9 });
        for (const r of [2, 3]) changed.receive(r, { type: 'Pong', seq: 0, term, leading: false, commitTerm: 5, lastIndex: 7 });
        changed.tick();
      }
    };
    answerFor(bound - timing.pingIntervalMs, 6);
    expect(reasons).toEqual(['change_chained']);
    expect(changed.currentLeader).toBe(0);
    answerFor(bound + timing.pingIntervalMs, 6);
    expect(reasons).toEqual(['change_chained', 'carrier_unsettled']);
    expect(changed.currentLeader).toBe(null);
    expect(changed.sets).toEqual([[1, 2, 3], [0, 1, 2]]); // still the joint sets: the change did not settle
    // An election as any: 0 promised term 7 (it stopped leading 6), so no lease of it runs; it holds the furthest
    // record still, so it carries again at 7, with an allowance of its own.
    const at = now;
    changed.receive(0, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 9, leaseWaitMs: 1_000, ledTerm: 6 });
    changed.receive(2, { type: 'Prepared', term: 7, lastTerm: 5, lastIndex: 7, leaseWaitMs: 1_000, ledTerm: 0 });
    changed.receive(3, { type: 'Prepared', term: 7, lastTerm: 5, lastIndex: 0, leaseWaitMs: 1_000, ledTerm: 0 });
    expect(published).toEqual([[0, 6], [0, 7]]);
    answerFor(at + bound - timing.pingIntervalMs, 7);
    expect(reasons).toEqual(['change_chained', 'carrier_unsettled']);
    answerFor(at + bound + timing.pingIntervalMs, 7);
    expect(reasons).toEqual(['change_chained', 'carrier_unsettled', 'carrier_unsettled']);
  });

  it('waits out the lease of a leader whose Pong said it leads nothing without a commit point of its term (sent before it led, or by a replica that never led it)', () => {
    const published: [number, number][] = [];
    let now = 0;
    const { timing, host } = electionStory(published, () => now);
    const f = new SliceFailover([0, 1, 2], null, 5, timing, host);
    f.tick();
    for (const r of [0, 1, 2]) f.receive(r, { type: 'Prepared', term: 6, lastTerm: 5, lastIndex: 10, leaseWaitMs: 0, ledTerm: 0 });
    expect(published).toEqual([[0, 6]]);
    // Not leading term 6, its commit point of term 5: nothing says it did not lead 6 after this Pong left.
    f.receive(0, { type: 'Pong', seq: 1, term: 6, leading: false, commitTerm: 5, lastIndex: 10 });
    f.tick();
    f.receive(1, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 11, leaseWaitMs: 1_000, ledTerm: 0 });
    f.receive(2, { type: 'Prepared', term: 7, lastTerm: 6, lastIndex: 11, leaseWaitMs: 1_000, ledTerm: 0 });
    expect(published).toEqual([[0, 6]]);
    now = 1_000;
    f.tick();
    expect(published).toEqual([[0, 6], [1, 7]]);
  });

  it('commits its barrier counting itself only in the sets it is in, then steps down (its commit told first, to its host and to its followers)', () => {
    // Replica 0 carries [1, 4] <- [0, 1, 4] <- [0, 1, 2]: it is not in [1, 4], whose majority is both 1 and 4.
    const g = group(5);
    g.elect(0, 7, { voters: [0, 1, 2, 4], sets: [[1, 4], [0, 1, 4], [0, 1, 2]] });
    expect(g.replicas[0].isLeader).toBe(true);
    g.sync(0);
    for (const i of [1, 2]) {
      g.deliver(i);
      g.sync(i);
    }
    g.deliver(0);
    // 0, 1 and 2 hold the barrier: a majority of [0, 1, 4] and of [0, 1, 2], not of [1, 4].
    expect(g.replicas[0].commitIndex).toBe(0);
    expect(g.replicas[0].isLeader).toBe(true);
    g.deliver(4);
    g.sync(4);
    g.deliver(0);
    expect(g.committed).toEqual([1]);
    expect(g.replicas[0].commitIndex).toBe(1);
    expect(g.replicas[0].isLeader).toBe(false);
    expect(g.deposed).toEqual([7]);
    // Its followers learned that commit point before it stopped: any of them tells the coordinator (Pong.commitTerm)
    // that the change settled, should the carrier's own Pong never come.
    for (const i of [1, 2, 4]) {
      g.deliver(i);
      g.sync(i);
      expect(g.replicas[i].commitIndex).toBe(1);
    }
    // Told to lead on for a set it is not in, a replica refuses by assertion: the coordinator leads on only a leader of
    // the new set (failover.ts changedTo).
    const h = group(3);
    h.elect(0, 1);
    expect(() => h.replicas[0].receive(COORDINATOR, { type: 'LeadOn', term: 2, from: 1, followers: [1, 2], sets: [[1, 2], [0, 1, 2]] })).toThrow(/a leader is a replica of the set it leads/);
  });
});

describe("a replica-set change's settle probes", () => {
  it('probe each replica sooner after the election, at most one Ping more per replica per change than one a ping interval, and settle by the same rule (a Pong holding the barrier)', () => {
    // [0, 1, 2], led by 0 at term 5, changed to [1, 2, 3]; the election of term 6 names one of the new set, whose
    // barrier no replica says it holds for 3 s (its Pongs say commit term 5), then one does. Virtual ms, 100 ms ticks.
    let now = 0;
    const published: [number, number][] = [];
    const timing = { pingIntervalMs: 500, heartbeatTimeoutMs: 1_500, electionTimeoutMs: 2_000 };
    const sent: { to: number; at: number; m: ReplicationMessage }[] = [];
    const host = { send: (to: number, m: ReplicationMessage) => sent.push({ to, at: now, m }), now: () => now, persistTerm: () => {}, publish: (leader: number, term: number) => published.push([leader, term]), lastLead: () => lastLeadOf(published) };
    const changed = new SliceFailover([0, 1, 2], 0, 5, timing, host).changedTo([1, 2, 3], 5, host);
    changed.tick();
    for (const r of [1, 2, 3]) changed.receive(r, preparedAt6(10));
    expect(published).toHaveLength(1);
    const [leader, term] = published[0];
    const probesTo = (r: number) => sent.filter((s) => s.to === r && s.m.type === 'Ping').map((s) => s.at);
    const followers = [1, 2, 3].filter((r) => r !== leader);
    const from = now;
    for (; now < from + 3_000; ) {
      now += 100;
      changed.tick();
      // The leader answers its liveness Pings, leading, its barrier not committed yet: no timeout, not settled.
      if (sent.some((s) => s.to === leader && s.at === now && s.m.type === 'Ping')) changed.receive(leader, { type: 'Pong', seq: 0, term, leading: true, commitTerm: 5, lastIndex: 10 });
    }
    expect(changed.electorateSettled).toBe(false);
    const spanMs = now - from;
    for (const r of followers) {
      const at = probesTo(r);
      // The first a tick after the election; the second sooner than a ping interval after it (the first gap).
      expect(at[1] - at[0], `replica ${r}'s probes at ${at.join(', ')}`).toBeLessThan(timing.pingIntervalMs);
      // Never further apart than a ping interval and a tick; no more than one more than one a ping interval.
      for (let i = 1; i < at.length; i++) expect(at[i] - at[i - 1]).toBeLessThanOrEqual(timing.pingIntervalMs + 100);
      expect(at.length, `replica ${r}'s probes at ${at.join(', ')}`).toBeLessThanOrEqual(1 + Math.floor(spanMs / timing.pingIntervalMs) + 1);
    }
    // A follower's Pong that holds the barrier settles the change (settleIfHeld), and the probes stop.
    changed.receive(followers[0], { type: 'Pong', seq: 0, term, leading: false, commitTerm: term, lastIndex: 11 });
    now += 100;
    changed.tick();
    expect(changed.electorateSettled).toBe(true);
    const before = sent.filter((s) => s.m.type === 'Ping' && s.to !== leader).length;
    for (let i = 0; i < 20; i++) {
      now += 100;
      changed.tick();
      if (sent.some((s) => s.to === leader && s.at === now && s.m.type === 'Ping')) changed.receive(leader, { type: 'Pong', seq: 0, term, leading: true, commitTerm: term, lastIndex: 11 });
    }
    expect(sent.filter((s) => s.m.type === 'Ping' && s.to !== leader).length).toBe(before);
  });
});

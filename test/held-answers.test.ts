// HeldAnswers (slice-worker/replication/held-answers.ts), the rule that decides whether a leader answers a chunk at
// once or holds it: a read is held only while what it saw is uncommitted or its leader holds no lease, a write only
// while its record is uncommitted, and a held chunk is answered in the call that brings what it waited for (a commit,
// a lease), not at a later tick. So a read on an idle leader with a lease takes the hops of an R=1 read, with no
// wait added (bench/PROFILE.md, "one request in flight at R=3").
import { describe, expect, it } from 'vitest';
import { HeldAnswers, type HeldReplica } from '../slice-worker/replication/held-answers.js';
import { REPLICA_LEASE_WAIT_MS } from '../shared/limits.js';
import { RESULT_ERROR, RESULT_OK, type SliceOpResult } from '../shared/protocol.js';

class FakeReplica implements HeldReplica {
  commitIndex = 10;
  lastIndex = 10;
  leaseValid = true;
  renewals = 0;
  renewLease(): void {
    this.renewals++;
  }
}

function setup() {
  let now = 1_000;
  const replicas = new Map<number, FakeReplica>([
    [1, new FakeReplica()],
    [2, new FakeReplica()],
  ]);
  const answered: [number, SliceOpResult[]][] = [];
  const held = new HeldAnswers((s) => replicas.get(s)!, () => now, (ticket, results) => answered.push([ticket, results]));
  return { held, replicas, answered, advance: (ms: number) => (now += ms) };
}

const ok = (v: string): SliceOpResult => [RESULT_OK, v];

describe('HeldAnswers', () => {
  it('answers a read at once when its slice has nothing uncommitted and its leader holds a lease', () => {
    const { held, replicas, answered } = setup();
    expect(held.hold([ok('a')], [[1]], [true])).toBeNull();
    expect(held.hold([ok('a'), ok('b')], [[1], [2]], [true, true])).toBeNull();
    expect(replicas.get(1)!.renewals).toBe(0); // no keep-alive round for a lease that holds
    expect(answered).toEqual([]);
    expect(held.waitsOn(1)).toBe(false);
  });

  it('holds a read that saw an uncommitted record, and answers it in the call that commits it', () => {
    const { held, replicas, answered } = setup();
    const r = replicas.get(1)!;
    r.lastIndex = 12; // a write of another chunk, proposed, not yet committed: the read saw it
    const ticket = held.hold([ok('a')], [[1]], [true]);
    expect(ticket).not.toBeNull();
    r.commitIndex = 11;
    held.committed(1, 11);
    expect(answered).toEqual([]); // 12 is not committed yet
    r.commitIndex = 12;
    held.committed(1, 12);
    expect(answered).toEqual([[ticket, [ok('a')]]]);
    expect(held.waitsOn(1)).toBe(false);
  });

  it('holds a read whose leader holds no lease, asks for one at once, and answers once leased', () => {
    const { held, replicas, answered } = setup();
    const r = replicas.get(1)!;
    r.leaseValid = false;
    const ticket = held.hold([ok('a')], [[1]], [true]);
    expect(ticket).not.toBeNull();
    expect(r.renewals).toBe(1); // a keep-alive round now, not at the next period
    held.tick();
    expect(answered).toEqual([]);
    r.leaseValid = true;
    held.leased(1);
    expect(answered).toEqual([[ticket, [ok('a')]]]);
  });

  it('answers a read that waited REPLICA_LEASE_WAIT_MS for a lease Unavailable, not applied, at the tick', () => {
    const { held, replicas, answered, advance } = setup();
    replicas.get(1)!.leaseValid = false;
    const ticket = held.hold([ok('a')], [[1]], [true]);
    advance(REPLICA_LEASE_WAIT_MS - 1);
    held.tick();
    expect(answered).toEqual([]);
    advance(1);
    held.tick();
    expect(answered.length).toBe(1);
    expect(answered[0][0]).toBe(ticket);
    expect(answered[0][1][0]).toMatchObject([RESULT_ERROR, 'Unavailable', expect.any(String), { notApplied: true }]);
  });

  it('does not hold a write for a lease: only for its record', () => {
    const { held, replicas } = setup();
    const r = replicas.get(1)!;
    r.leaseValid = false;
    expect(held.hold([ok('w')], [[1]], [false])).toBeNull(); // committed already (nothing past the commit point)
    expect(r.renewals).toBe(0);
    r.lastIndex = 11;
    expect(held.hold([ok('w')], [[1]], [false])).not.toBeNull();
    expect(r.renewals).toBe(0);
  });
});

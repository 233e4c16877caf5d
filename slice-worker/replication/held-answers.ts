// The answers a leader holds back (docs/replication.md, "On a slice node"): a chunk of ops that touched replicated
// slices is answered once each slice's commit index reaches its last index as of the chunk (what the chunk wrote or
// saw) and, for a read, the slice's leader holds its lease; or earlier, when what it waits for is given up: the
// leader was deposed or the slice left this node (unknown), REPLICA_LEASE_WAIT_MS passed for a lease (the read
// answers Unavailable, not applied), or REPLICA_COMMIT_WAIT_MS passed for a commit (a write answers Unavailable,
// outcome unknown; a read Unavailable, not applied). A worker (worker.ts) keeps one, ticked with its replicas; the
// seeded simulation (test/replication-sim.ts) keeps one per simulated node on its own clock, so that the commit
// timeouts it drives are these.
import { assert } from '../../shared/errors.js';
import { REPLICA_COMMIT_WAIT_MS, REPLICA_LEASE_WAIT_MS } from '../../shared/limits.js';
import { RESULT_ERROR, type SliceOpResult } from '../../shared/protocol.js';

/** An op's answer on a slice whose replica on this node is not its serving leader (worker.ts refuses it before it
 * runs; the simulation's leaders the same): refused, so the router may send it again (notApplied), to the leader the
 * next map names. */
export function notServing(slice: number, term: number): SliceOpResult {
  return [RESULT_ERROR, 'Unavailable', `slice ${slice} has no serving leader on this node (term ${term}); retry`, { notApplied: true }];
}

/** What a held chunk looks at of a slice's replica (replica.ts Replica). */
export interface HeldReplica {
  readonly commitIndex: number;
  readonly lastIndex: number;
  readonly leaseValid: boolean;
  renewLease(): void;
}

/** How long a commit is waited for, ms: REPLICA_COMMIT_WAIT_MS where not given; the simulation's failover is faster,
 * so its commit wait is its own (a lease is waited for REPLICA_LEASE_WAIT_MS: the simulation holds writes only, its
 * readers wait for the lease by their own loop). */
export interface HeldTiming {
  commitWaitMs: number;
}

/** A chunk whose answer waits for commits: its results, each op's replicated slices, and what it waits for. */
interface Held {
  ticket: number;
  results: SliceOpResult[];
  opSlices: (number[] | null)[];
  /** Per op, whether it only reads (a consistent read answered from the leader's store needs its lease). */
  reads: boolean[];
  waits: Map<number, number>;
  /** The slices of `waits` whose leader's lease it waits for too (its reads), until leaseBy. */
  leases: Set<number>;
  leaseBy: number;
  /** When what it still waits for is given up: commitTimeouts. */
  commitBy: number;
}

export class HeldAnswers {
  private nextTicket = 1;
  /** slice -> the held chunks that wait on it, oldest first. */
  private readonly bySlice = new Map<number, Set<Held>>();
  /** The held chunks that wait for a lease (the tick answers their reads Unavailable once leaseBy passed). */
  private readonly forLease = new Set<Held>();
  /** Every held chunk, oldest first (a Set keeps the order it was added in): each one's commitBy is later than the
   * one before's, so the tick looks only at those past theirs and the next (commitTimeouts). */
  private readonly byAge = new Set<Held>();
  private timedOutCount = 0;
  private readonly commitWaitMs: number;

  constructor(
    private readonly replicaOf: (slice: number) => HeldReplica,
    /** A monotonic clock, ms (performance.now on a node, the simulation's clock there). */
    private readonly now: () => number,
    /** A held chunk's answer, once nothing is waited for any more: called once per ticket, never inside hold(). */
    private readonly answer: (ticket: number, results: SliceOpResult[]) => void,
    timing: Partial<HeldTiming> = {},
  ) {
    this.commitWaitMs = timing.commitWaitMs ?? REPLICA_COMMIT_WAIT_MS;
  }

  /** Held chunks answered because REPLICA_COMMIT_WAIT_MS passed (the simulation counts them). */
  get timedOut(): number {
    return this.timedOutCount;
  }

  /** A chunk that touched replicated slices: null if each slice's commit index already reaches its last index (what
   * the chunk wrote or saw) and the leader of each slice it read holds its lease (answer it now), else the ticket it
   * is held under until they do. A lease valid when the read ran, or later, is enough: no other leader was named
   * before then (Replica.leaseValid), so every write acknowledged before the read arrived was this leader's, or
   * before it, and is in the store it read. */
  hold(results: SliceOpResult[], opSlices: (number[] | null)[], reads: boolean[]): number | null {
    const waits = new Map<number, number>();
    const leases = new Set<number>();
    opSlices.forEach((slices, i) => {
      if (slices === null) return;
      for (const s of slices) {
        const r = this.replicaOf(s);
        if (r.commitIndex < r.lastIndex) waits.set(s, r.lastIndex);
        if (reads[i] && !leases.has(s) && !r.leaseValid) {
          leases.add(s);
          waits.set(s, r.lastIndex);
          r.renewLease();
        }
      }
    });
    if (waits.size === 0) return null;
    const now = this.now();
    const h: Held = { ticket: this.nextTicket++, results, opSlices, reads, waits, leases, leaseBy: now + REPLICA_LEASE_WAIT_MS, commitBy: now + this.commitWaitMs };
    if (leases.size > 0) this.forLease.add(h);
    this.byAge.add(h);
    for (const s of waits.keys()) {
      if (!this.bySlice.has(s)) this.bySlice.set(s, new Set());
      this.bySlice.get(s)!.add(h);
    }
    return h.ticket;
  }

  /** Whether a held chunk still waits on `slice`. */
  waitsOn(slice: number): boolean {
    return (this.bySlice.get(slice)?.size ?? 0) > 0;
  }

  /** The leader of `slice` committed up to `index`. */
  committed(slice: number, index: number): void {
    const waiting = this.bySlice.get(slice);
    if (waiting === undefined) return;
    const r = this.replicaOf(slice);
    for (const h of waiting) {
      if (h.waits.get(slice)! > index) continue;
      if (!h.leases.has(slice) || r.leaseValid) this.release(h, slice);
      else r.renewLease(); // its lease ran out again while the commit was awaited: ask for it now
    }
  }

  /** The leader of `slice` holds its lease again: reads that waited for it, and for nothing else, are answered. */
  leased(slice: number): void {
    const waiting = this.bySlice.get(slice);
    if (waiting === undefined) return;
    const commit = this.replicaOf(slice).commitIndex;
    for (const h of [...waiting]) if (h.leases.has(slice) && h.waits.get(slice)! <= commit) this.release(h, slice);
  }

  /** The leader of `slice` was deposed in `term`, and its store put back to what is committed: what the held ops
   * wrote or read may never be. Outcome unknown, not notApplied: a write's record may still commit under the next
   * leader (a router sends it again only with its request id). */
  deposed(slice: number, term: number): void {
    this.unknown(slice, `slice ${slice} lost its leader on this node (term ${term}) before this was committed: outcome unknown`);
  }

  /** What waits on `slice` gets no commit from this replica (it was deposed, or the slice left the node): the ops on
   * it answer Unavailable, outcome unknown, with `message`. */
  unknown(slice: number, message: string): void {
    const waiting = this.bySlice.get(slice);
    if (waiting === undefined) return;
    for (const h of [...waiting]) {
      h.opSlices.forEach((slices, i) => {
        if (slices !== null && slices.includes(slice)) h.results[i] = [RESULT_ERROR, 'Unavailable', message];
      });
      this.release(h, slice);
    }
  }

  /** The leader's tick (REPLICA_TICK_MS on a node): the lease and commit waits that ran out are given up. */
  tick(): void {
    if (this.forLease.size > 0) this.leaseTimeouts();
    if (this.byAge.size > 0) this.commitTimeouts();
  }

  /** Reads that waited REPLICA_LEASE_WAIT_MS for their leader's lease answer Unavailable, not applied: the leader may
   * have been deposed without knowing it (cut off from its followers), and the router tries again, on the leader the
   * map names by then. Writes of the same chunk still wait for their commit. */
  private leaseTimeouts(): void {
    const now = this.now();
    for (const h of [...this.forLease]) {
      if (now < h.leaseBy) continue;
      for (const s of [...h.leases]) {
        h.opSlices.forEach((slices, i) => {
          if (h.reads[i] && slices !== null && slices.includes(s)) {
            h.results[i] = [RESULT_ERROR, 'Unavailable', `slice ${s}'s leader on this node holds no lease (no answer from a majority of its replicas for ${REPLICA_LEASE_WAIT_MS} ms); retry`, { notApplied: true }];
          }
        });
        h.leases.delete(s);
        if (this.replicaOf(s).commitIndex >= h.waits.get(s)!) this.release(h, s);
      }
      this.forLease.delete(h);
    }
  }

  /** Chunks held REPLICA_COMMIT_WAIT_MS are answered: what they still wait for, a majority of its slice's replicas
   * did not take in that long (its followers are down, frozen or cut off, or this leader was deposed without knowing
   * it). A write on such a slice answers Unavailable, outcome unknown, not notApplied: its record was proposed and
   * may still commit, under this leader once its followers answer or under the next one, which holds it. A router
   * sends it again with its request id (router.ts mayResend): this leader answers a copy from memory once the record
   * commits, a later one applies it once (SliceReplicas.execute). A read on it answers Unavailable, not applied, as
   * a lease's wait does (leaseTimeouts). Writes on slices whose commit already came keep their answers. */
  private commitTimeouts(): void {
    const now = this.now();
    for (const h of this.byAge) {
      if (now < h.commitBy) return; // the later ones were held later
      this.timedOutCount++;
      for (const s of [...h.waits.keys()]) {
        h.opSlices.forEach((slices, i) => {
          if (slices === null || !slices.includes(s)) return;
          h.results[i] = h.reads[i]
            ? [RESULT_ERROR, 'Unavailable', `slice ${s}'s leader on this node could not commit what this read saw within ${this.commitWaitMs} ms (no majority of its replicas answered); retry`, { notApplied: true }]
            : [RESULT_ERROR, 'Unavailable', `slice ${s}'s leader on this node did not commit this write within ${this.commitWaitMs} ms (no majority of its replicas answered: they are down or cut off, or this leader was replaced): outcome unknown, it may still commit; send it again with the same request id`];
        });
        this.release(h, s);
      }
      assert(!this.byAge.has(h), 'a held chunk whose waits were all given up is answered');
    }
  }

  private release(h: Held, slice: number): void {
    h.waits.delete(slice);
    h.leases.delete(slice);
    this.bySlice.get(slice)?.delete(h);
    if (h.leases.size === 0) this.forLease.delete(h);
    if (h.waits.size > 0) return;
    this.byAge.delete(h);
    this.answer(h.ticket, h.results);
  }
}

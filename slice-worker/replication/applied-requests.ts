// The writes a slice's replica applied that carried a request id (shared/protocol.ts, RequestId), with the
// answer each got: what lets a leader answer a write that a router sends again after an unknown outcome
// without applying it twice (docs/replication.md, "A write sent twice is applied once").
//
// Every replica keeps one per slice, built only from what it applies: the leader adds a write when it executes
// it (slice-replicas.ts), and each record carries its writes' ids and answers, so a follower adds them when it
// applies the record, a restarted replica when it applies its log again, and a snapshot (a replica-log
// checkpoint, or one sent to a follower) carries the whole table. So every replica holds the same table at the
// same applied index, and a new leader, which applied every committed record before it serves, knows every
// committed write's id. An id in a record that was never committed (a deposed leader's) was never applied:
// the leader that wrote it forgets it with the record (its store and this table are rebuilt from what is
// committed), and a copy of that write sent again is executed as new, once.
//
// Bounded per slice: an entry is forgotten, oldest first, once a newer one was applied more than
// APPLIED_REQUESTS_KEPT_MS after it (by the times the log records, so that every replica forgets the same),
// and beyond APPLIED_REQUESTS_PER_SLICE_MAX entries or APPLIED_REQUEST_BYTES_PER_SLICE_MAX bytes. A write sent
// again after its id was forgotten is applied again: the router's resends end long before (FAILOVER_RETRY_MS_MAX).
import { assert } from '../../shared/errors.js';
import {
  APPLIED_REQUEST_BYTES_PER_SLICE_MAX,
  APPLIED_REQUESTS_KEPT_MS,
  APPLIED_REQUESTS_PER_SLICE_MAX,
  FAILOVER_RETRY_MS_MAX,
  NODE_REQUEST_TIMEOUT_MS,
} from '../../shared/limits.js';
import type { RequestId } from '../../shared/protocol.js';
import { itemBytes, type Item } from '../../shared/values.js';

// A router's last resend leaves within FAILOVER_RETRY_MS_MAX of its first try, which it may have waited
// NODE_REQUEST_TIMEOUT_MS for: the first copy is remembered for longer than both.
assert(APPLIED_REQUESTS_KEPT_MS > FAILOVER_RETRY_MS_MAX + NODE_REQUEST_TIMEOUT_MS, 'a write is remembered for longer than a router resends it');

/** What a write answered its caller: Put, the old item or null; Delete, whether it deleted or the old item;
 * Update, the item returnValues asks for, or null. */
export type RequestAnswer = Item | boolean | null;
/** One applied write: its id, when its leader executed it (ms, the leader's clock), and its answer. */
export type AppliedRequest = [id: RequestId, at: number, answer: RequestAnswer];

const bytesOf = (e: AppliedRequest) => e[0].length + 8 + (e[2] !== null && typeof e[2] === 'object' ? itemBytes(e[2]) : 1);

export class AppliedRequests {
  /** In the order applied, which is log order: the first entry is the oldest. */
  private readonly byId = new Map<RequestId, AppliedRequest>();
  private bytes = 0;

  constructor(entries: AppliedRequest[] = []) {
    for (const e of entries) this.add(e);
  }

  get size(): number {
    return this.byId.size;
  }

  /** The write of this id that the slice applied, if it is still remembered. */
  find(id: RequestId): AppliedRequest | undefined {
    return this.byId.get(id);
  }

  /** Remembers an applied write, and forgets what the bounds no longer keep. */
  add(e: AppliedRequest): void {
    // A leader executes a write only if its id is not here, and a committed log holds each id once.
    assert(!this.byId.has(e[0]), `request ${e[0]} is applied once`);
    this.byId.set(e[0], e);
    this.bytes += bytesOf(e);
    for (const [id, old] of this.byId) {
      if (old === e) break; // the newest is kept, whatever its size
      if (this.byId.size <= APPLIED_REQUESTS_PER_SLICE_MAX && this.bytes <= APPLIED_REQUEST_BYTES_PER_SLICE_MAX && e[1] - old[1] <= APPLIED_REQUESTS_KEPT_MS) break;
      this.byId.delete(id);
      this.bytes -= bytesOf(old);
    }
    assert(this.byId.size <= APPLIED_REQUESTS_PER_SLICE_MAX, 'a slice remembers a bounded number of writes');
  }

  /** Every remembered write, oldest first (a snapshot's part). */
  list(): AppliedRequest[] {
    return [...this.byId.values()];
  }
}

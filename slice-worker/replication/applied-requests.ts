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
/** Applied writes as a record or a snapshot carries them, oldest first: parallel lists of their ids, the times
 * their leader executed them (ms, its clock; one number for all in a record, whose writes share their task's
 * time) and their answers; `answers` null when every answer is null (a put or an update that returns nothing:
 * most writes). Lists, not an object per write: a follower decodes one record per task and adds each of its
 * writes, and fewer objects and bytes are less work for every replica. */
export interface AppliedList {
  ids: RequestId[];
  ats: number[] | number;
  answers: RequestAnswer[] | null;
}
const atOf = (list: AppliedList, i: number) => (typeof list.ats === 'number' ? list.ats : list.ats[i]);

const bytesOf = (id: RequestId, answer: RequestAnswer) => id.length + 8 + (answer !== null && typeof answer === 'object' ? itemBytes(answer) : 1);

export class AppliedRequests {
  private readonly answers = new Map<RequestId, RequestAnswer>();
  /** The same ids in the order applied (log order), and when each was applied: ids[head] is the oldest. (Not the
   * Map's own order: finding its first entry walks past every entry deleted since it last rehashed, thousands
   * per add once a busy slice forgets one id for each it learns.) */
  private ids: RequestId[] = [];
  private ats: number[] = [];
  /** What each counts toward APPLIED_REQUEST_BYTES_PER_SLICE_MAX. */
  private sizes: number[] = [];
  private head = 0;
  private bytes = 0;

  /** `list`: what a table held (a snapshot's), taken as it is: pruning it again could forget more than the
   * table did (with a leader's clock gone back), and the replicas that applied the records instead of the
   * snapshot would then remember ids that this one does not. */
  constructor(list: AppliedList | null = null) {
    if (list === null) return;
    list.ids.forEach((id, i) => this.remember(id, atOf(list, i), list.answers?.[i] ?? null));
  }

  get size(): number {
    return this.answers.size;
  }

  /** When the newest remembered write was applied (by the time its record carries); undefined if none is. */
  get newestAt(): number | undefined {
    return this.ids.length > this.head ? this.ats[this.ats.length - 1] : undefined;
  }

  /** The answer of the write of this id that the slice applied; undefined if none is remembered. */
  find(id: RequestId): RequestAnswer | undefined {
    return this.answers.get(id);
  }

  /** Remembers an applied write, and forgets what the bounds no longer keep. */
  add(id: RequestId, at: number, answer: RequestAnswer): void {
    this.remember(id, at, answer);
    const newest = this.ids.length - 1;
    while (this.head < newest) {
      // The newest is kept, whatever its size.
      if (this.answers.size <= APPLIED_REQUESTS_PER_SLICE_MAX && this.bytes <= APPLIED_REQUEST_BYTES_PER_SLICE_MAX && at - this.ats[this.head] <= APPLIED_REQUESTS_KEPT_MS) break;
      this.answers.delete(this.ids[this.head]);
      this.bytes -= this.sizes[this.head];
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.ids.length) {
      this.ids = this.ids.slice(this.head);
      this.ats = this.ats.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
    assert(this.answers.size <= APPLIED_REQUESTS_PER_SLICE_MAX, 'a slice remembers a bounded number of writes');
  }

  /** Adds a record's writes, in order. */
  addAll(list: AppliedList): void {
    for (let i = 0; i < list.ids.length; i++) this.add(list.ids[i], atOf(list, i), list.answers?.[i] ?? null);
  }

  /** Every remembered write, oldest first (a snapshot's part). */
  list(): AppliedList {
    const ids = this.ids.slice(this.head);
    const answers = ids.map((id) => this.answers.get(id)!);
    return { ids, ats: this.ats.slice(this.head), answers: answers.every((a) => a === null) ? null : answers };
  }

  private remember(id: RequestId, at: number, answer: RequestAnswer): void {
    const before = this.answers.size;
    this.answers.set(id, answer);
    // A leader executes a write only if its id is not here, and a committed log holds each id once.
    if (this.answers.size !== before + 1) assert(false, `request ${id} is applied once`);
    const size = bytesOf(id, answer);
    this.ids.push(id);
    this.ats.push(at);
    this.sizes.push(size);
    this.bytes += size;
  }
}

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
import { itemBytes, type Item } from '../../shared/values.js';
import { ownStrings } from '../owned-strings.js';

// A router's last resend leaves within FAILOVER_RETRY_MS_MAX of its first try, which it may have waited
// NODE_REQUEST_TIMEOUT_MS for: the first copy is remembered for longer than both.
assert(APPLIED_REQUESTS_KEPT_MS > FAILOVER_RETRY_MS_MAX + NODE_REQUEST_TIMEOUT_MS, 'a write is remembered for longer than a router resends it');

/** What a write answered its caller: Put, the old item or null; Delete, whether it deleted or the old item;
 * Update, the item returnValues asks for, or null. */
export type RequestAnswer = Item | boolean | null;
/** Applied writes as a record or a snapshot carries them, oldest first, in parallel lists: a write's id is
 * [instances[of[i]], counters[i]] (shared/protocol.ts, RequestId), each router instance written once (`of` null
 * when there is one: a record holds one task's writes, most often all from one router), the times their leader
 * executed them (ms, its clock; one number for all in a record, whose writes share their task's time) and their
 * answers; `answers` null when every answer is null (a put or an update that returns nothing: most writes).
 * Lists of numbers, not an object or a string per write: a follower decodes one record per task and adds each of
 * its writes, and fewer objects and bytes are less work for every replica. */
export interface AppliedList {
  instances: number[];
  counters: number[];
  of: number[] | null;
  ats: number[] | number;
  answers: RequestAnswer[] | null;
}
const atOf = (list: AppliedList, i: number) => (typeof list.ats === 'number' ? list.ats : list.ats[i]);
/** The answer of write `i` of a decoded list (a record's, a snapshot's), its strings made its own (ownStrings, in
 * place: the list is this table's from here). An item decoded with its record's other values may hold slices of a
 * string msgpackr read a run of the record's text into (its items' values and all): remembered for up to
 * APPLIED_REQUESTS_KEPT_MS, it kept that text alive, 560 to 950 bytes an answer beyond its own on a follower's record
 * decoded whole (bench/value-retention.ts --path answers-full; about 2.6 KB an answer in test/value-retention.test.ts's
 * records). A leader's answers are its store's items, owned already (partition.ts newStored): only a decoded list's
 * are copied. */
const ownAnswerOf = (list: AppliedList, i: number): RequestAnswer => {
  const answer = list.answers?.[i] ?? null;
  return answer !== null && typeof answer === 'object' ? ownStrings(answer) : answer;
};

/** What an entry counts toward APPLIED_REQUEST_BYTES_PER_SLICE_MAX: its id and time (8 bytes each number), its answer. */
const bytesOf = (answer: RequestAnswer) => 24 + (answer !== null && typeof answer === 'object' ? itemBytes(answer) : 1);

export class AppliedRequests {
  /** Per router instance, the answers of its writes by counter: numbers as keys, hashed without reading a string. */
  private readonly byInstance = new Map<number, Map<number, RequestAnswer>>();
  /** The last instance looked up and its map (a task's writes mostly come from one router): one lookup, not two. */
  private lastInstance = -1;
  private lastAnswers: Map<number, RequestAnswer> | undefined = undefined;
  /** The same writes in the order applied (log order), in parallel lists: instances[head], counters[head] is the
   * oldest. (Not the Maps' own order: a write's place across instances, and finding a Map's first entry walks past
   * every entry deleted since it last rehashed.) */
  private instances: number[] = [];
  private counters: number[] = [];
  private ats: number[] = [];
  /** Their answers too (what find() answers from the Maps): a snapshot's list() reads them without a lookup each. */
  private answerList: RequestAnswer[] = [];
  /** What each counts toward APPLIED_REQUEST_BYTES_PER_SLICE_MAX. */
  private sizes: number[] = [];
  private head = 0;
  private bytes = 0;

  /** `list`: what a table held (a snapshot's), taken as it is: pruning it again could forget more than the
   * table did (with a leader's clock gone back), and the replicas that applied the records instead of the
   * snapshot would then remember ids that this one does not. */
  constructor(list: AppliedList | null = null) {
    if (list === null) return;
    for (let i = 0; i < list.counters.length; i++) this.remember(list.instances[list.of === null ? 0 : list.of[i]], list.counters[i], atOf(list, i), ownAnswerOf(list, i));
  }

  /** The writes remembered: those from head on (forget runs only on the head, which then moves past it). */
  get size(): number {
    return this.counters.length - this.head;
  }

  /** When the newest remembered write was applied (by the time its record carries); undefined if none is. */
  get newestAt(): number | undefined {
    return this.counters.length > this.head ? this.ats[this.ats.length - 1] : undefined;
  }

  /** The answer of the write of this id that the slice applied; undefined if none is remembered. */
  find(instance: number, counter: number): RequestAnswer | undefined {
    return this.answersOf(instance)?.get(counter);
  }

  /** Whether a write of this instance is remembered (a client's idempotency id has one counter per instance). */
  knows(instance: number): boolean {
    return this.answersOf(instance) !== undefined;
  }

  /** Remembers an applied write, and forgets what the bounds no longer keep. */
  add(instance: number, counter: number, at: number, answer: RequestAnswer): void {
    this.remember(instance, counter, at, answer);
    const newest = this.counters.length - 1;
    while (this.head < newest) {
      // The newest is kept, whatever its size.
      if (this.size <= APPLIED_REQUESTS_PER_SLICE_MAX && this.bytes <= APPLIED_REQUEST_BYTES_PER_SLICE_MAX && at - this.ats[this.head] <= APPLIED_REQUESTS_KEPT_MS) break;
      this.forget(this.head);
      this.head++;
    }
    // Amortized: the lists are cut once the forgotten half of them is over 1,024 entries.
    if (this.head > 1024 && this.head * 2 > this.counters.length) {
      this.instances = this.instances.slice(this.head);
      this.counters = this.counters.slice(this.head);
      this.ats = this.ats.slice(this.head);
      this.answerList = this.answerList.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
    assert(this.size <= APPLIED_REQUESTS_PER_SLICE_MAX, 'a slice remembers a bounded number of writes');
  }

  /** Adds a committed record's writes, in order; answers how many of them it remembered already, which keep their
   * first answer. Applied in log order, a record names an id remembered here only if its leader had forgotten it
   * (these bounds) when it executed a copy sent again, and this replica has not (a record that names one twice, the
   * same in one task): not refused on arrival (SliceReplicas.checkRecords), the replica goes on, as with any record
   * a leader committed. */
  addAll(list: AppliedList): number {
    let known = 0;
    for (let i = 0; i < list.counters.length; i++) {
      const instance = list.instances[list.of === null ? 0 : list.of[i]];
      if (this.find(instance, list.counters[i]) !== undefined) known++;
      else this.add(instance, list.counters[i], atOf(list, i), ownAnswerOf(list, i));
    }
    return known;
  }

  /** Every remembered write, oldest first (a snapshot's part). */
  list(): AppliedList {
    const instances: number[] = [];
    const index = new Map<number, number>();
    const of: number[] = [];
    let last = -1;
    let at = 0;
    for (let i = this.head; i < this.counters.length; i++) {
      const instance = this.instances[i];
      // Runs of one router's writes (a record's) look its instance up once.
      if (instance !== last) {
        last = instance;
        let known = index.get(instance);
        if (known === undefined) {
          index.set(instance, (known = instances.length));
          instances.push(instance);
        }
        at = known;
      }
      of.push(at);
    }
    const answers = this.answerList.slice(this.head);
    return {
      instances,
      counters: this.counters.slice(this.head),
      of: instances.length > 1 ? of : null,
      ats: this.ats.slice(this.head),
      answers: answers.every((a) => a === null) ? null : answers,
    };
  }

  private answersOf(instance: number): Map<number, RequestAnswer> | undefined {
    if (instance !== this.lastInstance) {
      this.lastInstance = instance;
      this.lastAnswers = this.byInstance.get(instance);
    }
    return this.lastAnswers;
  }

  private remember(instance: number, counter: number, at: number, answer: RequestAnswer): void {
    let answers = this.answersOf(instance);
    if (answers === undefined) {
      this.byInstance.set(instance, (answers = new Map()));
      this.lastAnswers = answers;
    }
    const before = answers.size;
    answers.set(counter, answer);
    // A leader executes a write only if its id is not here, and a committed log holds each id once.
    if (answers.size !== before + 1) assert(false, `request [${instance}, ${counter}] is applied once`);
    const size = bytesOf(answer);
    this.instances.push(instance);
    this.counters.push(counter);
    this.ats.push(at);
    this.answerList.push(answer);
    this.sizes.push(size);
    this.bytes += size;
  }

  private forget(i: number): void {
    const instance = this.instances[i];
    const answers = this.answersOf(instance)!;
    answers.delete(this.counters[i]);
    // A router that stopped writing (or restarted: a new instance) leaves no empty map behind.
    if (answers.size === 0) {
      this.byInstance.delete(instance);
      this.lastInstance = -1;
      this.lastAnswers = undefined;
    }
    this.answerList[i] = null; // its item, if any, is not kept until the lists are cut
    this.bytes -= this.sizes[i];
  }
}

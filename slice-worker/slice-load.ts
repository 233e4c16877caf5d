// Load per partition (one table in one slice): reads and writes per second
// over a sliding window of one-second buckets, an optional capacity per
// partition answered with the retryable ThroughputExceeded, and the hottest
// sharding keys per table (a Space-Saving sketch over the last two windows).
// Point and range operations count, one each; full-table scans do not.
//
// Besides the window, cumulative counters that only grow (for Prometheus
// counters, docs/metrics.md): per partition, and per table over every slice
// this worker ever served (a slice moved away keeps adding to its table's
// total, so the node's total does not go back). Reading them changes nothing,
// so any number of viewers can read them.
import { assert, KeysliceError } from '../shared/errors.js';
import { firstPartLength } from '../shared/key-encoding.js';
import type { SliceCounts } from '../shared/protocol.js';
import { HOT_KEYS_REPORTED, HOT_KEYS_TRACKED, LOAD_WINDOW_SECONDS, type SliceCapacity } from '../shared/limits.js';

type Counts = SliceCounts;
export const COUNT = { reads: 0, writes: 1, readBytes: 2, writeBytes: 3, throttled: 4, duplicateWrites: 5 } as const;

const zeroCounts = (): Counts => [0, 0, 0, 0, 0, 0];

/** Adds `n` to counter `which` of a partition's totals and of its table's; a counter only grows and stays exact.
 * Two lists named, not a list of them: this runs once or twice for every op, and the list was an allocation each. */
function grow(partition: Counts, table: Counts, which: number, n: number): void {
  // (The message is built only when the check fails.)
  if (!(Number.isSafeInteger(n) && n >= 0)) assert(false, `a counter grows by a whole, non-negative amount (got ${n})`);
  const p = partition[which] + n;
  const t = table[which] + n;
  assert(Number.isSafeInteger(p) && p >= partition[which] && Number.isSafeInteger(t) && t >= table[which], 'a cumulative counter only grows and stays exact');
  partition[which] = p;
  table[which] = t;
}

/** One partition's counters, with its table's totals and hot keys (one lookup per op for all three). */
class Counters {
  readonly totals = zeroCounts();
  readonly reads = new Uint32Array(LOAD_WINDOW_SECONDS);
  readonly writes = new Uint32Array(LOAD_WINDOW_SECONDS);
  second = 0;

  constructor(
    readonly table: Counts,
    readonly hot: HotKeys,
  ) {}

  /** Moves the window to `second`, clearing the buckets it passed. */
  advance(second: number): void {
    const gap = second - this.second;
    if (gap <= 0) return;
    if (gap >= LOAD_WINDOW_SECONDS) {
      this.reads.fill(0);
      this.writes.fill(0);
    } else {
      for (let s = this.second + 1; s <= second; s++) {
        this.reads[s % LOAD_WINDOW_SECONDS] = 0;
        this.writes[s % LOAD_WINDOW_SECONDS] = 0;
      }
    }
    this.second = second;
  }
}

/** One key a window tracks: `n` ops counted, of which up to `over` may belong
 * to the keys it replaced; `seq` orders keys by when they entered the window's
 * map and `at` is the key's place in the heap. */
interface Tracked {
  key: string;
  n: number;
  over: number;
  seq: number;
  at: number;
}

/** Space-Saving top-k over the current window and the one before: at most
 * HOT_KEYS_TRACKED keys a window; a new key replaces the least counted one and
 * inherits its count as possible overcount. Reported counts subtract that, so
 * they are lower bounds: a key reported hot is hot.
 *
 * The tracked keys are also a binary min-heap on (n, seq), so the key to
 * replace is the root (O(log k) an op) rather than a scan of all k for every
 * key not tracked, which under writes of distinct keys is every op. Among keys
 * of equal count the root is the one that entered the map first: the one a
 * scan in the map's (insertion) order would find, so the choice is the same. */
export class HotKeys {
  private counts = new Map<string, Tracked>();
  private heap: Tracked[] = [];
  private entered = 0;
  private windowStart = 0;
  private previous = new Map<string, number>();

  add(key: string, second: number): void {
    this.rotate(second);
    const c = this.counts.get(key);
    if (c !== undefined) {
      c.n++;
      this.sink(c);
    } else if (this.heap.length < HOT_KEYS_TRACKED) {
      const e: Tracked = { key, n: 1, over: 0, seq: this.entered++, at: this.heap.length };
      this.heap.push(e);
      this.counts.set(key, e);
      this.rise(e);
    } else {
      // The least counted key leaves; its entry, reused, becomes the new key's.
      const e = this.heap[0];
      this.counts.delete(e.key);
      e.key = key;
      e.over = e.n;
      e.n++;
      e.seq = this.entered++;
      this.counts.set(key, e);
      this.sink(e);
    }
    assert(this.counts.size === this.heap.length, 'each tracked key is in the heap once');
  }

  /** What this window tracks, in the map's order: [key, count, possible overcount]. */
  tracked(): [key: string, n: number, over: number][] {
    return [...this.counts.values()].map((e) => [e.key, e.n, e.over]);
  }

  /** The hottest keys with their ops per second, averaged over at least one window. */
  top(second: number): [key: string, opsPerSecond: number][] {
    this.rotate(second);
    const seconds = Math.max(LOAD_WINDOW_SECONDS, second - this.windowStart + 1 + (this.previous.size > 0 ? LOAD_WINDOW_SECONDS : 0));
    const merged = new Map(this.previous);
    for (const [k, e] of this.counts) merged.set(k, (merged.get(k) ?? 0) + e.n - e.over);
    return [...merged]
      .sort((a, b) => b[1] - a[1])
      .slice(0, HOT_KEYS_REPORTED)
      .map(([k, n]) => [k, n / seconds]);
  }

  private rotate(second: number): void {
    const age = second - this.windowStart;
    if (age < LOAD_WINDOW_SECONDS) return;
    this.previous = new Map();
    if (age < 2 * LOAD_WINDOW_SECONDS) for (const [k, e] of this.counts) this.previous.set(k, e.n - e.over);
    this.counts = new Map();
    this.heap = [];
    this.entered = 0;
    this.windowStart = second;
  }

  private static less(a: Tracked, b: Tracked): boolean {
    return a.n < b.n || (a.n === b.n && a.seq < b.seq);
  }

  private rise(e: Tracked): void {
    const h = this.heap;
    let i = e.at;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!HotKeys.less(e, h[p])) break;
      h[i] = h[p];
      h[i].at = i;
      i = p;
    }
    h[i] = e;
    e.at = i;
  }

  /** Moves `e` down after its key grew (its count, or its seq when reused). */
  private sink(e: Tracked): void {
    const h = this.heap;
    const size = h.length;
    let i = e.at;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= size) break;
      if (child + 1 < size && HotKeys.less(h[child + 1], h[child])) child++;
      if (!HotKeys.less(h[child], e)) break;
      h[i] = h[child];
      h[i].at = i;
      i = child;
    }
    h[i] = e;
    e.at = i;
  }
}

export class LoadTracker {
  private readonly partitions = new Map<number, Counters>();
  private readonly hot = new Map<number, HotKeys>();
  /** Per table: the sum of its partitions' counters on this worker, moved-away slices included. */
  private readonly tables = new Map<number, Counts>();

  constructor(
    private readonly now: () => number,
    private readonly capacity: SliceCapacity,
  ) {}

  /** Counts one op on (table, slice) for `key`, or refuses it if the partition is at capacity this second; `bytes`:
   * what it reads or writes, where known before it runs (a put's item), counted as countBytes would. */
  count(table: number, slice: number, key: string, write: boolean, bytes = 0): void {
    const second = Math.floor(this.now() / 1000);
    const c = this.partitionCounters(table, slice);
    c.advance(second);
    const bucket = second % LOAD_WINDOW_SECONDS;
    const limit = write ? this.capacity.writesPerSecond : this.capacity.readsPerSecond;
    const counts = write ? c.writes : c.reads;
    if (limit > 0 && counts[bucket] >= limit) {
      grow(c.totals, c.table, COUNT.throttled, 1);
      throw new KeysliceError(
        'ThroughputExceeded',
        `slice ${slice} is at its capacity of ${limit} ${write ? 'writes' : 'reads'} per second; retry with backoff, or spread the key design`,
      );
    }
    counts[bucket]++;
    grow(c.totals, c.table, write ? COUNT.writes : COUNT.reads, 1);
    if (bytes !== 0) grow(c.totals, c.table, write ? COUNT.writeBytes : COUNT.readBytes, bytes);
    c.hot.add(key.slice(0, firstPartLength(key)), second);
  }

  /** Counts a write whose request id the slice applied already: answered from memory, it is not admitted as a
   * write (it applies nothing, and a resend of a write that took capacity does not take it again). */
  countDuplicateWrite(table: number, slice: number): void {
    const c = this.partitionCounters(table, slice);
    grow(c.totals, c.table, COUNT.duplicateWrites, 1);
  }

  private partitionCounters(table: number, slice: number): Counters {
    const id = table * 65536 + slice;
    let c = this.partitions.get(id);
    if (c === undefined) {
      let h = this.hot.get(table);
      if (h === undefined) this.hot.set(table, (h = new HotKeys()));
      this.partitions.set(id, (c = new Counters(this.tableTotals(table), h)));
    }
    return c;
  }

  /** Adds the bytes an op counted by count() read or wrote (the stored size of the items). */
  countBytes(table: number, slice: number, bytes: number, write: boolean): void {
    if (bytes === 0) return;
    const c = this.partitions.get(table * 65536 + slice);
    assert(c !== undefined, 'bytes are counted for an op that count() admitted');
    grow(c.totals, c.table, write ? COUNT.writeBytes : COUNT.readBytes, bytes);
  }

  /** The cumulative counters of a table's partition in `slice` on this worker (zeros if it saw no op). */
  counters(table: number, slice: number): Readonly<Counts> {
    return this.partitions.get(table * 65536 + slice)?.totals ?? zeroCounts();
  }

  /** The cumulative counters of a table over every slice this worker served. */
  tableCounters(table: number): Readonly<Counts> {
    return this.tables.get(table) ?? zeroCounts();
  }

  private tableTotals(table: number): Counts {
    let t = this.tables.get(table);
    if (t === undefined) this.tables.set(table, (t = zeroCounts()));
    return t;
  }

  /** Reads and writes per second of a table's partition in `slice` over the window. */
  rates(table: number, slice: number): [readsPerSecond: number, writesPerSecond: number] {
    const c = this.partitions.get(table * 65536 + slice);
    if (c === undefined) return [0, 0];
    c.advance(Math.floor(this.now() / 1000));
    let r = 0;
    let w = 0;
    for (let i = 0; i < LOAD_WINDOW_SECONDS; i++) {
      r += c.reads[i];
      w += c.writes[i];
    }
    return [r / LOAD_WINDOW_SECONDS, w / LOAD_WINDOW_SECONDS];
  }

  /** Slices of a table that saw load in the window. */
  slicesWithLoad(table: number): number[] {
    const out: number[] = [];
    for (const id of this.partitions.keys()) if (Math.floor(id / 65536) === table) out.push(id % 65536);
    return out;
  }

  hotKeys(table: number): [encodedShardingPart: string, opsPerSecond: number][] {
    return this.hot.get(table)?.top(Math.floor(this.now() / 1000)) ?? [];
  }

  dropTable(table: number): void {
    for (const id of [...this.partitions.keys()]) if (Math.floor(id / 65536) === table) this.partitions.delete(id);
    this.hot.delete(table);
    this.tables.delete(table);
  }
}

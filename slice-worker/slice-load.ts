// Load per partition (one table in one slice): reads and writes per second
// over a sliding window of one-second buckets, an optional capacity per
// partition answered with the retryable ThroughputExceeded, and the hottest
// sharding keys per table (a Space-Saving sketch over the last two windows).
// Point and range operations count, one each; full-table scans do not.
import { KeysliceError } from '../shared/errors.js';
import { firstPartLength } from '../shared/key-encoding.js';
import { HOT_KEYS_REPORTED, HOT_KEYS_TRACKED, LOAD_WINDOW_SECONDS, type SliceCapacity } from '../shared/limits.js';

class Counters {
  readonly reads = new Uint32Array(LOAD_WINDOW_SECONDS);
  readonly writes = new Uint32Array(LOAD_WINDOW_SECONDS);
  second = 0;

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

/** Space-Saving top-k over the current window and the one before: at most
 * HOT_KEYS_TRACKED keys a window; a new key replaces the least counted one and
 * inherits its count as possible overcount. Reported counts subtract that, so
 * they are lower bounds: a key reported hot is hot. */
class HotKeys {
  private counts = new Map<string, { n: number; over: number }>();
  private previous = new Map<string, number>();
  private windowStart = 0;

  add(key: string, second: number): void {
    this.rotate(second);
    const c = this.counts.get(key);
    if (c !== undefined) c.n++;
    else if (this.counts.size < HOT_KEYS_TRACKED) this.counts.set(key, { n: 1, over: 0 });
    else {
      let minKey = '';
      let min = Infinity;
      for (const [k, e] of this.counts) if (e.n < min) [minKey, min] = [k, e.n];
      this.counts.delete(minKey);
      this.counts.set(key, { n: min + 1, over: min });
    }
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
    this.windowStart = second;
  }
}

export class LoadTracker {
  private readonly partitions = new Map<number, Counters>();
  private readonly hot = new Map<number, HotKeys>();

  constructor(
    private readonly now: () => number,
    private readonly capacity: SliceCapacity,
  ) {}

  /** Counts one op on (table, slice) for `key`, or refuses it if the partition is at capacity this second. */
  count(table: number, slice: number, key: string, write: boolean): void {
    const second = Math.floor(this.now() / 1000);
    const id = table * 65536 + slice;
    let c = this.partitions.get(id);
    if (c === undefined) this.partitions.set(id, (c = new Counters()));
    c.advance(second);
    const bucket = second % LOAD_WINDOW_SECONDS;
    const limit = write ? this.capacity.writesPerSecond : this.capacity.readsPerSecond;
    const counts = write ? c.writes : c.reads;
    if (limit > 0 && counts[bucket] >= limit) {
      throw new KeysliceError(
        'ThroughputExceeded',
        `slice ${slice} is at its capacity of ${limit} ${write ? 'writes' : 'reads'} per second; retry with backoff, or spread the key design`,
      );
    }
    counts[bucket]++;
    let h = this.hot.get(table);
    if (h === undefined) this.hot.set(table, (h = new HotKeys()));
    h.add(key.slice(0, firstPartLength(key)), second);
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
  }
}

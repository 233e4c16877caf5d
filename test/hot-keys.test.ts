// The hot keys of a table (slice-worker/slice-load.ts HotKeys): the Space-Saving
// sketch keeps its tracked keys in a min-heap so that a key it has not seen costs
// O(log k), not a scan of all k. Checked against the scan it replaced, kept here
// as the oracle, on seeded random streams across window rotations: the same keys
// tracked with the same counts after every op, the same top(); and what top()
// reports is a lower bound of the key's true count.
import { describe, expect, it } from 'vitest';
import { HotKeys } from '../slice-worker/slice-load.js';
import { HOT_KEYS_REPORTED, HOT_KEYS_TRACKED, LOAD_WINDOW_SECONDS } from '../shared/limits.js';
import { prng } from '../bench/keys.js';

/** The sketch as it was before the heap: a scan for the least counted key. */
class ScanHotKeys {
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

  tracked(): [string, number, number][] {
    return [...this.counts].map(([k, e]) => [k, e.n, e.over]);
  }

  top(second: number): [string, number][] {
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

/** The true count of every key in the current and the previous window, rotated as the sketch rotates. */
class TrueCounts {
  current = new Map<string, number>();
  previous = new Map<string, number>();
  ops = 0;
  windowStart = 0;

  add(key: string, second: number): void {
    this.rotate(second);
    this.current.set(key, (this.current.get(key) ?? 0) + 1);
    this.ops++;
  }

  rotate(second: number): void {
    const age = second - this.windowStart;
    if (age < LOAD_WINDOW_SECONDS) return;
    this.previous = age < 2 * LOAD_WINDOW_SECONDS ? this.current : new Map();
    this.current = new Map();
    this.ops = 0;
    this.windowStart = second;
  }
}

type Shape = (rand: () => number, i: number) => string;
const shapes: [string, Shape][] = [
  ['all distinct', (_r, i) => `new-${i}`],
  ['uniform over 40 keys (many ties)', (r) => `k${Math.floor(r() * 40)}`],
  ['uniform over 200 keys', (r) => `k${Math.floor(r() * 200)}`],
  ['skewed over 5000 keys', (r) => `k${Math.floor(r() ** 4 * 5000)}`],
  ['two hot keys in distinct noise', (r, i) => (r() < 0.3 ? (r() < 0.5 ? 'hot-a' : 'hot-b') : `noise-${i}`)],
];

describe('hot keys', () => {
  it.each(shapes)('%s: the heap tracks what the scan tracked, and top() is the same', (_name, shape) => {
    for (let seed = 1; seed <= 4; seed++) {
      const rand = prng(seed * 7919);
      const sketch = new HotKeys();
      const oracle = new ScanHotKeys();
      const truth = new TrueCounts();
      let second = 1_000;
      for (let i = 0; i < 4000; i++) {
        // Mostly the same second, now and then a step, a window or two windows ahead (rotations, gaps).
        const step = rand();
        if (step < 0.01) second += 1 + Math.floor(rand() * 3 * LOAD_WINDOW_SECONDS);
        else if (step < 0.05) second++;
        const key = shape(rand, i);
        sketch.add(key, second);
        oracle.add(key, second);
        truth.add(key, second);
        // A string compare each op keeps the check cheap; toEqual shows the difference when there is one.
        const got = sketch.tracked();
        const want = oracle.tracked();
        if (got.join(';') !== want.join(';')) expect({ op: i, seed, tracked: got }).toEqual({ op: i, seed, tracked: want });
        if (i % 97 === 0 || i === 3999) {
          const at = second + (rand() < 0.2 ? Math.floor(rand() * 2 * LOAD_WINDOW_SECONDS) : 0);
          const top = sketch.top(at);
          expect(top).toEqual(oracle.top(at));
          truth.rotate(at);
          checkLowerBounds(sketch, top, truth, at);
        }
      }
    }
  });

  it('finds every key of more than N/k ops among distinct keys, with a lower bound of its count', () => {
    const rand = prng(42);
    const sketch = new HotKeys();
    const truth = new TrueCounts();
    for (let i = 0; i < 20_000; i++) {
      const key = rand() < 0.05 ? 'hot' : `d${i}`;
      sketch.add(key, 5);
      truth.add(key, 5);
    }
    const tracked = new Map(sketch.tracked().map(([k, n, over]) => [k, n - over]));
    // The stream must hold a key past N/k, else the check below has nothing to check.
    const heavy = [...truth.current].filter(([, n]) => n > truth.ops / HOT_KEYS_TRACKED).map(([k]) => k);
    expect(heavy).toEqual(['hot']);
    for (const k of heavy) expect(tracked.has(k), k).toBe(true);
    const top = sketch.top(5);
    expect(top[0][0]).toBe('hot');
    checkLowerBounds(sketch, top, truth, 5);
  });
});

/** Every count top() reports is at most the key's true count over the two windows: a key reported hot is hot. */
function checkLowerBounds(sketch: HotKeys, top: [string, number][], truth: TrueCounts, second: number): void {
  const seconds = Math.max(LOAD_WINDOW_SECONDS, second - truth.windowStart + 1 + (truth.previous.size > 0 ? LOAD_WINDOW_SECONDS : 0));
  expect(top.length).toBeLessThanOrEqual(HOT_KEYS_REPORTED);
  for (const [k, rate] of top) {
    const reported = Math.round(rate * seconds);
    const actual = (truth.previous.get(k) ?? 0) + (truth.current.get(k) ?? 0);
    expect(reported, k).toBeLessThanOrEqual(actual);
    expect(reported, k).toBeGreaterThan(0);
  }
  expect(sketch.tracked().length).toBeLessThanOrEqual(HOT_KEYS_TRACKED);
}

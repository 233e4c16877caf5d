// What counting one op costs a slice worker's LoadTracker (per-slice rates and the
// table's hot keys, slice-worker/slice-load.ts), side by side for several builds:
// each build's dist/ is loaded in this process and the builds take turns, round
// after round, so that the machine's other load falls on all alike. Two streams:
// every op a key not seen before (a write load of distinct keys: every op misses the
// hot-key sketch), and 90% of ops on 100 keys (mostly hits). Prints, per build and
// stream, the median over rounds of ns per op, and each build's ratio to the first.
//
//   npm run build && node dist/bench/hot-keys.js --builds /path/to/old/dist,dist [--rounds 5] [--ops 300000]
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { encodeShardingPart } from '../shared/key-encoding.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    builds: { default: 'dist', help: 'comma list of dist/ folders to compare; the first is the baseline' },
    rounds: { default: '5', help: 'rounds; each runs every build on every stream once' },
    ops: { default: '300000', help: 'ops per build, stream and round' },
  },
  'usage: node dist/bench/hot-keys.js [--builds OLD/dist,NEW/dist] [--rounds 5] [--ops 300000]',
).values;
const ROUNDS = intArg('rounds', args.rounds, 1, 50);
const OPS = intArg('ops', args.ops, 1000, 10_000_000);
const builds = (args.builds ?? 'dist').split(',').map((d) => resolve(d));

interface Tracker {
  count(table: number, slice: number, key: string, write: boolean): void;
}
type TrackerClass = new (now: () => number, capacity: { readsPerSecond: number; writesPerSecond: number }) => Tracker;

const trackers: TrackerClass[] = [];
for (const b of builds) trackers.push(((await import(pathToFileURL(`${b}/slice-worker/slice-load.js`).href)) as { LoadTracker: TrackerClass }).LoadTracker);

// Keys are built before timing; only count() is timed.
const distinct = Array.from({ length: OPS }, (_, i) => encodeShardingPart(['string'], [`dev-${i}`]));
let seed = 12345;
const rand = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
const hot = Array.from({ length: OPS }, (_, i) => (rand() < 0.9 ? distinct[Math.floor(rand() * 100)] : distinct[i]));
const streams: [string, string[]][] = [
  ['distinct keys', distinct],
  ['90% on 100 keys', hot],
];

/** ns per op of one pass of `keys` through a fresh tracker (one table, 16 slices, one second: no window turns). */
function pass(Tracker: TrackerClass, keys: string[]): number {
  const t = new Tracker(() => 1_700_000_000_000, { readsPerSecond: 0, writesPerSecond: 0 });
  const start = process.hrtime.bigint();
  for (let i = 0; i < keys.length; i++) t.count(1, i & 15, keys[i], true);
  return Number(process.hrtime.bigint() - start) / keys.length;
}

const times = builds.map(() => streams.map((): number[] => []));
for (const T of trackers) for (const [, keys] of streams) pass(T, keys.slice(0, 20_000)); // warm up
const load = [loadavg()[0]];
for (let r = 0; r < ROUNDS; r++) {
  // Alternate which build goes first.
  const order = r % 2 === 0 ? builds.map((_, i) => i) : builds.map((_, i) => builds.length - 1 - i);
  for (const [s, [, keys]] of streams.entries()) for (const b of order) times[b][s].push(pass(trackers[b], keys));
}
load.push(loadavg()[0]);

console.log(`count() ns per op, median of ${ROUNDS} rounds of ${OPS} ops; load average ${load.map((l) => l.toFixed(1)).join(' -> ')}`);
for (const [s, [name]] of streams.entries()) {
  const base = median(times[0][s]);
  for (const [b, dir] of builds.entries()) {
    const m = median(times[b][s]);
    console.log(`  ${name.padEnd(16)} ${dir.padEnd(40)} ${m.toFixed(0).padStart(6)} ns  ${(m / base).toFixed(2)}x  [${times[b][s].map((t) => t.toFixed(0)).join(' ')}]`);
  }
}

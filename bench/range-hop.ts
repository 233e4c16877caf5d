// The cost of a range of 100 items at each hop, in one process, with the real code:
// the worker's range and the packing of its results, the router's decode of them and
// its client frame (the client's decode is the same: the frame's bytes are). Items packed for the client by the worker
// (RangeSpec.packed, passed through) against objects (decoded and encoded again).
// Deterministic where hops.ts is not (it needs the whole cluster on a shared machine):
//   node dist/bench/range-hop.js [--items 100] [--rounds 9]
import {
  decodeSliceResults,
  encodeClientFrame,
  encodeOwnedResults,
  encodeSliceResults,
  PackedItems,
  RESULT_OK,
  SliceOp,
  sliceSetOf,
  splitPackedList,
  type RangeResult,
  type RangeSpec,
  type ScanResult,
} from '../shared/protocol.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { PAGE_ITEMS_MAX } from '../shared/limits.js';
import { itemBytes, NAME_ATTRIBUTE, type Item } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';
import { freshStore } from './fresh-store.js';
import { median } from './median.js';
import { scanPage } from '../coordinator/router/operations.js';

const opts = readCommandLine(process.argv.slice(2), { items: { type: 'string', default: '100' }, rounds: { type: 'string', default: '9' } }, 'usage: node dist/bench/range-hop.js [--items 100] [--rounds 9]').values;
// Whole numbers within bounds, refused in a sentence otherwise: Number() of a bad one made NaN rounds, no row, and a
// TypeError's stack trace.
const ITEMS = intArg('items', opts.items, 1, PAGE_ITEMS_MAX);
const ROUNDS = intArg('rounds', opts.rounds, 1, 100);
const RUN_MS = 200;

// The shape of hops.ts's items: a device, a sequence number, 160 bytes of payload.
const store = new SliceStore(0, 1, () => 1_764_000_000_000);
store.execute([SliceOp.Assign, 1, [0]]);
for (let i = 0; i < ITEMS; i++) {
  const item: Item = { [NAME_ATTRIBUTE]: `d1_${i}`, device: 'd1', seq: i, payload: 'x'.repeat(160) };
  store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(6, '0')}`, item, itemBytes(item), null, null]);
}
const spec = (packed: boolean, withKeys: boolean): RangeSpec => ({ low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit: ITEMS, projection: null, filter: null, withKeys, packed });

/** CPU microseconds (this process's user + system: on a shared machine, time spent waiting
 * for a core is not counted) per call of each of `fs`, the median of ROUNDS runs of RUN_MS
 * each, the functions taking turns run by run so that a busy spell hits both alike. */
function cpuTimes(fs: (() => unknown)[]): number[] {
  const runs: number[][] = fs.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    fs.forEach((f, k) => {
      let n = 0;
      const start = process.cpuUsage();
      const until = performance.now() + RUN_MS;
      while (performance.now() < until) {
        for (let i = 0; i < 20; i++) f();
        n += 20;
      }
      const used = process.cpuUsage(start);
      runs[k].push((used.user + used.system) / n);
    });
  }
  return runs.map(median);
}

const rows: [string, number, number][] = [];
for (const withKeys of [false, true]) {
  const ops = [false, true].map((packed) => [SliceOp.Range, 1, 0, spec(packed, withKeys)] as const);
  const results = ops.map((op) => encodeSliceResults([store.execute([...op])]));
  // The worker's answer as it writes it (encodeOwnedResults: the bytes of encodeSliceResults, in a buffer of their own).
  const worker = cpuTimes(ops.map((op) => () => encodeOwnedResults([store.execute([...op])])));
  const router = cpuTimes(
    results.map((bytes) => () => {
      const [[, result]] = decodeSliceResults(bytes) as [[typeof RESULT_OK, RangeResult]];
      const items = result[0];
      // With keys (a bucket of an even-distribution table), the merge takes the items one by one.
      const answer = items instanceof Uint8Array ? (withKeys ? PackedItems.ofItems(splitPackedList(items)) : PackedItems.ofList(items)) : items;
      return encodeClientFrame([1, RESULT_OK, { items: answer, examined: ITEMS }]);
    }),
  );
  const figures = [0, 1].map((k) => ({ worker: worker[k], router: router[k], bytes: results[k].byteLength }));
  const label = withKeys ? ' (with keys, split for a merge)' : '';
  rows.push([`worker: range + results packed${label}`, figures[0].worker, figures[1].worker]);
  rows.push([`router: results decoded + client frame${label}`, figures[0].router, figures[1].router]);
  rows.push([`node -> router results, bytes${label}`, figures[0].bytes, figures[1].bytes]);
}

// The worker's first packed read of a range, when it has kept no item's bytes yet (range-hop's other rows read
// the same range over and over: the kept bytes), against a second read and the objects: fresh stores of
// FRESH_RANGES ranges each, every range read once in each form, the forms taking turns round by round.
{
  const FRESH_RANGES = 200;
  const runs: number[][] = [[], [], []];
  for (let r = 0; r < ROUNDS; r++) {
    const s = freshStore(FRESH_RANGES, ITEMS);
    const readAll = (packed: boolean) => {
      const start = process.cpuUsage();
      for (let g = 0; g < FRESH_RANGES; g++) encodeSliceResults([s.execute([SliceOp.Range, 1, g, spec(packed, false)])]);
      const used = process.cpuUsage(start);
      return (used.user + used.system) / FRESH_RANGES;
    };
    const objects = r % 2 === 0 ? readAll(false) : NaN;
    runs[1].push(readAll(true));
    runs[2].push(readAll(true));
    runs[0].push(Number.isNaN(objects) ? readAll(false) : objects);
  }
  const [objects, first, again] = runs.map(median);
  rows.push(['worker: range + results packed, the first read (no kept bytes)', objects, first]);
  rows.push(['worker: range + results packed, the second read (kept bytes)', objects, again]);
}

// A full-table scan's page: four workers (one slice each) answer their first ITEMS entries,
// and the router merges them by (slice, key) and keeps the first ITEMS: the page.
{
  const WORKERS = 4;
  const stores = Array.from({ length: WORKERS }, (_, w) => {
    const s = new SliceStore(w, WORKERS, () => 1_764_000_000_000);
    s.execute([SliceOp.Assign, 1, [w]]);
    for (let i = 0; i < ITEMS; i++) {
      const item: Item = { [NAME_ATTRIBUTE]: `d${w}_${i}`, device: `d${w}`, seq: i, payload: 'x'.repeat(160) };
      s.execute([SliceOp.Put, 1, w, `k${String(i).padStart(6, '0')}`, item, itemBytes(item), null, null]);
    }
    return s;
  });
  const scan = (packed: boolean) => stores.map((s, w) => encodeSliceResults([s.execute([SliceOp.Scan, 1, 0, null, ITEMS, null, null, sliceSetOf(0, [w]), packed])]));
  const results = [false, true].map(scan);
  const worker = cpuTimes([false, true].map((packed) => () => encodeSliceResults([stores[0].execute([SliceOp.Scan, 1, 0, null, ITEMS, null, null, sliceSetOf(0, [0]), packed])])));
  const router = cpuTimes(
    results.map((answers) => () => {
      const parts = answers.map((bytes) => (decodeSliceResults(bytes) as [[typeof RESULT_OK, ScanResult]])[0][1]);
      return encodeClientFrame([1, RESULT_OK, scanPage(parts, ITEMS, parts[0][2] !== null)]);
    }),
  );
  rows.push(['worker: its part of a scan page + results packed', worker[0], worker[1]]);
  rows.push([`router: ${WORKERS} workers' scan results decoded, merged + client frame`, router[0], router[1]]);
  rows.push(['node -> router scan results of one worker, bytes', results[0][0].byteLength, results[1][0].byteLength]);
}

console.log(`| range of ${ITEMS} items | objects | packed (passed through) | packed / objects |`);
console.log('|---|--:|--:|--:|');
for (const [name, a, b] of rows) console.log(`| ${name} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(2)}x |`);
console.log(`(CPU microseconds per range unless marked bytes; median of ${ROUNDS} runs of ${RUN_MS} ms each, alternating)`);

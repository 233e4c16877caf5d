// The whole process's CPU (puts, reads and every collection they cause) per range of 100 items of fresh stores
// read `--reads` times each, as objects or packed (range-hop.ts's first-read rows time the reads alone, so a
// collection that the first read's kept bytes cause and that runs during the second read is counted there: this
// counts it once, wherever it runs). Run it once per build and form, builds alternated, and subtract the objects:
//   node dist/bench/fresh-read-cpu.js [--packed] [--reads 1] [--stores 30]
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { encodeSliceResults, SliceOp, type RangeSpec } from '../shared/protocol.js';
import { freshStore } from './fresh-store.js';

const opts = readCommandLine(
  process.argv.slice(2),
  { packed: { type: 'boolean', default: false }, reads: { type: 'string', default: '1' }, stores: { type: 'string', default: '30' } },
  'usage: node dist/bench/fresh-read-cpu.js [--packed] [--reads 1] [--stores 30]',
).values;
// Bounded, so that a run ends (30 stores of one read each take a few seconds).
const READS = intArg('reads', opts.reads, 1, 10);
const STORES = intArg('stores', opts.stores, 1, 300);
const RANGES = 200;
const ITEMS = 100;
const spec: RangeSpec = { low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit: ITEMS, projection: null, filter: null, withKeys: false, packed: opts.packed };

const start = process.cpuUsage();
for (let r = 0; r < STORES; r++) {
  const s = freshStore(RANGES, ITEMS);
  for (let t = 0; t < READS; t++) for (let g = 0; g < RANGES; g++) encodeSliceResults([s.execute([SliceOp.Range, 1, g, spec])]);
}
const used = process.cpuUsage(start);
console.log(`${((used.user + used.system) / (STORES * RANGES)).toFixed(1)} us of CPU per range (its ${ITEMS} puts and ${READS} read${READS === 1 ? '' : 's'}, ${opts.packed ? 'packed' : 'objects'})`);

// The CPU a slice move costs (SliceStore moveRead on the source, moveApply on the target, driven as
// coordinator/metadata/slice-mover.ts drives it), and the heap the target holds after it, for one slice of --items
// items whose source holds them as their packed bytes (--held yes: a follower's applied items, SliceStore.applyRecord,
// owning the slice as a slice of one replica does) or as objects (--held no: a leader's, decoded). Each op and answer
// goes through the node's frames as they do between processes (encodeSliceOps, decodeSliceOps of a plain Uint8Array,
// checkSliceOp; encodeOwnedResults, decodeSliceResults, checkSliceResult), and the target's log record of each step is
// encoded (encodeEffects, as worker.ts logs a task's changes), not written. No writes during the move. One process,
// no threads or sockets, so that two builds compare on a busy machine: --build names another build's folder (its dist/
// modules are used, the move's ops in that build's form); alternate runs by hand.
//
//   npm run build && node --expose-gc dist/bench/move-cost.js [--items 100000] [--reps 5] [--held yes] [--maps no] [--build DIR]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { median } from './median.js';
import type { Effect, SliceOpMessage } from '../shared/protocol.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    items: { default: '100000', help: 'items in the moving slice (about 200 bytes each, 16 to a record)' },
    reps: { default: '5', help: 'moves timed, fresh stores each (the median is printed)' },
    held: { default: 'yes', help: "yes: the source holds a follower's items, applied from records; no: a leader's, decoded" },
    maps: { default: 'no', help: 'yes: each item also holds a map, a string set and a decimal (a step of such items is decoded whole by the target)' },
    build: { default: '', help: "another build's folder (its dist/ is used): to compare two builds" },
  },
  'usage: node dist/bench/move-cost.js [options]   (under node --expose-gc: the heap the target holds is measured after a full collection)',
).values;
const ITEMS = intArg('items', args.items, 16, 10_000_000);
const REPS = intArg('reps', args.reps, 1, 100);
if (args.held !== 'yes' && args.held !== 'no') fail('--held must be yes or no');
if (args.maps !== 'yes' && args.maps !== 'no') fail('--maps must be yes or no');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) fail('run with node --expose-gc (the heap the target holds is measured after a full collection)');
const SLICE = 3;
const PER_RECORD = 16;

const dist = args.build === '' ? new URL('..', import.meta.url).href : pathToFileURL(join(resolve(args.build), 'dist/')).href;
const { SliceStore } = (await import(new URL('slice-worker/partition.js', dist).href)) as typeof import('../slice-worker/partition.js');
const { decodeReplicated, encodeReplicated, encodeEffects } = (await import(new URL('slice-worker/log-format.js', dist).href)) as typeof import('../slice-worker/log-format.js');
const P = (await import(new URL('shared/protocol.js', dist).href)) as typeof import('../shared/protocol.js');
const { MOVE_CHUNK_ITEMS } = (await import(new URL('shared/limits.js', dist).href)) as typeof import('../shared/limits.js');
const { itemBytes } = (await import(new URL('shared/values.js', dist).href)) as typeof import('../shared/values.js');
type Store = InstanceType<typeof SliceStore>;

// The records a leader replicates for puts of ~200-byte items (bench/snapshot-cost.ts's shape), all of one slice.
const records: Uint8Array[] = [];
for (let i = 0; i < ITEMS; i += PER_RECORD) {
  const effects: Effect[] = [];
  for (let j = i; j < Math.min(ITEMS, i + PER_RECORD); j++) {
    const item = {
      device: `device-${j % 50_000}`,
      seq: j,
      v: j * 7,
      pad: 'x'.repeat(150),
      ...(args.maps === 'yes' ? { m: { at: j % 100 }, tags: { SS: ['a', `t${j % 7}`] }, price: { $N: `${j}.12345678901234567891` } } : {}),
    };
    effects.push([P.EFFECT_SET, 1, SLICE, `key-${String(j).padStart(9, '0')}`, item, itemBytes(item)]);
  }
  records.push(encodeReplicated(effects, null));
}

/** `op` on `store` as a node runs it, its answer as the coordinator reads it. */
function wire(store: Store, op: SliceOpMessage): unknown {
  const [decoded] = P.decodeSliceOps(new Uint8Array(P.encodeSliceOps([op])));
  const problem = P.checkSliceOp(decoded, true);
  if (problem !== null) fail(`the op is refused: ${problem}`);
  const [r] = P.decodeSliceResults(P.encodeOwnedResults([store.execute(decoded as SliceOpMessage)]));
  if (r[0] !== P.RESULT_OK) fail(`the op failed: ${JSON.stringify(r).slice(0, 300)}`);
  P.checkSliceResult(op, r[1]);
  return r[1];
}
/** The target's step, and its log record (worker.ts: a task's changes, encoded once the task ran). */
function apply(target: Store, effects: unknown, own: boolean): void {
  wire(target, [P.SliceOp.MoveApply, SLICE, effects, own] as unknown as SliceOpMessage);
  encodeEffects(target.takeEffects());
}

/** One move as slice-mover.ts drives it; answers of either build's form (node protocol 27: effects as objects; 28: bytes). */
function move(source: Store, target: Store): number {
  wire(target, [P.SliceOp.MoveBegin, SLICE]);
  wire(source, [P.SliceOp.MoveStart, SLICE]);
  let cursor: unknown = null;
  let copied = 0;
  for (let done = false, reads = 0; !done; reads++) {
    if (reads > (2 * ITEMS) / MOVE_CHUNK_ITEMS + 10) fail('the copy did not end');
    const r = wire(source, [P.SliceOp.MoveRead, SLICE, cursor, MOVE_CHUNK_ITEMS] as SliceOpMessage) as unknown[];
    if (typeof r[0] === 'number') {
      apply(target, r[2], false);
      copied += r[1] as number;
      [cursor, done] = [r[3], r[4] as boolean];
    } else {
      apply(target, (r[0] as Effect[]).concat(r[1] as Effect[]), false);
      copied += (r[1] as Effect[]).length;
      [cursor, done] = [r[2], r[3] as boolean];
    }
  }
  apply(target, wire(source, [P.SliceOp.MoveFreeze, SLICE]), true);
  wire(source, [P.SliceOp.MoveDrop, SLICE]);
  return copied;
}

const cpu: number[] = [];
const wall: number[] = [];
const held: number[] = [];
for (let r = 0; r < REPS; r++) {
  const stores: Store[] = [new SliceStore(0, 1), new SliceStore(0, 1)];
  for (const payload of records) {
    if (args.held === 'yes') stores[0].applyRecord(SLICE, payload);
    else for (const e of decodeReplicated(payload).effects) stores[0].replay(e);
  }
  wire(stores[0], [P.SliceOp.Assign, 1, [SLICE]]);
  stores[0].takeEffects();
  wire(stores[1], [P.SliceOp.Assign, 1, []]);
  gc();
  const before = process.cpuUsage();
  const started = performance.now();
  const copied = move(stores[0], stores[1]);
  const used = process.cpuUsage(before);
  wall.push(performance.now() - started);
  cpu.push((used.user + used.system) / 1000);
  if (copied !== ITEMS || stores[1].itemCount !== ITEMS || stores[0].itemCount !== 0) fail(`moved ${copied} items; the target holds ${stores[1].itemCount}`);
  // What the target holds (the source dropped its copy): the heap with the stores, less the heap without them.
  gc();
  const withStores = process.memoryUsage().heapUsed;
  stores.length = 0;
  gc();
  held.push((withStores - process.memoryUsage().heapUsed) / 2 ** 20);
}
const f = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(', ');
console.log(
  `${args.build === '' ? 'this build' : args.build}: move of ${ITEMS} items${args.maps === 'yes' ? ' with maps' : ''} (${args.held === 'yes' ? 'held as bytes by the source' : 'objects at the source'}): ` +
    `${median(cpu).toFixed(1)} ms of CPU, ${median(wall).toFixed(1)} ms in all, target heap ${median(held).toFixed(1)} MiB, medians of ${REPS} (CPU ${f(cpu)}; heap ${f(held)})`,
);

// The heap a store's keys keep of the bytes they were decoded from: --items items of a ~260-byte value and a 21-char
// key enter one SliceStore by one path (--path put: a batch of PER_BATCH Puts as a node decodes it, decodeSliceOps;
// replay: a log or snapshot record, decodeEffects then replay; follower: a follower's record decoded whole, a delete
// among its changes, applyRecord), then every item is overwritten by a small one made here, so that only the keys
// still refer to what was decoded; the heap after a full collection is printed. msgpackr decodes a string of 13
// chars or more as a slice of one string holding the buffer's strings, which such a key kept alive (slice-worker/owned-strings.ts
// ownKey). --build names another build's folder (its dist/ modules are used): alternate runs by hand.
//
//   npm run build && node --expose-gc dist/bench/key-retention.js [--items 40000] [--path put|replay|follower] [--build DIR]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import type { Effect, SliceOpMessage } from '../shared/protocol.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    items: { default: '40000', help: 'items entered, then overwritten' },
    path: { default: 'put', help: 'put: a node\'s decoded batches of Puts; replay: log records replayed; follower: records decoded whole' },
    build: { default: '', help: "another build's folder (its dist/ is used): to compare two builds" },
  },
  'usage: node --expose-gc dist/bench/key-retention.js [options]',
).values;
const ITEMS = intArg('items', args.items, 50, 10_000_000);
if (!['put', 'replay', 'follower'].includes(args.path)) fail('--path must be put, replay or follower');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) fail('run with node --expose-gc (the heap is measured after a full collection)');
const PER_BATCH = 50;
const SLICE = 3;
const TABLE = 1;

const dist = args.build === '' ? new URL('..', import.meta.url).href : pathToFileURL(join(resolve(args.build), 'dist/')).href;
const { SliceStore } = (await import(new URL('slice-worker/partition.js', dist).href)) as typeof import('../slice-worker/partition.js');
const L = (await import(new URL('slice-worker/log-format.js', dist).href)) as typeof import('../slice-worker/log-format.js');
const P = (await import(new URL('shared/protocol.js', dist).href)) as typeof import('../shared/protocol.js');
const { itemBytes } = (await import(new URL('shared/values.js', dist).href)) as typeof import('../shared/values.js');

const key = (i: number) => `user-key-${String(i).padStart(12, '0')}`;
const item = (i: number) => ({ id: key(i), body: `${'x'.repeat(240)}${i}` });
const store = new SliceStore(0, 1, () => 7);
const ok = (op: SliceOpMessage) => {
  const r = store.execute(op);
  if (r[0] !== P.RESULT_OK) throw new Error(JSON.stringify(r));
};
ok([P.SliceOp.Assign, 1, [SLICE]]);
gc();
const before = process.memoryUsage().heapUsed;
for (let i = 0; i < ITEMS; i += PER_BATCH) {
  const to = Math.min(ITEMS, i + PER_BATCH);
  if (args.path === 'put') {
    const ops: SliceOpMessage[] = [];
    for (let j = i; j < to; j++) {
      const it = item(j);
      ops.push([P.SliceOp.Put, TABLE, SLICE, key(j), it, itemBytes(it), null, null]);
    }
    for (const op of P.decodeSliceOps(P.encodeSliceOps(ops))) ok(op as SliceOpMessage);
    continue;
  }
  const effects: Effect[] = args.path === 'follower' ? [[P.EFFECT_DELETE, TABLE, SLICE, 'gone']] : [];
  for (let j = i; j < to; j++) {
    const it = item(j);
    effects.push([P.EFFECT_SET, TABLE, SLICE, key(j), it, itemBytes(it)]);
  }
  if (args.path === 'replay') for (const e of L.decodeEffects(new Uint8Array(L.encodeEffects(effects)))) store.replay(e);
  else store.applyRecord(SLICE, L.encodeReplicated(effects, null));
}
store.takeEffects();
for (let j = 0; j < ITEMS; j++) {
  const small = { n: j };
  ok([P.SliceOp.Put, TABLE, SLICE, `${key(j)}`, small, itemBytes(small), null, null]);
}
store.takeEffects();
gc();
gc();
const after = process.memoryUsage().heapUsed;
if (store.itemCount !== ITEMS) throw new Error('every item is there'); // after the measure: the store lives through it
console.log(JSON.stringify({ path: args.path, items: ITEMS, build: args.build || 'this', heapGrowthMiB: +((after - before) / 2 ** 20).toFixed(2) }));

// The heap a store's item values keep of the text they were decoded from. msgpackr's native string extractor
// (msgpackr-extract) reads runs of short ASCII strings (each under 256 bytes, at most 40 bytes apart) into one string
// of up to about 6,000 chars, and hands out those of 13 chars or more as slices of it: an item's own value so decoded
// keeps that whole run alive, its neighbours' values and all, for as long as the item lives. Keys were made strings
// of their own where they enter the tree (slice-worker/owned-strings.ts ownKey; bench/key-retention.ts); this measures the values.
//
// --batches batches of --per-batch items enter one SliceStore by one --path (put: a node's decoded batch of Puts;
// update: Updates that set the value; replay: a log or snapshot record replayed; follower: a follower's record, by its
// headers; follower-full: the same past the kept-bytes budget, a delete among the changes, so decoded whole and held
// as objects; move / move-full: a move's step, likewise), then every item but one per batch is deleted by ops made
// here. The heap after a full collection is compared with the same survivors put as objects made here (no decode):
// the difference, per survivor, is what a survivor keeps beyond its own item.
// --path answers: each batch is a follower's record whose one write with a request id answered an old item (a Put's
// returnOld) beside its --per-batch sets, applied and remembered as a follower does (SliceStore.applyRecord, then
// AppliedRequests.addAll: slice-replicas.ts); every item is then deleted and the survivors are the remembered answers,
// compared with the same answers remembered as objects made here. answers-full: a delete among the changes, so the
// record is decoded whole (decodeReplicated), the answers with the items.
// --shape even: every item a key and one --value-chars value; worst: the survivors one small item (a 13-char value)
// each, the others each 24 values of 250 chars, so that every survivor sits in its own ~6 KB run of dead text.
//
//   npm run build && node --expose-gc dist/bench/value-retention.js [--path put] [--shape even|worst] [--build DIR]
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import type { Effect, SliceOpMessage } from '../shared/protocol.js';
import type { Item } from '../shared/values.js';

const PATHS = ['put', 'update', 'replay', 'follower', 'follower-full', 'move', 'move-full', 'answers', 'answers-full'];
const args = readCommandLine(
  process.argv.slice(2),
  {
    batches: { default: '2000', help: 'batches entered; one item of each survives' },
    'per-batch': { default: '50', help: 'items per batch (a node batch holds at most NODE_BATCH_OPS_MAX ops)' },
    'value-chars': { default: '200', help: 'chars of each item\'s value (--shape even)' },
    shape: { default: 'even', help: 'even: like items; worst: small survivors among ~6 KB dead items' },
    path: { default: 'put', help: PATHS.join(', ') },
    build: { default: '', help: "another build's folder (its dist/ is used): to compare two builds" },
  },
  'usage: node --expose-gc dist/bench/value-retention.js [options]',
).values;
const BATCHES = intArg('batches', args.batches, 1, 1_000_000);
const PER_BATCH = intArg('per-batch', args['per-batch'], 2, 100_000);
const VALUE_CHARS = intArg('value-chars', args['value-chars'], 1, 255);
if (!PATHS.includes(args.path)) fail(`--path must be one of ${PATHS.join(', ')}`);
if (!['even', 'worst'].includes(args.shape)) fail('--shape must be even or worst');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) fail('run with node --expose-gc (the heap is measured after a full collection)');
const SLICE = 3;
const TABLE = 1;

const dist = args.build === '' ? new URL('..', import.meta.url).href : pathToFileURL(join(resolve(args.build), 'dist/')).href;
const { SliceStore } = (await import(new URL('slice-worker/partition.js', dist).href)) as typeof import('../slice-worker/partition.js');
const L = (await import(new URL('slice-worker/log-format.js', dist).href)) as typeof import('../slice-worker/log-format.js');
const P = (await import(new URL('shared/protocol.js', dist).href)) as typeof import('../shared/protocol.js');
const { AppliedRequests } = (await import(new URL('slice-worker/replication/applied-requests.js', dist).href)) as typeof import('../slice-worker/replication/applied-requests.js');
const { itemBytes } = (await import(new URL('shared/values.js', dist).href)) as typeof import('../shared/values.js');

const key = (i: number) => `k${i}`; // short: a key keeps nothing (and is copied anyway: ownKey)
const survives = (i: number) => i % PER_BATCH === 0;
const item = (i: number): Item => {
  const tail = String(i).padStart(8, '0');
  if (args.shape === 'even') return { id: key(i), body: `${'x'.repeat(VALUE_CHARS - 8)}${tail}` };
  if (survives(i)) return { id: key(i), v: `small${tail}` };
  const big: Item = { id: key(i) };
  for (let a = 0; a < 24; a++) big[`a${a}`] = `${'y'.repeat(242)}${tail}`;
  return big;
};

function ok(s: InstanceType<typeof SliceStore>, op: SliceOpMessage): void {
  const r = s.execute(op);
  if (r[0] !== P.RESULT_OK) throw new Error(JSON.stringify(r));
}
const setOf = (i: number): Effect => {
  const it = item(i);
  return [P.EFFECT_SET, TABLE, SLICE, key(i), it, itemBytes(it)];
};

/** Enters the batch [from, to) by `path`. */
function enter(s: InstanceType<typeof SliceStore>, path: string, from: number, to: number): void {
  if (path === 'made') {
    for (let i = from; i < to; i++) {
      const it = item(i);
      ok(s, [P.SliceOp.Put, TABLE, SLICE, key(i), it, itemBytes(it), null, null]);
    }
    return;
  }
  if (path === 'put' || path === 'update') {
    const ops: SliceOpMessage[] = [];
    for (let i = from; i < to; i++) {
      const it = item(i);
      if (path === 'put') ops.push([P.SliceOp.Put, TABLE, SLICE, key(i), it, itemBytes(it), null, null]);
      else {
        const actions = Object.entries(it).filter(([n]) => n !== 'id').map(([n, v]) => ({ k: 'set' as const, path: [n], value: { k: 'value' as const, v } }));
        ops.push([P.SliceOp.Update, TABLE, SLICE, key(i), { base: { id: key(i) }, actions, condition: null, oldOnFailure: false, returnValues: 'none' }, null] as SliceOpMessage);
      }
    }
    for (const op of P.decodeSliceOps(P.encodeSliceOps(ops))) ok(s, op as SliceOpMessage);
    return;
  }
  const full = path.endsWith('-full');
  const effects: Effect[] = full ? [[P.EFFECT_DELETE, TABLE, SLICE, 'gone']] : [];
  for (let i = from; i < to; i++) effects.push(setOf(i));
  if (path === 'replay') for (const e of L.decodeEffects(new Uint8Array(L.encodeEffects(effects)))) s.replay(e);
  else if (path.startsWith('follower')) s.applyRecord(SLICE, L.encodeReplicated(effects, null));
  else ok(s, [P.SliceOp.MoveApply, SLICE, new Uint8Array(L.encodeEffects(effects)), false]);
}

/** Heap growth after a full collection: the batches entered by `path`, all but one item per batch deleted. */
function growth(path: string): { bytes: number; survivors: number } {
  // A store past its kept-bytes budget (none kept): where a follower's or a move's items are held as objects.
  const s = new SliceStore(0, 1, () => 7, undefined, path.endsWith('-full') ? 0 : undefined);
  ok(s, [P.SliceOp.Assign, 1, [SLICE]]);
  if (path.startsWith('move')) {
    ok(s, [P.SliceOp.Assign, 2, []]);
    ok(s, [P.SliceOp.MoveBegin, SLICE]);
  }
  s.takeEffects();
  gc!();
  gc!();
  const before = process.memoryUsage().heapUsed;
  const n = BATCHES * PER_BATCH;
  for (let i = 0; i < n; i += PER_BATCH) {
    enter(s, path, i, i + PER_BATCH);
    s.takeEffects();
  }
  if (path.startsWith('move')) ok(s, [P.SliceOp.MoveApply, SLICE, new Uint8Array(L.encodeEffects([])), true]);
  for (let i = 0; i < n; i++) if (!survives(i)) ok(s, [P.SliceOp.Delete, TABLE, SLICE, key(i), null, null]);
  s.takeEffects();
  gc!();
  gc!();
  const bytes = process.memoryUsage().heapUsed - before;
  if (s.itemCount !== BATCHES) throw new Error('one item of each batch is there'); // after the measure: s lives through it
  return { bytes, survivors: s.itemCount };
}

/** The old item a Put with returnOld answered, batch `batch`'s one remembered answer: like an item (--shape even), or
 * small (worst: one 13-char value, like a survivor). */
const answerOf = (batch: number): Item => {
  const tail = String(batch).padStart(8, '0');
  return args.shape === 'even' ? { id: `a${batch}`, body: `${'z'.repeat(VALUE_CHARS - 8)}${tail}` } : { id: `a${batch}`, v: `small${tail}` };
};

/** Heap growth after a full collection: the batches entered as follower's records each with one remembered answer
 * (--path answers*), every item then deleted; the answers remembered ('made': answers made here, items put). */
function answersGrowth(path: string): { bytes: number; survivors: number } {
  const s = new SliceStore(0, 1, () => 7);
  ok(s, [P.SliceOp.Assign, 1, [SLICE]]);
  s.takeEffects();
  const applied = new AppliedRequests();
  gc!();
  gc!();
  const before = process.memoryUsage().heapUsed;
  const n = BATCHES * PER_BATCH;
  for (let i = 0, batch = 0; i < n; i += PER_BATCH, batch++) {
    const answer = answerOf(batch);
    if (path === 'made') {
      enter(s, 'made', i, i + PER_BATCH);
      applied.add(1, batch, 7, answer);
    } else {
      const effects: Effect[] = path === 'answers-full' ? [[P.EFFECT_DELETE, TABLE, SLICE, 'gone']] : [];
      for (let j = i; j < i + PER_BATCH; j++) effects.push(setOf(j));
      const requests = s.applyRecord(SLICE, L.encodeReplicated(effects, { instances: [1], counters: [batch], of: null, ats: 7, answers: [answer] }));
      applied.addAll(requests!);
    }
    s.takeEffects();
  }
  for (let i = 0; i < n; i++) ok(s, [P.SliceOp.Delete, TABLE, SLICE, key(i), null, null]);
  s.takeEffects();
  gc!();
  gc!();
  const bytes = process.memoryUsage().heapUsed - before;
  if (s.itemCount !== 0 || applied.size !== BATCHES) throw new Error('every item deleted, every answer remembered'); // after the measure: both live through it
  return { bytes, survivors: applied.size };
}

const answers = args.path.startsWith('answers');
const own = answers ? answersGrowth('made') : growth('made');
const got = answers ? answersGrowth(args.path) : growth(args.path);
let survivorBytes = 0;
for (let i = 0; i < BATCHES * PER_BATCH; i += PER_BATCH) survivorBytes += itemBytes(answers ? answerOf(i / PER_BATCH) : item(i));
console.log(
  JSON.stringify({
    path: args.path,
    shape: args.shape,
    batches: BATCHES,
    perBatch: PER_BATCH,
    build: args.build || 'this',
    survivorItemBytes: Math.round(survivorBytes / BATCHES),
    heapMiBMadeHere: +(own.bytes / 2 ** 20).toFixed(2),
    heapMiB: +(got.bytes / 2 ** 20).toFixed(2),
    keptBeyondOwnPerSurvivor: Math.round((got.bytes - own.bytes) / BATCHES),
  }),
);

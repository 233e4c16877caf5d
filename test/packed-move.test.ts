// A slice move (SliceStore moveRead / moveApply, driven as coordinator/metadata/slice-mover.ts drives it, every op and
// answer through the node's frames and both sides' checks) of items the source holds as their packed bytes (a
// follower's applied items: SliceStore.applyRecord): carried as those bytes, without decoding one, and held as them
// by the target under its kept-bytes budget; answered by the target as a target that got the items as objects.
import { describe, expect, it, vi } from 'vitest';
import { PACKED_ITEM_CACHE_BYTES_MAX } from '../shared/limits.js';
import {
  checkSliceOp,
  checkSliceResult,
  decodeSliceOps,
  decodeSliceResults,
  EFFECT_DELETE,
  EFFECT_DROP_SLICE,
  EFFECT_SET,
  encodeOwnedResults,
  encodeSliceOps,
  packClientItem,
  RESULT_OK,
  SliceOp,
  sliceSetOf,
  type Effect,
  type MovedEffects,
  type MoveCursor,
  type MoveReadResult,
  type SliceOpMessage,
  type SliceOpResult,
  takeCheckedMove,
} from '../shared/protocol.js';
import { itemBytes, type Item } from '../shared/values.js';
import * as logFormat from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';
import { rng } from './cluster-fixture.js';

// Counts the items the stores decode one by one (itemOf's, setPacked's decodeItemText) and the moved lists the target
// decodes whole (moveApply's decodeEffects), passing each call through.
vi.mock('../slice-worker/log-format.js', async (importOriginal) => {
  const m = await importOriginal<typeof import('../slice-worker/log-format.js')>();
  return { ...m, decodeItemText: vi.fn(m.decodeItemText), decodeEffects: vi.fn(m.decodeEffects) };
});
const itemDecodes = vi.mocked(logFormat.decodeItemText);
const listDecodes = vi.mocked(logFormat.decodeEffects);
// And the moved lists the target takes as their check decoded them (moveApply's takeCheckedMove).
vi.mock('../shared/protocol.js', async (importOriginal) => {
  const m = await importOriginal<typeof import('../shared/protocol.js')>();
  return { ...m, takeCheckedMove: vi.fn(m.takeCheckedMove) };
});
const checkedTakes = vi.mocked(takeCheckedMove);

const SLICE = 5;
const bin = (...b: number[]) => new Uint8Array(b);

/** A leader's records of `n` items on SLICE over two tables: binary values, lists, non-ASCII keys and values, every
 * 9th item over PACKED_ITEM_CACHE_BYTES_MAX (decoded at its apply, never held as bytes); with `maps`, every third
 * record's items hold a map, a set and a decimal (decoded whole at their apply). */
function records(n: number, maps: boolean): Uint8Array[] {
  const r = rng(9);
  const out: Uint8Array[] = [];
  for (let i = 0; i < n; i += 7) {
    const effects: Effect[] = [];
    for (let j = i; j < Math.min(n, i + 7); j++) {
      const key = `k${String(j).padStart(4, '0')}${'\u00e9\u00ff'.repeat(j % 5)}`;
      const item: Item = {
        k: `${key}\u{1f600}`,
        n: Math.floor(r() * 1e9),
        f: r() * 1e6 - 5e5,
        b: bin(j & 0xff, 0, 255),
        l: [j, '\u00e9', bin(1), null, true, [2, 'x']],
        t: j % 2 === 0,
        ...(maps && (i / 7) % 3 === 2 ? { m: { deep: { x: j } }, s: { SS: ['p', `q${j}`] }, d: { $N: `${j}.12345678901234567891` } } : {}),
        pad: 'y'.repeat(j % 9 === 4 ? PACKED_ITEM_CACHE_BYTES_MAX + 100 : Math.floor(r() * 200)),
        __mtime: 1,
      };
      effects.push([EFFECT_SET, 1 + (j % 2), SLICE, key, item, itemBytes(item)]);
    }
    out.push(logFormat.encodeReplicated(effects, null));
  }
  return out;
}

/** `op` run on `store` as a node runs it (its bytes as a worker gets them from its node: a plain Uint8Array, as
 * postMessage gives it), its answer as the coordinator gets it (checked: checkSliceResult). */
function wire(store: SliceStore, op: SliceOpMessage): SliceOpResult {
  const [decoded] = decodeSliceOps(new Uint8Array(encodeSliceOps([op])));
  const problem = checkSliceOp(decoded, true);
  if (problem !== null) throw new Error(problem);
  const [r] = decodeSliceResults(encodeOwnedResults([store.execute(decoded as SliceOpMessage)]));
  if (r[0] === RESULT_OK) checkSliceResult(op, r[1]);
  return r;
}
function ok(store: SliceStore, op: SliceOpMessage): unknown {
  const r = wire(store, op);
  expect(r[0], JSON.stringify(r)).toBe(RESULT_OK);
  return r[1];
}

/** Moves SLICE from `source` to `target` as slice-mover.ts does (`between`: writes to the source between steps). */
function move(source: SliceStore, target: SliceStore, chunk: number, between: () => void = () => {}): void {
  ok(target, [SliceOp.MoveBegin, SLICE]);
  ok(source, [SliceOp.MoveStart, SLICE]);
  let cursor: MoveCursor = null;
  for (let reads = 0, done = false; !done; reads++) {
    expect(reads).toBeLessThan(1000);
    const [, , effects, next, last] = ok(source, [SliceOp.MoveRead, SLICE, cursor, chunk]) as MoveReadResult;
    between();
    ok(target, [SliceOp.MoveApply, SLICE, effects, false]);
    cursor = next;
    done = last;
  }
  const [changes, , catchUp] = ok(source, [SliceOp.MoveRead, SLICE, null, 0]) as MoveReadResult;
  if (changes > 0) ok(target, [SliceOp.MoveApply, SLICE, catchUp, false]);
  between();
  ok(target, [SliceOp.MoveApply, SLICE, ok(source, [SliceOp.MoveFreeze, SLICE]) as MovedEffects, true]);
  ok(source, [SliceOp.MoveDrop, SLICE]);
}

/** A follower's store of `payloads` (held as bytes where they are plain), then the owner of SLICE (a slice of one
 * replica keeps the items it held: docs/replication.md). */
function heldStore(payloads: Uint8Array[]): SliceStore {
  const s = new SliceStore(0, 1, () => 7);
  for (const p of payloads) s.applyRecord(SLICE, p);
  ok(s, [SliceOp.Assign, 1, [SLICE]]);
  return s;
}
/** A store given the same items as objects (as a move carried them before: decoded on their way). */
function objectStore(payloads: Uint8Array[]): SliceStore {
  const s = new SliceStore(0, 1, () => 7);
  for (const p of payloads) for (const e of logFormat.decodeReplicated(p).effects) s.replay(e);
  return s;
}

/** A value with each byte array's kind named: toEqual alone does not tell a Buffer from a Uint8Array. */
const tagged = (v: unknown): unknown => {
  if (v instanceof Uint8Array) return { kind: v.constructor.name, bytes: [...v] };
  if (Array.isArray(v)) return v.map(tagged);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, tagged(x)]));
  return v;
};

describe('a slice move of items held as their packed bytes', () => {
  it('logs changes that name items by their bytes among other changes as the same values, in order', () => {
    const item = (n: number): Item => ({ k: `\u00e9${n}`, b: bin(n), l: [n, 'x'], __mtime: 1 });
    const text = (n: number) => new logFormat.ItemText(Buffer.from(packClientItem(item(n))).toString('latin1'));
    const logged: logFormat.LoggedEffect[] = [
      [EFFECT_SET, 1, SLICE, 'a', text(1), 30],
      [EFFECT_DELETE, 1, SLICE, 'b'],
      [EFFECT_SET, 2, SLICE, 'c\u00ff', text(2), 31],
      [EFFECT_SET, 2, SLICE, 'd', text(3), 32],
      [EFFECT_SET, 1, SLICE, 'e', item(4), 33],
      [EFFECT_DROP_SLICE, SLICE, 2],
      [EFFECT_SET, 1, SLICE, 'f', text(5), 34],
    ];
    const asObjects = logged.map((e) => (logFormat.isTextSet(e) ? [...e.slice(0, 4), logFormat.decodeItemText(e[4].text), e[5]] : e)) as Effect[];
    // Each read back from bytes of the same kind (a log file's): what a bin decodes to follows the kind it is read from.
    const readBack = (bytes: Uint8Array) => logFormat.decodeEffects(Uint8Array.from(bytes));
    const written = readBack(logFormat.encodeEffects(logged));
    expect(tagged(written)).toEqual(tagged(readBack(logFormat.encodeEffects(asObjects))));
    expect(written.map((e) => e[0])).toEqual([EFFECT_SET, EFFECT_DELETE, EFFECT_SET, EFFECT_SET, EFFECT_SET, EFFECT_DROP_SLICE, EFFECT_SET]);
  });

  it('carries them without decoding one, and the target holds them as bytes, decoded once at their first read', () => {
    const payloads = records(700, false);
    const source = heldStore(payloads);
    const expected = [...objectStore(payloads).entries(SLICE)];
    const large = expected.filter((e) => e[5] > PACKED_ITEM_CACHE_BYTES_MAX).length;
    expect([expected.length, large]).toEqual([700, 78]);
    expect(source.keptBytes).toBeGreaterThan(0);
    const target = new SliceStore(0, 1, () => 7);
    ok(target, [SliceOp.Assign, 1, []]);

    itemDecodes.mockClear();
    listDecodes.mockClear();
    move(source, target, 64);
    // Only the items over PACKED_ITEM_CACHE_BYTES_MAX, which no store holds as bytes, are decoded, by the target at
    // their apply (the source held them as objects and packed them once). A move that decoded each item held as
    // bytes, on either side, decoded every one of the 700 (622 held as bytes by the source).
    expect(itemDecodes).toHaveBeenCalledTimes(large);
    expect(listDecodes).toHaveBeenCalledTimes(0);
    expect(target.keptBytes).toBeGreaterThan(0);
    expect(source.itemCount).toBe(0);

    // The target's log holds the same items: written from their bytes, read back by the log's decoder.
    const logged = logFormat.decodeEffects(logFormat.encodeEffects(target.takeEffects()));
    listDecodes.mockClear();
    itemDecodes.mockClear();
    const replayed = new SliceStore(0, 1);
    for (const e of logged) replayed.replay(e);
    expect(tagged([...replayed.entries(SLICE)])).toEqual(tagged(expected));
    // Reading the target's items decodes those it holds as bytes, once.
    expect(tagged([...target.entries(SLICE)])).toEqual(tagged(expected));
    expect(itemDecodes).toHaveBeenCalledTimes(700 - large);
    itemDecodes.mockClear();
    void [...target.entries(SLICE)];
    expect(itemDecodes).toHaveBeenCalledTimes(0);
  });

  it('gives a target that answers every read and conditional write as one that got the items as objects', () => {
    const payloads = records(300, true);
    // Moved while the source takes writes (a delete among them: those steps are decoded whole by the target).
    const asNow = new SliceStore(0, 1, () => 7);
    ok(asNow, [SliceOp.Assign, 1, []]);
    listDecodes.mockClear();
    checkedTakes.mockClear();
    const source = heldStore(payloads);
    const writes: SliceOpMessage[] = [
      [SliceOp.Put, 1, SLICE, 'new\u00e9', { k: 'new\u00e9', b: bin(9), l: ['\u00ff'], __mtime: 1 }, 40, null, null],
      [SliceOp.Delete, 2, SLICE, 'k0001\u00e9\u00ff', null, null],
      [SliceOp.Update, 1, SLICE, 'k0002\u00e9\u00ff\u00e9\u00ff', { base: { k: 'x' }, actions: [{ k: 'set', path: ['n'], value: { k: 'value', v: 5 } }], condition: null, oldOnFailure: false, returnValues: 'none' }, null],
    ];
    let w = 0;
    move(source, asNow, 40, () => {
      if (w < writes.length) ok(source, writes[w++]);
    });
    expect(w).toBe(writes.length);
    // Both ways of reading a step were taken: by headers (items held as bytes) and whole (a delete, items with maps),
    // each of the latter decoded once, by its check (checkSliceOp), the target taking what it decoded.
    expect(checkedTakes.mock.results.filter((r) => r.value !== undefined).length).toBeGreaterThan(0);
    expect(listDecodes).toHaveBeenCalledTimes(0);
    expect(asNow.keptBytes).toBeGreaterThan(0);
    ok(asNow, [SliceOp.Assign, 2, [SLICE]]);
    // The same items as objects, and the same writes.
    const asBefore = objectStore(payloads);
    ok(asBefore, [SliceOp.Assign, 1, [SLICE]]);
    for (const op of writes) ok(asBefore, op);
    expect(tagged([...asNow.entries(SLICE)])).toEqual(tagged([...asBefore.entries(SLICE)]));

    const big = 'k0004\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff';
    const check = (condition: unknown, returnOld: boolean, oldOnFailure = false) => ({ condition, returnOld, oldOnFailure });
    const cmp = (op: string, path: string, v: unknown) => ({ k: 'cmp', op, a: { k: 'path', path: [path] }, b: { k: 'value', v } });
    const range = (packed: boolean, table: number, filter: unknown = null, projection: unknown = null) =>
      [SliceOp.Range, table, SLICE, { low: '', lowInclusive: true, high: '\u00ff\u00ff\u00ff', highInclusive: true, reverse: false, limit: 500, projection, filter, withKeys: true, packed }];
    const ops: unknown[][] = [
      [SliceOp.Get, 1, SLICE, 'k0000', null, false],
      [SliceOp.Get, 1, SLICE, 'k0000', null, true],
      [SliceOp.Get, 1, SLICE, big, null, true],
      [SliceOp.Get, 2, SLICE, 'k0015', [['l'], ['b']], false],
      [SliceOp.Get, 1, SLICE, 'new\u00e9', null, true],
      range(false, 1),
      range(true, 2),
      range(true, 1, { k: 'contains', a: { k: 'path', path: ['l'] }, b: { k: 'value', v: '\u00e9' } }),
      range(false, 2, cmp('>', 'n', 1e8), [['k'], ['b']]),
      [SliceOp.Scan, 1, 0, null, 1000, null, null, sliceSetOf(0, [SLICE]), true],
      [SliceOp.Scan, 2, 0, null, 1000, null, cmp('=', 'b', bin(15, 0, 255)), sliceSetOf(0, [SLICE]), false],
      [SliceOp.Put, 1, SLICE, 'k0006\u00e9', { k: 'p', n: 1 }, 20, check(cmp('=', 'b', bin(6, 0, 255)), true), null],
      [SliceOp.Put, 1, SLICE, 'k0008\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff', { k: 'p', n: 1 }, 20, check(cmp('=', 'b', bin(1)), false, true), null],
      [SliceOp.Put, 1, SLICE, big, { k: 'p', n: 2 }, 20, check({ k: 'exists', path: ['pad'] }, true), null],
      [SliceOp.Delete, 2, SLICE, 'k0003\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff', check({ k: 'exists', path: ['l'] }, true), null],
      [SliceOp.Delete, 1, SLICE, 'k0010', check(cmp('<', 'n', 0), false, true), null],
      [SliceOp.Update, 2, SLICE, 'k0021\u00e9', { base: { k: 'u' }, actions: [{ k: 'add', path: ['n'], n: 5 }], condition: { k: 'type', a: { k: 'path', path: ['b'] }, type: 'B' }, oldOnFailure: true, returnValues: 'old' }, null],
      [SliceOp.Update, 1, SLICE, 'k0014\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff\u00e9\u00ff', { base: { k: 'u' }, actions: [{ k: 'set', path: ['l'], value: { k: 'listAppend', a: { k: 'path', path: ['l'] }, b: { k: 'value', v: [bin(2)] } } }], condition: null, oldOnFailure: true, returnValues: 'new' }, null],
      [SliceOp.Get, 1, SLICE, 'k0006\u00e9', null, false],
      range(true, 1),
    ];
    let found = 0;
    for (const op of ops) {
      const got = wire(asNow, op as unknown as SliceOpMessage);
      const before = wire(asBefore, op as unknown as SliceOpMessage);
      expect(tagged(got), JSON.stringify(op.slice(0, 4))).toEqual(tagged(before));
      if (got[0] === RESULT_OK && got[1] !== null && got[1] !== false) found++;
    }
    // The ops name items that are there (or were: a failed condition answers its item), not only missing keys.
    expect(found).toBeGreaterThan(12);
    expect(tagged([...asNow.entries(SLICE)])).toEqual(tagged([...asBefore.entries(SLICE)]));
  });
});

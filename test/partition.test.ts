// SliceStore (slice-worker/partition.ts) against a dumb model: a plain array of
// [table, slice, key, item] kept sorted. Seeded random runs of slice ops go to
// both and every result is compared; a failure replays from the seed (and
// fast-check shrinks it to a short op list). Then the cases the model run does
// not reach on its own: ownership, failed updates, size limits, paging.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeKeyPart, encodeKeyPrefix, prefixEnd, type KeyType, type KeyValue } from '../shared/key-encoding.js';
import { ITEM_BYTES_MAX, PAGE_BYTES_MAX } from '../shared/limits.js';
import {
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  type RangeResult,
  type RangeSpec,
  type ScanResult,
  type SliceOpMessage,
  type SliceOpResult,
  type StatsResult,
  type UpdateSpec,
} from '../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, type Item, type Value } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';

const SEED = 20_240_611; // fixed: a failure replays exactly

// Worker 1 of 3 owns the slices s with s % 3 === 1; it is assigned 1, 4 and 7.
const WORKER_INDEX = 1;
const WORKER_COUNT = 3;
const OWNED = [1, 4, 7];
/** Slices of other workers, and 10, which would be this worker's but is not assigned. */
const FOREIGN = [0, 2, 5, 10];

// ---- keys: realistic, built with the real encoding ----------------------------

type KeyRef = { table: number; slice: number; key: string; name: string };

const hex = (byteString: string): string =>
  Array.from(byteString, (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join('');

/** A table's keys: every sharding value with every sorting value (or alone).
 * The slice depends on the sharding value only, as it does in the cluster. */
function tableKeys(table: number, shType: KeyType, shardings: KeyValue[], soType: KeyType | null, sortings: KeyValue[]): KeyRef[] {
  const out: KeyRef[] = [];
  shardings.forEach((sh, i) => {
    const part = encodeKeyPart(shType, sh);
    const slice = OWNED[i % OWNED.length];
    for (const so of soType === null ? [null] : sortings) {
      const key = so === null ? part : part + encodeKeyPart(soType!, so);
      out.push({ table, slice, key, name: `t${table}:${hex(key)}` });
    }
  });
  return out;
}

const bin = (...bytes: number[]) => Uint8Array.from(bytes);
const TABLE_A = 1; // string sharding key, number sorting key
const TABLE_B = 2; // binary sharding key, string sorting key
const TABLE_C = 3; // number sharding key only
const TABLES = [TABLE_A, TABLE_B, TABLE_C];
const SHARDINGS_A = ['a', 'a\u0000', 'a\u0000b', 'b', 'é', '😀', 'ab', 'a\u0000\u0000'];
const SHARDINGS_B = [bin(0x00), bin(0x00, 0x00), bin(0x61), bin(0xff), bin(0x61, 0x00)];
const SHARDINGS_C = [-2, -0.5, 0, 3, 1e-300, 1e300];
const KEYS: KeyRef[] = [
  ...tableKeys(TABLE_A, 'string', SHARDINGS_A, 'number', [-1.5, -1, 0, 1, 2, 1e300]),
  ...tableKeys(TABLE_B, 'binary', SHARDINGS_B, 'string', ['w', 'x', 'x\u0000', 'xy', 'é']),
  ...tableKeys(TABLE_C, 'number', SHARDINGS_C, null, []),
];

/** Range bounds worth trying for a table: its keys, and the bounds the
 * coordinator forms (a sharding part, part + ff, prefixEnd, begins-with), and the extremes. */
function boundsOf(table: number): string[] {
  const parts =
    table === TABLE_A
      ? SHARDINGS_A.map((s) => encodeKeyPart('string', s))
      : table === TABLE_B
        ? SHARDINGS_B.map((s) => encodeKeyPart('binary', s))
        : SHARDINGS_C.map((s) => encodeKeyPart('number', s));
  const extra = parts.flatMap((p) => {
    const out = [p, p + '\xff', prefixEnd(p)];
    if (table === TABLE_B) out.push(p + encodeKeyPrefix('string', 'x'), prefixEnd(p + encodeKeyPrefix('string', 'x')));
    if (table === TABLE_A) out.push(p + encodeKeyPart('number', 0.5));
    return out;
  });
  return [...KEYS.filter((k) => k.table === table).map((k) => k.key), ...extra, '', '\xff\xff'];
}
const BOUNDS = new Map(TABLES.map((t) => [t, boundsOf(t)]));

// ---- the model -------------------------------------------------------------------

type Entry = { table: number; slice: number; key: string; item: Item; bytes: number };

const compareStrings = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const ok = (value: unknown): SliceOpResult => [RESULT_OK, value];
const err = (code: string): SliceOpResult => [RESULT_ERROR, code as never, ''];

function modelProject(item: Item, attributes: string[] | null): Item {
  if (attributes === null) return item;
  const out: Item = {};
  for (const name of [...attributes, NAME_ATTRIBUTE, MTIME_ATTRIBUTE]) if (name in item) out[name] = item[name];
  return out;
}

/** The dumbest store that could work: one array, sorted by (table, slice, key), scanned in full. */
class Model {
  entries: Entry[] = [];
  /** Tables this worker has created a partition for (on a Put or Update to an owned slice). */
  created = new Set<number>();

  constructor(readonly owned: Set<number>) {}

  private find(table: number, slice: number, key: string): number {
    return this.entries.findIndex((e) => e.table === table && e.slice === slice && e.key === key);
  }

  private upsert(entry: Entry): void {
    const i = this.find(entry.table, entry.slice, entry.key);
    if (i >= 0) this.entries[i] = entry;
    else this.entries.push(entry);
    this.entries.sort((a, b) => a.table - b.table || a.slice - b.slice || compareStrings(a.key, b.key));
  }

  execute(op: SliceOpMessage, now: number): SliceOpResult {
    switch (op[0]) {
      case SliceOp.Put: {
        const [, table, slice, key, item, bytes] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        this.created.add(table);
        this.upsert({ table, slice, key, item: { ...item, [MTIME_ATTRIBUTE]: now }, bytes });
        return ok(null);
      }
      case SliceOp.Get: {
        const [, table, slice, key, attributes] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        const i = this.find(table, slice, key);
        return ok(i < 0 ? null : modelProject(this.entries[i].item, attributes));
      }
      case SliceOp.Delete: {
        const [, table, slice, key] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        const i = this.find(table, slice, key);
        if (i >= 0) this.entries.splice(i, 1);
        return ok(i >= 0);
      }
      case SliceOp.Update: {
        const [, table, slice, key, spec] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        this.created.add(table);
        const i = this.find(table, slice, key);
        const old = i < 0 ? null : this.entries[i].item;
        const next: Item = { ...(old ?? spec.base) };
        for (const [name, v] of Object.entries(spec.set ?? {})) next[name] = v;
        for (const name of spec.remove ?? []) delete next[name];
        for (const [name, n] of Object.entries(spec.add ?? {})) {
          const current = next[name] === undefined ? 0 : next[name]; // "a missing attribute counts as 0"
          if (typeof current !== 'number') return err('ValidationError');
          if (!Number.isFinite(current + n)) return err('ValidationError');
          next[name] = current + n;
        }
        next[MTIME_ATTRIBUTE] = now;
        const bytes = itemBytes(next);
        if (bytes > ITEM_BYTES_MAX) return err('ItemTooLarge');
        this.upsert({ table, slice, key, item: next, bytes });
        return ok(spec.returnValues === 'old' ? old : spec.returnValues === 'new' ? next : null);
      }
      case SliceOp.Range: {
        const [, table, slice, s] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        const inRange = this.entries.filter(
          (e) =>
            e.table === table &&
            e.slice === slice &&
            (s.lowInclusive ? e.key >= s.low : e.key > s.low) &&
            (s.highInclusive ? e.key <= s.high : e.key < s.high),
        );
        if (s.reverse) inRange.reverse();
        const page = inRange.slice(0, s.limit);
        const result: RangeResult = [
          page.map((e) => modelProject(e.item, s.attributes)),
          page.length === 0 ? null : page[page.length - 1].key,
          inRange.length > page.length,
          s.withKeys ? page.map((e) => e.key) : null,
        ];
        return ok(result);
      }
      case SliceOp.Scan: {
        const [, table, fromSlice, afterKey, limit, attributes] = op;
        const after = this.entries.filter(
          (e) =>
            e.table === table &&
            this.owned.has(e.slice) &&
            (e.slice > fromSlice || (e.slice === fromSlice && (afterKey === null || e.key > afterKey))),
        );
        const page = after.slice(0, limit);
        const result: ScanResult = [page.map((e) => [e.slice, e.key, modelProject(e.item, attributes)]), after.length <= limit];
        return ok(result);
      }
      case SliceOp.Stats: {
        const [, table] = op;
        const stats: StorageStats = [];
        for (const e of this.entries) {
          if (e.table !== table || !this.owned.has(e.slice)) continue;
          const last = stats[stats.length - 1];
          if (last?.[0] === e.slice) {
            last[1]++;
            last[2] += e.bytes;
          } else stats.push([e.slice, 1, e.bytes]);
        }
        return ok(stats);
      }
      case SliceOp.DropTable: {
        const [, table] = op;
        this.entries = this.entries.filter((e) => e.table !== table);
        return ok(this.created.delete(table));
      }
      default:
        throw new Error(`the model does not do op ${op[0]}`);
    }
  }
}

/** Error results compare by code only; messages are for people. */
/** The model keeps no load figures: of Stats, it compares [slice, items, bytes] of slices that hold items. */
type StorageStats = [slice: number, items: number, bytes: number][];
const storageOnly = (r: SliceOpResult): SliceOpResult =>
  r[0] === RESULT_ERROR ? r : [r[0], (r[1] as StatsResult)[0].filter((s) => s[1] > 0).map((s) => [s[0], s[1], s[2]])];
const comparable = (r: SliceOpResult) => (r[0] === RESULT_ERROR ? [r[0], r[1]] : r);

// ---- random ops ---------------------------------------------------------------------

const NAMES = ['a', 'b', 'c', 'n'];
const value: fc.Arbitrary<Value> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -5, max: 5 }) },
  { weight: 1, arbitrary: fc.constantFrom(0.5, -0.25, 1e308, -1e308) },
  { weight: 2, arbitrary: fc.string({ maxLength: 5 }) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('x', 'y'), fc.integer({ min: 0, max: 9 }), { maxKeys: 2 }) },
);
const attrs = fc.dictionary(fc.constantFrom(...NAMES), value, { maxKeys: 3 });
const names = fc.uniqueArray(fc.constantFrom(...NAMES), { maxLength: 2 });
const projection = fc.option(fc.subarray(['a', 'b', 'zz', NAME_ATTRIBUTE]), { freq: 3 });
/** Any key, though mostly one in slice OWNED[0], so that items get updated, deleted and paged through. */
const HOT = KEYS.flatMap((k, i) => (k.slice === OWNED[0] ? [i] : []));
const keyIndex = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...HOT) }, { weight: 1, arbitrary: fc.nat({ max: KEYS.length - 1 }) });
/** Usually the key's own slice; now and then a slice this worker does not own. */
const sliceOverride = fc.oneof({ weight: 11, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...FOREIGN) });

type OpDesc =
  | { kind: 'put'; k: number; attrs: Item; slice: number | null }
  | { kind: 'get'; k: number; attributes: string[] | null; slice: number | null }
  | { kind: 'delete'; k: number; slice: number | null }
  | { kind: 'update'; k: number; set: Item | null; remove: string[] | null; add: Record<string, number> | null; returnValues: UpdateSpec['returnValues']; slice: number | null }
  | { kind: 'range'; table: number; slice: number; low: number; high: number; ordered: boolean; lowInclusive: boolean; highInclusive: boolean; reverse: boolean; limit: number; attributes: string[] | null }
  | { kind: 'scan'; table: number; fromSlice: number; afterKey: number | null; limit: number; attributes: string[] | null }
  | { kind: 'stats'; table: number }
  | { kind: 'drop'; table: number };

const opDesc: fc.Arbitrary<OpDesc> = fc.oneof(
  { weight: 32, arbitrary: fc.record({ kind: fc.constant('put' as const), k: keyIndex, attrs, slice: sliceOverride }) },
  { weight: 12, arbitrary: fc.record({ kind: fc.constant('get' as const), k: keyIndex, attributes: projection, slice: sliceOverride }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('delete' as const), k: keyIndex, slice: sliceOverride }) },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant('update' as const),
      k: keyIndex,
      set: fc.option(attrs, { freq: 3 }),
      remove: fc.option(names, { freq: 3 }),
      add: fc.option(
        fc.dictionary(fc.constantFrom(...NAMES), fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(0.5, 1e308)), { minKeys: 1, maxKeys: 2 }),
        { freq: 2 },
      ),
      returnValues: fc.constantFrom('none' as const, 'old' as const, 'new' as const),
      slice: sliceOverride,
    }),
  },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant('range' as const),
      table: fc.constantFrom(...TABLES),
      slice: fc.oneof(
        { weight: 6, arbitrary: fc.constant(OWNED[0]) },
        { weight: 4, arbitrary: fc.constantFrom(...OWNED) },
        { weight: 1, arbitrary: fc.constantFrom(...FOREIGN) },
      ),
      low: fc.nat(),
      high: fc.nat(),
      ordered: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      lowInclusive: fc.boolean(),
      highInclusive: fc.boolean(),
      reverse: fc.boolean(),
      limit: fc.integer({ min: 1, max: 6 }),
      attributes: projection,
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('scan' as const),
      table: fc.constantFrom(...TABLES),
      fromSlice: fc.integer({ min: 0, max: 8 }),
      afterKey: fc.option(keyIndex, { freq: 3 }),
      limit: fc.integer({ min: 1, max: 12 }),
      attributes: projection,
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('stats' as const), table: fc.constantFrom(...TABLES) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const), table: fc.constantFrom(...TABLES) }) },
);

/** A fresh op message for a description (the store keeps and stamps the items it is given). */
function toMessage(d: OpDesc): SliceOpMessage {
  switch (d.kind) {
    case 'put': {
      const ref = KEYS[d.k];
      const item: Item = { ...structuredClone(d.attrs), [NAME_ATTRIBUTE]: ref.name };
      return [SliceOp.Put, ref.table, d.slice ?? ref.slice, ref.key, item, itemBytes(item)];
    }
    case 'get': {
      const ref = KEYS[d.k];
      return [SliceOp.Get, ref.table, d.slice ?? ref.slice, ref.key, d.attributes];
    }
    case 'delete': {
      const ref = KEYS[d.k];
      return [SliceOp.Delete, ref.table, d.slice ?? ref.slice, ref.key];
    }
    case 'update': {
      // As the coordinator does: no name in more than one clause.
      const set = d.set === null ? null : structuredClone(d.set);
      const remove = d.remove === null ? null : d.remove.filter((n) => !(set !== null && n in set));
      const add = d.add === null ? null : Object.fromEntries(Object.entries(d.add).filter(([n]) => !(set !== null && n in set) && !remove?.includes(n)));
      const ref = KEYS[d.k];
      const spec: UpdateSpec = { base: { [NAME_ATTRIBUTE]: ref.name }, set, remove, add, returnValues: d.returnValues };
      return [SliceOp.Update, ref.table, d.slice ?? ref.slice, ref.key, spec];
    }
    case 'range': {
      const bounds = BOUNDS.get(d.table)!;
      let [low, high] = [bounds[d.low % bounds.length], bounds[d.high % bounds.length]];
      if (d.ordered && low > high) [low, high] = [high, low]; // mostly low <= high, sometimes not
      const spec: RangeSpec = {
        low,
        lowInclusive: d.lowInclusive,
        high,
        highInclusive: d.highInclusive,
        reverse: d.reverse,
        limit: d.limit,
        attributes: d.attributes,
        withKeys: d.limit % 2 === 0,
      };
      return [SliceOp.Range, d.table, d.slice, spec];
    }
    case 'scan':
      return [SliceOp.Scan, d.table, d.fromSlice, d.afterKey === null ? null : KEYS[d.afterKey].key, d.limit, d.attributes];
    case 'stats':
      return [SliceOp.Stats, d.table];
    case 'drop':
      return [SliceOp.DropTable, d.table];
  }
}

function newStore(clock: () => number): SliceStore {
  const store = new SliceStore(WORKER_INDEX, WORKER_COUNT, clock);
  expect(store.execute([SliceOp.Assign, 1, OWNED])).toEqual([RESULT_OK, null]);
  return store;
}

// ---- the model test ---------------------------------------------------------------------

describe('SliceStore against a sorted-array model', () => {
  it('gives the same result for every op of many seeded random runs', () => {
    const seen = { ops: 0, errors: new Map<string, number>(), rangesWithMore: 0, nonEmptyRanges: 0, nonEmptyScans: 0 };
    fc.assert(
      fc.property(fc.array(opDesc, { minLength: 1, maxLength: 200, size: 'max' }), (descs) => {
        let now = 1_000;
        const store = newStore(() => now);
        const model = new Model(new Set(OWNED));
        descs.forEach((d, i) => {
          now++;
          const op = toMessage(d);
          const expected = model.execute(structuredClone(op), now);
          const actual = op[0] === SliceOp.Stats ? storageOnly(store.execute(op)) : store.execute(op);
          expect(comparable(actual), `op ${i}: ${JSON.stringify(d)}`).toEqual(comparable(expected));
          seen.ops++;
          if (actual[0] === RESULT_ERROR) seen.errors.set(actual[1], (seen.errors.get(actual[1]) ?? 0) + 1);
          else if (op[0] === SliceOp.Range) {
            const [items, , more] = actual[1] as RangeResult;
            if (items.length > 0) seen.nonEmptyRanges++;
            if (more) seen.rangesWithMore++;
          } else if (op[0] === SliceOp.Scan && (actual[1] as ScanResult)[0].length > 0) seen.nonEmptyScans++;
        });
        // And the whole state, table by table.
        for (const table of TABLES) {
          const all: SliceOpMessage = [SliceOp.Scan, table, 0, null, 1_000, null];
          expect(store.execute(all)).toEqual(model.execute(all, now));
          const stats: SliceOpMessage = [SliceOp.Stats, table];
          expect(storageOnly(store.execute(stats))).toEqual(model.execute(stats, now));
        }
      }),
      { seed: SEED, numRuns: 80 },
    );
    // The generator reaches what it is meant to.
    expect(seen.ops).toBeGreaterThan(5_000);
    for (const code of ['WrongOwner', 'ValidationError']) expect(seen.errors.get(code) ?? 0, code).toBeGreaterThan(20);
    expect(seen.nonEmptyRanges).toBeGreaterThan(200);
    expect(seen.rangesWithMore).toBeGreaterThan(50);
    expect(seen.nonEmptyScans).toBeGreaterThan(50);
  });
});

// ---- ownership -----------------------------------------------------------------------------

describe('ownership', () => {
  const key = KEYS[0];

  it('every op on a slice the worker does not own is a WrongOwner error, and changes nothing', () => {
    const store = newStore(() => 1);
    expect(store.execute([SliceOp.Put, key.table, key.slice, key.key, { [NAME_ATTRIBUTE]: key.name }, 10])[0]).toBe(RESULT_OK);
    const before = store.execute([SliceOp.Scan, key.table, 0, null, 1000, null]);
    for (const slice of FOREIGN) {
      const spec: UpdateSpec = { base: {}, set: { a: 1 }, remove: null, add: null, returnValues: 'new' };
      const range: RangeSpec = { low: '', lowInclusive: true, high: '\xff', highInclusive: true, reverse: false, limit: 10, attributes: null, withKeys: false };
      const ops: SliceOpMessage[] = [
        [SliceOp.Put, key.table, slice, key.key, { a: 1 }, 10],
        [SliceOp.Get, key.table, slice, key.key, null],
        [SliceOp.Delete, key.table, slice, key.key],
        [SliceOp.Update, key.table, slice, key.key, spec],
        [SliceOp.Range, key.table, slice, range],
      ];
      for (const op of ops) {
        const result = store.execute(op);
        expect(result[0], `op ${op[0]} on slice ${slice}`).toBe(RESULT_ERROR);
        expect(result[1], `op ${op[0]} on slice ${slice}`).toBe('WrongOwner');
      }
    }
    expect(store.execute([SliceOp.Scan, key.table, 0, null, 1000, null])).toEqual(before);
  });

  it('a slice assigned away answers WrongOwner; a scan skips it', () => {
    const store = newStore(() => 1);
    store.execute([SliceOp.Put, key.table, 4, key.key, { [NAME_ATTRIBUTE]: key.name }, 10]);
    expect(store.execute([SliceOp.Assign, 2, [1, 7]])).toEqual([RESULT_OK, null]);
    expect(store.execute([SliceOp.Get, key.table, 4, key.key, null])[1]).toBe('WrongOwner');
    expect(store.execute([SliceOp.Scan, key.table, 0, null, 1000, null])).toEqual([RESULT_OK, [[], true]]);
  });

  it('being assigned another worker\'s slice is a broken invariant, not an error result', () => {
    const store = newStore(() => 1);
    expect(() => store.execute([SliceOp.Assign, 2, [2]])).toThrow(/invariant/);
  });
});

// ---- updates that fail change nothing ---------------------------------------------------------

describe('failed updates', () => {
  const ref = KEYS[1];
  const update = (store: SliceStore, spec: Partial<UpdateSpec>) =>
    store.execute([SliceOp.Update, ref.table, ref.slice, ref.key, { base: {}, set: null, remove: null, add: null, returnValues: 'new', ...spec }]);
  const get = (store: SliceStore) => store.execute([SliceOp.Get, ref.table, ref.slice, ref.key, null]);

  function storeWith(item: Item): { store: SliceStore; tick: () => void } {
    let now = 100;
    const store = newStore(() => now);
    expect(store.execute([SliceOp.Put, ref.table, ref.slice, ref.key, item, itemBytes(item)])[0]).toBe(RESULT_OK);
    return { store, tick: () => now++ };
  }

  it('adding to a string attribute is a ValidationError and leaves the item unchanged', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name, s: 'text', n: 1 });
    const before = structuredClone(get(store));
    tick();
    const result = update(store, { set: { m: 5 }, remove: ['n'], add: { s: 1 } });
    expect(result.slice(0, 2)).toEqual([RESULT_ERROR, 'ValidationError']);
    expect(get(store)).toEqual(before);
  });

  it('an add that overflows to Infinity is a ValidationError and leaves the item unchanged', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name, n: 1e308 });
    const before = structuredClone(get(store));
    tick();
    expect(update(store, { set: { m: 5 }, add: { n: 1e308 } }).slice(0, 2)).toEqual([RESULT_ERROR, 'ValidationError']);
    expect(get(store)).toEqual(before);
  });

  it('an update making the item larger than ITEM_BYTES_MAX is ItemTooLarge and changes nothing', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name, big: 'x'.repeat(300_000), n: 1 });
    const before = structuredClone(get(store));
    tick();
    expect(update(store, { set: { more: 'y'.repeat(120_000) }, add: { n: 1 } }).slice(0, 2)).toEqual([RESULT_ERROR, 'ItemTooLarge']);
    expect(get(store)).toEqual(before);
  });

  it('an update to exactly ITEM_BYTES_MAX (counting __mtime) succeeds; one byte more does not', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name });
    const overhead = itemBytes({ [NAME_ATTRIBUTE]: ref.name, big: '', [MTIME_ATTRIBUTE]: 0 });
    tick();
    expect(update(store, { set: { big: 'x'.repeat(ITEM_BYTES_MAX - overhead + 1) } }).slice(0, 2)).toEqual([RESULT_ERROR, 'ItemTooLarge']);
    tick();
    const result = update(store, { set: { big: 'x'.repeat(ITEM_BYTES_MAX - overhead) } });
    expect(result[0]).toBe(RESULT_OK);
    expect(itemBytes(result[1] as Item)).toBe(ITEM_BYTES_MAX);
  });

  it('a no-op update of an item the coordinator accepted at ITEM_BYTES_MAX succeeds', () => {
    // The coordinator counts __mtime in a Put's size (putOp), as Update does.
    const base: Item = { [NAME_ATTRIBUTE]: ref.name, [MTIME_ATTRIBUTE]: 0, a: 1, big: '' };
    const item: Item = { ...base, big: 'x'.repeat(ITEM_BYTES_MAX - itemBytes(base)) };
    expect(itemBytes(item)).toBe(ITEM_BYTES_MAX);
    const { store, tick } = storeWith(item);
    tick();
    const result = update(store, { set: { a: 1 } });
    expect(result[0] === RESULT_ERROR ? result[1] : 'ok').toBe('ok');
  });

  it('adding to a null attribute is a ValidationError (only a missing one counts as 0)', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name, n: null });
    tick();
    expect(update(store, { add: { n: 1 } }).slice(0, 2)).toEqual([RESULT_ERROR, 'ValidationError']);
  });
});

// ---- paging --------------------------------------------------------------------------------

describe('paging', () => {
  const keysA = KEYS.filter((k) => k.table === TABLE_A);

  /** All pages of a range, each continuing after the previous page's lastKey. */
  function pages(store: SliceStore, slice: number, first: RangeSpec): Item[][] {
    const out: Item[][] = [];
    const spec = { ...first };
    for (let guard = 0; guard < 1000; guard++) {
      const result = store.execute([SliceOp.Range, TABLE_A, slice, spec]);
      expect(result[0]).toBe(RESULT_OK);
      const [items, lastKey, more] = result[1] as RangeResult;
      out.push(items);
      if (!more) return out;
      expect(items.length).toBeGreaterThan(0);
      expect(lastKey).not.toBeNull();
      if (spec.reverse) Object.assign(spec, { high: lastKey, highInclusive: false });
      else Object.assign(spec, { low: lastKey, lowInclusive: false });
    }
    throw new Error('paging did not end');
  }

  it('Range continuation with lastKey as an exclusive bound visits every item exactly once, for any limit', () => {
    const bounds = BOUNDS.get(TABLE_A)!;
    fc.assert(
      fc.property(
        fc.subarray(keysA, { minLength: 0 }),
        fc.constantFrom(...bounds),
        fc.constantFrom(...bounds),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: 1, max: 8 }),
        (present, low, high, lowInclusive, highInclusive, reverse, limit) => {
          const store = newStore(() => 1);
          const slice = OWNED[0];
          for (const ref of present) store.execute([SliceOp.Put, TABLE_A, slice, ref.key, { [NAME_ATTRIBUTE]: ref.name }, 10]);
          const expected = present
            .filter((r) => (lowInclusive ? r.key >= low : r.key > low) && (highInclusive ? r.key <= high : r.key < high))
            .sort((a, b) => compareStrings(a.key, b.key))
            .map((r) => r.name);
          if (reverse) expected.reverse();
          const got = pages(store, slice, { low, lowInclusive, high, highInclusive, reverse, limit, attributes: null, withKeys: true });
          for (const page of got.slice(0, -1)) expect(page.length).toBe(limit);
          expect(got.flat().map((item) => item[NAME_ATTRIBUTE])).toEqual(expected);
        },
      ),
      { seed: SEED, numRuns: 1500 },
    );
  });

  it('Scan continuation after (slice, key) visits every item of the worker exactly once, in (slice, key) order', () => {
    fc.assert(
      fc.property(fc.subarray(KEYS), fc.integer({ min: 1, max: 8 }), (present, limit) => {
        const store = newStore(() => 1);
        for (const ref of present) store.execute([SliceOp.Put, ref.table, ref.slice, ref.key, { [NAME_ATTRIBUTE]: ref.name }, 10]);
        for (const table of TABLES) {
          const expected = present
            .filter((r) => r.table === table)
            .sort((a, b) => a.slice - b.slice || compareStrings(a.key, b.key))
            .map((r) => r.name);
          const got: string[] = [];
          let from: [number, string | null] = [0, null];
          for (let guard = 0; ; guard++) {
            expect(guard).toBeLessThan(1000);
            const [entries, exhausted] = store.execute([SliceOp.Scan, table, from[0], from[1], limit, null])[1] as ScanResult;
            got.push(...entries.map(([, , item]) => item[NAME_ATTRIBUTE] as string));
            if (exhausted) break;
            expect(entries.length).toBe(limit);
            const last = entries[entries.length - 1];
            from = [last[0], last[1]];
          }
          expect(got).toEqual(expected);
        }
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('a page stops once it holds PAGE_BYTES_MAX bytes, and paging still visits every item once', () => {
    const store = newStore(() => 1);
    const itemSize = 300 * 1024;
    const refs = keysA.filter((k) => k.slice === OWNED[0]).slice(0, 7);
    for (const ref of refs) {
      const item: Item = { [NAME_ATTRIBUTE]: ref.name, big: 'x'.repeat(itemSize) };
      store.execute([SliceOp.Put, TABLE_A, OWNED[0], ref.key, item, itemBytes(item)]);
    }
    for (const reverse of [false, true]) {
      const got = pages(store, OWNED[0], { low: '', lowInclusive: true, high: '\xff', highInclusive: true, reverse, limit: 1000, attributes: null, withKeys: false });
      for (const page of got) {
        const bytes = page.map(itemBytes);
        // Items are added while the page is under budget: without its last item, a page is under it.
        expect(bytes.slice(0, -1).reduce((a, b) => a + b, 0)).toBeLessThan(PAGE_BYTES_MAX);
      }
      expect(got.length).toBeGreaterThan(1);
      const names = refs.map((r) => r.name).sort((a, b) => compareStrings(KEYS.find((k) => k.name === a)!.key, KEYS.find((k) => k.name === b)!.key));
      if (reverse) names.reverse();
      expect(got.flat().map((item) => item[NAME_ATTRIBUTE])).toEqual(names);
    }
  });
});

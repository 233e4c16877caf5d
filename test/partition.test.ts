// SliceStore (slice-worker/partition.ts) against a dumb model: a plain array of
// [table, slice, key, item] kept sorted, with its own small evaluator of
// conditions, filters, projections and structured updates. Seeded random runs
// of slice ops go to both and every result is compared; a failure replays from
// the seed (and fast-check shrinks it to a short op list). Then the cases the
// model run does not reach on its own: ownership, failed updates, size limits,
// paging (limit and byte budget count examined items, filtered out or not).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Comparator, Condition, Operand, Path, TypeName, UpdateAction } from '../shared/expression-ast.js';
import { TYPE_NAMES } from '../shared/expression-ast.js';
import { encodeKeyPart, encodeKeyPrefix, prefixEnd, type KeyType, type KeyValue } from '../shared/key-encoding.js';
import { ITEM_BYTES_MAX, PAGE_BYTES_MAX } from '../shared/limits.js';
import type { ErrorCode } from '../shared/errors.js';
import {
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  sliceSetOf,
  slicesIn,
  type SliceSet,
  type Projection,
  type RangeResult,
  type RangeSpec,
  type ScanResult,
  type SliceOpMessage,
  type SliceOpResult,
  type StatsResult,
  type UpdateSpec,
  type WriteCheck,
  KEPT_IN_LIST,
  unpackClientList,
} from '../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, type Item, type Value } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';
import { pageBytes } from './page-bytes.js';

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
const err = (code: ErrorCode, details?: { item: Item | null }): SliceOpResult =>
  details === undefined ? [RESULT_ERROR, code, ''] : [RESULT_ERROR, code, '', details];

// The model's own reading of docs/expressions.md, independent of
// expression-eval.ts: values, conditions, projections.

const isMapValue = (v: Value | undefined): v is { [name: string]: Value } =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

function modelValueAt(item: Item, path: Path): Value | undefined {
  let cur: Value | undefined = item;
  for (const step of path) {
    if (typeof step === 'number') cur = Array.isArray(cur) && step < cur.length ? cur[step] : undefined;
    else cur = isMapValue(cur) && Object.hasOwn(cur, step) ? cur[step] : undefined;
    if (cur === undefined) return undefined;
  }
  return cur;
}

function modelEqual(a: Value, b: Value): boolean {
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    return a instanceof Uint8Array && b instanceof Uint8Array && a.length === b.length && a.every((x, i) => x === b[i]);
  }
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => modelEqual(x, b[i]));
  if (isMapValue(a) || isMapValue(b)) {
    if (!isMapValue(a) || !isMapValue(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && modelEqual(a[k], b[k]));
  }
  return a === b;
}

function compareByteArrays(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** Sign of the order of two numbers, two strings (UTF-8 byte order) or two binaries; null otherwise. */
function modelOrder(a: Value | undefined, b: Value | undefined): number | null {
  if (typeof a === 'number' && typeof b === 'number') return Math.sign(a - b);
  if (typeof a === 'string' && typeof b === 'string') return Math.sign(compareByteArrays(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Math.sign(compareByteArrays(a, b));
  return null;
}

function modelSize(v: Value | undefined): number | undefined {
  if (typeof v === 'string') return Buffer.from(v, 'utf8').length;
  if (v instanceof Uint8Array || Array.isArray(v)) return v.length;
  if (isMapValue(v)) return Object.keys(v).length;
  return undefined;
}

function modelOperand(o: Operand, item: Item): Value | undefined {
  return o.k === 'path' ? modelValueAt(item, o.path) : o.k === 'value' ? o.v : modelSize(modelOperand(o.a, item));
}

function modelTypeName(v: Value): TypeName {
  if (typeof v === 'string') return 'S';
  if (typeof v === 'number') return 'N';
  if (typeof v === 'boolean') return 'BOOL';
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return 'B';
  return Array.isArray(v) ? 'L' : 'M';
}

function modelEvaluate(c: Condition, item: Item): boolean {
  switch (c.k) {
    case 'and':
      return modelEvaluate(c.a, item) && modelEvaluate(c.b, item);
    case 'or':
      return modelEvaluate(c.a, item) || modelEvaluate(c.b, item);
    case 'not':
      return !modelEvaluate(c.a, item);
    case 'cmp': {
      const a = modelOperand(c.a, item);
      const b = modelOperand(c.b, item);
      const equal = a !== undefined && b !== undefined && modelEqual(a, b);
      if (c.op === '=') return equal;
      if (c.op === '<>') return !equal;
      const order = modelOrder(a, b);
      if (order === null) return false;
      return { '<': order < 0, '<=': order <= 0, '>': order > 0, '>=': order >= 0 }[c.op];
    }
    case 'between': {
      const a = modelOperand(c.a, item);
      const low = modelOrder(a, modelOperand(c.low, item));
      const high = modelOrder(a, modelOperand(c.high, item));
      return low !== null && high !== null && low >= 0 && high <= 0;
    }
    case 'in': {
      const a = modelOperand(c.a, item);
      return a !== undefined && c.list.some((o) => {
        const v = modelOperand(o, item);
        return v !== undefined && modelEqual(a, v);
      });
    }
    case 'exists':
      return modelValueAt(item, c.path) !== undefined;
    case 'notExists':
      return modelValueAt(item, c.path) === undefined;
    case 'type': {
      const v = modelOperand(c.a, item);
      return v !== undefined && modelTypeName(v) === c.type;
    }
    case 'beginsWith': {
      const a = modelOperand(c.a, item);
      const b = modelOperand(c.b, item);
      if (typeof a === 'string' && typeof b === 'string') return a.slice(0, b.length) === b;
      if (a instanceof Uint8Array && b instanceof Uint8Array) return b.length <= a.length && b.every((x, i) => a[i] === x);
      return false;
    }
    case 'contains': {
      const a = modelOperand(c.a, item);
      const b = modelOperand(c.b, item);
      if (b === undefined) return false;
      if (typeof a === 'string') return typeof b === 'string' && a.includes(b);
      if (a instanceof Uint8Array) {
        if (!(b instanceof Uint8Array)) return false;
        for (let i = 0; i + b.length <= a.length; i++) if (b.every((x, j) => a[i + j] === x)) return true;
        return false;
      }
      if (Array.isArray(a)) return a.some((e) => modelEqual(e, b));
      return false;
    }
  }
}

/** Projections of top-level paths and of two-step paths (a map entry or a list
 * element of a top-level attribute); the generators make no other kind and no
 * overlapping paths. Picked list elements come back in index order, without gaps. */
function modelProject(item: Item, projection: Projection): Item {
  if (projection === null) return item;
  const picks = new Map<string, (string | number)[] | 'whole'>();
  for (const path of projection) {
    if (path.length > 2 || typeof path[0] !== 'string') throw new Error(`the model does not project ${JSON.stringify(path)}`);
    const name = path[0];
    const sub = picks.get(name);
    if (path.length === 1) picks.set(name, 'whole');
    else if (sub !== 'whole') picks.set(name, [...(sub ?? []), path[1]]);
  }
  const out: Item = {};
  for (const [name, pick] of picks) {
    if (!Object.hasOwn(item, name)) continue;
    const v = item[name];
    if (pick === 'whole') out[name] = v;
    else if (Array.isArray(v)) {
      const indexes = pick.filter((i): i is number => typeof i === 'number' && i < v.length).sort((a, b) => a - b);
      if (indexes.length > 0) out[name] = indexes.map((i) => v[i]);
    } else if (isMapValue(v)) {
      const m: { [name: string]: Value } = {};
      for (const k of pick) if (typeof k === 'string' && Object.hasOwn(v, k)) m[k] = v[k];
      if (Object.keys(m).length > 0) out[name] = m;
    }
  }
  for (const name of [NAME_ATTRIBUTE, MTIME_ATTRIBUTE]) if (Object.hasOwn(item, name)) out[name] = item[name];
  return out;
}

/** The single attribute name of a structured update action. */
function actionName(a: UpdateAction): string {
  if (a.path.length !== 1 || typeof a.path[0] !== 'string') throw new Error(`the model updates top-level attributes only, not ${JSON.stringify(a.path)}`);
  return a.path[0];
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

  /** A failed write check as an error result, or null when the write may go on. */
  private failedCheck(condition: Condition | null, oldOnFailure: boolean, old: Item | null): SliceOpResult | null {
    if (condition === null || modelEvaluate(condition, old ?? {})) return null;
    return err('ConditionalCheckFailed', oldOnFailure ? { item: old } : undefined);
  }

  /** The first items of `candidates` that fit under `limit` and the page byte budget. */
  private examine(candidates: Entry[], limit: number): Entry[] {
    let bytes = 0;
    let n = 0;
    while (n < candidates.length && n < limit && bytes < PAGE_BYTES_MAX) bytes += candidates[n++].bytes;
    return candidates.slice(0, n);
  }

  execute(op: SliceOpMessage, now: number): SliceOpResult {
    switch (op[0]) {
      case SliceOp.Put: {
        const [, table, slice, key, item, bytes, check] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        this.created.add(table);
        const i = this.find(table, slice, key);
        const old = i < 0 ? null : this.entries[i].item;
        const failed = check === null ? null : this.failedCheck(check.condition, check.oldOnFailure, old);
        if (failed !== null) return failed;
        this.upsert({ table, slice, key, item: { ...item, [MTIME_ATTRIBUTE]: now }, bytes });
        return ok(check?.returnOld ? old : null);
      }
      case SliceOp.Get: {
        const [, table, slice, key, projection] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        const i = this.find(table, slice, key);
        return ok(i < 0 ? null : modelProject(this.entries[i].item, projection));
      }
      case SliceOp.Delete: {
        const [, table, slice, key, check] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        const i = this.find(table, slice, key);
        const old = i < 0 ? null : this.entries[i].item;
        const failed = check === null ? null : this.failedCheck(check.condition, check.oldOnFailure, old);
        if (failed !== null) return failed;
        if (i >= 0) this.entries.splice(i, 1);
        return ok(check?.returnOld ? old : i >= 0);
      }
      case SliceOp.Update: {
        const [, table, slice, key, spec] = op;
        if (!this.owned.has(slice)) return err('WrongOwner');
        this.created.add(table);
        const i = this.find(table, slice, key);
        const old = i < 0 ? null : this.entries[i].item;
        const failed = this.failedCheck(spec.condition, spec.oldOnFailure, old);
        if (failed !== null) return failed;
        // Structured updates name each attribute once, so the order of SET, ADD and REMOVE does not matter.
        const next: Item = { ...(old ?? spec.base) };
        for (const a of spec.actions) {
          const name = actionName(a);
          if (a.k === 'set') {
            if (a.value.k !== 'value') throw new Error('the model sets plain values only');
            next[name] = a.value.v;
          } else if (a.k === 'remove') delete next[name];
          else {
            if (a.k !== 'add' || typeof a.n !== 'number') throw new Error('the model adds plain numbers only');
            const current = next[name] === undefined ? 0 : next[name]; // "a missing attribute starts from 0"
            if (typeof current !== 'number') return err('ValidationError');
            if (!Number.isFinite(current + a.n)) return err('ValidationError');
            next[name] = current + a.n;
          }
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
        const examined = this.examine(inRange, s.limit);
        const matched = examined.filter((e) => s.filter === null || modelEvaluate(s.filter, e.item));
        const result: RangeResult = [
          matched.map((e) => modelProject(e.item, s.projection)),
          examined.length === 0 ? null : examined[examined.length - 1].key,
          inRange.length > examined.length,
          s.withKeys ? matched.map((e) => e.key) : null,
          examined.length,
        ];
        return ok(result);
      }
      case SliceOp.Scan: {
        const [, table, fromSlice, afterKey, limit, projection, filter, set] = op;
        const slices = slicesIn(set, fromSlice);
        // Every slice it names, or none of it.
        if (slices.some((s) => !this.owned.has(s))) return err('WrongOwner');
        const after = this.entries.filter(
          (e) =>
            e.table === table &&
            slices.includes(e.slice) &&
            (e.slice > fromSlice || (e.slice === fromSlice && (afterKey === null || e.key > afterKey))),
        );
        const examined = this.examine(after, limit);
        const result: ScanResult = [
          examined.map((e) => [e.slice, e.key, filter === null || modelEvaluate(filter, e.item) ? modelProject(e.item, projection) : null, e.bytes]),
          after.length === examined.length,
          null,
        ];
        return ok(result);
      }
      case SliceOp.Stats: {
        const [, table, set] = op;
        const slices = slicesIn(set, 0);
        if (slices.some((s) => !this.owned.has(s))) return err('WrongOwner');
        const stats: StorageStats = [];
        for (const e of this.entries) {
          if (e.table !== table || !slices.includes(e.slice)) continue;
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

/** The model keeps no load figures: of Stats, it compares [slice, items, bytes] of slices that hold items. */
type StorageStats = [slice: number, items: number, bytes: number][];
const storageOnly = (r: SliceOpResult): SliceOpResult =>
  r[0] === RESULT_ERROR ? r : [r[0], (r[1] as StatsResult)[0].filter((s) => s[1] > 0).map((s) => [s[0], s[1], s[2]])];
/** Error results compare by code (and details, e.g. the old item of a failed condition); messages are for people. */
const comparable = (r: SliceOpResult) => (r[0] === RESULT_ERROR ? (r.length > 3 ? [r[0], r[1], r[3]] : [r[0], r[1]]) : r);

/** The store's answer with the items of a packed op (Range or Scan asked for the client's
 * form) read back into objects, to compare with the model's (which never packs). */
function unpacked(op: SliceOpMessage, r: SliceOpResult): SliceOpResult {
  if (r[0] !== RESULT_OK) return r;
  // The client's decoder gives binary values as Buffers; the store holds Uint8Arrays.
  const plain = (v: unknown): unknown =>
    v instanceof Uint8Array ? new Uint8Array(v) : Array.isArray(v) ? v.map(plain) : typeof v === 'object' && v !== null ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)])) : v;
  const list = (bytes: Uint8Array) => plain(unpackClientList(bytes)) as Item[];
  switch (op[0]) {
    case SliceOp.Range: {
      if (!op[3].packed) return r;
      const [items, ...rest] = r[1] as RangeResult;
      // The worker's answer writes a page not yet joined (PackedPage) into its bytes: read as the wire carries it.
      const bytes = pageBytes(items);
      expect(bytes).toBeInstanceOf(Uint8Array);
      return [RESULT_OK, [list(bytes as Uint8Array), ...rest]];
    }
    case SliceOp.Scan: {
      const [entries, exhausted, packed] = r[1] as ScanResult;
      if (!op[8]) {
        expect(packed).toBeNull();
        return r;
      }
      const items = list(packed!);
      let next = 0;
      const back = entries.map(([s, k, kept, b]) => [s, k, kept === null ? null : (expect(kept).toBe(KEPT_IN_LIST), items[next++]), b]);
      expect(next).toBe(items.length);
      return [RESULT_OK, [back, exhausted, null]];
    }
    default:
      return r;
  }
}

/** The structured update (set, remove, add) as update actions, the way the
 * coordinator builds them (coordinator/router/request-expressions.ts): one
 * single-step path per attribute, SETs, then REMOVEs, then ADDs. */
function structuredActions(set: Item | null, remove: string[] | null, add: Record<string, number> | null): UpdateAction[] {
  const actions: UpdateAction[] = [];
  for (const name of Object.keys(set ?? {})) actions.push({ k: 'set', path: [name], value: { k: 'value', v: set![name] } });
  for (const name of remove ?? []) actions.push({ k: 'remove', path: [name] });
  for (const [name, n] of Object.entries(add ?? {})) actions.push({ k: 'add', path: [name], n });
  return actions;
}

/** A scan's end slice that excludes no slice. */
const ALL_SLICES = 1 << 30;
/** The slices a router names in a scan of [from, to) (or a Stats, of every slice) to the worker that owns OWNED (and `foreign` too, as a router
 * whose map still gives it that slice would). */
const namedSlices = (from: number, to: number, foreign: number | null = null): SliceSet =>
  sliceSetOf(from, namedList(from, to, foreign));
const namedList = (from: number, to: number, foreign: number | null): number[] =>
  [...OWNED, ...(foreign === null ? [] : [foreign])].filter((s) => s >= from && s < to).sort((a, b) => a - b);

// ---- random ops ---------------------------------------------------------------------

const NAMES = ['a', 'b', 'c', 'n'];
/** Strings whose UTF-16 order differs from their code point (UTF-8) order. */
const ODD_STRINGS = ['é', '\uffff', '😀', 'a😀'];
const value: fc.Arbitrary<Value> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -5, max: 5 }) },
  { weight: 1, arbitrary: fc.constantFrom(0.5, -0.25, 1e308, -1e308) },
  { weight: 2, arbitrary: fc.string({ maxLength: 5 }) },
  { weight: 1, arbitrary: fc.constantFrom(...ODD_STRINGS) },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('x', 'y'), fc.integer({ min: 0, max: 9 }), { maxKeys: 2 }) },
);
const attrs = fc.dictionary(fc.constantFrom(...NAMES), value, { maxKeys: 3 });
const names = fc.uniqueArray(fc.constantFrom(...NAMES), { maxLength: 2 });
/** Whole attributes, map entries and list elements (in any order), never two overlapping paths. */
const PROJECTION_PATHS: Path[] = [['a'], ['zz'], [NAME_ATTRIBUTE], ['b', 'x'], ['b', 1], ['c', 'y'], ['c', 2], ['c', 0], ['n']];
const projection: fc.Arbitrary<Projection> = fc.option(fc.shuffledSubarray(PROJECTION_PATHS), { freq: 3 });

// Conditions (filters and write conditions), as the binder would let them through:
// no `a = a`, ordering comparisons and BETWEEN against strings, numbers and binaries only.
const CONDITION_PATHS: Path[] = [['a'], ['b'], ['c'], ['n'], ['zz'], [NAME_ATTRIBUTE], ['b', 'x'], ['c', 0]];
const conditionPath = fc.constantFrom(...CONDITION_PATHS);
const scalar: fc.Arbitrary<Value> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: -5, max: 5 }) },
  { weight: 2, arbitrary: fc.constantFrom('', 'a', 'M', 't1:', 't2', 't3:', ...ODD_STRINGS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 2 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2 }) },
);
const anyValue: fc.Arbitrary<Value> = fc.oneof(scalar, fc.constantFrom<Value>(null, true, false, [1], { x: 1 }));
const pathOperand = conditionPath.map((path): Operand => ({ k: 'path', path }));
const leftOperand: fc.Arbitrary<Operand> = fc.oneof({ weight: 4, arbitrary: pathOperand }, { weight: 1, arbitrary: pathOperand.map((a): Operand => ({ k: 'size', a })) });
const valueOperand = (v: fc.Arbitrary<Value>) => v.map((x): Operand => ({ k: 'value', v: x }));
const samePath = (a: Operand, b: Operand) => a.k === 'path' && b.k === 'path' && JSON.stringify(a.path) === JSON.stringify(b.path);
const sortedPair = <T extends Value>(arb: fc.Arbitrary<T>) => fc.tuple(arb, arb).map(([x, y]) => (modelOrder(x, y)! <= 0 ? [x, y] : [y, x]));
const leafCondition: fc.Arbitrary<Condition> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({
        op: fc.constantFrom<Comparator>('=', '<>', '<', '<=', '>', '>='),
        a: leftOperand,
        b: fc.oneof({ weight: 4, arbitrary: valueOperand(scalar) }, { weight: 1, arbitrary: pathOperand }),
      })
      .filter(({ a, b }) => !samePath(a, b))
      .map(({ op, a, b }): Condition => ({ k: 'cmp', op, a, b })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(leftOperand, fc.oneof(sortedPair(fc.integer({ min: -5, max: 5 })), sortedPair(fc.string({ maxLength: 2 }))))
      .map(([a, [low, high]]): Condition => ({ k: 'between', a, low: { k: 'value', v: low }, high: { k: 'value', v: high } })),
  },
  { weight: 1, arbitrary: fc.tuple(pathOperand, fc.array(valueOperand(anyValue), { minLength: 1, maxLength: 3 })).map(([a, list]): Condition => ({ k: 'in', a, list })) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('exists' as const, 'notExists' as const), conditionPath).map(([k, path]): Condition => ({ k, path })) },
  { weight: 1, arbitrary: fc.tuple(pathOperand, fc.constantFrom(...TYPE_NAMES)).map(([a, type]): Condition => ({ k: 'type', a, type })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(pathOperand, valueOperand(fc.oneof(fc.constantFrom('', 'a', 't1:', 't2'), fc.string({ maxLength: 1 }), fc.uint8Array({ maxLength: 1 }))))
      .map(([a, b]): Condition => ({ k: 'beginsWith', a, b })),
  },
  { weight: 1, arbitrary: fc.tuple(pathOperand, valueOperand(scalar)).map(([a, b]): Condition => ({ k: 'contains', a, b })) },
);
const condition: fc.Arbitrary<Condition> = fc.oneof(
  { weight: 5, arbitrary: leafCondition },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('and' as const, 'or' as const), leafCondition, leafCondition).map(([k, a, b]): Condition => ({ k, a, b })) },
  { weight: 1, arbitrary: leafCondition.map((a): Condition => ({ k: 'not', a })) },
);
/** Random conditions mostly leave an item out; their negations mostly keep it. */
const filter = fc.option(fc.oneof(condition, condition.map((a): Condition => ({ k: 'not', a }))), { freq: 2 });
/** Usually no check; else (mostly) a condition, and whether to return the old item. */
const writeCheck: fc.Arbitrary<WriteCheck | null> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.record({ condition: fc.option(condition, { freq: 4 }), returnOld: fc.boolean(), oldOnFailure: fc.boolean() }) },
);
/** An update's condition: now and then. */
const updateCondition = fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: condition });

/** Any key, though mostly one in slice OWNED[0], so that items get updated, deleted and paged through. */
const HOT = KEYS.flatMap((k, i) => (k.slice === OWNED[0] ? [i] : []));
const keyIndex = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...HOT) }, { weight: 1, arbitrary: fc.nat({ max: KEYS.length - 1 }) });
/** Usually the key's own slice; now and then a slice this worker does not own. */
const sliceOverride = fc.oneof({ weight: 11, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...FOREIGN) });

type OpDesc =
  | { kind: 'put'; k: number; attrs: Item; check: WriteCheck | null; slice: number | null }
  | { kind: 'get'; k: number; projection: Projection; slice: number | null }
  | { kind: 'delete'; k: number; check: WriteCheck | null; slice: number | null }
  | {
      kind: 'update';
      k: number;
      set: Item | null;
      remove: string[] | null;
      add: Record<string, number> | null;
      condition: Condition | null;
      oldOnFailure: boolean;
      returnValues: UpdateSpec['returnValues'];
      slice: number | null;
    }
  | {
      kind: 'range';
      table: number;
      slice: number;
      low: number;
      high: number;
      ordered: boolean;
      lowInclusive: boolean;
      highInclusive: boolean;
      reverse: boolean;
      limit: number;
      projection: Projection;
      filter: Condition | null;
    }
  | { kind: 'scan'; table: number; fromSlice: number; afterKey: number | null; limit: number; projection: Projection; filter: Condition | null; toSlice: number; foreign: number | null }
  | { kind: 'stats'; table: number; foreign: number | null }
  | { kind: 'drop'; table: number };

const opDesc: fc.Arbitrary<OpDesc> = fc.oneof(
  { weight: 32, arbitrary: fc.record({ kind: fc.constant('put' as const), k: keyIndex, attrs, check: writeCheck, slice: sliceOverride }) },
  { weight: 12, arbitrary: fc.record({ kind: fc.constant('get' as const), k: keyIndex, projection, slice: sliceOverride }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('delete' as const), k: keyIndex, check: writeCheck, slice: sliceOverride }) },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant('update' as const),
      k: keyIndex,
      set: fc.option(attrs, { freq: 3 }),
      remove: fc.option(names, { freq: 3 }),
      add: fc.option(
        fc.dictionary(fc.constantFrom(...NAMES), fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(0.5, 1e308)), { minKeys: 1, maxKeys: 2 }),
        { freq: 3 },
      ),
      condition: updateCondition,
      oldOnFailure: fc.boolean(),
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
      projection,
      filter,
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
      projection,
      filter,
      toSlice: fc.oneof({ weight: 3, arbitrary: fc.constant(ALL_SLICES) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 9 }) }),
      foreign: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...FOREIGN) }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('stats' as const),
      table: fc.constantFrom(...TABLES),
      foreign: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...FOREIGN) }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const), table: fc.constantFrom(...TABLES) }) },
);

/** A fresh op message for a description (the store keeps and stamps the items it is given). */
function toMessage(d: OpDesc): SliceOpMessage {
  switch (d.kind) {
    case 'put': {
      const ref = KEYS[d.k];
      const item: Item = { ...structuredClone(d.attrs), [NAME_ATTRIBUTE]: ref.name };
      return [SliceOp.Put, ref.table, d.slice ?? ref.slice, ref.key, item, itemBytes(item), structuredClone(d.check), null];
    }
    case 'get': {
      const ref = KEYS[d.k];
      return [SliceOp.Get, ref.table, d.slice ?? ref.slice, ref.key, structuredClone(d.projection), false];
    }
    case 'delete': {
      const ref = KEYS[d.k];
      return [SliceOp.Delete, ref.table, d.slice ?? ref.slice, ref.key, structuredClone(d.check), null];
    }
    case 'update': {
      // As the coordinator does: no name in more than one clause.
      const set = d.set === null ? null : structuredClone(d.set);
      const remove = d.remove === null ? null : d.remove.filter((n) => !(set !== null && n in set));
      const add = d.add === null ? null : Object.fromEntries(Object.entries(d.add).filter(([n]) => !(set !== null && n in set) && !remove?.includes(n)));
      const ref = KEYS[d.k];
      const spec: UpdateSpec = {
        base: { [NAME_ATTRIBUTE]: ref.name },
        actions: structuredActions(set, remove, add),
        condition: structuredClone(d.condition),
        oldOnFailure: d.oldOnFailure,
        returnValues: d.returnValues,
      };
      return [SliceOp.Update, ref.table, d.slice ?? ref.slice, ref.key, spec, null];
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
        projection: structuredClone(d.projection),
        filter: structuredClone(d.filter),
        withKeys: d.limit % 2 === 0,
        packed: d.limit % 3 === 0,
      };
      return [SliceOp.Range, d.table, d.slice, spec];
    }
    case 'scan':
      return [
        SliceOp.Scan,
        d.table,
        d.fromSlice,
        d.afterKey === null ? null : KEYS[d.afterKey].key,
        d.limit,
        structuredClone(d.projection),
        structuredClone(d.filter),
        namedSlices(d.fromSlice, d.toSlice, d.foreign),
        d.limit % 3 === 0,
      ];
    case 'stats':
      return [SliceOp.Stats, d.table, namedSlices(0, ALL_SLICES, d.foreign)];
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

/** The condition of a write op, if it has one. */
function writeCondition(op: SliceOpMessage): Condition | null {
  if (op[0] === SliceOp.Put) return op[6]?.condition ?? null;
  if (op[0] === SliceOp.Delete) return op[4]?.condition ?? null;
  if (op[0] === SliceOp.Update) return op[4].condition;
  return null;
}

describe('SliceStore against a sorted-array model', () => {
  it('gives the same result for every op of many seeded random runs', () => {
    const seen = {
      ops: 0,
      errors: new Map<string, number>(),
      rangesWithMore: 0,
      nonEmptyRanges: 0,
      nonEmptyScans: 0,
      filteredRangesWithItems: 0,
      filteredRangesAllLeftOut: 0,
      scanEntriesLeftOut: 0,
      scanEntriesKeptByFilter: 0,
      conditionalWritesDone: 0,
    };
    fc.assert(
      fc.property(fc.array(opDesc, { minLength: 1, maxLength: 200, size: 'max' }), (descs) => {
        let now = 1_000;
        const store = newStore(() => now);
        const model = new Model(new Set(OWNED));
        descs.forEach((d, i) => {
          now++;
          const op = toMessage(d);
          const expected = model.execute(structuredClone(op), now);
          const actual = op[0] === SliceOp.Stats ? storageOnly(store.execute(op)) : unpacked(op, store.execute(op));
          expect(comparable(actual), `op ${i}: ${JSON.stringify(d)}`).toEqual(comparable(expected));
          seen.ops++;
          if (actual[0] === RESULT_ERROR) seen.errors.set(actual[1], (seen.errors.get(actual[1]) ?? 0) + 1);
          else if (writeCondition(op) !== null) seen.conditionalWritesDone++;
          else if (op[0] === SliceOp.Range) {
            // Objects: unpacked read a packed page back into them.
            const [items, lastKey, more] = actual[1] as [Item[], ...unknown[]];
            if (items.length > 0) seen.nonEmptyRanges++;
            if (more) seen.rangesWithMore++;
            if (op[3].filter !== null && items.length > 0) seen.filteredRangesWithItems++;
            if (op[3].filter !== null && items.length === 0 && lastKey !== null) seen.filteredRangesAllLeftOut++;
          } else if (op[0] === SliceOp.Scan) {
            const [entries] = actual[1] as ScanResult;
            if (entries.length > 0) seen.nonEmptyScans++;
            if (op[6] !== null) {
              for (const [, , item] of entries) {
                if (item === null) seen.scanEntriesLeftOut++;
                else seen.scanEntriesKeptByFilter++;
              }
            }
          }
        });
        // And the whole state, table by table.
        for (const table of TABLES) {
          const all: SliceOpMessage = [SliceOp.Scan, table, 0, null, 1_000, null, null, sliceSetOf(0, OWNED), false];
          expect(store.execute(all)).toEqual(model.execute(all, now));
          const stats: SliceOpMessage = [SliceOp.Stats, table, sliceSetOf(0, OWNED)];
          expect(storageOnly(store.execute(stats))).toEqual(model.execute(stats, now));
        }
      }),
      { seed: SEED, numRuns: 80 },
    );
    // The generator reaches what it is meant to.
    expect(seen.ops).toBeGreaterThan(5_000);
    for (const code of ['WrongOwner', 'ValidationError', 'ConditionalCheckFailed']) expect(seen.errors.get(code) ?? 0, code).toBeGreaterThan(20);
    expect(seen.nonEmptyRanges).toBeGreaterThan(200);
    expect(seen.rangesWithMore).toBeGreaterThan(50);
    expect(seen.nonEmptyScans).toBeGreaterThan(50);
    expect(seen.conditionalWritesDone, 'conditional writes that went through').toBeGreaterThan(80);
    expect(seen.filteredRangesWithItems, 'filtered ranges that returned items').toBeGreaterThan(30);
    expect(seen.filteredRangesAllLeftOut, 'filtered ranges that examined items and returned none').toBeGreaterThan(25);
    expect(seen.scanEntriesLeftOut, 'scan entries a filter left out').toBeGreaterThan(40);
    expect(seen.scanEntriesKeptByFilter, 'scan entries a filter kept').toBeGreaterThan(40);
  });
});

// ---- load counters -------------------------------------------------------------------------

describe('load counters', () => {
  // COUNT's order in slice-load.ts: reads, writes, readBytes, writeBytes, throttled, duplicateWrites.
  const WRITES = 1;
  const WRITE_BYTES = 3;
  const stats = (store: SliceStore, table: number) => store.execute([SliceOp.Stats, table, sliceSetOf(0, OWNED)])[1] as StatsResult;
  /** The put's answer and the bytes it carried (the store adds __mtime to the item it keeps). */
  const put = (store: SliceStore, ref: KeyRef, item: Item, check: WriteCheck | null): [SliceOpResult, number] => {
    const bytes = itemBytes(item);
    return [store.execute([SliceOp.Put, ref.table, ref.slice, ref.key, item, bytes, check, null]), bytes];
  };

  it('count a put\'s bytes once (a conditional one only if it passed); the table\'s totals are its slices\' sums; a table dropped starts again from zero', () => {
    const store = newStore(() => 100);
    const refs = KEYS.filter((k) => k.table === KEYS[0].table).slice(0, 12);
    expect(new Set(refs.map((r) => r.slice)).size).toBeGreaterThan(1);
    const table = refs[0].table;
    let writes = 0;
    let written = 0;
    const passes: WriteCheck = { condition: { k: 'exists', path: [NAME_ATTRIBUTE] }, returnOld: false, oldOnFailure: false };
    const fails: WriteCheck = { condition: { k: 'notExists', path: [NAME_ATTRIBUTE] }, returnOld: false, oldOnFailure: false };
    for (const [i, ref] of refs.entries()) {
      const [first, firstBytes] = put(store, ref, { [NAME_ATTRIBUTE]: ref.name, n: i, pad: 'x'.repeat(i * 7) }, null); // new key
      const [second, secondBytes] = put(store, ref, { [NAME_ATTRIBUTE]: ref.name, n: i + 1 }, null); // overwrite
      const [refused] = put(store, ref, { [NAME_ATTRIBUTE]: ref.name, n: -1 }, fails); // a write with no bytes
      const [last, lastBytes] = put(store, ref, { [NAME_ATTRIBUTE]: ref.name, n: i + 2, more: 'y' }, passes);
      expect([first[0], second[0], refused[0], last[0]]).toEqual([RESULT_OK, RESULT_OK, RESULT_ERROR, RESULT_OK]);
      writes += 4;
      written += firstBytes + secondBytes + lastBytes;
    }
    const [slices, , totals] = stats(store, table);
    expect(totals[WRITES]).toBe(writes);
    expect(totals[WRITE_BYTES]).toBe(written);
    expect(slices.reduce((sum, s) => sum + s[5][WRITES], 0)).toBe(writes);
    expect(slices.reduce((sum, s) => sum + s[5][WRITE_BYTES], 0)).toBe(written);
    expect(store.execute([SliceOp.DropTable, table])).toEqual([RESULT_OK, true]);
    const ref = refs[0];
    const [again, bytes] = put(store, ref, { [NAME_ATTRIBUTE]: ref.name, n: 1 }, null);
    expect(again[0]).toBe(RESULT_OK);
    const [, , after] = stats(store, table);
    expect([after[WRITES], after[WRITE_BYTES]]).toEqual([1, bytes]);
  });
});

// ---- ownership -----------------------------------------------------------------------------

describe('ownership', () => {
  const key = KEYS[0];
  const scanAll = (table: number, slices = OWNED): SliceOpMessage => [SliceOp.Scan, table, 0, null, 1000, null, null, sliceSetOf(0, slices), false];

  it('every op on a slice the worker does not own is a WrongOwner error, and changes nothing', () => {
    const store = newStore(() => 1);
    expect(store.execute([SliceOp.Put, key.table, key.slice, key.key, { [NAME_ATTRIBUTE]: key.name }, 10, null, null])[0]).toBe(RESULT_OK);
    const before = store.execute(scanAll(key.table));
    const always: Condition = { k: 'exists', path: [NAME_ATTRIBUTE] };
    const never: Condition = { k: 'notExists', path: [NAME_ATTRIBUTE] };
    for (const slice of FOREIGN) {
      const spec: UpdateSpec = { base: {}, actions: structuredActions({ a: 1 }, null, null), condition: null, oldOnFailure: false, returnValues: 'new' };
      const range: RangeSpec = { low: '', lowInclusive: true, high: '\xff', highInclusive: true, reverse: false, limit: 10, projection: null, filter: null, withKeys: false, packed: false };
      const ops: SliceOpMessage[] = [
        [SliceOp.Put, key.table, slice, key.key, { a: 1 }, 10, null, null],
        [SliceOp.Put, key.table, slice, key.key, { a: 1 }, 10, { condition: never, returnOld: true, oldOnFailure: true }, null],
        [SliceOp.Get, key.table, slice, key.key, null, false],
        [SliceOp.Get, key.table, slice, key.key, [['a']], false],
        [SliceOp.Delete, key.table, slice, key.key, null, null],
        [SliceOp.Delete, key.table, slice, key.key, { condition: always, returnOld: true, oldOnFailure: false }, null],
        [SliceOp.Update, key.table, slice, key.key, spec, null],
        [SliceOp.Update, key.table, slice, key.key, { ...spec, condition: never, oldOnFailure: true }, null],
        [SliceOp.Range, key.table, slice, range],
        [SliceOp.Range, key.table, slice, { ...range, filter: always, withKeys: true }],
        [SliceOp.Scan, key.table, 0, null, 10, null, null, namedSlices(0, ALL_SLICES, slice), false],
        [SliceOp.Stats, key.table, namedSlices(0, ALL_SLICES, slice)],
      ];
      for (const op of ops) {
        const result = store.execute(op);
        expect(result[0], `op ${op[0]} on slice ${slice}`).toBe(RESULT_ERROR);
        expect(result[1], `op ${op[0]} on slice ${slice}`).toBe('WrongOwner');
      }
    }
    expect(store.execute(scanAll(key.table))).toEqual(before);
  });

  it('a slice assigned away answers WrongOwner; so does a scan that names it, where it answered without it', () => {
    const store = newStore(() => 1);
    store.execute([SliceOp.Put, key.table, 4, key.key, { [NAME_ATTRIBUTE]: key.name }, 10, null, null]);
    expect((store.execute(scanAll(key.table))[1] as ScanResult)[0].map((e) => e[0])).toEqual([4]);
    expect(store.execute([SliceOp.Assign, 2, [1, 7]])).toEqual([RESULT_OK, null]);
    expect(store.execute([SliceOp.Get, key.table, 4, key.key, null, false])[1]).toBe('WrongOwner');
    expect(store.execute(scanAll(key.table)).slice(0, 2)).toEqual([RESULT_ERROR, 'WrongOwner']);
    // The slices it still owns, named alone, are scanned.
    expect(store.execute(scanAll(key.table, [1, 7]))).toEqual([RESULT_OK, [[], true, null]]);
  });

  it('being assigned another worker\'s slice is a broken invariant, not an error result', () => {
    const store = newStore(() => 1);
    expect(() => store.execute([SliceOp.Assign, 2, [2]])).toThrow(/invariant/);
  });
});

// ---- updates that fail change nothing ---------------------------------------------------------

describe('failed updates', () => {
  const ref = KEYS[1];
  type Structured = { set?: Item; remove?: string[]; add?: Record<string, number>; condition?: Condition; oldOnFailure?: boolean };
  const update = (store: SliceStore, u: Structured) =>
    store.execute([
      SliceOp.Update,
      ref.table,
      ref.slice,
      ref.key,
      {
        base: {},
        actions: structuredActions(u.set ?? null, u.remove ?? null, u.add ?? null),
        condition: u.condition ?? null,
        oldOnFailure: u.oldOnFailure ?? false,
        returnValues: 'new',
      },
      null,
    ]);
  const get = (store: SliceStore) => store.execute([SliceOp.Get, ref.table, ref.slice, ref.key, null, false]);

  function storeWith(item: Item): { store: SliceStore; tick: () => void } {
    let now = 100;
    const store = newStore(() => now);
    expect(store.execute([SliceOp.Put, ref.table, ref.slice, ref.key, item, itemBytes(item), null, null])[0]).toBe(RESULT_OK);
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

  it('an update whose condition is false is ConditionalCheckFailed, carries the old item if asked, and changes nothing', () => {
    const { store, tick } = storeWith({ [NAME_ATTRIBUTE]: ref.name, n: 1 });
    const before = structuredClone(get(store));
    tick();
    const condition: Condition = { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 1 } };
    expect(update(store, { set: { m: 5 }, add: { n: 1 }, condition })).toEqual([RESULT_ERROR, 'ConditionalCheckFailed', expect.any(String)]);
    expect(update(store, { set: { m: 5 }, add: { n: 1 }, condition, oldOnFailure: true })).toEqual([
      RESULT_ERROR,
      'ConditionalCheckFailed',
      expect.any(String),
      { item: before[1] },
    ]);
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
    const before = structuredClone(get(store));
    tick();
    expect(update(store, { add: { n: 1 } }).slice(0, 2)).toEqual([RESULT_ERROR, 'ValidationError']);
    expect(get(store)).toEqual(before);
  });
});

// ---- paging --------------------------------------------------------------------------------

describe('paging', () => {
  const keysA = KEYS.filter((k) => k.table === TABLE_A);
  const keyOfName = new Map(KEYS.map((k) => [k.name, k.key]));
  /** Filters for paging, over items { __name, n: 0 | 1 | 2 }: some, most, none, all. */
  const PAGING_FILTERS: Condition[] = [
    { k: 'cmp', op: '=', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 0 } },
    { k: 'cmp', op: '<>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 1 } },
    { k: 'notExists', path: ['n'] },
    { k: 'exists', path: [NAME_ATTRIBUTE] },
  ];

  type Page = { items: Item[]; lastKey: string | null; more: boolean; keys: string[] | null };

  /** All pages of a range, each continuing after the previous page's lastKey. */
  function pages(store: SliceStore, slice: number, first: RangeSpec): Page[] {
    const out: Page[] = [];
    const spec = { ...first };
    for (let guard = 0; guard < 1000; guard++) {
      const result = store.execute([SliceOp.Range, TABLE_A, slice, spec]);
      expect(result[0]).toBe(RESULT_OK);
      const [items, lastKey, more, keys] = result[1] as RangeResult;
      if (!Array.isArray(items)) throw new Error('an unpacked range answers item objects');
      out.push({ items, lastKey, more, keys });
      if (!more) return out;
      if (spec.filter === null) expect(items.length).toBeGreaterThan(0);
      expect(lastKey).not.toBeNull();
      if (spec.reverse) Object.assign(spec, { high: lastKey, highInclusive: false });
      else Object.assign(spec, { low: lastKey, lowInclusive: false });
    }
    throw new Error('paging did not end');
  }

  /** Where each page ends among `keys` (in paging order): how many items it examined. */
  function examinedPerPage(got: Page[], keys: string[]): number[] {
    let at = 0;
    return got.map((page) => {
      const end = page.lastKey === null ? at : keys.indexOf(page.lastKey) + 1;
      expect(end, `lastKey ${JSON.stringify(page.lastKey)} is a later key in range`).toBeGreaterThan(page.lastKey === null ? -1 : at);
      const n = end - at;
      at = end;
      return n;
    });
  }

  it('Range continuation with lastKey as an exclusive bound visits every item exactly once, for any limit and filter', () => {
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
        fc.option(fc.constantFrom(...PAGING_FILTERS), { freq: 2 }),
        (present, low, high, lowInclusive, highInclusive, reverse, limit, filter) => {
          const store = newStore(() => 1);
          const slice = OWNED[0];
          const stored = present.map((ref, i) => ({ ref, item: { [NAME_ATTRIBUTE]: ref.name, n: i % 3 } as Item }));
          for (const { ref, item } of stored) store.execute([SliceOp.Put, TABLE_A, slice, ref.key, structuredClone(item), 10, null, null]);
          const inRange = stored
            .filter(({ ref: r }) => (lowInclusive ? r.key >= low : r.key > low) && (highInclusive ? r.key <= high : r.key < high))
            .sort((a, b) => compareStrings(a.ref.key, b.ref.key));
          if (reverse) inRange.reverse();
          const expected = inRange.filter((e) => filter === null || modelEvaluate(filter, e.item)).map((e) => e.ref.name);
          const got = pages(store, slice, { low, lowInclusive, high, highInclusive, reverse, limit, projection: null, filter, withKeys: true, packed: false });
          // `limit` counts examined items, whether the filter keeps them or not.
          const examined = examinedPerPage(got, inRange.map((e) => e.ref.key));
          for (const n of examined.slice(0, -1)) expect(n).toBe(limit);
          expect(examined[examined.length - 1]).toBeLessThanOrEqual(limit);
          expect(examined.reduce((a, b) => a + b, 0)).toBe(inRange.length);
          for (const page of got) expect(page.keys).toEqual(page.items.map((item) => keyOfName.get(item[NAME_ATTRIBUTE] as string)));
          expect(got.flatMap((p) => p.items).map((item) => item[NAME_ATTRIBUTE])).toEqual(expected);
        },
      ),
      { seed: SEED, numRuns: 1500 },
    );
  });

  it('Scan continuation after (slice, key) visits every item of the worker exactly once, in (slice, key) order, for any filter and end slice', () => {
    fc.assert(
      fc.property(
        fc.subarray(KEYS),
        fc.integer({ min: 1, max: 8 }),
        fc.option(fc.constantFrom(...PAGING_FILTERS), { freq: 2 }),
        fc.oneof({ weight: 2, arbitrary: fc.constant(ALL_SLICES) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 8 }) }),
        (present, limit, filter, toSlice) => {
          const store = newStore(() => 1);
          const stored = present.map((ref, i) => ({ ref, item: { [NAME_ATTRIBUTE]: ref.name, n: i % 3 } as Item }));
          for (const { ref, item } of stored) store.execute([SliceOp.Put, ref.table, ref.slice, ref.key, structuredClone(item), 10, null, null]);
          for (const table of TABLES) {
            const inScan = stored
              .filter((e) => e.ref.table === table && e.ref.slice < toSlice)
              .sort((a, b) => a.ref.slice - b.ref.slice || compareStrings(a.ref.key, b.ref.key));
            const expected = inScan.filter((e) => filter === null || modelEvaluate(filter, e.item)).map((e) => e.ref.name);
            const examined: string[] = [];
            const got: string[] = [];
            let from: [number, string | null] = [0, null];
            for (let guard = 0; ; guard++) {
              expect(guard).toBeLessThan(1000);
              const result = store.execute([SliceOp.Scan, table, from[0], from[1], limit, null, filter, namedSlices(from[0], toSlice), false]);
              expect(result[0]).toBe(RESULT_OK);
              const [entries, exhausted] = result[1] as ScanResult;
              for (const [slice, key, item, bytes] of entries) {
                examined.push(`${slice}:${key}`);
                expect(bytes).toBe(10);
                if (item !== null) {
                  if (typeof item === 'number' || item instanceof Uint8Array) throw new Error('an unpacked scan answers item objects');
                  expect(keyOfName.get(item[NAME_ATTRIBUTE] as string)).toBe(key);
                  got.push(item[NAME_ATTRIBUTE] as string);
                }
              }
              if (exhausted) break;
              expect(entries.length).toBe(limit); // examined entries, kept or not
              const last = entries[entries.length - 1];
              from = [last[0], last[1]];
            }
            expect(examined).toEqual(inScan.map((e) => `${e.ref.slice}:${e.ref.key}`));
            expect(got).toEqual(expected);
          }
        },
      ),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('a page stops once it has examined PAGE_BYTES_MAX bytes, filtered out or not, and paging still visits every item once', () => {
    const store = newStore(() => 1);
    const itemSize = 300 * 1024;
    const refs = keysA.filter((k) => k.slice === OWNED[0]).slice(0, 7);
    const bytesOf = new Map<string, number>();
    for (const ref of refs) {
      const item: Item = { [NAME_ATTRIBUTE]: ref.name, big: 'x'.repeat(itemSize) };
      bytesOf.set(ref.key, itemBytes(item));
      store.execute([SliceOp.Put, TABLE_A, OWNED[0], ref.key, item, itemBytes(item), null, null]);
    }
    const sortedKeys = refs.map((r) => r.key).sort(compareStrings);
    /** Items are examined while the page is under budget: without its last item, a page is under it. */
    const underBudget = (pageBytes: number[]) => expect(pageBytes.slice(0, -1).reduce((a, b) => a + b, 0)).toBeLessThan(PAGE_BYTES_MAX);
    const keepNone: Condition = { k: 'notExists', path: [NAME_ATTRIBUTE] };
    for (const reverse of [false, true]) {
      const keys = reverse ? [...sortedKeys].reverse() : sortedKeys;
      for (const filter of [null, keepNone]) {
        const got = pages(store, OWNED[0], { low: '', lowInclusive: true, high: '\xff', highInclusive: true, reverse, limit: 1000, projection: null, filter, withKeys: false, packed: false });
        const examined = examinedPerPage(got, keys);
        expect(got.length).toBeGreaterThan(1);
        expect(examined.reduce((a, b) => a + b, 0)).toBe(keys.length);
        let at = 0;
        for (const n of examined) {
          underBudget(keys.slice(at, at + n).map((k) => bytesOf.get(k)!));
          at += n;
        }
        const names = got.flatMap((p) => p.items).map((item) => item[NAME_ATTRIBUTE]);
        expect(names).toEqual(filter === null ? keys.map((k) => refs.find((r) => r.key === k)!.name) : []);
      }
    }
    // Scan: the same budget over the examined entries' stored bytes.
    for (const filter of [null, keepNone]) {
      const seenKeys: string[] = [];
      let from: [number, string | null] = [0, null];
      let pageCount = 0;
      for (let done = false; !done; ) {
        expect(++pageCount).toBeLessThan(100);
        const [entries, exhausted] = store.execute([SliceOp.Scan, TABLE_A, from[0], from[1], 1000, null, filter, namedSlices(from[0], ALL_SLICES), false])[1] as ScanResult;
        underBudget(entries.map((e) => e[3]));
        for (const [, key, item, bytes] of entries) {
          seenKeys.push(key);
          expect(bytes).toBe(bytesOf.get(key));
          expect(item === null).toBe(filter !== null);
        }
        done = exhausted;
        if (!done) from = [entries[entries.length - 1][0], entries[entries.length - 1][1]];
      }
      expect(pageCount).toBeGreaterThan(1);
      expect(seenKeys).toEqual(sortedKeys);
    }
  });
});

// Sorting-key conditions as key ranges inside one sharding key, and the
// opaque markers that continue a range where a page stopped.
//
// A query fixes the sharding key, may fix the first sorting columns (equal),
// and may put a condition on the next one: a bound on one side or both,
// between, or begins with. Every such condition is one contiguous run of the
// partition's keys (docs/key-encoding.md, "Range bounds").
import { assert, KeysliceError } from '../../shared/errors.js';
import type { Condition } from '../../shared/expression-ast.js';
import { isDecimal } from '../../shared/decimal.js';
import { encodeKeyPart, encodeKeyPrefix, fromByteString, PARTS_END, prefixEnd, toByteString } from '../../shared/key-encoding.js';
import type { Projection, RangeSpec } from '../../shared/protocol.js';
import { isPlainObject } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { checkColumn } from './primary-key.js';

const MARKER_RANGE = /^r1\.([A-Za-z0-9_-]*)$/;
const MARKER_BUCKETS = /^b1\.([A-Za-z0-9_-]*)$/;
const MARKER_SCAN = /^s1\.(\d+)\.([A-Za-z0-9_-]*)$/;
const OPERATORS = ['eq', 'lt', 'lte', 'gt', 'gte', 'between', 'beginsWith'] as const;
const CONDITION_FORMS = '{eq: v}, {gt|gte: a}, {lt|lte: b}, {gt|gte: a, lt|lte: b}, {between: [a, b]} or {beginsWith: p}';

export interface Bound {
  value: unknown;
  inclusive: boolean;
}

/** A sorting-key condition, from the structured form or a key condition, before its
 * values are checked against the key schema. */
export interface SortRange {
  /** Values of the first sorting columns, which must be equal. */
  fixed: unknown[];
  /** Bounds on the column after them (null: unbounded on that side). */
  lower: Bound | null;
  upper: Bound | null;
  /** Begins with, on that column (string and binary); not with bounds. */
  beginsWith?: unknown;
  /** From `between`: low > high is an error (as in DynamoDB), where two
   * separate bounds that contradict each other just match nothing. */
  ordered: boolean;
}

/** One column's condition, as `{eq: v}` or the bounds on it. */
export type ColumnCondition = { eq: unknown } | Omit<SortRange, 'fixed'>;

/** Parses one column's structured condition ({eq}, bounds, {between}, {beginsWith}). */
export function columnCondition(c: unknown, where: string): ColumnCondition {
  if (!isPlainObject(c) || Object.keys(c).length === 0) throw new KeysliceError('ValidationError', `${where} must be a condition: ${CONDITION_FORMS}`);
  const ops = Object.keys(c);
  for (const op of ops) {
    if (!OPERATORS.includes(op as never)) {
      throw new KeysliceError('ValidationError', `${where} does not take "${op}" (it takes ${OPERATORS.join(', ')}: ${CONDITION_FORMS})`);
    }
  }
  const alone = ops.find((op) => op === 'eq' || op === 'between' || op === 'beginsWith');
  if (alone !== undefined && ops.length > 1) throw new KeysliceError('ValidationError', `${where}: "${alone}" goes alone, not with ${ops.filter((o) => o !== alone).map((o) => `"${o}"`).join(', ')}`);
  if ('gt' in c && 'gte' in c) throw new KeysliceError('ValidationError', `${where} takes one lower bound: "gt" or "gte"`);
  if ('lt' in c && 'lte' in c) throw new KeysliceError('ValidationError', `${where} takes one upper bound: "lt" or "lte"`);
  if ('eq' in c) return { eq: c.eq };
  if ('between' in c) {
    if (!Array.isArray(c.between) || c.between.length !== 2) throw new KeysliceError('ValidationError', `${where}: "between" takes [low, high]`);
    return { lower: { value: c.between[0], inclusive: true }, upper: { value: c.between[1], inclusive: true }, ordered: true };
  }
  if ('beginsWith' in c) return { lower: null, upper: null, beginsWith: c.beginsWith, ordered: false };
  const lower = 'gt' in c ? { value: c.gt, inclusive: false } : 'gte' in c ? { value: c.gte, inclusive: true } : null;
  const upper = 'lt' in c ? { value: c.lt, inclusive: false } : 'lte' in c ? { value: c.lte, inclusive: true } : null;
  return { lower, upper, ordered: false };
}

/** Adds one column's condition after the fixed columns. */
export function withColumn(fixed: unknown[], c: ColumnCondition): SortRange {
  if ('eq' in c) return { fixed: [...fixed, c.eq], lower: null, upper: null, ordered: false };
  return { fixed, ...c };
}

/** The structured `sortingKey` of GetItems. One sorting column: its condition.
 * Several: an object naming the first columns in order, each with a value
 * (equal), the last named one with a value or a condition. */
export function sortRangeOf(table: Table, condition: unknown): SortRange {
  const columns = table.sorting;
  if (columns.length === 0) throw new KeysliceError('ValidationError', `table "${table.name}" has no sorting key; "sortingKey" does not apply`);
  if (columns.length === 1) return withColumn([], columnCondition(condition, '"sortingKey"'));
  const names = columns.map((c) => c.name);
  const form = `{${names[0]}: value, ${names[1]}: value or condition, ...}`;
  if (!isPlainObject(condition) || Object.keys(condition).length === 0) {
    throw new KeysliceError('ValidationError', `"sortingKey" of table "${table.name}" names its first sorting columns in order: ${form}`);
  }
  for (const name of Object.keys(condition)) {
    if (!names.includes(name)) throw new KeysliceError('ValidationError', `"sortingKey" names "${name}", which is not a sorting column of table "${table.name}" (${names.join(', ')})`);
  }
  const named = names.filter((n) => n in condition).length;
  const missing = names.findIndex((n) => !(n in condition));
  if (missing >= 0 && missing < named) {
    const later = names.find((n, i) => i > missing && n in condition)!;
    throw new KeysliceError('ValidationError', `"sortingKey" names "${later}" but not "${names[missing]}": fix the sorting columns in order (${names.join(', ')}), a condition only on the last one named`);
  }
  const fixed: unknown[] = [];
  for (let i = 0; i < named; i++) {
    const v = condition[names[i]];
    const c: ColumnCondition = isPlainObject(v) && !isDecimal(v) ? columnCondition(v, `sortingKey.${names[i]}`) : { eq: v };
    if (!('eq' in c) && i < named - 1) {
      throw new KeysliceError('ValidationError', `sortingKey.${names[i]}: only the last column named (${names[named - 1]}) takes a condition; the ones before it take a value`);
    }
    if ('eq' in c) fixed.push(c.eq);
    else return withColumn(fixed, c);
  }
  return withColumn(fixed, { lower: null, upper: null, ordered: false });
}

/** The key range of `range` within the sharding key whose encoded part is `prefix`. */
export function rangeSpec(table: Table, prefix: string, range: SortRange | null, reverse: boolean, limit: number, projection: Projection, filter: Condition | null): RangeSpec {
  // Every key of this sharding key is prefix + sorting parts (tags < 0xFF) or the prefix alone;
  // another sharding key that extends this one continues with 0xFF (an escaped NUL), so stop there.
  const spec: RangeSpec = { low: prefix, lowInclusive: true, high: prefix + PARTS_END, highInclusive: false, reverse, limit, projection, filter, withKeys: false, packed: false };
  if (range === null) return spec;
  const columns = table.sorting;
  assert(columns.length > 0 && range.fixed.length <= columns.length, 'a sort range fits the sorting columns');
  let fixed = prefix;
  range.fixed.forEach((v, i) => (fixed += encodeKeyPart(columns[i].type, checkColumn(table, 'sorting', i, v))));
  const k = range.fixed.length;
  spec.low = fixed;
  spec.high = fixed + PARTS_END;
  if (range.lower === null && range.upper === null && range.beginsWith === undefined) return spec;
  assert(k < columns.length, 'a condition follows the fixed columns');
  const column = columns[k];
  const at = (v: unknown) => fixed + encodeKeyPart(column.type, checkColumn(table, 'sorting', k, v));
  if (range.beginsWith !== undefined) {
    if (column.type === 'number') throw new KeysliceError('ValidationError', `"beginsWith" applies to string and binary sorting columns only; "${column.name}" is a number`);
    const p = checkColumn(table, 'sorting', k, range.beginsWith) as string | Uint8Array;
    spec.low = fixed + encodeKeyPrefix(column.type, p);
    spec.high = prefixEnd(spec.low);
    return spec;
  }
  // With more sorting columns after this one, "equal to v" is every key that starts
  // with the parts up to v: [B, B + ff). So > v starts at B + ff, and <= v ends there.
  if (range.lower !== null) {
    const b = at(range.lower.value);
    spec.low = range.lower.inclusive ? b : b + PARTS_END; // B + PARTS_END is never a key
  }
  if (range.upper !== null) {
    const b = at(range.upper.value);
    spec.high = range.upper.inclusive ? b + PARTS_END : b;
  }
  if (range.ordered && range.lower !== null && range.upper !== null && at(range.lower.value) > at(range.upper.value)) {
    throw new KeysliceError('ValidationError', '"between" needs low <= high');
  }
  return spec;
}

/** Whether no key can lie in the range (its bounds contradict each other). */
export function isEmptyRange(spec: RangeSpec): boolean {
  return spec.low > spec.high || (spec.low === spec.high && !(spec.lowInclusive && spec.highInclusive));
}

/** Narrows a range to what follows the marker's key in the scan's direction. */
export function continueAfter(spec: RangeSpec, marker: string): void {
  const m = MARKER_RANGE.exec(marker);
  if (m === null) throw new KeysliceError('InvalidMarker', 'this marker does not belong to this query');
  continueAfterKey(spec, fromBase64url(m[1]));
}

/** Narrows a range to what follows `key` in the scan's direction; `key` must lie in the range. */
export function continueAfterKey(spec: RangeSpec, key: string): void {
  if (key < spec.low || key > spec.high) throw new KeysliceError('InvalidMarker', 'this marker does not belong to this query');
  if (spec.reverse) {
    spec.high = key;
    spec.highInclusive = false;
  } else {
    spec.low = key;
    spec.lowInclusive = false;
  }
}

/** A range marker: the encoded key of the last item of the page. */
export function rangeMarker(lastKey: string): string {
  return 'r1.' + base64url(lastKey);
}

/** An even-distribution marker (bucket-gather.ts): the sorting part of the last key, where every bucket resumes. */
export function bucketMarker(sortingPart: string): string {
  return 'b1.' + base64url(sortingPart);
}

/** The sorting part an even-distribution marker resumes after. */
export function bucketMarkerKey(marker: string): string {
  const m = MARKER_BUCKETS.exec(marker);
  if (m === null) throw new KeysliceError('InvalidMarker', 'this marker does not belong to this query');
  return fromBase64url(m[1]);
}

/** A full-scan marker (operations.ts): the slice of the last item and its encoded key. */
export function scanMarker(slice: number, key: string): string {
  return `s1.${slice}.${base64url(key)}`;
}

/** The slice and encoded key a full-scan marker resumes after; null if it is not a scan marker. */
export function scanMarkerPosition(marker: string): { slice: number; key: string } | null {
  const m = MARKER_SCAN.exec(marker);
  return m === null ? null : { slice: Number(m[1]), key: fromBase64url(m[2]) };
}

export function base64url(byteString: string): string {
  return Buffer.from(fromByteString(byteString)).toString('base64url');
}

export function fromBase64url(text: string): string {
  return toByteString(Buffer.from(text, 'base64url'));
}

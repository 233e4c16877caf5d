// Sorting-key conditions as key ranges inside one sharding key, and the
// opaque markers that continue a range where a page stopped.
import type { SortCondition } from '../shared/api.js';
import { assert, KeysliceError } from '../shared/errors.js';
import { encodeKeyPart, encodeKeyPrefix, fromByteString, prefixEnd, SHARDING_PREFIX_END, toByteString } from '../shared/key-encoding.js';
import type { Condition } from '../shared/expression-ast.js';
import type { Projection, RangeSpec } from '../shared/protocol.js';
import { isPlainObject } from '../shared/values.js';
import type { Table } from './catalog.js';
import { checkKeyValue } from './primary-key.js';

const SORT_CONDITIONS = ['eq', 'lt', 'lte', 'gt', 'gte', 'between', 'beginsWith'] as const;
const MARKER_RANGE = /^r1\.([A-Za-z0-9_-]*)$/;

/** The key range of `condition` within the sharding key whose encoded part is `prefix`. */
export function rangeSpec(table: Table, prefix: string, condition: unknown, reverse: boolean, limit: number, projection: Projection, filter: Condition | null): RangeSpec {
  // Every key of this sharding key is prefix + a sorting part (tag < 0xFF) or the prefix alone;
  // another sharding key that extends this one continues with 0xFF (an escaped NUL), so stop there.
  const spec: RangeSpec = { low: prefix, lowInclusive: true, high: prefix + SHARDING_PREFIX_END, highInclusive: false, reverse, limit, projection, filter, withKeys: false };
  if (condition === undefined) return spec;
  const sortKey = table.sortingKey;
  if (sortKey === null) throw new KeysliceError('ValidationError', `table "${table.name}" has no sorting key; "sortingKey" does not apply`);
  if (!isPlainObject(condition) || Object.keys(condition).length !== 1 || !SORT_CONDITIONS.includes(Object.keys(condition)[0] as never)) {
    throw new KeysliceError('ValidationError', `"sortingKey" must be one condition: {${SORT_CONDITIONS.join(' | ')}: value}`);
  }
  const c = condition as SortCondition;
  const at = (v: unknown) => prefix + encodeKeyPart(sortKey.type, checkKeyValue(sortKey, v, 'sorting', true));
  if ('eq' in c) return { ...spec, low: at(c.eq), high: at(c.eq), highInclusive: true };
  if ('lt' in c) return { ...spec, high: at(c.lt) };
  if ('lte' in c) return { ...spec, high: at(c.lte), highInclusive: true };
  if ('gt' in c) return { ...spec, low: at(c.gt), lowInclusive: false };
  if ('gte' in c) return { ...spec, low: at(c.gte) };
  if ('between' in c) {
    if (!Array.isArray(c.between) || c.between.length !== 2) throw new KeysliceError('ValidationError', '"between" takes [low, high]');
    const [low, high] = [at(c.between[0]), at(c.between[1])];
    if (low > high) throw new KeysliceError('ValidationError', '"between" needs low <= high');
    return { ...spec, low, high, highInclusive: true };
  }
  assert('beginsWith' in c, 'conditions are exhaustive');
  if (sortKey.type === 'number') throw new KeysliceError('ValidationError', '"beginsWith" applies to string and binary sorting keys only');
  const v = checkKeyValue(sortKey, c.beginsWith, 'sorting', true) as string | Uint8Array;
  const start = prefix + encodeKeyPrefix(sortKey.type, v);
  return { ...spec, low: start, high: prefixEnd(start) };
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

export function base64url(byteString: string): string {
  return Buffer.from(fromByteString(byteString)).toString('base64url');
}

export function fromBase64url(text: string): string {
  return toByteString(Buffer.from(text, 'base64url'));
}

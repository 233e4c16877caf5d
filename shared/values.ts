// Item values: what an attribute may hold, how big it is, and how binary values
// travel in JSON. Validation happens once, at the coordinator's edge.
import { KeysliceError } from './errors.js';
import { ATTRIBUTE_NAME_BYTES_MAX, VALUE_DEPTH_MAX } from './limits.js';
import { DECIMAL_TAG, decimalLimitError, decimalValueProblem, isDecimal, isNumberValue, numberValueOf, parseDecimal } from './decimal.js';

export type Value = string | number | boolean | null | Uint8Array | Value[] | { [name: string]: Value };
export type Item = { [name: string]: Value };

/** System attributes: set by the store, never accepted from a client. */
export const NAME_ATTRIBUTE = '__name';
export const MTIME_ATTRIBUTE = '__mtime';
export const SYSTEM_ATTRIBUTE_PREFIX = '__';

/** In JSON, a binary value is `{"$binary": "<base64>"}`. */
export const JSON_BINARY_TAG = '$binary';

/** Sets (DynamoDB's SS, NS and BS) are maps of exactly one of these keys, holding a
 * non-empty list of distinct strings, numbers or binary values: `{"$SS": ["a", "b"]}`.
 * Plain data, so they travel through msgpack, the log and JSON like any map; the
 * expression evaluator gives them set semantics (equality in any order, contains,
 * size, ADD and DELETE of elements). */
export type SetType = 'SS' | 'NS' | 'BS';
export const SET_TAGS: Record<SetType, string> = { SS: '$SS', NS: '$NS', BS: '$BS' };
const SET_TYPE_OF_TAG: Record<string, SetType> = { $SS: 'SS', $NS: 'NS', $BS: 'BS' };

/** The set type of a value that is a set (a map of one set tag holding a list), else null. */
export function setTypeOf(v: unknown): SetType | null {
  if (!isPlainObject(v)) return null;
  let type: SetType | null = null;
  for (const k in v) {
    if (type !== null || !Object.hasOwn(SET_TYPE_OF_TAG, k)) return null;
    type = SET_TYPE_OF_TAG[k];
  }
  return type !== null && Array.isArray(v[SET_TAGS[type]]) ? type : null;
}

/** The elements of a set (setTypeOf(v) !== null). */
export function setElements(v: Value): Value[] {
  return (v as Record<string, Value[]>)[SET_TAGS[setTypeOf(v)!]];
}

export function makeSet(type: SetType, elements: Value[]): Value {
  return { [SET_TAGS[type]]: elements };
}

function isSetElement(type: SetType, e: unknown): boolean {
  return type === 'SS' ? typeof e === 'string' : type === 'NS' ? isNumberValue(e) : e instanceof Uint8Array;
}

/** A text that is equal for equal set elements (numbers by value, binary by bytes). A
 * decimal's text never equals a double's (a decimal is never what a double holds). */
export function setElementKey(e: Value): string {
  if (e instanceof Uint8Array) return Buffer.from(e.buffer, e.byteOffset, e.byteLength).toString('base64');
  if (typeof e === 'number') return String(e === 0 ? 0 : e);
  return isDecimal(e) ? e.$N : (e as string);
}

/** Checks a map whose one key is a set tag: it must be a valid set. */
function validateSet(v: Record<string, unknown>, tag: string, where: string): void {
  const type = SET_TYPE_OF_TAG[tag];
  const elements = v[tag];
  const what = { SS: 'strings', NS: 'numbers', BS: 'binary values' }[type];
  if (!Array.isArray(elements) || elements.length === 0 || !elements.every((e) => isSetElement(type, e))) {
    throw new KeysliceError('ValidationError', `${where}: a map of the single key "${tag}" is a ${type} set and must hold a non-empty list of ${what}`);
  }
  const seen = new Set<string>();
  for (const e of elements) {
    if (type === 'SS') checkText(e as string, `${where} (an element of the string set)`);
    const k = setElementKey(e as Value);
    if (seen.has(k)) throw new KeysliceError('ValidationError', `${where}: the ${type} set holds ${JSON.stringify(k)} twice; set elements are distinct`);
    seen.add(k);
  }
}

/** Refuses a string with a lone UTF-16 surrogate (half of a pair, alone): UTF-8, the form every string is kept and
 * sent in (msgpack, JSON answers; DynamoDB's strings are UTF-8 too), has no encoding for one, and msgpackr writes it
 * as bytes that read back as U+FFFD (three of them for a short string, one for a long one), so the item
 * would be changed silently. (String.prototype.isWellFormed, Node 20: TypeScript's ES2022 lib does not name it.) */
export function checkText(s: string, where: string): void {
  if ((s as string & { isWellFormed(): boolean }).isWellFormed()) return;
  const at = s.search(/\p{Surrogate}/u);
  throw new KeysliceError('ValidationError', `${where}: a string with a lone UTF-16 surrogate (U+${s.charCodeAt(at).toString(16).toUpperCase()} at index ${at}) cannot be stored as UTF-8`);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Checks one attribute value; `where` names it in the error. */
export function validateValue(v: unknown, where: string, depth = 0): asserts v is Value {
  if (depth > VALUE_DEPTH_MAX) {
    throw new KeysliceError('ValidationError', `${where}: nested deeper than ${VALUE_DEPTH_MAX} levels`);
  }
  switch (typeof v) {
    case 'string':
      return checkText(v, where);
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new KeysliceError('ValidationError', `${where}: numbers must be finite, got ${v}`);
      return;
    case 'object':
      if (v === null || v instanceof Uint8Array) return;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) validateValue(v[i], `${where}[${i}]`, depth + 1);
        return;
      }
      if (isPlainObject(v)) {
        const keys = Object.keys(v);
        if (keys.length === 1 && Object.hasOwn(SET_TYPE_OF_TAG, keys[0])) return validateSet(v, keys[0], where);
        if (keys.length === 1 && keys[0] === DECIMAL_TAG) return validateDecimal(v, where);
        for (const k of keys) {
          checkMapKey(k, where);
          checkText(k, `${where} (a map key)`);
          validateValue(v[k], `${where}.${k}`, depth + 1);
        }
        return;
      }
      break;
  }
  throw new KeysliceError('ValidationError', `${where}: unsupported value type ${describeType(v)}`);
}

/** The one map key keyslice cannot store: msgpackr renames it to "__proto_" in every map it decodes (on a
 * coordinator, a node's apply, a log replay, a snapshot, a move), as it would set a JavaScript prototype, so an item
 * holding it would be read back changed. Refused wherever a client names a map key (a value, a WebSocket frame, an
 * update's path); a top-level attribute of that name is refused as a system name (SYSTEM_ATTRIBUTE_PREFIX). */
export const UNSTORABLE_MAP_KEY = '__proto__';
export const UNSTORABLE_MAP_KEY_REFUSED = `a map key may not be "${UNSTORABLE_MAP_KEY}" (msgpack would store it renamed; docs/expressions.md)`;

export function checkMapKey(k: string, where: string): void {
  if (k === UNSTORABLE_MAP_KEY) throw new KeysliceError('ValidationError', `${where}: ${UNSTORABLE_MAP_KEY_REFUSED}`);
}

/** Checks a map whose one key is "$N": it must be a decimal number in canonical form that no double holds. */
function validateDecimal(v: Record<string, unknown>, where: string): void {
  const problem = typeof v.$N === 'string' ? decimalValueProblem(v as { $N: string }) : 'it must hold the decimal as a string';
  if (problem !== null) throw new KeysliceError('ValidationError', `${where}: a map of the single key "$N" is a decimal number: ${problem}`);
}

export function validateAttributeName(name: string, where: string): void {
  if (name.length === 0) throw new KeysliceError('ValidationError', `${where}: attribute names must not be empty`);
  checkText(name, `${where} (an attribute name)`);
  if (name.startsWith(SYSTEM_ATTRIBUTE_PREFIX)) {
    throw new KeysliceError('ValidationError', `${where}: attribute name "${name}" is reserved (names starting with "__" are system attributes)`);
  }
  if (Buffer.byteLength(name) > ATTRIBUTE_NAME_BYTES_MAX) {
    throw new KeysliceError('ValidationError', `${where}: attribute name longer than ${ATTRIBUTE_NAME_BYTES_MAX} bytes`);
  }
}

/** Checks a client-supplied item: a plain object of valid attribute names and values. */
export function validateItem(item: unknown, where = 'item'): asserts item is Item {
  if (!isPlainObject(item)) throw new KeysliceError('ValidationError', `${where} must be an object of attributes`);
  for (const name of Object.keys(item)) {
    validateAttributeName(name, where);
    validateValue(item[name], `${where}.${name}`);
  }
}

export function describeType(v: unknown): string {
  if (v === null) return 'null';
  if (isDecimal(v)) return 'number';
  const set = setTypeOf(v);
  if (set !== null) return `${set} set`;
  if (v instanceof Uint8Array) return 'binary';
  if (Array.isArray(v)) return 'list';
  if (typeof v === 'object') return isPlainObject(v) ? 'map' : (v as object).constructor?.name ?? 'object';
  return typeof v;
}

/** Size of a value in bytes, counted as DynamoDB does in spirit: UTF-8 text,
 * 8 bytes a number, 1 a boolean or null, a few bytes of overhead per list or map
 * (a set is counted as the map it is stored as). DynamoDB's exact rules (numbers by
 * their digits, sets as their elements) are coordinator/dynamodb/attribute-values.ts
 * valueSize, for its own limit and capacity units. */
export function valueBytes(v: Value): number {
  switch (typeof v) {
    case 'string':
      return Buffer.byteLength(v);
    case 'number':
      return 8;
    case 'boolean':
      return 1;
  }
  if (v === null) return 1;
  if (v instanceof Uint8Array) return v.byteLength;
  let n = 3;
  if (Array.isArray(v)) {
    for (const e of v) n += 1 + valueBytes(e);
    return n;
  }
  for (const k of Object.keys(v)) n += 1 + Buffer.byteLength(k) + valueBytes(v[k]);
  return n;
}

export function itemBytes(item: Item): number {
  let n = 0;
  for (const k of Object.keys(item)) n += Buffer.byteLength(k) + valueBytes(item[k]);
  return n;
}

/** Sets an own data property, also for the name "__proto__" (which `o[k] = v` would treat as the prototype): every
 * object built from a client's keys (JSON, DynamoDB's attribute values, an update) is built with it, so no key
 * sets a prototype even where a check upstream would refuse it. */
export function setOwn(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === UNSTORABLE_MAP_KEY) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  else o[k] = v;
}

/** JSON in: `{"$binary": "..."}` becomes bytes; `{"$N": "<decimal>"}` becomes the number's one
 * form (a plain number when a double holds it, else `{"$N": "<canonical text>"}`; a text that is
 * no number, or beyond DynamoDB's limits, stays as it is, for validation to refuse). */
export function fromJson(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(fromJson);
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === JSON_BINARY_TAG && typeof v[JSON_BINARY_TAG] === 'string') {
      return new Uint8Array(Buffer.from(v[JSON_BINARY_TAG] as string, 'base64'));
    }
    if (keys.length === 1 && keys[0] === DECIMAL_TAG && typeof v.$N === 'string') {
      const d = parseDecimal(v.$N);
      return d === null || decimalLimitError(d) !== null ? v : numberValueOf(d);
    }
    const out: Record<string, unknown> = {};
    for (const k of keys) setOwn(out, k, fromJson(v[k]));
    return out;
  }
  return v;
}

/** JSON out: bytes become `{"$binary": "..."}`. */
export function toJson(v: unknown): unknown {
  if (v instanceof Uint8Array) return { [JSON_BINARY_TAG]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (Array.isArray(v)) return v.map(toJson);
  if (isPlainObject(v)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) setOwn(out, k, toJson(v[k]));
    return out;
  }
  return v;
}

// DynamoDB's typed JSON values (AttributeValue: {"S": "x"}, {"N": "1"}, ...)
// against keyslice's plain values, both ways, and DynamoDB's rule for the size
// of an item. S, N, B, BOOL, NULL, L and M map one to one (N as a double when
// one holds it exactly, else as a decimal value {"$N": ...}, see numbers.ts); the sets SS, NS and BS map to
// keyslice's sets, maps of one key $SS, $NS or $BS (shared/values.ts), so an M
// of exactly such a key (or $N) is refused here: it would read back as a set (or a number).
import { ATTRIBUTE_NAME_BYTES_MAX, VALUE_DEPTH_MAX } from '../../shared/limits.js';
import {
  isPlainObject,
  makeSet,
  MTIME_ATTRIBUTE,
  NAME_ATTRIBUTE,
  SET_TAGS,
  setElementKey,
  setElements,
  setOwn,
  setTypeOf,
  SYSTEM_ATTRIBUTE_PREFIX,
  UNSTORABLE_MAP_KEY,
  type Item,
  type SetType,
  type Value,
} from '../../shared/values.js';
import { DECIMAL_TAG, isDecimal } from '../../shared/decimal.js';
import { DynamoDbError } from './errors.js';
import { formatNumber, parseNumber, significantDigits } from './numbers.js';

export type AttributeValue = Record<string, unknown>;
export type WireItem = Record<string, AttributeValue>;

const TYPES = ['S', 'N', 'B', 'BOOL', 'NULL', 'L', 'M', 'SS', 'NS', 'BS'] as const;
/** Maps of one of these keys are sets or a decimal number in keyslice. */
const SET_TAG_KEYS = new Set([...Object.values(SET_TAGS), DECIMAL_TAG]);
const SET_NAMES: Record<SetType, string> = { SS: 'string', NS: 'number', BS: 'binary' };
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** JSON's name for a value's type, as DynamoDB's deserializer reports it. */
export function jsonType(v: unknown): string {
  if (v === null) return 'NULL_VALUE';
  if (Array.isArray(v)) return 'START_ARRAY';
  switch (typeof v) {
    case 'string':
      return 'STRING_VALUE';
    case 'number':
      return 'NUMBER_VALUE';
    case 'boolean':
      return v ? 'VALUE_TRUE' : 'VALUE_FALSE';
    default:
      return 'START_OBJECT';
  }
}

/** The one type key of an AttributeValue, checked as DynamoDB checks it. */
function typeOf(av: unknown, where: string): (typeof TYPES)[number] {
  if (!isPlainObject(av)) throw DynamoDbError.serialization(`${jsonType(av)} cannot be converted to an AttributeValue (at ${where})`);
  const present = TYPES.filter((t) => Object.hasOwn(av, t) && av[t] !== null && av[t] !== undefined);
  if (present.length === 0) throw DynamoDbError.validation('Supplied AttributeValue is empty, must contain exactly one of the supported datatypes');
  if (present.length > 1) throw DynamoDbError.validation('Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes');
  return present[0];
}

/** One AttributeValue as a keyslice value; `where` names it in errors. */
export function toNativeValue(av: unknown, where: string, depth = 0): Value {
  if (depth > VALUE_DEPTH_MAX) throw DynamoDbError.validation('Nesting Levels have exceeded supported limits');
  const type = typeOf(av, where);
  const v = (av as AttributeValue)[type];
  switch (type) {
    case 'SS':
    case 'NS':
    case 'BS':
      return toNativeSet(type, v, where);
    case 'S':
      if (typeof v !== 'string') throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to String (at ${where})`);
      return v;
    case 'N':
      if (typeof v !== 'string') throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to String (at ${where}; numbers travel as strings)`);
      return parseNumber(v);
    case 'B':
      if (typeof v !== 'string') throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to a Blob (at ${where})`);
      if (!BASE64.test(v)) throw DynamoDbError.serialization(`Base64 encoded value is not valid (at ${where})`);
      return new Uint8Array(Buffer.from(v, 'base64'));
    case 'BOOL':
      if (typeof v !== 'boolean') throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to Boolean (at ${where})`);
      return v;
    case 'NULL':
      if (typeof v !== 'boolean') throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to Boolean (at ${where})`);
      if (!v) throw DynamoDbError.validation('One or more parameter values were invalid: Null attribute value types must have the value of true');
      return null;
    case 'L':
      if (!Array.isArray(v)) throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to a List (at ${where})`);
      return v.map((e, i) => toNativeValue(e, `${where}[${i}]`, depth + 1));
    case 'M': {
      if (!isPlainObject(v)) throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to a Map (at ${where})`);
      const out: Record<string, Value> = {};
      const keys = Object.keys(v);
      if (keys.length === 1 && SET_TAG_KEYS.has(keys[0])) {
        throw DynamoDbError.validation(`keyslice stores sets and decimal numbers as maps of the single key ${keys[0]}, so it cannot store a map (M) of only that key (at ${where})`);
      }
      for (const k of keys) {
        // msgpack between keyslice's processes cannot carry this key faithfully (it would set a prototype).
        if (k === UNSTORABLE_MAP_KEY) throw DynamoDbError.validation(`keyslice cannot store the map key "${UNSTORABLE_MAP_KEY}" (at ${where}): msgpack would store it renamed`);
        setOwn(out, k, toNativeValue(v[k], `${where}.${k}`, depth + 1));
      }
      return out;
    }
  }
  throw DynamoDbError.validation(`${where}: unsupported type ${type}`);
}

/** SS, NS or BS: a non-empty list of distinct elements, as DynamoDB requires. */
function toNativeSet(type: SetType, v: unknown, where: string): Value {
  if (!Array.isArray(v)) throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to a List (at ${where})`);
  if (v.length === 0) throw DynamoDbError.validation(`One or more parameter values were invalid: An ${SET_NAMES[type]} set  may not be empty`);
  const elements = v.map((e, i) => {
    if (typeof e !== 'string') throw DynamoDbError.serialization(`${jsonType(e)} cannot be converted to String (at ${where}[${i}])`);
    if (type === 'SS') return e;
    if (type === 'NS') return parseNumber(e);
    if (!BASE64.test(e)) throw DynamoDbError.serialization(`Base64 encoded value is not valid (at ${where}[${i}])`);
    return new Uint8Array(Buffer.from(e, 'base64'));
  });
  const seen = new Set<string>();
  for (const e of elements) {
    const k = setElementKey(e);
    if (seen.has(k)) throw DynamoDbError.validation(`One or more parameter values were invalid: Input collection [${v.join(', ')}] contains duplicates.`);
    seen.add(k);
  }
  return makeSet(type, elements);
}

/** Checks a top-level attribute name against DynamoDB's rules and keyslice's. */
export function checkAttributeName(name: string, where: string): void {
  if (name.length === 0) throw DynamoDbError.validation(`One or more parameter values were invalid: An attribute name in ${where} is empty`);
  if (name.startsWith(SYSTEM_ATTRIBUTE_PREFIX)) {
    throw DynamoDbError.validation(`keyslice reserves attribute names that start with "${SYSTEM_ATTRIBUTE_PREFIX}" for its system attributes; ${where} has "${name}"`);
  }
  if (Buffer.byteLength(name) > ATTRIBUTE_NAME_BYTES_MAX) {
    throw DynamoDbError.validation(`keyslice limits attribute names to ${ATTRIBUTE_NAME_BYTES_MAX} bytes; ${where} has one of ${Buffer.byteLength(name)} bytes`);
  }
}

/** A map of attribute names to AttributeValues (an item, a key) as a keyslice item. */
export function toNativeItem(item: unknown, where: string): Item {
  if (!isPlainObject(item)) throw DynamoDbError.serialization(`${jsonType(item)} cannot be converted to a map of AttributeValues (at ${where})`);
  const out: Item = {};
  for (const name of Object.keys(item)) {
    checkAttributeName(name, where);
    setOwn(out, name, toNativeValue(item[name], `${where}.${name}`));
  }
  return out;
}

export function fromNativeValue(v: Value): AttributeValue {
  switch (typeof v) {
    case 'string':
      return { S: v };
    case 'number':
      return { N: formatNumber(v) };
    case 'boolean':
      return { BOOL: v };
  }
  if (v === null) return { NULL: true };
  if (v instanceof Uint8Array) return { B: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (Array.isArray(v)) return { L: v.map(fromNativeValue) };
  if (isDecimal(v)) return { N: v.$N };
  const set = setTypeOf(v);
  if (set !== null) return { [set]: setElements(v).map((e) => Object.values(fromNativeValue(e))[0]) };
  const m: Record<string, AttributeValue> = {};
  for (const k of Object.keys(v)) setOwn(m, k, fromNativeValue(v[k]));
  return { M: m };
}

/** A stored item as DynamoDB sends it: typed values, without keyslice's system attributes. */
export function fromNativeItem(item: Item): WireItem {
  const out: WireItem = {};
  for (const k of Object.keys(item)) {
    if (k === NAME_ATTRIBUTE || k === MTIME_ATTRIBUTE) continue;
    setOwn(out, k, fromNativeValue(item[k]));
  }
  return out;
}

/** An item without keyslice's system attributes. */
export function withoutSystemAttributes(item: Item): Item {
  const out: Item = {};
  for (const k of Object.keys(item)) if (k !== NAME_ATTRIBUTE && k !== MTIME_ATTRIBUTE) setOwn(out, k, item[k]);
  return out;
}

/** DynamoDB's size of a value: UTF-8 bytes of a string, raw bytes of a binary,
 * 1 byte per two significant digits plus 1 of a number, 1 of a boolean or null,
 * the sum of its elements of a set, 3 bytes plus 1 per element (and its name,
 * in a map) plus the elements of a list or map.
 *
 * Not shared/values.ts valueBytes, on purpose: that is keyslice's own measure
 * (ITEM_BYTES_MAX, page bytes), which counts a number as 8 bytes (a double)
 * and a set as the map it is stored as ({"$SS": [...]}: overhead, tag and
 * elements). This one gives DynamoDB's figures: its 400 KB item limit and its
 * capacity units. Lists, maps, strings, binaries, booleans and null count alike. */
export function valueSize(v: Value): number {
  switch (typeof v) {
    case 'string':
      return Buffer.byteLength(v);
    case 'number':
      return Math.ceil(significantDigits(v) / 2) + 1;
    case 'boolean':
      return 1;
  }
  if (v === null) return 1;
  if (v instanceof Uint8Array) return v.byteLength;
  if (isDecimal(v)) return Math.ceil(significantDigits(v) / 2) + 1;
  if (setTypeOf(v) !== null) return setElements(v).reduce((n: number, e) => n + valueSize(e), 0);
  let n = 3;
  if (Array.isArray(v)) {
    for (const e of v) n += 1 + valueSize(e);
    return n;
  }
  for (const k of Object.keys(v)) n += 1 + Buffer.byteLength(k) + valueSize(v[k]);
  return n;
}

/** DynamoDB's size of an item: names and values of its attributes (keyslice's system
 * attributes left out; shared/values.ts itemBytes counts them, as they are stored). */
export function itemSize(item: Item): number {
  let n = 0;
  for (const k of Object.keys(item)) {
    if (k === NAME_ATTRIBUTE || k === MTIME_ATTRIBUTE) continue;
    n += Buffer.byteLength(k) + valueSize(item[k]);
  }
  return n;
}

// Order-preserving, typed encoding of primary keys (spec and test vectors:
// docs/key-encoding.md). An encoded key is a "byte string": a JS string whose
// every char code is one byte (0..255), so that JS string comparison, which
// compares UTF-16 code units, equals unsigned byte-wise comparison. Partitions
// keep these strings as sorted-btree keys and compare them natively.
import { decimalOf, DECIMAL_EXPONENT_MAX, DECIMAL_EXPONENT_MIN, doubleBelow, numberValueOf, type DecimalValue } from './decimal.js';
import { KeysliceError } from './errors.js';

/** Whether `v` is a byte string, as every encoded key is: what a frame names as a key is checked so on arrival, since
 * the store relies on it past the check (a replica's snapshot writes a key's chars as one or two bytes of UTF-8 each:
 * slice-worker/log-format.ts, keyUtf8Bytes). */
export function isByteString(v: unknown): v is string {
  return typeof v === 'string' && !NOT_A_BYTE.test(v);
}
const NOT_A_BYTE = /[^\x00-\xff]/;

export type KeyType = 'string' | 'number' | 'binary';
/** A number key is a double or, for a number no double holds, a decimal value (shared/decimal.ts). */
export type KeyValue = string | number | DecimalValue | Uint8Array;

export const KEY_TYPES: readonly KeyType[] = ['string', 'number', 'binary'];

/** Type tags: the first byte of each encoded key part. */
export const TAG_BINARY = 0x01;
export const TAG_STRING = 0x02;
export const TAG_NUMBER = 0x21;
/** A sharding key of several columns: its parts, then a 0x00 at a part boundary. */
export const TAG_TUPLE = 0x05;
/** After a number part's 8 bytes: a decimal's extension follows (see decimalBytes). */
export const DECIMAL_EXTENSION = 0xfe;

const ASCII_NO_NUL = /^[\x01-\x7f]*$/;
const SURROGATE = /[\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function toByteString(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 4096) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 4096) as unknown as number[]);
  }
  return s;
}

export function fromByteString(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'latin1'));
}

/** 0x00 becomes 0x00 0xFF so that the 0x00 terminator sorts before any continuation. */
function escapeBytes(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    s += b === 0 ? '\x00\xff' : String.fromCharCode(b);
  }
  return s;
}

function escapedString(value: string): string {
  if (ASCII_NO_NUL.test(value)) return value; // UTF-8 of ASCII is itself; nothing to escape
  if (SURROGATE.test(value) && LONE_SURROGATE.test(value)) {
    throw new KeysliceError('InvalidKey', 'key strings must be well-formed Unicode (a lone surrogate was found)');
  }
  return escapeBytes(Buffer.from(value, 'utf8'));
}

const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** IEEE-754 big-endian; negative numbers have all bits flipped, others only the sign bit. */
function numberBytes(value: number): string {
  f64[0] = value === 0 ? 0 : value; // -0 and 0 are one key
  let s = '';
  const negative = (f64Bytes[LITTLE_ENDIAN ? 7 : 0] & 0x80) !== 0;
  for (let i = 0; i < 8; i++) {
    let b = f64Bytes[LITTLE_ENDIAN ? 7 - i : i];
    if (negative) b ^= 0xff;
    else if (i === 0) b ^= 0x80;
    s += String.fromCharCode(b);
  }
  return s;
}

function numberFromBytes(s: string): number {
  const negative = (s.charCodeAt(0) & 0x80) === 0;
  for (let i = 0; i < 8; i++) {
    let b = s.charCodeAt(i);
    if (negative) b ^= 0xff;
    else if (i === 0) b ^= 0x80;
    f64Bytes[LITTLE_ENDIAN ? 7 - i : i] = b;
  }
  return f64[0];
}

// A decimal's exponent is one byte of its key part.
if (DECIMAL_EXPONENT_MAX - DECIMAL_EXPONENT_MIN > 0xff) throw new Error('invariant broken: the decimal exponent range does not fit a byte');

/** A decimal no double holds, D, lies strictly between two neighbouring doubles X < D < X'
 * (by their shortest texts). Its part is X's 8 bytes, then 0xFE, then D itself in an
 * order-preserving, self-delimiting form: a byte for the exponent E of its first digit
 * (E + 130, 0..255 over DynamoDB's range), then its significant digits in pairs
 * (base 100, the last pair padded with 0), a non-last pair p as 2p+1 and the last as 2p;
 * for a negative D every byte of that form is flipped (255 - b). */
function decimalBytes(value: DecimalValue): string {
  const d = decimalOf(value);
  let s = numberBytes(doubleBelow(d)) + '\xfe';
  const flip = d.negative ? 0xff : 0;
  s += String.fromCharCode((d.point - 1 - DECIMAL_EXPONENT_MIN) ^ flip);
  const digits = d.digits.length % 2 === 0 ? d.digits : d.digits + '0';
  for (let i = 0; i < digits.length; i += 2) {
    const pair = Number(digits.slice(i, i + 2));
    s += String.fromCharCode((2 * pair + (i + 2 < digits.length ? 1 : 0)) ^ flip);
  }
  return s;
}

/** Length of a decimal's extension (0xFE, exponent, digit pairs) that starts at `start`. */
function extensionLength(key: string, start: number, negative: boolean): number {
  let i = start + 2;
  while (i < key.length && (key.charCodeAt(i) & 1) === (negative ? 0 : 1)) i++; // non-last pairs
  return Math.min(i + 1, key.length) - start;
}

/** One key part: tag, payload, and (for strings and binary) a 0x00 terminator. */
export function encodeKeyPart(type: KeyType, value: KeyValue): string {
  switch (type) {
    case 'string':
      return '\x02' + escapedString(value as string) + '\x00';
    case 'binary':
      return '\x01' + escapeBytes(value as Uint8Array) + '\x00';
    case 'number':
      return '\x21' + (typeof value === 'number' ? numberBytes(value) : decimalBytes(value as DecimalValue));
  }
}

/** The encoding of every key part that begins with `value` (strings and binary):
 * the part without its terminator. */
export function encodeKeyPrefix(type: 'string' | 'binary', value: string | Uint8Array): string {
  return type === 'string' ? '\x02' + escapedString(value as string) : '\x01' + escapeBytes(value as Uint8Array);
}

/** Appended to encoded parts X, the exclusive upper bound of every key that
 * begins with exactly the parts X: such a key is X alone or X followed by a type
 * tag or a tuple's 0x00 (all below 0xFE), while a key whose last part in X's place
 * is a longer string or binary value with X's as its prefix continues with 0xFF
 * (an escaped NUL), and one whose last part is a decimal just above X's number
 * continues with 0xFE and more bytes. */
export const PARTS_END = '\xfe';

/** The sharding part of a key: one column's part, or a tuple part (tag 0x05,
 * each column's part, 0x00) for several columns, so that every key is one
 * sharding part followed by its sorting parts. */
export function encodeShardingPart(types: readonly KeyType[], values: readonly KeyValue[]): string {
  if (types.length === 1) return encodeKeyPart(types[0], values[0]);
  return '\x05' + encodeSortingParts(types, values) + '\x00';
}

/** The sorting parts of a key: each column's part, in order, one after another. */
export function encodeSortingParts(types: readonly KeyType[], values: readonly KeyValue[]): string {
  if (types.length !== values.length) throw new Error(`invariant broken: ${types.length} key types for ${values.length} values`);
  let s = '';
  for (let i = 0; i < types.length; i++) s += encodeKeyPart(types[i], values[i]);
  return s;
}

/** The smallest byte string greater than every string that starts with `prefix`
 * (drop trailing 0xFF bytes, then add one to the last byte). */
export function prefixEnd(prefix: string): string {
  let end = prefix.length;
  while (end > 0 && prefix.charCodeAt(end - 1) === 0xff) end--;
  if (end === 0) return '\xff'.repeat(prefix.length + 1); // no string of only 0xFF is a valid key
  return prefix.slice(0, end - 1) + String.fromCharCode(prefix.charCodeAt(end - 1) + 1);
}

/** Length of the part of `key` that starts at `start`: 9 bytes for a double,
 * and a decimal's extension after them, up to and including the unescaped 0x00 terminator for a string or binary
 * value, and for a tuple its parts and the 0x00 after them. */
export function partLength(key: string, start = 0): number {
  const tag = key.charCodeAt(start);
  if (tag === TAG_NUMBER) {
    if (key.charCodeAt(start + 9) !== DECIMAL_EXTENSION) return 9;
    return 9 + extensionLength(key, start + 9, key.charCodeAt(start + 1) < 0x80);
  }
  if (tag === TAG_TUPLE) {
    let i = start + 1;
    while (i < key.length && key.charCodeAt(i) !== 0) i += partLength(key, i);
    return Math.min(i + 1, key.length) - start;
  }
  for (let i = start + 1; i < key.length; i++) {
    if (key.charCodeAt(i) !== 0) continue;
    if (key.charCodeAt(i + 1) === 0xff) i++;
    else return i + 1 - start;
  }
  return key.length - start;
}

/** Length of the first key part of `key`: its sharding part. */
export function firstPartLength(key: string): number {
  return partLength(key, 0);
}

/** A part's type when decoding: a column type, or a list of them for a tuple part. */
export type PartType = KeyType | readonly KeyType[];
export type DecodedPart = KeyValue | KeyValue[];

/** Decodes a key made of parts of the given types (the inverse of the encoders, for tools and tests). */
export function decodeKey(key: string, types: readonly PartType[]): DecodedPart[] {
  const [out, end] = decodeParts(key, 0, types);
  if (end !== key.length) throw new Error(`key has ${key.length - end} trailing bytes`);
  return out;
}

function decodeParts(key: string, start: number, types: readonly PartType[]): [DecodedPart[], number] {
  const out: DecodedPart[] = [];
  let i = start;
  for (const type of types) {
    const tag = key.charCodeAt(i++);
    if (typeof type !== 'string') {
      if (tag !== TAG_TUPLE) throw new Error(`key part ${out.length}: expected a tuple tag at byte ${i - 1}`);
      const [values, end] = decodeParts(key, i, type);
      if (key.charCodeAt(end) !== 0) throw new Error(`key part ${out.length}: the tuple does not end after ${type.length} parts`);
      out.push(values as KeyValue[]);
      i = end + 1;
      continue;
    }
    if (type === 'number') {
      if (tag !== TAG_NUMBER) throw new Error(`key part ${out.length}: expected a number tag at byte ${i - 1}`);
      if (i + 8 > key.length) throw new Error(`key part ${out.length}: a number needs 8 bytes`);
      if (key.charCodeAt(i + 8) !== DECIMAL_EXTENSION) {
        out.push(numberFromBytes(key.slice(i, i + 8)));
        i += 8;
        continue;
      }
      const negative = key.charCodeAt(i) < 0x80;
      const end = i + 8 + extensionLength(key, i + 8, negative);
      out.push(decodeDecimal(key.slice(i + 9, end), negative));
      i = end;
      continue;
    }
    if (tag !== (type === 'string' ? TAG_STRING : TAG_BINARY)) throw new Error(`key part ${out.length}: wrong tag at byte ${i - 1}`);
    const bytes: number[] = [];
    for (;;) {
      if (i >= key.length) throw new Error(`key part ${out.length}: no terminator`);
      const b = key.charCodeAt(i++);
      if (b !== 0) bytes.push(b);
      else if (key.charCodeAt(i) === 0xff) {
        bytes.push(0);
        i++;
      } else break;
    }
    const raw = new Uint8Array(bytes);
    out.push(type === 'string' ? Buffer.from(raw).toString('utf8') : raw);
  }
  return [out, i];
}

/** A decimal from its extension after the 0xFE: exponent byte and digit pairs. */
function decodeDecimal(ext: string, negative: boolean): KeyValue {
  const flip = negative ? 0xff : 0;
  if (ext.length < 2) throw new Error('a decimal key part needs an exponent and digits');
  const exponent = (ext.charCodeAt(0) ^ flip) + DECIMAL_EXPONENT_MIN;
  let digits = '';
  for (let j = 1; j < ext.length; j++) digits += String((ext.charCodeAt(j) ^ flip) >> 1).padStart(2, '0');
  const value = numberValueOf({ negative, digits: digits.replace(/0+$/, ''), point: exponent + 1 });
  if (typeof value === 'number') throw new Error(`a decimal key part holds ${value}, which is a double`);
  return value;
}

/** Byte length of a key value as the limits count it (UTF-8 for strings; a double 8 bytes,
 * a decimal its encoded part less the tag). */
export function keyValueBytes(type: KeyType, value: KeyValue): number {
  if (type === 'string') return Buffer.byteLength(value as string);
  if (type === 'binary') return (value as Uint8Array).byteLength;
  return typeof value === 'number' ? 8 : encodeKeyPart('number', value).length - 1;
}

// A msgpack reader for the client's answers (decodeClientResponses, shared/protocol.ts): the same values msgpackr's
// clientUnpackr makes of them, for the types the router writes (maps with string keys, lists, strings, bins, nil,
// booleans, integers up to 32 bits, doubles), faster on a range's page of items. The client's decode was the largest
// per-item cost of a range (msgpackr 39% of the client's busy samples: bench/PROFILE.md, "the client's decode").
// msgpackr with its native string extractor reads a large frame's strings in one call into C++, and its map keys
// through it too (its key cache serves only frames under 180 bytes), so every key of every item was a new string that
// V8 looked up again to store the property. Here a map key is read through a cache by its bytes (the same string
// object each time), and a value's string is made from its bytes.
//
// What it does not read it leaves, whole, to msgpackr (readMsgpack answers LEFT_TO_MSGPACKR): any ext value, floats
// of 32 bits, integers of 64, a map key that is not a string, a value nested deeper than READ_DEPTH_MAX, and every
// frame that is not well-formed (cut short, a count past its bytes or lists' counts together past them, bytes after the
// value). So a frame either decodes here to exactly what msgpackr made of it, or msgpackr reads it as before, with its
// errors and its bounds.
import { u16, u32 } from './msgpack-headers.js';
import { VALUE_DEPTH_MAX } from './limits.js';
import { bufferView, utf8Slice } from './buffer-view.js';

/** readMsgpack's answer for a frame it leaves to msgpackr. */
export const LEFT_TO_MSGPACKR: unique symbol = Symbol('left to msgpackr');

/** A response frame nests an item's values below [list, response, result, items]: deeper than that is no value a
 * client is sent, left to msgpackr (whose recursion it was before). */
const READ_DEPTH_MAX = VALUE_DEPTH_MAX + 8;
/** Keys cached by their first bytes and length, msgpackr's hash (readKey): a slot holds the last key that hashed to it. */
const KEY_CACHE_SLOTS = 4096;
/** Strings shorter than this are made in JS (String.fromCharCode); a call into C++ costs more for them. */
const SHORT_STRING_BYTES = 16;

/** Thrown inside the reader, caught in readMsgpack: one object, so that a throw makes no stack trace. */
const LEAVE = new Error('left to msgpackr');

interface CachedKey {
  readonly bytes: Uint8Array;
  readonly text: string;
}
const keyCache: (CachedKey | undefined)[] = new Array(KEY_CACHE_SLOTS);

const EMPTY = Buffer.alloc(0);
/** The frame being read (a Buffer over its bytes, for toString), and the same bytes as given (a bin is a view of them,
 * as msgpackr gives it); `at` where the next value starts. */
let src: Buffer = EMPTY;
let given: Uint8Array = EMPTY;
/** A view of the frame for its doubles (every stored item's __mtime is one): Buffer#readDoubleBE, with its checks and
 * its copy through a scratch array, was 2.4% of the client's samples on range pages; one DataView per frame. */
const EMPTY_VIEW: DataView = new DataView(new ArrayBuffer(0));
let view: DataView = EMPTY_VIEW;
let at = 0;
/** Slots the frame's lists may still take: its bytes, as msgpackr's arrayAllocationBudget. Each list's count is checked
 * against the bytes left, but lists nested in one another each pass that check while all are open: a chain of them, each
 * counting the rest of the frame, allocated READ_DEPTH_MAX times the frame's bytes in slots (a 4 MB frame took 1.2 GB
 * and 5 s before it was left to msgpackr; 32 MB ran the client out of heap). The elements of lists in a well-formed frame
 * each take a byte of their own, so their sum stays within it. */
let listBudget = 0;

/** One msgpack value, the whole of `bytes`, as clientUnpackr (maps as objects, useRecords false) reads it, or
 * LEFT_TO_MSGPACKR (above: what is left, and why). Values are built as they are read; a bin is a view of `bytes`. */
export function readMsgpack(bytes: Uint8Array): unknown {
  given = bytes;
  src = bufferView(bytes);
  view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  at = 0;
  listBudget = bytes.length;
  try {
    const v = read(0);
    return at === src.length ? v : LEFT_TO_MSGPACKR;
  } catch (err) {
    if (err === LEAVE) return LEFT_TO_MSGPACKR;
    throw err;
  } finally {
    src = EMPTY;
    given = EMPTY;
    view = EMPTY_VIEW;
  }
}

function read(depth: number): unknown {
  const t = src[at++];
  if (t < 0x80) return t; // positive fixint (undefined, past the end, falls through to the switch's default)
  if (t < 0x90) return readMap(t & 0x0f, depth);
  if (t < 0xa0) return readList(t & 0x0f, depth);
  if (t < 0xc0) return readString(t & 0x1f);
  if (t >= 0xe0) return t - 0x100; // negative fixint
  let n: number;
  switch (t) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xc4: // bin 8, 16, 32
      n = src[at];
      at += 1;
      return readBin(n);
    case 0xc5:
      n = u16(src, at - 1);
      at += 2;
      return readBin(n);
    case 0xc6:
      n = u32(src, at - 1);
      at += 4;
      return readBin(n);
    case 0xcb:
      if (at + 8 > src.length) throw LEAVE;
      at += 8;
      return view.getFloat64(at - 8);
    case 0xcc: // uint 8, 16, 32
      if (at + 1 > src.length) throw LEAVE;
      return src[at++];
    case 0xcd:
      if (at + 2 > src.length) throw LEAVE;
      at += 2;
      return u16(src, at - 3);
    case 0xce:
      if (at + 4 > src.length) throw LEAVE;
      at += 4;
      return u32(src, at - 5);
    case 0xd0: // int 8, 16, 32
      if (at + 1 > src.length) throw LEAVE;
      return src.readInt8(at++);
    case 0xd1:
      if (at + 2 > src.length) throw LEAVE;
      at += 2;
      return src.readInt16BE(at - 2);
    case 0xd2:
      if (at + 4 > src.length) throw LEAVE;
      at += 4;
      return src.readInt32BE(at - 4);
    case 0xd9: // str 8, 16, 32
      n = src[at];
      at += 1;
      return readString(n);
    case 0xda:
      n = u16(src, at - 1);
      at += 2;
      return readString(n);
    case 0xdb:
      n = u32(src, at - 1);
      at += 4;
      return readString(n);
    case 0xdc: // array 16, 32
      n = u16(src, at - 1);
      at += 2;
      return readList(n, depth);
    case 0xdd:
      n = u32(src, at - 1);
      at += 4;
      return readList(n, depth);
    case 0xde: // map 16, 32
      n = u16(src, at - 1);
      at += 2;
      return readMap(n, depth);
    case 0xdf:
      n = u32(src, at - 1);
      at += 4;
      return readMap(n, depth);
    default:
      throw LEAVE;
  }
}

/** A length read from a header cut short is NaN (a byte past the end): `!(at + n <= length)` refuses it too. */
function readBin(n: number): Uint8Array {
  if (!(at + n <= src.length)) throw LEAVE;
  at += n;
  return given.subarray(at - n, at);
}

function readList(n: number, depth: number): unknown[] {
  // Every element takes a byte at least: a count past the bytes, or past what the frame's lists may take together
  // (listBudget), is refused before anything is allocated for it.
  if (!(at + n <= src.length) || (listBudget -= n) < 0 || depth >= READ_DEPTH_MAX) throw LEAVE;
  const list: unknown[] = new Array(n);
  for (let i = 0; i < n; i++) list[i] = read(depth + 1);
  return list;
}

function readMap(n: number, depth: number): Record<string, unknown> {
  if (!(at + 2 * n <= src.length) || depth >= READ_DEPTH_MAX) throw LEAVE;
  const map: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const t = src[at];
    let key: string;
    if (t >= 0xa0 && t <= 0xbf) {
      at += 1;
      key = readKey(t & 0x1f);
    } else if (t === 0xd9 || t === 0xda || t === 0xdb) key = read(depth + 1) as string;
    else throw LEAVE; // a key that is not a string: msgpackr makes it one (asSafeString)
    // As msgpackr does: a key "__proto__" stored as a property would set the object's prototype.
    if (key === '__proto__') key = '__proto_';
    map[key] = read(depth + 1);
  }
  return map;
}

/** A fixstr key of `n` bytes at `at`: the cached string if its slot holds these bytes, else made and cached. */
function readKey(n: number): string {
  if (at + n > src.length) throw LEAVE;
  const slot = ((n << 5) ^ (n > 1 ? (src[at] << 8) | src[at + 1] : n > 0 ? src[at] : 0)) & (KEY_CACHE_SLOTS - 1);
  const cached = keyCache[slot];
  if (cached !== undefined && cached.bytes.length === n) {
    let i = 0;
    while (i < n && cached.bytes[i] === src[at + i]) i++;
    if (i === n) {
      at += n;
      return cached.text;
    }
  }
  const bytes = Uint8Array.prototype.slice.call(src, at, at + n);
  const text = readString(n);
  keyCache[slot] = { bytes, text };
  return text;
}

/** A string of `n` bytes of UTF-8 at `at`: in JS while short and ASCII (shortAscii), else Buffer's decoder (V8's, as
 * msgpackr's native extractor; a malformed sequence becomes U+FFFD either way). */
function readString(n: number): string {
  const end = at + n;
  if (!(end <= src.length)) throw LEAVE;
  let text: string | null = null;
  if (n < SHORT_STRING_BYTES) text = shortAscii(src, at, n);
  if (text === null) text = utf8Slice.call(src, at, end);
  at = end;
  return text;
}

const fcc = String.fromCharCode;
/** The `n` bytes at `p` as a string if all are ASCII, else null. One fromCharCode call with a byte per argument
 * (msgpackr's shortStringInJS does the same): for 9 bytes 18 ns, where a call per byte joined cost 69 and
 * Buffer#toString 61 (node 20, one process). */
function shortAscii(s: Buffer, p: number, n: number): string | null {
  let any = 0;
  for (let i = p; i < p + n; i++) any |= s[i];
  if (any >= 0x80) return null;
  switch (n) {
    case 0:
      return '';
    case 1:
      return fcc(s[p]);
    case 2:
      return fcc(s[p], s[p + 1]);
    case 3:
      return fcc(s[p], s[p + 1], s[p + 2]);
    case 4:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3]);
    case 5:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4]);
    case 6:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5]);
    case 7:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6]);
    case 8:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7]);
    case 9:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8]);
    case 10:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9]);
    case 11:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9], s[p + 10]);
    case 12:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9], s[p + 10], s[p + 11]);
    case 13:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9], s[p + 10], s[p + 11], s[p + 12]);
    case 14:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9], s[p + 10], s[p + 11], s[p + 12], s[p + 13]);
    case 15:
      return fcc(s[p], s[p + 1], s[p + 2], s[p + 3], s[p + 4], s[p + 5], s[p + 6], s[p + 7], s[p + 8], s[p + 9], s[p + 10], s[p + 11], s[p + 12], s[p + 13], s[p + 14]);
    default:
      throw new Error(`shortAscii takes at most ${SHORT_STRING_BYTES - 1} bytes, not ${n}`);
  }
}

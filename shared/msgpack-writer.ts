// msgpack written by hand, byte by byte: the headers and numbers of the few frames and logs whose layout the hot path
// writes itself (a BatchReply's head in the worker's headroom, an Append, a replica log's append and commit ops, a
// GetItem answer's head) rather than through msgpackr's walk over each object. Each writes what msgpackr reads back as
// the same value, not always msgpackr's bytes (a map's header: replica-log.ts packOps); the tests that check it are
// named where each is used (test/node-frames.test.ts, replica-log.test.ts).
import { assert } from './errors.js';

/** How many bytes a msgpack array header for `n` elements takes (putArrayHeader). */
export function arrayHeaderBytes(n: number): number {
  return n < 0x10 ? 1 : n < 0x10000 ? 3 : 5;
}

/** Writes a msgpack array header for `n` elements into `out` at `at`; returns where it ends. */
export function putArrayHeader(out: Uint8Array, at: number, n: number): number {
  assert(Number.isSafeInteger(n) && n >= 0 && n <= 0xffffffff, 'a list length msgpack can hold');
  if (n < 0x10) {
    out[at++] = 0x90 | n;
    return at;
  }
  return n < 0x10000 ? putTagged(out, at, 0xdc, n, 2) : putTagged(out, at, 0xdd, n, 4);
}

/** Writes `tag`, then `n` big-endian in `width` bytes (1, 2 or 4): a header of a length that msgpack tags by width. */
function putTagged(out: Uint8Array, at: number, tag: number, n: number, width: 1 | 2 | 4): number {
  out[at++] = tag;
  for (let shift = (width - 1) * 8; shift >= 0; shift -= 8) out[at++] = (n >>> shift) & 0xff;
  return at;
}

/** A msgpack array header for `n` elements. */
export function arrayHeader(n: number): Uint8Array {
  const header = new Uint8Array(arrayHeaderBytes(n));
  putArrayHeader(header, 0, n);
  return header;
}

/** A key as a msgpack fixstr: ASCII of at most 31 characters (one byte each), as these field names are. */
export function fixstr(s: string): Uint8Array {
  assert(s.length < 32 && /^[\x20-\x7e]*$/.test(s), 'a fixstr key is ASCII of at most 31 characters');
  return Uint8Array.from([0xa0 | s.length, ...Buffer.from(s, 'latin1')]);
}

/** Bytes of a whole number >= 0 as msgpack (a double past 32 bits, as msgpackr writes it). */
export const uintBytes = (v: number): number => (v < 0x80 ? 1 : v < 0x100 ? 2 : v < 0x10000 ? 3 : v <= 0xffffffff ? 5 : 9);

/** Writes `v` (a whole number >= 0) as uintBytes(v) bytes of msgpack into `out` at `at`; returns where it ends. */
export function putUint(out: Uint8Array, view: DataView, at: number, v: number): number {
  if (v < 0x80) out[at++] = v;
  else if (v < 0x100) {
    out[at++] = 0xcc;
    out[at++] = v;
  } else if (v < 0x10000) {
    out[at++] = 0xcd;
    view.setUint16(at, v);
    at += 2;
  } else if (v <= 0xffffffff) {
    out[at++] = 0xce;
    view.setUint32(at, v);
    at += 4;
  } else {
    out[at++] = 0xcb;
    view.setFloat64(at, v);
    at += 8;
  }
  return at;
}

/** How many bytes a msgpack bin header for `n` bytes takes (putBinHeader). */
export function binHeaderBytes(n: number): number {
  return n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
}

/** Writes a msgpack bin header for `n` bytes into `out` at `at`; returns where it ends. */
export function putBinHeader(out: Uint8Array, at: number, n: number): number {
  assert(Number.isSafeInteger(n) && n >= 0 && n <= 0xffffffff, 'a bin length msgpack can hold');
  return n < 0x100 ? putTagged(out, at, 0xc4, n, 1) : n < 0x10000 ? putTagged(out, at, 0xc5, n, 2) : putTagged(out, at, 0xc6, n, 4);
}

/** How many bytes a msgpack str header for `n` bytes of UTF-8 takes (putStrHeader). */
export function strHeaderBytes(n: number): number {
  return n < 0x20 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
}

/** Writes a msgpack str header for `n` bytes of UTF-8 into `out` at `at` (fixstr, then str 8, 16, 32 as msgpackr
 * writes them); returns where it ends. */
export function putStrHeader(out: Uint8Array, at: number, n: number): number {
  assert(Number.isSafeInteger(n) && n >= 0 && n <= 0xffffffff, 'a str length msgpack can hold');
  if (n < 0x20) {
    out[at++] = 0xa0 | n;
    return at;
  }
  return n < 0x100 ? putTagged(out, at, 0xd9, n, 1) : n < 0x10000 ? putTagged(out, at, 0xda, n, 2) : putTagged(out, at, 0xdb, n, 4);
}

/** A msgpack bin header for `n` bytes. */
export function binHeader(n: number): Uint8Array {
  const header = new Uint8Array(binHeaderBytes(n));
  putBinHeader(header, 0, n);
  return header;
}

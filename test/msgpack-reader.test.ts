// The client's reader of answers (shared/msgpack-reader.ts, used by decodeClientResponses): what it reads is what
// msgpackr (the client's unpackr, which read every answer before) made of the same bytes, and what it does not read
// (other types, bytes that are not well-formed) it leaves whole to msgpackr, so a bad frame fails as it did.
import { spawnSync } from 'node:child_process';
import { Packr, Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { prng } from '../bench/keys.js';
import { LEFT_TO_MSGPACKR, readMsgpack } from '../shared/msgpack-reader.js';
import { decodeClientResponses, encodeClientFrame, PackedItems, packClientList, RESULT_ERROR, RESULT_OK } from '../shared/protocol.js';
import { VALUE_DEPTH_MAX } from '../shared/limits.js';
import { int, pick, randomBytes, randomValue, type Rng } from './node-fuzz-model.js';

const SEED = 1127;
/** The client's packr and unpackr as shared/protocol.ts makes them. */
const packr = new Packr({ useRecords: false });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, structuredClone: false });

const KEYS = ['device', 'seq', 'payload', 'a', '', '__proto__', 'k'.repeat(31), 'k'.repeat(32), 'ключ', 'é', 'x'.repeat(300)];
// Lone surrogates too: no stored string holds one (checkText), but msgpackr writes one as 3 bytes that are not UTF-8
// (ED A0 80), of which both readers make three U+FFFD.
const STRINGS = ['', 'd1', 'range-17', '\ud800', 'a\udc00b', 'x'.repeat(20) + '\ud800', 'x'.repeat(15), 'x'.repeat(16), 'x'.repeat(160), 'é', 'aé', '日本語のテキスト', '\u{1F600}'.repeat(9), 'x'.repeat(70_000)];
/** One number of each encoding msgpackr writes a number in: fixints, 8 to 32 bits either sign, doubles. */
const NUMBERS = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, -1, -32, -33, -128, -129, -32_768, -32_769, -(2 ** 31), 0.5, -1.25, 2 ** 40, 2 ** 53 - 1, -(2 ** 53 - 1), 1e300];

/** A value of the types the router sends a client, nested up to `depth`. */
function answerValue(r: Rng, depth: number): unknown {
  switch (int(r, depth > 0 ? 8 : 5)) {
    case 0:
      return pick(r, NUMBERS);
    case 1:
      return pick(r, STRINGS);
    case 2:
      return pick(r, [null, true, false]);
    case 3:
      return randomBytes(r, 300);
    case 4:
      return int(r, 1000);
    case 5:
      return Array.from({ length: int(r, 8) }, () => answerValue(r, depth - 1));
    default: {
      const o: Record<string, unknown> = {};
      // defineProperty: an assignment to "__proto__" would set the prototype, not a key.
      for (let i = int(r, 8); i > 0; i--) Object.defineProperty(o, pick(r, KEYS), { value: answerValue(r, depth - 1), enumerable: true, writable: true, configurable: true });
      return o;
    }
  }
}

/** readMsgpack of `bytes` is msgpackr's value, or it left them to msgpackr; which, returned. */
function sameAsMsgpackr(bytes: Uint8Array, what: string): 'read' | 'left' {
  const read = readMsgpack(bytes);
  if (read === LEFT_TO_MSGPACKR) return 'left';
  expect(read, what).toStrictEqual(unpackr.unpack(bytes));
  return 'read';
}

describe("the client's msgpack reader", () => {
  it(`reads every value of the types a router sends as msgpackr does, itself (seed ${SEED})`, () => {
    const r = prng(SEED);
    for (let i = 0; i < 2000; i++) {
      const v = answerValue(r, 3);
      expect(sameAsMsgpackr(packr.pack(v), `seed ${SEED}, case ${i}`), `seed ${SEED}, case ${i}`).toBe('read');
    }
  });

  it('reads each form of each type, a key "__proto__" renamed as msgpackr renames it, a bin as a view of the frame', () => {
    // msgpackr writes the narrowest form: the wide forms of short values, which msgpack allows, by hand.
    const forms: [string, number[]][] = [
      ['uint 8', [0xcc, 0xff]],
      ['uint 16', [0xcd, 0x01, 0x00]],
      ['uint 32', [0xce, 0xff, 0xff, 0xff, 0xff]],
      ['int 8', [0xd0, 0x80]],
      ['int 16', [0xd1, 0x80, 0x00]],
      ['int 32', [0xd2, 0x80, 0x00, 0x00, 0x00]],
      ['str 32 of 2', [0xdb, 0, 0, 0, 2, 0x68, 0x69]],
      ['bin 32 of 1', [0xc6, 0, 0, 0, 1, 7]],
      ['array 32 of 1', [0xdd, 0, 0, 0, 1, 0xc3]],
      ['map 32 of 1, a str 8 key', [0xdf, 0, 0, 0, 1, 0xd9, 1, 0x61, 0xc2]],
      ['a key "__proto__"', [...packr.pack({ ['__proto__']: 1 })]],
    ];
    for (const [what, bytes] of forms) expect(sameAsMsgpackr(Buffer.from(bytes), what), what).toBe('read');
    const proto = readMsgpack(packr.pack(JSON.parse('{"__proto__": {"polluted": 1}}'))) as Record<string, unknown>;
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    expect(proto).toStrictEqual({ __proto_: { polluted: 1 } });
    // A frame at an offset in a larger buffer (as ws may hand one over): its doubles and bins read from where it starts.
    const within = packr.pack([1795786586574, -0.5, Buffer.from([9, 8])]);
    const shifted = Buffer.concat([Buffer.from([0xcb, 1, 2, 3, 4, 5, 6, 7, 8]), within]).subarray(9);
    expect(readMsgpack(shifted)).toStrictEqual(unpackr.unpack(within));
    expect(readMsgpack(new Uint8Array(shifted.buffer, shifted.byteOffset, shifted.byteLength))).toStrictEqual([1795786586574, -0.5, new Uint8Array([9, 8])]);
    const frame = packr.pack([Buffer.from([1, 2, 3])]);
    const [bin] = readMsgpack(frame) as [Buffer];
    expect(bin.buffer).toBe(frame.buffer);
  });

  it('keeps keys apart whose bytes fall in one cache slot (same length and first two bytes)', () => {
    // "payload" and "paxxxxx" hash alike (msgpackr's hash: length and the first two bytes).
    const bytes = packr.pack([{ payload: 1, pa12345: 2 }, { pa12345: 3, payload: 4 }, { payload: 5 }]);
    expect(readMsgpack(bytes)).toStrictEqual([{ payload: 1, pa12345: 2 }, { pa12345: 3, payload: 4 }, { payload: 5 }]);
  });

  it('leaves to msgpackr the types it does not read: ext, 64-bit integers, float 32, keys that are not strings, deep nesting', () => {
    const left: [string, Uint8Array][] = [
      ['a date (ext)', packr.pack([new Date(0)])],
      ['uint 64', Buffer.from([0xcf, 0, 0, 0, 1, 0, 0, 0, 0])],
      ['int 64', Buffer.from([0xd3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])],
      ['float 32', Buffer.from([0xca, 0x3f, 0x80, 0, 0])],
      ['a number key', Buffer.from([0x81, 0x01, 0xc0])],
      ['a list key', Buffer.from([0x81, 0x90, 0xc0])],
      ['a record (ext 0x72)', new Packr({ useRecords: true }).pack([{ a: 1 }, { a: 2 }])],
      ['lists nested past the bound', Buffer.from([...Array<number>(VALUE_DEPTH_MAX + 20).fill(0x91), 0xc0])],
    ];
    for (const [what, bytes] of left) {
      expect(readMsgpack(bytes), what).toBe(LEFT_TO_MSGPACKR);
      if (what !== 'a list key') unpackr.unpack(bytes); // msgpackr reads them (a list key it refuses)
    }
  });

  it(`leaves every frame that is not well-formed to msgpackr, never a value of its own: each cut of a valid frame, counts past the bytes, bytes after the value, random bytes and values (seed ${SEED})`, () => {
    const r = prng(SEED + 1);
    const item = { device: 'é-1', seq: -70_000, at: 0.5, payload: 'x'.repeat(300), blob: Buffer.alloc(300, 7), list: [true, false, null, 2 ** 32 - 1, { ['k'.repeat(40)]: 'v' }] };
    const whole = packr.pack([[1, RESULT_OK, { items: [item, item], examined: 5 }], [2, RESULT_ERROR, 'ValidationError', 'no']]);
    for (let n = 0; n < whole.length; n++) expect(readMsgpack(whole.subarray(0, n)), `the first ${n} of ${whole.length} bytes`).toBe(LEFT_TO_MSGPACKR);
    expect(readMsgpack(Buffer.concat([whole, Buffer.from([0xc0])]))).toBe(LEFT_TO_MSGPACKR);
    // Counts of 2^32 - 1 in 5 bytes: refused before anything is allocated for them.
    for (const head of [0xdd, 0xdf, 0xc6, 0xdb]) expect(readMsgpack(Buffer.from([head, 0xff, 0xff, 0xff, 0xff, 0xc0])), head.toString(16)).toBe(LEFT_TO_MSGPACKR);
    let read = 0;
    for (let i = 0; i < 3000; i++) {
      const bytes = i % 2 === 0 ? randomBytes(r, 64) : packr.pack(randomValue(r, 4));
      let expected: unknown;
      let msgpackrThrew = false;
      try {
        expected = unpackr.unpack(bytes);
      } catch {
        msgpackrThrew = true;
      }
      const got = readMsgpack(bytes);
      if (got === LEFT_TO_MSGPACKR) continue;
      read++;
      expect(msgpackrThrew, `seed ${SEED + 1}, case ${i}: read what msgpackr refuses`).toBe(false);
      expect(got, `seed ${SEED + 1}, case ${i}`).toStrictEqual(expected);
    }
    expect(read).toBeGreaterThan(500);
  });

  it('reads a frame of lists nested each counting the rest of it within the memory msgpackr took (a process of 64 MB heap)', () => {
    // 40 lists, each nested in the one before and each counting the bytes after it: each passes the check of its count
    // against the bytes left, and all are open at once. Without a bound on what the frame's lists take together they
    // took 40 times the frame in slots (here 4 MB: 1.3 GB) before the frame was left to msgpackr.
    const script = `
      const { decodeClientResponses } = await import('./dist/shared/protocol.js');
      const size = 4_000_000;
      const b = Buffer.alloc(size, 0xc0);
      for (let d = 0; d < 40; d++) { b[d * 5] = 0xdd; b.writeUInt32BE(size - d * 5 - 6, d * 5 + 1); }
      try { decodeClientResponses(b); console.log('read'); } catch (err) { console.log(err.message); }`;
    const child = spawnSync(process.execPath, ['--max-old-space-size=64', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(child.stderr.slice(-300), 'stderr').toBe('');
    expect(child.status).toBe(0);
    expect(child.stdout.trim()).toBe('Unexpected end of MessagePack data');
  });

  it("decodes a router's frame of pages as before, and a frame it cannot read throws as before", () => {
    const page = (d: number) => packClientList(Array.from({ length: 100 }, (_, s) => ({ device: `range-${d}`, seq: s, payload: 'x'.repeat(160) })));
    const frame = encodeClientFrame([
      [1, RESULT_OK, { items: PackedItems.ofList(page(1)), examined: 100, marker: 'm' }],
      [2, RESULT_ERROR, 'ConditionalCheckFailed', 'no', { item: { device: 'd', seq: 1.5 } }],
      [3, RESULT_OK, { items: PackedItems.ofList(page(2)) }],
    ]);
    expect(readMsgpack(frame)).not.toBe(LEFT_TO_MSGPACKR);
    expect(decodeClientResponses(frame)).toStrictEqual(unpackr.unpack(frame));
    expect(() => decodeClientResponses(frame.subarray(0, frame.length - 1))).toThrow(/Unexpected end|end of buffer/i);
    expect(() => decodeClientResponses(Buffer.from([0xc3]))).toThrow(/malformed response frame/);
  });
});

// A differential fuzz against msgpackr over msgpack written byte by byte, not by a packer: every form of every type
// (the wide forms msgpackr never writes), strings of bytes that are not UTF-8 as keys and as values, keys that share a
// cache slot, keys an object treats apart ("__proto__", "constructor", integer-like, repeated), keys that are not
// strings, frames either side of msgpackr's small-frame paths (140 and 180 bytes), frames given as a Buffer, as a
// Uint8Array and at an offset in a larger buffer, and each frame once more with a byte changed, cut or added. Where the
// reader reads a frame, msgpackr reads it to the same value: same types (a bin's class and the bytes it views), numbers by
// Object.is (-0, NaN), objects' keys in the same order, the same prototype.
const FUZZ_SEED = 2611;
/** Bytes of strings: ASCII, UTF-8 of any code point, and what is not UTF-8 (a lone surrogate as msgpackr writes it, an
 * overlong form, a sequence cut short, a byte no sequence starts with, a code point past U+10FFFF). */
const STRING_BYTES: number[][] = [
  [],
  [0x61],
  [0xed, 0xa0, 0x80],
  [0xed, 0x9f, 0xbf],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0xf0, 0x9f, 0x98, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80],
  [0x80],
  [0xff],
  [0xe0, 0x80, 0x80],
  [0xc3, 0xa9],
  [0xe6, 0x97, 0xa5],
];
/** Keys that fall in few cache slots (length and first two bytes alike), and keys an object treats apart. */
const FUZZ_KEYS = ['pa', 'pay', 'payload', 'pa12345', 'pa1234x', 'paylo\u00e9', 'device', 'devicf', '__proto__', 'constructor', 'toString', 'hasOwnProperty', '0', '1', '01', '-1', '4294967295', '1.5', '', '$N', '$SS'];

function fuzzString(r: Rng, max: number): number[] {
  const out: number[] = [];
  const n = int(r, max);
  while (out.length < n) out.push(...(int(r, 3) === 0 ? pick(r, STRING_BYTES) : [0x20 + int(r, 0x5f)]));
  return out;
}

/** A header of `form` (0: the fix form where there is one, 1..3: 8, 16, 32 bits) for a count `n`. */
function header(out: number[], n: number, fix: number | null, fixMax: number, wide: [number | null, number, number], r: Rng): void {
  const forms = [fix !== null && n <= fixMax ? 0 : -1, wide[0] !== null && n < 256 ? 1 : -1, n < 65_536 ? 2 : -1, 3].filter((f) => f >= 0);
  const form = pick(r, forms);
  if (form === 0) out.push(fix! | n);
  else if (form === 1) out.push(wide[0]!, n);
  else if (form === 2) out.push(wide[1], n >> 8, n & 0xff);
  else out.push(wide[2], (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

function fuzzStr(r: Rng, out: number[], bytes: number[]): void {
  header(out, bytes.length, 0xa0, 31, [0xd9, 0xda, 0xdb], r);
  out.push(...bytes);
}

function fuzzValue(r: Rng, out: number[], depth: number): void {
  const be = (n: number, bytes: number) => {
    for (let k = bytes - 1; k >= 0; k--) out.push(Math.floor(n / 2 ** (8 * k)) & 0xff);
  };
  switch (int(r, depth > 0 ? 13 : 10)) {
    case 0:
      out.push(pick(r, [0xc0, 0xc2, 0xc3, 0xc1]));
      return;
    case 1:
      out.push(int(r, 2) === 0 ? int(r, 0x80) : 0xe0 + int(r, 32));
      return;
    case 2: {
      const [head, bytes, max] = pick(r, [[0xcc, 1, 2 ** 8], [0xcd, 2, 2 ** 16], [0xce, 4, 2 ** 32]] as const);
      out.push(head);
      be(int(r, 2) === 0 ? int(r, 200) : max - 1 - int(r, 200), bytes);
      return;
    }
    case 3: {
      const [head, bytes] = pick(r, [[0xd0, 1], [0xd1, 2], [0xd2, 4]] as const);
      out.push(head);
      const v = int(r, 2) === 0 ? -1 - int(r, 200) : int(r, 2) === 0 ? -(2 ** (8 * bytes - 1)) + int(r, 200) : int(r, 2 ** (8 * bytes - 1));
      be(v < 0 ? v + 2 ** (8 * bytes) : v, bytes);
      return;
    }
    case 4: {
      const d = Buffer.alloc(9);
      d[0] = 0xcb;
      d.writeDoubleBE(pick(r, [0, -0, NaN, Infinity, -Infinity, 0.1, -1.5, 1e300, 5e-324, 2 ** 53, 1795786586574.25, r() * 1e6]), 1);
      out.push(...d);
      return;
    }
    case 5: // read by msgpackr alone: float 32, 64-bit integers, an ext
      out.push(...pick(r, [[0xca, 0x3f, 0x80, 0, 0], [0xcf, 0, 0, 0, 1, 0, 0, 0, 0], [0xd3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0], [0xd4, 0x05, 0x00]]));
      return;
    case 6:
    case 7:
      fuzzStr(r, out, fuzzString(r, int(r, 4) === 0 ? 300 : 24));
      return;
    case 8:
    case 9: {
      const n = int(r, 4) === 0 ? int(r, 300) : int(r, 10);
      header(out, n, null, 0, [0xc4, 0xc5, 0xc6], r);
      for (let k = 0; k < n; k++) out.push(int(r, 256));
      return;
    }
    case 10: {
      const n = int(r, 6);
      header(out, n, 0x90, 15, [null, 0xdc, 0xdd], r);
      for (let k = 0; k < n; k++) fuzzValue(r, out, depth - 1);
      return;
    }
    default: {
      const n = int(r, 7);
      header(out, n, 0x80, 15, [null, 0xde, 0xdf], r);
      for (let k = 0; k < n; k++) {
        const kind = int(r, 20);
        if (kind === 0) fuzzValue(r, out, 0); // a key that is not a string (or is one, by chance)
        else if (kind < 4) fuzzStr(r, out, fuzzString(r, 40));
        else fuzzStr(r, out, [...Buffer.from(pick(r, FUZZ_KEYS))]);
        fuzzValue(r, out, depth - 1);
      }
    }
  }
}

/** Throws where `a` (the reader's) and `b` (msgpackr's) differ in anything a client could see. */
function assertSame(a: unknown, b: unknown, path: string): void {
  const fail = (why: string) => {
    throw new Error(`${path}: ${why}`);
  };
  if (typeof a !== typeof b) fail(`${typeof a} vs ${typeof b}`);
  if (typeof a !== 'object' || a === null || b === null) {
    if (!Object.is(a, b)) fail(`${String(a)} vs ${String(b)}`);
    return;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  if (Object.getPrototypeOf(x) !== Object.getPrototypeOf(y)) fail('prototypes differ');
  if (x instanceof Uint8Array) {
    const v = y as unknown as Uint8Array;
    if (x.buffer !== v.buffer || x.byteOffset !== v.byteOffset || x.byteLength !== v.byteLength) fail('bins view different bytes');
    return;
  }
  const keys = Object.keys(x);
  if (keys.join('\u0000') !== Object.keys(y).join('\u0000') || Array.isArray(x) !== Array.isArray(y)) fail(`keys ${JSON.stringify(keys)} vs ${JSON.stringify(Object.keys(y))}`);
  for (const k of keys) assertSame(x[k], y[k], `${path}.${k}`);
}

/** The frame's bytes as a Buffer, as a plain Uint8Array, or at an offset within a larger buffer. */
function given(r: Rng, bytes: number[]): Uint8Array {
  switch (int(r, 3)) {
    case 0:
      return Buffer.from(bytes);
    case 1:
      return new Uint8Array(bytes);
    default: {
      const at = 1 + int(r, 9);
      const whole = new Uint8Array(at + bytes.length + int(r, 9)).fill(0xcb);
      whole.set(bytes, at);
      return int(r, 2) === 0 ? whole.subarray(at, at + bytes.length) : Buffer.from(whole.buffer, at, bytes.length);
    }
  }
}

describe("the client's msgpack reader against msgpackr, byte by byte", () => {
  it(`reads what msgpackr reads to the same value, and nothing msgpackr refuses (seed ${FUZZ_SEED})`, () => {
    const r = prng(FUZZ_SEED);
    let read = 0;
    let left = 0;
    for (let i = 0; i < 6000; i++) {
      const out: number[] = [0x92];
      fuzzValue(r, out, 4);
      // A string after the value takes the frame across msgpackr's small-frame bounds (140 and 180 bytes) or not.
      fuzzStr(r, out, Array<number>(int(r, 220)).fill(0x78));
      const mutated = [...out];
      const at = int(r, mutated.length);
      switch (int(r, 4)) {
        case 0:
          mutated[at] = int(r, 256);
          break;
        case 1:
          mutated.length = at;
          break;
        case 2:
          mutated.splice(at, 0, int(r, 256));
          break;
        default:
          mutated.splice(at, 1);
      }
      for (const [which, bytes] of [['frame', out], ['changed', mutated]] as const) {
        const what = `seed ${FUZZ_SEED}, case ${i}, ${which} ${Buffer.from(bytes).toString('hex').slice(0, 400)}`;
        const frame = given(r, bytes);
        const got = readMsgpack(frame);
        if (got === LEFT_TO_MSGPACKR) {
          left++;
          continue;
        }
        read++;
        let expected: unknown;
        try {
          expected = unpackr.unpack(frame);
        } catch (err) {
          throw new Error(`${what}: read what msgpackr refuses (${(err as Error).message})`);
        }
        assertSame(got, expected, what);
      }
    }
    // Both kinds in numbers, so that neither side of the comparison is empty.
    expect(read).toBeGreaterThan(2000);
    expect(left).toBeGreaterThan(2000);
  });

  it('reads values nested up to its bound as msgpackr does, and leaves deeper ones to it, maps and lists alike', () => {
    // The reader's bound: VALUE_DEPTH_MAX + 8 maps and lists (shared/msgpack-reader.ts, READ_DEPTH_MAX).
    const bound = VALUE_DEPTH_MAX + 8;
    for (const depth of [1, 30, bound - 1, bound, bound + 1, 200, 5000]) {
      // {"a": [{"a": [... nil]}]}, `depth` maps and lists in turn, then a double.
      const bytes: number[] = [];
      for (let d = 0; d < depth; d++) bytes.push(...(d % 2 === 0 ? [0x81, 0xa1, 0x61] : [0x91]));
      bytes.push(0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0);
      const frame = Buffer.from(bytes);
      const got = readMsgpack(frame);
      expect(got === LEFT_TO_MSGPACKR, `depth ${depth}`).toBe(depth > bound);
      if (got !== LEFT_TO_MSGPACKR) assertSame(got, unpackr.unpack(frame), `depth ${depth}`);
    }
  });
});

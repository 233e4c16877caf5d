// The client's reader of answers (shared/msgpack-reader.ts, used by decodeClientResponses): what it reads is what
// msgpackr (the client's unpackr, which read every answer before) made of the same bytes, and what it does not read
// (other types, bytes that are not well-formed) it leaves whole to msgpackr, so a bad frame fails as it did.
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

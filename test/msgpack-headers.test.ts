// The one reader of a msgpack string's header (shared/msgpack-headers.ts stringEnd): a string in each of its four
// forms is read to its end, and a header cut short or a length past the bytes is no string, in the reader and in the
// paths built on it (a router's check of packed items, a follower's check of a record, the DynamoDB endpoint's JSON
// written from packed items), which refuse the same forms.
import { describe, expect, it } from 'vitest';
import { itemsJson } from '../coordinator/dynamodb/item-json.js';
import { stringEnd, stringHeaderBytes } from '../shared/msgpack-headers.js';
import { MalformedFrame, PackedItems, setEffectsEnd, skipValue } from '../shared/protocol.js';

/** A string of `n` bytes ('a') in the form tagged `tag`: its header then its body. */
function str(tag: 0xa0 | 0xd9 | 0xda | 0xdb, n: number): Uint8Array {
  const head = tag === 0xa0 ? [0xa0 | n] : tag === 0xd9 ? [tag, n] : tag === 0xda ? [tag, n >> 8, n & 0xff] : [tag, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  return Uint8Array.from([...head, ...Array<number>(n).fill(0x61)]);
}
const FORMS = [
  ['fixstr', str(0xa0, 5)],
  ['str 8', str(0xd9, 40)],
  ['str 16', str(0xda, 300)],
  ['str 32', str(0xdb, 70_000)],
  // A wide header for a short string: msgpack allows it, though msgpackr writes the narrowest.
  ['str 32 of 10 bytes', str(0xdb, 10)],
] as const;

describe("a msgpack string's header, read in place", () => {
  it('is read to the end of the string in each form, from any offset, and only for a string type byte', () => {
    for (const [what, s] of FORMS) {
      expect(stringEnd(s, 0), what).toBe(s.length);
      const within = Uint8Array.from([0xc0, ...s, 0xc0]);
      expect(stringEnd(within, 1), `${what} between two values`).toBe(s.length + 1);
      expect(stringHeaderBytes(s[0]), what).toBe({ 0xa5: 1, 0xd9: 2, 0xda: 3, 0xdb: 5 }[s[0]]);
    }
    expect(stringEnd(Uint8Array.of(0xa0), 0), 'the empty fixstr').toBe(1);
    for (const t of [0x00, 0x7f, 0x80, 0x9f, 0xc0, 0xc4, 0xc5, 0xc6, 0xdc, 0xde, 0xe0, 0xff]) {
      expect(stringEnd(Uint8Array.of(t, 0, 0, 0, 0, 0), 0), `0x${t.toString(16)}`).toBe(-1);
      expect(stringHeaderBytes(t), `0x${t.toString(16)}`).toBe(0);
    }
    expect(stringEnd(new Uint8Array(0), 0), 'no bytes').toBe(-1);
  });

  it('is refused when cut short, in its header or its body, and when its length runs past the bytes', () => {
    for (const [what, s] of FORMS) {
      // Every cut of the header, and of the body near each end.
      const cuts = Array.from({ length: s.length - 1 }, (_, i) => i + 1).filter((cut) => cut < 50 || cut > s.length - 50);
      for (const cut of cuts) expect(stringEnd(s.subarray(0, cut), 0), `${what} cut to ${cut} bytes`).toBe(-1);
    }
    // Lengths past the end: by one byte, and the largest each header can say.
    expect(stringEnd(Uint8Array.of(0xa2, 0x61), 0)).toBe(-1);
    expect(stringEnd(Uint8Array.of(0xd9, 0xff, 0x61), 0)).toBe(-1);
    expect(stringEnd(Uint8Array.of(0xda, 0xff, 0xff, 0x61), 0)).toBe(-1);
    expect(stringEnd(Uint8Array.of(0xdb, 0xff, 0xff, 0xff, 0xff, 0x61), 0), 'a 4 GiB length').toBe(-1);
    // A header cut at the end of a view whose buffer goes on: the view's end counts, not the buffer's.
    const inBigger = Uint8Array.from([0xda, 0x00, 0x02, 0x61, 0x61]).subarray(0, 2);
    expect(stringEnd(inBigger, 0)).toBe(-1);
  });

  it("is refused the same way by each path that reads one: a packed item's check, a record's check, an item's JSON", () => {
    const bad: [string, number[]][] = [
      ['str 8 with no length byte', [0xd9]],
      ['str 16 with one of its two length bytes', [0xda, 0x00]],
      ['str 32 with three of its four', [0xdb, 0x00, 0x00, 0x00]],
      ['a fixstr one byte short', [0xa3, 0x61, 0x61]],
      ['a str 8 longer than its bytes', [0xd9, 0x05, 0x61]],
      ['a str 16 longer than its bytes', [0xda, 0x01, 0x00, 0x61]],
      ['a str 32 longer than its bytes', [0xdb, 0x00, 0x01, 0x00, 0x00, 0x61]],
    ];
    for (const [what, s] of bad) {
      // As a value and as a key of an item: a router's check, the DynamoDB endpoint's writer.
      for (const item of [Uint8Array.from([0x81, 0xa1, 0x6b, ...s]), Uint8Array.from([0x81, ...s])]) {
        expect(() => skipValue(item, 0), what).toThrow(MalformedFrame);
        expect(() => itemsJson(PackedItems.ofItems([item])), what).toThrow(MalformedFrame);
      }
      // A record's set effect [set, table, slice, key, item, size] whose item holds it: the header read answers "not
      // sure" (-1), and the whole decode refuses it.
      const record = Uint8Array.from([0x91, 0x96, 0x01, 0x02, 0x03, 0xa1, 0x6b, 0x81, 0xa1, 0x76, ...s]);
      expect(setEffectsEnd(record, 0, 3), what).toBe(-1);
    }
    // Each good form, as a value and as a key, is read to the item's end by each path: the refusals above are the
    // strings' (a wide header for a short string included, which msgpack allows).
    for (const [what, s] of FORMS) {
      for (const item of [Uint8Array.from([0x81, 0xa1, 0x6b, ...s]), Uint8Array.from([0x81, ...s, 0xc0])]) {
        expect(skipValue(item, 0), what).toBe(item.length);
        expect(skipValue(Uint8Array.from([...item, 0xc0]), 0), `${what}, a value after it`).toBe(item.length);
        expect(itemsJson(PackedItems.ofItems([item])).count, what).toBe(1);
      }
    }
    // The same effect whole is read to its end, so the -1 above is the string's.
    const whole = Uint8Array.from([0x91, 0x96, 0x01, 0x02, 0x03, 0xa1, 0x6b, 0x81, 0xa1, 0x76, 0xa1, 0x61, 0x07]);
    expect(setEffectsEnd(whole, 0, 3)).toBe(whole.length);
  });
});

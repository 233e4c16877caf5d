// A Query's or Scan's items written as DynamoDB JSON straight from the slice workers' msgpack
// (coordinator/dynamodb/item-json.ts) against the conversion it replaces on that path (decode,
// fromNativeItem, JSON.stringify): the same answer for generated items of every attribute type the
// endpoint takes (S, N, B, BOOL, NULL, M, L, SS, NS, BS), nested, with unicode and the characters
// JSON escapes; and MalformedFrame, never a crash or other JSON, for bytes that are not such items.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromNativeItem, toNativeItem } from '../coordinator/dynamodb/attribute-values.js';
import { toDynamoDbError } from '../coordinator/dynamodb/errors.js';
import { itemsJson, lastKey } from '../coordinator/dynamodb/item-json.js';
import { MalformedFrame, PackedItems, packClientItem, packClientList, splitPackedList, unpackClientList, unpackClientValue } from '../shared/protocol.js';
import { VALUE_DEPTH_MAX } from '../shared/limits.js';
import type { Item } from '../shared/values.js';

const SEED = 20261127;

/** Strings that the writer writes itself (ASCII, escapes) and those it leaves to msgpackr (unicode, lone surrogates). */
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.constantFrom('', '"', '\\', '\n\t\r\b\f', '\u0000\u001f\u007f', 'é€𝄞', '\ud800', 'a\udfffb', '</script>', 'x'.repeat(300), '"\\'.repeat(40)),
);
/** DynamoDB number texts within its limits: whole numbers (small, 32-bit, past 2^53), fractions, 38 digits, tiny. */
const number = fc.oneof(
  fc.integer({ min: -200, max: 200 }).map(String),
  fc.integer().map(String),
  fc.double({ min: -1e20, max: 1e20, noNaN: true }).map((x) => String(x)),
  fc.bigInt({ min: -(10n ** 38n) + 1n, max: 10n ** 38n - 1n }).map(String),
  fc.constantFrom('0', '-0', '4294967295', '4294967296', '-2147483648', '9007199254740993', '0.1', '1E-130', '9.9999999999999999999999999999999999999E+125', '1e21', '0.000001'),
);
const binary = fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('base64'));
const name = fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }), fc.constantFrom('a"b', 'a\\b', '\n', '1', '42', '$SS', 'é'));

const attributeValue = fc.letrec<{ value: Record<string, unknown> }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    text.map((S) => ({ S })),
    number.map((N) => ({ N })),
    binary.map((B) => ({ B })),
    fc.boolean().map((BOOL) => ({ BOOL })),
    fc.constant({ NULL: true }),
    fc.uniqueArray(text, { minLength: 1, maxLength: 4 }).map((SS) => ({ SS })),
    fc.uniqueArray(fc.integer({ min: -1000, max: 1000 }), { minLength: 1, maxLength: 4 }).map((ns) => ({ NS: ns.map(String) })),
    fc.uniqueArray(fc.uint8Array({ minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3, selector: (b) => Buffer.from(b).toString('hex') }).map((bs) => ({ BS: bs.map((b) => Buffer.from(b).toString('base64')) })),
    fc.array(tie('value'), { maxLength: 4 }).map((L) => ({ L })),
    fc.dictionary(name, tie('value'), { maxKeys: 4 }).map((M) => ({ M })),
  ),
}));
const wireItem = fc.dictionary(name, attributeValue.value, { minKeys: 1, maxKeys: 8 });

/** A stored item as a worker holds it: the endpoint's conversion of a wire item, with keyslice's system attributes. */
function stored(wire: Record<string, unknown>, i: number): Item | null {
  try {
    return { ...toNativeItem(wire, 'Item'), __name: `item.${i}`, __mtime: 1795419678645 + i };
  } catch {
    return null; // a generated map that DynamoDB's rules refuse (a map of one key "$SS", say): not an item
  }
}

/** The answer's Items as the endpoint made them before: the decoded page, converted and stringified. */
const old = (list: Uint8Array) => JSON.parse(JSON.stringify(unpackClientList(list).map(fromNativeItem)));
const written = (page: PackedItems) => JSON.parse(itemsJson(page).bytes.toString('utf8'));

describe('itemsJson: a packed page as DynamoDB JSON', () => {
  it('answers what decoding and converting answered, for generated items of every type', () => {
    fc.assert(
      fc.property(fc.array(wireItem, { maxLength: 12 }), (wires) => {
        const items = wires.map(stored).filter((x): x is Item => x !== null);
        const list = packClientList(items);
        const expected = old(list);
        // A range's list whole, and a merged page's items one by one (buckets, scans).
        expect(written(PackedItems.ofList(list))).toEqual(expected);
        expect(written(PackedItems.ofItems(splitPackedList(list)))).toEqual(expected);
        const json = itemsJson(PackedItems.ofList(list));
        expect(json.count).toBe(items.length);
        // The last item's attributes as LastEvaluatedKey reads them (any of its names, unicode ones too; one it lacks
        // left out): each as decoding the whole item gave it.
        const last = items.length === 0 ? null : unpackClientList(list).at(-1)!;
        expect(lastKey(json, last === null ? ['a'] : [...Object.keys(last), 'no such name'])).toEqual(last);
      }),
      { seed: SEED, numRuns: 400 },
    );
  });

  it("reads a last item's key attributes alone, by their exact names, whatever names come before them", () => {
    const item = { pkx: 'no', pk: 'p', 'é': 2, e: 3, 'ée': 4, sk: 5, payload: 'x'.repeat(300), __name: 'n', __mtime: 1 };
    const json = itemsJson(PackedItems.ofItems([packClientItem(item)]));
    expect(lastKey(json, ['pk', 'sk'])).toEqual({ pk: 'p', sk: 5 });
    expect(lastKey(json, ['é'])).toEqual({ 'é': 2 });
    expect(lastKey(json, ['e', 'ée'])).toEqual({ e: 3, 'ée': 4 });
    expect(lastKey(json, ['p', 'Pk', 'skk'])).toEqual({});
    expect(lastKey(itemsJson(PackedItems.ofItems([])), ['pk'])).toBeNull();
    // Each form a key's value takes, read here or decoded alone, is what decoding the whole item gives.
    const forms = { a: 0, b: 127, c: -1, d: -32, e: 200, f: 65_535, g: 2 ** 32 - 1, h: -100, i: -40_000, j: -(2 ** 31), k: 2 ** 40, l: 1.5, m: 'ü-key', n: '', o: 'x'.repeat(300), p: Uint8Array.of(1, 2), q: { $N: '1.00000000000000000001' } };
    const packed = packClientItem(forms);
    expect(lastKey(itemsJson(PackedItems.ofItems([packed])), Object.keys(forms))).toEqual(unpackClientValue(packed));
  });

  it("answers LastEvaluatedKey's JSON byte for byte as the whole item's decode did, for every key type, compound keys and bytes no worker writes", () => {
    // As reads.ts answers it: the key attributes of the last item (lastKey, or the whole item decoded before branch
    // hdr), converted (fromNativeItem) and stringified.
    const keyJson = (names: string[], key: Item) => JSON.stringify(fromNativeItem(Object.fromEntries(names.map((n) => [n, key[n]]))));
    const same = (names: string[], bytes: Uint8Array, what: string) =>
      expect(keyJson(names, lastKey(itemsJson(PackedItems.ofItems([bytes])), names)!), what).toBe(keyJson(names, unpackClientValue(bytes) as Item));
    const values = ['a', 'a"b\\c\n\u0001\u007f\u2028', 'é', '日本', '😀x', 'x'.repeat(31), 'x'.repeat(32), 'ü'.repeat(40), 'y'.repeat(70_000),
      0, 127, 128, 255, 256, 65_535, 65_536, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, -1, -32, -33, -128, -129, -32_768, -32_769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53 - 1), 1.5, -2.25, 1e21, 1e-7,
      { $N: '1.00000000000000000001' }, { $N: '-99999999999999999999999' }, Uint8Array.of(1, 2, 3), new Uint8Array(300).fill(7)];
    for (const h of values) for (const r of values) same(['pk', 'sk'], packClientItem({ other: 'z', pk: h, list: [1, 'é'], sk: r, __name: 'n', __mtime: 5 }), JSON.stringify([h, r]).slice(0, 80));
    for (const name of ['é', 'ключ', '😀', 'a b', 'k\u0000']) same([name], packClientItem({ b: 1, [name]: 'v' }), `a key named ${JSON.stringify(name)}`);
    // A key's string whose bytes are not UTF-8 (an encoded lone surrogate, a stray byte, a cut sequence), short and
    // long: read as msgpackr reads it in the whole item.
    for (const body of [[0xed, 0xa0, 0x80], [0x61, 0xff, 0x62], [0xc3], [0xe6, 0x97], [...Array<number>(40).fill(0x61), 0xed, 0xa0, 0x80], [...Array<number>(100).fill(0x61), 0xff]]) {
      const s = body.length < 32 ? [0xa0 | body.length, ...body] : [0xd9, body.length, ...body];
      same(['pk'], Uint8Array.from([0x82, 0xa2, 0x70, 0x6b, ...s, 0xa1, 0x62, 0x01]), `bytes ${Buffer.from(body).toString('hex')}`);
    }
    // Wider headers than msgpackr writes, for the key's name and its value.
    same(['pk'], Uint8Array.of(0x81, 0xd9, 0x02, 0x70, 0x6b, 0xdb, 0, 0, 0, 1, 0x61), 'str 8 name, str 32 value');
    same(['pk'], Uint8Array.of(0x81, 0xda, 0, 0x02, 0x70, 0x6b, 0xcd, 0, 5), 'str 16 name, uint 16 of 5');
  });

  it('writes plain items byte for byte as JSON.stringify does', () => {
    const items = Array.from({ length: 100 }, (_, s) => ({ device: 'range-3', seq: s, f: s / 7, neg: -s * 1000, big: 2 ** 32 + s, payload: 'x'.repeat(160), ok: s % 2 === 0, none: null, __name: `range-3.${s}`, __mtime: 1795419678645 + s }));
    const list = packClientList(items);
    expect(itemsJson(PackedItems.ofList(list)).bytes.toString('utf8')).toBe(JSON.stringify(unpackClientList(list).map(fromNativeItem)));
  });

  it('refuses bytes that are not items with MalformedFrame, which the endpoint answers as InternalServerError', () => {
    const good = packClientItem({ a: 'x', b: 1 });
    const malformed: [string, Uint8Array][] = [
      ['not a map', Uint8Array.of(0x92, 0x01, 0x02)],
      ['a key that is not a string', Uint8Array.of(0x81, 0x01, 0xa1, 0x78)],
      ['a key named twice', Uint8Array.of(0x82, 0xa1, 0x61, 0x01, 0xa1, 0x61, 0x02)],
      ['the key __proto__', Uint8Array.of(0x81, 0xa9, ...Buffer.from('__proto__'), 0xc0)],
      ['an ext value', Uint8Array.of(0x81, 0xa1, 0x61, 0xd4, 0x01, 0x00)],
      ['an ext value inside a list', Uint8Array.of(0x81, 0xa1, 0x61, 0x91, 0xd4, 0x01, 0x00)],
      ['a string longer than its bytes', Uint8Array.of(0x81, 0xa1, 0x61, 0xd9, 0x20, 0x61)],
      ['a key longer than its bytes', Uint8Array.of(0x81, 0xa5, 0x61)],
      ['a double cut short', Uint8Array.of(0x81, 0xa1, 0x61, 0xcb, 0x40, 0x09)],
      ['a map of more pairs than its bytes', Uint8Array.of(0x83, 0xa1, 0x61, 0x01)],
      ['bytes after the item', Uint8Array.of(...good, 0xc0)],
      ['no bytes', new Uint8Array(0)],
    ];
    for (const [what, bytes] of malformed) {
      let thrown: unknown = null;
      try {
        itemsJson(PackedItems.ofItems([bytes]));
      } catch (err) {
        thrown = err;
      }
      expect(thrown, what).toBeInstanceOf(MalformedFrame);
      expect(toDynamoDbError(thrown).exception, what).toBe('InternalServerError');
    }
  });

  it('refuses a key named twice in an item of many keys too (past the first 32, looked up by text), and writes one of 2,000 keys as before', () => {
    const item: Item = { __name: 'x', __mtime: 1 };
    for (let i = 0; i < 2000; i++) item[`k${i}`] = i % 3 === 0 ? `v${i}` : i;
    const list = packClientList([item]);
    expect(written(PackedItems.ofList(list))).toEqual(old(list));
    // {k0: 0, ..., k{n-1}: n-1, k{dup}: 0}: one key more than n, a name that came before.
    const named = (n: number, dup: number) => Uint8Array.of(0xde, 0, n + 1, ...Array.from({ length: n }, (_, i) => [0xa0 | `k${i}`.length, ...Buffer.from(`k${i}`), i]).flat(), 0xa0 | `k${dup}`.length, ...Buffer.from(`k${dup}`), 0);
    for (const [n, dup] of [[40, 3], [40, 35], [40, 0], [33, 32], [5, 4]]) {
      expect(() => itemsJson(PackedItems.ofItems([named(n, dup)])), `${n} keys, k${dup} again`).toThrow('names one attribute twice');
    }
    expect(written(PackedItems.ofItems([named(40, 40)]))).toHaveLength(1); // k40 is new: no repeat
  });

  it('refuses a value nested deeper than an item may be (VALUE_DEPTH_MAX), or a number no item holds, with MalformedFrame, and goes on writing', () => {
    const nested = (depth: number) => Uint8Array.of(0x81, 0xa1, 0x61, ...new Array<number>(depth).fill(0x91), 0x01); // {a: [[...[1]...]]}
    const deepest = nested(VALUE_DEPTH_MAX);
    expect(written(PackedItems.ofItems([deepest]))).toEqual(old(Uint8Array.of(0x91, ...deepest))); // as deep as an item may be: written
    const malformed: [string, Uint8Array][] = [
      ['one level deeper than an item may be', nested(VALUE_DEPTH_MAX + 1)],
      // Deep enough that the recursive conversion ran out of stack (a RangeError, not a typed error), not so deep that msgpackr did.
      ['3,000 levels deep', nested(3000)],
      ['NaN', Uint8Array.of(0x81, 0xa1, 0x61, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0)],
      ['an infinity', Uint8Array.of(0x81, 0xa1, 0x61, 0xcb, 0xff, 0xf0, 0, 0, 0, 0, 0, 0)],
      ['a 64-bit integer (a BigInt to msgpackr)', Uint8Array.of(0x81, 0xa1, 0x61, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0)],
    ];
    for (const [what, bytes] of malformed) {
      expect(() => itemsJson(PackedItems.ofItems(splitPackedList(Uint8Array.of(0x91, ...bytes)))), what).toThrow(MalformedFrame);
    }
    const list = packClientList([{ a: 'x', l: [1, [2]], __name: 'x', __mtime: 1 }]);
    expect(written(PackedItems.ofList(list))).toEqual(old(list));
  });

  it('on every cut and every changed byte of a page, answers MalformedFrame or what decoding it answers', () => {
    const items = [
      { id: 'a"b\\c', n: 12, f: 0.5, l: [1, 'é', { $SS: ['x', 'y'] }], m: { k: null, t: true }, b: new Uint8Array([1, 2, 3]), __name: 'a', __mtime: 1795419678645 },
      { id: 'z', big: { $N: '9007199254740993' }, s: '\u0001\n', neg: -5, w: 70000, __name: 'z', __mtime: 1795419678646 },
    ] as unknown as Item[];
    const list = packClientList(items);
    const random = fc.sample(fc.tuple(fc.nat(list.length - 1), fc.nat(255)), { seed: SEED, numRuns: 3000 });
    const cases: Uint8Array[] = [];
    for (let cut = 0; cut < list.length; cut++) cases.push(list.subarray(0, cut));
    for (const [at, byte] of random) {
      const changed = Uint8Array.from(list);
      changed[at] = byte;
      cases.push(changed);
    }
    let refused = 0;
    for (const bytes of cases) {
      let page: PackedItems;
      try {
        page = PackedItems.ofItems(splitPackedList(bytes)); // the router's check, as a merged page passes it
      } catch (err) {
        expect(err).toBeInstanceOf(MalformedFrame);
        refused++;
        continue;
      }
      let json: string;
      try {
        json = itemsJson(page).bytes.toString('utf8');
      } catch (err) {
        expect(err).toBeInstanceOf(MalformedFrame);
        refused++;
        continue;
      }
      // Written: the bytes were items, and the answer is what decoding them answers.
      expect(JSON.parse(json)).toEqual(old(bytes));
    }
    expect(refused).toBeGreaterThan(list.length); // every cut, and more
  });
});

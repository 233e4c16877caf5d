// Items that pass through the router undecoded (RangeSpec.packed, a Scan's `packed`, a Get's
// `packed`; PackedItems, PackedItem): the worker packs the items of a range, of its part of a
// scan page or of a Get in the client's msgpack form, the router copies those bytes into the
// client frame, and the client reads the same items that the decoded path (HTTP, DynamoDB)
// gives, byte for byte. The codec at
// the edges first, then the partition, then a real cluster over both transports.
import { describe, expect, it, beforeAll } from 'vitest';
import { Packr } from 'msgpackr';
import { GetItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  PACKED_NIL,
  PackedItem,
  decodeClientResponses,
  encodeClientFrame,
  packClientList,
  PackedItems,
  splitPackedList,
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  sliceSetOf,
  unpackClientList,
  type ClientResponseFrame,
  type RangeResult,
  type RangeItems,
  type RangeSpec,
  type ScanEntry,
  type ScanResult,
  type SliceOpMessage,
  KEPT_IN_LIST,
  cutScanItems,
  checkSliceResult,
  MalformedFrame,
  noMovedEffects,
  PackedPage,
  EFFECT_SET,
  EFFECT_DELETE,
  EFFECT_DROP_SLICE,
  encodeOwnedResults,
  encodeSliceResults,
  type SliceOpResult,
} from '../shared/protocol.js';
import { encodeEffects, encodeReplicated } from '../slice-worker/log-format.js';
import { PAGE_BYTES_MAX, PACKED_ITEM_CACHE_BYTES_MAX, PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX, WORKERS_PER_NODE_MAX, packedItemsKeptBytesPerWorker } from '../shared/limits.js';
import { answerItems, answerMerged, scanPage } from '../coordinator/router/operations.js';
import { gatherBuckets } from '../coordinator/router/bucket-gather.js';
import { toKeysliceError } from '../shared/errors.js';
import type { Request } from '../shared/api.js';
import type { Condition } from '../shared/expression-ast.js';
import { itemBytes, type Item, type Value } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';
import { pageBytes } from './page-bytes.js';
import { plain, useCluster } from './cluster-fixture.js';
import { dynamoClient } from './dynamodb-fixture.js';

/** An item with every kind of value: text, numbers (integers, fractions, extremes, a decimal
 * no double holds), booleans, null, binary, lists, maps nested with binary inside, and sets. */
function everyType(pk: string, i: number): Item {
  return {
    pk,
    sk: i,
    s: `text ${i} é 😀 \u0000`,
    n: i * 1.5 - 7,
    big: Number.MAX_SAFE_INTEGER - i,
    neg: -(i + 1) * 1e6,
    tiny: 1e-300,
    float: Math.PI * i,
    dec: { $N: '12345678901234567890.123456789' },
    t: true,
    f: false,
    nil: null,
    bin: Uint8Array.of(0, i & 0xff, 0xff, 0x90, 0xdc),
    list: [1, 'two', [3, [4]], { five: 5 }, Uint8Array.of(6)],
    map: { a: { b: { c: [i, { d: Uint8Array.of(1, 2) }], e: '' } }, z: -0.25 },
    ss: { $SS: ['a', 'b'] },
    ns: { $NS: [1, 2.5] },
    bs: { $BS: [Uint8Array.of(1), Uint8Array.of(2, 3)] },
  };
}

/** Every msgpack header size a value can take: long text and binary, wide maps, long lists, integers of each width. */
function wide(i: number): Item {
  return {
    ...everyType('w', i),
    str8: 'a'.repeat(200),
    str16: 'b'.repeat(70_000 >> 2),
    str32: 'c'.repeat(70_000),
    bin16: new Uint8Array(300).fill(i),
    bin32: new Uint8Array(70_000).fill(i),
    map16: Object.fromEntries(Array.from({ length: 20 }, (_, k) => [`k${k}`, k])),
    array16: Array.from({ length: 20 }, (_, k) => k - 10),
    ints: [0, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 40, -1, -32, -33, -128, -129, -32_768, -32_769, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 40)],
    floats: [0.5, -0.5, 1e308, -1e-308, 0.1 + 0.2],
  };
}

const reference = new Packr({ useRecords: false });

describe('client frames with packed items', () => {
  const items = (n: number) => Array.from({ length: n }, (_, i) => everyType('p', i));
  const one = (item: Item) => reference.pack(item);

  it('are byte for byte the frame of the same items as objects (items last), at every list header size, as a list or item by item', () => {
    for (const n of [0, 1, 15, 16, 17, 65_535, 65_536]) {
      const objects = n > 100 ? Array.from({ length: n }, (_, i) => ({ i })) : items(n);
      const asObjects: ClientResponseFrame = [7, RESULT_OK, { examined: n + 3, marker: 'm', items: objects }];
      for (const packed of [PackedItems.ofList(packClientList(objects)), PackedItems.ofItems(objects.map(one))]) {
        const passing: ClientResponseFrame = [7, RESULT_OK, { items: packed, examined: n + 3, marker: 'm' }];
        expect(Buffer.compare(encodeClientFrame(passing), reference.pack(asObjects)), `${n} items`).toBe(0);
        expect(plain(decodeClientResponses(encodeClientFrame(passing)))).toEqual(plain([asObjects]));
      }
    }
  });

  it('share a frame with other responses: objects, errors, and more packed items', () => {
    const list: ClientResponseFrame[] = [
      [1, RESULT_OK, { items: PackedItems.ofList(packClientList(items(3))), examined: 3 }],
      [2, RESULT_ERROR, 'TableNotFound', 'no table'],
      [3, RESULT_OK, { item: everyType('q', 1) }],
      [4, RESULT_OK, { items: PackedItems.ofItems([]), examined: 0 }],
      [5, RESULT_OK, { items: PackedItems.ofItems(items(20).map(one)), examined: 25, marker: 'x' }],
    ];
    const expected = [
      [1, RESULT_OK, { examined: 3, items: items(3) }],
      [2, RESULT_ERROR, 'TableNotFound', 'no table'],
      [3, RESULT_OK, { item: everyType('q', 1) }],
      [4, RESULT_OK, { examined: 0, items: [] }],
      [5, RESULT_OK, { examined: 25, marker: 'x', items: items(20) }],
    ];
    expect(Buffer.compare(encodeClientFrame(list), reference.pack(expected))).toBe(0);
    expect(plain(decodeClientResponses(encodeClientFrame(list)))).toEqual(plain(expected));
  });

  it('are joined in the buffer `join` gives for their size (the router reuses one: ws-api.ts), else in one of their own, the same bytes either way', () => {
    const list: ClientResponseFrame[] = [
      [1, RESULT_OK, { items: PackedItems.ofList(packClientList(items(3))), examined: 3 }],
      [2, RESULT_ERROR, 'TableNotFound', 'no table'],
    ];
    const single: ClientResponseFrame = [3, RESULT_OK, { items: PackedItems.ofItems(items(4).map(one)), examined: 4 }];
    for (const frame of [list, single]) {
      const own = encodeClientFrame(frame);
      // Filled with 0xee: a byte the join left unwritten would show.
      const roomy = Buffer.alloc(own.byteLength + 100, 0xee);
      const asked: number[] = [];
      const inScratch = encodeClientFrame(frame, (size) => (asked.push(size), roomy));
      expect(asked).toEqual([own.byteLength]);
      expect(inScratch.buffer).toBe(roomy.buffer);
      expect(inScratch.byteOffset).toBe(roomy.byteOffset);
      expect(Buffer.compare(inScratch, own)).toBe(0);
      const tight = Buffer.alloc(own.byteLength - 1);
      expect(() => encodeClientFrame(frame, () => tight)).toThrow(/a frame is joined in a buffer that holds it/);
    }
    // A frame with nothing passing through is msgpackr's, as without `join`, which it does not ask.
    const plainFrame: ClientResponseFrame = [4, RESULT_OK, { z: 1 }];
    const never = () => expect.unreachable('a frame packed whole asks for no buffer to be joined in') as Buffer;
    expect(Buffer.compare(encodeClientFrame(plainFrame, never), reference.pack(plainFrame))).toBe(0);
    expect(Buffer.compare(encodeClientFrame([plainFrame, [5, RESULT_ERROR, 'Internal', 'x']], never), reference.pack([plainFrame, [5, RESULT_ERROR, 'Internal', 'x']]))).toBe(0);
  });

  it('keep every value as it was, and split into the bytes of each item at every header size', () => {
    for (const list of [items(5), [wide(1), wide(2)], [], Array.from({ length: 70_000 }, (_, i) => ({ i }))]) {
      const packed = packClientList(list);
      expect(plain(unpackClientList(packed))).toEqual(plain(list)); // binary compared as base64: Buffer and Uint8Array agree
      const split = splitPackedList(packed);
      expect(split.length).toBe(list.length);
      split.forEach((b, i) => expect(Buffer.compare(b, one(list[i]))).toBe(0));
    }
    const back = unpackClientList(packClientList([everyType('p', 3)]))[0];
    expect(back.bin).toBeInstanceOf(Uint8Array);
    expect(Object.is((back.map as { z: number }).z, -0.25)).toBe(true);
  });

  it('refuse a packed list that is cut short, has bytes after its items, is no list, or holds what is no item', () => {
    const packed = packClientList(items(3));
    expect(() => splitPackedList(packed.subarray(0, packed.length - 1))).toThrow(/ends/);
    expect(() => splitPackedList(Buffer.concat([packed, Buffer.from([0xc0])]))).toThrow(/bytes after its items/);
    expect(() => splitPackedList(reference.pack({ a: 1 }))).toThrow(/list header/);
    expect(() => splitPackedList(Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xc1))).toThrow(/no msgpack type/);
    // A header that claims more elements than there are bytes runs into the end (every value takes a byte).
    expect(() => splitPackedList(Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01))).toThrow(/ends inside a value/);
    expect(() => splitPackedList(Uint8Array.of(0x92, 0xdf, 0x7f, 0xff, 0xff, 0xff, 0x01, 0x02, 0xc0))).toThrow(/ends inside a value/);
    expect(() => splitPackedList(Uint8Array.of(0x91, 0x82, 0xa1, 0x61, 0x01))).toThrow(/ends inside a value/);
    expect(() => splitPackedList(Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xc4, 0x05, 0x01))).toThrow(/ends 4 bytes past/);
    // Each item is checked as it is cut, as PackedItem.of checks one: a map, no ext value in it.
    expect(() => splitPackedList(Uint8Array.of(0x91, 0xc1))).toThrow(/map header/);
    expect(() => splitPackedList(reference.pack([{ a: 1 }, 2]))).toThrow(/map header/);
    expect(() => splitPackedList(Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0x91, 0xd4, 0x73, 0x00))).toThrow(/ext value/);
    // Cut to a count (a scan page's part of a list): the last item cut is checked to its end as well, where a
    // length byte that lies past the bytes would otherwise make an empty piece.
    expect(() => splitPackedList(Uint8Array.of(0x92, 0x81, 0xa1, 0x61, 0xd9), 1)).toThrow(/ends with a length past/);
    expect(() => splitPackedList(Uint8Array.of(0x92, 0x81, 0xa1, 0x61, 0xc4), 1)).toThrow(MalformedFrame);
    expect(() => splitPackedList(Uint8Array.of(0x92, 0x81, 0xa1, 0x61, 0xd9, 0x05, 0x61), 1)).toThrow(/ends 4 bytes past/);
    expect(splitPackedList(packed, 2).map((b) => Buffer.from(b).toString('hex'))).toEqual(items(2).map((i) => one(i).toString('hex')));
  });
});

describe('a GetItems page from a node, its items packed', () => {
  const objects = Array.from({ length: 5 }, (_, i) => everyType('p', i));
  const good = () => packClientList(objects);
  /** A node's packed page as each GetItems path takes it, to the items its answer carries: a range's list
   * (answerItems: checked as a whole, PackedItems.ofList), one bucket of an even-distribution page (gatherBuckets:
   * the merge takes the items splitPackedList cut, checked as it cuts them) and one worker's part of a scan page
   * (scanPage: its `count` entries each mark a kept item, cut from the list the same way). */
  const rangeSpec = (packed: boolean, withKeys: boolean): RangeSpec => ({ low: 'b', lowInclusive: true, high: 'c', highInclusive: false, reverse: false, limit: 100, projection: null, filter: null, withKeys, packed });
  /** A node's answer as the router's link takes it: checked against its op where it is decoded (checkSliceResult). */
  const checked = <T>(op: SliceOpMessage, r: T): T => {
    checkSliceResult(op, r);
    return r;
  };
  const paths: [name: string, take: (page: Uint8Array | unknown[], count: number) => Promise<unknown>][] = [
    ['range', async (page) => answerItems(checked([SliceOp.Range, 1, 0, rangeSpec(true, false)], [page as Uint8Array, null, false, null, 5] as RangeResult)[0], true)],
    [
      'buckets',
      async (page, count) => {
        const keys = Array.from({ length: count }, (_, i) => `b${String(i).padStart(4, '0')}`);
        const spec: RangeSpec = { low: 'b', lowInclusive: true, high: 'c', highInclusive: false, reverse: false, limit: 100, projection: null, filter: null, withKeys: true, packed: true };
        const send = async (op: SliceOpMessage): Promise<RangeResult> => checked(op, [page as Uint8Array, keys[count - 1] ?? null, false, keys, count]);
        return answerMerged((await gatherBuckets({ tableId: 1, buckets: [{ slice: 0, prefixBytes: 1, spec }], reverse: false, limit: 100, send })).items, true);
      },
    ],
    [
      'scan',
      async (page, count) => {
        const entries: ScanEntry[] = Array.from({ length: count }, (_, i) => [0, `k${String(i).padStart(4, '0')}`, KEPT_IN_LIST, 100]);
        return scanPage([checked([SliceOp.Scan, 1, 0, null, 100, null, null, sliceSetOf(0, [0]), true], [entries, true, page as Uint8Array])], 100, true).items;
      },
    ],
  ];
  /** The router's answer to one GetItems request of a client frame, as ws-api.ts answers it: its result, or the
   * typed error its failure becomes (toKeysliceError). */
  const answered = async (id: number, page: () => Promise<unknown>): Promise<ClientResponseFrame> => {
    try {
      return [id, RESULT_OK, { items: await page(), examined: 5 }];
    } catch (err) {
      // Refused as a malformed node answer, not tripped over (a TypeError or an assertion would be Internal too).
      expect(err).toBeInstanceOf(MalformedFrame);
      const e = toKeysliceError(err);
      return [id, RESULT_ERROR, e.code, e.message];
    }
  };

  it('is refused as MalformedFrame unless it is a list of maps without ext values, read to its end, on every path (never an assert)', async () => {
    const list = good();
    const bad: [Uint8Array, RegExp][] = [
      [list.subarray(0, list.length - 1), /ends/],
      [Buffer.concat([list, PACKED_NIL]), /bytes after its items/],
      [reference.pack({ a: 1 }), /list header/],
      [reference.pack([1, 2]), /map header/],
      [reference.pack([objects[0], 'x']), /map header/],
      [Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xd4, 0x01, 0x00), /ext value/],
      [Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xc7, 0x01, 0x65, 0x00), /ext value/],
      [Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0x91, 0xd6, 0x62, 0, 0, 0, 0), /ext value/],
      [Uint8Array.of(0x92, 0x81, 0xa1, 0x61, 0x01), /map header, not 0xundefined/],
      [Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xc4, 0x05, 0x01), /ends 4 bytes past/],
    ];
    for (const [name, take] of paths) {
      for (const [page, why] of bad) {
        const context = `${name}: ${Buffer.from(page).toString('hex')}`;
        await expect(take(page, objects.length), context).rejects.toThrow(MalformedFrame);
        await expect(take(page, objects.length), context).rejects.toThrow(why);
      }
      expect(await take(list, objects.length)).toBeInstanceOf(PackedItems);
      expect(await take(packClientList([]), 0)).toBeInstanceOf(PackedItems);
    }
    // A node that answers objects, or an array of bins, where a packed list was asked for: the bins would go unchecked.
    for (const [name, take] of paths.slice(0, 2)) {
      for (const page of [objects, [reference.pack(objects[0]), reference.pack([1])]]) {
        await expect(take(page, page.length), name).rejects.toThrow(MalformedFrame);
        await expect(take(page, page.length), name).rejects.toThrow(/asked for its items packed was answered with/);
      }
    }
    // A bucket whose keys and items disagree in number.
    await expect(paths[1][1](list, objects.length - 1)).rejects.toThrow(/keys for/);
    // Bytes where objects were asked for (the HTTP and DynamoDB APIs' range) are a node's error too.
    const objectRange = [SliceOp.Range, 1, 0, rangeSpec(false, false)] as SliceOpMessage;
    expect(() => checkSliceResult(objectRange, [list, null, false, null, 5])).toThrow(MalformedFrame);
    expect(() => checkSliceResult(objectRange, [[reference.pack(objects[0])], null, false, null, 5])).toThrow(MalformedFrame);
    expect(() => checkSliceResult(objectRange, [[reference.pack(objects[0])], null, false, null, 5])).toThrow(/as objects was answered with .* among them/);
    checkSliceResult(objectRange, [objects, null, false, null, 5]);
    expect(answerItems(objects, false)).toBe(objects);
    expect(answerMerged(objects, false)).toBe(objects);
  });

  it('from a bucket that says it has more but names no last key is refused as MalformedFrame, not merged into a page cut short without a marker', async () => {
    const spec = (): RangeSpec => ({ low: 'b', lowInclusive: true, high: 'c', highInclusive: false, reverse: false, limit: 100, projection: null, filter: null, withKeys: true, packed: false });
    const buckets = [0, 1].map((slice) => ({ slice, prefixBytes: 1, spec: spec() }));
    // Bucket 0 answers as a node does; bucket 1 has more to read and no key to go on after.
    const send = async (op: [number, number, number, RangeSpec]): Promise<RangeResult> =>
      op[2] === 0 ? [[{ sk: 1 }, { sk: 2 }], 'b0002', false, ['b0001', 'b0002'], 2] : [[], null, true, [], 0];
    await expect(gatherBuckets({ tableId: 1, buckets, reverse: false, limit: 100, send })).rejects.toThrow(MalformedFrame);
    await expect(gatherBuckets({ tableId: 1, buckets, reverse: false, limit: 100, send })).rejects.toThrow(/more .* no last key/);
  });

  it('that is malformed fails its request, typed, and every other request of the client frame is answered, on every path', async () => {
    for (const [name, take] of paths) {
      const frame: ClientResponseFrame[] = [
        await answered(1, () => take(good(), objects.length)),
        await answered(2, () => take(Buffer.concat([good(), reference.pack(objects[0])]), objects.length)),
        await answered(3, () => take(good(), objects.length)),
        await answered(4, () => take(Uint8Array.of(0x91, 0x81, 0xa1, 0x61, 0xd6, 0xff, 0, 0, 0, 0), 1)),
        [5, RESULT_OK, { z: 1 }],
      ];
      const decoded = decodeClientResponses(encodeClientFrame(frame));
      expect(plain(decoded.map((r) => r.slice(0, 3))), name).toEqual(
        plain([
          [1, RESULT_OK, { items: objects, examined: 5 }],
          [2, RESULT_ERROR, 'Internal'],
          [3, RESULT_OK, { items: objects, examined: 5 }],
          [4, RESULT_ERROR, 'Internal'],
          [5, RESULT_OK, { z: 1 }],
        ]),
      );
    }
  });

  it('from a node that lies (fuzzed: bytes changed, cut, added, an ext value put in) is refused as MalformedFrame or, taken, keeps every other answer of its frame, on every path', async () => {
    let seed = 777;
    const random = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    const sources: [Uint8Array, number][] = [
      [good(), objects.length],
      [packClientList([everyType('f', 3), everyType('f', 4)]), 2],
      [packClientList(Array.from({ length: 20 }, (_, i) => everyType('q', i))), 20],
    ];
    const plainItems = packClientList(Array.from({ length: 20 }, (_, i) => ({ pk: 'p', sk: i, t: true, f: false, s: 'x'.repeat(i) })));
    const booleans = [...plainItems.keys()].filter((i) => plainItems[i] === 0xc2 || plainItems[i] === 0xc3);
    for (const [name, take] of paths) {
      let [taken, refused] = [0, 0];
      for (let n = 0; n < 3000; n++) {
        const [source, count] = sources[n % sources.length];
        let bytes: Uint8Array = Uint8Array.from(source);
        if (n % 4 === 0) for (let k = 1 + random(3); k > 0; k--) bytes[random(bytes.length)] = random(256);
        else if (n % 4 === 1) bytes = bytes.subarray(0, random(bytes.length));
        else if (n % 4 === 2) bytes = Uint8Array.from([...bytes, ...Array.from({ length: 1 + random(4) }, () => random(256))]);
        else {
          // A set's ext in place of a boolean of plain items: msgpackr reads it with the value after it, so, taken
          // unchecked, the client reads past the item into the next answers of the frame (with everyType's items it
          // mostly stops earlier, on what follows, which the catch below lets pass).
          const at = booleans[random(booleans.length)];
          bytes = Uint8Array.from([...plainItems.subarray(0, at), 0xd4, 0x73, 0x00, ...plainItems.subarray(at + 1)]);
        }
        const r = await answered(1, () => take(bytes, n % 4 === 3 ? 20 : count));
        if (r[1] === RESULT_ERROR) {
          expect(r[2], `${name}, case ${n}: ${r[3]}`).toBe('Internal');
          refused++;
          continue;
        }
        taken++;
        let decoded: ClientResponseFrame[];
        try {
          decoded = decodeClientResponses(encodeClientFrame([r, [2, RESULT_OK, { z: 1 }], [3, RESULT_ERROR, 'Internal', 'x']]));
        } catch (err) {
          // What is inside the maps is not checked (as PackedItem.of): the client may refuse it, never reads past it.
          expect((err as Error).message, `${name}, case ${n}`).not.toMatch(/end of MessagePack|Unexpected end/i);
          continue;
        }
        expect(decoded.length, `${name}, case ${n}`).toBe(3);
        expect(plain(decoded.slice(1)), `${name}, case ${n}`).toEqual(plain([[2, RESULT_OK, { z: 1 }], [3, RESULT_ERROR, 'Internal', 'x']]));
      }
      expect(taken, name).toBeGreaterThan(50);
      expect(refused, name).toBeGreaterThan(1000);
    }
  });
});

describe('the budget of kept packed bytes', () => {
  it("is a node's, shared among its workers: their shares never sum past it, whatever their number", () => {
    for (let workers = 1; workers <= WORKERS_PER_NODE_MAX; workers++) {
      expect(packedItemsKeptBytesPerWorker(workers) * workers).toBeLessThanOrEqual(PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX);
      expect(packedItemsKeptBytesPerWorker(workers)).toBeGreaterThan(PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX / workers - 1);
    }
  });
});

describe('a partition packs the items of a range when asked', () => {
  it('gives the bytes of the objects it gives unpacked, with projection, filter, keys and both directions', () => {
    const store = new SliceStore(0, 1, () => 1);
    expect(store.execute([SliceOp.Assign, 1, [0]])[0]).toBe(RESULT_OK);
    for (let i = 0; i < 30; i++) store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(2, '0')}`, everyType('p', i), 500, null, null]);
    const base: RangeSpec = { low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit: 17, projection: null, filter: null, withKeys: false, packed: false };
    const variants: Partial<RangeSpec>[] = [
      {},
      { reverse: true, withKeys: true },
      { projection: [['map', 'a', 'b'], ['bin'], ['list', 2]] },
      { filter: { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 10 } }, withKeys: true },
      { low: 'z' },
    ];
    for (const v of variants) {
      const objects = store.execute([SliceOp.Range, 1, 0, { ...base, ...v }]);
      const packed = store.execute([SliceOp.Range, 1, 0, { ...base, ...v, packed: true }]);
      expect(objects[0]).toBe(RESULT_OK);
      expect(packed[0]).toBe(RESULT_OK);
      const [items, ...rest] = objects[1] as [Item[], ...unknown[]];
      const [page, ...packedRest] = packed[1] as [RangeItems, ...unknown[]];
      const bytes = pageBytes(page) as Uint8Array;
      expect(packedRest, JSON.stringify(v)).toEqual(rest);
      expect(bytes).toBeInstanceOf(Uint8Array);
      expect(Buffer.compare(bytes, reference.pack(items)), JSON.stringify(v)).toBe(0);
    }
  });
});

describe('a partition keeps the packed bytes of the items a packed page read', () => {
  const rangeOf = (limit: number, packed: boolean, projection: RangeSpec['projection'] = null): SliceOpMessage =>
    [SliceOp.Range, 1, 0, { low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit, projection, filter: null, withKeys: false, packed }];
  const scanOf = (packed: boolean): SliceOpMessage => [SliceOp.Scan, 1, 0, null, 100, null, null, sliceSetOf(0, [0]), packed];
  /** The packed range and scan, each checked byte for byte against the objects the store holds now. */
  const check = (store: SliceStore, context: string) => {
    const items = (store.execute(rangeOf(100, false))[1] as [Item[]])[0];
    const range = pageBytes((store.execute(rangeOf(100, true))[1] as RangeResult)[0]) as Uint8Array;
    expect(Buffer.compare(range, reference.pack(items)), context).toBe(0);
    const scan = (store.execute(scanOf(true))[1] as ScanResult)[2]!;
    expect(Buffer.compare(scan, reference.pack(items)), context).toBe(0);
    const pieces = splitPackedList(packClientList(items));
    const mixed = pieces.map((b, i) => (i % 2 === 0 ? Buffer.from(b).toString('latin1') : b));
    expect(Buffer.compare(new PackedPage(mixed).bytes(), packClientList(items)), context).toBe(0);
    return items;
  };

  it('gives what the store holds after puts, updates, deletes, a move and a replay, items large and small', () => {
    const store = new SliceStore(0, 1, () => 1);
    store.execute([SliceOp.Assign, 1, [0]]);
    const big = 'b'.repeat(PACKED_ITEM_CACHE_BYTES_MAX);
    for (let i = 0; i < 20; i++) store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(2, '0')}`, { ...everyType('p', i), ...(i % 5 === 0 ? { big } : {}) }, i % 5 === 0 ? 2 * PACKED_ITEM_CACHE_BYTES_MAX : 500, null, null]);
    // A scan first (it keeps nothing), then ranges (the first keeps the bytes, the second uses them), then a scan with them.
    const first = (store.execute(scanOf(true))[1] as ScanResult)[2]!;
    check(store, 'first range');
    check(store, 'read again: the kept bytes');
    expect(Buffer.compare((store.execute(scanOf(true))[1] as ScanResult)[2]!, first)).toBe(0);
    // A projected page packs what it projects, not the kept whole items.
    const projected = store.execute(rangeOf(5, true, [['s']]))[1] as [Uint8Array];
    expect(unpackClientList(projected[0]).map((x) => Object.keys(x).sort())).toEqual(Array(5).fill(['__mtime', 's']));
    store.execute([SliceOp.Put, 1, 0, 'k03', { pk: 'p', sk: 3, s: 'replaced' }, 50, null, null]);
    store.execute([SliceOp.Update, 1, 0, 'k04', { base: {}, actions: [{ k: 'set', path: ['s'], value: { k: 'value', v: 'updated' } }], condition: null, oldOnFailure: false, returnValues: 'none' }, null]);
    store.execute([SliceOp.Delete, 1, 0, 'k06', null, null]);
    store.replay([EFFECT_SET, 1, 0, 'k07', { pk: 'p', sk: 7, s: 'replayed' }, 50]);
    const items = check(store, 'after writes');
    expect(items.map((x) => x.s).slice(3, 7)).toEqual(['replaced', 'updated', 'text 5 é 😀 \u0000', 'replayed']);
    expect(items).toHaveLength(19);
  });

  it('keeps no more than its budget, gives back what replaced and deleted items kept, and its pages stay right', () => {
    const budget = 16 * 1024;
    const store = new SliceStore(0, 1, () => 1, undefined, budget);
    store.execute([SliceOp.Assign, 1, [0]]);
    const key = (i: number) => `k${String(i).padStart(4, '0')}`;
    for (let i = 0; i < 1000; i++) store.execute([SliceOp.Put, 1, 0, key(i), { pk: 'p', sk: i, s: 'x'.repeat(150) }, 200, null, null]);
    const readAll = () => {
      const objects: Item[] = [];
      let low = 'k';
      for (let page = 0; page < 100; page++) {
        const spec: RangeSpec = { low, lowInclusive: false, high: 'l', highInclusive: false, reverse: false, limit: 50, projection: null, filter: null, withKeys: false, packed: false };
        const [items, last] = store.execute([SliceOp.Range, 1, 0, spec])[1] as [Item[], string | null];
        const bytes = pageBytes((store.execute([SliceOp.Range, 1, 0, { ...spec, packed: true }])[1] as RangeResult)[0]) as Uint8Array;
        expect(Buffer.compare(bytes, reference.pack(items)), `page after ${low}`).toBe(0);
        objects.push(...items);
        if (last === null) return objects;
        low = last;
      }
      throw new Error('more pages than items');
    };
    for (let round = 0; round < 3; round++) expect(readAll()).toHaveLength(1000);
    // About 200 bytes kept per item: the budget (and the tenth that pages may keep between two sums) holds 90 of them,
    // not the 1,000 read.
    const kept = store.keptBytes;
    expect(kept).toBeGreaterThan(budget / 2);
    expect(kept).toBeLessThanOrEqual(budget * 1.1 + 50 * 400);
    // Replaced and deleted items give theirs back.
    for (let i = 0; i < 1000; i += 2) store.execute([SliceOp.Put, 1, 0, key(i), { pk: 'p', sk: i, s: 'y' }, 50, null, null]);
    for (let i = 1; i < 1000; i += 2) store.execute([SliceOp.Delete, 1, 0, key(i), null, null]);
    expect(store.keptBytes).toBe(0);
    expect(readAll().map((x) => x.s)).toEqual(Array(500).fill('y'));
  });
});

describe("a partition's first packed page (msgpackr's own packed list, its items' text kept from their bounds)", () => {
  /** Items whose strings, binaries, lists, maps, numbers and attribute counts sit on each side of a msgpack header's
   * bounds (31/32 bytes, 255/256, 65535/65536; 15/16 entries), with multi-byte UTF-8, beside items of every type. */
  const edgeItems = (): Item[] => {
    const items: Item[] = [];
    for (const n of [0, 31, 32, 255, 256, 4000]) {
      items.push({ pk: 'p', sk: n, s: 'x'.repeat(n), b: new Uint8Array(n).fill(0xc1), u: 'é'.repeat(n >> 1) });
    }
    for (const n of [65535, 65536]) items.push({ pk: 'p', sk: n, s: 'y'.repeat(n), b: new Uint8Array(n).fill(0xd9) });
    for (const n of [15, 16]) {
      const wide: Item = { pk: 'p', sk: 100 + n };
      for (let a = 0; Object.keys(wide).length < n; a++) wide[`a${a}`] = a;
      items.push(wide, { pk: 'p', sk: 200 + n, l: Array.from({ length: n }, (_, j) => j), m: Object.fromEntries(Array.from({ length: n }, (_, j) => [`m${j}`, -j])) });
    }
    const numbers = [127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, -32, -33, -128, -129, -32768, -32769, 2 ** 53 - 1, 0.5];
    items.push({ pk: 'p', sk: 300, l: numbers, m: Object.fromEntries(numbers.map((v, j) => [`n${j}`, v])) });
    for (let i = 0; i < 6; i++) items.push(everyType('p', 400 + i));
    return items;
  };
  const spec: RangeSpec = { low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit: 100, projection: null, filter: null, withKeys: false, packed: true };
  const storeOf = (items: Item[]) => {
    const store = new SliceStore(0, 1, () => 1);
    store.execute([SliceOp.Assign, 1, [0]]);
    items.forEach((item, i) => store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(3, '0')}`, item, itemBytes(item), null, null]));
    return store;
  };
  const pageOf = (store: SliceStore) => pageBytes((store.execute([SliceOp.Range, 1, 0, spec])[1] as RangeResult)[0]) as Uint8Array;
  const objectsOf = (store: SliceStore) => (store.execute([SliceOp.Range, 1, 0, { ...spec, packed: false }])[1] as [Item[]])[0];

  it('is not written over by the packs that follow it before it is sent, and each kept text is its item\'s bytes exactly', () => {
    const store = storeOf(edgeItems());
    const objects = objectsOf(store);
    const expected = Buffer.from(reference.pack(objects)); // a copy of its own
    const first = pageOf(store);
    // Before the first page is read: other first pages, items and lists packed, through the same msgpackr module (its
    // one buffer, grown past 65536-byte items and allocated anew when near its end).
    const others = [storeOf(edgeItems()), storeOf(edgeItems().reverse())].map(pageOf);
    expect(Buffer.compare(first, expected)).toBe(0);
    for (let r = 0; r < 40; r++) reference.pack(objects.slice(1 + (r % 7)).reverse());
    expect(Buffer.compare(first, expected)).toBe(0);
    for (const other of others) expect(unpackClientList(other)).toHaveLength(objects.length);
    // The kept texts: every item up to PACKED_ITEM_CACHE_BYTES_MAX has one, and a page of them (and each GetItem)
    // is the items' bytes.
    expect(store.keptBytes).toBeGreaterThan(0);
    expect(Buffer.compare(pageOf(store), expected)).toBe(0);
    objects.forEach((o, i) => {
      const [ok, bytes] = store.execute([SliceOp.Get, 1, 0, `k${String(i).padStart(3, '0')}`, null, true]);
      expect(ok).toBe(RESULT_OK);
      expect(Buffer.compare(bytes as Uint8Array, reference.pack(o)), `item ${i}`).toBe(0);
    });
    // A page of kept texts and items packed anew (every third replaced): the packed ones cut by their bounds.
    objects.forEach((o, i) => {
      if (i % 3 === 0) store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(3, '0')}`, { ...o, s: `new ${i}` }, itemBytes(o), null, null]);
    });
    const now = objectsOf(store);
    expect(now.filter((o) => typeof o.s === 'string' && o.s.startsWith('new'))).toHaveLength(Math.ceil(objects.length / 3));
    expect(Buffer.compare(pageOf(store), reference.pack(now))).toBe(0);
    expect(Buffer.compare(pageOf(store), reference.pack(now))).toBe(0);
  });
});

describe('a partition packs the items of its part of a scan page when asked', () => {
  const store = new SliceStore(0, 1, () => 1);
  store.execute([SliceOp.Assign, 1, [0, 1, 2, 3]]);
  for (let i = 0; i < 40; i++) store.execute([SliceOp.Put, 1, i % 4, `k${String(i).padStart(2, '0')}`, everyType('p', i), 500, null, null]);
  const filter: Condition = { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 10 } };
  const rejectAll: Condition = { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 1e9 } };

  it('gives the kept items as one list, the bytes of the objects it gives unpacked; rejected entries stay null', () => {
    type Args = [from: number, after: string | null, limit: number, projection: RangeSpec['projection'], filter: RangeSpec['filter'], to: number];
    const variants: Args[] = [
      [0, null, 100, null, null, 4],
      [1, 'k05', 7, null, null, 4],
      [0, null, 25, [['map', 'a', 'b'], ['bin'], ['list', 2]], filter, 3],
      [0, null, 10, null, rejectAll, 4], // every entry rejected: nothing to pack
      [4, null, 10, null, null, 4], // an empty range of slices
      [2, 'zz', 10, null, null, 4], // after the last key of its slice
    ];
    for (const [from, after, limit, projection, f] of variants) {
      const op = (packed: boolean): SliceOpMessage => [SliceOp.Scan, 1, from, after, limit, projection, f, sliceSetOf(from, [0, 1, 2, 3].filter((s) => s >= from)), packed];
      const objects = store.execute(op(false));
      const packed = store.execute(op(true));
      expect(objects[0]).toBe(RESULT_OK);
      expect(packed[0]).toBe(RESULT_OK);
      const [entries, exhausted, none] = objects[1] as ScanResult;
      const result = packed[1] as ScanResult;
      const [packedEntries, packedExhausted, list] = structuredClone(result);
      const context = JSON.stringify([from, after, limit, f === rejectAll]);
      expect(none, context).toBeNull();
      expect(packedExhausted, context).toBe(exhausted);
      expect(packedEntries.length, context).toBe(entries.length);
      const kept = entries.flatMap(([, , item]) => (item === null ? [] : [item]));
      expect(list, context).toBeInstanceOf(Uint8Array);
      expect(Buffer.compare(list!, reference.pack(kept)), context).toBe(0);
      entries.forEach(([slice, key, item, bytes], i) => {
        expect(packedEntries[i], context).toEqual([slice, key, item === null ? null : KEPT_IN_LIST, bytes]);
      });
      // What the router makes of it: each entry up to the last with its item's bytes.
      if (entries.length === 0) continue;
      const last = entries[entries.length - 1];
      cutScanItems([result], last[0], last[1]);
      result[0].forEach(([slice, key, bytes, stored], i) => {
        expect([slice, key, stored], context).toEqual([entries[i][0], entries[i][1], entries[i][3]]);
        if (entries[i][2] === null) expect(bytes, context).toBeNull();
        else expect(Buffer.compare(bytes as Uint8Array, reference.pack(entries[i][2])), context).toBe(0);
      });
    }
  });

  it('a packed result whose marks and list disagree is refused by the router', () => {
    const scan = () => store.execute([SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, [0, 1, 2, 3]), true])[1] as ScanResult;
    const [entries, exhausted, list] = scan();
    const last = entries[entries.length - 1];
    // A node's malformed answer, refused as such (MalformedFrame: the request fails Internal, naming it), not a
    // broken invariant of the router.
    expect(() => cutScanItems([[entries.slice(1), exhausted, list]], last[0], last[1])).toThrow(MalformedFrame);
    expect(() => cutScanItems([[entries.slice(1), exhausted, list]], last[0], last[1])).toThrow(/exactly its kept items/);
    expect(() => cutScanItems([[entries, exhausted, packClientList([])]], last[0], last[1])).toThrow(MalformedFrame);
    const marks = scan();
    marks[0][0][2] = { not: 'a mark' };
    expect(() => cutScanItems([marks], last[0], last[1])).toThrow(MalformedFrame);
    const again = scan();
    expect(() => cutScanItems([[again[0], again[1], packClientList([])]], again[0][0][0], again[0][0][1])).toThrow(MalformedFrame);
  });

  it('asked for objects, a page whose node marks an entry kept in a packed list is refused as malformed, not an assert', () => {
    // A node that answers a packed scan's result (its marks, and its list) where objects were asked for.
    const op: SliceOpMessage = [SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, [0, 1, 2, 3]), false];
    const marked = () => store.execute([SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, [0, 1, 2, 3]), true])[1] as ScanResult;
    expect(() => checkSliceResult(op, marked())).toThrow(MalformedFrame);
    expect(() => checkSliceResult(op, [marked()[0], true, null])).toThrow(/as objects was answered with 1 as an entry's item/);
    // One mark among objects, past the first entry.
    const objects = store.execute(op)[1] as ScanResult;
    checkSliceResult(op, objects);
    objects[0][3][2] = KEPT_IN_LIST;
    expect(() => checkSliceResult(op, objects)).toThrow(MalformedFrame);
  });

  it('a page whose workers answer out of (slice, key) order, or one entry twice, is refused as malformed where each answer is decoded, not an assert in the merge', () => {
    const op = (packed: boolean, slices: number[]): SliceOpMessage => [SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, slices), packed];
    const scan = (packed: boolean) => store.execute(op(packed, [0, 1, 2, 3]))[1] as ScanResult;
    for (const packed of [false, true]) {
      // One worker's entries backwards (its packed list then backwards too, so that only the order is wrong).
      const [entries, exhausted, list] = scan(packed);
      expect(entries.length).toBeGreaterThan(1);
      const backwards: ScanResult = [[...entries].reverse(), exhausted, list === null ? null : packClientList(unpackClientList(list).reverse())];
      expect(() => checkSliceResult(op(packed, [0, 1, 2, 3]), backwards), `packed ${packed}`).toThrow(MalformedFrame);
      expect(() => checkSliceResult(op(packed, [0, 1, 2, 3]), backwards), `packed ${packed}`).toThrow(/ after /);
      // Two workers that both answer the same slice's entries (a slice owned twice would double its items): no slice
      // is asked of two workers (Router.scanAsks), so the second answers slices it was not asked for.
      // Here the first worker is asked for slices 0 and 1, the second for 2 and 3, and both answer slice 0's entries.
      checkSliceResult(op(packed, [0, 1]), scan(packed));
      expect(() => checkSliceResult(op(packed, [2, 3]), scan(packed)), `packed ${packed}`).toThrow(/slice 0, not one of the slices it was asked for/);
      // Answers that pass, from workers asked for their own slices, merge into a page in order. From slice 0 after
      // k28, 5 each: the first worker answers slice 0's k32, k36 and slice 2's k02, k06, k10, the second slice 1's
      // k01 .. k17; the page takes the first worker's two of slice 0, then the second's three of slice 1.
      const from = (slices: number[]): SliceOpMessage => [SliceOp.Scan, 1, 0, 'k28', 5, null, null, sliceSetOf(0, slices), packed];
      const parts = [[0, 2], [1, 3]].map((slices) => {
        const r = store.execute(from(slices))[1] as ScanResult;
        checkSliceResult(from(slices), r);
        return r;
      });
      const page = scanPage(parts, 5, packed);
      const items = packed ? (page.items as PackedItems).parts.map((p) => reference.unpack(p) as Item) : (page.items as Item[]);
      expect(items.map((item) => item.sk), `packed ${packed}`).toEqual([32, 36, 1, 5, 9]);
      expect(page.marker).toBeDefined();
    }
  });

  it("a worker's answer with an entry of a slice it was not asked for, or before where it was asked to start, is refused where it is decoded, not merged into the page", () => {
    // The worker was asked for slices 1 and 3 from slice 1 on, after key k05 of slice 1.
    const op: SliceOpMessage = [SliceOp.Scan, 1, 1, 'k05', 10, null, null, sliceSetOf(1, [1, 3]), false];
    const answer = (entries: ScanEntry[]): ScanResult => [entries, true, null];
    const item = { pk: 'p' };
    checkSliceResult(op, answer([[1, 'k09', item, 10], [3, 'k03', item, 10], [3, 'k07', null, 10]]));
    const bad: [ScanEntry[], RegExp][] = [
      [[[1, 'k09', item, 10], [2, 'k02', item, 10]], /slice 2, not one of the slices it was asked for \(from 1: 1, 3\)/],
      [[[0, 'k09', item, 10]], /slice 0, not one of the slices/],
      [[[4, 'k09', item, 10]], /slice 4, not one of the slices/],
      [[[70_000, 'k09', item, 10]], /slice 70000, not one of the slices/],
      [[[1, 'k05', item, 10]], /key "k05" after "k05" \(where it was asked to start\)/],
      [[[1, 'k01', item, 10]], /after "k05"/],
      [[[3, 'k03', item, 10], [1, 'k09', item, 10]], /slice 1, after slice 3's/],
      [[[3, 'k03', item, 10], [3, 'k03', item, 10]], /key "k03" after "k03"/],
      [Array.from({ length: 11 }, (_, i): ScanEntry => [3, `k${String(i).padStart(2, '0')}`, item, 10]), /at most 10 entries was answered 11/],
    ];
    for (const [entries, why] of bad) {
      expect(() => checkSliceResult(op, answer(entries)), why.source).toThrow(MalformedFrame);
      expect(() => checkSliceResult(op, answer(entries)), why.source).toThrow(why);
    }
  });

  it('a Scan, range or Get answer of the wrong shape is refused as MalformedFrame where it is decoded, never a TypeError later', () => {
    const scanOp = (packed: boolean): SliceOpMessage => [SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, [0, 1, 2, 3]), packed];
    const spec = (packed: boolean, withKeys: boolean): RangeSpec => ({ low: 'a', lowInclusive: true, high: 'z', highInclusive: true, reverse: false, limit: 5, projection: null, filter: null, withKeys, packed });
    const rangeOp = (packed: boolean, withKeys: boolean): SliceOpMessage => [SliceOp.Range, 1, 0, spec(packed, withKeys)];
    const getOp = (packed: boolean): SliceOpMessage => [SliceOp.Get, 1, 0, 'k', null, packed];
    const bad: [SliceOpMessage, unknown][] = [
      [scanOp(false), null],
      [scanOp(false), {}],
      [scanOp(false), [[], true]],
      [scanOp(false), [null, true, null]],
      [scanOp(false), [[], 'yes', null]],
      [scanOp(false), [[], true, packClientList([])]],
      [scanOp(true), [[], true, null]],
      [scanOp(false), [[[0, 'k']], true, null]],
      [scanOp(false), [[[0, 1, null, 1]], true, null]],
      [scanOp(false), [[[0, 'k', null, -1]], true, null]],
      [scanOp(false), [[[0.5, 'k', null, 1]], true, null]],
      [scanOp(false), [[[0, 'k', 'item', 1]], true, null]],
      [scanOp(false), [[[0, 'k', Uint8Array.of(0x80), 1]], true, null]],
      [scanOp(true), [[[0, 'k', { pk: 'p' }, 1]], true, packClientList([])]],
      [rangeOp(false, false), null],
      [rangeOp(false, false), [[], null, false, null]],
      [rangeOp(false, false), [{}, null, false, null, 0]],
      [rangeOp(false, false), [[null], null, false, null, 1]],
      [rangeOp(false, false), [[], 7, false, null, 0]],
      [rangeOp(false, false), [[], null, 'no', null, 0]],
      [rangeOp(false, false), [[], null, false, null, -1]],
      [rangeOp(false, false), [[], null, false, [], 0]],
      [rangeOp(false, true), [[], null, false, null, 0]],
      [rangeOp(false, true), [[{ a: 1 }], 'k', false, [], 1]],
      [rangeOp(false, true), [[{ a: 1 }], 'k', false, [1], 1]],
      [rangeOp(true, true), [[{ a: 1 }], 'k', false, ['k'], 1]],
      [rangeOp(true, false), [packClientList([]), null, false, null, 'none']],
      [getOp(false), Uint8Array.of(0x80)],
      [getOp(false), 'item'],
      [getOp(true), { a: 1 }],
      [[SliceOp.Put, 1, 0, 'k', { a: 1 }, 1, null, null], true],
      [[SliceOp.Delete, 1, 0, 'k', null, null], 1],
      // DeleteItem asserts which of the two it got: a node's answer must not reach that assert.
      [[SliceOp.Delete, 1, 0, 'k', null, null], null],
      [[SliceOp.Delete, 1, 0, 'k', { condition: null, returnOld: true, oldOnFailure: false }, null], true],
      [[SliceOp.Stats, 1, sliceSetOf(0, [0])], [[[1, 0, 0, 0, 0, []]], [], [], []]],
    ];
    for (const [op, r] of bad) {
      const context = `op ${op[0]}: ${JSON.stringify(r)}`;
      expect(() => checkSliceResult(op, r), context).toThrow(MalformedFrame);
    }
    // What the nodes answer passes.
    checkSliceResult(rangeOp(false, true), [[{ a: 1 }], 'k', true, ['k'], 1]);
    checkSliceResult(rangeOp(true, true), [packClientList([{ a: 1 }]), 'k', false, ['k'], 1]);
    checkSliceResult(getOp(true), Uint8Array.of(0x80));
    checkSliceResult(getOp(false), null);
    checkSliceResult([SliceOp.Delete, 1, 0, 'k', null, null], false);
    checkSliceResult([SliceOp.Delete, 1, 0, 'k', { condition: null, returnOld: true, oldOnFailure: false }, null], { a: 1 });
  });

  it('a scan answer changed at random is refused as MalformedFrame or, taken, makes a page (never a TypeError or an assert)', () => {
    let seed = 99;
    const random = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    const values = [null, true, 0, -1, 1.5, 4, 70_000, 'k', 'k15', '', {}, [], Uint8Array.of(0x80), KEPT_IN_LIST, { pk: 'p' }];
    let [taken, refused] = [0, 0];
    for (let n = 0; n < 2000; n++) {
      const packed = n % 2 === 1;
      const op: SliceOpMessage = [SliceOp.Scan, 1, 0, null, 5, null, null, sliceSetOf(0, [0, 1, 2]), packed];
      const r = store.execute(op)[1] as unknown[];
      // One value somewhere in the answer, or in one of its entries, replaced by another.
      const entries = r[0] as unknown[][];
      if (random(3) === 0 || entries.length === 0) r[random(3)] = values[random(values.length)];
      else entries[random(entries.length)][random(4)] = values[random(values.length)];
      try {
        checkSliceResult(op, r);
      } catch (err) {
        expect(err, `case ${n}`).toBeInstanceOf(MalformedFrame);
        refused++;
        continue;
      }
      taken++;
      try {
        scanPage([r as ScanResult], 5, packed);
      } catch (err) {
        // Taken, only the packed list's own checks may refuse it (a mark turned null: the list holds one more).
        expect(err, `case ${n}: ${(err as Error).message}`).toBeInstanceOf(MalformedFrame);
      }
    }
    expect(taken).toBeGreaterThan(50);
    expect(refused).toBeGreaterThan(500);
  });

  it('a page whose worker says it has more but answers no entry is refused as malformed, not taken as the end of the scan', () => {
    for (const packed of [false, true]) {
      const empty: ScanResult = [[], false, packed ? packClientList([]) : null];
      expect(() => scanPage([empty], 10, packed), `packed ${packed}`).toThrow(MalformedFrame);
      expect(() => scanPage([empty, [[], true, packed ? packClientList([]) : null]], 10, packed), `packed ${packed}`).toThrow(/more but no entry/);
      // Every worker done and nothing found: the last page, no marker.
      expect(scanPage([[[], true, packed ? packClientList([]) : null]], 10, packed).marker).toBeUndefined();
    }
  });

  it('a page merged from several workers is, item by item, the page of their objects: only the part the page takes is cut', () => {
    const WORKERS = 3;
    const stores = Array.from({ length: WORKERS }, (_, w) => {
      const s = new SliceStore(w, WORKERS, () => 1);
      const own = Array.from({ length: 12 }, (_, k) => k).filter((k) => k % WORKERS === w);
      s.execute([SliceOp.Assign, 1, own]);
      for (let i = 0; i < 60; i++) if ((i % 12) % WORKERS === w) s.execute([SliceOp.Put, 1, i % 12, `k${String(i).padStart(2, '0')}`, everyType('p', i), 500, null, null]);
      return s;
    });
    for (const [limit, f, projection] of [[1, null, null], [7, null, null], [20, filter, null], [25, null, [['bin'], ['map', 'a']]], [100, null, null], [10, rejectAll, null]] as const) {
      for (const from of [0, 5]) {
        const op = (w: number, packed: boolean): SliceOpMessage => {
          const slices = Array.from({ length: 12 }, (_, k) => k).filter((k) => k % WORKERS === w && k >= from);
          return [SliceOp.Scan, 1, from, null, limit, projection as RangeSpec['projection'], f as RangeSpec['filter'], sliceSetOf(from, slices), packed];
        };
        const objects = scanPage(stores.map((s, w) => s.execute(op(w, false))[1] as ScanResult), limit, false);
        const packed = scanPage(stores.map((s, w) => s.execute(op(w, true))[1] as ScanResult), limit, true);
        const context = JSON.stringify([limit, from, f === rejectAll]);
        expect(packed.examined, context).toBe(objects.examined);
        expect(packed.marker, context).toBe(objects.marker);
        expect(packed.items, context).toBeInstanceOf(PackedItems);
        const frame = encodeClientFrame([1, RESULT_OK, packed as { items: PackedItems; examined: number }]);
        expect(Buffer.compare(frame, reference.pack([1, RESULT_OK, { examined: objects.examined, ...(objects.marker === undefined ? {} : { marker: objects.marker }), items: objects.items }])), context).toBe(0);
      }
    }
  });
});

describe('range reads over the WebSocket API pass items through', () => {
  const c = useCluster({ nodes: 2, workers: 2 });
  const N = 40;

  beforeAll(async () => {
    await c.client.createTable('pass_plain', { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    await c.client.createTable('pass_even', { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' }, { evenDistribution: { buckets: 4 } });
    const puts: Promise<unknown>[] = [];
    for (const table of ['pass_plain', 'pass_even']) for (let i = 0; i < N; i++) puts.push(c.client.putItem(table, everyType('p', i)));
    await Promise.all(puts);
  });

  it('gives, page by page, the items GetItem and the HTTP API give, every value type intact', async () => {
    for (const table of ['pass_plain', 'pass_even']) {
      const one: Item[] = [];
      for (let i = 0; i < N; i++) one.push((await c.client.getItem(table, { pk: 'p', sk: i }))!);
      expect(one.every((item) => item.bin instanceof Uint8Array)).toBe(true);
      for (const limit of [1, 7, 15, 16, 17, 1000]) {
        for (const reverse of [false, true]) {
          const ws = await c.client.getAllItems({ table, shardingKey: 'p', reverse, limit }, 100);
          const expected = reverse ? [...one].reverse() : one;
          const context = `${table} limit ${limit} reverse ${reverse}`;
          expect(ws, context).toEqual(expected);
          expect(ws.every((item) => item.bin instanceof Uint8Array && (item.map as { a: { b: { c: [number, { d: unknown }] } } }).a.b.c[1].d instanceof Uint8Array), context).toBe(true);
          // The HTTP API decodes the items (JSON): the same page, the same marker.
          const first = await c.client.getItems({ table, shardingKey: 'p', reverse, limit });
          const http = await c.http.request('GetItems', { table, shardingKey: 'p', reverse, limit });
          expect(plain(first), context).toEqual(plain(http));
        }
      }
      const projected = await c.client.getAllItems({ table, shardingKey: 'p', projection: 'bin, map.a, ns', filter: 'n > :x', values: { ':x': 20 } }, 100);
      const http = await c.http.request('GetItems', { table, shardingKey: 'p', projection: 'bin, map.a, ns', filter: 'n > :x', values: { ':x': 20 } });
      expect(projected.length).toBeGreaterThan(0);
      expect(plain(projected)).toEqual(plain(http.items));
    }
  });
});

describe('scan pages over the WebSocket API pass items through', () => {
  const c = useCluster({ nodes: 2, workers: 2 });
  const N = 60;

  beforeAll(async () => {
    await c.client.createTable('pass_scan', { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    await c.client.createTable('pass_empty', { name: 'pk', type: 'string' });
    const puts: Promise<unknown>[] = [];
    // Several sharding keys, so that the items lie on many slices of both nodes and all workers.
    for (let i = 0; i < N; i++) puts.push(c.client.putItem('pass_scan', everyType(`p${i % 13}`, i)));
    await Promise.all(puts);
  });

  /** Every page of a scan over both APIs, page by page: the same items and the same marker. */
  async function samePages(request: Request<'GetItems'>, context: string): Promise<Item[]> {
    const all: Item[] = [];
    let marker: string | undefined;
    for (let page = 0; page < 200; page++) {
      const r = marker === undefined ? request : { ...request, marker };
      const ws = await c.client.getItems(r);
      const http = await c.http.request('GetItems', r);
      expect(plain(ws), `${context}, page ${page}`).toEqual(plain(http));
      expect(ws.items.every((item) => !('bin' in item) || item.bin instanceof Uint8Array), context).toBe(true);
      all.push(...ws.items);
      marker = ws.marker;
      if (marker === undefined) return all;
    }
    throw new Error(`${context}: more than 200 pages`);
  }

  it('gives, page by page, the items and markers the HTTP API gives, every value type intact', async () => {
    const every: Item[] = [];
    for (let i = 0; i < N; i++) every.push((await c.client.getItem('pass_scan', { pk: `p${i % 13}`, sk: i }))!);
    const byName = (a: Item, b: Item) => String(a.__name).localeCompare(String(b.__name));
    for (const limit of [1, 7, 16, 17, 1000]) {
      const items = await samePages({ table: 'pass_scan', limit }, `limit ${limit}`);
      expect([...items].sort(byName), `limit ${limit}`).toEqual([...every].sort(byName));
    }
    // One segment of four, every segment; a projection and a filter (pages where the filter keeps nothing come back empty, with a marker).
    for (let segment = 0; segment < 4; segment++) await samePages({ table: 'pass_scan', limit: 5, segment, totalSegments: 4 }, `segment ${segment}`);
    const filtered = await samePages({ table: 'pass_scan', limit: 3, projection: 'bin, map.a, ns, sk', filter: 'sk > :x', values: { ':x': 50 } }, 'projected and filtered');
    expect(filtered.map((item) => item.sk).sort((a, b) => (a as number) - (b as number))).toEqual(Array.from({ length: N - 51 }, (_, i) => 51 + i));
    expect(await samePages({ table: 'pass_scan', limit: 4, filter: 'sk > :x', values: { ':x': 1e9 } }, 'nothing kept')).toEqual([]);
    expect(await samePages({ table: 'pass_empty', limit: 10 }, 'empty table')).toEqual([]);
  });

  it('a BatchGet (its items packed by the workers, kept bytes or not) gives the items GetItem and the HTTP API give', async () => {
    const keys = [
      { pk: 'p3', sk: 3 },
      { pk: 'nobody', sk: 1 },
      { pk: 'p0', sk: 13 },
      { pk: 'p12', sk: 12 },
      { pk: 'p3', sk: 4 }, // no such item (4 is under p4)
      ...Array.from({ length: 20 }, (_, i) => ({ pk: `p${(i * 7) % 13}`, sk: (i * 7) % 13 })),
    ];
    const unique = [...new Map(keys.map((k) => [`${k.pk}.${k.sk}`, k])).values()];
    for (const projection of [undefined, ['bin', 'map.a', 'sk']]) {
      const ws = await c.client.batchGet('pass_scan', unique, projection);
      const http = await c.http.request('BatchGet', { table: 'pass_scan', keys: unique, ...(projection === undefined ? {} : { attributes: projection }) });
      expect(plain(ws)).toEqual(plain(http));
      expect(ws.failures).toEqual([]);
      expect(ws.items.length).toBe(unique.length);
      for (const [i, k] of unique.entries()) {
        const one = await c.client.getItem('pass_scan', k, projection);
        expect(plain(ws.items[i]), JSON.stringify(k)).toEqual(plain(one));
        if (one !== null) expect(ws.items[i]!.bin).toBeInstanceOf(Uint8Array);
      }
    }
    const none = await c.client.batchGet('pass_scan', [{ pk: 'x', sk: 1 }, { pk: 'y', sk: 2 }]);
    expect(none.items).toEqual([null, null]);
  });
});

describe('a range page held until a commit (a PackedPage written into its answer after later tasks ran)', () => {
  const spec = (limit: number): RangeSpec => ({ low: '', lowInclusive: true, high: '\u00ff', highInclusive: false, reverse: false, limit, projection: null, filter: null, withKeys: true, packed: true });
  const key = (i: number) => `k${String(i).padStart(4, '0')}`;
  /** Text of 1, 2, 3 and 4 bytes a char in UTF-8 (the kept texts hold it as latin1, a char a byte), and a NUL. */
  const text = (i: number, n: number) => `v${i} é ✓ 😀 \u0000 `.repeat(n);
  /** The pieces a page holds (kept texts, views of a packed list), read through its private field. */
  const piecesOf = (page: RangeItems) => {
    expect(page).toBeInstanceOf(PackedPage);
    return (page as unknown as { items: (string | Uint8Array)[] }).items;
  };
  /** What the answer's bytes must be: the page as the objects held at the range, packed, in the answer's place. */
  const expectedAnswer = (result: SliceOpResult, objects: Item[]) => {
    const [, ...rest] = result[1] as RangeResult;
    return Buffer.from(encodeSliceResults([[RESULT_OK, [reference.pack(objects), ...rest]] as SliceOpResult]));
  };
  /** What a worker's tasks do between a range and its commit: other packs by msgpackr (its buffer goes on past the page's
   * views, and is made anew many times over), ranges that keep pieces, and answers written. */
  const churn = (store: SliceStore, range: SliceOpMessage) => {
    for (let i = 0; i < 300; i++) packClientList(Array.from({ length: 40 }, (_, j) => ({ pk: `x${i}`, sk: j, s: 'z'.repeat(200 + i) })));
    for (let i = 0; i < 5; i++) encodeOwnedResults([store.execute(range)]);
  };

  it("on a leader: the page's kept texts and msgpackr views are written as they were read, after its items are overwritten, deleted and compacted", () => {
    // A budget that keeps some items' texts and not others, so that the page mixes kept texts and views.
    const store = new SliceStore(0, 1, () => 1, undefined, 24 * 1024);
    store.execute([SliceOp.Assign, 1, [0]]);
    const put = (i: number, s: string) => {
      const item = { pk: key(i), sk: i, s, big: i % 7 === 0 ? 'b'.repeat(PACKED_ITEM_CACHE_BYTES_MAX) : null };
      expect(store.execute([SliceOp.Put, 1, 0, key(i), item, itemBytes(item), null, null])[0]).toBe(RESULT_OK);
    };
    for (let i = 0; i < 120; i++) put(i, text(i, 1 + (i % 9)));
    const range: SliceOpMessage = [SliceOp.Range, 1, 0, spec(100)];
    store.execute(range); // the first page keeps its items' texts (under the budget)
    for (let i = 0; i < 120; i += 4) put(i, text(i, 3)); // these lose them: packed again at the next page, as views
    const objects = (store.execute([SliceOp.Range, 1, 0, { ...spec(100), packed: false }])[1] as [Item[]])[0];
    const held = store.execute(range);
    const pieces = piecesOf((held[1] as RangeResult)[0]);
    expect(pieces.some((p) => typeof p === 'string') && pieces.some((p) => p instanceof Uint8Array)).toBe(true);
    const expected = expectedAnswer(held, objects);
    // Before its commit: every item overwritten (with and without kept bytes), some deleted, the slice compacted.
    for (let i = 0; i < 120; i++) put(i, `after ${i} ${'ü'.repeat(i)}`);
    for (let i = 0; i < 120; i += 3) store.execute([SliceOp.Delete, 1, 0, key(i), null, null]);
    store.sliceEffectsText(0);
    churn(store, range);
    expect(Buffer.compare(Buffer.from(encodeOwnedResults([held])), expected)).toBe(0);
    expect(Buffer.compare(Buffer.from(encodeSliceResults([held])), expected)).toBe(0);
  });

  it('on a follower (an eventual read over items held as their packed bytes alone): written as read, after later records overwrite and delete them', () => {
    const store = new SliceStore(0, 1, () => 1);
    const record = (from: number, n: number, v: string) =>
      encodeReplicated(Array.from({ length: n }, (_, j) => { const item = { pk: key(from + j), v: `${v} ${text(j, 1 + (j % 5))}` }; return [EFFECT_SET, 1, 5, key(from + j), item, itemBytes(item)] as const; }), null);
    for (let i = 0; i < 100; i += 20) store.applyRecord(5, record(i, 20, 'first'));
    const range: SliceOpMessage = [SliceOp.ReplicaRange, 1, 5, spec(60)];
    const objects = (store.readReplica([SliceOp.ReplicaRange, 1, 5, { ...spec(60), packed: false }])[1] as [Item[]])[0];
    expect(objects).toHaveLength(60);
    const held = store.readReplica(range as Extract<SliceOpMessage, [typeof SliceOp.ReplicaRange, ...unknown[]]>);
    expect(piecesOf((held[1] as RangeResult)[0]).every((p) => typeof p === 'string')).toBe(true); // the records' texts
    const expected = expectedAnswer(held, objects);
    for (let i = 0; i < 100; i += 20) store.applyRecord(5, record(i, 20, 'second'));
    store.applyRecord(5, encodeReplicated(Array.from({ length: 30 }, (_, i) => [EFFECT_DELETE, 1, 5, key(2 * i)] as const), null));
    store.sliceEffectsText(5);
    for (let i = 0; i < 300; i++) packClientList([{ pk: `x${i}`, s: 'z'.repeat(4000 + i) }]);
    expect(Buffer.compare(Buffer.from(encodeOwnedResults([held])), expected)).toBe(0);
  });

  it('a page over the page bound (about 1 MiB, bin 32), of 0 and of 1 item, is written as packClientList of its items', () => {
    // A budget that keeps about half the page's items: the others are views of the list packed for the page.
    const store = new SliceStore(0, 1, () => 1, undefined, 512 * 1024);
    store.execute([SliceOp.Assign, 1, [0]]);
    const put = (i: number, n: number) => {
      const item = { pk: key(i), s: text(i, n) };
      store.execute([SliceOp.Put, 1, 0, key(i), item, itemBytes(item), null, null]);
    };
    const answerOf = (limit: number) => {
      const objects = (store.execute([SliceOp.Range, 1, 0, { ...spec(limit), packed: false }])[1] as [Item[]])[0];
      const r = store.execute([SliceOp.Range, 1, 0, spec(limit)]);
      expect(Buffer.compare(Buffer.from(encodeOwnedResults([r, [RESULT_ERROR, 'WrongOwner', 'moved']])), Buffer.from(encodeSliceResults([[RESULT_OK, [reference.pack(objects), ...(r[1] as RangeResult).slice(1)]] as SliceOpResult, [RESULT_ERROR, 'WrongOwner', 'moved']]))), `limit ${limit}`).toBe(0);
      return { objects, r };
    };
    expect(answerOf(10).objects).toHaveLength(0);
    // About 3 KB an item (under PACKED_ITEM_CACHE_BYTES_MAX, so kept): the page stops past PAGE_BYTES_MAX.
    for (let i = 0; i < 400; i++) put(i, 150);
    answerOf(500); // its first read: the one list msgpackr packed, its items' texts kept
    for (let i = 0; i < 400; i += 2) put(i, 140); // these lose their kept texts; kept again while under the budget
    const { objects, r } = answerOf(500);
    expect(objects.reduce((n, x) => n + itemBytes(x), 0)).toBeGreaterThan(PAGE_BYTES_MAX);
    const pieces = piecesOf((r[1] as RangeResult)[0]);
    expect(pieces.some((p) => typeof p === 'string') && pieces.some((p) => p instanceof Uint8Array)).toBe(true);
    const one = answerOf(1);
    expect(one.objects).toHaveLength(1);
  });

  it('refuses to write a page whose view lost its bytes (its buffer transferred away) rather than write a short answer', () => {
    // A list of one item in a buffer of its own; the page views its item.
    const own = new Uint8Array(packClientList([{ pk: 'a', s: 'é' }]));
    const page = new PackedPage([own.subarray(1)]);
    expect(Buffer.compare(page.bytes(), own)).toBe(0);
    structuredClone(own.buffer, { transfer: [own.buffer] });
    expect(() => encodeOwnedResults([[RESULT_OK, [page, null, false, null, 1]]])).toThrow(); // a detached view cannot be set from
  });
});

describe('a GetItem answer with its item packed', () => {
  const item = everyType('g', 3);
  const packed = () => PackedItem.of(reference.pack(item));

  it('is byte for byte the frame of the item as an object, at every size of request id, alone and in a frame', () => {
    // Every width msgpack switches at (and msgpackr's own fixint bounds, 0x20 and 0x40), either side.
    for (const id of [0, 1, 31, 32, 63, 64, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
      const passing: ClientResponseFrame = [id, RESULT_OK, { item: packed() }];
      expect(Buffer.compare(encodeClientFrame(passing), reference.pack([id, RESULT_OK, { item }])), `id ${id}`).toBe(0);
    }
    // Among other answers: runs of plain ones (packed together), errors, a missing item, BatchGet's packed list with a nil.
    const other = everyType('h', 4);
    const list: ClientResponseFrame[] = [
      [1, RESULT_OK, {}],
      [2, RESULT_ERROR, 'TableNotFound', 'no table'],
      [3, RESULT_OK, { item: packed() }],
      [4, RESULT_OK, { item: packed() }],
      [5, RESULT_OK, { item: null }],
      [6, RESULT_OK, { items: PackedItems.ofItems([reference.pack(other), PACKED_NIL, reference.pack(item)]), failures: [] }],
      [7, RESULT_OK, { item: other }],
      [300, RESULT_OK, { item: packed() }],
    ];
    const expected = [
      [1, RESULT_OK, {}],
      [2, RESULT_ERROR, 'TableNotFound', 'no table'],
      [3, RESULT_OK, { item }],
      [4, RESULT_OK, { item }],
      [5, RESULT_OK, { item: null }],
      [6, RESULT_OK, { failures: [], items: [other, null, item] }],
      [7, RESULT_OK, { item: other }],
      [300, RESULT_OK, { item }],
    ];
    expect(Buffer.compare(encodeClientFrame(list), reference.pack(expected))).toBe(0);
    expect(plain(decodeClientResponses(encodeClientFrame(list)))).toEqual(plain(expected));
  });

  it('with other fields beside the item (no hand-written head) is the same answer, the item last', () => {
    for (const id of [7, 2 ** 40]) {
      const passing: ClientResponseFrame = [id, RESULT_OK, { item: packed(), more: 'x', n: 1 }];
      const frames = [encodeClientFrame(passing), encodeClientFrame([passing, [id + 1, RESULT_OK, {}]])];
      expect(plain(decodeClientResponses(frames[0]))).toEqual(plain([[id, RESULT_OK, { more: 'x', n: 1, item }]]));
      expect(plain(decodeClientResponses(frames[1]))).toEqual(plain([[id, RESULT_OK, { more: 'x', n: 1, item }], [id + 1, RESULT_OK, {}]]));
    }
  });

  it('is refused when it holds an ext value: msgpackr reads some of them with the values after them, the next answers of the frame', () => {
    // A set's ext (0x73) is read by msgpackr as a header and then the next value: here, answer 2 of the frame.
    const swallowing = Uint8Array.of(0x81, 0xa1, 0x61, 0xd4, 0x73, 0x00);
    expect(() => PackedItem.of(swallowing)).toThrow(MalformedFrame);
    // What the check keeps from the client (the bytes spliced in unchecked): answer 2 is read into answer 1's item,
    // and the client cannot decode the frame, so every answer in it is lost.
    const unchecked = Object.assign(Object.create(PackedItem.prototype) as PackedItem, { bytes: swallowing });
    expect(() => decodeClientResponses(encodeClientFrame([[1, RESULT_OK, { item: unchecked }], [2, RESULT_OK, { z: 1 }], [3, RESULT_OK, {}]]))).toThrow(/end of MessagePack/);
    // Every ext form, each a whole value by its header: refused all the same.
    const exts = [
      [0xd4, 0x01, 0x00],
      [0xd5, 0x01, 0, 0],
      [0xd6, 0x01, 0, 0, 0, 0],
      [0xd7, 0x01, ...new Array(8).fill(0)],
      [0xd8, 0x01, ...new Array(16).fill(0)],
      [0xc7, 0x01, 0x01, 0x00],
      [0xc8, 0x00, 0x01, 0x01, 0x00],
      [0xc9, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00],
      [0xd4, 0x72, 0x40], // a record definition
      [0xd6, 0x62, 0, 0, 0, 0], // a string bundle
    ];
    for (const ext of exts) {
      expect(() => PackedItem.of(Uint8Array.of(0x81, 0xa1, 0x61, ...ext)), ext.map((b) => b.toString(16)).join(' ')).toThrow(/ext value/);
      expect(() => PackedItem.of(Uint8Array.of(0x81, 0xa1, 0x61, 0x91, 0x81, 0xa1, 0x62, ...ext)), `nested ${ext[0].toString(16)}`).toThrow(/ext value/);
    }
  });

  it('from a node that lies (fuzzed: bytes changed, cut, added; lengths that claim up to 4 GiB) is refused as MalformedFrame or, taken, keeps every other answer of its frame', () => {
    let seed = 12345;
    const random = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    const sources = [reference.pack(item), reference.pack(everyType('f', 9)), reference.pack({ pk: 'p', s: 'x'.repeat(300), l: Array.from({ length: 20 }, (_, i) => i) })];
    const lengthHeaders = [0xdc, 0xdd, 0xde, 0xdf, 0xc5, 0xc6, 0xda, 0xdb, 0xd9, 0xc4];
    let taken = 0;
    let refused = 0;
    let contentRefused = 0;
    const started = Date.now();
    for (let n = 0; n < 6000; n++) {
      const source = sources[n % sources.length];
      let bytes: Uint8Array = Uint8Array.from(source);
      switch (n % 5) {
        case 0:
          for (let k = 1 + random(3); k > 0; k--) bytes[random(bytes.length)] = random(256);
          break;
        case 1:
          bytes = bytes.subarray(0, random(bytes.length));
          break;
        case 2:
          bytes = Uint8Array.from([...bytes, ...Array.from({ length: 1 + random(4) }, () => random(256))]);
          break;
        default: {
          // A header that declares a length far past the end (up to 0xffffffff), at any place.
          const at = random(bytes.length);
          bytes[at] = lengthHeaders[random(lengthHeaders.length)];
          for (let k = 1; k <= 4 && at + k < bytes.length; k++) bytes[at + k] = n % 5 === 3 ? 0xff : random(256);
        }
      }
      let taking: PackedItem;
      try {
        taking = PackedItem.of(bytes);
      } catch (err) {
        expect(err, `case ${n}`).toBeInstanceOf(MalformedFrame);
        refused++;
        continue;
      }
      taken++;
      expect(taking.bytes.byteLength).toBe(bytes.byteLength);
      // Taken: the client reads the item as one value, and the answers after it as they were. What is inside the map
      // is not checked (PackedItem.of): the client may refuse it (a key that is no string), the frame then, as the
      // router refused a node's whole batch on it when it decoded items; but it never reads into the next answer.
      const list: ClientResponseFrame[] = [[1, RESULT_OK, { item: taking }], [2, RESULT_OK, { z: 1 }], [3, RESULT_ERROR, 'Internal', 'x']];
      let decoded: ClientResponseFrame[];
      try {
        decoded = decodeClientResponses(encodeClientFrame(list));
      } catch (err) {
        expect((err as Error).message, `case ${n}`).not.toMatch(/end of MessagePack|Unexpected end/i);
        contentRefused++;
        continue;
      }
      expect(decoded.length, `case ${n}`).toBe(3);
      expect(plain(decoded.slice(1)), `case ${n}`).toEqual(plain(list.slice(1)));
    }
    expect(taken).toBeGreaterThan(100);
    expect(contentRefused).toBeLessThan(taken);
    expect(refused).toBeGreaterThan(1000);
    expect(Date.now() - started).toBeLessThan(20_000); // no read loops by a declared length
  });

  it('is refused by the router unless its bytes are exactly one map', () => {
    const bytes = reference.pack(item);
    expect(() => PackedItem.of(bytes.subarray(0, bytes.length - 1))).toThrow(MalformedFrame);
    expect(() => PackedItem.of(Buffer.concat([bytes, PACKED_NIL]))).toThrow(/holds one value/);
    expect(() => PackedItem.of(reference.pack([item]))).toThrow(/map header/);
    expect(() => PackedItem.of(PACKED_NIL)).toThrow(/map header/);
    expect(() => PackedItem.of(new Uint8Array(0))).toThrow(/map header/);
    expect(() => PackedItem.of(Uint8Array.of(0x81, 0xa1, 0x61, 0xc1))).toThrow(/no msgpack type/);
  });

  it('comes from a partition as the bytes of the object it gives unpacked, with a projection, read again and after writes', () => {
    const budget = 4096;
    const store = new SliceStore(0, 1, () => 1, undefined, budget);
    store.execute([SliceOp.Assign, 1, [0]]);
    for (let i = 0; i < 40; i++) store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(2, '0')}`, everyType('p', i), 500, null, null]);
    const get = (key: string, packedToo: boolean, projection: RangeSpec['projection'] = null) => store.execute([SliceOp.Get, 1, 0, key, projection, packedToo]);
    const same = (context: string) => {
      for (let i = 0; i < 40; i++) {
        const key = `k${String(i).padStart(2, '0')}`;
        for (const projection of [null, [['map', 'a', 'b'], ['bin'], ['ss']]]) {
          const [ok, object] = get(key, false, projection);
          const [okPacked, bytes] = get(key, true, projection);
          expect([ok, okPacked]).toEqual([RESULT_OK, RESULT_OK]);
          expect(bytes, `${context} ${key}`).toBeInstanceOf(Uint8Array);
          expect(Buffer.compare(bytes as Uint8Array, reference.pack(object)), `${context} ${key}`).toBe(0);
        }
      }
    };
    same('first read');
    const kept = store.keptBytes;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(budget * 1.1 + 1000); // the range pages' budget, shared
    same('read again: the kept bytes');
    store.execute([SliceOp.Put, 1, 0, 'k03', { pk: 'p', sk: 3, s: 'replaced' }, 50, null, null]);
    store.execute([SliceOp.Update, 1, 0, 'k04', { base: {}, actions: [{ k: 'set', path: ['s'], value: { k: 'value', v: 'updated' } }], condition: null, oldOnFailure: false, returnValues: 'none' }, null]);
    store.execute([SliceOp.Delete, 1, 0, 'k05', null, null]);
    expect(get('k05', true)).toEqual([RESULT_OK, null]);
    for (let i = 0; i < 40; i++) if (i !== 5) expect(unpackClientList(new PackedPage([get(`k${String(i).padStart(2, '0')}`, true)[1] as Uint8Array]).bytes())[0].s).toBe(i === 3 ? 'replaced' : i === 4 ? 'updated' : `text ${i} é 😀 \u0000`);
    expect(get('missing', true)).toEqual([RESULT_OK, null]);
  });
  it('from a partition answers the new value after a follower applies records, a snapshot, a move in and a dropped replica, and gives back its kept bytes', () => {
    const store = new SliceStore(0, 1, () => 1);
    store.execute([SliceOp.Assign, 1, [0]]);
    const get = (slice: number, key: string) => {
      const r = slice === 0 ? store.execute([SliceOp.Get, 1, slice, key, null, true]) : store.readReplica([SliceOp.ReplicaGet, 1, slice, key, null, true]);
      expect(r[0], `${slice} ${key}`).toBe(RESULT_OK);
      return r[1] === null ? null : (unpackClientList(new PackedPage([r[1] as Uint8Array]).bytes())[0] as Item);
    };
    const set = (slice: number, key: string, v: Value) => [EFFECT_SET, 1, slice, key, { pk: key, v }, 40] as const;
    // Slice 1 is a follower's replica here: its records are replayed, its reads are ReplicaGets.
    store.replay([...set(1, 'r', 'first')]);
    expect(get(1, 'r')?.v).toBe('first');
    const keptOne = store.keptBytes;
    expect(keptOne).toBeGreaterThan(0);
    store.replay([...set(1, 'r', 'applied record')]);
    expect(store.keptBytes).toBe(0);
    expect(get(1, 'r')?.v).toBe('applied record');
    // A snapshot installed: the slice dropped, then its items replayed.
    store.replay([EFFECT_DROP_SLICE, 1, null]);
    expect(store.keptBytes).toBe(0);
    store.replay([...set(1, 'r', 'from a snapshot')]);
    expect(get(1, 'r')?.v).toBe('from a snapshot');
    store.replay([EFFECT_DELETE, 1, 1, 'r']);
    expect(get(1, 'r')).toBeNull();
    expect(store.keptBytes).toBe(0);
    // A replica the node no longer holds: forgotten with what it kept.
    store.replay([...set(1, 'r', 'kept')]);
    get(1, 'r');
    expect(store.keptBytes).toBe(keptOne - 1); // 'kept' is a byte shorter than 'first'
    store.forgetSlice(1);
    expect(store.keptBytes).toBe(0);
    // A slice moved in (the worker held an older copy of it): what the move brings is answered.
    store.replay([...set(2, 'm', 'old copy')]);
    expect(store.execute([SliceOp.MoveBegin, 2])[0]).toBe(RESULT_OK);
    expect(store.execute([SliceOp.MoveApply, 2, Uint8Array.from(encodeEffects([[...set(2, 'm', 'moved in')]])), true])[0]).toBe(RESULT_OK);
    expect(store.execute([SliceOp.Get, 1, 2, 'm', null, true])[0]).toBe(RESULT_OK);
    expect(unpackClientList(new PackedPage([store.execute([SliceOp.Get, 1, 2, 'm', null, true])[1] as Uint8Array]).bytes())[0].v).toBe('moved in');
    expect(store.execute([SliceOp.MoveApply, 2, noMovedEffects(), false])[0]).toBe(RESULT_ERROR); // owned now: no longer incoming
    // A table dropped: nothing of it is answered or kept.
    store.execute([SliceOp.Put, 1, 0, 'k', { pk: 'k', v: 1 }, 40, null, null]);
    expect(get(0, 'k')?.v).toBe(1);
    expect(store.keptBytes).toBeGreaterThan(0);
    store.execute([SliceOp.DropTable, 1]);
    expect(store.keptBytes).toBe(0);
    expect(get(0, 'k')).toBeNull();
  });
});


/** What DynamoDB's endpoint answers for a value, checked against the value by hand (not by the endpoint's own
 * conversion): each difference as a path and what was found. */
function dynamoDifferences(value: unknown, av: AttributeValue | undefined, path: string): string[] {
  const bad = [`${path}: ${JSON.stringify(av)} for ${JSON.stringify(plain(value))}`];
  if (av === undefined) return bad;
  if (typeof value === 'string') return av.S === value ? [] : bad;
  if (typeof value === 'number') return av.N !== undefined && Number(av.N) === value ? [] : bad;
  if (typeof value === 'boolean') return av.BOOL === value ? [] : bad;
  if (value === null) return av.NULL === true ? [] : bad;
  if (value instanceof Uint8Array) return av.B !== undefined && Buffer.compare(av.B, value) === 0 ? [] : bad;
  if (Array.isArray(value)) return av.L !== undefined && av.L.length === value.length ? value.flatMap((v, i) => dynamoDifferences(v, av.L![i], `${path}[${i}]`)) : bad;
  const map = value as Record<string, unknown>;
  if ('$N' in map) return av.N === map.$N ? [] : bad;
  if ('$SS' in map) return JSON.stringify([...(av.SS ?? [])].sort()) === JSON.stringify([...(map.$SS as string[])].sort()) ? [] : bad;
  if ('$NS' in map) return JSON.stringify((av.NS ?? []).map(Number).sort()) === JSON.stringify([...(map.$NS as number[])].sort()) ? [] : bad;
  if ('$BS' in map) return JSON.stringify((av.BS ?? []).map((b) => Buffer.from(b).toString('hex')).sort()) === JSON.stringify((map.$BS as Uint8Array[]).map((b) => Buffer.from(b).toString('hex')).sort()) ? [] : bad;
  if (av.M === undefined) return bad;
  const keys = Object.keys(av.M).filter((k) => !k.startsWith('__'));
  if (JSON.stringify(keys.sort()) !== JSON.stringify(Object.keys(map).sort())) return [`${path}: keys ${keys} for ${Object.keys(map)}`];
  return Object.keys(map).flatMap((k) => dynamoDifferences(map[k], av.M![k], `${path}.${k}`));
}

describe('an item of every value type reads back the same over every API', () => {
  // Two replicas, so that an eventually consistent read may be answered by a follower (ReplicaGet) too.
  const c = useCluster({ nodes: 2, workers: 2, replicationFactor: 2 });
  const TABLE = 'pass_get';
  /** everyType with empty strings, lists and maps at each level, and numbers DynamoDB holds (1e-300 it does not). */
  const item = (i: number): Item => ({
    ...everyType('g', i),
    tiny: 1.5e-100,
    empty: '',
    emptyList: [],
    emptyMap: {},
    nested: { e: '', l: ['', [], {}], m: { e: '' }, bin: new Uint8Array(0) },
  });
  const N = 12;

  beforeAll(async () => {
    await c.client.createTable(TABLE, { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    for (let i = 0; i < N; i++) await c.client.putItem(TABLE, item(i));
  });

  it('over the WebSocket client (GetItem, consistent and not, BatchGet, a range), the HTTP API and the DynamoDB endpoint', async () => {
    const db = dynamoClient(c.cluster.url);
    try {
      const stored: Item[] = [];
      for (let i = 0; i < N; i++) {
        const key = { pk: 'g', sk: i };
        const ws = (await c.client.getItem(TABLE, key))!;
        stored.push(ws);
        const { __name, __mtime, ...attributes } = ws;
        expect(typeof __name === 'string' && typeof __mtime === 'number', `item ${i}`).toBe(true);
        expect(plain(attributes), `item ${i}`).toEqual(plain(item(i)));
        expect(ws.bin instanceof Uint8Array && (ws.nested as { bin: unknown }).bin instanceof Uint8Array, `item ${i}`).toBe(true);
        // Eventual reads go to either replica in turn: each of a few reads answers the same item.
        for (let k = 0; k < 4; k++) expect(plain(await c.client.getItem(TABLE, key, { consistentRead: false })), `item ${i} eventual`).toEqual(plain(ws));
        const http = (await c.http.request('GetItem', { table: TABLE, key })) as { item: Item };
        expect(plain(http.item), `item ${i} HTTP`).toEqual(plain(ws));
        const out = await db.send(new GetItemCommand({ TableName: TABLE, Key: { pk: { S: 'g' }, sk: { N: String(i) } }, ConsistentRead: true }));
        expect(out.Item).toBeDefined();
        expect(dynamoDifferences(attributes, { M: out.Item! }, `item ${i}`)).toEqual([]);
      }
      // Projected: decoded, as before.
      const projected = await c.client.getItem(TABLE, { pk: 'g', sk: 2 }, { projection: 'bin, nested.l, ss' });
      expect(plain(projected)).toEqual(plain((await c.http.request('GetItem', { table: TABLE, key: { pk: 'g', sk: 2 }, projection: 'bin, nested.l, ss' }) as { item: Item }).item));
      expect(Object.keys(projected!).sort()).toEqual(['__mtime', '__name', 'bin', 'nested', 'ss']);
      // BatchGet, a missing key among them: the items in the order asked, null where none.
      const keys = [{ pk: 'g', sk: 5 }, { pk: 'g', sk: 999 }, { pk: 'g', sk: 0 }, { pk: 'g', sk: N - 1 }];
      const batch = await c.client.batchGet(TABLE, keys);
      expect(batch.failures).toEqual([]);
      expect(plain(batch.items)).toEqual(plain([stored[5], null, stored[0], stored[N - 1]]));
      expect(plain(batch)).toEqual(plain(await c.http.request('BatchGet', { table: TABLE, keys })));
      expect(plain(await c.client.batchGet(TABLE, keys, { consistentRead: false }))).toEqual(plain(batch));
      expect(plain(await c.client.getAllItems({ table: TABLE, shardingKey: 'g' }, 10))).toEqual(plain(stored));
    } finally {
      db.destroy();
    }
  });

  it('read over the WebSocket API after every kind of change, answers the new value: no kept bytes outlive their item, on the leader or a follower', async () => {
    const T = 'pass_stale';
    const key = { pk: 'a' };
    /** GetItem consistent, eventual (either replica, each keeping what it packed) and a BatchGet, all read now. */
    const readAll = async () => {
      const consistent = await c.client.getItem(T, key);
      const eventual: (Item | null)[] = [];
      for (let k = 0; k < 4; k++) eventual.push(await c.client.getItem(T, key, { consistentRead: false }));
      const batch = (await c.client.batchGet(T, [key, { pk: 'b' }], { consistentRead: false })).items;
      return { consistent, eventual, batch };
    };
    /** The value a read answers: v, or null for no item. */
    const v = (item: Item | null | undefined) => (item === null || item === undefined ? null : item.v);
    /** Consistent reads see `want` at once; eventual ones only `before` or `want`, and `want` in 20 reads in a row within 10 s. */
    const expectValue = async (what: string, want: unknown, before: unknown) => {
      expect(v(await c.client.getItem(T, key)), `${what}: consistent`).toEqual(want);
      expect(v((await c.client.batchGet(T, [key])).items[0]), `${what}: BatchGet`).toEqual(want);
      const until = Date.now() + 10_000;
      for (let seen = 0; seen < 20; ) {
        const got = v(await c.client.getItem(T, key, { consistentRead: false }));
        expect([before, want], `${what}: eventual`).toContainEqual(got);
        seen = got === want ? seen + 1 : 0;
        if (seen < 20 && Date.now() > until) throw new Error(`${what}: eventual reads still answer ${JSON.stringify(got)} 10 s later`);
      }
      // Read once more over every path, so that what is kept now is the new value's.
      await readAll();
    };
    await c.client.createTable(T, { name: 'pk', type: 'string' });
    await c.client.putItem(T, { pk: 'a', v: 1, s: 'one' });
    await c.client.putItem(T, { pk: 'b', v: 'b' });
    await expectValue('put', 1, null);
    await c.client.putItem(T, { pk: 'a', v: 2, s: 'two' });
    await expectValue('put over it', 2, 1);
    await c.client.updateItem(T, key, { set: { v: 3 } });
    await expectValue('update', 3, 2);
    await c.client.updateItem(T, key, { update: 'SET s = :s', values: { ':s': 'three, longer' } });
    expect((await c.client.getItem(T, key))?.s).toBe('three, longer');
    await expect(c.client.putItem(T, { pk: 'a', v: 99 }, { condition: 'v = :no', values: { ':no': 0 } })).rejects.toMatchObject({ code: 'ConditionalCheckFailed' });
    await expectValue('a put whose condition failed', 3, 3);
    expect(await c.client.batchWrite(T, { puts: [{ pk: 'a', v: 4 }], deletes: [{ pk: 'b' }] })).toEqual([]);
    await expectValue('a batch write', 4, 3);
    expect((await c.client.batchGet(T, [{ pk: 'b' }])).items).toEqual([null]);
    expect(await c.client.deleteItem(T, key)).toBe(true);
    await expectValue('delete', null, 4);
    await c.client.putItem(T, { pk: 'a', v: 5 });
    await expectValue('put again', 5, null);
    await c.client.deleteTable(T);
    await c.client.createTable(T, { name: 'pk', type: 'string' });
    expect(await c.client.getItem(T, key)).toBeNull();
    await c.client.putItem(T, { pk: 'a', v: 'another table' });
    await expectValue('the table dropped and made again', 'another table', null);
  });
});

// Range results that pass through the router undecoded (RangeSpec.packed, PackedItems):
// the worker packs a range's items in the client's msgpack form, the router copies those bytes
// into the client frame, and the client reads the same items that the decoded path (HTTP,
// GetItem) gives, byte for byte. The codec at the edges first, then the partition, then a
// real cluster over both transports.
import { describe, expect, it, beforeAll } from 'vitest';
import { Packr } from 'msgpackr';
import {
  decodeClientResponses,
  encodeClientFrame,
  packClientList,
  PackedItems,
  splitPackedList,
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  unpackClientList,
  type ClientResponseFrame,
  type RangeSpec,
} from '../shared/protocol.js';
import type { Item } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';
import { plain, useCluster } from './cluster-fixture.js';

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
      [2, RESULT_ERROR, 'NotFound', 'no table'],
      [3, RESULT_OK, { item: everyType('q', 1) }],
      [4, RESULT_OK, { items: PackedItems.ofItems([]), examined: 0 }],
      [5, RESULT_OK, { items: PackedItems.ofItems(items(20).map(one)), examined: 25, marker: 'x' }],
    ];
    const expected = [
      [1, RESULT_OK, { examined: 3, items: items(3) }],
      [2, RESULT_ERROR, 'NotFound', 'no table'],
      [3, RESULT_OK, { item: everyType('q', 1) }],
      [4, RESULT_OK, { examined: 0, items: [] }],
      [5, RESULT_OK, { examined: 25, marker: 'x', items: items(20) }],
    ];
    expect(Buffer.compare(encodeClientFrame(list), reference.pack(expected))).toBe(0);
    expect(plain(decodeClientResponses(encodeClientFrame(list)))).toEqual(plain(expected));
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

  it('refuse a packed list that is cut short, has bytes after its items, or is no list', () => {
    const packed = packClientList(items(3));
    expect(() => splitPackedList(packed.subarray(0, packed.length - 1))).toThrow(/ends inside a value/);
    expect(() => splitPackedList(Buffer.concat([packed, Buffer.from([0xc0])]))).toThrow(/bytes after them/);
    expect(() => splitPackedList(reference.pack({ a: 1 }))).toThrow(/list header/);
    expect(() => splitPackedList(Uint8Array.of(0x91, 0xc1))).toThrow(/no msgpack type/);
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
      const [bytes, ...packedRest] = packed[1] as [Uint8Array, ...unknown[]];
      expect(packedRest, JSON.stringify(v)).toEqual(rest);
      expect(bytes).toBeInstanceOf(Uint8Array);
      expect(Buffer.compare(bytes, reference.pack(items)), JSON.stringify(v)).toBe(0);
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

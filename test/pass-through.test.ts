// Range results that pass through the router undecoded (RangeSpec.packed, PackedItems):
// the worker packs each item in the client's msgpack form, the router copies those bytes
// into the client frame, and the client reads the same items that the decoded path (HTTP,
// GetItem) gives, byte for byte. The codec at the edges first, then the partition, then a
// real cluster over both transports.
import { describe, expect, it, beforeAll } from 'vitest';
import { Packr } from 'msgpackr';
import {
  decodeClientResponses,
  encodeClientFrame,
  packClientItem,
  PackedItems,
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  unpackClientItem,
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

const reference = new Packr({ useRecords: false });

describe('client frames with packed items', () => {
  const items = (n: number) => Array.from({ length: n }, (_, i) => everyType('p', i));

  it('are byte for byte the frame of the same items as objects (items last), at every list header size', () => {
    for (const n of [0, 1, 15, 16, 17, 65_535, 65_536]) {
      const objects = n > 100 ? Array.from({ length: n }, (_, i) => ({ i })) : items(n);
      const packed = new PackedItems(objects.map(packClientItem));
      const asObjects: ClientResponseFrame = [7, RESULT_OK, { examined: n + 3, marker: 'm', items: objects }];
      const passing: ClientResponseFrame = [7, RESULT_OK, { items: packed, examined: n + 3, marker: 'm' }];
      expect(Buffer.compare(encodeClientFrame(passing), reference.pack(asObjects)), `${n} items`).toBe(0);
      expect(plain(decodeClientResponses(encodeClientFrame(passing)))).toEqual(plain([asObjects]));
    }
  });

  it('share a frame with other responses: objects, errors, and more packed items', () => {
    const list: ClientResponseFrame[] = [
      [1, RESULT_OK, { items: new PackedItems(items(3).map(packClientItem)), examined: 3 }],
      [2, RESULT_ERROR, 'NotFound', 'no table'],
      [3, RESULT_OK, { item: everyType('q', 1) }],
      [4, RESULT_OK, { items: new PackedItems([]), examined: 0 }],
      [5, RESULT_OK, { items: new PackedItems(items(20).map(packClientItem)), examined: 25, marker: 'x' }],
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

  it('keep every value as it was: binary stays binary, numbers keep their bits', () => {
    for (const item of items(5)) {
      const back = unpackClientItem(packClientItem(item));
      expect(plain(back)).toEqual(plain(item)); // binary compared as base64: Buffer and Uint8Array agree
      expect(back.bin).toBeInstanceOf(Uint8Array);
      expect(Object.is((back.map as { z: number }).z, -0.25)).toBe(true);
    }
  });
});

describe('a partition packs the items of a range when asked', () => {
  it('gives the bytes of the objects it gives unpacked, with projection, filter, keys and both directions', () => {
    const store = new SliceStore(0, 1, () => 1);
    expect(store.execute([SliceOp.Assign, 1, [0]])[0]).toBe(RESULT_OK);
    for (let i = 0; i < 30; i++) store.execute([SliceOp.Put, 1, 0, `k${String(i).padStart(2, '0')}`, everyType('p', i), 500, null]);
    const base: RangeSpec = { low: 'k', lowInclusive: true, high: 'l', highInclusive: false, reverse: false, limit: 17, projection: null, filter: null, withKeys: false, packed: false };
    const variants: Partial<RangeSpec>[] = [
      {},
      { reverse: true, withKeys: true },
      { projection: [['map', 'a', 'b'], ['bin'], ['list', 2]] },
      { filter: { k: 'cmp', op: '>', a: { k: 'path', path: ['n'] }, b: { k: 'value', v: 10 } }, withKeys: true },
    ];
    for (const v of variants) {
      const objects = store.execute([SliceOp.Range, 1, 0, { ...base, ...v }]);
      const packed = store.execute([SliceOp.Range, 1, 0, { ...base, ...v, packed: true }]);
      expect(objects[0]).toBe(RESULT_OK);
      expect(packed[0]).toBe(RESULT_OK);
      const [items, ...rest] = objects[1] as [Item[], ...unknown[]];
      const [bytes, ...packedRest] = packed[1] as [Uint8Array[], ...unknown[]];
      expect(packedRest, JSON.stringify(v)).toEqual(rest);
      expect(bytes.length).toBe(items.length);
      expect(items.length).toBeGreaterThan(0);
      bytes.forEach((b, i) => {
        expect(b).toBeInstanceOf(Uint8Array);
        expect(Buffer.compare(b, reference.pack(items[i])), JSON.stringify(v)).toBe(0);
      });
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

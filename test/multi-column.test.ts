// Keys of several typed columns and two-sided ranges through the real cluster,
// on the seed documents' own examples: Tablestore's student-card table (no
// padding, no connector), a sharding key of three columns spread by the hash
// of the tuple, and v3io's `car_id = c AND trip_id > a AND trip_id <= b`, read
// as one key range in both directions, paged, plain and bucketed, reading no
// item outside the range (the `examined` count of GetItems).
import { beforeAll, describe, expect, it } from 'vitest';
import type { Request } from '../shared/api.js';
import type { Item } from '../shared/values.js';
import { expectError, rng, useCluster } from './cluster-fixture.js';

const c = useCluster();

/** Every page of a query: the items, the pages' examined counts, and the page count. */
async function allPages(request: Request<'GetItems'>, maxPages = 200): Promise<{ items: Item[]; examined: number[]; pages: number }> {
  const items: Item[] = [];
  const examined: number[] = [];
  let marker: string | undefined;
  for (let pages = 1; pages <= maxPages; pages++) {
    const res = await c.client.getItems(marker === undefined ? request : { ...request, marker });
    items.push(...res.items);
    examined.push(res.examined);
    marker = res.marker;
    if (marker === undefined) return { items, examined, pages };
  }
  throw new Error(`more than ${maxPages} pages`);
}

describe('the Tablestore student-card table: sharding key DeviceID, sorting key (SellerID, CardID, OrderNumber)', () => {
  const T = 'cards';
  const rows: [string, number, number][] = [
    ['a1001', 6777, 5],
    ['a100', 100, 3],
    ['a100', 9, 1],
    ['a100', 6777, 4],
    ['a100', 10, 2],
  ];
  const inOrder = ['a100,9', 'a100,10', 'a100,100', 'a100,6777', 'a1001,6777'];
  const pairs = (items: Item[]) => items.map((i) => `${i.SellerID},${i.CardID}`);

  beforeAll(async () => {
    const table = await c.client.createTable(T, { name: 'DeviceID', type: 'number' }, [
      { name: 'SellerID', type: 'string' },
      { name: 'CardID', type: 'number' },
      { name: 'OrderNumber', type: 'number' },
    ]);
    expect(table.sortingKey).toEqual([
      { name: 'SellerID', type: 'string' },
      { name: 'CardID', type: 'number' },
      { name: 'OrderNumber', type: 'number' },
    ]);
    for (const [SellerID, CardID, OrderNumber] of rows) await c.client.putItem(T, { DeviceID: 54, SellerID, CardID, OrderNumber, amount: OrderNumber * 1.5 });
    // Neighbours that must never show up: other devices, one of them on the same seller.
    await c.client.putItem(T, { DeviceID: 55, SellerID: 'a100', CardID: 10, OrderNumber: 1 });
    await c.client.putItem(T, { DeviceID: 53, SellerID: 'a100', CardID: 50, OrderNumber: 1 });
  });

  it('reads DeviceID 54 in typed order, with no padding and no connector', async () => {
    const { items, examined } = await allPages({ table: T, shardingKey: 54 });
    expect(pairs(items)).toEqual(inOrder);
    expect(examined).toEqual([5]);
    expect(items.map((i) => i.__name)).toEqual(['54.a100.9.1', '54.a100.10.2', '54.a100.100.3', '54.a100.6777.4', '54.a1001.6777.5']);
    expect(pairs((await allPages({ table: T, shardingKey: 54, reverse: true, limit: 2 })).items)).toEqual([...inOrder].reverse());
  });

  it('fixes SellerID "a100" and reads CardID 10 to 100 only', async () => {
    for (const request of [
      { table: T, shardingKey: 54, sortingKey: { SellerID: 'a100', CardID: { gte: 10, lte: 100 } } },
      { table: T, shardingKey: { DeviceID: 54 }, sortingKey: { SellerID: 'a100', CardID: { between: [10, 100] } } },
      { table: T, keyCondition: 'DeviceID = :d AND SellerID = :s AND CardID BETWEEN :a AND :b', values: { ':d': 54, ':s': 'a100', ':a': 10, ':b': 100 } },
      { table: T, keyCondition: 'CardID <= :b AND DeviceID = :d AND CardID >= :a AND SellerID = :s', values: { ':d': 54, ':s': 'a100', ':a': 10, ':b': 100 } },
    ] as Request<'GetItems'>[]) {
      for (const reverse of [false, true]) {
        const { items, examined } = await allPages({ ...request, reverse });
        expect(pairs(items), JSON.stringify(request)).toEqual(reverse ? ['a100,100', 'a100,10'] : ['a100,10', 'a100,100']);
        expect(examined, JSON.stringify(request)).toEqual([2]);
      }
    }
  });

  it('fixes a prefix of the sorting columns, or a prefix of a string column', async () => {
    expect(pairs((await allPages({ table: T, shardingKey: 54, sortingKey: { SellerID: 'a100' } })).items)).toEqual(inOrder.slice(0, 4));
    expect(pairs((await allPages({ table: T, shardingKey: 54, sortingKey: { SellerID: 'a100', CardID: 6777 } })).items)).toEqual(['a100,6777']);
    expect(pairs((await allPages({ table: T, shardingKey: 54, sortingKey: { SellerID: { gt: 'a100' } } })).items)).toEqual(['a1001,6777']);
    expect(pairs((await allPages({ table: T, shardingKey: 54, sortingKey: { SellerID: { beginsWith: 'a10' } } })).items)).toEqual(inOrder);
    const keyed = await allPages({ table: T, keyCondition: 'DeviceID = :d AND begins_with(SellerID, :p)', values: { ':d': 54, ':p': 'a1001' } });
    expect(pairs(keyed.items)).toEqual(['a1001,6777']);
    expect(keyed.examined).toEqual([1]);
  });

  it('finds an item by its attributes and by its name, and upserts with every key column', async () => {
    const byAttributes = await c.client.getItem(T, { DeviceID: 54, SellerID: 'a100', CardID: 100, OrderNumber: 3 });
    expect(byAttributes).toMatchObject({ amount: 4.5, __name: '54.a100.100.3' });
    expect(await c.client.getItem(T, '54.a100.100.3')).toEqual(byAttributes);
    await c.client.updateItem(T, '54.b.1.2', { set: { note: 'new' } });
    expect(await c.client.getItem(T, { DeviceID: 54, SellerID: 'b', CardID: 1, OrderNumber: 2 })).toMatchObject({ DeviceID: 54, SellerID: 'b', CardID: 1, OrderNumber: 2, note: 'new' });
    expect(await c.client.deleteItem(T, { DeviceID: 54, SellerID: 'b', CardID: 1, OrderNumber: 2 })).toBe(true);
    await expectError(c.client.getItem(T, '54.a100.100'), 'InvalidKey');
    await expectError(c.client.getItem(T, { DeviceID: 54, SellerID: 'a100', CardID: 100 }), 'InvalidKey');
  });

  it('refuses conditions that are not one key range', async () => {
    await expectError(c.client.getItems({ table: T, shardingKey: 54, sortingKey: { CardID: 9 } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, shardingKey: 54, sortingKey: { SellerID: { gt: 'a' }, CardID: 9 } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, keyCondition: 'DeviceID = :d AND CardID = :c', values: { ':d': 54, ':c': 9 } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, keyCondition: 'DeviceID = :d AND SellerID > :s AND CardID = :c', values: { ':d': 54, ':s': 'a', ':c': 9 } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, shardingKey: 54, sortingKey: { SellerID: 'a100', CardID: { gt: 'x' } } }), 'InvalidKey');
  });
});

describe('a sharding key of three columns (DeviceID, SellerID, CardID)', () => {
  const T = 'cards_by_tuple';
  const N = 300;

  beforeAll(async () => {
    await c.client.createTable(T, [
      { name: 'DeviceID', type: 'number' },
      { name: 'SellerID', type: 'string' },
      { name: 'CardID', type: 'number' },
    ], { name: 'OrderNumber', type: 'number' });
    // One device and one seller: only the whole tuple tells the items' sharding keys apart.
    for (let i = 0; i < N; i += 25) {
      const puts = Array.from({ length: 25 }, (_, j) => ({ DeviceID: 54, SellerID: 'a.100%', CardID: i + j, OrderNumber: 7, v: i + j }));
      await c.client.batchWrite(T, { puts });
    }
  });

  it('spreads its items by the hash of the whole tuple', async () => {
    const { slices } = await c.client.describeSlices(T);
    // 300 distinct tuples over 1024 slices land on about 260 slices; hashing DeviceID alone would give 1.
    expect(slices.length).toBeGreaterThan(200);
    expect(slices.reduce((a, s) => a + s.items, 0)).toBe(N);
  });

  it('finds each item by its attributes and by its __name', async () => {
    const r = rng(4242);
    for (let round = 0; round < 20; round++) {
      const card = Math.floor(r() * N);
      const item = await c.client.getItem(T, { DeviceID: 54, SellerID: 'a.100%', CardID: card, OrderNumber: 7 });
      expect(item).toMatchObject({ v: card, __name: `54.a%2E100%25.${card}.7` });
      expect(await c.client.getItem(T, item!.__name as string)).toEqual(item);
    }
    const names = Array.from({ length: 100 }, (_, i) => `54.a%2E100%25.${i * 3}.7`);
    const { items, failures } = await c.client.batchGet(T, names, ['v']);
    expect(failures).toEqual([]);
    expect(items.map((i) => i?.v)).toEqual(names.map((_, i) => i * 3));
  });

  it('reads one sharding tuple given as a list or as an object; reports hot keys as tuples', async () => {
    for (const shardingKey of [[54, 'a.100%', 17], { CardID: 17, DeviceID: 54, SellerID: 'a.100%' }]) {
      expect((await c.client.getItems({ table: T, shardingKey })).items.map((i) => i.v)).toEqual([17]);
    }
    await expectError(c.client.getItems({ table: T, shardingKey: 54 }), 'InvalidKey');
    await expectError(c.client.getItems({ table: T, shardingKey: [54, 'a.100%'] }), 'InvalidKey');
    for (let i = 0; i < 30; i++) await c.client.updateItem(T, { DeviceID: 54, SellerID: 'a.100%', CardID: 5, OrderNumber: 7 }, { add: { hits: 1 } });
    const { hotKeys } = await c.client.describeSlices(T);
    expect(hotKeys[0].key).toBe('54.a%2E100%25.5');
    const { slices } = await c.client.describeSlices(T);
    expect(slices.some((s) => s.slice === hotKeys[0].slice)).toBe(true);
  });
});

describe("v3io's query: car_id = c AND trip_id > 10 AND trip_id <= 50, over 200 trips", () => {
  const expected = Array.from({ length: 40 }, (_, i) => 11 + i);

  for (const [T, even] of [
    ['trips', null],
    ['trips_even', { buckets: 16 }],
  ] as const) {
    describe(even === null ? 'a plain table' : 'a bucketed table (16 buckets)', () => {
      beforeAll(async () => {
        await c.client.createTable(T, { name: 'car_id', type: 'string' }, { name: 'trip_id', type: 'number' }, even === null ? {} : { evenDistribution: even });
        for (const car of ['b', 'c', 'c0', 'd']) {
          for (let i = 1; i <= 200; i += 25) {
            await c.client.batchWrite(T, { puts: Array.from({ length: 25 }, (_, j) => ({ car_id: car, trip_id: i + j, km: (i + j) % 7 })) });
          }
        }
      });

      const forms: [string, Request<'GetItems'>][] = [
        ['keyCondition', { table: T, keyCondition: 'car_id = :c AND trip_id > :a AND trip_id <= :b', values: { ':c': 'c', ':a': 10, ':b': 50 } }],
        ['sortingKey', { table: T, shardingKey: 'c', sortingKey: { gt: 10, lte: 50 } }],
      ];

      it.each(forms)('returns exactly the 40 trips in order, both directions, reading none outside the range (%s)', async (_form, request) => {
        for (const reverse of [false, true]) {
          const page = await c.client.getItems({ ...request, reverse });
          expect(page.items.map((i) => i.trip_id)).toEqual(reverse ? [...expected].reverse() : expected);
          expect(page.items.every((i) => i.car_id === 'c')).toBe(true);
          expect(page.marker).toBeUndefined();
          expect(page.examined).toBe(40);
        }
      });

      it.each(forms)('pages through the range with markers (%s)', async (_form, request) => {
        for (const reverse of [false, true]) {
          for (const limit of [1, 7, 39, 40]) {
            const { items, examined, pages } = await allPages({ ...request, reverse, limit });
            expect(items.map((i) => i.trip_id), `limit ${limit}`).toEqual(reverse ? [...expected].reverse() : expected);
            if (even === null) {
              // One slice, one range: every page reads its `limit` items of the range and nothing else.
              expect(pages, `limit ${limit}`).toBe(Math.ceil(40 / limit));
              expect(examined.reduce((a, b) => a + b, 0), `limit ${limit}`).toBe(40);
            }
          }
        }
      });

      it('counts filtered-out items as examined: a filter that keeps nothing still reads only the range', async () => {
        const page = await c.client.getItems({ table: T, shardingKey: 'c', sortingKey: { gt: 10, lte: 50 }, filter: 'km > :big', values: { ':big': 100 } });
        expect(page.items).toEqual([]);
        expect(page.examined).toBe(40);
        expect(page.marker).toBeUndefined();
      });

      it('answers a contradictory range with nothing, not an error', async () => {
        for (const request of [
          { table: T, shardingKey: 'c', sortingKey: { gt: 50, lte: 10 } },
          { table: T, shardingKey: 'c', sortingKey: { gt: 10, lt: 10 } },
          { table: T, keyCondition: 'car_id = :c AND trip_id > :a AND trip_id <= :b', values: { ':c': 'c', ':a': 50, ':b': 10 } },
        ] as Request<'GetItems'>[]) {
          for (const reverse of [false, true]) {
            expect(await c.client.getItems({ ...request, reverse })).toEqual({ items: [], examined: 0 });
          }
        }
        await expectError(c.client.getItems({ table: T, shardingKey: 'c', sortingKey: { between: [50, 10] } }), 'ValidationError');
      });
    });
  }
});

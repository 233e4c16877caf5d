// Even distribution through the real cluster: a bucketed table answers every
// query exactly as a plain table holding the same items, while one hot
// sharding key spreads over many slices instead of sitting on one.
import { beforeAll, describe, expect, it } from 'vitest';
import type { KeyColumns, Request, ShardingKeyValue } from '../shared/api.js';
import type { KeyType, KeyValue } from '../shared/key-encoding.js';
import { bucketOf, initHashing } from '../shared/hashing.js';
import type { Item } from '../shared/values.js';
import { expectError, plain, rng, useCluster } from './cluster-fixture.js';
import { compare, randomCondition, randomValue } from './key-model.js';

const c = useCluster();
beforeAll(() => initHashing());

/** An item without its write time, which differs between the two tables. */
const comparable = (items: Item[]) => items.map(({ __mtime, ...rest }) => plain(rest));

describe.each<[KeyType, number]>([
  ['number', 8],
  ['string', 64],
  ['binary', 3],
])('a bucketed table (%s sorting key, %i buckets) against a plain one', (type, buckets) => {
  const plainTable = `plain_${type}_${buckets}`;
  const bucketed = `even_${type}_${buckets}`;
  const values = new Map<string, KeyValue[]>();
  const r = rng(buckets * 31 + type.length);

  beforeAll(async () => {
    await c.client.createTable(plainTable, { name: 'pk', type: 'string' }, { name: 'sk', type });
    const desc = await c.client.createTable(bucketed, { name: 'pk', type: 'string' }, { name: 'sk', type }, { evenDistribution: { buckets } });
    expect(desc.evenDistribution).toEqual({ buckets });
    const puts: Item[] = [];
    for (const pk of ['hot', 'warm', 'hot_1']) {
      const vs: KeyValue[] = [];
      for (let i = 0; i < 80; i++) {
        const v = randomValue(type, r);
        if (vs.some((x) => compare(type, x, v) === 0)) continue;
        vs.push(v);
        puts.push({ pk, sk: v, i, tag: i % 3 === 0 ? 'a' : 'b' });
      }
      values.set(pk, vs);
    }
    for (let i = 0; i < puts.length; i += 25) {
      await c.client.batchWrite(plainTable, { puts: puts.slice(i, i + 25) });
      await c.client.batchWrite(bucketed, { puts: puts.slice(i, i + 25) });
    }
  });

  it('returns identical results for random conditions, directions, limits and filters', async () => {
    for (let round = 0; round < 60; round++) {
      const pk = ['hot', 'warm', 'hot_1'][round % 3];
      const sortingKey = randomCondition(type, values.get(pk)!, r);
      const reverse = r() < 0.5;
      const limit = [1, 3, 10, 33, 1000][Math.floor(r() * 5)];
      const attributes = r() < 0.3 ? ['i'] : undefined;
      // Filters run on the slices: a third of the rounds filter on a plain attribute.
      const filter: Pick<Request<'GetItems'>, 'filter' | 'names' | 'values'> = r() < 0.33 ? (r() < 0.5 ? { filter: 'i < :n', values: { ':n': Math.floor(r() * 80) } } : { filter: '#t = :t', names: { '#t': 'tag' }, values: { ':t': 'a' } }) : {};
      const q = { shardingKey: pk, reverse, limit, ...(sortingKey ? { sortingKey } : {}), ...(attributes ? { attributes } : {}), ...filter };
      const context = JSON.stringify(plain(q));
      const expected = await c.client.getAllItems({ table: plainTable, ...q });
      // Page by page: no page over the limit, a marker exactly when more follow.
      const got: Item[] = [];
      let marker: string | undefined;
      for (let page = 0; page < 1000; page++) {
        const res = await c.client.getItems({ table: bucketed, ...q, ...(marker ? { marker } : {}) });
        expect(res.items.length, context).toBeLessThanOrEqual(limit);
        got.push(...res.items);
        marker = res.marker;
        if (marker === undefined) break;
        if (!('filter' in filter)) expect(res.items.length, context).toBe(limit); // with a filter a page may be short
      }
      expect(comparable(got), context).toEqual(comparable(expected));
    }
  });

  it('reads one item by its original key from one bucket, and one raw bucket on request', async () => {
    const v = values.get('hot')![0];
    const item = await c.client.getItem(bucketed, { pk: 'hot', sk: v });
    expect(item).toMatchObject({ pk: 'hot' });
    expect(plain(item!.sk)).toEqual(plain(v));
    const b = bucketOf(type, v, buckets);
    const raw = await c.client.getAllItems({ table: bucketed, shardingKey: 'hot', bucket: b });
    expect(raw.length).toBeGreaterThan(0);
    for (const i of raw) {
      expect(i.pk).toBe('hot'); // callers see the original key
      expect(bucketOf(type, i.sk as KeyValue, buckets)).toBe(b);
    }
  });
});

describe('a filter that leaves almost everything out', () => {
  it('ends pages early at the frontier every bucket has read past, and still finds every match once', async () => {
    await c.client.createTable('sparse_even', { name: 'pk', type: 'string' }, { name: 'n', type: 'number' }, { evenDistribution: { buckets: 64 } });
    for (let i = 0; i < 2400; i += 25) {
      await c.client.batchWrite('sparse_even', { puts: Array.from({ length: 25 }, (_, j) => ({ pk: 'k', n: i + j, rare: (i + j) % 1200 === 7 })) });
    }
    for (const reverse of [false, true]) {
      const found: number[] = [];
      let marker: string | undefined;
      let pages = 0;
      while (pages++ < 200) {
        const res = await c.client.getItems({ table: 'sparse_even', shardingKey: 'k', limit: 1, reverse, filter: 'rare = :t', values: { ':t': true }, ...(marker ? { marker } : {}) });
        found.push(...res.items.map((i) => i.n as number));
        marker = res.marker;
        if (marker === undefined) break;
      }
      expect(found).toEqual(reverse ? [1207, 7] : [7, 1207]);
      // About 37 items a bucket, read one at a time: the page ends at the frontier before reaching 1207.
      expect(pages).toBeGreaterThan(2);
    }
  });
});

describe('buckets for a sharding key that is not one string', () => {
  it('adds the bucket as a number column to a number or a tuple sharding key, and reads them back as one sorted stream', async () => {
    const shapes: [table: string, shardingKey: KeyColumns, key: ShardingKeyValue, text: string][] = [
      ['even_number', { name: 'device', type: 'number' }, 7, '7'],
      ['even_tuple', [{ name: 'site', type: 'string' }, { name: 'device', type: 'number' }], ['north', 7], 'north.7'],
    ];
    for (const [table, shardingKey, key, text] of shapes) {
      await c.client.createTable(table, shardingKey, [{ name: 'day', type: 'number' }, { name: 'ts', type: 'number' }], { evenDistribution: { buckets: 16 } });
      const item = (i: number) => ({ ...(table === 'even_number' ? { device: 7 } : { site: 'north', device: 7 }), day: i % 5, ts: i });
      for (let i = 0; i < 400; i += 25) await c.client.batchWrite(table, { puts: Array.from({ length: 25 }, (_, j) => item(i + j)) });
      const spread = (await c.client.describeSlices(table)).slices;
      expect(spread.length, table).toBeGreaterThan(10);
      expect(spread.reduce((a, s) => a + s.items, 0)).toBe(400);
      const day2 = await c.client.getAllItems({ table, shardingKey: key, sortingKey: { day: 2, ts: { gt: 100, lte: 300 } }, limit: 7 });
      expect(day2.map((i) => i.ts)).toEqual(Array.from({ length: 400 }, (_, i) => i).filter((i) => i % 5 === 2 && i > 100 && i <= 300));
      expect(await c.client.getItem(table, `${text}.2.102`)).toMatchObject({ day: 2, ts: 102, __name: `${text}.2.102` });
      const { hotKeys } = await c.client.describeSlices(table);
      expect(hotKeys[0].key, table).toMatch(new RegExp(`^${text.replace('.', '\\.')}_\\d+$`));
    }
  });
});

describe('placement of a hot sharding key', () => {
  it('sits on one slice without buckets and spreads over many with them', async () => {
    await c.client.createTable('hot_plain', { name: 'device', type: 'string' }, { name: 'ts', type: 'number' });
    await c.client.createTable('hot_even', { name: 'device', type: 'string' }, { name: 'ts', type: 'number' }, { evenDistribution: {} });
    for (let i = 0; i < 1000; i += 25) {
      const puts = Array.from({ length: 25 }, (_, j) => ({ device: 'sensor-1', ts: i + j }));
      await c.client.batchWrite('hot_plain', { puts });
      await c.client.batchWrite('hot_even', { puts });
    }
    expect((await c.client.describeSlices('hot_plain')).slices).toHaveLength(1);
    const spread = (await c.client.describeSlices('hot_even')).slices;
    expect((await c.client.describeTable('hot_even')).evenDistribution).toEqual({ buckets: 64 });
    // 64 buckets hash onto about 62 distinct slices of 1024; allow chance collisions.
    expect(spread.length).toBeGreaterThan(50);
    expect(Math.max(...spread.map((s) => s.items))).toBeLessThan(60);
    expect(spread.reduce((a, s) => a + s.items, 0)).toBe(1000);
    // Point operations by the original key still work, one bucket each.
    await c.client.updateItem('hot_even', 'sensor-1.500', { add: { n: 1 } });
    expect(await c.client.getItem('hot_even', 'sensor-1.500')).toMatchObject({ device: 'sensor-1', ts: 500, n: 1, __name: 'sensor-1.500' });
    expect(await c.client.deleteItem('hot_even', { device: 'sensor-1', ts: 500 })).toBe(true);
    expect(await c.client.getAllItems({ table: 'hot_even', shardingKey: 'sensor-1', limit: 100 })).toHaveLength(999);
  });

  it('refuses what even distribution cannot do', async () => {
    await expectError(c.client.createTable('bad_even', { name: 's', type: 'string' }, undefined, { evenDistribution: { buckets: 4 } }), 'ValidationError');
    await expectError(c.client.createTable('bad_even', { name: 's', type: 'string' }, { name: 't', type: 'number' }, { evenDistribution: { buckets: 0 } }), 'ValidationError');
    await expectError(c.client.getItems({ table: 'hot_plain', shardingKey: 'sensor-1', bucket: 1 }), 'ValidationError');
    await expectError(c.client.getItems({ table: 'hot_even', shardingKey: 'sensor-1', bucket: 64 }), 'ValidationError');
    const page = await c.client.getItems({ table: 'hot_even', shardingKey: 'sensor-1', limit: 5 });
    await expectError(c.client.getItems({ table: 'hot_even', shardingKey: 'sensor-1', sortingKey: { gt: 900 }, marker: page.marker }), 'InvalidMarker');
  });
});

// Range scans and full-table scans through the real cluster, checked against a
// plain model: filter and sort the items we wrote. Seeded, so a failure replays.
import { beforeAll, describe, expect, it } from 'vitest';
import type { KeyType, KeyValue } from '../shared/key-encoding.js';
import { compare, matches, randomCondition, randomValue } from './key-model.js';
import type { Item } from '../shared/values.js';
import { expectError, plain, rng, useCluster } from './cluster-fixture.js';

const c = useCluster();
const SEED = 20261122;

describe.each<KeyType>(['string', 'number', 'binary'])('range scans on a %s sorting key', (type) => {
  const table = `range_${type}`;
  const model = new Map<string, KeyValue[]>(); // sharding key -> sorting values
  const r = rng(SEED + type.length);

  beforeAll(async () => {
    await c.client.createTable(table, { name: 'pk', type: 'string' }, { name: 'sk', type });
    const writes: Promise<unknown>[] = [];
    for (const pk of ['alpha', 'beta', 'gamma']) {
      const values: KeyValue[] = [];
      for (let i = 0; i < 60; i++) {
        const v = randomValue(type, r);
        if (values.some((x) => compare(type, x, v) === 0)) continue;
        values.push(v);
        writes.push(c.client.putItem(table, { pk, sk: v, i }));
      }
      model.set(pk, values);
    }
    await Promise.all(writes);
  });

  it('matches the model for random conditions, both directions and any page size', async () => {
    for (let round = 0; round < 60; round++) {
      const pk = ['alpha', 'beta', 'gamma'][round % 3];
      const values = model.get(pk)!;
      const sortingKey = randomCondition(type, values, r);
      const reverse = r() < 0.5;
      const limit = [1, 2, 5, 17, 1000][Math.floor(r() * 5)];
      const expected = values.filter((v) => matches(type, v, sortingKey)).sort((a, b) => compare(type, a, b));
      if (reverse) expected.reverse();
      const got = await c.client.getAllItems({ table, shardingKey: pk, ...(sortingKey ? { sortingKey } : {}), reverse, limit }, 1000);
      const context = JSON.stringify(plain({ pk, sortingKey, reverse, limit }));
      expect(got.every((i) => i.pk === pk), context).toBe(true);
      expect(plain(got.map((i) => i.sk)), context).toEqual(plain(expected));
    }
  });

  it('stops each page at the limit and gives a marker only when more follow', async () => {
    const n = model.get('alpha')!.length;
    const first = await c.client.getItems({ table, shardingKey: 'alpha', limit: n - 1 });
    expect(first.items).toHaveLength(n - 1);
    expect(typeof first.marker).toBe('string');
    const rest = await c.client.getItems({ table, shardingKey: 'alpha', limit: n - 1, marker: first.marker });
    expect(rest.items).toHaveLength(1);
    expect(rest.marker).toBeUndefined();
    const exact = await c.client.getItems({ table, shardingKey: 'alpha', limit: n });
    expect(exact.items).toHaveLength(n);
    expect(exact.marker).toBeUndefined();
  });

  it('refuses a marker from another query', async () => {
    const page = await c.client.getItems({ table, shardingKey: 'alpha', limit: 1 });
    await expectError(c.client.getItems({ table, shardingKey: 'beta', marker: page.marker }), 'InvalidMarker');
    await expectError(c.client.getItems({ table, shardingKey: 'beta', marker: 'r1.!!' }), 'InvalidMarker');
  });
});

describe('full-table scan', () => {
  const table = 'scan_all';
  const names = new Set<string>();

  beforeAll(async () => {
    await c.client.createTable(table, { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    const puts: Item[] = [];
    for (let i = 0; i < 600; i++) puts.push({ pk: `user${i % 150}`, sk: i });
    for (let i = 0; i < puts.length; i += 25) await c.client.batchWrite(table, { puts: puts.slice(i, i + 25) });
    for (const p of puts) names.add(`${p.pk}.${p.sk}`);
  });

  it.each([1, 7, 100, 599, 600, 10_000])('returns every item exactly once with limit %i', async (limit) => {
    const items = await c.client.getAllItems({ table, limit, attributes: [] }, 1000);
    const seen = items.map((i) => i.__name as string);
    expect(seen).toHaveLength(names.size);
    expect(new Set(seen)).toEqual(names);
  });

  it('keeps each sharding key sorted within the scan', async () => {
    const items = await c.client.getAllItems({ table, limit: 50 });
    const last = new Map<string, number>();
    for (const i of items) {
      expect(i.sk as number).toBeGreaterThan(last.get(i.pk as string) ?? -1);
      last.set(i.pk as string, i.sk as number);
    }
  });
});

describe('sharding keys that extend one another', () => {
  it('a query for "user" never returns the items of "user\\u0000318" (same slice, longer key)', async () => {
    await c.client.createTable('prefixes', { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    await c.client.putItem('prefixes', { pk: 'user', sk: 1 });
    await c.client.putItem('prefixes', { pk: 'user\u0000318', sk: 1 });
    const { slices } = await c.client.describeSlices('prefixes');
    expect(slices).toHaveLength(1); // both in one slice, so only the key range keeps them apart
    for (const sortingKey of [undefined, { gt: 0 }, { gte: 1 }]) {
      const items = await c.client.getAllItems({ table: 'prefixes', shardingKey: 'user', ...(sortingKey ? { sortingKey } : {}) });
      expect(items.map((i) => i.pk)).toEqual(['user']);
      const reversed = await c.client.getAllItems({ table: 'prefixes', shardingKey: 'user', reverse: true, ...(sortingKey ? { sortingKey } : {}) });
      expect(reversed.map((i) => i.pk)).toEqual(['user']);
    }
  });
});

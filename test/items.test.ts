// Item and table operations through the real cluster, the same cases over
// both transports: WebSocket/msgpack (the client) and HTTP/JSON.
import { describe, expect, it } from 'vitest';
import type { Item } from '../shared/values.js';
import { expectError, plain, useCluster, type Api } from './cluster-fixture.js';

const c = useCluster();

const transports: [string, () => Api][] = [
  ['websocket', () => c.client],
  ['http', () => c.http],
];

describe.each(transports)('items over %s', (name, api) => {
  const t = `items_${name}`;

  it('creates, describes and lists tables', async () => {
    const created = await api().request('CreateTable', { table: t, shardingKey: { name: 'user', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } });
    expect(created.table).toMatchObject({ name: t, shardingKey: { name: 'user', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } });
    expect((await api().request('DescribeTable', { table: t })).table).toEqual(created.table);
    expect((await api().request('ListTables', {})).tables).toContain(t);
    await expectError(api().request('CreateTable', { table: t, shardingKey: { name: 'user', type: 'string' } }), 'TableExists');
  });

  it('round-trips every value type', async () => {
    const item: Item = {
      user: 'ann',
      ts: 1,
      s: 'text with ünïcödé and \u0000 nul',
      empty: '',
      n: -12.5,
      big: 2 ** 60,
      tiny: 5e-300,
      yes: true,
      no: false,
      nothing: null,
      bin: new Uint8Array([0, 1, 254, 255]),
      list: [1, 'two', [3], { four: 4 }, null, new Uint8Array([9])],
      map: { a: { b: { c: 'deep' } }, n: 0, l: [] },
    };
    await api().request('PutItem', { table: t, item });
    const got = (await api().request('GetItem', { table: t, key: { user: 'ann', ts: 1 } })).item!;
    const { __name, __mtime, ...rest } = got;
    expect(plain(rest)).toEqual(plain(item));
    expect(__name).toBe('ann.1');
    expect(typeof __mtime).toBe('number');
    expect(Math.abs((__mtime as number) - Date.now())).toBeLessThan(60_000);
  });

  it('refuses a map key named "__proto__" rather than store it changed', async () => {
    const item = JSON.parse('{"user":"proto","ts":1,"m":{"__proto__":{"x":1},"k":2}}');
    // Also on the WebSocket, where msgpack decoding renames the key (decodeClientRequests finds it; test/proto-name.test.ts).
    await expectError(api().request('PutItem', { table: t, item }), 'ValidationError');
    expect((await api().request('GetItem', { table: t, key: 'proto.1' })).item).toBeNull();
  });

  it('addresses an item by object name and projects attributes', async () => {
    await api().request('PutItem', { table: t, item: { user: 'bob', ts: 2.5, a: 1, b: 2, c: 3 } });
    const byName = (await api().request('GetItem', { table: t, key: 'bob.2.5' })).item;
    expect(byName).toMatchObject({ user: 'bob', ts: 2.5, a: 1, b: 2, c: 3, __name: 'bob.2.5' });
    const some = (await api().request('GetItem', { table: t, key: 'bob.2.5', attributes: ['a', 'c', 'missing'] })).item!;
    expect(Object.keys(some).sort()).toEqual(['__mtime', '__name', 'a', 'c']);
    expect((await api().request('GetItem', { table: t, key: 'bob.3' })).item).toBeNull();
  });

  it('updates: set, remove, add, upsert, returned values', async () => {
    const key = { user: 'cat', ts: 1 };
    const created = await api().request('UpdateItem', { table: t, key, set: { x: 'a' }, add: { n: 2 }, returnValues: 'new' });
    expect(created.item).toMatchObject({ user: 'cat', ts: 1, x: 'a', n: 2, __name: 'cat.1' });
    const old = await api().request('UpdateItem', { table: t, key: 'cat.1', set: { y: [1] }, remove: ['x'], add: { n: -0.5 }, returnValues: 'old' });
    expect(old.item).toMatchObject({ x: 'a', n: 2 });
    const now = (await api().request('GetItem', { table: t, key })).item!;
    expect(now).toMatchObject({ y: [1], n: 1.5 });
    expect(now).not.toHaveProperty('x');
    expect(await api().request('UpdateItem', { table: t, key, set: { z: 1 } })).toEqual({});
  });

  it('refuses an update that cannot apply and changes nothing', async () => {
    const key = { user: 'dan', ts: 1 };
    await api().request('PutItem', { table: t, item: { ...key, s: 'text', n: 1 } });
    await expectError(api().request('UpdateItem', { table: t, key, set: { n: 5 }, add: { s: 1 } }), 'ValidationError');
    await expectError(api().request('UpdateItem', { table: t, key, set: { user: 'other' } }), 'ValidationError');
    await expectError(api().request('UpdateItem', { table: t, key, set: { n: 2 }, remove: ['n'] }), 'ValidationError');
    expect((await api().request('GetItem', { table: t, key })).item).toMatchObject({ s: 'text', n: 1 });
  });

  it('deletes items', async () => {
    await api().request('PutItem', { table: t, item: { user: 'eve', ts: 1 } });
    expect((await api().request('DeleteItem', { table: t, key: 'eve.1' })).deleted).toBe(true);
    expect((await api().request('DeleteItem', { table: t, key: 'eve.1' })).deleted).toBe(false);
    expect((await api().request('GetItem', { table: t, key: 'eve.1' })).item).toBeNull();
  });

  it('batch-writes and batch-gets in order', async () => {
    const puts = Array.from({ length: 20 }, (_, i) => ({ user: `f${i % 4}`, ts: i, v: i }));
    await api().request('BatchWrite', { table: t, puts });
    await api().request('BatchWrite', { table: t, puts: [{ user: 'f0', ts: 100 }], deletes: ['f1.1', { user: 'f2', ts: 2 }] });
    const keys = ['f0.0', 'f1.1', { user: 'f2', ts: 2 }, 'f3.3', 'f0.100', 'nobody.1'];
    const items = (await api().request('BatchGet', { table: t, keys, attributes: ['v'] })).items;
    expect(items.map((i) => i?.v ?? null)).toEqual([0, null, null, 3, null, null]);
    expect(items[4]).toMatchObject({ __name: 'f0.100' });
  });

  it('keys of several typed columns: created, described, written, read by attributes, by name and by range', async () => {
    const m = `multi_${name}`;
    const shardingKey = [
      { name: 'tenant', type: 'binary' as const },
      { name: 'region', type: 'string' as const },
    ];
    const sortingKey = [
      { name: 'day', type: 'number' as const },
      { name: 'seq', type: 'number' as const },
    ];
    const created = await api().request('CreateTable', { table: m, shardingKey, sortingKey });
    expect(created.table).toMatchObject({ shardingKey, sortingKey });
    expect((await api().request('DescribeTable', { table: m })).table).toEqual(created.table);
    const tenant = new Uint8Array([0, 255]);
    for (const [day, seq] of [[2, 1], [1, 10], [1, 9], [3, 0], [1, 100]]) {
      await api().request('PutItem', { table: m, item: { tenant, region: 'eu.west', day, seq, v: day * 1000 + seq } });
    }
    const objectName = `${Buffer.from(tenant).toString('base64')}.eu%2Ewest.1.9`;
    const byName = (await api().request('GetItem', { table: m, key: objectName })).item!;
    expect(byName).toMatchObject({ region: 'eu.west', day: 1, seq: 9, v: 1009, __name: objectName });
    expect(plain((await api().request('GetItem', { table: m, key: { tenant, region: 'eu.west', day: 1, seq: 9 } })).item)).toEqual(plain(byName));
    const day1 = await api().request('GetItems', { table: m, shardingKey: [tenant, 'eu.west'], sortingKey: { day: 1, seq: { gt: 9 } } });
    expect(day1.items.map((i) => i.v)).toEqual([1010, 1100]);
    expect(day1.examined).toBe(2);
    const all = await api().request('GetItems', { table: m, shardingKey: { tenant, region: 'eu.west' }, sortingKey: { day: { gte: 1, lt: 3 } }, reverse: true });
    expect(all.items.map((i) => i.v)).toEqual([2001, 1100, 1010, 1009]);
  });

  it('deletes a table, and a new table of the same name starts empty', async () => {
    await api().request('DeleteTable', { table: t });
    await expectError(api().request('GetItem', { table: t, key: 'ann.1' }), 'TableNotFound');
    expect((await api().request('ListTables', {})).tables).not.toContain(t);
    await api().request('CreateTable', { table: t, shardingKey: { name: 'user', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } });
    expect((await api().request('GetItem', { table: t, key: 'ann.1' })).item).toBeNull();
    expect((await api().request('GetItems', { table: t })).items).toEqual([]);
  });
});

describe('key types', () => {
  it('numbers and binary as sharding keys, simple and compound', async () => {
    await c.client.createTable('num_simple', { name: 'id', type: 'number' });
    await c.client.putItem('num_simple', { id: -1.25, v: 'x' });
    expect(await c.client.getItem('num_simple', '-1.25')).toMatchObject({ id: -1.25, __name: '-1.25' });

    await c.client.createTable('bin_compound', { name: 'k', type: 'binary' }, { name: 's', type: 'string' });
    const k = new Uint8Array([0xff, 0, 7]);
    await c.client.putItem('bin_compound', { k, s: 'a.b.c', v: 1 });
    const name = `${Buffer.from(k).toString('base64')}.a.b.c`;
    expect(plain(await c.client.getItem('bin_compound', name))).toMatchObject(plain({ k, s: 'a.b.c', v: 1, __name: name }) as object);

    await c.client.createTable('str_simple', { name: 'path', type: 'string' });
    await c.client.putItem('str_simple', { path: 'a.b' }); // a simple key may contain periods: its name is not split
    expect(await c.client.getItem('str_simple', 'a.b')).toMatchObject({ path: 'a.b', __name: 'a.b' });
  });
});

// Bad input: each gets its typed error, nothing is half-applied, and every
// process keeps serving afterwards.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import { KeysliceClient } from '../coordinator/client/client.js';
import { ERROR_CODES, KeysliceError } from '../shared/errors.js';
import { BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX, ITEM_BYTES_MAX, REQUEST_BYTES_MAX, SHARDING_KEY_BYTES_MAX, SORTING_KEY_BYTES_MAX } from '../shared/limits.js';
import { CLIENT_SUBPROTOCOL, decodeClientResponses, encodeClientFrame, type ClientResponseFrame } from '../shared/protocol.js';
import { expectError, httpPost, useCluster } from './cluster-fixture.js';

const c = useCluster();
const T = 'errs';

beforeAll(async () => {
  await c.client.createTable(T, { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
  await c.client.putItem(T, { pk: 'ok', sk: 1, v: 'still here' });
});

// After every case: all processes alive and the cluster still answers.
afterEach(async () => {
  for (const p of [c.cluster.coordinator, ...c.cluster.nodes]) expect(p.child.exitCode, `${p.name} exited`).toBeNull();
  expect(await c.client.getItem(T, 'ok.1')).toMatchObject({ v: 'still here' });
});

describe('typed errors for bad requests', () => {
  it('unknown table', async () => {
    await expectError(c.client.getItem('no_such_table', 'a.1'), 'TableNotFound');
    await expectError(c.client.putItem('no_such_table', { pk: 'a', sk: 1 }), 'TableNotFound');
  });

  it('missing or wrongly typed key attributes', async () => {
    await expectError(c.client.putItem(T, { sk: 1 }), 'InvalidKey');
    await expectError(c.client.putItem(T, { pk: 'a' }), 'InvalidKey');
    await expectError(c.client.putItem(T, { pk: 1, sk: 1 }), 'InvalidKey');
    await expectError(c.client.putItem(T, { pk: 'a', sk: '1' }), 'InvalidKey');
    await expectError(c.client.putItem(T, { pk: '', sk: 1 }), 'InvalidKey');
    await expectError(c.client.getItem(T, { pk: 'a', sk: 1, extra: 2 }), 'InvalidKey');
    await expectError(c.client.getItem(T, 'no-sorting-part'), 'InvalidKey');
    await expectError(c.client.getItem(T, 'a.not-a-number'), 'InvalidKey');
  });

  it('a period in a sharding-key value', async () => {
    const err = await expectError(c.client.putItem(T, { pk: 'a.b', sk: 1 }), 'InvalidKey');
    expect(err.message).toMatch(/period/);
  });

  it('oversized keys, items and batches, with nothing applied', async () => {
    await expectError(c.client.putItem(T, { pk: 'x'.repeat(SHARDING_KEY_BYTES_MAX + 1), sk: 1 }), 'KeyTooLarge');
    await c.client.createTable('errs_str', { name: 'pk', type: 'string' }, { name: 'sk', type: 'string' });
    await expectError(c.client.putItem('errs_str', { pk: 'a', sk: 'é'.repeat(SORTING_KEY_BYTES_MAX / 2 + 1) }), 'KeyTooLarge');
    await c.client.putItem('errs_str', { pk: 'a', sk: 'é'.repeat(SORTING_KEY_BYTES_MAX / 2) }); // exactly at the limit

    await expectError(c.client.putItem(T, { pk: 'big', sk: 1, blob: new Uint8Array(ITEM_BYTES_MAX + 1) }), 'ItemTooLarge');
    expect(await c.client.getItem(T, 'big.1')).toBeNull();
    await c.client.putItem(T, { pk: 'big', sk: 2, blob: new Uint8Array(ITEM_BYTES_MAX - 1000) });
    await expectError(c.client.updateItem(T, 'big.2', { set: { more: 'x'.repeat(2000) } }), 'ItemTooLarge');
    expect(await c.client.getItem(T, 'big.2', ['more'])).not.toHaveProperty('more');

    const puts = Array.from({ length: BATCH_WRITE_ITEMS_MAX + 1 }, (_, i) => ({ pk: 'batch', sk: i }));
    await expectError(c.client.batchWrite(T, { puts }), 'BatchTooLarge');
    await expectError(c.client.batchGet(T, Array.from({ length: BATCH_GET_ITEMS_MAX + 1 }, (_, i) => `k.${i}`)), 'BatchTooLarge');
    // One bad write in a batch: none of the batch is applied.
    await expectError(c.client.batchWrite(T, { puts: [{ pk: 'batch', sk: 1 }, { pk: 'bad.key', sk: 2 }] }), 'InvalidKey');
    await expectError(c.client.batchWrite(T, { puts: [{ pk: 'batch', sk: 1 }], deletes: ['batch.1'] }), 'ValidationError');
    expect(await c.client.getAllItems({ table: T, shardingKey: 'batch' })).toEqual([]);
  });

  it('bad values and unknown fields', async () => {
    await expectError(c.client.putItem(T, { pk: 'a', sk: 1, __name: 'mine' }), 'ValidationError');
    await expectError(c.client.putItem(T, { pk: 'a', sk: 1, n: Number.NaN }), 'ValidationError');
    await expectError(c.client.putItem(T, { pk: 'a', sk: Infinity }), 'ValidationError');
    await expectError(c.client.getItem(T, { pk: 'a', sk: Infinity }), 'InvalidKey');
    // `as never`: deliberately outside the typed request, to check that the server refuses it.
    await expectError(c.client.request('GetItems', { table: T, shardingKey: 'a', limt: 5 } as never), 'ValidationError');
    await expectError(c.client.getItems({ table: T, shardingKey: 'a', limit: 0 }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, shardingKey: 'a', sortingKey: { between: [5, 1] } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, shardingKey: 'a', sortingKey: { beginsWith: 'x' } }), 'ValidationError');
    await expectError(c.client.getItems({ table: T, marker: 'not-a-marker' }), 'InvalidMarker');
    await expectError(c.client.createTable('x', { name: 'pk', type: 'string' }), 'ValidationError');
    // `as never`: deliberately outside the typed request, to check that the server refuses it.
    await expectError(c.client.request('CreateTable', { table: 'good_name', shardingKey: { name: 'pk', type: 'date' as never } }), 'ValidationError');
    const deep: unknown[] = [];
    let cur = deep;
    for (let i = 0; i < 40; i++) cur.push((cur = []));
    // `as never`: deliberately outside the typed request, to check that the server refuses it.
    await expectError(c.client.putItem(T, { pk: 'a', sk: 1, deep: deep as never }), 'ValidationError');
  });
});

describe('a strict key schema', () => {
  const key = { name: 'pk', type: 'string' };
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['a field of the sharding key', { shardingKey: { ...key, hashPrefix: 4 } }, 'hashPrefix', 'name, type'],
    ['a field of the sorting key', { shardingKey: key, sortingKey: { name: 'ts', type: 'number', order: 'desc' } }, 'order', 'name, type'],
    ['a field of one column in a list', { shardingKey: [key, { name: 'n', typ: 'number' }] }, 'typ', 'name, type'],
    ['a field of evenDistribution', { shardingKey: key, sortingKey: { name: 'ts', type: 'number' }, evenDistribution: { bucket: 4 } }, 'bucket', 'buckets'],
    ['a top-level field', { shardingKey: key, hashPrefix: 4 }, 'hashPrefix', 'table, shardingKey, sortingKey, evenDistribution'],
  ];

  it.each(cases)('refuses an unknown %s, naming it and what is accepted, and creates nothing', async (_what, fields, field, accepted) => {
    // `as never`: deliberately outside the typed request, to check that the server refuses it.
    for (const send of [(p: never) => c.client.request('CreateTable', p), (p: never) => httpPost(c.cluster.url, 'CreateTable', JSON.stringify(p))]) {
      const err = await expectError(send({ table: 'strict_schema', ...fields } as never), 'ValidationError');
      expect(err.message).toContain(`"${field}"`);
      expect(err.message).toContain(accepted);
      await expectError(c.client.describeTable('strict_schema'), 'TableNotFound');
    }
  });

  it('refuses key columns that repeat, are too many, or are no columns', async () => {
    const col = (name: string) => ({ name, type: 'number' as const });
    await expectError(c.client.createTable('strict_schema', [col('a'), col('b')], [col('c'), col('a')]), 'ValidationError');
    await expectError(c.client.createTable('strict_schema', [col('a'), col('b'), col('c'), col('d'), col('e')]), 'ValidationError');
    await expectError(c.client.createTable('strict_schema', []), 'ValidationError');
    // `as never`: deliberately outside the typed request, to check that the server refuses it.
    await expectError(c.client.createTable('strict_schema', 'pk' as never), 'ValidationError');
    await expectError(c.client.describeTable('strict_schema'), 'TableNotFound');
  });
});

describe('malformed frames on the WebSocket', () => {
  it('answers garbage, wrong shapes and unknown operations with errors, and keeps the connection', async () => {
    const raw = await KeysliceClient.connect(c.cluster.url);
    const frameErrors: KeysliceError[] = [];
    raw.onFrameError = (e) => frameErrors.push(e);
    try {
      raw.sendRaw(new Uint8Array([0xc1, 0xff, 0x00])); // 0xc1 is never valid msgpack
      raw.sendRaw(new Packr({ useRecords: false }).pack({ not: 'an array' }));
      raw.sendRaw(new Packr({ useRecords: false }).pack(['x', 'GetItem', {}]));
      // `as never`: an operation and a payload that no typed request has, to check the refusals.
      await expectError(raw.request('Frobnicate' as never, {} as never), 'UnknownOperation');
      raw.sendRaw(encodeClientFrame([77, 'GetItem', 'payload' as never]));
      expect(await raw.getItem(T, 'ok.1')).toMatchObject({ v: 'still here' });
      expect(frameErrors.map((e) => e.code)).toEqual(['MalformedRequest', 'MalformedRequest', 'MalformedRequest', 'MalformedRequest']);
    } finally {
      await raw.close();
    }
  });

  it('answers each request of a list frame, the bad ones with their own errors', async () => {
    const { default: WebSocket } = await import('ws');
    const ws = new WebSocket(c.cluster.wsUrl, CLIENT_SUBPROTOCOL);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const answers: ClientResponseFrame[] = [];
    ws.on('message', (data: Buffer) => answers.push(...decodeClientResponses(data)));
    ws.send(
      new Packr({ useRecords: false }).pack([
        [1, 'GetItem', { table: T, key: 'ok.1' }],
        [2, 'Frobnicate', {}],
        ['three', 'GetItem', {}],
        [4, 'GetItem', { table: 'no_such_table', key: 'a.1' }],
      ]),
    );
    for (let i = 0; i < 100 && answers.length < 4; i++) await new Promise((r) => setTimeout(r, 20));
    ws.close();
    const byId = new Map(answers.map((a) => [a[0], a]));
    expect(byId.get(1)?.[1]).toBe(0);
    expect((byId.get(1)?.[2] as { item: { v: string } }).item.v).toBe('still here');
    expect(byId.get(2)?.slice(1, 3)).toEqual([1, 'UnknownOperation']);
    expect(byId.get(-1)?.slice(1, 3)).toEqual([1, 'MalformedRequest']);
    expect(byId.get(4)?.slice(1, 3)).toEqual([1, 'TableNotFound']);
  });

  it('refuses a connection without the protocol version', async () => {
    const ws = new (await import('ws')).default(c.cluster.wsUrl);
    const code = await new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    expect(code).toBe(1002);
  });
});

describe('malformed HTTP requests', () => {
  async function status(path: string, body: string): Promise<[number, string]> {
    try {
      await httpPost(c.cluster.url, path, body);
      return [200, ''];
    } catch (err) {
      return [(err as { httpStatus: number }).httpStatus, (err as KeysliceError).code];
    }
  }

  it('maps each error to its status', async () => {
    expect(await status('GetItem', '{not json')).toEqual([400, 'MalformedRequest']);
    expect(await status('GetItem', '[1,2]')).toEqual([400, 'MalformedRequest']);
    expect(await status('Frobnicate', '{}')).toEqual([400, 'UnknownOperation']);
    expect(await status('GetItem', JSON.stringify({ table: 'nope', key: 'a.1' }))).toEqual([ERROR_CODES.TableNotFound.status, 'TableNotFound']);
    expect(await status('PutItem', JSON.stringify({ table: T, item: { pk: 'a', sk: 1, b: { $binary: 'AAEC' } } }))).toEqual([200, '']);
    expect((await c.client.getItem(T, 'a.1'))?.b).toEqual(Buffer.from([0, 1, 2]));
  });

  it('refuses a body over the request limit', async () => {
    const body = JSON.stringify({ table: T, item: { pk: 'huge', sk: 1, s: 'x'.repeat(REQUEST_BYTES_MAX) } });
    expect(await status('PutItem', body)).toEqual([413, 'RequestTooLarge']);
    expect(await c.client.getItem(T, 'huge.1')).toBeNull();
  });
});

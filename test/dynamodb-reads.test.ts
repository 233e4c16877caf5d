// Query, Scan and the batch operations through the AWS SDK against a local
// cluster: key conditions and their order (numbers sort numerically, negative
// and fractional ones too), filters, projections, Select, and paging by
// LastEvaluatedKey through every kind of native page: one partition key, an
// even-distribution table (all buckets merged), a full scan and its segments.
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  CreateTableCommand,
  paginateQuery,
  paginateScan,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type QueryCommandInput,
  type ScanCommandInput,
} from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, BatchWriteCommand, QueryCommand as DocQueryCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX } from '../shared/limits.js';
import { rng, useCluster } from './cluster-fixture.js';
import { documentClient, dynamoClient, expectSdkError, rawRequest } from './dynamodb-fixture.js';
import { parseExposition, total } from './prometheus-text.js';

const c = useCluster();
let db: DynamoDBClient;
let doc: DynamoDBDocumentClient;

const NUM = 'ddb_num'; // pk S, sk N
const STR = 'ddb_str'; // pk S, sk S
const EVEN = 'ddb_even'; // pk S, sk N, even distribution over 8 buckets
const SIMPLE = 'ddb_simple'; // id N only

const SORT_KEYS = [-1e10, -100, -10, -1.5, -0.25, 0, 0.001, 0.25, 1, 1.5, 2, 10, 99.99, 100, 12345678, 1e15];

async function createTable(name: string, hash: [string, 'S' | 'N' | 'B'], range?: [string, 'S' | 'N' | 'B'], tags?: { Key: string; Value: string }[]) {
  const keys = range === undefined ? [hash] : [hash, range];
  await db.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: keys.map(([n, t]) => ({ AttributeName: n, AttributeType: t })),
      KeySchema: keys.map(([n], i) => ({ AttributeName: n, KeyType: i === 0 ? 'HASH' : 'RANGE' })),
      BillingMode: 'PAY_PER_REQUEST',
      Tags: tags,
    }),
  );
}

async function writeAll(table: string, items: Record<string, AttributeValue>[]) {
  for (let i = 0; i < items.length; i += BATCH_WRITE_ITEMS_MAX) {
    const r = await db.send(new BatchWriteItemCommand({ RequestItems: { [table]: items.slice(i, i + BATCH_WRITE_ITEMS_MAX).map((Item) => ({ PutRequest: { Item } })) } }));
    expect(r.UnprocessedItems).toEqual({});
  }
}

/** Every page of a Query or Scan, following LastEvaluatedKey by hand (bounded). */
async function allPages(send: (start: Record<string, AttributeValue> | undefined) => Promise<{ Items?: Record<string, AttributeValue>[]; LastEvaluatedKey?: Record<string, AttributeValue>; Count?: number; ScannedCount?: number }>) {
  const pages = [];
  let start: Record<string, AttributeValue> | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await send(start);
    pages.push(page);
    start = page.LastEvaluatedKey;
    if (start === undefined) return pages;
  }
  throw new Error('more than 1000 pages');
}

const query = (input: Omit<QueryCommandInput, 'TableName'> & { TableName?: string }) => db.send(new QueryCommand({ TableName: NUM, ...input }));
const sks = (items: Record<string, AttributeValue>[] | undefined) => (items ?? []).map((i) => Number(i.sk.N ?? i.sk.S));

beforeAll(async () => {
  db = dynamoClient(c.cluster.url);
  doc = documentClient(db);
  await createTable(NUM, ['pk', 'S'], ['sk', 'N']);
  await createTable(STR, ['pk', 'S'], ['sk', 'S']);
  await createTable(EVEN, ['pk', 'S'], ['sk', 'N'], [{ Key: 'keyslice:evenDistributionBuckets', Value: '8' }]);
  await createTable(SIMPLE, ['id', 'N']);
  const random = rng(7);
  const shuffled = [...SORT_KEYS].sort(() => random() - 0.5);
  await writeAll(
    NUM,
    shuffled.map((sk) => ({ pk: { S: 'p' }, sk: { N: String(sk) }, odd: { BOOL: Math.abs(sk) % 2 === 1 }, label: { S: `n${sk}` } })),
  );
  await writeAll(NUM, [{ pk: { S: 'other' }, sk: { N: '1' } }]);
  await writeAll(
    STR,
    ['a', 'ab', 'abc', 'b', 'ba', 'c', 'é', '~'].map((sk) => ({ pk: { S: 's' }, sk: { S: sk } })),
  );
  await writeAll(
    EVEN,
    Array.from({ length: 60 }, (_, i) => ({ pk: { S: 'hot' }, sk: { N: String(i) }, v: { N: String(i * 2) } })),
  );
  await writeAll(
    SIMPLE,
    Array.from({ length: 120 }, (_, i) => ({ id: { N: String(i) }, even: { BOOL: i % 2 === 0 } })),
  );
});

afterEach(() => {
  for (const p of [c.cluster.coordinator, ...c.cluster.nodes]) expect(p.child.exitCode, `${p.name} exited`).toBeNull();
});

describe('Query', () => {
  const p = { ':p': { S: 'p' } };

  it('numbers sort numerically as keys, forward and backward', async () => {
    const sorted = [...SORT_KEYS].sort((a, b) => a - b);
    const fwd = await query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p });
    expect(sks(fwd.Items)).toEqual(sorted);
    expect(fwd).toMatchObject({ Count: SORT_KEYS.length, ScannedCount: SORT_KEYS.length });
    expect(fwd.LastEvaluatedKey).toBeUndefined();
    const back = await query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ScanIndexForward: false });
    expect(sks(back.Items)).toEqual([...sorted].reverse());
  });

  it('sort-key conditions: = < <= > >= BETWEEN begins_with', async () => {
    const q = async (cond: string, values: Record<string, AttributeValue>) =>
      sks((await query({ KeyConditionExpression: `pk = :p AND ${cond}`, ExpressionAttributeValues: { ...p, ...values } })).Items);
    expect(await q('sk = :v', { ':v': { N: '1.50' } })).toEqual([1.5]);
    expect(await q('sk < :v', { ':v': { N: '-1.5' } })).toEqual([-1e10, -100, -10]);
    expect(await q('sk <= :v', { ':v': { N: '-1.5' } })).toEqual([-1e10, -100, -10, -1.5]);
    expect(await q('sk > :v', { ':v': { N: '100' } })).toEqual([12345678, 1e15]);
    expect(await q('sk >= :v', { ':v': { N: '100' } })).toEqual([100, 12345678, 1e15]);
    expect(await q('sk BETWEEN :a AND :b', { ':a': { N: '-0.25' }, ':b': { N: '1' } })).toEqual([-0.25, 0, 0.001, 0.25, 1]);
    const str = await db.send(
      new QueryCommand({ TableName: STR, KeyConditionExpression: 'begins_with(sk, :x) AND pk = :s', ExpressionAttributeValues: { ':x': { S: 'ab' }, ':s': { S: 's' } } }),
    );
    expect(str.Items!.map((i) => i.sk.S)).toEqual(['ab', 'abc']);
    const all = await db.send(new QueryCommand({ TableName: STR, KeyConditionExpression: 'pk = :s', ExpressionAttributeValues: { ':s': { S: 's' } } }));
    expect(all.Items!.map((i) => i.sk.S)).toEqual(['a', 'ab', 'abc', 'b', 'ba', 'c', 'é', '~'].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
  });

  it('Limit pages by LastEvaluatedKey; the SDK paginator and a hand-made start key continue it', async () => {
    const sorted = [...SORT_KEYS].sort((a, b) => a - b);
    const pages = await allPages((start) => query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, Limit: 3, ExclusiveStartKey: start }));
    expect(pages.length).toBe(Math.ceil(SORT_KEYS.length / 3) + (SORT_KEYS.length % 3 === 0 ? 1 : 0));
    expect(pages.flatMap((pg) => sks(pg.Items))).toEqual(sorted);
    expect(pages[0].LastEvaluatedKey).toEqual({ pk: { S: 'p' }, sk: { N: String(sorted[2]) } });

    const viaPaginator: number[] = [];
    for await (const page of paginateQuery({ client: db, pageSize: 4 }, { TableName: NUM, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ScanIndexForward: false })) {
      viaPaginator.push(...sks(page.Items));
    }
    expect(viaPaginator).toEqual([...sorted].reverse());

    // DynamoDB lets a client start after any key, e.g. one taken from an item it holds.
    const after = await query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ExclusiveStartKey: { pk: { S: 'p' }, sk: { N: '10' } } });
    expect(sks(after.Items)).toEqual(sorted.filter((x) => x > 10));
    await expectSdkError(
      query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ExclusiveStartKey: { pk: { S: 'p' } } }),
      'ValidationException',
      'The provided starting key is invalid: The provided key element does not match the schema',
    );
  });

  it('FilterExpression, ProjectionExpression and Select: Count and ScannedCount count what was examined', async () => {
    const r = await query({
      KeyConditionExpression: 'pk = :p',
      FilterExpression: '#o = :t',
      ProjectionExpression: 'sk, #l',
      ExpressionAttributeNames: { '#o': 'odd', '#l': 'label' },
      ExpressionAttributeValues: { ...p, ':t': { BOOL: true } },
    });
    expect(r.Items).toEqual([{ sk: { N: '1' }, label: { S: 'n1' } }]); // the only odd whole number of SORT_KEYS
    expect(r.ScannedCount).toBe(SORT_KEYS.length);
    expect(r.Count).toBe(r.Items!.length);
    const count = await query({ KeyConditionExpression: 'pk = :p', FilterExpression: 'odd = :f', ExpressionAttributeValues: { ...p, ':f': { BOOL: false } }, Select: 'COUNT' });
    expect(count.Items).toBeUndefined();
    expect(count).toMatchObject({ Count: SORT_KEYS.length - 1, ScannedCount: SORT_KEYS.length });
  });

  it('filtered pages: Limit counts examined items, a page may be empty yet continue', async () => {
    const pages = await allPages((start) =>
      query({ KeyConditionExpression: 'pk = :p', FilterExpression: 'label = :l', ExpressionAttributeValues: { ...p, ':l': { S: 'n100' } }, Limit: 2, ExclusiveStartKey: start }),
    );
    expect(pages.some((pg) => pg.Count === 0 && pg.LastEvaluatedKey !== undefined)).toBe(true);
    expect(pages.flatMap((pg) => sks(pg.Items))).toEqual([100]);
    expect(pages.reduce((n, pg) => n + pg.ScannedCount!, 0)).toBe(SORT_KEYS.length);
  });

  it('legacy KeyConditions, QueryFilter and AttributesToGet', async () => {
    const r = await db.send(
      new QueryCommand({
        TableName: NUM,
        KeyConditions: { pk: { ComparisonOperator: 'EQ', AttributeValueList: [{ S: 'p' }] }, sk: { ComparisonOperator: 'BETWEEN', AttributeValueList: [{ N: '0' }, { N: '10' }] } },
        QueryFilter: { label: { ComparisonOperator: 'IN', AttributeValueList: [{ S: 'n1' }, { S: 'n2' }, { S: 'n3' }] } },
        AttributesToGet: ['sk'],
      }),
    );
    expect(r.Items).toEqual([{ sk: { N: '1' } }, { sk: { N: '2' } }]);
    expect(r.ScannedCount).toBe(SORT_KEYS.filter((x) => x >= 0 && x <= 10).length);
  });

  it('ConsumedCapacity rounds the total size of the examined items', async () => {
    const r = await query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ReturnConsumedCapacity: 'TOTAL', ConsistentRead: true });
    expect(r.ConsumedCapacity).toEqual({ TableName: NUM, CapacityUnits: 1, ReadCapacityUnits: 1 });
    const eventual = await query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, ReturnConsumedCapacity: 'TOTAL' });
    expect(eventual.ConsumedCapacity!.CapacityUnits).toBe(0.5);
  });

  it('bad queries get DynamoDB\'s errors', async () => {
    await expectSdkError(query({}), 'ValidationException', 'Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.');
    await expectSdkError(query({ KeyConditionExpression: 'sk = :v', ExpressionAttributeValues: { ':v': { N: '1' } } }), 'ValidationException', 'Query condition missed key schema element: pk');
    await expectSdkError(query({ KeyConditionExpression: 'pk = :p OR sk = :v', ExpressionAttributeValues: { ...p, ':v': { N: '1' } } }), 'ValidationException', 'Query key condition not supported');
    await expectSdkError(
      query({ KeyConditionExpression: 'pk = :p AND sk = :v', ExpressionAttributeValues: { ...p, ':v': { S: '1' } } }),
      'ValidationException',
      'One or more parameter values were invalid: Condition parameter type does not match schema type',
    );
    await expectSdkError(
      query({ KeyConditionExpression: 'pk = :p', FilterExpression: 'sk > :v', ExpressionAttributeValues: { ...p, ':v': { N: '1' } } }),
      'ValidationException',
      'Filter Expression can only contain non-primary key attributes: Primary key attribute: sk',
    );
    await expectSdkError(query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, IndexName: 'byLabel' }), 'ValidationException', /^The table does not have the specified index: byLabel/);
    await expectSdkError(
      query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, Select: 'COUNT', ProjectionExpression: 'sk' }),
      'ValidationException',
      'Cannot specify the ProjectionExpression when choosing to get only the Count',
    );
    await expectSdkError(query({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p, Limit: 0 }), 'ValidationException', /Value '0' at 'limit' failed to satisfy constraint/);
    await expectSdkError(query({ TableName: 'ddb_none', KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: p }), 'ResourceNotFoundException');
  });

  it('DocumentClient Query', async () => {
    const r = await doc.send(new DocQueryCommand({ TableName: NUM, KeyConditionExpression: 'pk = :p AND sk BETWEEN :a AND :b', ExpressionAttributeValues: { ':p': 'p', ':a': 1, ':b': 2 } }));
    expect(r.Items).toEqual([
      { pk: 'p', sk: 1, odd: true, label: 'n1' },
      { pk: 'p', sk: 1.5, odd: false, label: 'n1.5' },
      { pk: 'p', sk: 2, odd: false, label: 'n2' },
    ]);
  });
});

describe('pages written from the nodes\' msgpack (coordinator/dynamodb/item-json.ts)', () => {
  // A page that goes out whole (no filter, projection, COUNT or ConsumedCapacity) is written from the workers'
  // msgpack; asking for ConsumedCapacity takes the page as objects, converted as before: both answer the same items,
  // and /metrics (keyslice_dynamodb_pages_total) says which path answered each page.
  const TYPED = 'ddb_typed';
  const typedItem = (i: number): Record<string, AttributeValue> => ({
    pk: { S: 'mixed' },
    sk: { N: String(i) },
    // No lone surrogate: keyslice refuses one (UTF-8 has no encoding for it; the next test).
    s: { S: ['plain', 'quote " and \\ backslash', 'line\nbreak\ttab\u0001', 'é ü € 𝄞 日本', ''][i % 5] },
    // Canonical texts (as DynamoDB answers them), so that the items read back are the items written.
    n: { N: ['0', '-17', '4294967296', '0.1', '12345678901234567890123456789012345678', `0.${'0'.repeat(129)}1`, '-2147483648'][i % 7] },
    b: { B: Uint8Array.of(i, 0, 255) },
    t: { BOOL: i % 2 === 0 },
    z: { NULL: true },
    m: { M: { inner: { S: `v${i}` }, deep: { L: [{ N: String(i) }, { SS: ['x', 'y"'] }, { M: { é: { BOOL: false } } }] } } },
    l: { L: [{ S: 'a' }, { N: '1.5' }, { NULL: true }, { B: Uint8Array.of(104, 105) }] },
    ss: { SS: ['b', 'a', 'ü'] },
    ns: { NS: ['3', '-1.25', '99999999999999999999'] },
    bs: { BS: [Uint8Array.of(1), Uint8Array.of(2, 3)] },
    'name with "quotes"': { S: 'k' },
    ünïcode: { N: String(i * 7) },
  });

  /** keyslice_dynamodb_pages_total by its `written` label, summed over the processes (docs/metrics.md). */
  async function pagesWritten(): Promise<{ msgpack: number; objects: number; none: number }> {
    const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
    expect(res.status).toBe(200);
    const m = parseExposition(await res.text());
    expect(total(m, 'keyslice_process_metrics_complete'), 'every process reported its series').toBe(1);
    const written = (w: string) => total(m, 'keyslice_dynamodb_pages_total', { written: w });
    return { msgpack: written('msgpack'), objects: written('objects'), none: written('none') };
  }

  /** The pages `read` answered, and what /metrics counted them as (written from msgpack, from objects, or none). */
  async function counted<T>(read: () => Promise<T[]>): Promise<{ pages: T[]; msgpack: number; objects: number; none: number }> {
    const before = await pagesWritten();
    const pages = await read();
    const after = await pagesWritten();
    return { pages, msgpack: after.msgpack - before.msgpack, objects: after.objects - before.objects, none: after.none - before.none };
  }

  it('Query and Scan pages, whole and paged, answer the same items as the objects path, each page counted by its path in /metrics', async () => {
    await createTable(TYPED, ['pk', 'S'], ['sk', 'N']);
    const items = Array.from({ length: 42 }, (_, i) => typedItem(i));
    await writeAll(TYPED, items);
    const key = { KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'mixed' } } };
    const q = await counted(() => allPages((start) => db.send(new QueryCommand({ TableName: TYPED, ...key, Limit: 10, ExclusiveStartKey: start }))));
    const qObjects = await counted(() => allPages((start) => db.send(new QueryCommand({ TableName: TYPED, ...key, Limit: 10, ExclusiveStartKey: start, ReturnConsumedCapacity: 'TOTAL' }))));
    // Which path answered shows only in /metrics: the items are the same either way (the point of what follows).
    expect([q.msgpack, q.objects], 'Query pages with nothing to do per item: written from msgpack').toEqual([q.pages.length, 0]);
    expect([qObjects.msgpack, qObjects.objects], 'Query pages with ReturnConsumedCapacity: as objects').toEqual([0, qObjects.pages.length]);
    const [passed, objects] = [q.pages, qObjects.pages];
    expect(passed.length).toBeGreaterThan(1);
    expect(passed.map((p) => p.LastEvaluatedKey)).toEqual(objects.map((p) => p.LastEvaluatedKey));
    expect(passed.map((p) => [p.Count, p.ScannedCount])).toEqual(objects.map((p) => [p.Count, p.ScannedCount]));
    expect(passed.flatMap((p) => p.Items)).toEqual(objects.flatMap((p) => p.Items));
    expect(passed.flatMap((p) => p.Items)).toEqual(items); // and what was written, in order
    const scan = await counted(() => allPages((start) => db.send(new ScanCommand({ TableName: TYPED, Limit: 15, ExclusiveStartKey: start }))));
    const scanCapacity = await counted(() => allPages((start) => db.send(new ScanCommand({ TableName: TYPED, Limit: 15, ExclusiveStartKey: start, ReturnConsumedCapacity: 'TOTAL' }))));
    expect([scan.msgpack, scan.objects], 'Scan pages with nothing to do per item: written from msgpack').toEqual([scan.pages.length, 0]);
    expect([scanCapacity.msgpack, scanCapacity.objects], 'Scan pages with ReturnConsumedCapacity: as objects').toEqual([0, scanCapacity.pages.length]);
    const [scanPassed, scanObjects] = [scan.pages, scanCapacity.pages];
    expect(scanPassed.flatMap((p) => p.Items)).toEqual(scanObjects.flatMap((p) => p.Items));
    expect(scanPassed.flatMap((p) => p.Items)).toHaveLength(items.length);
    expect([q.none, qObjects.none, scan.none, scanCapacity.none], 'no page of these went without a read').toEqual([0, 0, 0, 0]);
  });

  it('an empty page answered without reading the nodes counts as none: neither msgpack nor objects, whatever the request asks', async () => {
    const T = 'ddb_pages_none';
    await createTable(T, ['id', 'N']);
    await db.send(new PutItemCommand({ TableName: T, Item: { id: { N: '1' } } }));
    // A Query continued past a hash-key-only table's one item; a segment of a parallel Scan that holds no slice
    // (TotalSegments past the native scan's segments and the cluster's slices). Asked plain, and with
    // ReturnConsumedCapacity, which takes a page read from the nodes as objects.
    const query = { TableName: T, KeyConditionExpression: 'id = :i', ExpressionAttributeValues: { ':i': { N: '1' } }, ExclusiveStartKey: { id: { N: '1' } } };
    const segment = { TableName: T, Segment: 0, TotalSegments: 1_000_000 };
    const empty = await counted(async () => [
      await db.send(new QueryCommand(query)),
      await db.send(new QueryCommand({ ...query, ReturnConsumedCapacity: 'TOTAL' })),
      await db.send(new ScanCommand(segment)),
      await db.send(new ScanCommand({ ...segment, ReturnConsumedCapacity: 'TOTAL' })),
    ]);
    expect(empty.pages.map((p) => [p.Items, p.Count, p.ScannedCount, p.LastEvaluatedKey])).toEqual(Array(4).fill([[], 0, 0, undefined]));
    expect([empty.msgpack, empty.objects, empty.none]).toEqual([0, 0, 4]);
    // The item is there: a page that reads the nodes finds it, counted by its path.
    const read = await counted(async () => [await db.send(new QueryCommand({ ...query, ExclusiveStartKey: undefined }))]);
    expect(read.pages[0].Items).toEqual([{ id: { N: '1' } }]);
    expect([read.msgpack, read.objects, read.none]).toEqual([1, 0, 0]);
  });
});

describe('strings that UTF-8 cannot hold', () => {
  it('a lone UTF-16 surrogate anywhere it would be stored is refused (ValidationException), not changed to U+FFFD', async () => {
    const T = 'ddb_surrogate';
    await createTable(T, ['pk', 'S'], ['sk', 'N']);
    const key = { pk: { S: 'p' }, sk: { N: '1' } };
    const refused: [string, () => Promise<unknown>][] = [
      ['a string value', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, s: { S: 'a\ud800' } } }))],
      ['a long string value', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, s: { S: `${'x'.repeat(100)}\udc00` } } }))],
      ['an attribute name', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, 'n\ud83d': { S: 'v' } } }))],
      ['a map key', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, m: { M: { '\udfff': { N: '1' } } } } }))],
      ['a string set element', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, ss: { SS: ['a', '\ud800'] } } }))],
      // Keys were refused before (shared/key-encoding.ts, InvalidKey); an update's key is stored in the item it makes.
      ['a key', () => db.send(new PutItemCommand({ TableName: T, Item: { pk: { S: '\ud800' }, sk: { N: '1' } } }))],
      ['an update\'s key', () => db.send(new UpdateItemCommand({ TableName: T, Key: { pk: { S: 'q\udc00' }, sk: { N: '1' } }, UpdateExpression: 'SET a = :v', ExpressionAttributeValues: { ':v': { S: 'v' } } }))],
      ['an update\'s value', () => db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET a = :v', ExpressionAttributeValues: { ':v': { S: '\ud800' } } }))],
      ['an update\'s name', () => db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET #n = :v', ExpressionAttributeNames: { '#n': '\ud800' }, ExpressionAttributeValues: { ':v': { S: 'v' } } }))],
      ['a batch write', () => db.send(new BatchWriteItemCommand({ RequestItems: { [T]: [{ PutRequest: { Item: { ...key, s: { S: '\ud800' } } } }] } }))],
    ];
    for (const [what, p] of refused) await expectSdkError(p(), 'ValidationException', /lone (UTF-16 )?surrogate/).catch((err) => Promise.reject(new Error(`${what}: ${err}`)));
    // Nothing was stored; a pair (one character past U+FFFF) is a character, stored and read back as written.
    expect((await db.send(new ScanCommand({ TableName: T }))).Items).toEqual([]);
    const item = { ...key, s: { S: 'a\ud834\udd1e' }, 'n\ud834\udd1e': { SS: ['\ud83d\ude00'] } };
    await db.send(new PutItemCommand({ TableName: T, Item: item }));
    expect((await db.send(new QueryCommand({ TableName: T, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'p' } } }))).Items).toEqual([item]);
  });
});

describe('even distribution (tag keyslice:evenDistributionBuckets)', () => {
  it('one hot partition key is spread over slices, and a Query still reads it as one sorted stream, with paging', async () => {
    const slices = await rawRequest(c.cluster.url, 'Keyslice.DescribeSlices', JSON.stringify({ TableName: EVEN }));
    expect(slices.status).toBe(200);
    expect((slices.body.slices as unknown[]).length).toBeGreaterThan(3);
    const plain = await rawRequest(c.cluster.url, 'Keyslice.DescribeSlices', JSON.stringify({ TableName: NUM }));
    expect((plain.body.slices as unknown[]).length).toBeLessThanOrEqual(2);

    const q = (input: Omit<QueryCommandInput, 'TableName'>) => db.send(new QueryCommand({ TableName: EVEN, ...input }));
    const all = Array.from({ length: 60 }, (_, i) => i);
    for (const forward of [true, false]) {
      const pages = await allPages((start) => q({ KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'hot' } }, Limit: 7, ScanIndexForward: forward, ExclusiveStartKey: start }));
      expect(pages.flatMap((pg) => sks(pg.Items))).toEqual(forward ? all : [...all].reverse());
    }
    const range = await q({ KeyConditionExpression: 'pk = :p AND sk BETWEEN :a AND :b', ExpressionAttributeValues: { ':p': { S: 'hot' }, ':a': { N: '10' }, ':b': { N: '14' } } });
    expect(sks(range.Items)).toEqual([10, 11, 12, 13, 14]);
  });

  it('the tag is checked', async () => {
    await expectSdkError(createTable('ddb_even_bad', ['pk', 'N'], ['sk', 'N'], [{ Key: 'keyslice:evenDistributionBuckets', Value: '8' }]), 'ValidationException', /needs a string \(S\) partition key and a sort key/);
    await expectSdkError(createTable('ddb_even_bad', ['pk', 'S'], ['sk', 'N'], [{ Key: 'keyslice:evenDistributionBuckets', Value: 'many' }]), 'ValidationException', /takes a whole number of buckets/);
  });
});

describe('native even-distribution tables keyed by a number or binary (stored as a tuple with the bucket)', () => {
  const NATIVE_N = 'ddb_native_even_n';
  const NATIVE_B = 'ddb_native_even_b';
  const bin = (i: number) => Uint8Array.of(7, i);

  beforeAll(async () => {
    for (const [table, type] of [[NATIVE_N, 'number'], [NATIVE_B, 'binary']] as const) {
      await c.http.request('CreateTable', { table, shardingKey: { name: 'n', type }, sortingKey: { name: 's', type: 'number' }, evenDistribution: { buckets: 4 } });
    }
    const puts = (key: (i: number) => number | Uint8Array) => Array.from({ length: 3 }, (_, i) => Array.from({ length: 15 }, (_, s) => ({ n: key(i), s, v: i * 100 + s }))).flat();
    for (const [table, items] of [[NATIVE_N, puts((i) => i + 1)], [NATIVE_B, puts(bin)]] as const) {
      for (let i = 0; i < items.length; i += BATCH_WRITE_ITEMS_MAX) await c.http.request('BatchWrite', { table, puts: items.slice(i, i + BATCH_WRITE_ITEMS_MAX) });
    }
  });

  it('Scan pages through every item once, following LastEvaluatedKey', async () => {
    for (const table of [NATIVE_N, NATIVE_B]) {
      const pages = await allPages((start) => db.send(new ScanCommand({ TableName: table, Limit: 4, ExclusiveStartKey: start })));
      expect(pages.length).toBeGreaterThan(5);
      const seen = pages.flatMap((pg) => (pg.Items ?? []).map((i) => Number(i.v.N)));
      expect(seen.length, table).toBe(45);
      expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: 3 }, (_, i) => Array.from({ length: 15 }, (_, s) => i * 100 + s)).flat());
    }
  });

  it('Query pages through one partition key in order, following LastEvaluatedKey', async () => {
    for (const [table, key] of [[NATIVE_N, { N: '2' }], [NATIVE_B, { B: bin(1) }]] as const) {
      for (const forward of [true, false]) {
        const pages = await allPages((start) =>
          db.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'n = :n', ExpressionAttributeValues: { ':n': key }, Limit: 4, ScanIndexForward: forward, ExclusiveStartKey: start })),
        );
        const all = Array.from({ length: 15 }, (_, s) => s);
        expect(pages.flatMap((pg) => (pg.Items ?? []).map((i) => Number(i.s.N))), table).toEqual(forward ? all : all.reverse());
      }
    }
  });
});

describe('Scan', () => {
  const scan = (input: Omit<ScanCommandInput, 'TableName'>) => db.send(new ScanCommand({ TableName: SIMPLE, ...input }));
  const ids = (items: Record<string, AttributeValue>[] | undefined) => (items ?? []).map((i) => Number(i.id.N));
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);

  it('a full scan pages through every item once', async () => {
    const pages = await allPages((start) => scan({ Limit: 17, ExclusiveStartKey: start }));
    const seen = pages.flatMap((pg) => ids(pg.Items));
    expect(seen.length).toBe(120);
    expect([...seen].sort((a, b) => a - b)).toEqual(range(120));
    expect(pages.length).toBeGreaterThan(1);
    const even = await allPages((start) => scan({ FilterExpression: 'even = :t', ExpressionAttributeValues: { ':t': { BOOL: true } }, Limit: 50, ExclusiveStartKey: start }));
    expect(even.flatMap((pg) => ids(pg.Items)).sort((a, b) => a - b)).toEqual(range(60).map((i) => i * 2));
    expect(even.reduce((n, pg) => n + pg.ScannedCount!, 0)).toBe(120);
    const viaPaginator: number[] = [];
    for await (const page of paginateScan({ client: db, pageSize: 40 }, { TableName: NUM, ScanFilter: { label: { ComparisonOperator: 'BEGINS_WITH', AttributeValueList: [{ S: 'n1' }] } } })) {
      viaPaginator.push(...sks(page.Items));
    }
    expect(viaPaginator.sort((a, b) => a - b)).toEqual(SORT_KEYS.filter((x) => `n${x}`.startsWith('n1')).sort((a, b) => a - b));
  });

  it('parallel scan: the segments are disjoint and together hold every item', async () => {
    for (const total of [1, 4, 7]) {
      const seen: number[] = [];
      await Promise.all(
        range(total).map(async (segment) => {
          const pages = await allPages((start) => scan({ Segment: segment, TotalSegments: total, Limit: 50, ExclusiveStartKey: start }));
          seen.push(...pages.flatMap((pg) => ids(pg.Items)));
        }),
      );
      expect(seen.sort((a, b) => a - b)).toEqual(range(120));
    }
    await expectSdkError(scan({ Segment: 4, TotalSegments: 4 }), 'ValidationException', 'The Segment parameter is zero-based and must be less than parameter TotalSegments: Segment: 4 is not less than TotalSegments: 4');
    await expectSdkError(scan({ Segment: 1 }), 'ValidationException', 'The TotalSegments parameter is required but was not present in the request when Segment parameter is present');
  });
});

describe('batches', () => {
  it('BatchWriteItem over two tables, then BatchGetItem with missing keys, projections and capacity', async () => {
    const w = await db.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [NUM]: [{ PutRequest: { Item: { pk: { S: 'b' }, sk: { N: '1' }, v: { S: 'one' } } } }, { DeleteRequest: { Key: { pk: { S: 'other' }, sk: { N: '1' } } } }],
          [STR]: [{ PutRequest: { Item: { pk: { S: 'b' }, sk: { S: 'x' }, v: { S: 'ex' } } } }],
        },
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    expect(w.UnprocessedItems).toEqual({});
    expect(w.ConsumedCapacity).toEqual(
      expect.arrayContaining([
        { TableName: NUM, CapacityUnits: 2, WriteCapacityUnits: 2 },
        { TableName: STR, CapacityUnits: 1, WriteCapacityUnits: 1 },
      ]),
    );
    const g = await db.send(
      new BatchGetItemCommand({
        RequestItems: {
          [NUM]: { Keys: [{ pk: { S: 'b' }, sk: { N: '1' } }, { pk: { S: 'other' }, sk: { N: '1' } }], ProjectionExpression: 'v' },
          [STR]: { Keys: [{ pk: { S: 'b' }, sk: { S: 'x' } }], ConsistentRead: true },
        },
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    expect(g.Responses).toEqual({ [NUM]: [{ v: { S: 'one' } }], [STR]: [{ pk: { S: 'b' }, sk: { S: 'x' }, v: { S: 'ex' } }] });
    expect(g.UnprocessedKeys).toEqual({});
    expect(g.ConsumedCapacity).toEqual(expect.arrayContaining([{ TableName: NUM, CapacityUnits: 1, ReadCapacityUnits: 1 }]));
  });

  it('DocumentClient batches', async () => {
    await doc.send(new BatchWriteCommand({ RequestItems: { [SIMPLE]: [{ PutRequest: { Item: { id: 1000, name: 'k' } } }, { DeleteRequest: { Key: { id: 0 } } }] } }));
    const r = await doc.send(new BatchGetCommand({ RequestItems: { [SIMPLE]: { Keys: [{ id: 1000 }, { id: 0 }, { id: 1 }] } } }));
    expect(r.Responses![SIMPLE].sort((a, b) => a.id - b.id)).toEqual([
      { id: 1, even: false },
      { id: 1000, name: 'k' },
    ]);
  });

  it('batch limits and duplicates', async () => {
    const puts = (n: number) => Array.from({ length: n }, (_, i) => ({ PutRequest: { Item: { id: { N: String(5000 + i) } } } }));
    await expectSdkError(db.send(new BatchWriteItemCommand({ RequestItems: { [SIMPLE]: puts(BATCH_WRITE_ITEMS_MAX + 1) } })), 'ValidationException', /Member must have length less than or equal to 25/);
    await expectSdkError(
      db.send(new BatchWriteItemCommand({ RequestItems: { [SIMPLE]: puts(20), [NUM]: Array.from({ length: 6 }, (_, i) => ({ DeleteRequest: { Key: { pk: { S: 'z' }, sk: { N: String(i) } } } })) } })),
      'ValidationException',
      'Too many items requested for the BatchWriteItem call',
    );
    await expectSdkError(
      db.send(new BatchWriteItemCommand({ RequestItems: { [SIMPLE]: [...puts(1), { DeleteRequest: { Key: { id: { N: '5000' } } } }] } })),
      'ValidationException',
      'Provided list of item keys contains duplicates',
    );
    const keys = (n: number) => Array.from({ length: n }, (_, i) => ({ id: { N: String(i) } }));
    await expectSdkError(db.send(new BatchGetItemCommand({ RequestItems: { [SIMPLE]: { Keys: keys(BATCH_GET_ITEMS_MAX + 1) } } })), 'ValidationException', 'Too many items requested for the BatchGetItem call');
    await expectSdkError(db.send(new BatchGetItemCommand({ RequestItems: { [SIMPLE]: { Keys: [...keys(2), ...keys(1)] } } })), 'ValidationException', 'Provided list of item keys contains duplicates');
    await expectSdkError(db.send(new BatchGetItemCommand({ RequestItems: { ddb_none: { Keys: keys(1) } } })), 'ResourceNotFoundException', 'Requested resource not found');
    // Nothing of a refused batch was written.
    const r = await db.send(new BatchGetItemCommand({ RequestItems: { [SIMPLE]: { Keys: [{ id: { N: '5000' } }] } } }));
    expect(r.Responses![SIMPLE]).toEqual([]);
    const full = await db.send(new BatchGetItemCommand({ RequestItems: { [SIMPLE]: { Keys: keys(BATCH_GET_ITEMS_MAX) } } }));
    expect(full.Responses![SIMPLE].length).toBe(BATCH_GET_ITEMS_MAX - 1); // id 0 was deleted above
  });
});

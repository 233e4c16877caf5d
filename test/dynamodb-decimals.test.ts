// Numbers at DynamoDB's full precision, end to end, against real processes:
// 38-digit numbers as attributes, number sets and keys through the AWS SDK,
// Query order over numeric sort keys of every magnitude (doubles and decimals
// mixed), exact ADD and SET arithmetic with DynamoDB's errors at its limits,
// comparisons of decimals with doubles; and the same numbers through the
// native API ({"$N": "..."} in JSON and in the TypeScript client), kept across
// a crash of every slice node (write-ahead log and recovery).
import {
  CreateTableCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prng } from '../bench/keys.js';
import { decimal } from '../coordinator/client/index.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import type { Item } from '../shared/values.js';
import { expectError, httpPost, restartNode, useCluster } from './cluster-fixture.js';
import { dynamoClient, expectSdkError } from './dynamodb-fixture.js';

const c = useCluster();
let db: DynamoDBClient;

const KEYS = 'ddb_decimal_keys';
const ITEMS = 'ddb_decimal_items';
const BIG_PK = '12345678901234567890123456789012345678';

// ---- an oracle apart from shared/decimal.ts ------------------------------------

/** A number's text as [numerator, denominator] BigInts. */
function exact(text: string): [bigint, bigint] {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text)!;
  const frac = m[3] ?? '';
  const e = Number(m[4] ?? 0) - frac.length;
  const n = BigInt(m[1] + ((m[2] ?? '') + frac || '0'));
  return e >= 0 ? [n * 10n ** BigInt(e), 1n] : [n, 10n ** BigInt(-e)];
}
function compareTexts(a: string, b: string): number {
  const [x, p] = exact(a);
  const [y, q] = exact(b);
  return x * q < y * p ? -1 : x * q > y * p ? 1 : 0;
}
/** DynamoDB's canonical text: plain notation, no leading zeros, no trailing zeros after the point. */
function canonical(text: string): string {
  const [n, d] = exact(text);
  if (n === 0n) return '0';
  const negative = n < 0n;
  const scale = d.toString().length - 1; // d is a power of ten
  let digits = (negative ? -n : n).toString().padStart(scale + 1, '0');
  let int = digits.slice(0, digits.length - scale);
  let frac = digits.slice(digits.length - scale).replace(/0+$/, '');
  int = int.replace(/^0+(?=\d)/, '');
  digits = frac === '' ? int : `${int}.${frac}`;
  return (negative ? '-' : '') + digits;
}

/** Sort key texts: every magnitude DynamoDB allows, doubles and decimals side by side, plus seeded random ones. */
function sortKeys(): string[] {
  const fixed = [
    '-9.9999999999999999999999999999999999999E+125',
    '-1E+20',
    '-9007199254740993',
    '-9007199254740992',
    '-1.5',
    '-0.1000000000000000000000000000000000001',
    '-0.1',
    '-1E-130',
    '0',
    '1E-130',
    '1.0000000000000000000000000000000000001E-130',
    '0.1',
    '0.10000000000000000000000000000000000001',
    '1',
    '1.0000000000000000000000000000000000001',
    '9007199254740992',
    '9007199254740993',
    '9007199254740993.5',
    '12345678901234567890123456789012345678',
    '1E+125',
    '9.9999999999999999999999999999999999999E+125',
  ];
  const r = prng(38);
  const random: string[] = [];
  for (let i = 0; i < 40; i++) {
    const length = 1 + Math.floor(r() * 38);
    let digits = String(1 + Math.floor(r() * 9));
    for (let j = 1; j < length; j++) digits += String(Math.floor(r() * 10));
    const exponent = -130 + Math.floor(r() * 256);
    random.push(`${r() < 0.5 ? '-' : ''}${digits[0]}.${digits.slice(1)}E${exponent}`);
  }
  const all = new Map<string, string>();
  for (const t of [...fixed, ...random]) all.set(canonical(t), t);
  return [...all.values()];
}

beforeAll(async () => {
  db = dynamoClient(c.cluster.url);
  await db.send(
    new CreateTableCommand({
      TableName: KEYS,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'N' },
        { AttributeName: 'sk', AttributeType: 'N' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  await db.send(
    new CreateTableCommand({
      TableName: ITEMS,
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'N' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
});

describe('the AWS SDK: numbers of 38 digits', () => {
  it('put and get 38-digit numbers as attributes, in number sets, lists and maps, digit for digit', async () => {
    const id = { N: '99999999999999999999999999999999999999' };
    const item: Record<string, AttributeValue> = {
      id,
      a: { N: BIG_PK },
      b: { N: '-0.00000000000000000000000000000000000000000000000000000000001234567890123456789012345678901234567' },
      c: { N: '9007199254740993' },
      d: { N: '0.1' },
      ns: { NS: ['9007199254740993', '9007199254740992', '0.1000000000000000000000000000000000001', '0.1'] },
      l: { L: [{ N: '1.0000000000000000000000000000000000001' }, { M: { x: { N: '-12345678901234567890.123456789' } } }] },
    };
    await db.send(new PutItemCommand({ TableName: ITEMS, Item: item }));
    const got = await db.send(new GetItemCommand({ TableName: ITEMS, Key: { id: { N: '9.9999999999999999999999999999999999999E37' } }, ConsistentRead: true }));
    const { ns, ...rest } = got.Item!;
    const { ns: sentNs, ...sentRest } = item;
    expect(rest).toEqual(sentRest);
    expect([...ns.NS!].sort()).toEqual([...sentNs.NS!].sort());
    // Non-canonical input comes back canonical, as DynamoDB returns it.
    await db.send(new PutItemCommand({ TableName: ITEMS, Item: { id: { N: '7' }, v: { N: '00012345678901234567890.1000E+2' } } }));
    const v = (await db.send(new GetItemCommand({ TableName: ITEMS, Key: { id: { N: '7' } }, ConsistentRead: true }))).Item!.v;
    expect(v).toEqual({ N: '1234567890123456789010' });
  });

  it('a number set keeps 2^53 and 2^53 + 1 apart, and refuses a duplicate written two ways', async () => {
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: ITEMS, Item: { id: { N: '8' }, ns: { NS: ['9007199254740993', '9007199254740993.000'] } } })),
      'ValidationException',
      /contains duplicates/,
    );
  });

  it('numeric sort keys of every magnitude come back from Query in numeric order, both ways and page by page', async () => {
    const texts = sortKeys();
    for (const sk of texts) await db.send(new PutItemCommand({ TableName: KEYS, Item: { pk: { N: BIG_PK }, sk: { N: sk }, text: { S: sk } } }));
    const expected = [...texts].sort(compareTexts).map(canonical);
    const query = async (forward: boolean, limit?: number) => {
      const out: string[] = [];
      let start: Record<string, AttributeValue> | undefined;
      for (let page = 0; page < 200; page++) {
        const r = await db.send(
          new QueryCommand({
            TableName: KEYS,
            KeyConditionExpression: 'pk = :p',
            ExpressionAttributeValues: { ':p': { N: BIG_PK } },
            ScanIndexForward: forward,
            Limit: limit,
            ExclusiveStartKey: start,
          }),
        );
        out.push(...r.Items!.map((i) => i.sk.N!));
        start = r.LastEvaluatedKey;
        if (start === undefined) return out;
      }
      throw new Error('too many pages');
    };
    expect(await query(true)).toEqual(expected);
    expect(await query(false)).toEqual([...expected].reverse());
    expect(await query(true, 7)).toEqual(expected);
    // The stored text attribute says which number each key was written as.
    const one = await db.send(new GetItemCommand({ TableName: KEYS, Key: { pk: { N: BIG_PK }, sk: { N: '9007199254740993.50' } }, ConsistentRead: true }));
    expect(one.Item!.text).toEqual({ S: '9007199254740993.5' });
  });

  it('key conditions on decimals select exactly the numbers between them', async () => {
    const between = async (condition: string, values: Record<string, string>) => {
      const r = await db.send(
        new QueryCommand({
          TableName: KEYS,
          KeyConditionExpression: `pk = :p AND ${condition}`,
          ExpressionAttributeValues: { ':p': { N: BIG_PK }, ...Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { N: v }])) },
        }),
      );
      return r.Items!.map((i) => i.sk.N!);
    };
    expect(await between('sk BETWEEN :a AND :b', { ':a': '9007199254740992', ':b': '9007199254740993' })).toEqual(['9007199254740992', '9007199254740993']);
    expect(await between('sk BETWEEN :a AND :b', { ':a': '0.10000000000000000000000000000000000001', ':b': '0.2' })).toEqual(['0.10000000000000000000000000000000000001']);
    expect(await between('sk > :a', { ':a': '9007199254740993' })).toEqual(
      sortKeys().filter((t) => compareTexts(t, '9007199254740993') > 0).sort(compareTexts).map(canonical),
    );
    expect(await between('sk = :a', { ':a': '9007199254740993' })).toEqual(['9007199254740993']);
    expect(await between('sk = :a', { ':a': '9007199254740992' })).toEqual(['9007199254740992']);
    expect(await between('sk <= :a', { ':a': '-9007199254740993' })).toEqual(
      sortKeys().filter((t) => compareTexts(t, '-9007199254740993') <= 0).sort(compareTexts).map(canonical),
    );
  });

  it('conditions and filters compare decimals with doubles numerically', async () => {
    const key = { id: { N: '20' } };
    await db.send(new PutItemCommand({ TableName: ITEMS, Item: { ...key, v: { N: '9007199254740993' } } }));
    const cond = (expression: string, value: string) =>
      db.send(new PutItemCommand({ TableName: ITEMS, Item: { ...key, v: { N: '9007199254740993' } }, ConditionExpression: expression, ExpressionAttributeValues: { ':x': { N: value } } }));
    await cond('v > :x', '9007199254740992');
    await cond('v < :x', '9007199254740994');
    await cond('v = :x', '9007199254740993.000');
    await expectSdkError(cond('v = :x', '9007199254740992'), 'ConditionalCheckFailedException');
    await expectSdkError(cond('v > :x', '9007199254740993.0000000000000000001'), 'ConditionalCheckFailedException');
    const scan = await db.send(
      new ScanCommand({ TableName: ITEMS, FilterExpression: 'v BETWEEN :a AND :b', ExpressionAttributeValues: { ':a': { N: '9007199254740992.5' }, ':b': { N: '9007199254740993.5' } } }),
    );
    expect(scan.Items!.map((i) => i.id.N)).toEqual(['20']);
  });

  it('ADD and SET arithmetic is exact to 38 digits, and answers DynamoDB\'s errors beyond its limits', async () => {
    const key = { id: { N: '30' } };
    await db.send(new PutItemCommand({ TableName: ITEMS, Item: { ...key, n: { N: '9007199254740992' }, big: { N: '99999999999999999999999999999999999998' }, top: { N: '9.9999999999999999999999999999999999999E+125' } } }));
    const update = (expression: string, values: Record<string, string>) =>
      db.send(
        new UpdateItemCommand({
          TableName: ITEMS,
          Key: key,
          UpdateExpression: expression,
          ExpressionAttributeValues: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { N: v }])),
          ReturnValues: 'UPDATED_NEW',
        }),
      );
    expect((await update('ADD n :one', { ':one': '1' })).Attributes).toEqual({ n: { N: '9007199254740993' } });
    expect((await update('ADD n :one', { ':one': '1' })).Attributes).toEqual({ n: { N: '9007199254740994' } });
    expect((await update('SET big = big + :one', { ':one': '1' })).Attributes).toEqual({ big: { N: '99999999999999999999999999999999999999' } });
    expect((await update('SET big = big + :one', { ':one': '1' })).Attributes).toEqual({ big: { N: '100000000000000000000000000000000000000' } });
    expect((await update('SET f = :a - :b', { ':a': '0.3', ':b': '0.1000000000000000000000000000000000001' })).Attributes).toEqual({
      f: { N: '0.1999999999999999999999999999999999999' },
    });
    expect((await update('SET g = :a + :b', { ':a': '0.1', ':b': '0.2' })).Attributes).toEqual({ g: { N: '0.3' } });
    await expectSdkError(update('SET top = top + :v', { ':v': '1E+125' }), 'ValidationException', 'Number overflow. Attempting to store a number with magnitude larger than supported range');
    await expectSdkError(update('ADD top :v', { ':v': '1E+125' }), 'ValidationException', 'Number overflow. Attempting to store a number with magnitude larger than supported range');
    await expectSdkError(update('SET h = :a + :b', { ':a': '1E+20', ':b': '1E-20' }), 'ValidationException', 'Attempting to store more than 38 significant digits in a Number');
    await expectSdkError(
      update('SET h = :a - :b', { ':a': '1E-130', ':b': '1.0000000000000000000000000000000000001E-130' }),
      'ValidationException',
      'Number underflow. Attempting to store a number with magnitude smaller than supported range',
    );
    const got = await db.send(new GetItemCommand({ TableName: ITEMS, Key: key, ConsistentRead: true }));
    expect(got.Item!.top).toEqual({ N: '99999999999999999999999999999999999999' + '0'.repeat(88) });
    expect(got.Item!.h).toBeUndefined();
  });
});

describe('the native API: {"$N": "..."} in JSON and in the TypeScript client', () => {
  it('JSON in: a decimal text becomes the number\'s one form; JSON out: decimals as {"$N": ...}', async () => {
    await c.client.createTable('native_decimals', { name: 'id', type: 'number' }, { name: 'seq', type: 'number' });
    const put = await httpPost(
      c.cluster.url,
      'PutItem',
      JSON.stringify({ table: 'native_decimals', item: { id: { $N: '123456789012345678901234567890' }, seq: { $N: '1.50' }, v: { $N: '9007199254740993' }, w: { $N: '0.10' } } }),
    );
    expect(put.status).toBe(200);
    const res = await fetch(`${c.cluster.url}/api/GetItem`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ table: 'native_decimals', key: { id: { $N: '123456789012345678901234567890' }, seq: 1.5 } }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = (await res.json()) as { item: Record<string, unknown> };
    expect(body.item).toMatchObject({ id: { $N: '123456789012345678901234567890' }, seq: 1.5, v: { $N: '9007199254740993' }, w: 0.1 });
    const bad = await fetch(`${c.cluster.url}/api/PutItem`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ table: 'native_decimals', item: { id: 1, seq: 1, v: { $N: '12abc' } } }),
      signal: AbortSignal.timeout(30_000),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'ValidationError', message: /"\$N" is a decimal number/ });
  });

  it('the TypeScript client sends and gets decimals; keys order numerically; ADD is exact; non-canonical forms are refused', async () => {
    const t = 'native_decimals';
    const id = decimal('123456789012345678901234567890');
    const seqs = ['9007199254740993', '9007199254740992', '-0.5', '0.1000000000000000000000000000000000001', '0.1', '1E+100', '-1.0000000000000000000000000000000000001'];
    for (const s of seqs) await c.client.putItem(t, { id, seq: decimal(s), n: decimal('9007199254740992') });
    const items = await c.client.getAllItems({ table: t, shardingKey: { id } });
    const got = items.map((i) => i.seq).filter((s) => s !== 1.5);
    expect(got).toEqual([...seqs].sort(compareTexts).map((s) => decimal(s)));
    await c.client.updateItem(t, { id, seq: decimal('9007199254740993') }, { add: { n: 1 } });
    await c.client.updateItem(t, { id, seq: decimal('9007199254740993') }, { add: { n: decimal('0.00000000000000000001') } });
    const item = await c.client.getItem(t, { id, seq: decimal('9007199254740993') });
    expect(item!.n).toEqual({ $N: '9007199254740993.00000000000000000001' });
    await expectError(c.client.putItem(t, { id: 1, seq: 1, v: { $N: '0.1' } }), 'ValidationError'); // a double holds it: send 0.1
    await expectError(c.client.putItem(t, { id: 1, seq: 1, v: { $N: '9007199254740993.0' } }), 'ValidationError'); // not canonical
    await expectError(c.client.putItem(t, { id: { $N: '1234567890123456789012.5' }, seq: 1 }), 'InvalidKey'); // the name <id>.<seq> needs a whole id
  });
});

describe('decimals across a crash', () => {
  it('keys and values with decimals come back from the write-ahead log, in order', async () => {
    const t = 'kept_decimals';
    await c.client.createTable(t, { name: 'id', type: 'string' }, { name: 'seq', type: 'number' });
    const seqs = ['12345678901234567890123456789012345678', '9007199254740993', '9007199254740992', '-0.1000000000000000000000000000000000001'];
    for (const s of seqs) await c.client.putItem(t, { id: 'a', seq: decimal(s), v: decimal(s) });
    // Every slice node is killed and started again on its address and folder: it recovers from its log.
    for (const node of c.cluster.nodes) {
      await stopProcess(node.child, 'SIGKILL');
      await restartNode(c, node);
    }
    let items: Item[] | undefined;
    for (let attempt = 0; attempt < 300 && items === undefined; attempt++) {
      items = await c.client.getAllItems({ table: t, shardingKey: 'a' }).catch((err: { code?: string }) => {
        if (err.code !== 'Unavailable') throw err;
        return new Promise<undefined>((r) => setTimeout(() => r(undefined), 100));
      });
    }
    if (items === undefined) throw new Error('the restarted slice nodes did not serve the table within 30 s');
    expect(items.map((i) => [i.seq, i.v])).toEqual([...seqs].sort(compareTexts).map((s) => [decimal(s), decimal(s)]));
  });
});

afterAll(() => {
  db?.destroy();
});

// DynamoDB's reserved words through the AWS SDK: a reserved word written bare
// as an attribute name in any expression parameter is refused with DynamoDB's
// ValidationException and message, whatever its case; the same name through
// ExpressionAttributeNames works. The native API is not affected (it keeps its
// own few keywords): a native condition on an attribute named "status" works.
import { CreateTableCommand, DeleteItemCommand, GetItemCommand, PutItemCommand, QueryCommand, ScanCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { RESERVED_WORDS } from '../coordinator/dynamodb/reserved-words.js';
import { useCluster } from './cluster-fixture.js';
import { dynamoClient, expectSdkError } from './dynamodb-fixture.js';

const c = useCluster();
let db: DynamoDBClient;
const T = 'ddb_reserved';
const reserved = (field: string, word: string) => `Invalid ${field}: Attribute name is a reserved keyword; reserved keyword: ${word}`;

beforeAll(async () => {
  db = dynamoClient(c.cluster.url);
  // Key attributes named by reserved words: every expression on them needs placeholders.
  await db.send(new CreateTableCommand({
    TableName: T,
    AttributeDefinitions: [{ AttributeName: 'name', AttributeType: 'S' }, { AttributeName: 'date', AttributeType: 'N' }],
    KeySchema: [{ AttributeName: 'name', KeyType: 'HASH' }, { AttributeName: 'date', KeyType: 'RANGE' }],
    BillingMode: 'PAY_PER_REQUEST',
  }));
  await db.send(new PutItemCommand({ TableName: T, Item: { name: { S: 'a' }, date: { N: '1' }, status: { S: 'new' }, count: { N: '3' }, ok: { S: 'x' } } }));
});

describe('reserved words in expressions (DynamoDB endpoint)', () => {
  it('holds DynamoDB\'s list: 573 words, upper case', () => {
    expect(RESERVED_WORDS.size).toBe(573);
    for (const w of ['STATUS', 'NAME', 'DATE', 'COUNT', 'SIZE', 'KEY', 'DATA', 'TTL', 'FLATTERN', 'ZONE']) expect(RESERVED_WORDS.has(w), w).toBe(true);
    for (const w of ['OK', 'PK', 'SK', 'PAYLOAD', 'DEVICE']) expect(RESERVED_WORDS.has(w), w).toBe(false);
  });

  it('refuses a bare reserved word in each expression parameter, with DynamoDB\'s __type and message', async () => {
    const key = { name: { S: 'a' }, date: { N: '1' } };
    // Each sent when its turn comes: all sent at once, a later refusal could come before the loop awaits it, and
    // Node would call it unhandled.
    const cases: [string, string, () => Promise<unknown>][] = [
      ['ConditionExpression', 'status', () => db.send(new PutItemCommand({ TableName: T, Item: { ...key, ok: { S: 'y' } }, ConditionExpression: 'status = :s', ExpressionAttributeValues: { ':s': { S: 'new' } } }))],
      ['KeyConditionExpression', 'name', () => db.send(new QueryCommand({ TableName: T, KeyConditionExpression: 'name = :n', ExpressionAttributeValues: { ':n': { S: 'a' } } }))],
      ['FilterExpression', 'Count', () => db.send(new ScanCommand({ TableName: T, FilterExpression: 'Count > :c', ExpressionAttributeValues: { ':c': { N: '1' } } }))],
      ['ProjectionExpression', 'DATA', () => db.send(new GetItemCommand({ TableName: T, Key: key, ProjectionExpression: 'ok, DATA' }))],
      ['UpdateExpression', 'status', () => db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET status = :s', ExpressionAttributeValues: { ':s': { S: 'old' } } }))],
      // A nested name counts too, and so does one inside a function's arguments.
      ['ConditionExpression', 'size', () => db.send(new DeleteItemCommand({ TableName: T, Key: key, ConditionExpression: 'attribute_exists(ok.size)' }))],
      ['UpdateExpression', 'year', () => db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET ok = if_not_exists(year, :s)', ExpressionAttributeValues: { ':s': { S: 'z' } } }))],
    ];
    for (const [field, word, send] of cases) {
      const err = await expectSdkError(send(), 'ValidationException', reserved(field, word));
      expect((err.$metadata as { httpStatusCode?: number }).httpStatusCode).toBe(400);
      expect(err.__type).toBe('com.amazon.coral.validate#ValidationException');
    }
    // Nothing was written by the refused requests.
    const got = await db.send(new GetItemCommand({ TableName: T, Key: key, ConsistentRead: true }));
    expect(got.Item?.status).toEqual({ S: 'new' });
    expect(got.Item?.ok).toEqual({ S: 'x' });
  });

  it('names the first reserved word of the expression, as written', async () => {
    await expectSdkError(
      db.send(new ScanCommand({ TableName: T, FilterExpression: 'ok = :a AND Zone = :a AND status = :a', ExpressionAttributeValues: { ':a': { S: 'x' } } })),
      'ValidationException',
      reserved('FilterExpression', 'Zone'),
    );
  });

  it('accepts the same names through ExpressionAttributeNames, and function names that are reserved words', async () => {
    const key = { name: { S: 'a' }, date: { N: '1' } };
    const q = await db.send(new QueryCommand({
      TableName: T,
      KeyConditionExpression: '#n = :n AND #d BETWEEN :lo AND :hi',
      FilterExpression: '#c > :c AND size(#s) > :z',
      ProjectionExpression: '#n, #s, #c',
      ExpressionAttributeNames: { '#n': 'name', '#d': 'date', '#c': 'count', '#s': 'status' },
      ExpressionAttributeValues: { ':n': { S: 'a' }, ':lo': { N: '0' }, ':hi': { N: '5' }, ':c': { N: '1' }, ':z': { N: '0' } },
    }));
    expect(q.Items).toEqual([{ name: { S: 'a' }, status: { S: 'new' }, count: { N: '3' } }]);
    const u = await db.send(new UpdateItemCommand({
      TableName: T,
      Key: key,
      ConditionExpression: '#s = :old',
      UpdateExpression: 'SET #s = :new ADD #c :one',
      ExpressionAttributeNames: { '#s': 'status', '#c': 'count' },
      ExpressionAttributeValues: { ':old': { S: 'new' }, ':new': { S: 'done' }, ':one': { N: '1' } },
      ReturnValues: 'ALL_NEW',
    }));
    expect(u.Attributes?.status).toEqual({ S: 'done' });
    expect(u.Attributes?.count).toEqual({ N: '4' });
  });

  it('leaves the native API to its own keywords: a native condition on "status" works', async () => {
    await c.client.createTable('native_reserved', { name: 'id', type: 'string' });
    await c.client.putItem('native_reserved', { id: 'a', status: 'new' });
    await c.client.putItem('native_reserved', { id: 'a', status: 'done' }, { condition: 'status = :s', values: { ':s': 'new' } });
    expect(await c.client.getItem('native_reserved', { id: 'a' })).toMatchObject({ status: 'done' });
  });
});

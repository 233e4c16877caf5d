// The DynamoDB-compatible endpoint through the real AWS SDK (v3 client and its
// DocumentClient) against a local cluster: tables, single-item operations,
// every type, expressions and their legacy forms, ReturnValues,
// ConsumedCapacity, and DynamoDB's errors for bad requests.
import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  ListTablesCommand,
  ListTagsOfResourceCommand,
  PutItemCommand,
  TagResourceCommand,
  UpdateItemCommand,
  UpdateTableCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { useCluster } from './cluster-fixture.js';
import { documentClient, dynamoClient, expectSdkError } from './dynamodb-fixture.js';

const c = useCluster();
let db: DynamoDBClient;
let doc: DynamoDBDocumentClient;

const T = 'ddb_items';

beforeAll(async () => {
  db = dynamoClient(c.cluster.url);
  doc = documentClient(db);
  await db.send(
    new CreateTableCommand({
      TableName: T,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'N' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
});

// Every process is still alive after each case, whatever it sent.
afterEach(() => {
  for (const p of [c.cluster.coordinator, ...c.cluster.nodes]) expect(p.child.exitCode, `${p.name} exited`).toBeNull();
});

describe('tables', () => {
  it('CreateTable, DescribeTable, ListTables with paging, UpdateTable, DeleteTable', async () => {
    const created = await db.send(
      new CreateTableCommand({
        TableName: 'ddb_t1',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'B' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 7 },
        Tags: [{ Key: 'team', Value: 'core' }],
      }),
    );
    expect(created.TableDescription).toMatchObject({
      TableName: 'ddb_t1',
      TableStatus: 'ACTIVE',
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'B' }],
      ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 7, NumberOfDecreasesToday: 0 },
      TableArn: 'arn:aws:dynamodb:local:000000000000:table/ddb_t1',
      ItemCount: 0,
    });
    expect(created.TableDescription!.CreationDateTime).toBeInstanceOf(Date);

    const described = await db.send(new DescribeTableCommand({ TableName: 'ddb_t1' }));
    expect(described.Table).toMatchObject({ TableName: 'ddb_t1', TableStatus: 'ACTIVE', ProvisionedThroughput: { ReadCapacityUnits: 5, WriteCapacityUnits: 7 } });
    expect(described.Table!.BillingModeSummary).toBeUndefined();
    expect((await db.send(new DescribeTableCommand({ TableName: T }))).Table!.BillingModeSummary).toMatchObject({ BillingMode: 'PAY_PER_REQUEST' });

    for (const n of ['ddb_t2', 'ddb_t3']) {
      await db.send(
        new CreateTableCommand({
          TableName: n,
          AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
    }
    const all = (await db.send(new ListTablesCommand({}))).TableNames!;
    expect(all).toEqual(expect.arrayContaining([T, 'ddb_t1', 'ddb_t2', 'ddb_t3']));
    expect([...all].sort()).toEqual(all);
    const paged: string[] = [];
    let start: string | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await db.send(new ListTablesCommand({ Limit: 2, ExclusiveStartTableName: start }));
      expect(page.TableNames!.length).toBeLessThanOrEqual(2);
      paged.push(...page.TableNames!);
      start = page.LastEvaluatedTableName;
      if (start === undefined) break;
    }
    expect(paged).toEqual(all);

    const updated = await db.send(new UpdateTableCommand({ TableName: 'ddb_t1', ProvisionedThroughput: { ReadCapacityUnits: 10, WriteCapacityUnits: 3 } }));
    expect(updated.TableDescription!.ProvisionedThroughput).toMatchObject({ ReadCapacityUnits: 10, WriteCapacityUnits: 3, NumberOfDecreasesToday: 1 });
    expect(updated.TableDescription!.ProvisionedThroughput!.LastIncreaseDateTime).toBeInstanceOf(Date);
    expect((await db.send(new DescribeTableCommand({ TableName: 'ddb_t1' }))).Table!.ProvisionedThroughput).toMatchObject({ ReadCapacityUnits: 10, WriteCapacityUnits: 3 });
    await expectSdkError(
      db.send(new UpdateTableCommand({ TableName: 'ddb_t1', ProvisionedThroughput: { ReadCapacityUnits: 10, WriteCapacityUnits: 3 } })),
      'ValidationException',
      /^The provisioned throughput for the table will not change/,
    );
    const onDemand = await db.send(new UpdateTableCommand({ TableName: 'ddb_t1', BillingMode: 'PAY_PER_REQUEST' }));
    expect(onDemand.TableDescription!.BillingModeSummary).toMatchObject({ BillingMode: 'PAY_PER_REQUEST' });

    const arn = created.TableDescription!.TableArn!;
    await db.send(new TagResourceCommand({ ResourceArn: arn, Tags: [{ Key: 'env', Value: 'test' }] }));
    expect((await db.send(new ListTagsOfResourceCommand({ ResourceArn: arn }))).Tags).toEqual([
      { Key: 'team', Value: 'core' },
      { Key: 'env', Value: 'test' },
    ]);

    const deleted = await db.send(new DeleteTableCommand({ TableName: 'ddb_t1' }));
    expect(deleted.TableDescription).toMatchObject({ TableName: 'ddb_t1', TableStatus: 'DELETING' });
    await expectSdkError(db.send(new DescribeTableCommand({ TableName: 'ddb_t1' })), 'ResourceNotFoundException', 'Requested resource not found: Table: ddb_t1 not found');
    await expectSdkError(db.send(new DeleteTableCommand({ TableName: 'ddb_t1' })), 'ResourceNotFoundException', 'Requested resource not found: Table: ddb_t1 not found');
  });

  it('a table deleted and created again under its name with another key (through the native API) is seen at once', async () => {
    const name = 'ddb_recreated';
    await c.http.request('CreateTable', { table: name, shardingKey: { name: 'pk', type: 'string' } });
    await db.send(new PutItemCommand({ TableName: name, Item: { pk: { S: 'a' }, v: { N: '1' } } }));
    expect((await db.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'a' } } }))).Item).toEqual({ pk: { S: 'a' }, v: { N: '1' } });
    await c.http.request('DeleteTable', { table: name });
    await expectSdkError(db.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'a' } } })), 'ResourceNotFoundException');
    await c.http.request('CreateTable', { table: name, shardingKey: { name: 'id', type: 'number' }, sortingKey: { name: 'at', type: 'number' } });
    await expectSdkError(db.send(new GetItemCommand({ TableName: name, Key: { pk: { S: 'a' } } })), 'ValidationException', 'The provided key element does not match the schema');
    await db.send(new PutItemCommand({ TableName: name, Item: { id: { N: '7' }, at: { N: '1' } } }));
    expect((await db.send(new GetItemCommand({ TableName: name, Key: { id: { N: '7' }, at: { N: '1' } } }))).Item).toEqual({ id: { N: '7' }, at: { N: '1' } });
    const described = await db.send(new DescribeTableCommand({ TableName: name }));
    expect(described.Table!.KeySchema).toEqual([
      { AttributeName: 'id', KeyType: 'HASH' },
      { AttributeName: 'at', KeyType: 'RANGE' },
    ]);
  });

  it('refuses bad table definitions with DynamoDB\'s errors', async () => {
    const base = {
      TableName: 'ddb_bad',
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' as const }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' as const }],
      BillingMode: 'PAY_PER_REQUEST' as const,
    };
    await expectSdkError(db.send(new CreateTableCommand({ ...base, TableName: T })), 'ResourceInUseException', `Table already exists: ${T}`);
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, TableName: 'x' })),
      'ValidationException',
      "1 validation error detected: Value 'x' at 'tableName' failed to satisfy constraint: Member must have length greater than or equal to 3",
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, TableName: 'a b' })),
      'ValidationException',
      "1 validation error detected: Value 'a b' at 'tableName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+",
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, AttributeDefinitions: [{ AttributeName: 'other', AttributeType: 'S' }] })),
      'ValidationException',
      'One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [id], AttributeDefinitions: [other]',
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, AttributeDefinitions: [...base.AttributeDefinitions, { AttributeName: 'extra', AttributeType: 'N' }] })),
      'ValidationException',
      'One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions',
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, KeySchema: [{ AttributeName: 'id', KeyType: 'RANGE' }] })),
      'ValidationException',
      'Invalid KeySchema: The first KeySchemaElement is not a HASH key type',
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, BillingMode: undefined })),
      'ValidationException',
      'One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED',
    );
    await expectSdkError(
      db.send(new CreateTableCommand({ ...base, BillingMode: 'PROVISIONED', ProvisionedThroughput: { ReadCapacityUnits: 0, WriteCapacityUnits: 1 } })),
      'ValidationException',
      "1 validation error detected: Value '0' at 'provisionedThroughput.readCapacityUnits' failed to satisfy constraint: Member must have value greater than or equal to 1",
    );
    await expectSdkError(
      db.send(
        new CreateTableCommand({
          ...base,
          GlobalSecondaryIndexes: [{ IndexName: 'g', KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }], Projection: { ProjectionType: 'ALL' } }],
        }),
      ),
      'ValidationException',
      /keyslice does not support secondary indexes yet/,
    );
    await expectSdkError(db.send(new DescribeTableCommand({ TableName: 'ddb_bad' })), 'ResourceNotFoundException');
  });
});

const av = {
  S: { S: 'héllo ✓' },
  emptyS: { S: '' },
  N: { N: '-12.5' },
  bigInt: { N: '9007199254740991' },
  tiny: { N: '1E-130' },
  huge: { N: '9.99e125' },
  B: { B: new Uint8Array([0, 1, 2, 255]) },
  BOOL: { BOOL: false },
  NULL: { NULL: true },
  L: { L: [{ S: 'a' }, { N: '1' }, { L: [] }, { M: {} }] },
  M: { M: { nested: { M: { deep: { BOOL: true } } }, 'with space': { S: 'ok' } } },
} satisfies Record<string, AttributeValue>;

describe('items and types', () => {
  it('S, N, B, BOOL, NULL, L and M round-trip; numbers come back in DynamoDB\'s normal form', async () => {
    await db.send(new PutItemCommand({ TableName: T, Item: { pk: { S: 'types' }, sk: { N: '1' }, ...av } }));
    const got = await db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'types' }, sk: { N: '1.000' } }, ConsistentRead: true }));
    expect(got.Item).toEqual({
      pk: { S: 'types' },
      sk: { N: '1' },
      ...av,
      tiny: { N: '0.' + '0'.repeat(129) + '1' },
      huge: { N: '999' + '0'.repeat(123) },
      N: { N: '-12.5' },
    });
    // keyslice's system attributes never show through this API.
    expect(Object.keys(got.Item!).some((k) => k.startsWith('__'))).toBe(false);
  });

  it('DynamoDB\'s own number limits apply, with its messages (numbers within them: test/dynamodb-decimals.test.ts)', async () => {
    const put = (n: string) => db.send(new PutItemCommand({ TableName: T, Item: { pk: { S: 'num' }, sk: { N: '1' }, v: { N: n } } }));
    await expectSdkError(put('1' + '0'.repeat(38) + '1'), 'ValidationException', 'Attempting to store more than 38 significant digits in a Number');
    await expectSdkError(put('1E+126'), 'ValidationException', 'Number overflow. Attempting to store a number with magnitude larger than supported range');
    await expectSdkError(put('1E-131'), 'ValidationException', 'Number underflow. Attempting to store a number with magnitude smaller than supported range');
    await expectSdkError(put('12abc'), 'ValidationException', 'A value provided cannot be converted into a number');
    expect((await db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'num' }, sk: { N: '1' } } }))).Item).toBeUndefined();
    await put('0.1');
    await put('1e21');
    const got = await db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'num' }, sk: { N: '1' } } }));
    expect(got.Item!.v).toEqual({ N: '1000000000000000000000' });
  });

  it('arithmetic is decimal, as in DynamoDB: 0.1 + 0.2 is 0.3', async () => {
    const key = { pk: { S: 'arith' }, sk: { N: '1' } };
    await db.send(new PutItemCommand({ TableName: T, Item: { ...key, a: { N: '0.1' }, b: { N: '19.99' } } }));
    const r = await db.send(
      new UpdateItemCommand({
        TableName: T,
        Key: key,
        UpdateExpression: 'ADD a :two SET b = b - :price, c = :x + :y',
        ExpressionAttributeValues: { ':two': { N: '0.2' }, ':price': { N: '0.99' }, ':x': { N: '1.1' }, ':y': { N: '2.2' } },
        ReturnValues: 'ALL_NEW',
      }),
    );
    expect(r.Attributes).toEqual({ ...key, a: { N: '0.3' }, b: { N: '19' }, c: { N: '3.3' } });
    expect((await db.send(new GetItemCommand({ TableName: T, Key: key }))).Item).toEqual(r.Attributes);
  });

  it('sets: SS, NS, BS round-trip; ADD and DELETE of elements; contains, size and attribute_type; equal in any order', async () => {
    const key = { pk: { S: 'sets' }, sk: { N: '1' } };
    const bytes = (...b: number[]) => new Uint8Array(b);
    await db.send(new PutItemCommand({ TableName: T, Item: { ...key, tags: { SS: ['red', 'green'] }, scores: { NS: ['1.5', '10'] }, blobs: { BS: [bytes(1), bytes(2, 3)] } } }));
    const got = await db.send(new GetItemCommand({ TableName: T, Key: key }));
    expect(got.Item).toEqual({ ...key, tags: { SS: ['red', 'green'] }, scores: { NS: ['1.5', '10'] }, blobs: { BS: [bytes(1), bytes(2, 3)] } });

    const upd = await db.send(
      new UpdateItemCommand({
        TableName: T,
        Key: key,
        UpdateExpression: 'ADD tags :more, scores :n DELETE blobs :b',
        ConditionExpression: 'contains(tags, :red) AND size(tags) = :two AND attribute_type(scores, :NS) AND tags = :same',
        ExpressionAttributeValues: {
          ':more': { SS: ['blue', 'red'] },
          ':n': { NS: ['-1'] },
          ':b': { BS: [bytes(1)] },
          ':red': { S: 'red' },
          ':two': { N: '2' },
          ':NS': { S: 'NS' },
          ':same': { SS: ['green', 'red'] },
        },
        ReturnValues: 'UPDATED_NEW',
      }),
    );
    expect(upd.Attributes).toEqual({ tags: { SS: ['red', 'green', 'blue'] }, scores: { NS: ['1.5', '10', '-1'] }, blobs: { BS: [bytes(2, 3)] } });
    // Deleting the last elements removes the attribute.
    const gone = await db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'DELETE blobs :b', ExpressionAttributeValues: { ':b': { BS: [bytes(2, 3)] } }, ReturnValues: 'ALL_NEW' }));
    expect(gone.Attributes!.blobs).toBeUndefined();
    // Legacy: AttributeUpdates ADD/DELETE of sets, and CONTAINS.
    await db.send(
      new UpdateItemCommand({
        TableName: T,
        Key: key,
        AttributeUpdates: { tags: { Action: 'DELETE', Value: { SS: ['green'] } } },
        Expected: { tags: { ComparisonOperator: 'CONTAINS', AttributeValueList: [{ S: 'green' }] } },
      }),
    );
    expect((await db.send(new GetItemCommand({ TableName: T, Key: key, ProjectionExpression: 'tags' }))).Item).toEqual({ tags: { SS: ['red', 'blue'] } });

    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: { ...key, s: { SS: [] } } })),
      'ValidationException',
      'One or more parameter values were invalid: An string set  may not be empty',
    );
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: { ...key, s: { SS: ['a', 'a'] } } })),
      'ValidationException',
      'One or more parameter values were invalid: Input collection [a, a] contains duplicates.',
    );
    await expectSdkError(db.send(new PutItemCommand({ TableName: T, Item: { ...key, s: { NS: ['1', '1.0'] } } })), 'ValidationException', /contains duplicates/);
    await expectSdkError(
      db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'ADD tags :n', ExpressionAttributeValues: { ':n': { NS: ['1'] } } })),
      'ValidationException',
      /cannot ADD a NS set to "tags": it holds a SS set/,
    );
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: { ...key, m: { M: { $SS: { L: [{ S: 'a' }] } } } } })),
      'ValidationException',
      /keyslice stores sets and decimal numbers as maps of the single key \$SS/,
    );
    await expectSdkError(db.send(new PutItemCommand({ TableName: 'ddb_items', Item: { pk: { SS: ['a'] }, sk: { N: '1' } } })), 'ValidationException', 'One or more parameter values were invalid: Type mismatch for key pk expected: S actual: SS');
  });

  it('key checks: missing, mistyped, empty, oversized keys and a period in the partition key', async () => {
    const put = (Item: Record<string, AttributeValue>) => db.send(new PutItemCommand({ TableName: T, Item }));
    await expectSdkError(put({ sk: { N: '1' } }), 'ValidationException', 'One or more parameter values were invalid: Missing the key pk in the item');
    await expectSdkError(put({ pk: { N: '1' }, sk: { N: '1' } }), 'ValidationException', 'One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N');
    await expectSdkError(
      put({ pk: { S: '' }, sk: { N: '1' } }),
      'ValidationException',
      'One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: pk',
    );
    await expectSdkError(
      put({ pk: { S: 'x'.repeat(2049) }, sk: { N: '1' } }),
      'ValidationException',
      'One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes',
    );
    await expectSdkError(put({ pk: { S: 'a.b' }, sk: { N: '1' } }), 'ValidationException', /keyslice does not accept a period in the partition key/);
    await expectSdkError(db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'a' } } })), 'ValidationException', 'The provided key element does not match the schema');
    await expectSdkError(db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'a' }, sk: { S: '1' } } })), 'ValidationException', 'The provided key element does not match the schema');
    await expectSdkError(
      db.send(new GetItemCommand({ TableName: T, Key: { pk: { S: 'a' }, sk: { N: '1' }, x: { S: 'y' } } })),
      'ValidationException',
      'The provided key element does not match the schema',
    );
    await expectSdkError(db.send(new GetItemCommand({ TableName: 'ddb_missing', Key: { pk: { S: 'a' }, sk: { N: '1' } } })), 'ResourceNotFoundException', 'Requested resource not found');
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: { pk: { S: 'big' }, sk: { N: '1' }, blob: { B: new Uint8Array(400 * 1024) } } })),
      'ValidationException',
      'Item size has exceeded the maximum allowed size',
    );
  });
});

describe('writes with expressions', () => {
  const key = { pk: { S: 'acct' }, sk: { N: '1' } };

  it('conditions, ReturnValues and ReturnValuesOnConditionCheckFailure', async () => {
    await db.send(new PutItemCommand({ TableName: T, Item: { ...key, balance: { N: '100' } }, ConditionExpression: 'attribute_not_exists(pk)' }));
    const failed = await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: { ...key, balance: { N: '0' } }, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' })),
      'ConditionalCheckFailedException',
      'The conditional request failed',
    );
    expect(failed.Item).toEqual({ ...key, balance: { N: '100' } });

    const old = await db.send(new PutItemCommand({ TableName: T, Item: { ...key, balance: { N: '90' }, log: { L: [] } }, ReturnValues: 'ALL_OLD' }));
    expect(old.Attributes).toEqual({ ...key, balance: { N: '100' } });

    const upd = await db.send(
      new UpdateItemCommand({
        TableName: T,
        Key: key,
        UpdateExpression: 'SET balance = balance - :amt, #log = list_append(#log, :entry) ADD visits :one',
        ConditionExpression: 'balance >= :amt',
        ExpressionAttributeNames: { '#log': 'log' },
        ExpressionAttributeValues: { ':amt': { N: '30' }, ':entry': { L: [{ N: '-30' }] }, ':one': { N: '1' } },
        ReturnValues: 'UPDATED_NEW',
      }),
    );
    expect(upd.Attributes).toEqual({ balance: { N: '60' }, log: { L: [{ N: '-30' }] }, visits: { N: '1' } });

    const updOld = await db.send(
      new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'REMOVE visits SET note = :n', ExpressionAttributeValues: { ':n': { S: 'x' } }, ReturnValues: 'UPDATED_OLD' }),
    );
    expect(updOld.Attributes).toEqual({ visits: { N: '1' } });
    const all = await db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET note = :n', ExpressionAttributeValues: { ':n': { S: 'y' } }, ReturnValues: 'ALL_NEW' }));
    expect(all.Attributes).toEqual({ ...key, balance: { N: '60' }, log: { L: [{ N: '-30' }] }, note: { S: 'y' } });

    await expectSdkError(
      db.send(
        new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET balance = balance - :amt', ConditionExpression: 'balance >= :amt', ExpressionAttributeValues: { ':amt': { N: '500' } } }),
      ),
      'ConditionalCheckFailedException',
    );
    const del = await db.send(new DeleteItemCommand({ TableName: T, Key: key, ConditionExpression: 'note = :n', ExpressionAttributeValues: { ':n': { S: 'y' } }, ReturnValues: 'ALL_OLD' }));
    expect(del.Attributes).toMatchObject({ note: { S: 'y' } });
    expect((await db.send(new GetItemCommand({ TableName: T, Key: key }))).Item).toBeUndefined();

    // UpdateItem creates a missing item, from its key and the actions.
    const created = await db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': { N: '5' } }, ReturnValues: 'ALL_NEW' }));
    expect(created.Attributes).toEqual({ ...key, n: { N: '5' } });
  });

  it('expression errors in DynamoDB\'s words', async () => {
    await expectSdkError(
      db.send(new UpdateItemCommand({ TableName: T, Key: key, UpdateExpression: 'SET pk = :v', ExpressionAttributeValues: { ':v': { S: 'x' } } })),
      'ValidationException',
      'One or more parameter values were invalid: Cannot update attribute pk. This attribute is part of the key',
    );
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: 'a = :a', ExpressionAttributeValues: { ':a': { S: 'x' }, ':b': { S: 'y' } } })),
      'ValidationException',
      'Value provided in ExpressionAttributeValues unused in expressions: keys: {:b}',
    );
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: '#a = :a', ExpressionAttributeValues: { ':a': { S: 'x' } } })),
      'ValidationException',
      'Invalid ConditionExpression: An expression attribute name used in the document path is not defined; attribute name: #a',
    );
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: 'a = :zz' })),
      'ValidationException',
      'Invalid ConditionExpression: An expression attribute value used in expression is not defined; attribute value: :zz',
    );
    await expectSdkError(db.send(new PutItemCommand({ TableName: T, Item: key, ExpressionAttributeValues: { ':a': { S: 'x' } } })), 'ValidationException', 'ExpressionAttributeValues can only be specified when using expressions');
    await expectSdkError(db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: 'a = :a AND', ExpressionAttributeValues: { ':a': { S: 'x' } } })), 'ValidationException', /^Invalid ConditionExpression: /);
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: 'a = :a', Expected: { a: { Exists: false } }, ExpressionAttributeValues: { ':a': { S: 'x' } } })),
      'ValidationException',
      'Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}',
    );
    await expectSdkError(db.send(new PutItemCommand({ TableName: T, Item: key, ReturnValues: 'ALL_NEW' })), 'ValidationException', 'ReturnValues can only be ALL_OLD or NONE');
    await expectSdkError(
      // `as never`: a ReturnValues the SDK's type does not allow, to check that the endpoint refuses it.
      db.send(new PutItemCommand({ TableName: T, Item: key, ConditionExpression: 'a = :a', ExpressionAttributeValues: { ':a': { S: 'x' } }, ReturnValues: 'BOGUS' as never })),
      'ValidationException',
      "1 validation error detected: Value 'BOGUS' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [NONE, ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATED_NEW]",
    );
  });

  it('legacy parameters: Expected, AttributeUpdates, AttributesToGet, ConditionalOperator', async () => {
    const k = { pk: { S: 'legacy' }, sk: { N: '1' } };
    await db.send(new PutItemCommand({ TableName: T, Item: { ...k, a: { N: '1' }, s: { S: 'hello' } }, Expected: { pk: { Exists: false } } }));
    await expectSdkError(db.send(new PutItemCommand({ TableName: T, Item: k, Expected: { pk: { Exists: false } } })), 'ConditionalCheckFailedException');
    await db.send(
      new UpdateItemCommand({
        TableName: T,
        Key: k,
        AttributeUpdates: { a: { Action: 'ADD', Value: { N: '2' } }, s: { Action: 'DELETE' }, t: { Action: 'PUT', Value: { S: 'new' } } },
        Expected: { a: { ComparisonOperator: 'EQ', AttributeValueList: [{ N: '1' }] }, s: { ComparisonOperator: 'BEGINS_WITH', AttributeValueList: [{ S: 'he' }] } },
      }),
    );
    const got = await db.send(new GetItemCommand({ TableName: T, Key: k, AttributesToGet: ['a', 's', 't'] }));
    expect(got.Item).toEqual({ a: { N: '3' }, t: { S: 'new' } });
    await expectSdkError(
      db.send(
        new DeleteItemCommand({
          TableName: T,
          Key: k,
          Expected: { a: { ComparisonOperator: 'GT', AttributeValueList: [{ N: '10' }] }, t: { Value: { S: 'old' } } },
          ConditionalOperator: 'OR',
        }),
      ),
      'ConditionalCheckFailedException',
    );
    await db.send(
      new DeleteItemCommand({
        TableName: T,
        Key: k,
        Expected: { a: { ComparisonOperator: 'GT', AttributeValueList: [{ N: '10' }] }, t: { Value: { S: 'new' } } },
        ConditionalOperator: 'OR',
      }),
    );
    expect((await db.send(new GetItemCommand({ TableName: T, Key: k }))).Item).toBeUndefined();
    await expectSdkError(
      db.send(new PutItemCommand({ TableName: T, Item: k, Expected: { a: { ComparisonOperator: 'EQ', AttributeValueList: [] } } })),
      'ValidationException',
      'One or more parameter values were invalid: Invalid number of argument(s) for the EQ ComparisonOperator',
    );
  });

  it('ConsumedCapacity by DynamoDB\'s rules', async () => {
    const k = { pk: { S: 'cap' }, sk: { N: '1' } };
    // pk (2 + 3) + sk (2 + 2) + v (1 + 3000) = 3010 bytes: 3 write units, 1 read unit.
    const put = await db.send(new PutItemCommand({ TableName: T, Item: { ...k, v: { S: 'x'.repeat(3000) } }, ReturnConsumedCapacity: 'TOTAL' }));
    expect(put.ConsumedCapacity).toEqual({ TableName: T, CapacityUnits: 3, WriteCapacityUnits: 3 });
    const get = await db.send(new GetItemCommand({ TableName: T, Key: k, ReturnConsumedCapacity: 'TOTAL' }));
    expect(get.ConsumedCapacity).toEqual({ TableName: T, CapacityUnits: 0.5, ReadCapacityUnits: 0.5 });
    const strong = await db.send(new GetItemCommand({ TableName: T, Key: k, ConsistentRead: true, ReturnConsumedCapacity: 'INDEXES' }));
    expect(strong.ConsumedCapacity).toEqual({ TableName: T, CapacityUnits: 1, ReadCapacityUnits: 1, Table: { CapacityUnits: 1, ReadCapacityUnits: 1 } });
    // A write that shrinks the item is charged for the larger, older one.
    const shrink = await db.send(new PutItemCommand({ TableName: T, Item: k, ReturnConsumedCapacity: 'TOTAL' }));
    expect(shrink.ConsumedCapacity!.CapacityUnits).toBe(3);
    const upd = await db.send(
      new UpdateItemCommand({ TableName: T, Key: k, UpdateExpression: 'SET v = :v', ExpressionAttributeValues: { ':v': { S: 'y'.repeat(5000) } }, ReturnConsumedCapacity: 'TOTAL' }),
    );
    expect(upd.ConsumedCapacity!.CapacityUnits).toBe(5);
    const del = await db.send(new DeleteItemCommand({ TableName: T, Key: k, ReturnConsumedCapacity: 'TOTAL' }));
    expect(del.ConsumedCapacity!.CapacityUnits).toBe(5);
  });
});

describe('DocumentClient', () => {
  it('put, get, update and delete with plain JavaScript values', async () => {
    const item = { pk: 'doc', sk: 7, name: 'Ada', tags: ['x', 'y'], profile: { age: 36, active: true, nick: null }, raw: new Uint8Array([9, 8]) };
    await doc.send(new PutCommand({ TableName: T, Item: item }));
    const got = await doc.send(new GetCommand({ TableName: T, Key: { pk: 'doc', sk: 7 } }));
    expect(got.Item).toEqual(item);
    const upd = await doc.send(
      new UpdateCommand({
        TableName: T,
        Key: { pk: 'doc', sk: 7 },
        UpdateExpression: 'SET profile.age = profile.age + :one, tags[2] = :t',
        ExpressionAttributeValues: { ':one': 1, ':t': 'z' },
        ReturnValues: 'ALL_NEW',
      }),
    );
    expect(upd.Attributes).toMatchObject({ profile: { age: 37 }, tags: ['x', 'y', 'z'] });
    const proj = await doc.send(new GetCommand({ TableName: T, Key: { pk: 'doc', sk: 7 }, ProjectionExpression: '#n, profile.age, tags[1]', ExpressionAttributeNames: { '#n': 'name' } }));
    expect(proj.Item).toEqual({ name: 'Ada', profile: { age: 37 }, tags: ['y'] });
    await doc.send(new DeleteCommand({ TableName: T, Key: { pk: 'doc', sk: 7 } }));
    expect((await doc.send(new GetCommand({ TableName: T, Key: { pk: 'doc', sk: 7 } }))).Item).toBeUndefined();
    // A JavaScript Set marshals to a DynamoDB set and comes back as one.
    await doc.send(new PutCommand({ TableName: T, Item: { pk: 'doc', sk: 8, s: new Set(['a', 'b']), n: new Set([1, 2]) } }));
    await doc.send(new UpdateCommand({ TableName: T, Key: { pk: 'doc', sk: 8 }, UpdateExpression: 'ADD s :c DELETE n :one', ExpressionAttributeValues: { ':c': new Set(['c']), ':one': new Set([1]) } }));
    expect((await doc.send(new GetCommand({ TableName: T, Key: { pk: 'doc', sk: 8 } }))).Item).toEqual({ pk: 'doc', sk: 8, s: new Set(['a', 'b', 'c']), n: new Set([2]) });
  });
});

// A map key (or attribute) named "__proto__": msgpackr decodes that key as "__proto_" in every map it reads (it would
// set a JavaScript prototype), on the coordinator's WebSocket and in every node's apply, log replay, snapshot and
// move, so an item holding one would be read back changed. keyslice refuses the name at every entry instead
// (shared/values.ts UNSTORABLE_MAP_KEY; docs/expressions.md, docs/dynamodb.md). Each entry is driven through a
// real cluster, and what is there is read back after every node restarted (its log replayed).
import { CreateTableCommand, GetItemCommand, PutItemCommand, QueryCommand, UpdateItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Packr } from 'msgpackr';
import { beforeAll, describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import WebSocket from 'ws';
import { CLIENT_SUBPROTOCOL, decodeClientRequests, decodeClientResponses, FrameError, type ClientResponseFrame } from '../shared/protocol.js';
import { expectError, restartNode, RECOVERY_MS_MAX, useCluster, type Api } from './cluster-fixture.js';
import { dynamoClient, expectSdkError } from './dynamodb-fixture.js';

const c = useCluster();
const T = 'protos';
const D = 'dprotos';
let db: DynamoDBClient;

beforeAll(async () => {
  await c.client.request('CreateTable', { table: T, shardingKey: { name: 'user', type: 'string' }, sortingKey: { name: 'ts', type: 'number' } });
  db = dynamoClient(c.cluster.url);
  await db.send(
    new CreateTableCommand({
      TableName: D,
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }, { AttributeName: 'sk', AttributeType: 'N' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }, { AttributeName: 'sk', KeyType: 'RANGE' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
});

const transports: [string, () => Api][] = [
  ['websocket', () => c.client],
  ['http', () => c.http],
];

/** What each native transport holds for `user`, without __mtime. */
async function itemsOf(api: Api, user: string): Promise<unknown[]> {
  const { items } = await api.request('GetItems', { table: T, shardingKey: user });
  return items.map(({ __mtime, ...rest }) => rest);
}

describe.each(transports)('the native API over %s', (transport, api) => {
  const user = `u_${transport}`;
  // JSON.parse makes "__proto__" an own key, as a client's JSON or msgpack does.
  const own = (json: string) => JSON.parse(json) as Record<string, never>;

  it('refuses "__proto__" as an attribute, a map key (also in a list), a set value and an update path: nothing is stored', async () => {
    await api().request('PutItem', { table: T, item: { user, ts: 5, m: { k: 1 } } });
    const refused: Promise<unknown>[] = [
      api().request('PutItem', { table: T, item: own(`{"user":"${user}","ts":1,"__proto__":{"x":1}}`) }),
      api().request('PutItem', { table: T, item: own(`{"user":"${user}","ts":2,"m":{"__proto__":{"x":1},"k":2}}`) }),
      api().request('PutItem', { table: T, item: own(`{"user":"${user}","ts":3,"l":[{"__proto__":1}]}`) }),
      api().request('UpdateItem', { table: T, key: { user, ts: 4 }, set: own('{"m":{"__proto__":1}}') }),
      api().request('UpdateItem', { table: T, key: { user, ts: 5 }, update: 'SET m.#p = :v', names: { '#p': '__proto__' }, values: { ':v': { polluted: true } } }),
      api().request('UpdateItem', { table: T, key: { user, ts: 5 }, update: 'ADD m.#p :v', names: { '#p': '__proto__' }, values: { ':v': 1 } }),
      api().request('UpdateItem', { table: T, key: { user, ts: 6 }, update: 'SET #p = :v', names: { '#p': '__proto__' }, values: { ':v': 1 } }),
      api().request('UpdateItem', { table: T, key: { user, ts: 7 }, update: 'SET m = :v', values: own('{":v":{"__proto__":1}}') }),
    ];
    for (const p of refused) expect((await expectError(p, 'ValidationError')).message).toContain('"__proto__"');
    expect(await itemsOf(api(), user)).toEqual([{ user, ts: 5, m: { k: 1 }, __name: `${user}.5` }]);
    // A value "__proto__" (not a key) is plain data.
    await api().request('PutItem', { table: T, item: { user, ts: 8, s: '__proto__', l: ['__proto__'] } });
    expect((await api().request('GetItem', { table: T, key: { user, ts: 8 } })).item).toMatchObject({ s: '__proto__', l: ['__proto__'] });
  });
});

describe('the DynamoDB endpoint', () => {
  const k = (n: number) => ({ pk: { S: 'p' }, sk: { N: String(n) } });

  it('refuses "__proto__" as an attribute, a map key and an update path with a ValidationException: nothing is stored', async () => {
    await db.send(new PutItemCommand({ TableName: D, Item: { ...k(3), m: { M: { k: { N: '1' } } } } }));
    await expectSdkError(db.send(new PutItemCommand({ TableName: D, Item: { ...k(1), ['__proto__']: { S: 'x' } } })), 'ValidationException', /"__proto__"/);
    await expectSdkError(db.send(new PutItemCommand({ TableName: D, Item: { ...k(2), m: { M: JSON.parse('{"__proto__":{"S":"x"},"k":{"N":"1"}}') } } })), 'ValidationException', /"__proto__"/);
    for (const UpdateExpression of ['SET m.#p = :v', 'SET #p = :v']) {
      const update = new UpdateItemCommand({ TableName: D, Key: k(3), UpdateExpression, ExpressionAttributeNames: { '#p': '__proto__' }, ExpressionAttributeValues: { ':v': { S: 'x' } }, ReturnValues: 'ALL_NEW' });
      await expectSdkError(db.send(update), 'ValidationException', /"__proto__"/);
    }
    expect((await db.send(new GetItemCommand({ TableName: D, Key: k(3) }))).Item).toEqual({ ...k(3), m: { M: { k: { N: '1' } } } });
  });
});

describe('after every node restarts (its log replayed)', () => {
  it('each API reads back what it read before, no key renamed', async () => {
    const query = () => db.send(new QueryCommand({ TableName: D, KeyConditionExpression: 'pk = :p', ExpressionAttributeValues: { ':p': { S: 'p' } } }));
    const stored = (user: string) => [{ user, ts: 5, m: { k: 1 }, __name: `${user}.5` }, { user, ts: 8, s: '__proto__', l: ['__proto__'], __name: `${user}.8` }];
    const before = [(await query()).Items, await itemsOf(c.http, 'u_http'), await itemsOf(c.client, 'u_websocket')];
    expect(before).toEqual([[{ pk: { S: 'p' }, sk: { N: '3' }, m: { M: { k: { N: '1' } } } }], stored('u_http'), stored('u_websocket')]);
    for (const n of c.cluster.nodes) {
      await stopProcess(n.child, 'SIGKILL');
      await restartNode(c, n);
    }
    const deadline = Date.now() + RECOVERY_MS_MAX;
    let after: unknown[] | null = null;
    while (after === null && Date.now() < deadline) {
      after = await Promise.all([query().then((r) => r.Items), itemsOf(c.http, 'u_http'), itemsOf(c.client, 'u_websocket')]).catch(() => null);
      if (after === null) await new Promise((r) => setTimeout(r, 200));
    }
    expect(after).toEqual(before);
  });
});

describe('a WebSocket frame', () => {
  it('refuses only the request of a batch frame with a map key "__proto__", in any msgpack string form', () => {
    const packed = new Packr({ useRecords: false }).pack([
      [1, 'PutItem', { table: T, item: { user: 'a', ts: 1, s: '__proto__' } }],
      [2, 'PutItem', { table: T, item: JSON.parse('{"user":"a","ts":2,"m":{"__proto__":1}}') }],
    ]);
    const fix = Buffer.concat([Buffer.of(0xa9), Buffer.from('__proto__')]);
    const wide = [Buffer.of(0xd9, 9), Buffer.of(0xda, 0, 9), Buffer.of(0xdb, 0, 0, 0, 9)].map((h) => Buffer.concat([h, Buffer.from('__proto__')]));
    const at = packed.lastIndexOf(fix);
    for (const bytes of [packed, ...wide.map((w) => Buffer.concat([packed.subarray(0, at), w, packed.subarray(at + fix.length)]))]) {
      const [first, second] = decodeClientRequests(bytes);
      expect(first).toEqual([1, 'PutItem', { table: T, item: { user: 'a', ts: 1, s: '__proto__' } }]);
      expect(second).toBeInstanceOf(FrameError);
      expect(second).toMatchObject({ id: 2, code: 'ValidationError' });
    }
  });

  it('refuses a map key "__proto__" in a msgpackr record (ext 0x72), which decodes as an object even with maps as Maps', () => {
    const bytes = new Packr({ useRecords: true }).pack([
      [1, 'PutItem', { table: T, item: { user: 'a', ts: 1, m: { x: 1 } } }],
      [2, 'PutItem', { table: T, item: JSON.parse('{"user":"a","ts":2,"m":{"__proto__":1,"x":2}}') }],
    ]);
    const [first, second] = decodeClientRequests(bytes);
    expect(first).toEqual([1, 'PutItem', { table: T, item: { user: 'a', ts: 1, m: { x: 1 } } }]);
    expect(second).toMatchObject({ id: 2, code: 'ValidationError' });
  });

  it('refuses a frame with msgpackr\'s id and pointer extensions (one list held twice, or in itself) as MalformedRequest', () => {
    // Decoded, a list held by pointer would be walked once per holder (validateValue, the "__proto__" walk): a
    // cycle for ever, a few pointers per level 2^depth times. No client writes them.
    const shared = ['__proto__'];
    const bytes = new Packr({ useRecords: false, structuredClone: true }).pack([1, 'PutItem', { table: T, item: { user: 'a', ts: 1, l: [shared, shared] } }]);
    expect(bytes.includes(Buffer.of(0xd6, 0x70))).toBe(true);
    expect(() => decodeClientRequests(bytes)).toThrow(expect.objectContaining({ code: 'MalformedRequest' }));
  });

  it('through a coordinator: a record\'s "__proto__" is refused, a frame of a list in itself is MalformedRequest, and the coordinator goes on', async () => {
    const ws = new WebSocket(c.cluster.wsUrl, CLIENT_SUBPROTOCOL);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const answers: ClientResponseFrame[] = [];
    ws.on('message', (data: Buffer) => answers.push(...decodeClientResponses(data)));
    const user = 'u_raw';
    try {
      ws.send(new Packr({ useRecords: true }).pack([1, 'PutItem', { table: T, item: JSON.parse(`{"user":"${user}","ts":1,"m":{"__proto__":1,"x":2}}`) }]));
      // A list inside itself, and the text "__proto__" (the second decode's walk of it never ended).
      const l: unknown[] = [];
      l.push(l);
      ws.send(new Packr({ useRecords: false, structuredClone: true }).pack([2, 'PutItem', { table: T, item: { user, ts: 2, s: '__proto__', l } }]));
      ws.send(new Packr({ useRecords: false }).pack([3, 'PutItem', { table: T, item: { user, ts: 3, m: { x: 1 } } }]));
      for (let i = 0; i < 250 && answers.length < 3; i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      ws.close();
    }
    expect(answers).toHaveLength(3);
    const byId = new Map(answers.map((a) => [a[0], a.slice(1, 3)]));
    expect(byId).toEqual(new Map<number, unknown[]>([[1, [1, 'ValidationError']], [-1, [1, 'MalformedRequest']], [3, [0, {}]]]));
    expect(await itemsOf(c.client, user)).toEqual([{ user, ts: 3, m: { x: 1 }, __name: `${user}.3` }]);
  });
});

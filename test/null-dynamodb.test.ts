// bench/null-dynamodb.ts, the ceiling of bench:compare's DynamoDB comparison, as a
// real process driven by the AWS SDK v3: every request the comparison sends gets an
// answer the SDK accepts, of the comparison's shape, with DynamoDB's headers (a
// request id, the x-amz-crc32 of the body) over one kept-alive connection.
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { BatchWriteItemCommand, CreateTableCommand, DescribeTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnUntilReady, stopProcess } from '../coordinator/cli/local-cluster.js';

const SCRIPT = join(import.meta.dirname, '..', 'dist', 'bench', 'null-dynamodb.js');
const QUERY_ITEMS = 7;
let proc: ChildProcess;
let url: string;
let client: DynamoDBClient;

beforeAll(async () => {
  const started = await spawnUntilReady('null DynamoDB server', process.execPath, [SCRIPT, '--port', '0', '--query-items', String(QUERY_ITEMS), '--payload-bytes', '20'], /listening on (http:\/\/\S+)/);
  proc = started.child;
  url = started.match[1];
  client = new DynamoDBClient({ endpoint: url, region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1 });
});
afterAll(async () => {
  client?.destroy();
  if (proc) await stopProcess(proc);
});

describe('the null DynamoDB server', () => {
  it('answers the comparison\'s requests in a shape the SDK accepts', async () => {
    const created = await client.send(new CreateTableCommand({
      TableName: 'compare',
      AttributeDefinitions: [{ AttributeName: 'device', AttributeType: 'S' }, { AttributeName: 'seq', AttributeType: 'N' }],
      KeySchema: [{ AttributeName: 'device', KeyType: 'HASH' }, { AttributeName: 'seq', KeyType: 'RANGE' }],
      BillingMode: 'PAY_PER_REQUEST',
    }));
    expect(created.TableDescription?.TableStatus).toBe('ACTIVE');
    expect((await client.send(new DescribeTableCommand({ TableName: 'compare' }))).Table?.TableStatus).toBe('ACTIVE');
    const batch = await client.send(new BatchWriteItemCommand({ RequestItems: { compare: [{ PutRequest: { Item: { device: { S: 'd' }, seq: { N: '1' } } } }] } }));
    expect(batch.UnprocessedItems).toEqual({});
    await client.send(new PutItemCommand({ TableName: 'compare', Item: { device: { S: 'd' }, seq: { N: '2' }, payload: { S: 'x' } } }));
    const got = await client.send(new GetItemCommand({ TableName: 'compare', Key: { device: { S: 'd' }, seq: { N: '1' } } }));
    expect(got.Item).toEqual({ device: { S: 'range-0' }, seq: { N: '0' }, payload: { S: 'x'.repeat(20) } });
    const q = await client.send(new QueryCommand({ TableName: 'compare', KeyConditionExpression: 'device = :d', ExpressionAttributeValues: { ':d': { S: 'd' } }, Limit: QUERY_ITEMS }));
    expect(q.Count).toBe(QUERY_ITEMS);
    expect(q.Items?.map((i) => i.seq.N)).toEqual(Array.from({ length: QUERY_ITEMS }, (_, i) => String(i)));
  });

  it('sends DynamoDB\'s headers, a fresh request id each time, and keeps the connection for the next request', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    const post = (target: string) =>
      new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer; status: number }>((done, fail) => {
        const req = http.request(`${url}/`, { method: 'POST', agent, headers: { 'x-amz-target': target, 'content-type': 'application/x-amz-json-1.0' } }, (res) => {
          sockets.add(res.socket);
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => done({ headers: res.headers, body: Buffer.concat(chunks), status: res.statusCode ?? 0 }));
        });
        req.on('error', fail);
        req.end('{"TableName":"compare"}');
      });
    try {
      const a = await post('DynamoDB_20120810.GetItem');
      const b = await post('DynamoDB_20120810.GetItem');
      for (const r of [a, b]) {
        expect(r.status).toBe(200);
        expect(r.headers['content-type']).toBe('application/x-amz-json-1.0');
        expect(r.headers['x-amz-crc32']).toBe(String(crc32(r.body)));
      }
      expect(a.headers['x-amzn-requestid']).not.toBe(b.headers['x-amzn-requestid']);
      expect(sockets.size).toBe(1);
      const unknown = await post('DynamoDB_20120810.Scan');
      expect(unknown.status).toBe(400);
      expect(JSON.parse(unknown.body.toString()).__type).toMatch(/UnknownOperationException$/);
    } finally {
      agent.destroy();
    }
  });
});

// A null DynamoDB server for bench/compare.ts: it answers every request with a
// minimal valid DynamoDB answer made once at start-up, and stores nothing. The
// SDK client processes drive it exactly as they drive dynalite and keyslice, so
// its ops/s is the most any server could reach through that client shape on
// this machine: the ceiling of the comparison. What it costs per request is
// node:http's parsing and one write of a ready answer (its CPU per op is
// measured like the other servers').
//
// The answers are what the comparison's requests expect, with the comparison's
// item shape: PutItem `{}`, GetItem one item, Query `queryItems` items (the same
// items whatever the key asked), BatchWriteItem no unprocessed items,
// CreateTable and DescribeTable an ACTIVE table. Each carries DynamoDB's
// content type, a request id and the x-amz-crc32 of its body, as DynamoDB's do.
// It does not read the body (only drains it) and checks no signature.
//
//   node dist/bench/null-dynamodb.js --port P --query-items N --payload-bytes B
// prints "null DynamoDB server listening on http://127.0.0.1:P" once it listens.
import http from 'node:http';
import { crc32 } from 'node:zlib';
import { intArg, readCommandLine } from '../shared/cli-args.js';

const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

type Answer = { status: number; head: string[]; body: Buffer };

function answer(status: number, body: unknown): Answer {
  const text = Buffer.from(JSON.stringify(body));
  return { status, head: ['content-type', CONTENT_TYPE, 'x-amz-crc32', String(crc32(text)), 'content-length', String(text.length)], body: text };
}

/** The answers by operation, made once. */
export function nullAnswers(queryItems: number, payload: string): Map<string, Answer> {
  const item = (seq: number) => ({ device: { S: 'range-0' }, seq: { N: String(seq) }, payload: { S: payload } });
  const table = {
    TableName: 'null',
    TableStatus: 'ACTIVE',
    KeySchema: [{ AttributeName: 'device', KeyType: 'HASH' }, { AttributeName: 'seq', KeyType: 'RANGE' }],
    AttributeDefinitions: [{ AttributeName: 'device', AttributeType: 'S' }, { AttributeName: 'seq', AttributeType: 'N' }],
    BillingModeSummary: { BillingMode: 'PAY_PER_REQUEST' },
    ItemCount: 0,
    TableSizeBytes: 0,
    CreationDateTime: 0,
  };
  return new Map([
    ['PutItem', answer(200, {})],
    ['GetItem', answer(200, { Item: item(0) })],
    ['Query', answer(200, { Items: Array.from({ length: queryItems }, (_, i) => item(i)), Count: queryItems, ScannedCount: queryItems })],
    ['BatchWriteItem', answer(200, { UnprocessedItems: {} })],
    ['CreateTable', answer(200, { TableDescription: table })],
    ['DescribeTable', answer(200, { Table: table })],
  ]);
}

const unknown = answer(400, { __type: 'com.amazon.coral.service#UnknownOperationException', message: 'the null server answers only the comparison\'s operations' });

/** Listens on 127.0.0.1:`port` (0: any free port); resolves with the server once it listens. */
export function startNullServer(port: number, queryItems: number, payload: string): Promise<http.Server> {
  const answers = nullAnswers(queryItems, payload);
  let requests = 0;
  const server = http.createServer((req, res) => {
    const target = req.headers['x-amz-target'];
    const a = (typeof target === 'string' && target.startsWith(TARGET_PREFIX) && answers.get(target.slice(TARGET_PREFIX.length))) || unknown;
    // The body is not needed; reading it to its end keeps the connection usable for the next request.
    req.on('end', () => {
      res.writeHead(a.status, [...a.head, 'x-amzn-requestid', `NULL${(requests++).toString(36).toUpperCase()}`]);
      res.end(a.body);
    });
    req.resume();
  });
  // As long as the SDK's agent keeps an idle socket (its default), so that no socket closes under a run.
  server.keepAliveTimeout = 65_000;
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => done(server));
  });
}

function main(): void {
  const opts = readCommandLine(
    process.argv.slice(2),
    { port: { type: 'string', default: '0' }, 'query-items': { type: 'string', default: '100' }, 'payload-bytes': { type: 'string', default: '170' } },
    'usage: node dist/bench/null-dynamodb.js [--port 0] [--query-items 100] [--payload-bytes 170]',
  ).values;
  const port = intArg('port', opts.port, 0, 65_535);
  const queryItems = intArg('query-items', opts['query-items'], 0, 65_535);
  const payloadBytes = intArg('payload-bytes', opts['payload-bytes'], 0, 65_535);
  startNullServer(port, queryItems, 'x'.repeat(payloadBytes)).then(
    (server) => {
      console.log(`null DynamoDB server listening on http://127.0.0.1:${(server.address() as { port: number }).port}`);
      process.on('SIGTERM', () => server.close(() => process.exit(0)));
    },
    (err) => {
      console.error(`null-dynamodb: ${err instanceof Error ? err.message : err}`);
      process.exit(1);
    },
  );
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) main();

// The DynamoDB endpoint's edges, through real processes: a cluster with a
// client token (requests must be SigV4-signed with it), 16 slices and a
// per-slice write capacity. Bad signatures, unsigned requests, malformed JSON,
// unknown targets, wrong JSON types and oversized bodies each get DynamoDB's
// error, and the process keeps serving; a hot partition key is throttled with
// ProvisionedThroughputExceededException; DynamoDB-only table settings survive
// a coordinator restart.
import { crc32 } from 'node:zlib';
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { SignatureV4 } from '@smithy/signature-v4';
import type { SourceData } from '@smithy/types';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  CreateTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  ScanCommand,
  UpdateTableCommand,
  type AttributeValue,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { REQUEST_BYTES_MAX } from '../shared/limits.js';
import { signingKeysKept, verifySignature } from '../coordinator/dynamodb/sigv4.js';
import { dynamoClient, expectSdkError, rawRequest, sdkError } from './dynamodb-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { parseResponses, watchedConnect } from './raw-socket.js';

const TOKEN = 'ddb-token-1';
const SLICES = 16;
const WRITES_PER_SECOND = 40;
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-ddb-protocol-'));
let node: ManagedProcess;
let coordinator: ManagedProcess;
const T = 'ddb_proto';
const bearer = { authorization: `Bearer ${TOKEN}` };

async function startCoordinatorHere(): Promise<ManagedProcess> {
  return startCoordinator(join(dataDir, 'coordinator'), 0, [node.url], SLICES, undefined, ['--token', TOKEN]);
}

beforeAll(async () => {
  node = await startSliceNode({ name: 'slice-node', dataDir: join(dataDir, 'node'), port: 0, workers: 2, capacity: { readsPerSecond: 0, writesPerSecond: WRITES_PER_SECOND } });
  coordinator = await startCoordinatorHere();
  await dynamoClient(coordinator.url, TOKEN).send(
    new CreateTableCommand({
      TableName: T,
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      ProvisionedThroughput: { ReadCapacityUnits: 3, WriteCapacityUnits: 4 },
    }),
  );
});
afterAll(async () => {
  await Promise.all([coordinator, node].filter((p) => p !== undefined).map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
});

// After every case: both processes alive, and a signed request is still served.
afterEach(async () => {
  for (const p of [coordinator, node]) expect(p.child.exitCode, `${p.name} exited`).toBeNull();
  expect((await dynamoClient(coordinator.url, TOKEN).send(new ListTablesCommand({}))).TableNames).toContain(T);
});

describe('authentication', () => {
  it('requests signed with the token as the secret key are served; GET / is the studio page', async () => {
    const db = dynamoClient(coordinator.url, TOKEN);
    await db.send(new PutItemCommand({ TableName: T, Item: { id: { S: 'signed' }, v: { N: '1' } } }));
    expect((await db.send(new GetItemCommand({ TableName: T, Key: { id: { S: 'signed' } } }))).Item).toEqual({ id: { S: 'signed' }, v: { N: '1' } });
    // GET / is the studio's page (it takes the client token as ?token=); POST / stays DynamoDB's.
    const page = await fetch(`${coordinator.url}/?token=${TOKEN}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<title>keyslice studio<\/title>/);
    // HEAD / is the studio's too: its headers, and its 401 without the token.
    const head = await fetch(`${coordinator.url}/?token=${TOKEN}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect((await fetch(`${coordinator.url}/`, { method: 'HEAD' })).status).toBe(401);
  });

  it('a wrong secret, a tampered body, an old signature and no signature are refused with DynamoDB\'s errors', async () => {
    await expectSdkError(
      dynamoClient(coordinator.url, 'not-the-token').send(new ListTablesCommand({})),
      'InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
    // The body is changed after it was signed: the payload hash no longer matches.
    const tampering = dynamoClient(coordinator.url, TOKEN);
    tampering.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as { body: string; headers: Record<string, string> };
        request.body = request.body.replace('"tampered"', '"changed!"');
        return next(args);
      },
      { step: 'deserialize', name: 'tamper' },
    );
    await expectSdkError(tampering.send(new PutItemCommand({ TableName: T, Item: { id: { S: 'tampered' } } })), 'InvalidSignatureException');
    expect((await dynamoClient(coordinator.url, TOKEN).send(new GetItemCommand({ TableName: T, Key: { id: { S: 'changed!' } } }))).Item).toBeUndefined();

    const late = dynamoClient(coordinator.url, TOKEN);
    late.config.systemClockOffset = -20 * 60_000;
    await expectSdkError(late.send(new ListTablesCommand({})), 'InvalidSignatureException', /^Signature expired: \d{8}T\d{6}Z is now earlier than/);

    const unsigned = await rawRequest(coordinator.url, 'DynamoDB_20120810.ListTables', '{}');
    expect(unsigned).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#MissingAuthenticationTokenException', message: 'Request is missing Authentication Token' } });
    const wrongBearer = await rawRequest(coordinator.url, 'DynamoDB_20120810.ListTables', '{}', { authorization: 'Bearer nope' });
    expect(wrongBearer.body).toMatchObject({ __type: 'com.amazon.coral.service#UnrecognizedClientException', message: 'The security token included in the request is invalid.' });
    const incomplete = await rawRequest(coordinator.url, 'DynamoDB_20120810.ListTables', '{}', { authorization: 'AWS4-HMAC-SHA256 Credential=a/b/c/d/e' });
    expect(incomplete.body).toMatchObject({ __type: 'com.amazon.coral.service#IncompleteSignatureException' });
    expect(incomplete.body.message).toMatch(/Authorization header requires 'Signature' parameter/);
    const withBearer = await rawRequest(coordinator.url, 'DynamoDB_20120810.ListTables', '{}', bearer);
    expect(withBearer.status).toBe(200);
  });

  it('a signing key kept for one scope is never used for another, and signed headers are read as the SDK signs them', async () => {
    const ok = () => dynamoClient(coordinator.url, TOKEN);
    // The right secret first, so that the key of this day and region is kept; a wrong secret in that scope is still refused.
    await ok().send(new ListTablesCommand({}));
    await expectSdkError(dynamoClient(coordinator.url, `${TOKEN}x`).send(new ListTablesCommand({})), 'InvalidSignatureException');
    await ok().send(new ListTablesCommand({}));
    // Another region is another key (a key kept by day alone would refuse this): signed with the token, accepted;
    // with a wrong secret, refused.
    const inRegion = (secret: string) => {
      const c = dynamoClient(coordinator.url, secret);
      c.config.region = async () => 'eu-west-1';
      return c;
    };
    await inRegion(TOKEN).send(new ListTablesCommand({}));
    await expectSdkError(inRegion('other').send(new ListTablesCommand({})), 'InvalidSignatureException');
    // A signed header whose value has inner runs of spaces and outer spaces: canonical as SigV4 has it (trimmed, runs made one).
    const spaced = ok();
    spaced.middlewareStack.add(
      (next) => async (args) => {
        (args.request as { headers: Record<string, string> }).headers['x-amz-meta-note'] = '  two   spaces  and\tone  ';
        return next(args);
      },
      { step: 'build', name: 'spacedHeader' },
    );
    await spaced.send(new ListTablesCommand({}));
  });

  it('a signed request whose query string is not valid percent-encoding is refused with 400, not an internal error', async () => {
    const amzDate = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
    const authorization = `AWS4-HMAC-SHA256 Credential=key/${amzDate.slice(0, 8)}/local/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`;
    for (const query of ['%zz', 'a=%E0%A4%A', '%']) {
      const res = await fetch(`${coordinator.url}/?${query}`, {
        method: 'POST',
        headers: { 'x-amz-target': 'DynamoDB_20120810.ListTables', 'content-type': 'application/x-amz-json-1.0', 'x-amz-date': amzDate, authorization },
        body: '{}',
        signal: AbortSignal.timeout(30_000),
      });
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { __type: string }).__type, query).toBe('com.amazon.coral.service#InvalidSignatureException');
    }
  });
});

describe('bad requests get DynamoDB\'s errors and the process keeps serving', () => {
  const raw = (target: string | null, body: string | Buffer<ArrayBuffer>) => rawRequest(coordinator.url, target, body, bearer);

  it('malformed JSON, a body that is not an object, unknown and missing targets', async () => {
    expect(await raw('DynamoDB_20120810.GetItem', '{"TableName": ')).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#SerializationException' } });
    expect(await raw('DynamoDB_20120810.GetItem', '[1, 2]')).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#SerializationException' } });
    expect(await raw('DynamoDB_20120810.Frobnicate', '{}')).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#UnknownOperationException' } });
    expect(await raw('Something.Else', '{}')).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#UnknownOperationException' } });
    expect(await raw(null, '{}')).toMatchObject({ status: 400, body: { __type: 'com.amazon.coral.service#UnknownOperationException' } });
    const tx = await raw('DynamoDB_20120810.TransactWriteItems', '{}');
    expect(tx.body).toMatchObject({ __type: 'com.amazon.coral.validate#ValidationException', message: 'keyslice does not support transactions yet (TransactWriteItems); see docs/dynamodb.md' });
  });

  it('wrong JSON types and malformed AttributeValues', async () => {
    const cases: [string, object, string, string | RegExp][] = [
      ['GetItem', { TableName: 5, Key: {} }, 'SerializationException', /NUMBER_VALUE cannot be converted to String/],
      ['GetItem', { TableName: T, Key: { id: 'plain' } }, 'SerializationException', /STRING_VALUE cannot be converted to an AttributeValue/],
      ['PutItem', { TableName: T, Item: { id: { S: 5 } } }, 'SerializationException', /NUMBER_VALUE cannot be converted to String/],
      ['PutItem', { TableName: T, Item: { id: { S: 'a' }, n: { N: 5 } } }, 'SerializationException', /NUMBER_VALUE cannot be converted to String/],
      ['PutItem', { TableName: T, Item: { id: { S: 'a' }, x: {} } }, 'ValidationException', 'Supplied AttributeValue is empty, must contain exactly one of the supported datatypes'],
      ['PutItem', { TableName: T, Item: { id: { S: 'a' }, x: { S: 'a', N: '1' } } }, 'ValidationException', 'Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes'],
      ['PutItem', { TableName: T, Item: { id: { S: 'a' }, x: { NULL: false } } }, 'ValidationException', 'One or more parameter values were invalid: Null attribute value types must have the value of true'],
      ['Query', { TableName: T, Limit: 'ten' }, 'SerializationException', /STRING_VALUE cannot be converted to Integer/],
      ['Scan', { TableName: T, Limit: -1, Segment: 3, TotalSegments: 2 }, 'ValidationException', /^1 validation error detected: Value '-1' at 'limit'/],
    ];
    for (const [op, body, type, message] of cases) {
      const r = await raw(`DynamoDB_20120810.${op}`, JSON.stringify(body));
      expect(r.status, `${op} ${JSON.stringify(body)}`).toBe(400);
      expect(String(r.body.__type).split('#')[1], `${op} ${JSON.stringify(body)}`).toBe(type);
      if (typeof message === 'string') expect(r.body.message).toBe(message);
      else expect(r.body.message).toMatch(message);
    }
    expect((await raw('DynamoDB_20120810.GetItem', JSON.stringify({ TableName: T, Key: { id: { S: 'a' } } }))).status).toBe(200);
  });

  it('an oversized request is answered 413 and nothing is applied', async () => {
    const big = JSON.stringify({ TableName: T, Item: { id: { S: 'huge' }, v: { S: 'x'.repeat(REQUEST_BYTES_MAX) } } });
    const r = await raw('DynamoDB_20120810.PutItem', big);
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ __type: 'com.amazon.coral.service#RequestEntityTooLarge' });
    expect((await raw('DynamoDB_20120810.GetItem', JSON.stringify({ TableName: T, Key: { id: { S: 'huge' } } }))).body).toEqual({});
  });

  it('a body over the limit by its Content-Length is answered 413 at once, as the native API does, and the client reads it while it still sends', async () => {
    const { socket, chunks, error, closed } = await watchedConnect(coordinator.url);
    const size = 40 * 1024 * 1024;
    const head = ['POST / HTTP/1.1', `Host: ${new URL(coordinator.url).host}`, `Content-Length: ${size}`, 'X-Amz-Target: DynamoDB_20120810.PutItem', 'Content-Type: application/x-amz-json-1.0', `Authorization: ${bearer.authorization}`];
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    // The answer comes before any byte of the body.
    await waitFor(async () => parseResponses(Buffer.concat(chunks)).length === 1, 'the 413', 5_000);
    const [r] = parseResponses(Buffer.concat(chunks));
    expect([r.status, r.headers.connection, r.headers['content-type']]).toEqual([413, 'close', 'application/x-amz-json-1.0']);
    expect(JSON.parse(r.body)).toMatchObject({ __type: 'com.amazon.coral.service#RequestEntityTooLarge' });
    // The client goes on sending its 40 MB; the server reads them and closes cleanly.
    const piece = Buffer.alloc(1024 * 1024, 0x20);
    for (let sent = 0; sent < size; sent += piece.length) socket.write(piece);
    expect(await closed).toBe(true);
    expect(error()).toBeUndefined();
    expect(parseResponses(Buffer.concat(chunks))).toHaveLength(1);
  });

  it('answers carry DynamoDB\'s headers: content type, request id and the CRC32 of the body', async () => {
    const res = await fetch(coordinator.url + '/', {
      method: 'POST',
      headers: { 'x-amz-target': 'DynamoDB_20120810.DescribeTable', 'content-type': 'application/x-amz-json-1.0', ...bearer },
      body: JSON.stringify({ TableName: T }),
    });
    const body = Buffer.from(await res.arrayBuffer());
    expect(res.headers.get('content-type')).toBe('application/x-amz-json-1.0');
    expect(res.headers.get('x-amzn-requestid')).toMatch(/^[A-Z0-9_-]{20,}$/);
    expect(res.headers.get('x-amz-crc32')).toBe(String(crc32(body)));
  });
});

describe('keyslice features through the DynamoDB API', () => {
  it('a hot partition key is throttled with ProvisionedThroughputExceededException; spread keys are not', async () => {
    const db = dynamoClient(coordinator.url, TOKEN);
    const outcomes = async (keys: (i: number) => string) => {
      const names = await Promise.all(
        Array.from({ length: WRITES_PER_SECOND * 4 }, (_, i) => db.send(new PutItemCommand({ TableName: T, Item: { id: { S: keys(i) }, i: { N: String(i) } } })).then(() => 'ok', (e: Error) => e.name)),
      );
      return names;
    };
    // A second boundary can fall inside a burst, so a few bursts are allowed to find the limit.
    let hot: string[] = [];
    for (let round = 0; round < 5 && !hot.includes('ProvisionedThroughputExceededException'); round++) hot = await outcomes(() => 'hot');
    expect(hot.filter((n) => n === 'ProvisionedThroughputExceededException').length).toBeGreaterThan(0);
    expect(hot.every((n) => n === 'ok' || n === 'ProvisionedThroughputExceededException')).toBe(true);
    const e = await sdkError(
      (async () => {
        for (let i = 0; i < 500; i++) await db.send(new PutItemCommand({ TableName: T, Item: { id: { S: 'hot' } } }));
      })(),
    );
    expect(e).toMatchObject({ name: 'ProvisionedThroughputExceededException', status: 400 });

    // Batches to keys of one slice, sent while that slice is over its capacity: the throttled
    // writes come back as UnprocessedItems (all of them: as the exception); retried later, they get in.
    await initHashing();
    const sameSlice = Array.from({ length: 5000 }, (_, i) => `b${i}`).filter((k) => sliceOf('string', k, SLICES) === sliceOf('string', 'hot', SLICES));
    const written: string[] = [];
    let pending: WriteRequest[] = [];
    let throttled = 0;
    for (let attempt = 0; attempt < 10 && throttled === 0; attempt++) {
      const keys = sameSlice.splice(0, 25);
      written.push(...keys);
      await Promise.all(Array.from({ length: WRITES_PER_SECOND }, () => db.send(new PutItemCommand({ TableName: T, Item: { id: { S: 'hot' } } })).catch(() => undefined)));
      const requests = keys.map((k) => ({ PutRequest: { Item: { id: { S: k } } } }));
      const r = await db.send(new BatchWriteItemCommand({ RequestItems: { [T]: requests } })).catch((err: Error) => {
        expect(err.name).toBe('ProvisionedThroughputExceededException');
        return { UnprocessedItems: { [T]: requests } };
      });
      pending = r.UnprocessedItems?.[T] ?? [];
      if (pending.length > 0) throttled++;
    }
    expect(throttled).toBeGreaterThan(0);
    for (let attempt = 0; attempt < 50 && pending.length > 0; attempt++) {
      await new Promise((res) => setTimeout(res, 100 * (attempt + 1)));
      const r = await db.send(new BatchWriteItemCommand({ RequestItems: { [T]: pending } })).catch(() => ({ UnprocessedItems: { [T]: pending } }));
      pending = r.UnprocessedItems?.[T] ?? [];
    }
    expect(pending).toEqual([]);
    const got = await db.send(new BatchGetItemCommand({ RequestItems: { [T]: { Keys: written.slice(-25).map((k) => ({ id: { S: k } })) } } }));
    expect(got.Responses![T].length).toBe(25);

    await new Promise((r) => setTimeout(r, 1100)); // a new second of capacity
    const spread = await outcomes((i) => `cold-${i}`);
    expect(spread.filter((n) => n !== 'ok')).toEqual([]);
  });

  it('a Scan split into more segments than keyslice has (2000 over 16 slices) still covers every item once', async () => {
    const db = dynamoClient(coordinator.url, TOKEN);
    const ids = new Set<string>();
    for (const item of (await db.send(new ScanCommand({ TableName: T }))).Items!) ids.add(item.id.S!);
    expect(ids.size).toBeGreaterThan(20);
    const total = 2000;
    // The segments that hold a slice (s*16/2000 crosses a whole number), and a few that hold none.
    const nonEmpty = Array.from({ length: total }, (_, s) => s).filter((s) => Math.floor((s * SLICES) / total) !== Math.floor(((s + 1) * SLICES) / total));
    expect(nonEmpty.length).toBe(SLICES);
    const seen: string[] = [];
    const empty = [0, 1, 500, 1998].filter((s) => !nonEmpty.includes(s));
    expect(empty.length).toBe(4);
    for (const segment of [...nonEmpty, ...empty]) {
      let start: Record<string, AttributeValue> | undefined;
      for (let page = 0; page < 100; page++) {
        const r = await db.send(new ScanCommand({ TableName: T, Segment: segment, TotalSegments: total, Limit: 10, ExclusiveStartKey: start }));
        if (!nonEmpty.includes(segment)) expect(r.Items).toEqual([]);
        seen.push(...r.Items!.map((i) => i.id.S!));
        start = r.LastEvaluatedKey;
        if (start === undefined) break;
      }
    }
    expect(seen.sort()).toEqual([...ids].sort());
  });

  it('DynamoDB-only table settings (throughput) survive a coordinator restart', async () => {
    const db = dynamoClient(coordinator.url, TOKEN);
    await db.send(new UpdateTableCommand({ TableName: T, ProvisionedThroughput: { ReadCapacityUnits: 11, WriteCapacityUnits: 12 } }));
    await stopProcess(coordinator.child);
    coordinator = await startCoordinatorHere();
    const d = await dynamoClient(coordinator.url, TOKEN).send(new DescribeTableCommand({ TableName: T }));
    expect(d.Table!.ProvisionedThroughput).toMatchObject({ ReadCapacityUnits: 11, WriteCapacityUnits: 12 });
    expect(d.Table!.ItemCount).toBeGreaterThan(20);
  });
});

describe('the SigV4 check in one process (coordinator/dynamodb/sigv4.ts)', () => {
  /** The SDK's own signer (@smithy/signature-v4) over node:crypto, so that the canonical form is not this code's. */
  class Sha256 {
    private readonly h: Hash | Hmac;
    constructor(secret?: SourceData) {
      this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', secret as Uint8Array | string);
    }
    update(data: SourceData): void {
      this.h.update(data as Uint8Array | string);
    }
    async digest(): Promise<Uint8Array> {
      return new Uint8Array(this.h.digest());
    }
  }
  const SECRET = 'one-process-token';
  /** A request signed by the SDK's signer for `region` with `secret`, as node:http would give it: `raw` is its
   * header list (names as sent, a name repeated for each of its values), `headers` what the signer signed. */
  async function signed(region: string, secret: string, headers: Record<string, string>, raw?: string[]) {
    const signer = new SignatureV4({ credentials: { accessKeyId: 'k', secretAccessKey: secret }, region, service: 'dynamodb', sha256: Sha256 });
    const body = '{}';
    const r = await signer.sign({ method: 'POST', protocol: 'http:', hostname: '127.0.0.1', port: 8000, path: '/', query: {}, headers: { host: '127.0.0.1:8000', ...headers }, body });
    const rawHeaders = raw ?? Object.entries(r.headers).flat();
    const lower = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k.toLowerCase(), v]));
    if (raw !== undefined) for (const k of ['authorization', 'x-amz-date', 'x-amz-content-sha256', 'host']) if (lower[k] !== undefined) rawHeaders.push(k, lower[k]);
    return { req: { method: 'POST', url: '/', headers: lower, rawHeaders } as unknown as IncomingMessage, body: Buffer.from(body) };
  }

  it('keeps a signing key only once a signature made with it holds, and reads repeated signed headers as SigV4 joins them', async () => {
    const kept = signingKeysKept();
    // Refused signatures, each in a scope of its own (the region is the client's to choose): nothing kept.
    for (let i = 0; i < 8; i++) {
      const { req, body } = await signed(`nowhere-${i}`, 'not-the-secret', {});
      expect(() => verifySignature(req, body, SECRET, Date.now()), `region nowhere-${i}`).toThrow(/does not match/);
    }
    expect(signingKeysKept(), 'keys kept after 8 refused signatures').toBe(kept);
    const ok = await signed('eu-west-1', SECRET, {});
    verifySignature(ok.req, ok.body, SECRET, Date.now());
    expect(signingKeysKept(), 'keys kept after one that held').toBe(kept + 1);
    // Kept, it still refuses another secret in that scope.
    const wrong = await signed('eu-west-1', `${SECRET}x`, {});
    expect(() => verifySignature(wrong.req, wrong.body, SECRET, Date.now())).toThrow(/does not match/);
    // A header sent twice is one signed value, its values joined by a comma in the order sent (as the old
    // headersDistinct read had it); in the other order it is another value, refused.
    const twice = await signed('eu-west-1', SECRET, { 'x-amz-meta-note': 'a b,c' }, ['X-Amz-Meta-Note', ' a   b ', 'x-amz-meta-note', 'c']);
    verifySignature(twice.req, twice.body, SECRET, Date.now());
    const swapped = await signed('eu-west-1', SECRET, { 'x-amz-meta-note': 'a b,c' }, ['x-amz-meta-note', 'c', 'x-amz-meta-note', 'a b']);
    expect(() => verifySignature(swapped.req, swapped.body, SECRET, Date.now())).toThrow(/does not match/);
  });
});

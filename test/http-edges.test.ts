// The HTTP edges, spoken by hand over node:net: query strings and trailing
// slashes, 405 with Allow, Retry-After, 413 answered early and readable, bad
// framing and stalled requests answered with JSON errors, timeouts that free the
// connection, and refusals that tell a missing token from a wrong one. After
// every case the coordinator still serves.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { REQUEST_BYTES_MAX, RETRY_AFTER_SECONDS } from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { expectError } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { parseResponses, postHead, rawConnect, rawHttp, readAll, watchedConnect, type RawResponse } from './raw-socket.js';

const TOKEN = 'edge-token';
const SECRET = 'edge-secret';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const T = 'edges';
/** The coordinator's --http-headers-timeout-ms and --http-request-timeout-ms (10 s and 30 s by default, which the slow
 * clients' story waited out): apart, so that each 408 is told to come from its own. */
const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 5_000;
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-http-edges-'));
const procs: ManagedProcess[] = [];
let url: string;
let client: KeysliceClient;

beforeAll(async () => {
  const coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, [], 16, undefined, ['--token', TOKEN, '--cluster-secret', SECRET, '--http-headers-timeout-ms', String(HEADERS_TIMEOUT_MS), '--http-request-timeout-ms', String(REQUEST_TIMEOUT_MS)]);
  procs.push(coordinator);
  url = coordinator.url;
  // A low write capacity, so that a burst of writes to one key gets 429.
  procs.push(await startSliceNode({ name: 'node', dataDir: join(dataDir, 'node'), port: 0, workers: 1, coordinator: url, clusterSecret: SECRET, capacity: { readsPerSecond: 0, writesPerSecond: 5 } }));
  await waitFor(async () => (JSON.parse((await get('/cluster/status')).body) as { nodes: { up: boolean }[] }).nodes.some((n) => n.up), 'the node to join');
  client = await KeysliceClient.connect(url, { token: TOKEN });
  await client.createTable(T, { name: 'id', type: 'string' });
  await client.putItem(T, { id: 'kept', v: 1 });
});
afterAll(async () => {
  await client?.close();
  await Promise.all(procs.map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const p of procs) expect(p.child.exitCode, `${p.name} exited`).toBeNull();
  const r = await request('POST', '/api/GetItem', JSON.stringify({ table: T, key: 'kept' }));
  expect(r.status).toBe(200);
  expect(JSON.parse(r.body).item.v).toBe(1);
});

/** One request on its own connection (Connection: close), its one response. */
async function request(method: string, path: string, body = '', headers: Record<string, string | number> = AUTH): Promise<RawResponse> {
  const head = [`${method} ${path} HTTP/1.1`, `Host: ${new URL(url).host}`, 'Connection: close', `Content-Length: ${Buffer.byteLength(body)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  const { responses } = await rawHttp(url, [head.join('\r\n') + '\r\n\r\n' + body]);
  expect(responses).toHaveLength(1);
  return responses[0];
}
const get = (path: string, headers: Record<string, string> = AUTH) => request('GET', path, '', headers);
const errorOf = (r: RawResponse) => (JSON.parse(r.body) as { error: { code: string; message: string; retryable: boolean } }).error;

describe('paths', () => {
  it('ignores the query string and one trailing slash', async () => {
    for (const path of ['/api/ListTables?x=1', '/api/ListTables/', '/api/ListTables/?x=1&y', `http://${new URL(url).host}/api/ListTables?x=1`]) {
      const r = await request('POST', path, '{}');
      expect([path, r.status, JSON.parse(r.body)]).toEqual([path, 200, { tables: [T] }]);
    }
    expect((await get('/health?probe=1', {})).status).toBe(200);
    expect((await get('/health/', {})).status).toBe(200);
    expect((await get('/metrics/?x')).status).toBe(200);
    expect((await get('/cluster/status?x=1')).status).toBe(200);
    const unknown = await request('POST', '/api/ListTables//', '{}');
    expect([unknown.status, errorOf(unknown).code]).toEqual([400, 'UnknownOperation']);
  });

  it('answers a wrong method with 405 and the methods the path takes in Allow', async () => {
    const cases: [string, string, string][] = [
      ['GET', '/api/ListTables', 'POST'],
      ['PUT', '/api/PutItem', 'POST'],
      ['POST', '/metrics', 'GET, HEAD'],
      ['DELETE', '/health', 'GET, HEAD'],
      ['POST', '/cluster/status', 'GET, HEAD'],
      ['GET', '/cluster/drain', 'POST'],
    ];
    for (const [method, path, allow] of cases) {
      const r = await request(method, path, method === 'GET' ? '' : '{}', path === '/health' ? {} : AUTH);
      expect([method, path, r.status, r.headers.allow, errorOf(r).code]).toEqual([method, path, 405, allow, 'MethodNotAllowed']);
    }
    const join = await request('GET', '/cluster/join', '', { [CLUSTER_SECRET_HEADER]: SECRET });
    expect([join.status, join.headers.allow]).toEqual([405, 'POST']);
    const socket = await rawConnect(url);
    const reading = readAll(socket, 5_000);
    socket.write(`HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect((await reading).bytes.toString('latin1')).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('Retry-After', () => {
  it('comes with 429 ThroughputExceeded', async () => {
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => request('POST', '/api/PutItem', JSON.stringify({ table: T, item: { id: 'hot', n: i } }))));
    const refused = results.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(errorOf(r)).toMatchObject({ code: 'ThroughputExceeded', retryable: true });
      expect(r.headers['retry-after']).toBe(String(RETRY_AFTER_SECONDS));
    }
    for (const r of results.filter((r) => r.status === 200)) expect(r.headers['retry-after']).toBeUndefined();
  });
});

describe('a body over the request limit', () => {
  it('is answered 413 as soon as Content-Length says so, and the client reads it while it still sends', async () => {
    const { socket, chunks, error, closed } = await watchedConnect(url);
    const size = 40 * 1024 * 1024;
    socket.write(postHead(url, '/api/PutItem', { ...AUTH, 'content-type': 'application/json', 'content-length': size }));
    // The answer comes before any byte of the body.
    await waitFor(async () => parseResponses(Buffer.concat(chunks)).length === 1, 'the 413', 5_000);
    const [r] = parseResponses(Buffer.concat(chunks));
    expect([r.status, r.headers.connection, errorOf(r).code]).toEqual([413, 'close', 'RequestTooLarge']);
    // The client goes on sending its 40 MB; the server reads them and closes cleanly.
    const piece = Buffer.alloc(1024 * 1024, 0x20);
    for (let sent = 0; sent < size; sent += piece.length) socket.write(piece);
    expect(await closed).toBe(true);
    expect(error()).toBeUndefined();
    expect(parseResponses(Buffer.concat(chunks))).toHaveLength(1);
  });

  it('is answered 413 once a chunked body passes the limit, before it ends', async () => {
    const { socket, chunks, error, closed } = await watchedConnect(url);
    socket.write(postHead(url, '/api/PutItem', { ...AUTH, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }));
    const piece = Buffer.alloc(1024 * 1024, 0x20);
    for (let sent = 0; sent <= REQUEST_BYTES_MAX; sent += piece.length) socket.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]));
    await waitFor(async () => parseResponses(Buffer.concat(chunks)).length === 1, 'the 413', 10_000);
    const [r] = parseResponses(Buffer.concat(chunks));
    expect([r.status, r.headers.connection, errorOf(r).code]).toEqual([413, 'close', 'RequestTooLarge']);
    socket.write('0\r\n\r\n');
    expect(await closed).toBe(true);
    expect(error()).toBeUndefined();
  });
});

describe('requests the HTTP parser refuses get a JSON error', () => {
  const bad: [string, string, number, string][] = [
    ['a chunk size over 64 bits', `${postHead('http://127.0.0.1', '/api/PutItem', { ...AUTH, 'transfer-encoding': 'chunked' })}10000000000000000\r\n{}`, 400, 'MalformedRequest'],
    ['a chunk size that is not hex', `${postHead('http://127.0.0.1', '/api/PutItem', { ...AUTH, 'transfer-encoding': 'chunked' })}zz\r\n{}\r\n0\r\n\r\n`, 400, 'MalformedRequest'],
    ['a request line that is not HTTP', 'GARBAGE\r\n\r\n', 400, 'MalformedRequest'],
    ['both Content-Length and chunked', `${postHead('http://127.0.0.1', '/api/ListTables', { ...AUTH, 'content-length': 2, 'transfer-encoding': 'chunked' })}2\r\n{}\r\n0\r\n\r\n`, 400, 'MalformedRequest'],
  ];
  for (const [what, bytes, status, code] of bad) {
    it(what, async () => {
      const { responses, closed } = await rawHttp(url, [bytes], 5_000);
      expect(closed).toBe(true);
      expect(responses).toHaveLength(1);
      expect([responses[0].status, responses[0].headers.connection, errorOf(responses[0]).code]).toEqual([status, 'close', code]);
    });
  }

  // A half-close: the client says it has nothing more to send.
  for (const [what, size] of [['a chunked body cut short by the end of the connection', '20'], ['a chunk of 2^64-1 bytes cut short by the end of the connection', 'ffffffffffffffff']]) {
    it(what, async () => {
      const socket = await rawConnect(url);
      const reading = new Promise<Buffer>((resolve) => {
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('close', () => resolve(Buffer.concat(chunks)));
        setTimeout(() => resolve(Buffer.concat(chunks)), 5_000);
      });
      socket.end(`${postHead(url, '/api/PutItem', { ...AUTH, 'transfer-encoding': 'chunked' })}${size}\r\n{"table": "edges"`);
      const responses = parseResponses(await reading);
      socket.destroy();
      expect(responses).toHaveLength(1);
      expect([responses[0].status, errorOf(responses[0]).code]).toEqual([400, 'MalformedRequest']);
    });
  }
});

describe('slow clients', () => {
  it(`are answered 408 and cut off: headers after ${HEADERS_TIMEOUT_MS} ms, a body that stops after ${REQUEST_TIMEOUT_MS} ms`, async () => {
    const started = Date.now();
    const slowHeaders = rawHttp(url, [`POST /api/ListTables HTTP/1.1\r\nHost: x\r\n`], HEADERS_TIMEOUT_MS + 10_000);
    const stalledBody = rawHttp(url, [postHead(url, '/api/PutItem', { ...AUTH, 'content-length': 100 }) + '{"table": '], REQUEST_TIMEOUT_MS + 10_000);
    // The parser takes a chunk of 2^64-1 bytes as possible: the body just never ends.
    const endlessChunk = rawHttp(url, [postHead(url, '/api/PutItem', { ...AUTH, 'transfer-encoding': 'chunked' }) + 'ffffffffffffffff\r\n{}'], REQUEST_TIMEOUT_MS + 10_000);
    const headers = await slowHeaders;
    const headersMs = Date.now() - started;
    const [body, chunk] = await Promise.all([stalledBody, endlessChunk]);
    const bodyMs = Date.now() - started;
    for (const r of [headers, body, chunk]) {
      expect(r.closed).toBe(true);
      expect(r.responses).toHaveLength(1);
      expect([r.responses[0].status, errorOf(r.responses[0]).code]).toEqual([408, 'RequestTimeout']);
      expect(errorOf(r.responses[0]).message).toContain(`headers within ${HEADERS_TIMEOUT_MS} ms, all of it within ${REQUEST_TIMEOUT_MS} ms`);
    }
    expect(headersMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 500);
    expect(bodyMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 500);
  }, REQUEST_TIMEOUT_MS + 20_000);
});

describe('a missing token is told apart from a wrong one', () => {
  it('over HTTP', async () => {
    const missing = await request('POST', '/api/ListTables', '{}', {});
    const wrong = await request('POST', '/api/ListTables', '{}', { authorization: 'Bearer nope' });
    const notBearer = await request('POST', '/api/ListTables', '{}', { authorization: TOKEN });
    for (const r of [missing, wrong, notBearer]) expect([r.status, errorOf(r).code]).toEqual([401, 'Unauthorized']);
    expect(errorOf(missing).message).toMatch(/token is missing/);
    expect(errorOf(notBearer).message).toMatch(/token is missing.*Bearer/);
    expect(errorOf(wrong).message).toMatch(/token is wrong/);
    const noSecret = await request('POST', '/cluster/join', '{}', {});
    const wrongSecret = await request('POST', '/cluster/join', '{}', { [CLUSTER_SECRET_HEADER]: 'nope' });
    expect([noSecret.status, errorOf(noSecret).message]).toEqual([401, expect.stringMatching(/secret is missing/)]);
    expect([wrongSecret.status, errorOf(wrongSecret).message]).toEqual([401, expect.stringMatching(/secret is wrong/)]);
  });

  it('over the WebSocket handshake', async () => {
    expect((await expectError(KeysliceClient.connect(url), 'Unauthorized')).message).toMatch(/token is missing/);
    expect((await expectError(KeysliceClient.connect(url, { token: 'nope' }), 'Unauthorized')).message).toMatch(/token is wrong/);
    expect((await expectError(KeysliceClient.connect(`${url.replace(/^http/, 'ws')}/ws?token=nope`), 'Unauthorized')).message).toMatch(/token is wrong/);
    const viaQuery = await KeysliceClient.connect(`${url.replace(/^http/, 'ws')}/ws?token=${TOKEN}`);
    expect(await viaQuery.listTables()).toEqual([T]);
    await viaQuery.close();
  });
});

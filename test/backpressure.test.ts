// Backpressure on responses, through real processes: a client that pipelines
// many GetItem requests of a 64 KB item and does not read the answers must not
// grow the coordinator's memory; once it reads, every answer arrives exactly once.
// KEYSLICE_BACKPRESSURE_REQUESTS=100000 runs the size of the original report.
import { beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_SUBPROTOCOL, decodeClientResponses, encodeClientFrame, RESULT_OK } from '../shared/protocol.js';
import { HTTP_API_PREFIX } from '../shared/protocol.js';
import { useCluster } from './cluster-fixture.js';
import { clientFrame, HttpResponseReader, memoryMb, postHead, rawConnect, rawWebSocket, resetMemoryPeak, ServerFrameReader } from './raw-socket.js';
import type { Socket } from 'node:net';

const REQUESTS = Number(process.env.KEYSLICE_BACKPRESSURE_REQUESTS ?? 10_000);
const ITEM_BYTES = 64 * 1024;
const RSS_MB_MAX = 300;
/** How long the client writes without reading before it starts to read. */
const NOT_READING_MS = 3_000;
const READ_TIMEOUT_MS = 240_000;
const TEST_TIMEOUT_MS = NOT_READING_MS + READ_TIMEOUT_MS + 30_000;
const T = 'backpressure';

// No routers: the memory measured is that of the process that serves the clients.
const c = useCluster({ nodes: 2, workers: 1, routers: 0 });

beforeAll(async () => {
  await c.client.createTable(T, { name: 'pk', type: 'string' });
  await c.client.putItem(T, { pk: 'big', blob: new Uint8Array(ITEM_BYTES).fill(7) });
});

/** Writes `requests` in pieces while the socket is paused; waits NOT_READING_MS watching the coordinator's memory. */
async function writeWithoutReading(socket: Socket, requests: Buffer[]): Promise<number> {
  const pid = c.cluster.coordinator.child.pid!;
  resetMemoryPeak(pid);
  for (let i = 0; i < requests.length; i += 1000) socket.write(Buffer.concat(requests.slice(i, i + 1000)));
  let maxRss = 0;
  const until = Date.now() + NOT_READING_MS;
  while (Date.now() < until) {
    maxRss = Math.max(maxRss, memoryMb(pid).rss);
    await new Promise((r) => setTimeout(r, 50));
  }
  return maxRss;
}

/** Resumes reading; resolves when `done()` says so, fails after READ_TIMEOUT_MS. */
function readUntil(socket: Socket, onChunk: (c: Buffer) => void, done: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('answers did not all arrive in time'));
    }, READ_TIMEOUT_MS);
    socket.on('data', (chunk: Buffer) => {
      onChunk(chunk);
      if (done()) {
        clearTimeout(timer);
        socket.destroy();
        resolve();
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.resume();
  });
}

describe('a client that does not read its answers', () => {
  it(`WebSocket: ${REQUESTS} GetItem of a 64 KB item keep the coordinator under ${RSS_MB_MAX} MB; then every answer arrives once`, async () => {
    const started = Date.now();
    const { socket, rest } = await rawWebSocket(c.cluster.wsUrl, CLIENT_SUBPROTOCOL);
    expect(rest.length).toBe(0);
    const requests = Array.from({ length: REQUESTS }, (_, id) => clientFrame(encodeClientFrame([id, 'GetItem', { table: T, key: 'big' }])));
    const rssWhileNotReading = await writeWithoutReading(socket, requests);

    const seen = new Uint8Array(REQUESTS);
    let answers = 0;
    let bad = 0;
    const reader = new ServerFrameReader((payload) => {
      for (const [id, ok, result] of decodeClientResponses(payload)) {
        seen[id]++;
        answers++;
        if (ok !== RESULT_OK || (result as { item: { blob: Uint8Array } }).item.blob.length !== ITEM_BYTES) bad++;
      }
    });
    await readUntil(socket, (chunk) => reader.push(chunk), () => answers >= REQUESTS);
    const mem = memoryMb(c.cluster.coordinator.child.pid!);
    console.log(`WebSocket backpressure: ${REQUESTS} requests, coordinator RSS max ${rssWhileNotReading.toFixed(0)} MB while not reading, peak ${mem.peak.toFixed(0)} MB; ${Date.now() - started} ms`);
    expect(bad).toBe(0);
    expect(seen.every((n) => n === 1)).toBe(true);
    expect(mem.peak).toBeLessThan(RSS_MB_MAX);
  }, TEST_TIMEOUT_MS);

  it(`HTTP keep-alive: ${REQUESTS} pipelined GetItem keep the coordinator under ${RSS_MB_MAX} MB; then every answer arrives once`, async () => {
    const started = Date.now();
    const socket = await rawConnect(c.cluster.url);
    socket.pause();
    const body = JSON.stringify({ table: T, key: 'big' });
    const request = Buffer.from(postHead(c.cluster.url, `${HTTP_API_PREFIX}GetItem`, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }) + body);
    const rssWhileNotReading = await writeWithoutReading(socket, Array.from({ length: REQUESTS }, () => request));

    let answers = 0;
    let bad = 0;
    const reader = new HttpResponseReader((r) => {
      answers++;
      if (r.status !== 200 || Buffer.from((JSON.parse(r.body) as { item: { blob: { $binary: string } } }).item.blob.$binary, 'base64').length !== ITEM_BYTES) bad++;
    });
    await readUntil(socket, (chunk) => reader.push(chunk), () => answers >= REQUESTS);
    const mem = memoryMb(c.cluster.coordinator.child.pid!);
    console.log(`HTTP backpressure: ${REQUESTS} requests, coordinator RSS max ${rssWhileNotReading.toFixed(0)} MB while not reading, peak ${mem.peak.toFixed(0)} MB; ${Date.now() - started} ms`);
    expect(bad).toBe(0);
    expect(answers).toBe(REQUESTS);
    expect(mem.peak).toBeLessThan(RSS_MB_MAX);
  }, TEST_TIMEOUT_MS);
});

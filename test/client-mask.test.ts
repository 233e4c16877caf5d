// ClientOptions.maskFrames: the TypeScript client masks its frames with a random
// key by default (RFC 6455); with maskFrames false it sends the zero mask, which
// the router's WebSocket library does not XOR off. Through a real router (one
// router process beside the coordinator), with the bytes read on the way by a
// TCP relay: every client frame carries the mask bit, and its key is zero
// exactly when asked, and requests work either way.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { useCluster } from './cluster-fixture.js';

const c = useCluster({ nodes: 1, workers: 1, slices: 4, routers: 1 });
const T = 'masked';
const relays: net.Server[] = [];

afterAll(async () => {
  for (const r of relays) await new Promise((done) => r.close(done));
});

/** A TCP relay to the cluster's client port that keeps what the client sent; its address. */
async function relay(): Promise<{ url: string; sent: () => Buffer }> {
  const target = new URL(c.cluster.url);
  const chunks: Buffer[] = [];
  const server = net.createServer((socket) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    socket.on('data', (b) => chunks.push(b));
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  });
  relays.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as net.AddressInfo;
  return { url: `http://127.0.0.1:${port}`, sent: () => Buffer.concat(chunks) };
}

/** The mask keys of the client's frames after the handshake (RFC 6455 5.2: every client frame has the mask bit). */
function maskKeys(sent: Buffer): Buffer[] {
  let at = sent.indexOf('\r\n\r\n') + 4;
  expect(at).toBeGreaterThan(3);
  const keys: Buffer[] = [];
  for (let frames = 0; at < sent.length && frames < 1000; frames++) {
    const second = sent[at + 1];
    expect(second & 0x80, 'a client frame has the mask bit').toBe(0x80);
    let length = second & 0x7f;
    let head = 2;
    if (length === 126) [length, head] = [sent.readUInt16BE(at + 2), 4];
    else if (length === 127) [length, head] = [Number(sent.readBigUInt64BE(at + 2)), 10];
    keys.push(sent.subarray(at + head, at + head + 4));
    at += head + 4 + length;
  }
  return keys;
}

describe('a client\'s frame mask', () => {
  it('is random by default and zero with maskFrames false; requests work either way', async () => {
    await c.client.createTable(T, { name: 'id', type: 'string' });
    for (const maskFrames of [undefined, false]) {
      const r = await relay();
      const client = await KeysliceClient.connect(r.url, maskFrames === undefined ? {} : { maskFrames });
      try {
        for (let i = 0; i < 5; i++) await client.putItem(T, { id: `k${i}`, v: 'x'.repeat(100), masked: maskFrames ?? true });
        expect(await client.getItem(T, { id: 'k3' })).toMatchObject({ id: 'k3', masked: maskFrames ?? true });
      } finally {
        await client.close();
      }
      const keys = maskKeys(r.sent());
      expect(keys.length).toBeGreaterThanOrEqual(6);
      const zero = keys.filter((k) => k.readUInt32BE(0) === 0).length;
      // A random key is zero once in 2^32 frames.
      expect(zero).toBe(maskFrames === false ? keys.length : 0);
    }
  });
});

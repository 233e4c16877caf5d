// Replication links between slice nodes' workers carry the node protocol's version both ways: the dialing worker
// names it in NODE_PROTOCOL_HEADER (a real slice node refuses a link of another version, as its workers' batch ports
// do), and it sends nothing, and dials none of the peer's batch ports, until the peer's Hello shows the same version
// (a peer that does not check the header, here a stand-in server that greets with another version, gets no frame).
// A Replicate frame's records mean different things in different versions.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, encodeNodeFrame, encodeReplicationMessage, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame } from '../shared/protocol.js';
import { PeerLinks } from '../slice-worker/peer-links.js';
import { dialNode, peerHeaders } from './node-dial.js';

const WAIT_MS = 10_000;
let root: string;
let node: ManagedProcess;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'keyslice-peer-protocol-'));
  node = await startSliceNode({ name: 'node', dataDir: join(root, 'node'), port: 0, workers: 1 });
});

afterAll(async () => {
  await stopProcess(node.child);
  rmSync(root, { recursive: true, force: true });
});

/** Dials the node as a peer naming `version`: the HTTP status of a refusal, or its first frame (its Hello). */
async function dial(version: string): Promise<{ status: number } | { hello: unknown[] }> {
  const r = await dialNode(node.url, peerHeaders('', version), true);
  if ('status' in r) return r;
  r.ws.close();
  return { hello: r.first! };
}

describe('replication links name their node protocol version', () => {
  it('a slice node refuses a peer of another version (HTTP 400) and greets one of its own', async () => {
    expect(await dial(String(NODE_PROTOCOL_VERSION - 1))).toEqual({ status: 400 });
    expect(await dial('not a number')).toEqual({ status: 400 });
    const ok = await dial(String(NODE_PROTOCOL_VERSION));
    expect('hello' in ok && ok.hello.slice(0, 2)).toEqual([NodeFrame.Hello, NODE_PROTOCOL_VERSION]);
  });

  it('a node sends no frame to a peer whose Hello names another version, and says so', async () => {
    const received: Buffer[] = [];
    let dialed = 0;
    let header: string | string[] | undefined;
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => server.once('listening', () => r()));
    server.on('connection', (ws, req) => {
      dialed++;
      header = req.headers[NODE_PROTOCOL_HEADER];
      // A Hello as a node of the previous version sends it.
      ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION - 1, 1, '0'.repeat(32), null, [1]]));
      ws.on('message', (data: Buffer) => received.push(data));
    });
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l));
    try {
      const { port } = server.address() as { port: number };
      links.setPeers([[1, `ws://127.0.0.1:${port}`]]);
      const entry: [number, Uint8Array] = [0, encodeReplicationMessage({ type: 'KeepAliveOk', term: 1, sentAt: 0 })];
      const until = Date.now() + WAIT_MS;
      while (!lines.some((l) => l.includes(`speaks node protocol ${NODE_PROTOCOL_VERSION - 1}`))) {
        links.send(1, [entry]);
        if (Date.now() > until) throw new Error(`the link did not report the peer's version within ${WAIT_MS} ms: ${lines.join(' | ')}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(dialed).toBeGreaterThanOrEqual(1);
      expect(header).toBe(String(NODE_PROTOCOL_VERSION));
      expect(received).toEqual([]);
    } finally {
      links.close();
      await new Promise((r) => server.close(r));
    }
  });
});

// Replication links between slice nodes' workers carry the node protocol's version both ways: the dialing worker
// names it in NODE_PROTOCOL_HEADER (a real slice node refuses a link of another version, as its workers' batch ports
// do), and it sends nothing, and dials none of the peer's batch ports, until the peer's Hello shows the same version
// (a peer that does not check the header, here a stand-in server that greets with another version, gets no frame).
// A Replicate frame's records mean different things in different versions.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, encodeNodeFrame, encodeReplicationMessage, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame } from '../shared/protocol.js';
import { PEER_LINK_QUEUE_BYTES_MAX, PEER_LINK_QUEUED_MESSAGE_BYTES, SLICE_COUNT_MAX } from '../shared/limits.js';
import { checkReplicationMessage, foldedWidth, unfoldAt, type FoldableMessage } from '../shared/replication-protocol.js';
import { workerOf } from '../shared/hashing.js';
import { byWorker, PeerLinks, type PeerEntry } from '../slice-worker/peer-links.js';
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
    const links = new PeerLinks('', 0, (l) => lines.push(l), 1);
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

  it('a link whose peer never greets, or whose worker ports cannot be reached, says so and dials again', async () => {
    // A peer that opens the connection and then says nothing (a stuck process, a proxy that holds it).
    const silent = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => silent.once('listening', () => r()));
    let silentDials = 0;
    silent.on('connection', () => void silentDials++);
    // A peer whose Hello names a worker port nobody listens on (a firewall that lets only the node port through).
    const closedPort = await new Promise<number>((r) => {
      const probe = new WebSocketServer({ host: '127.0.0.1', port: 0 }, () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => r(port));
      });
    });
    const walled = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((r) => walled.once('listening', () => r()));
    let walledDials = 0;
    walled.on('connection', (ws) => {
      walledDials++;
      ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 1, '0'.repeat(32), null, [closedPort]]));
    });
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), 1);
    try {
      links.setPeers([
        [1, `ws://127.0.0.1:${(silent.address() as { port: number }).port}`],
        [2, `ws://127.0.0.1:${(walled.address() as { port: number }).port}`],
      ]);
      const until = Date.now() + 3 * WAIT_MS;
      const said = (what: RegExp) => lines.some((l) => what.test(l));
      while (!(said(/peer 1 at .* sent no Hello within/) && said(new RegExp(`worker 0 of peer 2 \\(127\\.0\\.0\\.1:${closedPort}\\): ECONNREFUSED`)))) {
        if (Date.now() > until) throw new Error(`not said within ${3 * WAIT_MS} ms: ${lines.join(' | ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      // Dialed again after the silent one was dropped.
      const again = Date.now() + WAIT_MS;
      // Both dialed again: the silent one after it was dropped, the walled one after its worker port refused.
      while ((silentDials < 2 || walledDials < 2) && Date.now() < again) await new Promise((r) => setTimeout(r, 50));
      expect(silentDials).toBeGreaterThanOrEqual(2);
      expect(walledDials).toBeGreaterThanOrEqual(2);
    } finally {
      links.close();
      await Promise.all([silent, walled].map((s) => new Promise((r) => s.close(r))));
    }
  });
});

describe('a link that dials again (the peer restarted)', () => {
  it("holds what is sent meanwhile within its share, counting each KeepAlive as PEER_LINK_QUEUED_MESSAGE_BYTES, and sends it by the restarted peer's worker count", async () => {
    // A stand-in peer node: its first process greets with one worker, then goes (its connections close); its next
    // one greets, when the story says, with three. Each worker's batch port records the Replicate frames it gets.
    const listen = async () => {
      const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
      await new Promise<void>((r) => server.once('listening', () => r()));
      return server;
    };
    const workerPorts = await Promise.all([0, 1, 2, 3].map(() => listen()));
    const got: [number, FoldableMessage][][] = workerPorts.map(() => []);
    const sockets: WebSocket[] = [];
    workerPorts.forEach((server, i) =>
      server.on('connection', (ws) => {
        sockets.push(ws);
        ws.on('message', (data: Buffer) => {
          const frame = decodeNodeFrame(data, 'worker');
          if (frame[0] !== NodeFrame.Replicate) throw new Error(`worker port ${i} got frame ${frame[0]}`);
          for (const [, m] of frame[2]) {
            if (m instanceof Uint8Array || !('slices' in m)) throw new Error(`worker port ${i} got an unfolded message`);
            for (let k = 0; k < m.slices.length; k += foldedWidth(m.type)) got[i].push([m.slices[k], unfoldAt(m, k)]);
          }
        });
      }),
    );
    const portOf = (s: WebSocketServer) => (s.address() as { port: number }).port;
    const node = await listen();
    const nodeSockets: WebSocket[] = [];
    let greetAgain: (() => void) | null = null;
    node.on('connection', (ws) => {
      nodeSockets.push(ws);
      const hello = (ports: number[]) => ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, ports.length, '0'.repeat(32), null, ports]));
      if (nodeSockets.length === 1) hello([portOf(workerPorts[0])]);
      else greetAgain = () => hello(workerPorts.slice(1).map(portOf));
    });
    // 65,536 workers on this node: this worker's share of PEER_LINK_QUEUE_BYTES_MAX is 1,024 bytes, 7 KeepAlives.
    const WORKERS = 65_536;
    const fits = Math.floor(Math.floor(PEER_LINK_QUEUE_BYTES_MAX / WORKERS) / PEER_LINK_QUEUED_MESSAGE_BYTES);
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), WORKERS);
    const keepAlive = (slice: number, term: number): [number, FoldableMessage] => [slice, { type: 'KeepAlive', term, commitIndex: slice * 3, sentAt: 1_000 + slice, leased: slice % 2 === 0 }];
    /** Waits until `done`, at most WAIT_MS. */
    const until = async (what: string, done: () => boolean) => {
      const end = Date.now() + WAIT_MS;
      while (!done()) {
        if (Date.now() > end) throw new Error(`not ${what} within ${WAIT_MS} ms: ${lines.join(' | ')}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      links.setPeers([[1, `ws://127.0.0.1:${portOf(node)}`]]);
      // Open to the first process: a turn sent is folded for its one worker.
      await until('open', () => sockets.length === 1);
      const first = [0, 1, 2].map((slice) => keepAlive(slice, 1));
      // (Sent at once, or held the moment until the link sees its batch port open: either way once.)
      links.send(1, first);
      await until('sent to the first process', () => got[0].length >= first.length);
      expect(got[0]).toEqual(first);
      // The peer restarts: its connections close, and the link dials again and waits for the Hello.
      for (const ws of [...nodeSockets, ...sockets]) ws.terminate();
      await until('dialed again', () => greetAgain !== null);
      // Sent while it dials: what fits its share waits, the rest is dropped (one message each).
      const meanwhile = Array.from({ length: 20 }, (_, slice) => keepAlive(slice, 2));
      for (const e of meanwhile) links.send(1, [e]);
      greetAgain!();
      await until('sent to the restarted process', () => got.slice(1).reduce((n, g) => n + g.length, 0) >= fits);
      await new Promise((r) => setTimeout(r, 100)); // (nothing more comes)
      expect(fits).toBe(7);
      for (let w = 0; w < 3; w++) {
        // Each worker of the restarted process gets its own slices of what waited, as sent, folded.
        expect(got[w + 1], `worker ${w}`).toEqual(meanwhile.slice(0, fits).filter(([slice]) => workerOf(slice, 3) === w));
      }
      expect(got[0]).toEqual(first);
      // The drop is said (with the next problem line of the link): the peer goes again and its next process is not there.
      for (const ws of [...nodeSockets, ...sockets]) ws.terminate();
      await new Promise<void>((r) => node.close(() => r()));
      await until('said', () => lines.some((l) => l.includes(`(${meanwhile.length - fits} messages or frames for it dropped since the last such line)`)));
    } finally {
      links.close();
      await Promise.all([node, ...workerPorts].map((s) => new Promise((r) => s.close(r))));
    }
  });
});

/** The first place where lists `a` and `b` differ (a mismatch said in a line, not a diff of 65,000 entries), or null. */
function firstDifference(a: unknown[], b: unknown[]): string | null {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) return `at ${i}: ${JSON.stringify(a[i])}, not ${JSON.stringify(b[i])}`;
  return a.length === b.length ? null : `${a.length} entries, not ${b.length}`;
}

describe("a link's frames to a peer of several workers (byWorker)", () => {
  it("fold a turn's KeepAlives and AppendOks once per worker there, each entry whole and only that worker's slices, and keep the messages' bytes in order", () => {
    const WORKERS = 3;
    const bytes = (n: number) => Uint8Array.of(n);
    const sent: PeerEntry[] = [];
    const want: [number, FoldableMessage][][] = Array.from({ length: WORKERS }, () => []);
    const wantBytes: [number, Uint8Array][][] = Array.from({ length: WORKERS }, () => []);
    // More AppendOks for worker 0's slice than one entry holds (a follower that caught up in one turn).
    for (let i = 0; i < SLICE_COUNT_MAX + 10; i++) {
      const slice = 0;
      const m: FoldableMessage = { type: 'AppendOk', term: 2, matchIndex: i, commitIndex: i >> 1, sentAt: 1000 + i };
      sent.push([slice, m]);
      want[workerOf(slice, WORKERS)].push([slice, m]);
    }
    for (let slice = 0; slice < 40; slice++) {
      const m: FoldableMessage = slice % 2 === 0 ? { type: 'KeepAlive', term: 3, commitIndex: slice, sentAt: 7 + slice, leased: slice % 4 === 0 } : { type: 'AppendOk', term: 3, matchIndex: slice + 1, commitIndex: slice, sentAt: 9 };
      sent.push([slice, m], [slice, bytes(slice)]);
      want[workerOf(slice, WORKERS)].push([slice, m]);
      wantBytes[workerOf(slice, WORKERS)].push([slice, bytes(slice)]);
    }
    const lists = byWorker(sent, WORKERS);
    expect(lists).toHaveLength(WORKERS);
    for (let w = 0; w < WORKERS; w++) {
      const got: [number, FoldableMessage][] = [];
      const gotBytes: [number, Uint8Array][] = [];
      let folded = 0;
      for (const [slice, m] of lists[w]) {
        if (m instanceof Uint8Array) {
          gotBytes.push([slice, m]);
          continue;
        }
        folded++;
        expect(checkReplicationMessage(m)).toBeNull();
        expect(slice).toBe(m.slices[0]);
        for (let i = 0; i < m.slices.length; i += foldedWidth(m.type)) {
          expect(workerOf(m.slices[i], WORKERS)).toBe(w);
          got.push([m.slices[i], unfoldAt(m, i)]);
        }
      }
      expect(gotBytes).toEqual(wantBytes[w]);
      // Each kind's messages in the order sent (the folded entries' order among kinds is not the messages').
      for (const type of ['KeepAlive', 'AppendOk']) expect(firstDifference(got.filter(([, m]) => m.type === type), want[w].filter(([, m]) => m.type === type)), `worker ${w}'s ${type}s`).toBeNull();
      // One entry of each kind a worker got, but the AppendOks past one entry's SLICE_COUNT_MAX.
      expect(folded).toBe(w === 0 ? 3 : 2);
    }
  });
});

// Replication links between slice nodes' workers carry the node protocol's version both ways: the dialing worker
// names it in NODE_PROTOCOL_HEADER (a real slice node refuses a link of another version, as its workers' batch ports
// do), and it sends nothing, and dials none of the peer's batch ports, until the peer's Hello shows the same version
// (a peer that does not check the header, here a stand-in server that greets with another version, gets no frame).
// A Replicate frame's records mean different things in different versions.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { WebSocketServer, type WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { decodeNodeFrame, encodeNodeFrame, encodeReplicationMessage, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, type NodeFrameMessage } from '../shared/protocol.js';
import { PEER_LINK_QUEUE_BYTES_MAX, PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES, PEER_LINK_QUEUED_MESSAGE_BYTES, SLICE_COUNT_MAX } from '../shared/limits.js';
import { checkReplicationMessage, foldedWidth, isFoldedMessage, unfoldAt, type FoldableMessage, type ReplicationMessage } from '../shared/replication-protocol.js';
import { workerOf } from '../shared/hashing.js';
import { byWorker, PeerLinks, type PeerEntry } from '../slice-worker/peer-links.js';
import { dialNode, peerHeaders } from './node-dial.js';

const WAIT_MS = 10_000;
// A full garbage collection, to see that a buffer is no longer kept alive (the flag must be set before a context asks for it).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
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

/** Waits until `done`, at most WAIT_MS; the link's log `lines` say why not. */
async function until(what: string, done: () => boolean, lines: string[]): Promise<void> {
  const end = Date.now() + WAIT_MS;
  while (!done()) {
    if (Date.now() > end) throw new Error(`not ${what} within ${WAIT_MS} ms: ${lines.join(' | ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function listen(): Promise<WebSocketServer> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => server.once('listening', () => r()));
  return server;
}
const portOf = (s: WebSocketServer) => (s.address() as { port: number }).port;

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
    const server = await listen();
    server.on('connection', (ws, req) => {
      dialed++;
      header = req.headers[NODE_PROTOCOL_HEADER];
      // A Hello as a node of the previous version sends it (no incarnation before node protocol 29).
      ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION - 1, 1, '0'.repeat(32), null, [1]] as unknown as NodeFrameMessage));
      ws.on('message', (data: Buffer) => received.push(data));
    });
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), 1);
    try {
      links.setPeers([[1, `ws://127.0.0.1:${portOf(server)}`]]);
      const entry: [number, Uint8Array] = [0, encodeReplicationMessage({ type: 'KeepAliveOk', term: 1, sentAt: 0 })];
      const deadline = Date.now() + WAIT_MS;
      while (!lines.some((l) => l.includes(`speaks node protocol ${NODE_PROTOCOL_VERSION - 1}`))) {
        links.send(1, [entry]);
        if (Date.now() > deadline) throw new Error(`the link did not report the peer's version within ${WAIT_MS} ms: ${lines.join(' | ')}`);
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
    const silent = await listen();
    let silentDials = 0;
    silent.on('connection', () => void silentDials++);
    // A peer whose Hello names a worker port nobody listens on (a firewall that lets only the node port through).
    const closedPort = await new Promise<number>((r) => {
      const probe = new WebSocketServer({ host: '127.0.0.1', port: 0 }, () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => r(port));
      });
    });
    const walled = await listen();
    let walledDials = 0;
    walled.on('connection', (ws) => {
      walledDials++;
      ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 1, '0'.repeat(32), null, [closedPort], '1'.repeat(32)]));
    });
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), 1);
    try {
      links.setPeers([
        [1, `ws://127.0.0.1:${portOf(silent)}`],
        [2, `ws://127.0.0.1:${portOf(walled)}`],
      ]);
      const deadline = Date.now() + 3 * WAIT_MS;
      const said = (what: RegExp) => lines.some((l) => what.test(l));
      while (!(said(/peer 1 at .* sent no Hello within/) && said(new RegExp(`worker 0 of peer 2 \\(127\\.0\\.0\\.1:${closedPort}\\): ECONNREFUSED`)))) {
        if (Date.now() > deadline) throw new Error(`not said within ${3 * WAIT_MS} ms: ${lines.join(' | ')}`);
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

/** A stand-in peer node of `workers` batch ports: its node port greets a connection when the story says (greet, with
 * the batch ports its Hello names), and each batch port records the messages of the Replicate frames it gets,
 * decoded and checked as a worker's batch port does, KeepAlives and AppendOks unfolded. */
async function standInPeer(workers: number) {
  const workerPorts = await Promise.all(Array.from({ length: workers }, () => listen()));
  const got: [number, ReplicationMessage][][] = workerPorts.map(() => []);
  const sockets: WebSocket[] = [];
  workerPorts.forEach((server, i) =>
    server.on('connection', (ws) => {
      sockets.push(ws);
      ws.on('message', (data: Buffer) => {
        const frame = decodeNodeFrame(data, 'worker');
        if (frame[0] !== NodeFrame.Replicate) throw new Error(`worker port ${i} got frame ${frame[0]}`);
        for (const [slice, m] of frame[2]) {
          if (!isFoldedMessage(m)) got[i].push([slice, m]);
          else for (let k = 0; k < m.slices.length; k += foldedWidth(m.type)) got[i].push([m.slices[k], unfoldAt(m, k)]);
        }
      });
    }),
  );
  const node = await listen();
  const nodeSockets: WebSocket[] = [];
  node.on('connection', (ws) => void nodeSockets.push(ws));
  return {
    url: `ws://127.0.0.1:${portOf(node)}`,
    got,
    /** Connections to the node port, and to the batch ports, as they came. */
    nodeSockets,
    sockets,
    /** The latest connection to the node port gets a Hello that names batch ports `ports` (indexes). */
    greet: (ports: number[]) => nodeSockets.at(-1)!.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, ports.length, '0'.repeat(32), null, ports.map((w) => portOf(workerPorts[w])), '1'.repeat(32)])),
    /** The peer goes: its connections close (as a process's do when it exits). */
    terminate: () => {
      for (const ws of [...nodeSockets, ...sockets]) ws.terminate();
    },
    /** Its node port goes too: the link's next dials are refused. */
    closeNode: () => new Promise<void>((r) => node.close(() => r())),
    close: () => Promise.all([node, ...workerPorts].map((s) => new Promise((r) => s.close(r)))),
  };
}

describe('a link that dials again (the peer restarted)', () => {
  it("holds what is sent meanwhile within its share, counting each KeepAlive as PEER_LINK_QUEUED_MESSAGE_BYTES, and sends it by the restarted peer's worker count", async () => {
    // A stand-in peer node: its first process greets with one worker (batch port 0), then goes (its connections
    // close); its next one greets, when the story says, with three (batch ports 1 to 3).
    const peer = await standInPeer(4);
    const { got } = peer;
    // 65,536 workers on this node: this worker's share of PEER_LINK_QUEUE_BYTES_MAX is 1,024 bytes, 4 KeepAlives.
    const WORKERS = 65_536;
    const fits = Math.floor(Math.floor(PEER_LINK_QUEUE_BYTES_MAX / WORKERS) / PEER_LINK_QUEUED_MESSAGE_BYTES);
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), WORKERS);
    const keepAlive = (slice: number, term: number): [number, FoldableMessage] => [slice, { type: 'KeepAlive', term, commitIndex: slice * 3, sentAt: 1_000 + slice, leased: slice % 2 === 0 }];
    try {
      links.setPeers([[1, peer.url]]);
      await until('dialed', () => peer.nodeSockets.length === 1, lines);
      peer.greet([0]);
      // Open to the first process: a turn sent is folded for its one worker.
      await until('open', () => peer.sockets.length === 1, lines);
      const first = [0, 1, 2].map((slice) => keepAlive(slice, 1));
      // (Sent at once, or held the moment until the link sees its batch port open: either way once.)
      links.send(1, first);
      await until('sent to the first process', () => got[0].length >= first.length, lines);
      expect(got[0]).toEqual(first);
      // The peer restarts: its connections close, and the link dials again and waits for the Hello.
      peer.terminate();
      await until('dialed again', () => peer.nodeSockets.length === 2, lines);
      // Sent while it dials: what fits its share waits, the rest is dropped (one message each).
      const meanwhile = Array.from({ length: 20 }, (_, slice) => keepAlive(slice, 2));
      for (const e of meanwhile) links.send(1, [e]);
      peer.greet([1, 2, 3]);
      await until('sent to the restarted process', () => got.slice(1).reduce((n, g) => n + g.length, 0) >= fits, lines);
      await new Promise((r) => setTimeout(r, 100)); // (nothing more comes)
      expect(fits).toBe(4);
      for (let w = 0; w < 3; w++) {
        // Each worker of the restarted process gets its own slices of what waited, as sent, folded.
        expect(got[w + 1], `worker ${w}`).toEqual(meanwhile.slice(0, fits).filter(([slice]) => workerOf(slice, 3) === w));
      }
      expect(got[0]).toEqual(first);
      // The drop is said (with the next problem line of the link): the peer goes again and its next process is not there.
      peer.terminate();
      await peer.closeNode();
      await until('said', () => lines.some((l) => l.includes(`(${meanwhile.length - fits} messages or frames for it dropped since the last such line)`)), lines);
    } finally {
      links.close();
      await peer.close();
    }
  });

  it("copies a message's bytes that wait out of the buffer they view (which it no longer keeps alive), and counts the copy's overhead against its share", async () => {
    const peer = await standInPeer(1);
    // 8,192 workers on this node: this worker's share of PEER_LINK_QUEUE_BYTES_MAX is 8 KiB.
    const WORKERS = 8_192;
    const share = Math.floor(PEER_LINK_QUEUE_BYTES_MAX / WORKERS);
    const lines: string[] = [];
    const links = new PeerLinks('', 0, (l) => lines.push(l), WORKERS);
    const SENT = 24;
    /** Sends SENT Appends (one a turn, as encodeReplicationMessage writes them), each as a view of one 256 KiB buffer
     * that stands for writeAppend's arena; answers a weak reference to that buffer, a copy of each message's bytes,
     * and each one's length. Nothing here keeps the buffer or a view alive once it returns. */
    const sendViews = () => {
      const arena = new Uint8Array(256 * 1024);
      let at = 0;
      const sent: [number, Buffer][] = [];
      const lengths: number[] = [];
      for (let i = 0; i < SENT; i++) {
        const m: ReplicationMessage = { type: 'Append', term: 2, prevIndex: i, prevTerm: 2, records: [{ term: 2, index: i + 1, payload: new Uint8Array(40).fill(i), checksum: 1_000 + i }], commitIndex: i, sentAt: 5_000, leased: false };
        const bytes = encodeReplicationMessage(m);
        const view = arena.subarray(at, at + bytes.byteLength);
        view.set(bytes);
        at += bytes.byteLength;
        links.send(1, [[i, view]]);
        sent.push([i, Buffer.from(bytes)]);
        lengths.push(view.byteLength);
      }
      return { arena: new WeakRef(arena.buffer), sent, lengths };
    };
    try {
      links.setPeers([[1, peer.url]]);
      await until('dialed', () => peer.nodeSockets.length === 1, lines);
      const { arena, sent, lengths } = sendViews();
      // As many as their lengths and PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES each fit the share wait; the rest are dropped
      // (all would fit counted by their lengths alone).
      let fits = 0;
      for (let bytes = 0; fits < SENT && bytes + lengths[fits] + PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES <= share; fits++) bytes += lengths[fits] + PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES;
      expect(fits).toBeGreaterThanOrEqual(2);
      expect(fits).toBeLessThan(SENT);
      expect(lengths.reduce((n, l) => n + l, 0)).toBeLessThanOrEqual(share);
      // While the link still dials, what waits holds its own bytes only: the buffer they were views of is collected.
      await new Promise((r) => setTimeout(r, 0)); // (a weak reference holds its target until the job that made it ends)
      gc();
      expect(arena.deref(), 'the buffer that the waiting messages were views of').toBeUndefined();
      peer.greet([0]);
      await until('sent', () => peer.got[0].length >= fits, lines);
      await new Promise((r) => setTimeout(r, 100)); // (nothing more comes)
      // The first that fit, whole: what the peer decoded is each one's bytes again.
      expect(peer.got[0].map(([slice, m]) => [slice, Buffer.from(encodeReplicationMessage(m))])).toEqual(sent.slice(0, fits));
      peer.terminate();
      await peer.closeNode();
      await until('said', () => lines.some((l) => l.includes(`(${SENT - fits} messages or frames for it dropped since the last such line)`)), lines);
    } finally {
      links.close();
      await peer.close();
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

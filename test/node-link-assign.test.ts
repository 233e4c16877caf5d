// The coordinator's link to a slice node (coordinator/metadata/node-link.ts) sends the node its
// assignment again when replica sets change. Replica sets change without an epoch bump, so a
// change made while the link's first Assign is in flight must still reach the node. It did not:
// with two nodes joining at once under load, the first node kept the assignment it got at R=1,
// served its slices unreplicated and ignored every election (status: "0 of 1024 replicated slices
// have an elected leader", elections at ever newer terms). A real node cannot be held between
// Assign and Assigned on purpose, so this test plays the node over a real WebSocket with the
// real frame codec. So do the tests of a node that breaks the handshake's order (playedNode),
// and of a router's link to a node whose worker's batch port breaks the protocol (playedBatchPort),
// which no real node does on purpose either.
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { NodeLink } from '../coordinator/metadata/node-link.js';
import { KeysliceError } from '../shared/errors.js';
import {
  decodeNodeFrame,
  decodeSliceOps,
  encodeNodeFrame,
  encodeSliceResults,
  NodeFrame,
  NODE_PROTOCOL_VERSION,
  RESULT_OK,
  SliceOp,
  type AssignReplication,
  type NodeFrameMessage,
} from '../shared/protocol.js';
import { waitFor } from './elastic-fixture.js';

const servers: WebSocketServer[] = [];
const links: NodeLink[] = [];
afterEach(() => {
  for (const l of links.splice(0)) l.close();
  for (const s of servers.splice(0)) s.close();
});

async function fakeNode(autoPong = true): Promise<{ url: string; assigns: NodeFrameMessage[]; socket: () => WebSocket }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong });
  servers.push(server);
  await new Promise<void>((r) => server.once('listening', () => r()));
  const assigns: NodeFrameMessage[] = [];
  let current: WebSocket | null = null;
  server.on('connection', (ws) => {
    current = ws;
    ws.on('message', (data: Buffer) => {
      const frame = decodeNodeFrame(new Uint8Array(data), 'node');
      if (frame[0] === NodeFrame.Assign) assigns.push(frame);
    });
    ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, '0123456789abcdef0123456789abcdef', null, [1, 2], '1'.repeat(32)]));
  });
  const { port } = server.address() as { port: number };
  return { url: `ws://127.0.0.1:${port}`, assigns, socket: () => current! };
}

/** Polls `check` every 10 ms until it holds, at most 5,000 ms. */
const until = (what: string, check: () => boolean) => waitFor(check, what, 5_000, undefined, 10);

describe('a node link sends replica sets that changed while its first Assign was in flight', () => {
  it('sends the assignment again once the node has taken the first one', async () => {
    const node = await fakeNode();
    let replication: AssignReplication | null = null; // R=1 when the node is assigned
    const link = new NodeLink(node.url, () => ({ epoch: 2, sliceCount: 4, slices: [0, 1, 2, 3], clusterId: 'c'.repeat(32), replication }), () => 2, () => {});
    links.push(link);
    await until('the first Assign', () => node.assigns.length === 1);
    expect(node.assigns[0][5]).toBeNull();
    // A second node joins: R goes to 2 and the replica sets change (no new epoch) before the first Assign is answered.
    replication = { self: 0, peers: [[1, 'ws://127.0.0.1:1']], replicas: [0, 1, 2, 3].map((s) => [s, [0, 1]]) };
    link.reassign();
    node.socket().send(encodeNodeFrame([NodeFrame.Assigned, 2]));
    await until('the assignment with the replica sets', () => node.assigns.length === 2);
    expect(node.assigns[1][5]).toEqual(replication);
    node.socket().send(encodeNodeFrame([NodeFrame.Assigned, 2]));
    await until('the link to be ready', () => link.state === 'ready');
  });

  it('sends it once when nothing changed meanwhile', async () => {
    const node = await fakeNode();
    const link = new NodeLink(node.url, () => ({ epoch: 2, sliceCount: 4, slices: [0, 1, 2, 3], clusterId: 'c'.repeat(32), replication: null }), () => 2, () => {});
    links.push(link);
    await until('the first Assign', () => node.assigns.length === 1);
    node.socket().send(encodeNodeFrame([NodeFrame.Assigned, 2]));
    await until('the link to be ready', () => link.state === 'ready');
    await new Promise((r) => setTimeout(r, 100));
    expect(node.assigns).toHaveLength(1);
  });
});

/** A link to a fake node (fakeNode: `autoPong` false stands for a frozen node), ready (its first Assign answered). */
async function readyLink(autoPong: boolean) {
  const node = await fakeNode(autoPong);
  const link = new NodeLink(node.url, () => ({ epoch: 2, sliceCount: 4, slices: [0, 1, 2, 3], clusterId: 'c'.repeat(32), replication: null }), () => 2, () => {});
  links.push(link);
  await until('the first Assign', () => node.assigns.length === 1);
  node.socket().send(encodeNodeFrame([NodeFrame.Assigned, 2]));
  await until('the link to be ready', () => link.state === 'ready');
  return { node, link };
}

describe("a node link's probe (Membership.pingLinks' WebSocket ping, each turn)", () => {
  it('hears from a node whose event loop runs (its pong moves heardAt), and nothing from one that does not pong (as a frozen one)', async () => {
    // NodeLink.heardAt is what Membership.countsUp (placement, status) reads; a node that holds no replica is asked
    // nothing else, so its pong is what keeps it up, and what brings a thawed one back. Counted once the link is ready
    // (its frames are heard too); a server with autoPong off stands for a frozen node, which answers no ping.
    for (const pongs of [true, false]) {
      const { link } = await readyLink(pongs);
      const before = link.heardAt;
      await new Promise((r) => setTimeout(r, 20));
      link.probe();
      if (pongs) await until('the pong heard', () => link.heardAt > before);
      else {
        await new Promise((r) => setTimeout(r, 300));
        expect(link.heardAt, 'heard from a node that answers no ping').toBe(before);
        expect(link.heardMsAgo(), 'silence of the node that answers no ping').toBeGreaterThanOrEqual(300);
      }
    }
  });

  it('keeps one ping in flight: a node that answers none (frozen) is sent one, however many turns ask, and the next once it pongs', async () => {
    // Membership.pingLinks asks every turn (two a second) for as long as a node stays frozen; each ping sent would wait
    // in the socket's buffer until it thaws, hours of them. A server with autoPong off stands for the frozen node; its
    // 'ping' events count what reached it.
    const { node, link } = await readyLink(false);
    let pings = 0;
    node.socket().on('ping', () => pings++);
    for (let turn = 0; turn < 10; turn++) {
      link.probe();
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(pings, 'pings sent to a node that answered none, over 10 turns').toBe(1);
    // It thaws: it answers the ping it had, and the next turn's ping goes out.
    const before = link.heardAt;
    node.socket().pong();
    await until('the pong heard', () => link.heardAt > before);
    link.probe();
    await until('the next ping', () => pings === 2);
  });
});

/** A node's connection as played by `playedNode`: its socket, what it got (Assign frames), and how it was closed. */
interface PlayedConnection {
  ws: WebSocket;
  /** Sends `frames` in one write to the socket, so that the link reads them in one go (as TCP may deliver any
   * frames a node sent back to back): a frame that ends the connection is then followed by more, in the same read.
   * A Buffer goes as it is (a frame that does not decode). */
  sendTogether(...frames: (NodeFrameMessage | Buffer)[]): void;
  /** The close code and reason the node saw. */
  closed: Promise<[number, string]>;
}

/** How the played node behaves on one connection: `open` when the link connects, `assign` for each Assign it gets. */
interface Behaviour {
  open(c: PlayedConnection): void;
  assign(c: PlayedConnection, epoch: number): void;
}

const HELLO: NodeFrameMessage = [NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, '0123456789abcdef0123456789abcdef', null, [1, 2], '1'.repeat(32)];

/** A node that keeps the handshake: `hello`, then Assigned for the epoch of each Assign. */
const wellBehaved = (hello = HELLO): Behaviour => ({ open: (c) => c.sendTogether(hello), assign: (c, epoch) => c.sendTogether([NodeFrame.Assigned, epoch]) });
const WELL_BEHAVED = wellBehaved();

/** The played side of one connection (`socket`: its TCP socket, which sendTogether corks). */
function played(ws: WebSocket, socket: Socket): PlayedConnection {
  return {
    ws,
    sendTogether: (...frames) => {
      // Corked: ws writes each frame to the socket, and the socket sends them all in one write once uncorked.
      socket.cork();
      for (const f of frames) ws.send(Buffer.isBuffer(f) ? f : encodeNodeFrame(f));
      socket.uncork();
    },
    closed: new Promise((r) => ws.once('close', (code, reason) => r([code, reason.toString()]))),
  };
}

/** A WebSocket server on 127.0.0.1 (closed after each test) whose i-th connection is handed to `onConnection` as a
 * PlayedConnection, kept in `connections` in the order they came. */
async function playedServer(onConnection: (c: PlayedConnection, ws: WebSocket, i: number) => void): Promise<{ port: number; connections: PlayedConnection[] }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  await new Promise<void>((r) => server.once('listening', () => r()));
  const connections: PlayedConnection[] = [];
  server.on('connection', (ws, req) => {
    const c = played(ws, req.socket);
    connections.push(c);
    onConnection(c, ws, connections.length - 1);
  });
  return { port: (server.address() as { port: number }).port, connections };
}

/** A node over a real WebSocket with the real codec that behaves on its i-th connection as `behaviours[i]`, on every
 * later one as `later`. */
async function playedNode(behaviours: Behaviour[], later = WELL_BEHAVED): Promise<{ url: string; connections: PlayedConnection[] }> {
  const { port, connections } = await playedServer((c, ws, i) => {
    const behaviour = behaviours[i] ?? later;
    ws.on('message', (data: Buffer) => {
      const frame = decodeNodeFrame(new Uint8Array(data), 'node');
      if (frame[0] === NodeFrame.Assign) behaviour.assign(c, frame[1]);
    });
    behaviour.open(c);
  });
  return { url: `ws://127.0.0.1:${port}`, connections };
}

/** A coordinator's link (epoch 2) to `node`, or a router's (`router`: no Assign, it dials the batch ports), with its log
 * and each state it told onStateChange, as `state@n`: n, the node's connections so far (the connection it changed on). */
function watchedLink(node: { url: string; connections: PlayedConnection[] }, router = false) {
  const lines: string[] = [];
  const changes: string[] = [];
  const assign = router ? null : () => ({ epoch: 2, sliceCount: 4, slices: [0, 1, 2, 3], clusterId: 'c'.repeat(32), replication: null });
  const link = new NodeLink(node.url, assign, () => 2, (l) => lines.push(l));
  links.push(link);
  link.onStateChange = () => changes.push(`${link.state}@${node.connections.length}`);
  return { link, lines, changes };
}

/** Waits, at most 5,000 ms, for the node's `n`-th connection (from 1) to be closed, and returns its close code and reason. */
async function closedConnection(node: { connections: PlayedConnection[] }, n: number): Promise<[number, string]> {
  await until(`connection ${n}`, () => node.connections.length >= n);
  return Promise.race([
    node.connections[n - 1].closed,
    new Promise<[number, string]>((_, reject) => setTimeout(() => reject(new Error(`connection ${n} still open after 5,000 ms`)), 5_000)),
  ]);
}

describe("a coordinator's link ends a connection whose node breaks the handshake's order, and is ready only by an Assigned it awaits", () => {
  // NodeLink.protocolError terminates the connection: no close frame, so the node sees 1006 and no reason; the link
  // logs why, and dials again (NODE_RECONNECT_DELAY_MS_MIN), where a node that keeps the handshake makes it ready.
  // ReplicaLeaders.linkUp takes a ready link as one whose node's every worker took its Assign (docs/replication.md).

  it('an Assigned twice', async () => {
    const node = await playedNode([{ open: (c) => c.sendTogether(HELLO), assign: (c, epoch) => c.sendTogether([NodeFrame.Assigned, epoch], [NodeFrame.Assigned, epoch]) }]);
    const { link, lines, changes } = watchedLink(node);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} broke the protocol (Assigned for epoch 2 (ready)); reconnecting`);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    // Ready by the first Assigned (the one the link awaited), not again by the second.
    expect(changes).toEqual(['ready@1', 'connecting@1', 'ready@2']);
  });

  it('an Assigned before Hello, even one for the epoch the link last assigned, and frames after it in the same read', async () => {
    // The second connection opens with an Assigned for the epoch the first was assigned (so only the link's state tells
    // it is out of order), then the Hello and an Assigned for the Assign it guesses: the link ended the connection at
    // the first, and takes none of the rest (or it became ready on a connection it had ended, its Assign unsent).
    const node = await playedNode([WELL_BEHAVED, { open: (c) => c.sendTogether([NodeFrame.Assigned, 2], HELLO, [NodeFrame.Assigned, 2]), assign: () => {} }]);
    const { link, lines, changes } = watchedLink(node);
    await until('the link ready', () => link.state === 'ready');
    node.connections[0].ws.close(); // the node drops its connection: the link dials again
    expect(await closedConnection(node, 2)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} broke the protocol (Assigned for epoch 2 (connecting)); reconnecting`);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 3);
    expect(changes).toEqual(['ready@1', 'connecting@1', 'ready@3']);
  });

  it('an Assigned naming another epoch than the Assign it answers', async () => {
    const node = await playedNode([{ open: (c) => c.sendTogether(HELLO), assign: (c, epoch) => c.sendTogether([NodeFrame.Assigned, epoch + 1]) }]);
    const { link, lines, changes } = watchedLink(node);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} broke the protocol (Assigned for epoch 3 (assigning)); reconnecting`);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    expect(changes).toEqual(['ready@2']);
  });

  it('a second Hello, and an Assigned after it in the same read', async () => {
    // The node greets again with its answer to the Assign: the link ends the connection at the second Hello and does
    // not take the Assigned that follows it (it answers an Assign the link sent, on a connection the link ended).
    const node = await playedNode([{ open: (c) => c.sendTogether(HELLO), assign: (c, epoch) => c.sendTogether(HELLO, [NodeFrame.Assigned, epoch]) }]);
    const { link, lines, changes } = watchedLink(node);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} broke the protocol (a second Hello); reconnecting`);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    expect(changes).toEqual(['ready@2']);
  });

  it('a frame that does not decode', async () => {
    const node = await playedNode([{ open: (c) => c.sendTogether(HELLO), assign: (c) => c.ws.send(Buffer.from([0xc1, 0xff, 0x00])) }]); // 0xc1: never msgpack
    const { link, lines, changes } = watchedLink(node);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines.filter((l) => l.includes('malformed'))).toEqual([expect.stringMatching(new RegExp(`^slice node ${node.url} sent a malformed frame: frame is not valid msgpack: `))]);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    expect(changes).toEqual(['ready@2']);
  });
});

describe("a router's link ends a connection whose node greets twice", () => {
  it('a second Hello while it dials the batch ports the first named', async () => {
    // A router's link stays 'connecting' after the Hello until each worker's batch port is open (openBatchSockets):
    // a second Hello then was taken as a first, and openBatchSockets' assertion (once per connection) threw out of
    // ws's 'message' event: an uncaught exception, which ends a router's process.
    const batchPorts = [(await playedBatchPort([])).port, (await playedBatchPort([])).port];
    const hello: NodeFrameMessage = [NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, '0123456789abcdef0123456789abcdef', null, batchPorts, '1'.repeat(32)];
    const node = await playedNode([{ open: (c) => c.sendTogether(hello, hello), assign: () => {} }], wellBehaved(hello));
    const { link, lines, changes } = watchedLink(node, true);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} broke the protocol (a second Hello); reconnecting`);
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    expect(changes).toEqual(['ready@2']);
  });
});

/** How a played worker's batch port answers a Batch (`ops` ops of one worker) on one of its connections. */
type PortBehaviour = (c: PlayedConnection, batchId: number, worker: number, ops: number) => void;

/** The reply a worker sends to a batch of `ops` DropTables (each answered true: the table was there). */
const replyOf = (batchId: number, worker: number, ops: number): NodeFrameMessage => [
  NodeFrame.BatchReply,
  batchId,
  worker,
  encodeSliceResults(Array.from({ length: ops }, () => [RESULT_OK, true])),
];
const ANSWERS: PortBehaviour = (c, batchId, worker, ops) => c.sendTogether(replyOf(batchId, worker, ops));

/** A worker's batch port over a real WebSocket with the real codec: on its i-th connection it answers as `behaviours[i]`,
 * on every later one as ANSWERS. */
async function playedBatchPort(behaviours: PortBehaviour[]): Promise<{ port: number; connections: PlayedConnection[] }> {
  return playedServer((c, ws, i) => {
    const behaviour = behaviours[i] ?? ANSWERS;
    ws.on('message', (data: Buffer) => {
      const frame = decodeNodeFrame(new Uint8Array(data), 'worker');
      if (frame[0] !== NodeFrame.Batch) return;
      for (const [worker, ops] of frame[3]) behaviour(c, frame[1], worker, decodeSliceOps(ops).length);
    });
  });
}

/** A router's link (epoch 2) to a played node of two workers whose batch ports answer as `worker0` (worker 1's answers
 * every batch), ready; with its log. */
async function routerLinkWithPorts(worker0: PortBehaviour[]) {
  const ports = [await playedBatchPort(worker0), await playedBatchPort([])];
  const hello: NodeFrameMessage = [NodeFrame.Hello, NODE_PROTOCOL_VERSION, 2, '0123456789abcdef0123456789abcdef', null, ports.map((p) => p.port), '1'.repeat(32)];
  const node = await playedNode([], wellBehaved(hello));
  const { link, lines } = watchedLink(node, true);
  await until('the link ready', () => link.state === 'ready');
  return { node, ports, link, lines };
}

const DROP: [typeof SliceOp.DropTable, number] = [SliceOp.DropTable, 1];

/** What an op in flight gets when its link loses the connection (NodeLink's close handler). */
const lost = (url: string) => new KeysliceError('Unavailable', `connection to slice node ${url} was lost; a write in flight may or may not have been applied`);

/** Each test below within this, well under NODE_REQUEST_TIMEOUT_MS (30 s): an op in flight fails by the link's close,
 * not by the timeout that fails a batch a node never answers. */
const BOUND_MS = 10_000;

describe("a router's link and a worker's batch port that breaks the protocol", () => {
  // Each op goes to worker 0's batch port (openBatchSockets), which misbehaves on its first connection. A frame that
  // breaks the protocol ends the node's connection, and with it every batch port (NodeLink.protocolError, readFrame):
  // the node's side sees 1006; the op in flight fails as after any lost connection (it may have been applied); the
  // link dials again, and ops on the next connection are answered. An exception out of ws's 'message' event would be
  // uncaught, which vitest reports as an error of the run.

  /** After the first connection ended: ready on the next, both workers answer again. */
  async function servesAgain(link: NodeLink, node: { connections: PlayedConnection[] }) {
    await until('the link ready on the next connection', () => link.state === 'ready' && node.connections.length === 2);
    expect(await Promise.all([link.sendToWorker(0, DROP), link.sendToWorker(1, DROP)])).toEqual([true, true]);
  }

  it('drops a reply for a batch it does not hold (an unknown id; the same reply twice), as one after the batch timed out, and keeps the connection', async () => {
    const { node, ports, link, lines } = await routerLinkWithPorts([
      (c, batchId, worker, ops) => c.sendTogether(replyOf(batchId + 1000, worker, ops), replyOf(batchId, worker, ops), replyOf(batchId, worker, ops)),
    ]);
    expect(await link.sendToWorker(0, DROP)).toBe(true);
    expect(await Promise.all([link.sendToWorker(0, DROP), link.sendToWorker(1, DROP)])).toEqual([true, true]);
    expect([node.connections.length, ports[0].connections.length, link.state]).toEqual([1, 1, 'ready']);
    expect(lines.filter((l) => !l.includes(' ready: '))).toEqual([]);
  }, BOUND_MS);

  it('a frame that does not decode, and a reply after it in the same read', async () => {
    const { node, ports, link, lines } = await routerLinkWithPorts([
      (c, batchId, worker, ops) => c.sendTogether(Buffer.from([0xc1, 0xff, 0x00]), replyOf(batchId, worker, ops)), // 0xc1: never msgpack
    ]);
    const op = link.sendToWorker(0, DROP);
    await expect(op).rejects.toEqual(lost(node.url));
    expect(await closedConnection(ports[0], 1)).toEqual([1006, '']);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines.filter((l) => /malformed|broke the protocol/.test(l))).toEqual([expect.stringMatching(new RegExp(`^slice node ${node.url} sent a malformed frame on a batch port: frame is not valid msgpack: `))]);
    await servesAgain(link, node);
  }, BOUND_MS);

  it('a frame of a kind a batch port never carries (Assigned), and a reply after it in the same read', async () => {
    const { node, ports, link, lines } = await routerLinkWithPorts([(c, batchId, worker, ops) => c.sendTogether([NodeFrame.Assigned, 2], replyOf(batchId, worker, ops))]);
    const op = link.sendToWorker(0, DROP);
    await expect(op).rejects.toEqual(lost(node.url));
    expect(await closedConnection(ports[0], 1)).toEqual([1006, '']);
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines.filter((l) => /malformed|broke the protocol/.test(l))).toEqual([`slice node ${node.url} broke the protocol (frame kind ${NodeFrame.Assigned} on a batch port); reconnecting`]);
    await servesAgain(link, node);
  }, BOUND_MS);

  it('a batch port that closes with a batch in flight', async () => {
    const { node, link, lines } = await routerLinkWithPorts([(c) => c.ws.close()]);
    const op = link.sendToWorker(0, DROP);
    await expect(op).rejects.toEqual(lost(node.url));
    expect(await closedConnection(node, 1)).toEqual([1006, '']);
    expect(lines).toContain(`slice node ${node.url} disconnected`);
    await servesAgain(link, node);
  }, BOUND_MS);
});

// The coordinator's link to a slice node (coordinator/metadata/node-link.ts) sends the node its
// assignment again when replica sets change. Replica sets change without an epoch bump, so a
// change made while the link's first Assign is in flight must still reach the node. It did not:
// with two nodes joining at once under load, the first node kept the assignment it got at R=1,
// served its slices unreplicated and ignored every election (status: "0 of 1024 replicated slices
// have an elected leader", elections at ever newer terms). A real node cannot be held between
// Assign and Assigned on purpose, so this test plays the node over a real WebSocket with the
// real frame codec.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { NodeLink } from '../coordinator/metadata/node-link.js';
import { decodeNodeFrame, encodeNodeFrame, NodeFrame, NODE_PROTOCOL_VERSION, type AssignReplication, type NodeFrameMessage } from '../shared/protocol.js';
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

// A slice node that restarted, told from one whose link flapped (node protocol 29): its Hello names its process's
// incarnation (slice-worker/node-identity.ts NODE_INCARNATION), made at random at each start. The coordinator keeps
// what it found of a stuck worker (its "unanswered since" and its tries: OpenQuestions) across a flap, where the same
// worker is still stuck, and drops it for a node that restarted, whose workers are fresh: kept, a restarted node's
// worker waited out the last process's retry, up to STUCK_WORKER_RETRY_MS_MAX (5 min), before placement tried it.
//
// First over a real WebSocket with the real codec, the coordinator's real NodeLink and ReplicaLeaders (the failover
// runner that keeps the questions), and a node played by the test (a real one cannot keep one worker stuck on
// purpose): its worker 0 answers nothing; its connection closes, and it comes back as the same process or another.
// Then real processes: a slice node's Hello names one incarnation for as long as it runs, another once restarted, and
// the coordinator says so.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { ClusterMap } from '../coordinator/metadata/cluster-map.js';
import { FAILOVER_TIMING_DEFAULT } from '../coordinator/metadata/failover.js';
import { NodeLink } from '../coordinator/metadata/node-link.js';
import { ReplicaLeaders } from '../coordinator/metadata/replica-leaders.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { NODE_SILENT_AFTER_PING_INTERVALS } from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, encodeNodeFrame, isIdentity, NodeFrame, NODE_PROTOCOL_VERSION } from '../shared/protocol.js';
import { restartNode, useCluster } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { openNode } from './node-dial.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

/** Polls `check` every 10 ms until it holds, at most 5,000 ms. */
const until = (what: string, check: () => boolean) => waitFor(check, what, 5_000, undefined, 10);

const NODE_ID = '0123456789abcdef0123456789abcdef';
/** The stuck worker's slice: slice 0 runs on worker 0 of 2 (workerOf). */
const SLICE = 0;
const PING_MS = FAILOVER_TIMING_DEFAULT.pingIntervalMs;

/** A slice node played by the test, of 2 workers, whose worker 0 answers nothing: it greets each connection with a Hello
 * naming `incarnation` and `workers` (as they are when the connection comes), and answers each Assign. */
async function stuckNode(start: { incarnation: string; workers: number }) {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  cleanups.push(() => server.close());
  await new Promise<void>((r) => server.once('listening', () => r()));
  const now = { ...start };
  let current: WebSocket | null = null;
  server.on('connection', (ws) => {
    current = ws;
    ws.on('message', (data: Buffer) => {
      const frame = decodeNodeFrame(new Uint8Array(data), 'node');
      // Replicate frames (the coordinator's Pings) go unanswered: its worker 0 is stuck.
      if (frame[0] === NodeFrame.Assign) ws.send(encodeNodeFrame([NodeFrame.Assigned, frame[1]]));
    });
    const ports = Array.from({ length: now.workers }, (_, w) => 1 + w);
    ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, now.workers, NODE_ID, null, ports, now.incarnation]));
  });
  const { port } = server.address() as { port: number };
  return {
    url: `ws://127.0.0.1:${port}`,
    /** Its connection closes (a flap, or the process's exit); the next one greets as `next` says. */
    drop: (next: { incarnation: string; workers: number }) => {
      Object.assign(now, next);
      current?.terminate();
    },
  };
}

/** The coordinator's side of node 0 of 3 at R=3 (the others never come up: no quorum, no election), wired as Membership
 * wires them (its link's state changes go to ReplicaLeaders.linkLost and linkUp). `atUp` is called with how long the
 * stuck worker has answered nothing (ReplicaLeaders.workerSilentMs: placement's measure) as each linkUp returns. */
async function coordinatorOf(nodeUrl: string) {
  const dir = mkdtempSync(join(tmpdir(), 'ks-restart-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const map = ClusterMap.open(dir, [nodeUrl, 'ws://127.0.0.1:1', 'ws://127.0.0.1:2'], 4, 3);
  if (typeof map === 'string') throw new Error(map);
  const lines: string[] = [];
  const link = new NodeLink(nodeUrl, () => ({ epoch: map.epoch, sliceCount: map.sliceCount, slices: map.slicesOf(0), clusterId: map.clusterId, replication: null }), () => map.epoch, (l) => lines.push(l));
  cleanups.push(() => link.close());
  const leaders = new ReplicaLeaders(map, [link], FAILOVER_TIMING_DEFAULT, (l) => lines.push(l), () => {});
  cleanups.push(() => leaders.close());
  const silentAtUp: number[] = [];
  link.onStateChange = () => {
    if (link.state !== 'ready') return leaders.linkLost(0);
    leaders.linkUp(0);
    silentAtUp.push(leaders.workerSilentMs(0, SLICE));
  };
  await until('the link to be ready', () => link.state === 'ready');
  return { link, leaders, lines, silentAtUp };
}

/** Asks the node's worker 0 (a Ping of SLICE: ReplicaLeaders.holdsTerm's probe) and waits until it is stuck: unanswered
 * for twice as long as an election takes a node for silent (the bound past which OpenQuestions keeps its time). */
async function stuckWorker(leaders: ReplicaLeaders): Promise<void> {
  leaders.holdsTerm(SLICE, 0, 1);
  await waitFor(() => leaders.workerSilentMs(0, SLICE) >= 2 * NODE_SILENT_AFTER_PING_INTERVALS * PING_MS, 'worker 0 stuck', 5_000, undefined, 10);
}

describe("a stuck worker's record across its node's reconnect (real NodeLink and ReplicaLeaders, a node played over a real WebSocket)", () => {
  const A = 'a'.repeat(32);
  const B = 'b'.repeat(32);

  it('is kept when the link flapped (the Hello names the same process): the same worker is still stuck', async () => {
    const node = await stuckNode({ incarnation: A, workers: 2 });
    const { link, leaders, lines, silentAtUp } = await coordinatorOf(node.url);
    await stuckWorker(leaders);
    node.drop({ incarnation: A, workers: 2 });
    await until('the link to come back', () => silentAtUp.length === 2);
    expect(link.state).toBe('ready');
    expect(silentAtUp[1], 'ms the stuck worker has answered nothing, as the link came back').toBeGreaterThanOrEqual(2 * NODE_SILENT_AFTER_PING_INTERVALS * PING_MS);
    expect(lines.filter((l) => l.includes('restarted')), 'lines that say it restarted').toEqual([]);
  });

  it('is dropped when the node restarted with as many workers (another incarnation): its new worker owes nothing', async () => {
    const node = await stuckNode({ incarnation: A, workers: 2 });
    const { link, leaders, lines, silentAtUp } = await coordinatorOf(node.url);
    await stuckWorker(leaders);
    node.drop({ incarnation: B, workers: 2 });
    await until('the link to come back', () => silentAtUp.length === 2);
    expect(link.state).toBe('ready');
    expect(silentAtUp[1], 'ms the new worker 0 has answered nothing, as the link came back').toBe(0);
    expect(lines).toContain(`slice node ${node.url} restarted (incarnation ${B}, was ${A})`);
  });

  it('is refused: a Hello of the same process with another worker count (a process keeps its workers, and what is kept of them is by index)', async () => {
    const node = await stuckNode({ incarnation: A, workers: 2 });
    const { link, lines } = await coordinatorOf(node.url);
    node.drop({ incarnation: A, workers: 3 });
    await until('the refusal', () => lines.some((l) => l.includes('broke the protocol')));
    expect(lines).toContain(`slice node ${node.url} broke the protocol (a Hello of the same process (incarnation ${A}) with 3 workers, not 2); reconnecting`);
    expect(link.state).not.toBe('ready');
  });
});

describe('a slice node process names its incarnation in its Hello (real processes)', () => {
  const lines: string[] = [];
  const c = useCluster({ nodes: 1, workers: 1, slices: 4, log: (l) => lines.push(l) });

  /** The incarnation the node's Hello names on a new connection of the test's own. */
  const helloIncarnation = async (): Promise<string> => {
    const { ws, firstBytes } = await openNode(c.cluster.nodes[0].url, { [CLUSTER_SECRET_HEADER]: c.cluster.clusterSecret }, true);
    ws.terminate();
    const hello = decodeNodeFrame(firstBytes!, 'coordinator');
    if (hello[0] !== NodeFrame.Hello) throw new Error(`the node's first frame is not its Hello: ${JSON.stringify(hello)}`);
    return hello[6];
  };

  it('the same on every connection while it runs, another once it restarted, which the coordinator says', async () => {
    const first = await helloIncarnation();
    expect(isIdentity(first), `${first}: 32 hex digits`).toBe(true);
    expect(await helloIncarnation(), 'a second connection to the same process').toBe(first);
    const node = c.cluster.nodes[0];
    await stopProcess(node.child);
    await restartNode(c, node);
    const second = await helloIncarnation();
    expect(second, 'the restarted process').not.toBe(first);
    await waitFor(() => lines.some((l) => l.includes(`slice node ${node.url} restarted (incarnation ${second}, was ${first})`)), "the coordinator's line that the node restarted", 10_000, undefined, 20);
    // The coordinator took the new process's link up (ReplicaLeaders.linkUp) and serves through it.
    await c.client.createTable('after_restart', { name: 'id', type: 'string' });
    await waitFor(() => c.client.putItem('after_restart', { id: 'a' }).then(() => true, () => false), 'a write through the restarted node', 10_000, undefined, 100);
    // Once, by the coordinator's link (a router's link, whose log comes through the coordinator's, does not say it).
    expect(lines.filter((l) => /restarted \(incarnation/.test(l)), 'the lines that a node restarted').toEqual([expect.stringMatching(/^\[coordinator\] keyslice coordinator: slice node /)]);
  }, 30_000);
});

// What the coordinator found of a stuck worker (its "unanswered since" and its tries: OpenQuestions) across its node's
// reconnect, a link flap (the same process) or a restart (node protocol 29: its Hello names its process's incarnation,
// slice-worker/node-identity.ts NODE_INCARNATION, made at random at each start). A slice node answers Assigned once
// every worker took its part of the Assign, and the coordinator's link is ready (ReplicaLeaders.linkUp) only then: a
// flap while a worker is stuck leaves the link 'assigning' until the worker runs, so at each link-up every worker ran
// since, and nothing of it is kept. Kept across a flap, a worker that had just run counted as stuck since before it,
// and where nothing could ask it placement waited up to STUCK_WORKER_RETRY_MS_MAX (5 min) before trying it.
//
// First a real slice node process, its worker threads paused through its inspector (NodeWorker: Debugger.pause in each
// worker's isolate, its main thread left running, so the node pongs while worker 0 answers nothing: a stuck worker),
// behind a TCP proxy the test can cut (a flap: the same process); its restart is a SIGKILL and a new process on the
// same port and folder. The coordinator's side is its real NodeLink and ReplicaLeaders (the failover runner that keeps
// the questions). Then real processes end to end: a slice node's Hello names one incarnation for as long as it runs,
// another once restarted, and the coordinator says so.
import { mkdtempSync, rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { ClusterMap } from '../coordinator/metadata/cluster-map.js';
import { FAILOVER_TIMING_DEFAULT } from '../coordinator/metadata/failover.js';
import { NodeLink } from '../coordinator/metadata/node-link.js';
import { assignReplication, ReplicaLeaders } from '../coordinator/metadata/replica-leaders.js';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { WORKER_SILENT_AFTER_PING_INTERVALS } from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, isIdentity, NodeFrame } from '../shared/protocol.js';
import { restartNode, useCluster } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { openNode } from './node-dial.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Polls `check` every 10 ms until it holds, at most `ms` (5,000 by default). */
const until = (what: string, check: () => boolean, ms = 5_000) => waitFor(check, what, ms, undefined, 10);

/** The stuck worker's slice: slice 0 runs on worker 0 of 2 (workerOf). */
const SLICE = 0;
const WORKERS = 2;
const PING_MS = FAILOVER_TIMING_DEFAULT.pingIntervalMs;
/** How long a worker has answered nothing once it is stuck here: twice the bound past which OpenQuestions keeps its time. */
const STUCK_MS = 2 * WORKER_SILENT_AFTER_PING_INTERVALS * PING_MS;
/** Bounds every wait on a real process (a start, an inspector's answer) on a loaded machine. */
const PROCESS_WAIT_MS = 20_000;

/** The coordinator's side of node 0 of 3 at R=3 (the others never come up: no quorum, no election), wired as Membership
 * wires them (its link's state changes go to ReplicaLeaders.linkLost and linkUp; its Assign names the node's replicas,
 * so that a well worker answers the coordinator's Pings). `silentAtUp` gets how long the stuck worker has answered
 * nothing (ReplicaLeaders.workerSilentMs: placement's measure) as each linkUp returns. */
async function coordinatorOf(nodeUrl: string) {
  const dir = mkdtempSync(join(tmpdir(), 'ks-restart-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const map = ClusterMap.open(dir, [nodeUrl, 'ws://127.0.0.1:1', 'ws://127.0.0.1:2'], 4, 3);
  if (typeof map === 'string') throw new Error(map);
  const lines: string[] = [];
  const link = new NodeLink(nodeUrl, () => ({ epoch: map.epoch, sliceCount: map.sliceCount, slices: map.slicesOf(0), clusterId: map.clusterId, replication: assignReplication(map, 0, (s) => map.replicasOf(s)) }), () => map.epoch, (l) => lines.push(l));
  cleanups.push(() => link.close());
  const leaders = new ReplicaLeaders(map, [link], FAILOVER_TIMING_DEFAULT, (l) => lines.push(l), () => {});
  cleanups.push(() => leaders.close());
  const silentAtUp: number[] = [];
  link.onReplicate = (entries) => leaders.receive(0, entries);
  link.onStateChange = () => {
    if (link.state !== 'ready') return leaders.linkLost(0);
    leaders.linkUp(0);
    silentAtUp.push(leaders.workerSilentMs(0, SLICE));
  };
  await until('the link to be ready', () => link.state === 'ready', PROCESS_WAIT_MS);
  return { link, leaders, lines, silentAtUp };
}

/** Asks the node's worker 0 (a Ping of SLICE: ReplicaLeaders.holdsTerm's probe) and waits until it is stuck. */
async function stuckWorker(leaders: ReplicaLeaders): Promise<void> {
  leaders.holdsTerm(SLICE, 0, 1);
  await waitFor(() => leaders.workerSilentMs(0, SLICE) >= STUCK_MS, 'worker 0 stuck', 5_000, undefined, 10);
}

/** A TCP proxy on 127.0.0.1 to `port`: `cut` closes every connection through it (a flap; the node runs on). */
async function tcpProxy(port: number) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port });
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      sockets.add(a);
      a.on('error', () => {});
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
      a.pipe(b);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { url: `ws://127.0.0.1:${(server.address() as { port: number }).port}`, cut: () => sockets.forEach((s) => s.destroy()) };
}

/** A real slice node of WORKERS workers, with an inspector on a free port (its URL in its log). */
async function realNode() {
  const dataDir = mkdtempSync(join(tmpdir(), 'ks-restart-node-'));
  const lines: string[] = [];
  const nodeOptions = process.env.NODE_OPTIONS;
  const start = async (port: number): Promise<ManagedProcess> => {
    process.env.NODE_OPTIONS = `${nodeOptions ?? ''} --inspect=127.0.0.1:0`;
    try {
      return await startSliceNode({ name: 'node', dataDir, port, workers: WORKERS, log: (l) => lines.push(l) });
    } finally {
      if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = nodeOptions;
    }
  };
  let proc = await start(0);
  const port = Number(new URL(proc.url).port);
  cleanups.push(async () => {
    await stopProcess(proc.child, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    port,
    lines,
    /** SIGKILL, and a new process on the same port and folder. */
    restart: async () => {
      await stopProcess(proc.child, 'SIGKILL');
      proc = await start(port);
    },
    /** Pauses every worker thread of the running process, or only worker `only` (Debugger.pause in each, through the
     * inspector's NodeWorker domain; worker w is the thread made w-th, slice-worker/main.ts: the w-th thread id); its
     * main thread runs on. Resolves once each has taken the pause, with what resumes them. */
    pauseWorkers: async (only?: number): Promise<() => Promise<void>> => {
      const listening = lines.filter((l) => l.startsWith('[node] Debugger listening on ws://')).pop();
      if (listening === undefined) throw new Error(`the node's inspector is not in its log: ${lines.slice(-5).join(' | ')}`);
      const ws = new WebSocket(listening.split(' ').pop()!);
      cleanups.push(() => ws.terminate());
      ws.on('error', () => {});
      let nextId = 1;
      const answers = new Map<string, () => void>();
      const attached: { session: string; thread: number }[] = [];
      const paused = new Set<string>();
      ws.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString()) as { id?: number; method?: string; params?: { sessionId: string; message?: string; workerInfo?: { title: string } } };
        // Its thread id is in its title ("[worker 1]"); workerInfo.workerId is the inspector's own count, in the order
        // the threads attached, which differs from run to run.
        if (m.method === 'NodeWorker.attachedToWorker') attached.push({ session: m.params!.sessionId, thread: Number(/^\[worker (\d+)\]$/.exec(m.params!.workerInfo!.title)?.[1]) });
        if (m.method === 'NodeWorker.receivedMessageFromWorker') {
          const inner = JSON.parse(m.params!.message!) as { id?: number; method?: string };
          // Debugger.pause is answered before the thread has paused (it pauses at its next JavaScript, and says so by
          // this event, seen up to ~50 ms later here): each is paused once this comes.
          if (inner.method === 'Debugger.paused') paused.add(m.params!.sessionId);
          if (inner.id !== undefined) answers.get(`${m.params!.sessionId}:${inner.id}`)?.();
        }
        if (m.id !== undefined) answers.get(`:${m.id}`)?.();
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        setTimeout(() => reject(new Error(`the node's inspector did not open within ${PROCESS_WAIT_MS} ms`)), PROCESS_WAIT_MS).unref();
      });
      const call = (method: string, params: object, session = '') =>
        new Promise<void>((resolve, reject) => {
          const id = nextId++;
          const timer = setTimeout(() => reject(new Error(`the node's inspector did not answer ${method} within ${PROCESS_WAIT_MS} ms`)), PROCESS_WAIT_MS);
          answers.set(`${session}:${id}`, () => {
            clearTimeout(timer);
            resolve();
          });
          const message = JSON.stringify({ id, method, params });
          ws.send(session === '' ? message : JSON.stringify({ id: nextId++, method: 'NodeWorker.sendMessageToWorker', params: { sessionId: session, message } }));
        });
      await call('NodeWorker.enable', { waitForDebuggerOnStart: false });
      await until(`the node's ${WORKERS} worker threads attached`, () => attached.length >= WORKERS);
      if (!attached.every((a) => Number.isInteger(a.thread))) throw new Error(`worker threads' titles name no thread id: ${JSON.stringify(attached)}`);
      const byWorker = attached.sort((a, b) => a.thread - b.thread).map((a) => a.session);
      const sessions = only === undefined ? byWorker : [byWorker[only]];
      for (const s of sessions) {
        await call('Debugger.enable', {}, s);
        await call('Debugger.pause', {}, s);
        await until(`worker thread ${s} paused`, () => paused.has(s), PROCESS_WAIT_MS);
      }
      return async () => {
        for (const s of sessions) await call('Debugger.resume', {}, s);
      };
    },
  };
}

describe("a stuck worker's record across its node's reconnect (a real slice node, real NodeLink and ReplicaLeaders)", () => {
  it('does not come back ready after a flap while the worker is stuck (Assigned waits for every worker); once it runs, comes back to the same process with nothing kept of the worker, which answers', async () => {
    const node = await realNode();
    const proxy = await tcpProxy(node.port);
    const { link, leaders, lines, silentAtUp } = await coordinatorOf(proxy.url);
    const incarnation = link.incarnation;
    // Worker 0 alone: worker 1 runs, and takes its part of the Assign.
    const resume = await node.pauseWorkers(0);
    const pausedAt = performance.now();
    await stuckWorker(leaders);
    // Worker 1 (slice 1's) answers meanwhile: a Pong newer than the pause.
    await waitFor(() => leaders.holdsTerm(1, 0, 0, performance.now() - pausedAt), "worker 1's Pong while worker 0 is paused", PROCESS_WAIT_MS, undefined, 50);
    const hellos = link.generation;
    proxy.cut();
    await until('the Hello of the link that came back', () => link.generation > hellos, PROCESS_WAIT_MS);
    // The node took the Assign and hands each worker its part; the stuck one takes none, so the node says no Assigned.
    await new Promise((r) => setTimeout(r, 2 * STUCK_MS));
    expect(link.state, 'the link, 2 stuck bounds after its Hello').toBe('assigning');
    expect(silentAtUp, 'linkUp calls').toHaveLength(1);
    await resume();
    await until('the link to come back', () => silentAtUp.length === 2, PROCESS_WAIT_MS);
    expect(link.state).toBe('ready');
    expect(link.incarnation, 'the process the link came back to').toBe(incarnation);
    // The same process, whose worker 0 took its Assign before the node said Assigned: it ran since the flap, and its
    // silence before it is not kept (kept, worker 0 counted as stuck from its Ping before the cut).
    expect(silentAtUp[1], 'ms worker 0 has answered nothing as the link came back to the same process').toBe(0);
    expect(lines.filter((l) => l.includes('restarted')), 'lines that say it restarted').toEqual([]);
    // And it answers: asked (holdsTerm's probe), a Pong newer than the link-up, and a moment where it owes nothing (a Pong
    // alone may be its late answer to the Ping before the cut, which answers no question asked since).
    const upAt = performance.now();
    await waitFor(() => leaders.holdsTerm(SLICE, 0, 0, performance.now() - upAt) && leaders.workerSilentMs(0, SLICE) === 0, "worker 0's Pong after the flap, all it was asked answered", PROCESS_WAIT_MS, undefined, 50);
  }, 60_000);

  it('is dropped when the node restarted with as many workers (another incarnation): its new worker owes nothing, and answers', async () => {
    const node = await realNode();
    const proxy = await tcpProxy(node.port);
    const { link, leaders, lines, silentAtUp } = await coordinatorOf(proxy.url);
    await node.pauseWorkers();
    await stuckWorker(leaders);
    const was = link.incarnation;
    await node.restart();
    const restartedAt = performance.now();
    await until('the link to come back', () => silentAtUp.length === 2, PROCESS_WAIT_MS);
    expect(link.state).toBe('ready');
    expect(silentAtUp[1], 'ms the new worker 0 has answered nothing, as the link came back').toBe(0);
    expect(lines).toContain(`slice node ${proxy.url} restarted (incarnation ${link.incarnation}, was ${was})`);
    // The new worker 0 is well: asked (holdsTerm's probe), it answers, a Pong newer than the restart.
    await waitFor(() => leaders.holdsTerm(SLICE, 0, 0, performance.now() - restartedAt) && leaders.workerSilentMs(0, SLICE) === 0, "the new worker 0's Pong, all it was asked answered", PROCESS_WAIT_MS, undefined, 50);
  }, 60_000);
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

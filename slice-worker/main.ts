// The slice node process: a WebSocket server for the coordinator in front of
// one worker thread per worker. Frames are decoded only as far as
// the outer envelope; each worker's ops travel to it as the bytes they came in.
// At start each worker recovers its slices from its folder before the node
// listens, so a coordinator never reaches a node that is still recovering.
// Every frame is checked whole before use (shared/protocol.ts); a bad one closes
// its connection and changes nothing. The node's epoch moves only on frames of
// the coordinator's connection (the one whose Assign it took last), and only up.
//
// Replication (docs/replication.md): the workers send their peers' workers what their replicas have for them,
// and take what those send, on links of their own and their batch ports (peer-links.ts, batch-port.ts; node
// protocol 25): this thread is on the path of no write. It carries the coordinator's part only: Replicate frames
// between the coordinator's connection and the workers (workerOf in shared/hashing.ts picks the worker). What the
// workers' replicas send the coordinator is batched per turn, one frame; what comes from it is handed on per
// worker per turn, one message each. The main thread does not decode replication messages: each travels as bytes
// of its own, which a worker encoded and a worker decodes and checks (it names the connection of one that fails,
// which is closed); the main thread reads a frame's [slice, bytes] entries and picks the worker by the slice. A
// Replicate frame is taken from the coordinator (from -1) on the coordinator's connection only; a peer's (a node
// index) is refused as malformed by decodeNodeFrame: it goes to the worker's batch port. Messages for slices this
// node holds no replica of are dropped. The node still greets a peer's workers with Hello on a connection that shows
// the cluster secret and this node protocol: that names its workers' batch ports, and its closing tells them the
// node is gone.
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import { isLoopbackHost, missingSecretProblem, secretMatches } from '../shared/auth.js';
import { WebSocketServer, type WebSocket } from '../shared/ws.js';
import { cannotListen, fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { HTTP_TIMEOUT_ARGS, httpTimeoutsOf } from '../shared/http-timeout-args.js';
import { assert } from '../shared/errors.js';
import {
  DURABILITY_DEFAULT,
  DURABILITY_MODES,
  DYNAMODB_PARTITION_READS_PER_SECOND,
  DYNAMODB_PARTITION_WRITES_PER_SECOND,
  INTERNAL_FRAME_BYTES_MAX,
  REPLICATION_FRAME_ENTRIES_MAX,
  NODE_HEARTBEAT_INTERVAL_MS,
  NODE_HEARTBEAT_REQUEST_TIMEOUT_MS,
  SLICE_NODE_METRICS_PORT_DEFAULT,
  SLICE_NODE_PORT_DEFAULT,
  SNAPSHOT_AFTER_LOG_BYTES,
  WORKERS_PER_NODE_DEFAULT,
  WORKERS_PER_NODE_MAX,
  type DurabilityMode,
} from '../shared/limits.js';
import { NODE_INCARNATION, openNodeIdentity, saveNodeIdentity, type NodeIdentity } from './node-identity.js';
import { lockDataFolder } from './data-folder-lock.js';
import { readNodeFrame, sendBatchAnswer, sendNodeFrame } from './node-socket.js';
import { WorkerChannel, type IncomingReplication } from './worker-channel.js';
import type { ReplicaControl } from './worker.js';
import { COORDINATOR } from '../shared/replication-protocol.js';
import { workerOf } from '../shared/hashing.js';
import { sparseLog } from '../shared/sparse-log.js';
import { startGcTrace } from './turn-trace.js';
import { gapTracker, startStallTrace } from '../shared/stall-trace.js';
import {
  batchError,
  CLUSTER_API_PREFIX,
  CLUSTER_SECRET_HEADER,
  NODE_PROTOCOL_HEADER,
  closeReason,
  decodeSliceResults,
  encodeNodeFrame,
  encodeSliceOps,
  NodeFrame,
  NODE_PROTOCOL_VERSION,
  RESULT_ERROR,
  SliceOp,
  staleBatchError,
  type AssignReplication,
  type ReplicateEntry,
  type WireReplicateEntry,
} from '../shared/protocol.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    host: { default: '127.0.0.1', help: 'address to listen on', env: 'KEYSLICE_HOST' },
    port: { default: String(SLICE_NODE_PORT_DEFAULT), help: 'port to listen on (0: any free port)', env: 'KEYSLICE_NODE_PORT' },
    'metrics-port': { default: String(SLICE_NODE_METRICS_PORT_DEFAULT), help: 'port of this node\'s own GET /metrics (CPU, memory, event loop, GC, each thread\'s busy time), on --host (0: none)', env: 'KEYSLICE_NODE_METRICS_PORT' },
    ...HTTP_TIMEOUT_ARGS,
    token: { default: '', help: 'client token the node\'s /metrics asks for (Authorization: Bearer), the coordinator\'s --token (empty: none required)', env: 'KEYSLICE_TOKEN' },
    workers: { default: String(WORKERS_PER_NODE_DEFAULT), help: 'worker threads, each owning a share of the slices', env: 'KEYSLICE_WORKERS' },
    data: { default: './data/slice-node', help: 'data folder of this node', env: 'KEYSLICE_NODE_DATA' },
    coordinator: { help: 'coordinator to register with and heartbeat to (http://host:port); without it the coordinator must know this node (--nodes or keyslice add)', env: 'KEYSLICE_COORDINATOR' },
    advertise: { help: 'the address the coordinator should dial (ws://host:port); default ws://<host>:<port>, or the host name when listening on 0.0.0.0', env: 'KEYSLICE_ADVERTISE' },
    'cluster-secret': { default: '', help: 'shared secret of coordinator and slice nodes; connections without it are refused (empty: none required, allowed only on a loopback --host)', env: 'KEYSLICE_CLUSTER_SECRET' },
    'snapshot-after-bytes': { default: String(SNAPSHOT_AFTER_LOG_BYTES), help: 'log bytes after which a worker writes a snapshot' },
    'slice-reads-per-second': { default: '0', help: `capacity per slice and table; more reads in a second get ThroughputExceeded (0: no limit; DynamoDB: ${DYNAMODB_PARTITION_READS_PER_SECOND})` },
    'slice-writes-per-second': { default: '0', help: `the same for writes (0: no limit; DynamoDB: ${DYNAMODB_PARTITION_WRITES_PER_SECOND})` },
    durability: { default: DURABILITY_DEFAULT, help: `when a write is acknowledged: ${DURABILITY_MODES.join(' | ')} (fsync: on disk; os: handed to the OS)` },
  },
  'usage: keyslice node [--coordinator http://127.0.0.1:7100] [options]',
).values;
const port = intArg('port', args.port, 0, 65535);
const metricsPort = intArg('metrics-port', args['metrics-port'], 0, 65535);
if (metricsPort !== 0 && metricsPort === port) fail(`--metrics-port must differ from --port (${port})`);
/** --metrics-port's timeouts: the client port's options, with their defaults. */
const metricsHttpTimeouts = httpTimeoutsOf(args);
if (metricsPort !== 0 && args.token === '' && !isLoopbackHost(args.host)) console.error('keyslice slice node: warning: no --token; anyone who reaches --metrics-port reads this node\'s metrics');
const workerCount = intArg('workers', args.workers, 1, WORKERS_PER_NODE_MAX);
if (!DURABILITY_MODES.includes(args.durability as DurabilityMode)) fail(`--durability must be one of ${DURABILITY_MODES.join(', ')}`);
const durability = args.durability as DurabilityMode;
const capacity = {
  readsPerSecond: intArg('slice-reads-per-second', args['slice-reads-per-second'], 0, 1e9),
  writesPerSecond: intArg('slice-writes-per-second', args['slice-writes-per-second'], 0, 1e9),
};
const snapshotAfterBytes = intArg('snapshot-after-bytes', args['snapshot-after-bytes'], 1024, 2 ** 40);
const clusterSecret = args['cluster-secret'];
const secretProblem = missingSecretProblem(args.host, clusterSecret);
if (secretProblem !== null) fail(secretProblem);
const coordinatorUrl = args.coordinator?.replace(/\/+$/, '');
if (coordinatorUrl !== undefined && !/^https?:\/\/[^/]+$/.test(coordinatorUrl)) fail(`--coordinator must be http://host:port, got "${coordinatorUrl}"`);
if (args.advertise !== undefined && !/^wss?:\/\/[^/]+$/.test(args.advertise)) fail(`--advertise must be ws://host:port, got "${args.advertise}"`);
const dataDir = args.data;
try {
  mkdirSync(dataDir, { recursive: true });
} catch (err) {
  fail(`cannot create data folder ${dataDir}: ${(err as Error).message}`);
}
let identity: NodeIdentity;
try {
  lockDataFolder(dataDir); // a second node on this folder is refused, naming the first's pid
  identity = openNodeIdentity(dataDir);
} catch (err) {
  fail((err as Error).message);
}

/** The epoch the workers check routers' batches against on their batch ports (batch-port.ts): `epoch` once no
 * assignment is on its way to them (publishEpoch), so that a batch of a new epoch never runs before its worker took
 * that epoch's assignment (on the node's own connection it queues behind it instead). */
const workersEpoch = new BigInt64Array(new SharedArrayBuffer(8));
/** Assignments handed to the workers and not yet taken by all of them. */
let assignsRunning = 0;
function publishEpoch(): void {
  if (assignsRunning === 0) Atomics.store(workersEpoch, 0, BigInt(epoch));
}

const workers = Array.from(
  { length: workerCount },
  (_, workerIndex) =>
    new WorkerChannel(
      { workerIndex, workerCount, dataDir: join(dataDir, `worker-${workerIndex}`), durability, snapshotAfterBytes, capacity, host: args.host, clusterSecret, epoch: workersEpoch },
      (err) => die(`worker ${workerIndex} failed: ${err instanceof Error ? err.stack : err}`),
      (slice, to, message) => queueReplication(to, slice, message),
      (via, why) => {
        const ws = connections.get(via);
        if (ws !== undefined) refuse(ws, why);
      },
    ),
);
/** Open connections by a number of their own: a worker names the one whose message failed its check. */
const connections = new Map<number, WebSocket>();
let nextConnection = 1;

// ---- replication routing ----
/** The replication part of the latest Assign taken (null: R=1). */
let replication: AssignReplication | null = null;
/** What this turn's replicas sent the coordinator (peers' messages go on the workers' own links). */
let outgoing: ReplicateEntry[] = [];

function queueReplication(to: number, slice: number, message: Uint8Array): void {
  assert(to === COORDINATOR, `a worker sends the main thread what goes to the coordinator only, not to node ${to}`);
  if (outgoing.length === 0) setImmediate(sendReplication);
  outgoing.push([slice, message]);
}

const sentToCoordinator = gapTracker('main sent', 500);
const takenFromCoordinator = gapTracker('main taken', 500);

/** One Replicate frame to the coordinator per turn (more if it holds more entries than a frame may). */
function sendReplication(): void {
  const entries = outgoing;
  outgoing = [];
  if (replication === null) return;
  // No coordinator connected: dropped; it asks again (its pings and elections repeat).
  if (coordinatorConnection === null || coordinatorConnection.readyState !== coordinatorConnection.OPEN) return;
  sentToCoordinator();
  for (let i = 0; i < entries.length; i += REPLICATION_FRAME_ENTRIES_MAX) {
    coordinatorConnection.send(encodeNodeFrame([NodeFrame.Replicate, replication.self, entries.slice(i, i + REPLICATION_FRAME_ENTRIES_MAX)]));
  }
}

/** Hands each entry of the coordinator's Replicate frame to the worker of its slice: what one turn's frames hold for
 * a worker goes to it as one message. Each goes whether or not its slice is replicated here: the worker drops what is
 * not (onPortMessage), slice by slice for a Pings, whose entry's slice is only its first (this thread does not decode
 * it, so it cannot tell a Pings from a message of that slice alone). */
function routeReplication(via: number, entries: WireReplicateEntry[]): void {
  takenFromCoordinator();
  for (const [slice, message] of entries) {
    // decodeNodeFrame takes no KeepAlives or AppendOks from the coordinator: a message from it is its bytes.
    assert(message instanceof Uint8Array, 'the coordinator sends each replication message as its bytes');
    const w = workerOf(slice, workerCount);
    if (incoming.size === 0) setImmediate(deliverReplication);
    let list = incoming.get(w);
    if (list === undefined) incoming.set(w, (list = []));
    list.push([slice, COORDINATOR, message, via]);
  }
}

/** Worker -> what the coordinator's frames of this turn hold for it: one message each. */
let incoming = new Map<number, IncomingReplication[]>();

function deliverReplication(): void {
  const batches = incoming;
  incoming = new Map();
  for (const [w, list] of batches) workers[w].deliver(list);
}

/** The replication settings each worker takes with an assignment. While this process has been given no replicated
 * slice, self -1 and none: a worker that holds replicas read back from its disk (the node held them before a restart,
 * and they left its sets meanwhile) drops them; one that holds none runs exactly as before (R=1). */
function controlsFor(next: AssignReplication | null, previous: AssignReplication | null): (ReplicaControl | null)[] {
  if (next === null && previous === null) return workers.map(() => ({ self: -1, replicated: [], peers: [] }));
  const self = (next ?? previous)!.self;
  return workers.map((_, w) => {
    const sets = next === null ? [] : next.replicas.filter(([slice, nodes]) => nodes.length > 1 && workerOf(slice, workerCount) === w);
    // The worker's peers: the other nodes of its slices' sets, with the URL Assign names for each.
    const nodes = new Set(sets.flatMap(([, set]) => set));
    return { self, replicated: sets.map(([slice]) => slice), peers: next === null ? [] : next.peers.filter(([node]) => nodes.has(node)) };
  });
}

/** The map epoch this node serves; batches of another epoch are refused. */
let epoch = 0;
/** The connection whose Assign the node took last: the coordinator's. Only it moves the epoch. */
let coordinatorConnection: WebSocket | null = null;

function die(message: string): never {
  console.error(`keyslice slice node: ${message}`);
  process.exit(70);
}

function setEpoch(next: number): void {
  assert(Number.isSafeInteger(next) && next >= epoch, `an epoch only grows (had ${epoch}, got ${next})`);
  epoch = next;
  publishEpoch();
}

// Refusals are logged at most once a second (with a count of the others), so that a
// peer sending garbage cannot flood the log.
const logRefusal = sparseLog('refusals');
function refuse(ws: WebSocket, why: string): void {
  logRefusal(`keyslice slice node: closed a connection: ${why}`);
  // 1008: policy violation. The reason reaches the peer, cut to what a close frame holds.
  ws.close(1008, closeReason(why));
}

/** Hands each worker its part of an Assign (counted in assignsRunning by the caller); publishes the epoch once all took it. */
async function assign(newEpoch: number, sliceCount: number, slices: number[], controls: (ReplicaControl | null)[]): Promise<void> {
  // Replication entries that came before this Assign reach the workers before it, in the order they came.
  if (incoming.size > 0) deliverReplication();
  // The workers assert that their epoch only grows: every Assign that reaches them has an
  // epoch at least the node's, and the node's epoch is at least every earlier Assign's.
  await Promise.all(
    workers.map(async (worker, w) => {
      const mine = slices.filter((s) => workerOf(s, workerCount) === w && s < sliceCount);
      const outcome = await worker.run(encodeSliceOps([[SliceOp.Assign, newEpoch, mine]]), true, controls[w]);
      assert(typeof outcome !== 'string', `worker ${w} could not read its assignment: ${outcome}`);
      const [result] = decodeSliceResults(outcome as Uint8Array);
      assert(result[0] !== RESULT_ERROR, `worker ${w} refused its assignment: ${String(result[2])}`);
    }),
  );
  assignsRunning--;
  publishEpoch();
}

function onFrame(ws: WebSocket, via: number, data: Buffer): void {
  const frame = readNodeFrame(ws, data, 'node', refuse);
  if (frame === null) return;
  switch (frame[0]) {
    case NodeFrame.Assign: {
      const [, newEpoch, sliceCount, slices, clusterId, nextReplication] = frame;
      if (identity.clusterId !== null && clusterId !== identity.clusterId) {
        return refuse(ws, `this node belongs to cluster ${identity.clusterId}, not ${clusterId}`);
      }
      if (newEpoch < epoch) return refuse(ws, `an assignment at epoch ${newEpoch} is older than this node's epoch ${epoch}`);
      if (identity.clusterId === null) {
        try {
          saveNodeIdentity(dataDir, { ...identity, clusterId });
        } catch (err) {
          die(`cannot save the cluster id in ${dataDir}: ${(err as Error).message}`);
        }
        identity = { ...identity, clusterId };
        console.log(`keyslice slice node: joined cluster ${clusterId}`);
      }
      // Taken now, so that a later Assign or Epoch is checked against it; the workers get
      // it in order, before any batch that arrives after it.
      coordinatorConnection = ws;
      assignsRunning++; // until every worker took it (assign): the workers' epoch stays where it was
      setEpoch(newEpoch);
      if (replication !== null && nextReplication !== null && nextReplication.self !== replication.self) {
        assignsRunning--;
        publishEpoch();
        return refuse(ws, `this node is node ${replication.self} of the map, not ${nextReplication.self}`);
      }
      // Taken at once (the workers get their part in order with the assignment, and messages for
      // them wait until they have it: worker-channel.ts).
      const controls = controlsFor(nextReplication, replication);
      replication = nextReplication;
      assign(newEpoch, sliceCount, slices, controls).then(
        () => sendNodeFrame(ws, [NodeFrame.Assigned, newEpoch]),
        (err) => die(`assignment failed: ${err instanceof Error ? err.message : err}`),
      );
      return;
    }
    case NodeFrame.Epoch: {
      if (ws !== coordinatorConnection) return refuse(ws, 'an Epoch frame from a connection that did not assign this node its slices');
      if (frame[1] < epoch) return refuse(ws, `epoch ${frame[1]} is older than this node's epoch ${epoch}; an epoch only grows`);
      setEpoch(frame[1]);
      return;
    }
    case NodeFrame.Replicate: {
      const [, from, entries] = frame;
      // A peer's go to the worker of their slice, on its batch port (node protocol 25): decodeNodeFrame refused one here.
      assert(from === COORDINATOR, `decodeNodeFrame takes a node's Replicate from the coordinator only, not node ${from}`);
      if (ws !== coordinatorConnection) return refuse(ws, 'a Replicate frame from the coordinator on a connection that did not assign this node its slices');
      if (replication === null) return; // given no replicas (yet): nothing here to answer
      routeReplication(via, entries);
      return;
    }
    case NodeFrame.Batch: {
      const [, batchId, batchEpoch, parts] = frame;
      if (batchEpoch !== epoch) {
        sendNodeFrame(ws, staleBatchError(batchId, batchEpoch, epoch));
        return;
      }
      for (const [worker, ops] of parts) {
        if (worker >= workerCount) {
          sendNodeFrame(ws, batchError(batchId, 'MalformedRequest', `batch names worker ${worker}; this node has ${workerCount}`));
          continue;
        }
        workers[worker].run(ops).then(
          (outcome) => sendBatchAnswer(ws, batchId, worker, outcome),
          // The worker failed (the node is going down: WorkerChannel's failure handler exits).
          (err) => sendNodeFrame(ws, batchError(batchId, 'Internal', `worker ${worker} failed: ${err instanceof Error ? err.message : err}`)),
        );
      }
      return;
    }
  }
}

const recovered = await Promise.all(workers.map((w) => w.open())).catch((err: Error) => die(`cannot recover: ${err.message}`));
/** Each worker's batch port (batch-port.ts), in Hello. */
const batchPorts = recovered.map((r) => r.batchPort);
recovered.forEach((r, i) => {
  if (r.items > 0 || r.replayedRecords > 0 || r.logCuts !== '') {
    console.log(
      `keyslice slice node: worker ${i} recovered ${r.items} items (snapshot ${r.snapshotItems}, ${r.replayedRecords} log records${r.logCuts !== '' ? `; ${r.logCuts}` : ''}) in ${r.ms} ms`,
    );
  }
  if (r.replicaLogCuts !== '') console.log(`keyslice slice node: worker ${i}: replica log: ${r.replicaLogCuts}`);
});

const server = new WebSocketServer({
  host: args.host,
  port,
  maxPayload: INTERNAL_FRAME_BYTES_MAX,
  // Only a coordinator that knows the cluster secret may send slice commands.
  verifyClient: (info: { req: { headers: Record<string, string | string[] | undefined> } }, done: (ok: boolean, code?: number, message?: string) => void) => {
    if (!secretMatches(clusterSecret, info.req.headers[CLUSTER_SECRET_HEADER])) {
      console.error('keyslice slice node: refused a connection without the cluster secret');
      return done(false, 401, 'cluster secret missing or wrong');
    }
    const version = info.req.headers[NODE_PROTOCOL_HEADER];
    if (version !== undefined && version !== String(NODE_PROTOCOL_VERSION)) {
      console.error(`keyslice slice node: refused a peer worker's replication link: it speaks node protocol ${String(version).slice(0, 20)}, this node ${NODE_PROTOCOL_VERSION}`);
      return done(false, 400, `node protocol ${NODE_PROTOCOL_VERSION} expected`);
    }
    done(true);
  },
});
let lastCloseReason = '';
server.on('connection', (ws) => {
  ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, workerCount, identity.nodeId, identity.clusterId, batchPorts, NODE_INCARNATION]));
  const via = nextConnection++;
  connections.set(via, ws);
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return refuse(ws, 'a text frame; node frames are binary');
    onFrame(ws, via, data as Buffer);
  });
  ws.on('close', (code, reason) => {
    connections.delete(via);
    if (ws === coordinatorConnection) coordinatorConnection = null;
    // 4000-4999: the coordinator says why it will not use this node (e.g. its data folder is
    // not the one it knows). It asks again on each reconnect: said once per reason.
    const why = reason.toString();
    if (code >= 4000 && code < 5000 && why !== lastCloseReason) console.error(`keyslice slice node: the coordinator does not use this node: ${why}`);
    if (code >= 4000 && code < 5000) lastCloseReason = why;
  });
  ws.on('error', (err) => console.error(`keyslice slice node: connection error: ${err.message}`));
});
server.on('error', (err) => cannotListen('slice node', args.host, port, err, 'KEYSLICE_NODE_PORT'));
server.on('listening', async () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  const advertise = args.advertise ?? `ws://${args.host === '0.0.0.0' || args.host === '::' ? hostname() : args.host}:${boundPort}`;
  startGcTrace('main');
  startStallTrace('main');
  let metricsAt = '';
  if (metricsPort !== 0) {
    // Listening before the ready line, so that whoever waits for that line can scrape at once. Loaded here only: a
    // node without --metrics-port does not load prom-client.
    const { nodeRegistry, serveNodeMetrics } = await import('./node-metrics.js');
    const threads = [{ name: 'main', eventLoopUtilization: () => performance.eventLoopUtilization() }, ...workers.map((w, i) => ({ name: `worker-${i}`, eventLoopUtilization: () => w.eventLoopUtilization() }))];
    metricsServer = await serveNodeMetrics(nodeRegistry(advertise, threads), args.host, metricsPort, args.token, metricsHttpTimeouts, (err) =>
      cannotListen('slice node', args.host, metricsPort, err, 'KEYSLICE_NODE_METRICS_PORT', '--metrics-port'),
    );
    metricsAt = ` metrics=http://${args.host}:${metricsPort}/metrics`;
  }
  console.log(`keyslice slice node ready ws://${args.host}:${boundPort} workers=${workerCount} durability=${durability} advertise=${advertise} node=${identity.nodeId} pid=${process.pid}${metricsAt}`);
  if (coordinatorUrl !== undefined) startHeartbeat(coordinatorUrl, advertise);
});

/** Registers with the coordinator and repeats it every NODE_HEARTBEAT_INTERVAL_MS
 * (one request at a time, each bounded in time) for the life of the process. */
function startHeartbeat(coordinator: string, advertise: string): void {
  let registered = false;
  let lastProblem = '';
  const beat = async () => {
    let problem = '';
    try {
      const res = await fetch(`${coordinator}${CLUSTER_API_PREFIX}join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [CLUSTER_SECRET_HEADER]: clusterSecret },
        body: JSON.stringify({ url: advertise, workers: workerCount, nodeId: identity.nodeId, clusterId: identity.clusterId }),
        signal: AbortSignal.timeout(NODE_HEARTBEAT_REQUEST_TIMEOUT_MS),
      });
      const body = (await res.json().catch(() => ({}))) as { error?: { code: string; message: string } };
      if (res.status !== 200) problem = `${body.error?.code ?? res.status}: ${body.error?.message ?? ''}`;
    } catch (err) {
      problem = `coordinator ${coordinator} not reachable (${(err as Error).message})`;
    }
    if (problem === '' && !registered) console.log(`keyslice slice node: registered with ${coordinator} as ${advertise}`);
    if (problem !== '' && problem !== lastProblem) console.error(`keyslice slice node: cannot register: ${problem}`);
    registered = problem === '';
    lastProblem = problem;
    heartbeatTimer = setTimeout(beat, NODE_HEARTBEAT_INTERVAL_MS);
  };
  void beat();
}
let heartbeatTimer: NodeJS.Timeout | undefined;
/** The server of --metrics-port (null: none). */
let metricsServer: Server | null = null;

async function shutdown(): Promise<void> {
  clearTimeout(heartbeatTimer);
  server.close();
  metricsServer?.close();
  for (const ws of server.clients) ws.terminate();
  await Promise.all(workers.map((w) => w.destroy()));
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

// The slice node process: a WebSocket server for the coordinator in front of
// one single-thread piscina pool per worker. Frames are decoded only as far as
// the outer envelope; each worker's ops travel to it as the bytes they came in.
// At start each worker recovers its slices from its folder before the node
// listens, so a coordinator never reaches a node that is still recovering.
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { secretMatches } from '../shared/auth.js';
import { WebSocketServer, type WebSocket } from 'ws';
import { cannotListen, fail, intArg, parseArgs } from '../shared/cli-args.js';
import { assert, KeysliceError } from '../shared/errors.js';
import {
  DURABILITY_DEFAULT,
  DURABILITY_MODES,
  DYNAMODB_PARTITION_READS_PER_SECOND,
  DYNAMODB_PARTITION_WRITES_PER_SECOND,
  INTERNAL_FRAME_BYTES_MAX,
  NODE_HEARTBEAT_INTERVAL_MS,
  NODE_HEARTBEAT_REQUEST_TIMEOUT_MS,
  SLICE_NODE_PORT_DEFAULT,
  SNAPSHOT_AFTER_LOG_BYTES,
  WORKERS_PER_NODE_DEFAULT,
  type DurabilityMode,
} from '../shared/limits.js';
import { WorkerChannel } from './worker-channel.js';
import {
  CLUSTER_API_PREFIX,
  CLUSTER_SECRET_HEADER,
  decodeNodeFrame,
  decodeSliceResults,
  encodeNodeFrame,
  encodeSliceOps,
  NodeFrame,
  NODE_PROTOCOL_VERSION,
  RESULT_ERROR,
  SliceOp,
} from '../shared/protocol.js';

const args = parseArgs(
  process.argv.slice(2),
  {
    host: { default: '127.0.0.1', help: 'address to listen on', env: 'KEYSLICE_HOST' },
    port: { default: String(SLICE_NODE_PORT_DEFAULT), help: 'port to listen on (0: any free port)', env: 'KEYSLICE_NODE_PORT' },
    workers: { default: String(WORKERS_PER_NODE_DEFAULT), help: 'worker threads, each owning a share of the slices', env: 'KEYSLICE_WORKERS' },
    data: { default: './data/slice-node', help: 'data folder of this node', env: 'KEYSLICE_NODE_DATA' },
    coordinator: { help: 'coordinator to register with and heartbeat to (http://host:port); without it the coordinator must know this node (--nodes or keyslice add)', env: 'KEYSLICE_COORDINATOR' },
    advertise: { help: 'the address the coordinator should dial (ws://host:port); default ws://<host>:<port>, or the host name when listening on 0.0.0.0', env: 'KEYSLICE_ADVERTISE' },
    'cluster-secret': { default: '', help: 'shared secret of coordinator and slice nodes; connections without it are refused (empty: none required)', env: 'KEYSLICE_CLUSTER_SECRET' },
    'snapshot-after-bytes': { default: String(SNAPSHOT_AFTER_LOG_BYTES), help: 'log bytes after which a worker writes a snapshot' },
    'slice-reads-per-second': { default: '0', help: `capacity per slice and table; more reads in a second get ThroughputExceeded (0: no limit; DynamoDB: ${DYNAMODB_PARTITION_READS_PER_SECOND})` },
    'slice-writes-per-second': { default: '0', help: `the same for writes (0: no limit; DynamoDB: ${DYNAMODB_PARTITION_WRITES_PER_SECOND})` },
    durability: { default: DURABILITY_DEFAULT, help: `when a write is acknowledged: ${DURABILITY_MODES.join(' | ')} (fsync: on disk; os: handed to the OS)` },
  },
  'usage: keyslice node [--coordinator http://127.0.0.1:7100] [options]',
);
const port = intArg('port', args.port, 0, 65535);
const workerCount = intArg('workers', args.workers, 1, 64);
if (!DURABILITY_MODES.includes(args.durability as DurabilityMode)) fail(`--durability must be one of ${DURABILITY_MODES.join(', ')}`);
const durability = args.durability as DurabilityMode;
const capacity = {
  readsPerSecond: intArg('slice-reads-per-second', args['slice-reads-per-second'], 0, 1e9),
  writesPerSecond: intArg('slice-writes-per-second', args['slice-writes-per-second'], 0, 1e9),
};
const snapshotAfterBytes = intArg('snapshot-after-bytes', args['snapshot-after-bytes'], 1024, 2 ** 40);
const clusterSecret = args['cluster-secret']!;
const coordinatorUrl = args.coordinator?.replace(/\/+$/, '');
if (coordinatorUrl !== undefined && !/^https?:\/\/[^/]+$/.test(coordinatorUrl)) fail(`--coordinator must be http://host:port, got "${coordinatorUrl}"`);
if (args.advertise !== undefined && !/^wss?:\/\/[^/]+$/.test(args.advertise)) fail(`--advertise must be ws://host:port, got "${args.advertise}"`);
const dataDir = args.data!;
try {
  mkdirSync(dataDir, { recursive: true });
} catch (err) {
  fail(`cannot create data folder ${dataDir}: ${(err as Error).message}`);
}

const workers = Array.from(
  { length: workerCount },
  (_, workerIndex) =>
    new WorkerChannel({ workerIndex, workerCount, dataDir: join(dataDir, `worker-${workerIndex}`), durability, snapshotAfterBytes, capacity }, (err) =>
      die(`worker ${workerIndex} failed: ${err instanceof Error ? err.stack : err}`),
    ),
);

let epoch = 0;

function die(message: string): never {
  console.error(`keyslice slice node: ${message}`);
  process.exit(70);
}

async function assign(newEpoch: number, sliceCount: number, slices: number[]): Promise<void> {
  // The workers assert that their epoch only grows; the node's may be ahead through Epoch frames.
  await Promise.all(
    workers.map(async (worker, w) => {
      const mine = slices.filter((s) => s % workerCount === w && s < sliceCount);
      const [result] = decodeSliceResults(await worker.run(encodeSliceOps([[SliceOp.Assign, newEpoch, mine]])));
      assert(result[0] !== RESULT_ERROR, `worker ${w} refused its assignment`);
    }),
  );
  epoch = Math.max(epoch, newEpoch);
}

function onFrame(ws: WebSocket, data: Buffer): void {
  let frame;
  try {
    frame = decodeNodeFrame(data);
  } catch (err) {
    console.error(`keyslice slice node: dropped a malformed frame: ${(err as Error).message}`);
    return;
  }
  switch (frame[0]) {
    case NodeFrame.Assign: {
      const [, newEpoch, sliceCount, slices] = frame;
      assign(newEpoch, sliceCount, slices).then(
        () => ws.send(encodeNodeFrame([NodeFrame.Assigned, newEpoch])),
        (err) => die(`assignment failed: ${err}`),
      );
      return;
    }
    case NodeFrame.Epoch: {
      epoch = Math.max(epoch, frame[1]);
      return;
    }
    case NodeFrame.Batch: {
      const [, batchId, batchEpoch, parts] = frame;
      if (batchEpoch !== epoch) {
        ws.send(encodeNodeFrame([NodeFrame.BatchError, batchId, 'WrongOwner', `batch for epoch ${batchEpoch}, node is at epoch ${epoch}`]));
        return;
      }
      for (const [worker, ops] of parts) {
        if (!Number.isInteger(worker) || worker < 0 || worker >= workerCount) {
          const err = new KeysliceError('Internal', `batch names worker ${worker}; this node has ${workerCount}`);
          ws.send(encodeNodeFrame([NodeFrame.BatchError, batchId, err.code, err.message]));
          continue;
        }
        workers[worker].run(ops).then((results) => {
          if (ws.readyState === ws.OPEN) ws.send(encodeNodeFrame([NodeFrame.BatchReply, batchId, worker, results]));
        });
      }
      return;
    }
    default:
      console.error(`keyslice slice node: unexpected frame kind ${frame[0]}`);
  }
}

const recovered = await Promise.all(workers.map((w) => w.open())).catch((err: Error) => die(`cannot recover: ${err.message}`));
recovered.forEach((r, i) => {
  if (r.items > 0 || r.replayedRecords > 0 || r.tornBytes > 0) {
    console.log(
      `keyslice slice node: worker ${i} recovered ${r.items} items (snapshot ${r.snapshotItems}, ${r.replayedRecords} log records${r.tornBytes > 0 ? `, cut a torn tail of ${r.tornBytes} bytes` : ''}) in ${r.ms} ms`,
    );
  }
});

const server = new WebSocketServer({
  host: args.host,
  port,
  maxPayload: INTERNAL_FRAME_BYTES_MAX,
  // Only a coordinator that knows the cluster secret may send slice commands.
  verifyClient: (info: { req: { headers: Record<string, string | string[] | undefined> } }, done: (ok: boolean, code?: number, message?: string) => void) => {
    if (secretMatches(clusterSecret, info.req.headers[CLUSTER_SECRET_HEADER])) return done(true);
    console.error('keyslice slice node: refused a connection without the cluster secret');
    done(false, 401, 'cluster secret missing or wrong');
  },
});
server.on('connection', (ws) => {
  ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, workerCount]));
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return;
    onFrame(ws, data as Buffer);
  });
  ws.on('error', (err) => console.error(`keyslice slice node: connection error: ${err.message}`));
});
server.on('error', (err) => cannotListen('slice node', args.host!, port, err, 'KEYSLICE_NODE_PORT'));
server.on('listening', () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  const advertise = args.advertise ?? `ws://${args.host === '0.0.0.0' || args.host === '::' ? hostname() : args.host}:${boundPort}`;
  console.log(`keyslice slice node ready ws://${args.host}:${boundPort} workers=${workerCount} durability=${durability} advertise=${advertise} pid=${process.pid}`);
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
        body: JSON.stringify({ url: advertise, workers: workerCount }),
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

async function shutdown(): Promise<void> {
  clearTimeout(heartbeatTimer);
  server.close();
  for (const ws of server.clients) ws.terminate();
  await Promise.all(workers.map((w) => w.destroy()));
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

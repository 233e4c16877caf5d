// The slice node process: a WebSocket server for the coordinator in front of
// one single-thread piscina pool per worker. Frames are decoded only as far as
// the outer envelope; each worker's ops travel to it as the bytes they came in.
import { mkdirSync } from 'node:fs';
import { Piscina } from 'piscina';
import { WebSocketServer, type WebSocket } from 'ws';
import { fail, intArg, parseArgs } from '../shared/cli-args.js';
import { assert, KeysliceError } from '../shared/errors.js';
import { INTERNAL_FRAME_BYTES_MAX, SLICE_NODE_PORT_DEFAULT, WORKERS_PER_NODE_DEFAULT } from '../shared/limits.js';
import { decodeNodeFrame, decodeSliceResults, encodeNodeFrame, encodeSliceOps, NodeFrame, NODE_PROTOCOL_VERSION, RESULT_ERROR, SliceOp } from '../shared/protocol.js';

const args = parseArgs(
  process.argv.slice(2),
  {
    host: { default: '127.0.0.1', help: 'address to listen on' },
    port: { default: String(SLICE_NODE_PORT_DEFAULT), help: 'port to listen on (0: any free port)' },
    workers: { default: String(WORKERS_PER_NODE_DEFAULT), help: 'worker threads, each owning a share of the slices' },
    data: { default: './data/slice-node', help: 'data folder of this node' },
  },
  'usage: node dist/slice-worker/main.js [options]',
);
const port = intArg('port', args.port, 0, 65535);
const workerCount = intArg('workers', args.workers, 1, 64);
try {
  mkdirSync(args.data!, { recursive: true });
} catch (err) {
  fail(`cannot create data folder ${args.data}: ${(err as Error).message}`);
}

const pools = Array.from(
  { length: workerCount },
  (_, workerIndex) =>
    new Piscina({
      filename: new URL('./worker.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      workerData: { workerIndex, workerCount },
    }),
);
for (const pool of pools) {
  // A worker thread holds its slices in memory: if it dies, the node must not go on pretending.
  pool.on('error', (err) => die(`worker thread failed: ${err instanceof Error ? err.stack : err}`));
}

let epoch = 0;

function die(message: string): never {
  console.error(`keyslice slice node: ${message}`);
  process.exit(70);
}

async function runOnWorker(worker: number, ops: Uint8Array): Promise<Uint8Array> {
  // Copy: the bytes may view a larger pooled buffer; a copy is the exact region, and ours.
  const own = new Uint8Array(ops);
  try {
    return (await pools[worker].run(own, { transferList: [own.buffer] })) as Uint8Array;
  } catch (err) {
    die(`worker ${worker} threw on a batch: ${err instanceof Error ? err.stack : err}`);
  }
}

async function assign(newEpoch: number, sliceCount: number, slices: number[]): Promise<void> {
  assert(newEpoch >= epoch, `an epoch only grows (had ${epoch}, got ${newEpoch})`);
  await Promise.all(
    pools.map(async (_, w) => {
      const mine = slices.filter((s) => s % workerCount === w && s < sliceCount);
      const [result] = decodeSliceResults(await runOnWorker(w, encodeSliceOps([[SliceOp.Assign, newEpoch, mine]])));
      assert(result[0] !== RESULT_ERROR, `worker ${w} refused its assignment`);
    }),
  );
  epoch = newEpoch;
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
        runOnWorker(worker, ops).then((results) => {
          if (ws.readyState === ws.OPEN) ws.send(encodeNodeFrame([NodeFrame.BatchReply, batchId, worker, results]));
        });
      }
      return;
    }
    default:
      console.error(`keyslice slice node: unexpected frame kind ${frame[0]}`);
  }
}

const server = new WebSocketServer({ host: args.host, port, maxPayload: INTERNAL_FRAME_BYTES_MAX });
server.on('connection', (ws) => {
  ws.send(encodeNodeFrame([NodeFrame.Hello, NODE_PROTOCOL_VERSION, workerCount]));
  ws.on('message', (data, isBinary) => {
    if (!isBinary) return;
    onFrame(ws, data as Buffer);
  });
  ws.on('error', (err) => console.error(`keyslice slice node: connection error: ${err.message}`));
});
server.on('error', (err) => die(`cannot listen on ${args.host}:${port}: ${err.message}`));
server.on('listening', () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  console.log(`keyslice slice node ready ws://${args.host}:${boundPort} workers=${workerCount} pid=${process.pid}`);
});

async function shutdown(): Promise<void> {
  server.close();
  for (const ws of server.clients) ws.terminate();
  await Promise.all(pools.map((p) => p.destroy()));
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

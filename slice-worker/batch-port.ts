// A worker thread's batch port (node protocol 18): a WebSocket server of its own,
// on the node's host, where a router sends this worker's Batch frames and gets
// their answers back, so that a request wakes the worker thread directly instead
// of the node's main thread, which woke the worker and was woken by it again.
// That relay was 105-150 µs of a 350-500 µs GetItem at one request in flight
// (bench/PROFILE.md, "The node's relay, alone").
//
// What the node's main thread checks on its own connection is checked here too:
// the cluster secret and the node protocol in the handshake, every frame whole
// (decodeNodeFrame, receiver 'worker': Batch frames only), the batch's epoch
// against the one the node serves (`epochNow`, which the main thread publishes
// once its workers took the assignment of that epoch), and that the batch names
// this worker. A bad frame closes the connection and changes nothing.
// The batch runs at once, in the turn that read it (worker.ts runs one task at a
// time, and this thread runs nothing else meanwhile); an answer held until its
// records commit is sent when released (`held`).
import { WebSocketServer, type WebSocket } from 'ws';
import { secretMatches } from '../shared/auth.js';
import { INTERNAL_FRAME_BYTES_MAX } from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER, closeReason, decodeNodeFrame, encodeNodeFrame, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, type NodeFrameMessage } from '../shared/protocol.js';
import { sparseLog } from '../shared/sparse-log.js';
import type { ChunkAnswer } from './worker.js';

export interface BatchPortOptions {
  host: string;
  clusterSecret: string;
  workerIndex: number;
  /** The epoch the node serves now. */
  epochNow: () => number;
  /** Runs one batch's packed ops (worker.ts runBatches for one chunk from a Batch frame). */
  run: (ops: Uint8Array) => ChunkAnswer;
  /** Sends the answer of a held chunk to `send` once it is released. */
  held: (ticket: number, send: (results: Uint8Array) => void) => void;
}

const logRefusal = sparseLog('refusals');

/** Listens on a free port of the node's host; resolves with it. */
export function openBatchPort(o: BatchPortOptions): Promise<number> {
  const server = new WebSocketServer({
    host: o.host,
    port: 0,
    maxPayload: INTERNAL_FRAME_BYTES_MAX,
    verifyClient: (info: { req: { headers: Record<string, string | string[] | undefined> } }, done: (ok: boolean, code?: number, message?: string) => void) => {
      if (!secretMatches(o.clusterSecret, info.req.headers[CLUSTER_SECRET_HEADER])) return done(false, 401, 'cluster secret missing or wrong');
      if (info.req.headers[NODE_PROTOCOL_HEADER] !== String(NODE_PROTOCOL_VERSION)) return done(false, 400, `node protocol ${NODE_PROTOCOL_VERSION} expected`);
      done(true);
    },
  });
  server.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      if (!isBinary) return refuse(ws, 'a text frame; node frames are binary');
      onFrame(o, ws, data as Buffer);
    });
    ws.on('error', () => {}); // a broken router connection only ends that connection
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      const addr = server.address();
      resolve(typeof addr === 'object' && addr !== null ? addr.port : 0);
    });
  });
}

function refuse(ws: WebSocket, why: string): void {
  logRefusal(`keyslice slice node: a worker's batch port closed a connection: ${why}`);
  ws.close(1008, closeReason(why));
}

function send(ws: WebSocket, frame: NodeFrameMessage): void {
  if (ws.readyState === ws.OPEN) ws.send(encodeNodeFrame(frame));
}

function onFrame(o: BatchPortOptions, ws: WebSocket, data: Buffer): void {
  if (ws.readyState !== ws.OPEN) return; // closing: what it sent after a refusal is not read
  let frame;
  try {
    frame = decodeNodeFrame(data, 'worker');
  } catch (err) {
    return refuse(ws, `malformed frame: ${(err as Error).message}`);
  }
  if (frame[0] !== NodeFrame.Batch) return; // decodeNodeFrame('worker') takes Batch frames only
  const [, batchId, batchEpoch, parts] = frame;
  if (parts.length !== 1 || parts[0][0] !== o.workerIndex) {
    return send(ws, [NodeFrame.BatchError, batchId, 'MalformedRequest', `a batch port takes batches of its own worker (${o.workerIndex}) only, in one part`]);
  }
  const epoch = o.epochNow();
  if (batchEpoch !== epoch) return send(ws, [NodeFrame.BatchError, batchId, 'WrongOwner', `batch for epoch ${batchEpoch}, node is at epoch ${epoch}`]);
  const answer = o.run(parts[0][1]);
  const reply = (results: Uint8Array) => send(ws, [NodeFrame.BatchReply, batchId, o.workerIndex, results]);
  if (typeof answer === 'string') send(ws, [NodeFrame.BatchError, batchId, 'MalformedRequest', `worker ${o.workerIndex} refused the batch: ${answer}`]);
  // A copy: the results view the packer's reused buffer, which packing the frame writes to.
  else if (answer instanceof Uint8Array) reply(answer.slice());
  else o.held(answer.held, reply);
}

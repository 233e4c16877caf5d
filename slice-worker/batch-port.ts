// A worker thread's batch port (node protocol 20): a WebSocket server of its own,
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
// The batches read in one turn run at its end as one task (worker.ts runs one task
// at a time, and this thread runs nothing else meanwhile); an answer held until its
// records commit is sent when released (`held`).
//
// Replication (node protocol 25): the workers of peer nodes send this worker's replicas
// their messages here too (peer-links.ts), as Replicate frames, each checked whole
// (decodeNodeFrame decodes and checks every message, and refuses one from the
// coordinator) and then handed to `replicate`, which checks the sender and the slices
// (worker.ts) and hands them to the replicas at once: no hop through the node's main
// thread. A frame refused closes its connection, as a bad batch does.
import { WebSocketServer, type WebSocket } from '../shared/ws.js';
import { secretMatches } from '../shared/auth.js';
import { INTERNAL_FRAME_BYTES_MAX } from '../shared/limits.js';
import { batchError, CLUSTER_SECRET_HEADER, closeReason, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, staleBatchError, type DecodedReplicateEntry } from '../shared/protocol.js';
import { readNodeFrame, sendBatchAnswer, sendNodeFrame } from './node-socket.js';
import { sparseLog } from '../shared/sparse-log.js';
import type { ChunkAnswer } from './worker.js';
import { TRACE_TURNS, turns } from './turn-trace.js';

export interface BatchPortOptions {
  host: string;
  clusterSecret: string;
  workerIndex: number;
  /** The epoch the node serves now. */
  epochNow: () => number;
  /** Runs batches' packed ops as one task (worker.ts runBatches), an answer per batch. */
  run: (chunks: Uint8Array[]) => ChunkAnswer[];
  /** Sends the answer of a held chunk to `send` once it is released. */
  held: (ticket: number, send: (results: Uint8Array) => void) => void;
  /** Takes a peer's Replicate frame (checked whole); answers why it is refused (its connection is closed), or null. */
  replicate: (from: number, entries: DecodedReplicateEntry[]) => string | null;
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

/** Batches read in this turn, from every connection: they run together at its end, as one task (one log append and,
 * with durability fsync, one flush: group commit, as the node's queue gives batches that waited for a busy worker). */
let queued: { ws: WebSocket; batchId: number; epoch: number; ops: Uint8Array }[] = [];

function onFrame(o: BatchPortOptions, ws: WebSocket, data: Buffer): void {
  const frame = readNodeFrame(ws, data, 'worker', refuse);
  if (frame === null) return;
  if (frame[0] === NodeFrame.Replicate) {
    const problem = o.replicate(frame[1], frame[2]);
    if (problem !== null) refuse(ws, problem);
    return;
  }
  const [, batchId, epoch, parts] = frame;
  if (parts.length !== 1 || parts[0][0] !== o.workerIndex) {
    return sendNodeFrame(ws, batchError(batchId, 'MalformedRequest', `a batch port takes batches of its own worker (${o.workerIndex}) only, in one part`));
  }
  // The end of this turn: at one request in flight the check phase follows the poll phase that read the frame (no wait).
  if (queued.push({ ws, batchId, epoch, ops: parts[0][1] }) === 1) setImmediate(runQueued, o);
}

function runQueued(o: BatchPortOptions): void {
  const now = o.epochNow();
  const batches = queued;
  queued = [];
  const run: typeof batches = [];
  for (const b of batches) {
    if (b.epoch === now) run.push(b);
    else sendNodeFrame(b.ws, staleBatchError(b.batchId, b.epoch, now));
  }
  if (run.length === 0) return;
  const answers = o.run(run.map((b) => b.ops));
  run.forEach((b, i) => {
    const answer = answers[i];
    if (TRACE_TURNS) turns.answersOut++;
    if (typeof answer === 'string' || answer instanceof Uint8Array) sendBatchAnswer(b.ws, b.batchId, o.workerIndex, answer);
    else o.held(answer.held, (results) => sendBatchAnswer(b.ws, b.batchId, o.workerIndex, results));
  });
}

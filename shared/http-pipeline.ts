// Pipelined HTTP requests on one keep-alive connection, bounded, on every HTTP port (boundedHttpServer,
// shared/http-server.ts, applies it to each request: the client port's and a slice node's --metrics-port's). node:http stops reading a connection once the responses queued on it pass the socket's
// high-water mark, but it counts only responses already written, and it parses
// a whole chunk read from the socket (hundreds of small requests) before it
// pauses. A client that pipelines many requests and does not read its answers
// would have every one of them computed and held. Here at most
// HTTP_PIPELINED_REQUESTS_MAX requests of a connection run at once (the rest
// wait, not started, in order), and every request counts towards node's own
// figure of queued output from its arrival until its response has left for the
// kernel, at a weight that makes that many fill the mark: node then pauses the
// socket and its parser, and resumes them as responses leave.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { HTTP_PIPELINED_REQUESTS_MAX } from './limits.js';

interface Lane {
  running: number;
  waiting: (() => void)[];
}
const lanes = new WeakMap<Socket, Lane>();
let warned = false;

/** Runs `handle` for this request now, or once fewer than HTTP_PIPELINED_REQUESTS_MAX
 * requests of its connection are running (in their order of arrival). */
export function admitPipelined(req: IncomingMessage, res: ServerResponse, handle: () => void): void {
  const socket = req.socket;
  let lane = lanes.get(socket);
  if (lane === undefined) lanes.set(socket, (lane = { running: 0, waiting: [] }));
  // node:http's hook for bytes queued on the connection (its ServerResponse calls it with
  // the bytes it holds back); pausing the socket ourselves would be undone by node
  // whenever a request body is read.
  const queued = (res as unknown as { _onPendingData?: (delta: number) => void })._onPendingData;
  const weight = Math.ceil(socket.writableHighWaterMark / HTTP_PIPELINED_REQUESTS_MAX);
  if (typeof queued === 'function') queued(weight);
  else if (!warned) {
    warned = true;
    console.error('keyslice: this Node.js has no ServerResponse._onPendingData; pipelined HTTP requests are bounded in count only');
  }
  let started = false;
  let done = false;
  const start = () => {
    if (done) return startNext(lane); // its connection closed while it waited
    started = true;
    lane.running++;
    handle();
  };
  const release = () => {
    if (done) return;
    done = true;
    if (typeof queued === 'function') queued(-weight);
    if (!started) return;
    lane.running--;
    startNext(lane);
  };
  // 'finish': the response has left for the kernel; 'close': the connection went first.
  res.once('finish', release);
  res.once('close', release);
  if (lane.running < HTTP_PIPELINED_REQUESTS_MAX) start();
  else lane.waiting.push(start);
}

function startNext(lane: Lane): void {
  lane.waiting.shift()?.();
}

// What a slice node's main thread (main.ts) and a worker's batch port (batch-port.ts) do alike on a connection that
// sends them node frames: read a frame whole or close the connection, send frames, and answer a batch's chunk.
import type { WebSocket } from '../shared/ws.js';
import { batchError, decodeNodeFrame, encodeBatchReply, encodeNodeFrame, type NodeFrameMessage, type NodeSideFrame, type WorkerSideFrame } from '../shared/protocol.js';

/** Decodes and checks one frame that came on `ws` for `receiver`. A malformed one is refused (`refuse` closes the
 * connection); what comes after a refusal, while the connection closes, is not read: null for both. */
export function readNodeFrame(ws: WebSocket, data: Buffer, receiver: 'node', refuse: (ws: WebSocket, why: string) => void): NodeSideFrame | null;
export function readNodeFrame(ws: WebSocket, data: Buffer, receiver: 'worker', refuse: (ws: WebSocket, why: string) => void): WorkerSideFrame | null;
export function readNodeFrame(ws: WebSocket, data: Buffer, receiver: 'node' | 'worker', refuse: (ws: WebSocket, why: string) => void): NodeSideFrame | WorkerSideFrame | null {
  if (ws.readyState !== ws.OPEN) return null;
  try {
    return decodeNodeFrame(data, receiver);
  } catch (err) {
    refuse(ws, `malformed frame: ${(err as Error).message}`);
    return null;
  }
}

export function sendNodeFrame(ws: WebSocket, frame: NodeFrameMessage): void {
  if (ws.readyState === ws.OPEN) ws.send(encodeNodeFrame(frame));
}

/** Sends what worker `worker` answered for a batch's chunk: its results (with their headroom, not copied again:
 * encodeBatchReply) or, when it refused the chunk, why (a BatchError). */
export function sendBatchAnswer(ws: WebSocket, batchId: number, worker: number, answer: Uint8Array | string): void {
  if (typeof answer === 'string') sendNodeFrame(ws, batchError(batchId, 'MalformedRequest', `worker ${worker} refused the batch: ${answer}`));
  else if (ws.readyState === ws.OPEN) ws.send(encodeBatchReply(batchId, worker, answer));
}

// Opening a slice node's socket (or a worker's batch port) by hand, as a router or a peer
// does, for tests that speak the node protocol frame by frame.
import { Unpackr } from 'msgpackr';
import WebSocket from 'ws';
import { CLUSTER_SECRET_HEADER, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame } from '../shared/protocol.js';

const WAIT_MS = 10_000;
const unpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });

/** A socket that opened: its first frame, if asked for, decoded (first) and as it came (firstBytes, for
 * decodeNodeFrame's checks). */
export interface Dialed {
  ws: WebSocket;
  first: unknown[] | null;
  firstBytes: Buffer | null;
}

/** Opens `url` with these headers; resolves with the socket and its first frame (if `firstFrame`), or the HTTP
 * status that refused it. Fails after WAIT_MS with neither. */
export function dialNode(url: string, headers: Record<string, string>, firstFrame: boolean): Promise<Dialed | { status: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const timer = setTimeout(() => reject(new Error(`${url}: nothing within ${WAIT_MS} ms`)), WAIT_MS);
    ws.on('error', () => {});
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      resolve({ status: res.statusCode ?? 0 });
      ws.terminate();
    });
    if (firstFrame) {
      ws.once('message', (data: Buffer) => {
        clearTimeout(timer);
        resolve({ ws, first: unpackr.unpack(data) as unknown[], firstBytes: data });
      });
    } else {
      ws.once('open', () => {
        clearTimeout(timer);
        resolve({ ws, first: null, firstBytes: null });
      });
    }
  });
}

/** dialNode for a socket that must open: a refusal fails with its status. */
export async function openNode(url: string, headers: Record<string, string>, firstFrame: boolean): Promise<Dialed> {
  const r = await dialNode(url, headers, firstFrame);
  if ('status' in r) throw new Error(`${url} refused the connection: HTTP ${r.status}`);
  return r;
}

/** The headers a peer dials a slice node with (slice-worker/peer-links.ts): the cluster secret (the test clusters'
 * is empty) and its node protocol version (this build's). */
export function peerHeaders(secret = '', version = String(NODE_PROTOCOL_VERSION)): Record<string, string> {
  return { [CLUSTER_SECRET_HEADER]: secret, [NODE_PROTOCOL_HEADER]: version };
}

/** A socket to the slice node at `url` dialed as a peer of this version, once the node has sent its Hello. */
export async function dialPeer(url: string): Promise<WebSocket> {
  return (await openNode(url, peerHeaders(), true)).ws;
}

/** A socket to a worker's batch port on this host, dialed as a peer's worker dials it (no greeting: open is enough). */
export async function dialWorkerPort(port: number): Promise<WebSocket> {
  return (await openNode(`ws://127.0.0.1:${port}`, peerHeaders(), false)).ws;
}

/** The epoch a slice node names in refusing a batch at another: a BatchError WrongOwner's own field (node protocol 26;
 * slice-worker/main.ts on the node's socket, slice-worker/batch-port.ts on a worker's port) for a frame decoded or not
 * (decodeNodeFrame checks the field; this asks only that it be a whole number, and fails the test if not); any other
 * frame (an answer, another refusal, null for none) gives null. A test learns the node's epoch so, by a Batch at epoch 0. */
export function epochOfRefusal(frame: unknown): number | null {
  if (!(Array.isArray(frame) && frame[0] === NodeFrame.BatchError && frame[2] === 'WrongOwner')) return null;
  const epoch: unknown = frame[4];
  if (!(Number.isSafeInteger(epoch) && (epoch as number) >= 0)) throw new Error(`a WrongOwner BatchError without the node's epoch: ${JSON.stringify(frame)}`);
  return epoch as number;
}

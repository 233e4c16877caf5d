// The typed seam between the request path and the slice nodes. A SliceChannel is
// one slice node as a router (or the coordinator) sees it: its worker threads, and
// each slice op sent to one of them, answered with that op's own result type
// (SliceOpResults in shared/protocol.ts, which the worker is checked against) or
// rejected with a KeysliceError. A slice's ops go to the worker workerOf(slice)
// (shared/hashing.ts), the same function the node uses to hand them on.
//
// NodeLink (metadata/node-link.ts) is the channel over WebSocket. Routing
// (routing.ts) names each slice's channel by the map, and Router (router.ts)
// retries over them; an in-process simulation can put its own channel behind
// Routing, with the network and the clock in its hands.
import type { ResultOf, SliceOpMessage } from '../../shared/protocol.js';

export interface SliceChannel {
  /** The node's address (for messages and load reports). */
  readonly url: string;
  /** Only a 'ready' channel sends; the others reject every op at once with Unavailable. */
  readonly state: 'connecting' | 'assigning' | 'ready' | 'closed';
  /** The node's worker threads; 0 until it is first ready. */
  readonly workerCount: number;
  /** Sends `op` to the worker that owns `slice`. */
  send<Op extends SliceOpMessage>(slice: number, op: Op): Promise<ResultOf<Op>>;
  /** Sends `op` to worker `worker` (an op over all of that worker's slices: a scan, a table drop). */
  sendToWorker<Op extends SliceOpMessage>(worker: number, op: Op): Promise<ResultOf<Op>>;
}

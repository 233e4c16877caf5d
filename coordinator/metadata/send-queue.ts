// The queue of ops a link holds for one slice node, per worker thread, and when to
// send them. Every frame to a node and every task a node hands to a worker costs
// about as much as many ops in it (the socket write was a third of a router's busy
// time under load, bench/PROFILE.md), and requests over HTTP/1.1 (the DynamoDB API)
// arrive one per event-loop turn, so sending each turn's ops at once made one frame
// per request. So a worker's ops wait while that worker already has
// NODE_LINK_WORKER_BATCHES_IN_FLIGHT batches unanswered (one running, one waiting in
// the node: the worker never idles for a round trip), and go in the next frame when
// one is answered. A worker with fewer in flight gets its ops in a frame at the end
// of the turn that queued them (setImmediate): at one request in flight nothing
// waits longer than that turn. A worker's queue that reaches NODE_BATCH_OPS_MAX ops
// or NODE_BATCH_BYTES_MAX (estimated) goes at once, so a frame stays bounded in both
// whatever the answers do. Order per worker is the order of push().
import { assert } from '../../shared/errors.js';
import { NODE_BATCH_BYTES_MAX, NODE_BATCH_OPS_MAX, NODE_LINK_WORKER_BATCHES_IN_FLIGHT } from '../../shared/limits.js';
import { SliceOp, type SliceOpMessage } from '../../shared/protocol.js';

/** What one op adds to a frame, about: its item for a put (counted as the router counts items), a little for the rest. */
export function opBytesEstimate(op: SliceOpMessage): number {
  switch (op[0]) {
    case SliceOp.Put:
      return op[3].length + op[5] + 64;
    case SliceOp.Get:
    case SliceOp.Delete:
      return op[3].length + 64;
    case SliceOp.MoveApply:
      // Moves send one op per step, bounded by MOVE_CHUNK_ITEMS; it goes alone when large.
      return NODE_BATCH_BYTES_MAX;
    default:
      return 256;
  }
}

/** The parts of one frame: per worker, its ops and what settles each. */
export type FrameParts<S> = { worker: number; ops: SliceOpMessage[]; settles: S[] }[];

export class SendQueue<S> {
  private ops: SliceOpMessage[][];
  private settles: S[][];
  private bytes: number[];
  /** Batches sent to each worker and not yet answered (or failed). */
  private readonly inFlight: number[];
  private scheduled = false;

  constructor(
    readonly workerCount: number,
    /** Sends one frame now (called with at least one part). */
    private readonly sendFrame: (parts: FrameParts<S>) => void,
  ) {
    this.ops = Array.from({ length: workerCount }, () => []);
    this.settles = Array.from({ length: workerCount }, () => []);
    this.bytes = new Array<number>(workerCount).fill(0);
    this.inFlight = new Array<number>(workerCount).fill(0);
  }

  push(worker: number, op: SliceOpMessage, settle: S): void {
    assert(worker >= 0 && worker < this.workerCount, 'worker index within the node');
    this.ops[worker].push(op);
    this.settles[worker].push(settle);
    this.bytes[worker] += opBytesEstimate(op);
    if (this.ops[worker].length >= NODE_BATCH_OPS_MAX || this.bytes[worker] >= NODE_BATCH_BYTES_MAX) this.send([worker]);
    else this.schedule();
  }

  /** A batch of `worker`'s was answered or failed: its waiting ops may go. */
  answered(worker: number): void {
    assert(this.inFlight[worker] > 0, 'an answer for a batch that was sent');
    this.inFlight[worker]--;
    if (this.ops[worker].length > 0) this.schedule();
  }

  /** Empties the queue (the connection is gone): what settles each op that was not sent, and forgets
   * the batches in flight (the link fails them itself). */
  clear(): S[] {
    const out = this.settles.flat();
    this.ops = this.ops.map(() => []);
    this.settles = this.settles.map(() => []);
    this.bytes.fill(0);
    this.inFlight.fill(0);
    return out;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const ready: number[] = [];
      for (let w = 0; w < this.workerCount; w++) if (this.ops[w].length > 0 && this.inFlight[w] < NODE_LINK_WORKER_BATCHES_IN_FLIGHT) ready.push(w);
      if (ready.length > 0) this.send(ready);
    });
  }

  private send(workers: number[]): void {
    const parts: FrameParts<S> = [];
    for (const w of workers) {
      parts.push({ worker: w, ops: this.ops[w], settles: this.settles[w] });
      this.ops[w] = [];
      this.settles[w] = [];
      this.bytes[w] = 0;
      this.inFlight[w]++;
    }
    this.sendFrame(parts);
  }
}

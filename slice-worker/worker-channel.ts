// The node's side of one worker thread: the thread and a queue. While the worker
// runs a task, batches that arrive wait; when it is done they all go in the next
// task, so they share one log append and one flush (group commit). Order is kept:
// batches run in the order they came.
//
// A plain Worker and its own port, one task at a time (worker-thread.ts is the
// other end). This was a single-thread piscina pool; piscina's machinery for
// spreading tasks over threads had nothing to spread here, and its per-task cost
// showed at one request in flight: a round trip to an idle thread took 101 µs
// through piscina against 63 µs by postMessage (bench/hop-floor.ts, bench/PROFILE.md).
//
// Replication: a MessagePort, given to the worker at open, carries the coordinator's
// replication messages both ways (peers' go between the workers directly, node
// protocol 25: peer-links.ts, batch-port.ts) and the answers the worker held until
// their records were committed (worker.ts), one message per turn of the worker. A task's chunk
// answered {held: ticket} resolves when [ticket, bytes] comes on the port, so
// the worker runs the next tasks meanwhile. Messages for the worker wait while
// an assignment that changes its replicated slices is queued or running, so
// that they reach it after that assignment, as they came after it.
// Replication messages cross the port as bytes, both ways, one buffer per message
// of the port (transferred, not cloned): the node's main thread neither decodes
// nor encodes them; the worker does both, and checks what it decodes.
import type { EventLoopUtilization } from 'node:perf_hooks';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { assert } from '../shared/errors.js';
import type { ThreadAnswer } from './worker-thread.js';
import type { ChunkAnswer, ChunkOutcome, NodePortMessage, OpenSummary, ReplicaControl, WorkerConfig, WorkerPortMessage, WorkerTask } from './worker.js';

/** Numbers per message in WorkerPortMessage's ranges ([slice, to, start, end]) and NodePortMessage's ([slice, from,
 * via, start, end]). Here, not in worker.ts: that module is the worker thread's own (it runs as it loads). */
export const OUT_RANGE = 4;
export const IN_RANGE = 5;

/** A replication message for the worker: its bytes as they came (checked by the worker) on connection `via`. */
export type IncomingReplication = [slice: number, from: number, message: Uint8Array, via: number];

type Waiting = { bytes: Uint8Array; trusted: boolean; control: ReplicaControl | null; resolve: (r: ChunkOutcome) => void; reject: (e: unknown) => void };

export class WorkerChannel {
  private readonly thread: Worker;
  /** What settles the task the thread runs now (one at a time); null while it runs none. */
  private current: { resolve: (result: unknown) => void; reject: (err: unknown) => void } | null = null;
  private destroyed = false;
  /** The thread has exited (it failed, or destroy stopped it). */
  private exited = false;
  private waiting: Waiting[] = [];
  private busy = false;
  private readonly port: MessagePort;
  private readonly workerPort: MessagePort;
  /** Held chunks: ticket -> resolve. An answer that comes before its task's result waits in `early`. */
  private readonly held = new Map<number, (r: ChunkOutcome) => void>();
  private readonly early = new Map<number, Uint8Array>();
  /** Assignments with replication settings queued or running; messages for the worker wait meanwhile. */
  private controlsPending = 0;
  private deferred: IncomingReplication[] = [];

  constructor(
    config: WorkerConfig,
    private readonly onFailure: (err: unknown) => void,
    /** What the worker's replicas send the coordinator, a message at a time: its bytes (a view of the buffer the
     * worker transferred). What they send peers goes on the worker's own links (peer-links.ts). */
    private readonly onReplication: (slice: number, to: number, message: Uint8Array) => void = () => {},
    /** The worker refused a message that came on connection `via` (it failed its check): why. */
    private readonly onRefused: (via: number, why: string) => void = () => {},
  ) {
    // The thread keeps its own event loop turning between tasks (worker.ts writes snapshots and
    // runs replication timers there), so it waits for tasks on its port, not in Atomics.wait.
    this.thread = new Worker(new URL('./worker-thread.js', import.meta.url), { workerData: config });
    // A worker thread holds its slices in memory: if it dies, the node must not go on pretending.
    this.thread.on('error', onFailure);
    this.thread.on('exit', (code) => {
      this.exited = true;
      if (!this.destroyed) onFailure(new Error(`worker thread exited (code ${code})`));
    });
    this.thread.on('message', (answer: ThreadAnswer) => {
      const current = this.current;
      assert(current !== null, 'an answer from the worker thread for the task it was given');
      this.current = null;
      if ('failed' in answer) current.reject(answer.failed);
      else current.resolve(answer.result);
    });
    const channel = new MessageChannel();
    this.port = channel.port1;
    this.workerPort = channel.port2;
    this.port.on('message', (m: WorkerPortMessage) => this.fromWorker(m));
    this.port.unref();
  }

  /** The thread's event-loop utilization since it started (its busy and idle time: node-metrics.ts), read from
   * this thread without a message to it, so that a worker too busy to answer still shows how busy it is; null once
   * it is stopped (Node then answers zeros, which would read as a counter reset). */
  eventLoopUtilization(): EventLoopUtilization | null {
    return this.destroyed || this.exited ? null : this.thread.performance.eventLoopUtilization();
  }

  open(): Promise<OpenSummary> {
    return this.runTask({ kind: 'open', port: this.workerPort }, [this.workerPort]) as Promise<OpenSummary>;
  }

  /** Hands the thread one task; the caller gives it the next only once this one settled. */
  private runTask(task: WorkerTask, transfer: (ArrayBuffer | MessagePort)[]): Promise<unknown> {
    assert(this.current === null, 'one task at a time on a worker thread');
    return new Promise((resolve, reject) => {
      this.current = { resolve, reject };
      this.thread.postMessage(task, transfer);
    });
  }

  /** Runs one packed op batch; resolves with its packed results once durable (and, for replicated
   * slices, committed), or with the reason the worker refused it whole (bytes that are not a list
   * of ops). `trusted`: the node's own ops (its assignment), never a Batch frame's. `control`: the
   * replication settings the worker takes just before it runs these ops. */
  run(bytes: Uint8Array, trusted = false, control: ReplicaControl | null = null): Promise<ChunkOutcome> {
    return new Promise((resolve, reject) => {
      if (this.destroyed) return reject(stoppedError());
      if (control !== null) this.controlsPending++;
      // Copy: the bytes may view a larger pooled buffer; the copy is the exact region, and ours.
      this.waiting.push({ bytes: new Uint8Array(bytes), trusted, control, resolve, reject });
      if (!this.busy) this.next();
    });
  }

  /** Replication messages for this worker's replicas. */
  deliver(entries: IncomingReplication[]): void {
    if (this.controlsPending > 0) {
      for (const e of entries) this.deferred.push(e);
      return;
    }
    this.post(entries);
  }

  /** One port message: the messages' bytes copied into one buffer of their own (transferred), and where each is
   * (IN_RANGE numbers a message, in one list). */
  private post(entries: IncomingReplication[]): void {
    let size = 0;
    for (const e of entries) size += e[2].byteLength;
    const bytes = new Uint8Array(size);
    const ranges: number[] = new Array(entries.length * IN_RANGE);
    let at = 0;
    let k = 0;
    for (const [slice, from, message, via] of entries) {
      bytes.set(message, at);
      ranges[k++] = slice;
      ranges[k++] = from;
      ranges[k++] = via;
      ranges[k++] = at;
      ranges[k++] = at += message.byteLength;
    }
    this.port.postMessage([ranges, bytes] satisfies NodePortMessage, [bytes.buffer as ArrayBuffer]);
  }

  private fromWorker([ranges, bytes, answers, refused]: WorkerPortMessage): void {
    for (let i = 0; i < ranges.length; i += OUT_RANGE) this.onReplication(ranges[i], ranges[i + 1], bytes!.subarray(ranges[i + 2], ranges[i + 3]));
    for (const [via, why] of refused) this.onRefused(via, why);
    for (const [ticket, bytes] of answers) {
      const resolve = this.held.get(ticket);
      if (resolve === undefined) this.early.set(ticket, bytes);
      else {
        this.held.delete(ticket);
        resolve(bytes);
      }
    }
  }

  private settle(w: Waiting, answer: ChunkAnswer): void {
    if (typeof answer === 'string' || answer instanceof Uint8Array) return w.resolve(answer);
    const early = this.early.get(answer.held);
    if (early !== undefined) {
      this.early.delete(answer.held);
      return w.resolve(early);
    }
    assert(!this.held.has(answer.held), `ticket ${answer.held} is held once`);
    this.held.set(answer.held, w.resolve);
  }

  private next(): void {
    if (this.waiting.length === 0) {
      this.busy = false;
      return;
    }
    this.busy = true;
    const group = this.waiting;
    this.waiting = [];
    const task: WorkerTask = { kind: 'batch', chunks: group.map((w) => w.bytes), trusted: group.map((w) => w.trusted), controls: group.map((w) => w.control) };
    this.runTask(task, group.map((w) => w.bytes.buffer as ArrayBuffer)).then(
      (answer) => {
        const results = answer as ChunkAnswer[];
        group.forEach((w, i) => this.settle(w, results[i]));
        const controls = group.filter((w) => w.control !== null).length;
        if (controls > 0) {
          this.controlsPending -= controls;
          if (this.controlsPending === 0 && this.deferred.length > 0) {
            const deferred = this.deferred;
            this.deferred = [];
            this.post(deferred);
          }
        }
        this.next();
      },
      (err) => {
        for (const w of group) w.reject(err);
        this.onFailure(err);
      },
    );
  }

  /** Stops the thread (the node is going down). The task it ran and the batches queued fail, as piscina's
   * destroy failed them, so that no caller waits on a thread that is gone; answers held until a commit stay
   * unanswered: their outcome is unknown, which the router learns when the node's connection closes. */
  async destroy(): Promise<void> {
    this.destroyed = true;
    this.port.close();
    await this.thread.terminate();
    const stopped = stoppedError();
    this.current?.reject(stopped);
    this.current = null;
    for (const w of this.waiting) w.reject(stopped);
    this.waiting = [];
  }
}

const stoppedError = () => new Error('the worker thread was stopped');

// The node's side of one worker thread: a single-thread piscina pool and a
// queue. While the worker runs a task, batches that arrive wait; when it is
// done they all go in the next task, so they share one log append and one
// flush (group commit). Order is kept: batches run in the order they came.
//
// Replication: a MessagePort, given to the worker at open, carries replication
// messages both ways and the answers the worker held until their records were
// committed (worker.ts), one message per turn of the worker. A task's chunk
// answered {held: ticket} resolves when [ticket, bytes] comes on the port, so
// the worker runs the next tasks meanwhile. Messages for the worker wait while
// an assignment that changes its replicated slices is queued or running, so
// that they reach it after that assignment, as they came after it.
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { assert } from '../shared/errors.js';
import type { ReplicationMessage } from '../shared/replication-protocol.js';
import type { ChunkAnswer, ChunkOutcome, NodePortMessage, OpenSummary, ReplicaControl, WorkerConfig, WorkerPortMessage, WorkerTask } from './worker.js';

type Waiting = { bytes: Uint8Array; trusted: boolean; control: ReplicaControl | null; resolve: (r: ChunkOutcome) => void; reject: (e: unknown) => void };

export class WorkerChannel {
  private readonly pool: Piscina;
  private waiting: Waiting[] = [];
  private busy = false;
  private readonly port: MessagePort;
  private readonly workerPort: MessagePort;
  /** Held chunks: ticket -> resolve. An answer that comes before its task's result waits in `early`. */
  private readonly held = new Map<number, (r: ChunkOutcome) => void>();
  private readonly early = new Map<number, Uint8Array>();
  /** Assignments with replication settings queued or running; messages for the worker wait meanwhile. */
  private controlsPending = 0;
  private deferred: NodePortMessage = [];

  constructor(
    config: WorkerConfig,
    private readonly onFailure: (err: unknown) => void,
    /** What the worker's replicas send: [slice, to, message] of one of its turns. */
    private readonly onReplication: (out: [slice: number, to: number, message: ReplicationMessage][]) => void = () => {},
  ) {
    this.pool = new Piscina({
      filename: new URL('./worker.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      // Not 'sync' (the default): with it an idle worker thread blocks in Atomics.wait until the next
      // task, so the snapshot it writes between tasks (worker.ts) would stall. 'disabled' keeps the
      // thread's event loop turning; measured as fast here (about 25,000 trivial tasks/s either way).
      atomics: 'disabled',
      workerData: config,
    });
    // A worker thread holds its slices in memory: if it dies, the node must not go on pretending.
    this.pool.on('error', onFailure);
    const channel = new MessageChannel();
    this.port = channel.port1;
    this.workerPort = channel.port2;
    this.port.on('message', (m: WorkerPortMessage) => this.fromWorker(m));
    this.port.unref();
  }

  open(): Promise<OpenSummary> {
    return this.pool.run({ kind: 'open', port: this.workerPort } satisfies WorkerTask, { transferList: [this.workerPort as never] }) as Promise<OpenSummary>;
  }

  /** Runs one packed op batch; resolves with its packed results once durable (and, for replicated
   * slices, committed), or with the reason the worker refused it whole (bytes that are not a list
   * of ops). `trusted`: the node's own ops (its assignment), never a Batch frame's. `control`: the
   * replication settings the worker takes just before it runs these ops. */
  run(bytes: Uint8Array, trusted = false, control: ReplicaControl | null = null): Promise<ChunkOutcome> {
    return new Promise((resolve, reject) => {
      if (control !== null) this.controlsPending++;
      // Copy: the bytes may view a larger pooled buffer; the copy is the exact region, and ours.
      this.waiting.push({ bytes: new Uint8Array(bytes), trusted, control, resolve, reject });
      if (!this.busy) this.next();
    });
  }

  /** Replication messages for this worker's replicas: [slice, from, message]. */
  deliver(entries: NodePortMessage): void {
    if (this.controlsPending > 0) {
      for (const e of entries) this.deferred.push(e);
      return;
    }
    this.port.postMessage(entries);
  }

  private fromWorker([out, answers]: WorkerPortMessage): void {
    if (out.length > 0) this.onReplication(out);
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
    this.pool.run(task, { transferList: group.map((w) => w.bytes.buffer as ArrayBuffer) }).then(
      (results: ChunkAnswer[]) => {
        group.forEach((w, i) => this.settle(w, results[i]));
        const controls = group.filter((w) => w.control !== null).length;
        if (controls > 0) {
          this.controlsPending -= controls;
          if (this.controlsPending === 0 && this.deferred.length > 0) {
            const deferred = this.deferred;
            this.deferred = [];
            this.port.postMessage(deferred);
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

  destroy(): Promise<void> {
    this.port.close();
    return this.pool.destroy();
  }
}

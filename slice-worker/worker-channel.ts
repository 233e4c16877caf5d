// The node's side of one worker thread: a single-thread piscina pool and a
// queue. While the worker runs a task, batches that arrive wait; when it is
// done they all go in the next task, so they share one log append and one
// flush (group commit). Order is kept: batches run in the order they came.
import { Piscina } from 'piscina';
import type { ChunkOutcome, OpenSummary, WorkerConfig, WorkerTask } from './worker.js';

type Waiting = { bytes: Uint8Array; trusted: boolean; resolve: (r: ChunkOutcome) => void; reject: (e: unknown) => void };

export class WorkerChannel {
  private readonly pool: Piscina;
  private waiting: Waiting[] = [];
  private busy = false;

  constructor(
    config: WorkerConfig,
    private readonly onFailure: (err: unknown) => void,
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
  }

  open(): Promise<OpenSummary> {
    return this.pool.run({ kind: 'open' } satisfies WorkerTask) as Promise<OpenSummary>;
  }

  /** Runs one packed op batch; resolves with its packed results once durable, or with
   * the reason the worker refused it whole (bytes that are not a list of ops).
   * `trusted`: the node's own ops (its assignment), never a Batch frame's. */
  run(bytes: Uint8Array, trusted = false): Promise<ChunkOutcome> {
    return new Promise((resolve, reject) => {
      // Copy: the bytes may view a larger pooled buffer; the copy is the exact region, and ours.
      this.waiting.push({ bytes: new Uint8Array(bytes), trusted, resolve, reject });
      if (!this.busy) this.next();
    });
  }

  private next(): void {
    if (this.waiting.length === 0) {
      this.busy = false;
      return;
    }
    this.busy = true;
    const group = this.waiting;
    this.waiting = [];
    const task: WorkerTask = { kind: 'batch', chunks: group.map((w) => w.bytes), trusted: group.map((w) => w.trusted) };
    this.pool.run(task, { transferList: group.map((w) => w.bytes.buffer as ArrayBuffer) }).then(
      (results: ChunkOutcome[]) => {
        group.forEach((w, i) => w.resolve(results[i]));
        this.next();
      },
      (err) => {
        for (const w of group) w.reject(err);
        this.onFailure(err);
      },
    );
  }

  destroy(): Promise<void> {
    return this.pool.destroy();
  }
}

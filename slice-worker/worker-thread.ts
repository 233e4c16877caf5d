// The worker thread's end of worker-channel.ts: one task at a time comes on the
// thread's own port; the answer goes back on it, and an exception goes back as
// {failed} (the channel fails the node). The packed results are copied to buffers
// of their own and transferred: msgpackr packs into a buffer it reuses, and a
// cloned view would copy that whole buffer, not the view's bytes.
import { parentPort } from 'node:worker_threads';
import { assert } from '../shared/errors.js';
import run, { type WorkerTask } from './worker.js';

export type ThreadAnswer = { result: unknown } | { failed: unknown };

assert(parentPort !== null, 'worker-thread.js runs as a worker thread');
const port = parentPort;
port.on('message', (task: WorkerTask) => {
  let answer: ThreadAnswer;
  const transfer: ArrayBuffer[] = [];
  try {
    const result = run(task);
    if (result instanceof Promise) {
      // 'open': the node sends nothing else until it is answered.
      result.then(
        (summary) => port.postMessage({ result: summary }),
        (err) => port.postMessage({ failed: err }),
      );
      return;
    }
    if (Array.isArray(result)) {
      for (let i = 0; i < result.length; i++) {
        const r = result[i];
        if (r instanceof Uint8Array) {
          const own = new Uint8Array(r);
          result[i] = own;
          transfer.push(own.buffer);
        }
      }
    }
    answer = { result };
  } catch (err) {
    answer = { failed: err };
  }
  port.postMessage(answer, transfer);
});

// The worker thread's end of worker-channel.ts: one task at a time comes on the
// thread's own port; the answer goes back on it, and an exception goes back as
// {failed} (the channel fails the node). A chunk's results come packed in a
// buffer of their own (encodeOwnedResults), which is transferred, not cloned:
// msgpackr packs into a buffer it reuses, and a cloned view of it would copy that
// whole buffer, not the view's bytes. The headroom in front of them is where the
// node writes its BatchReply's head, so the node sends them on without a copy.
import { parentPort } from 'node:worker_threads';
import { assert } from '../shared/errors.js';
import { hasReplyHeadroom } from '../shared/protocol.js';
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
          assert(hasReplyHeadroom(r), 'a chunk answers in a buffer of its own (encodeOwnedResults)');
          transfer.push(r.buffer as ArrayBuffer);
        }
      }
    }
    answer = { result };
  } catch (err) {
    answer = { failed: err };
  }
  port.postMessage(answer, transfer);
});

// When a link sends the ops it holds for a slice node (coordinator/metadata/send-queue.ts):
// at the end of the turn that queued them when the worker has room, otherwise together
// after an answer; at once when a worker's queue reaches its bound in ops or bytes; in
// the order they were queued, each op exactly once. No processes: the queue alone, with
// the frames it sends recorded. The same queue under real processes: routers.test.ts,
// concurrency.test.ts and the DynamoDB tests.
import { describe, expect, it } from 'vitest';
import { SendQueue, type FrameParts } from '../coordinator/metadata/send-queue.js';
import { NODE_BATCH_BYTES_MAX, NODE_BATCH_OPS_MAX, NODE_LINK_WORKER_BATCHES_IN_FLIGHT } from '../shared/limits.js';
import { SliceOp, type SliceOpMessage } from '../shared/protocol.js';

const turn = () => new Promise<void>((r) => setImmediate(r));
const get = (n: number): SliceOpMessage => [SliceOp.Get, 1, 0, `key-${n}`, null, false];
const put = (n: number, bytes: number): SliceOpMessage => [SliceOp.Put, 1, 0, `key-${n}`, {}, bytes, null, null];

function recorder(workers: number) {
  const frames: FrameParts<number>[] = [];
  const q = new SendQueue<number>(workers, (parts) => frames.push(parts));
  return { q, frames, sent: (w: number) => frames.flatMap((f) => f.filter((p) => p.worker === w).flatMap((p) => p.settles)) };
}

describe('the send queue of a node link', () => {
  it('sends the ops of one turn in one frame at the end of that turn, one part per worker', async () => {
    const { q, frames } = recorder(2);
    q.push(0, get(1), 1);
    q.push(1, get(2), 2);
    q.push(0, get(3), 3);
    expect(frames).toHaveLength(0);
    await turn();
    expect(frames).toHaveLength(1);
    expect(frames[0].map((p) => [p.worker, p.settles])).toEqual([[0, [1, 3]], [1, [2]]]);
    expect(frames[0][0].ops).toEqual([get(1), get(3)]);
  });

  it('holds a worker\'s ops while it has its batches in flight, and sends them together after an answer', async () => {
    const { q, frames, sent } = recorder(2);
    // One op per turn, as HTTP requests arrive: the first batches go at once, one per turn.
    let n = 0;
    for (let b = 0; b < NODE_LINK_WORKER_BATCHES_IN_FLIGHT; b++) {
      q.push(0, get(n), n++);
      await turn();
    }
    expect(frames).toHaveLength(NODE_LINK_WORKER_BATCHES_IN_FLIGHT);
    // Now worker 0 is full: ten more turns of one op each make no frame...
    for (let t = 0; t < 10; t++) {
      q.push(0, get(n), n++);
      await turn();
    }
    expect(frames).toHaveLength(NODE_LINK_WORKER_BATCHES_IN_FLIGHT);
    // ...but another worker is not held up by it.
    q.push(1, get(1000), 1000);
    await turn();
    expect(frames).toHaveLength(NODE_LINK_WORKER_BATCHES_IN_FLIGHT + 1);
    expect(sent(1)).toEqual([1000]);
    // One answer: the ten waiting ops leave in one frame, in order.
    q.answered(0);
    await turn();
    expect(frames).toHaveLength(NODE_LINK_WORKER_BATCHES_IN_FLIGHT + 2);
    expect(sent(0)).toEqual(Array.from({ length: n }, (_, i) => i));
  });

  it('sends a worker\'s queue at once when it reaches its bound in ops or bytes, even with its batches in flight', async () => {
    const { q, frames, sent } = recorder(1);
    for (let b = 0; b < NODE_LINK_WORKER_BATCHES_IN_FLIGHT; b++) {
      q.push(0, get(-1 - b), -1 - b);
      await turn();
    }
    const before = frames.length;
    for (let i = 0; i < NODE_BATCH_OPS_MAX; i++) q.push(0, get(i), i);
    expect(frames).toHaveLength(before + 1);
    expect(frames.at(-1)![0].ops).toHaveLength(NODE_BATCH_OPS_MAX);
    const big = Math.ceil(NODE_BATCH_BYTES_MAX / 4);
    for (let i = 0; i < 4; i++) q.push(0, put(NODE_BATCH_OPS_MAX + i, big), NODE_BATCH_OPS_MAX + i);
    expect(frames).toHaveLength(before + 2);
    expect(frames.at(-1)![0].ops).toHaveLength(4);
    // Nothing sent twice, nothing left out, in order.
    const all = sent(0);
    expect(all).toEqual([...Array.from({ length: NODE_LINK_WORKER_BATCHES_IN_FLIGHT }, (_, b) => -1 - b), ...Array.from({ length: NODE_BATCH_OPS_MAX + 4 }, (_, i) => i)]);
  });

  it('gives back what it did not send when the connection goes, in order', async () => {
    const { q, frames } = recorder(2);
    for (let b = 0; b < NODE_LINK_WORKER_BATCHES_IN_FLIGHT; b++) {
      q.push(0, get(b), b);
      await turn();
    }
    q.push(0, get(10), 10);
    q.push(1, get(11), 11);
    q.push(0, get(12), 12);
    expect(q.clear()).toEqual([10, 12, 11]);
    await turn();
    expect(frames).toHaveLength(NODE_LINK_WORKER_BATCHES_IN_FLIGHT);
  });
});

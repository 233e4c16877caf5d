// Which worker thread of a node runs a slice (shared/hashing.ts workerOf) and its inverse, slicesOfWorker: the
// coordinator's per-worker rules (membership.ts workerSlices, replica-leaders.ts sliceOfWorker) ask the inverse,
// the nodes and routers the forward way, so the two must agree.
import { describe, expect, it } from 'vitest';
import { slicesOfWorker, workerOf } from '../shared/hashing.js';

describe('the slice-to-worker layout', () => {
  it("gives each of a node's workers the slices workerOf runs on it, every slice once, ascending, none past the slice count", () => {
    for (const [workers, sliceCount] of [[1, 64], [2, 64], [3, 64], [4, 10], [16, 1024], [8, 3], [5, 0]]) {
      const all: number[] = [];
      for (let w = 0; w < workers; w++) {
        const mine = [...slicesOfWorker(w, workers, sliceCount)];
        expect(mine.every((s) => workerOf(s, workers) === w), `worker ${w} of ${workers}: its slices run on it`).toBe(true);
        expect(mine, `worker ${w} of ${workers}: ascending`).toEqual([...mine].sort((a, b) => a - b));
        expect(mine[0], `worker ${w} of ${workers}, ${sliceCount} slices: its first`).toBe(w < sliceCount ? w : undefined);
        all.push(...mine);
      }
      expect(all.sort((a, b) => a - b), `${workers} workers, ${sliceCount} slices: each slice once`).toEqual(Array.from({ length: sliceCount }, (_, s) => s));
    }
  });

  it('refuses a worker the node does not have, and a node of no workers', () => {
    expect(() => slicesOfWorker(2, 2, 64).next()).toThrow(/worker 2 is one of a node's 2 workers/);
    expect(() => slicesOfWorker(0, 0, 64).next()).toThrow(/worker 0 is one of a node's 0 workers/);
  });
});

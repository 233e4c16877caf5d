// Placement: slice = xxHash32(sharding key) % sliceCount, seen through
// DescribeSlices on the real cluster.
import { beforeAll, describe, expect, it } from 'vitest';
import type { ItemFailure } from '../shared/api.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { SLICE_COUNT_DEFAULT } from '../shared/limits.js';
import { rng, useCluster } from './cluster-fixture.js';

const c = useCluster();
beforeAll(() => initHashing());

describe('placement', () => {
  it('keeps every item of one sharding key on one slice, the one its hash names', async () => {
    await c.client.createTable('one_key', { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    for (let i = 0; i < 200; i += 25) {
      await c.client.batchWrite('one_key', { puts: Array.from({ length: 25 }, (_, j) => ({ device: 'sensor-7', seq: i + j })) });
    }
    const { sliceCount, slices } = await c.client.describeSlices('one_key');
    expect(sliceCount).toBe(SLICE_COUNT_DEFAULT);
    expect(slices).toHaveLength(1);
    expect(slices[0]).toMatchObject({ slice: sliceOf('string', 'sensor-7', sliceCount), items: 200 });
    expect(slices[0].bytes).toBeGreaterThan(200 * 10);
  });

  it('spreads 10,000 random sharding keys over the slices within statistical bounds', async () => {
    await c.client.createTable('spread', { name: 'id', type: 'string' });
    const r = rng(7);
    const keys = Array.from({ length: 10_000 }, (_, i) => `${i}-${Math.floor(r() * 1e12).toString(36)}`);
    const batches: Promise<ItemFailure[]>[] = [];
    for (let i = 0; i < keys.length; i += 25) batches.push(c.client.batchWrite('spread', { puts: keys.slice(i, i + 25).map((id) => ({ id })) }));
    expect((await Promise.all(batches)).flat()).toEqual([]);

    const { sliceCount, slices } = await c.client.describeSlices('spread');
    const counts = new Array<number>(sliceCount).fill(0);
    for (const s of slices) counts[s.slice] = s.items;
    expect(counts.reduce((a, b) => a + b, 0)).toBe(keys.length);
    // Each slice holds what the hash says it should.
    const expected = new Array<number>(sliceCount).fill(0);
    for (const k of keys) expected[sliceOf('string', k, sliceCount)]++;
    expect(counts).toEqual(expected);
    // Chi-squared against uniform: 1023 degrees of freedom, mean 1023, sd ~45; allow 6 sd either way.
    const mean = keys.length / sliceCount;
    const chi2 = counts.reduce((acc, n) => acc + (n - mean) ** 2 / mean, 0);
    expect(chi2).toBeGreaterThan(sliceCount - 1 - 6 * Math.sqrt(2 * (sliceCount - 1)));
    expect(chi2).toBeLessThan(sliceCount - 1 + 6 * Math.sqrt(2 * (sliceCount - 1)));
    // Both nodes hold about half.
    const perNode = new Map<string, number>();
    for (const s of slices) perNode.set(s.node, (perNode.get(s.node) ?? 0) + s.items);
    expect(perNode.size).toBe(2);
    for (const n of perNode.values()) expect(n / keys.length).toBeGreaterThan(0.4);
  });
});

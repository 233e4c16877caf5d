// Load made visible, through the real cluster: per-slice rates, hot keys and
// max/mean (DescribeSlices and /metrics), and parallel scans.
import { beforeAll, describe, expect, it } from 'vitest';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { expectError, useCluster } from './cluster-fixture.js';

const c = useCluster();
beforeAll(() => initHashing());

describe('load per slice', () => {
  it('shows a hot sharding key: its slice, its rate, and max/mean far above a spread design', async () => {
    await c.client.createTable('hot_design', { name: 'device', type: 'string' }, { name: 'ts', type: 'number' });
    await c.client.createTable('spread_design', { name: 'device', type: 'string' }, { name: 'ts', type: 'number' });
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 900; i++) writes.push(c.client.putItem('hot_design', { device: i % 10 === 0 ? `cold-${i}` : 'hot-device', ts: i }));
    for (let i = 0; i < 900; i++) writes.push(c.client.putItem('spread_design', { device: `device-${i}`, ts: i }));
    await Promise.all(writes);
    for (let i = 0; i < 50; i++) await c.client.getItem('hot_design', { device: 'hot-device', ts: i });

    const hot = await c.client.describeSlices('hot_design');
    expect(hot.hotKeys[0].key).toBe('hot-device');
    expect(hot.hotKeys[0].slice).toBe(sliceOf('string', 'hot-device', hot.sliceCount));
    const hotSlice = hot.slices.find((s) => s.slice === hot.hotKeys[0].slice)!;
    // 810 writes and 50 reads within the 10-second window.
    expect(hotSlice.writesPerSecond).toBeGreaterThanOrEqual(81 - 1);
    expect(hotSlice.readsPerSecond).toBeGreaterThanOrEqual(5 - 0.5);
    expect(hot.maxOverMean.writes).toBeGreaterThan(500);
    const nodeWrites = hot.nodes.reduce((a, n) => a + n.writesPerSecond, 0);
    expect(nodeWrites).toBeCloseTo(90, 0);

    const spread = await c.client.describeSlices('spread_design');
    expect(spread.maxOverMean.writes).toBeLessThan(12);
    expect(spread.maxOverMean.writes).toBeGreaterThan(1);
    expect(spread.hotKeys.every((k) => k.opsPerSecond < 1)).toBe(true);
  });

  it('serves the same figures as Prometheus text at /metrics', async () => {
    const res = await fetch(`${c.cluster.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    for (const n of c.cluster.nodes) expect(text).toContain(`keyslice_node_up{node="${n.url}"} 1`);
    expect(text).toMatch(/^keyslice_slice_items\{table="hot_design",slice="\d+",node="ws:\/\/127\.0\.0\.1:\d+"\} 810$/m);
    expect(text).toMatch(/^keyslice_table_max_over_mean\{table="hot_design",kind="writes"\} \d+/m);
    expect(text).toMatch(/^# TYPE keyslice_slice_writes_per_second gauge$/m);
  });
});

describe('parallel scan', () => {
  beforeAll(async () => {
    await c.client.createTable('scan_me', { name: 'id', type: 'string' }, { name: 'n', type: 'number' });
    const puts = Array.from({ length: 700 }, (_, i) => ({ id: `k${i % 230}`, n: i }));
    for (let i = 0; i < puts.length; i += 25) await c.client.batchWrite('scan_me', { puts: puts.slice(i, i + 25) });
  });

  it.each([1, 2, 3, 7, 64, 1024])('%i segments scanned together return every item exactly once', async (totalSegments) => {
    const pages = await Promise.all(
      Array.from({ length: totalSegments }, (_, segment) => c.client.getAllItems({ table: 'scan_me', segment, totalSegments, limit: 37 })),
    );
    const names = pages.flat().map((i) => i.__name as string);
    expect(names).toHaveLength(700);
    expect(new Set(names).size).toBe(700);
  });

  it('refuses bad segments', async () => {
    await expectError(c.client.getItems({ table: 'scan_me', segment: 2, totalSegments: 2 }), 'ValidationError');
    await expectError(c.client.getItems({ table: 'scan_me', segment: 0 }), 'ValidationError');
    await expectError(c.client.getItems({ table: 'scan_me', totalSegments: 1025, segment: 0 }), 'ValidationError');
    await expectError(c.client.getItems({ table: 'scan_me', shardingKey: 'k1', segment: 0, totalSegments: 2 }), 'ValidationError');
    const first = await c.client.getItems({ table: 'scan_me', segment: 1, totalSegments: 2, limit: 5 });
    await expectError(c.client.getItems({ table: 'scan_me', segment: 0, totalSegments: 2, marker: first.marker }), 'InvalidMarker');
  });
});

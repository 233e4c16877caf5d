// Slice capacity: a hot partition is throttled with a typed, retryable error,
// the way a hot key design fails in production; a cold one is not.
import { describe, expect, it } from 'vitest';
import { KeysliceError } from '../shared/errors.js';
import { httpPost, useCluster } from './cluster-fixture.js';

const c = useCluster({ capacity: { readsPerSecond: 100, writesPerSecond: 50 } });

async function outcomes(ps: Promise<unknown>[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const r of await Promise.allSettled(ps)) {
    const k = r.status === 'fulfilled' ? 'ok' : r.reason instanceof KeysliceError ? r.reason.code : String(r.reason);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return counts;
}

describe('slice capacity', () => {
  it('throttles writes to a hot sharding key and not to spread ones', async () => {
    await c.client.createTable('cap', { name: 'device', type: 'string' }, { name: 'ts', type: 'number' });
    const hot = await outcomes(Array.from({ length: 200 }, (_, i) => c.client.putItem('cap', { device: 'hot', ts: i })));
    expect(hot.get('ThroughputExceeded') ?? 0).toBeGreaterThan(0);
    expect(hot.get('ok') ?? 0).toBeGreaterThan(0);
    expect(hot.get('ok')! + hot.get('ThroughputExceeded')!).toBe(200);

    const cold = await outcomes(Array.from({ length: 200 }, (_, i) => c.client.putItem('cap', { device: `cold-${i}`, ts: i })));
    expect(cold.get('ok')).toBe(200);
  });

  it('the error is typed and retryable, over both transports', async () => {
    const errors: KeysliceError[] = [];
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        c.client.getItem('cap', { device: 'hot', ts: i }).catch((e: KeysliceError) => {
          errors.push(e);
        }),
      ),
    );
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0].code).toBe('ThroughputExceeded');
    expect(errors[0].retryable).toBe(true);
    expect(errors[0].message).toMatch(/capacity of 100 reads per second/);

    let status = 0;
    const posts = Array.from({ length: 120 }, (_, i) =>
      httpPost(c.cluster.url, 'PutItem', JSON.stringify({ table: 'cap', item: { device: 'hot2', ts: i } })).catch((e) => {
        status = (e as { httpStatus: number }).httpStatus;
      }),
    );
    await Promise.all(posts);
    expect(status).toBe(429);
  });
});

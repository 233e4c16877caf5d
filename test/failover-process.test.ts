// bench:failover's run, short, through the same code (bench/failover-run.ts):
// 3 slice nodes with fsync durability, 6 writers, 3 SIGKILLs of a node in turn,
// each restarted. No acknowledged write may be lost, no item may appear that no
// writer attempted, every value is the one written, and the counts add up. At
// R=1 a killed node's slices answer Unavailable while it restarts, so success is
// not asserted (bench/FAILOVER.md has the figures); at R=1 durability alone keeps
// what was acknowledged.
import { describe, expect, it } from 'vitest';
import { FAILOVER_DEFAULTS, startFailover } from '../bench/failover-run.js';

describe('slice nodes SIGKILLed under load (real processes)', () => {
  it('loses no acknowledged write and makes none up', async () => {
    const r = await startFailover({ ...FAILOVER_DEFAULTS, mode: 'kill', replicationFactor: 1, writers: 6, cycles: 3, periodMs: 2000, workers: 1, settleMs: 20_000 }).result;
    expect(r.events).toHaveLength(3);
    expect(r.lost).toEqual([]);
    expect(r.phantoms).toEqual([]);
    expect(r.wrongValues).toEqual([]);
    expect(r.duplicates).toBe(0);
    // Every attempt is counted once: acknowledged, refused by code, timed out or its connection lost.
    const refused = Object.values(r.refused).reduce((a, n) => a + n, 0);
    expect(r.acknowledged + refused + r.timedOut + r.connectionLost).toBe(r.attempts);
    // What is stored is the acknowledged writes and some of those whose outcome was not known.
    expect(r.stored).toBe(r.acknowledged + r.unacknowledgedStored);
    expect(r.acknowledged).toBeGreaterThan(0);
    // Each killed node led slices that were written to, and they served again.
    for (const e of r.events) expect(e.slices).toBeGreaterThan(0);
    expect(r.failoverMs.unobserved).toBe(0);
  }, 90_000);
});

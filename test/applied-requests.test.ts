// The ids of applied writes a slice's replica remembers (slice-worker/replication/applied-requests.ts):
// bounded by time, count and bytes, oldest forgotten first, the newest always kept; a snapshot's list
// restores exactly the table it came from.
import { describe, expect, it } from 'vitest';
import { AppliedRequests } from '../slice-worker/replication/applied-requests.js';
import { APPLIED_REQUEST_BYTES_PER_SLICE_MAX, APPLIED_REQUESTS_KEPT_MS, APPLIED_REQUESTS_PER_SLICE_MAX } from '../shared/limits.js';

describe('the writes a slice remembers', () => {
  it('keeps at most APPLIED_REQUESTS_PER_SLICE_MAX, forgetting the oldest', () => {
    const a = new AppliedRequests();
    const extra = 5000;
    for (let n = 0; n < APPLIED_REQUESTS_PER_SLICE_MAX + extra; n++) a.add(`r.${n}`, 1_000, n % 3 === 0 ? true : null);
    expect(a.size).toBe(APPLIED_REQUESTS_PER_SLICE_MAX);
    expect(a.find(`r.${extra - 1}`)).toBeUndefined();
    expect(a.find(`r.${extra}`)).toBe(extra % 3 === 0 ? true : null);
    expect(a.list().ids[0]).toBe(`r.${extra}`);
  });

  it('forgets a write once one applied more than APPLIED_REQUESTS_KEPT_MS after it comes', () => {
    const a = new AppliedRequests();
    a.add('old', 0, true);
    a.add('mid', APPLIED_REQUESTS_KEPT_MS, false);
    expect(a.find('old')).toBe(true); // exactly the bound: kept
    a.add('new', APPLIED_REQUESTS_KEPT_MS + 1, null);
    expect(a.list()).toEqual({ ids: ['mid', 'new'], ats: [APPLIED_REQUESTS_KEPT_MS, APPLIED_REQUESTS_KEPT_MS + 1], answers: [false, null] });
  });

  it('keeps at most APPLIED_REQUEST_BYTES_PER_SLICE_MAX of answers, but always the newest', () => {
    const a = new AppliedRequests();
    const big = { v: 'x'.repeat(100 * 1024) };
    for (let n = 0; n < 10; n++) a.add(`b.${n}`, 0, big);
    expect(a.size).toBe(Math.floor(APPLIED_REQUEST_BYTES_PER_SLICE_MAX / (100 * 1024))); // each counts 100 KiB and a few bytes
    a.add('huge', 0, { v: 'x'.repeat(APPLIED_REQUEST_BYTES_PER_SLICE_MAX) });
    expect(a.list().ids).toEqual(['huge']);
  });

  it('restores from its list exactly, and refuses an id applied twice', () => {
    const a = new AppliedRequests();
    for (let n = 0; n < 6000; n++) a.add(`r.${n}`, n * 30, n % 2 === 0 ? null : { n });
    const b = new AppliedRequests(a.list());
    expect(b.list()).toEqual(a.list());
    a.add('next', 6000 * 30, null);
    b.add('next', 6000 * 30, null);
    expect(b.list()).toEqual(a.list());
    expect(() => a.add('next', 6000 * 30, null)).toThrow(/applied once/);
  });
});

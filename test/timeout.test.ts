// The waits between tries (shared/timeout.ts), as pure functions: the numbers each caller waited before they shared
// one helper, so that sharing it changed no wait.
import { describe, expect, it } from 'vitest';
import { backoffMs, failoverDelayMs } from '../shared/timeout.js';
import { IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN, WRONG_OWNER_RETRY_DELAY_MS_MAX, WRONG_OWNER_RETRY_DELAY_MS_MIN } from '../shared/limits.js';
import { wrongOwnerDelayMs } from '../shared/wrong-owner.js';

describe('waits between tries', () => {
  it('backoffMs doubles from the least wait and stops at the most', () => {
    expect(Array.from({ length: 8 }, (_, i) => backoffMs(i, 50, 1_000))).toEqual([50, 100, 200, 400, 800, 1_000, 1_000, 1_000]);
    expect(Array.from({ length: 6 }, (_, i) => backoffMs(i, 100, 2_000))).toEqual([100, 200, 400, 800, 1_600, 2_000]);
    expect(backoffMs(0, 7, 7)).toBe(7);
    // A large attempt reaches the most, not Infinity or NaN.
    expect(backoffMs(1_000, 1, 250)).toBe(250);
    expect(backoffMs(Number.MAX_SAFE_INTEGER, 20, 2_000)).toBe(2_000);
  });

  it('backoffMs refuses an attempt or bounds that make no sense', () => {
    expect(() => backoffMs(-1, 5, 250)).toThrow();
    expect(() => backoffMs(1.5, 5, 250)).toThrow();
    expect(() => backoffMs(0, 0, 250)).toThrow();
    expect(() => backoffMs(0, 300, 250)).toThrow();
  });

  it('the callers wait what they waited before: the hand-written doubling, for every attempt', () => {
    for (let n = 0; n < 64; n++) {
      expect(wrongOwnerDelayMs(n)).toBe(Math.min(WRONG_OWNER_RETRY_DELAY_MS_MIN * 2 ** Math.min(n, 30), WRONG_OWNER_RETRY_DELAY_MS_MAX));
      expect(backoffMs(n, IMPORT_RETRY_DELAY_MS_MIN, IMPORT_RETRY_DELAY_MS_MAX)).toBe(Math.min(IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN * 2 ** n));
      expect(backoffMs(n, 50, 1_000)).toBe(Math.min(50 * 2 ** n, 1_000));
    }
  });

  it('failoverDelayMs grows by 10 ms a try up to 100 ms', () => {
    expect(Array.from({ length: 12 }, (_, i) => failoverDelayMs(i))).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 100, 100]);
    for (let n = 0; n < 200; n++) expect(failoverDelayMs(n)).toBe(Math.min(10 + n * 10, 100));
  });
});

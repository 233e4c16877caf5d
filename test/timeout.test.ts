// The waits between tries (shared/timeout.ts), as pure functions: the numbers each caller waited before they shared
// one helper, so that sharing it changed no wait.
import { describe, expect, it } from 'vitest';
import { backoffMs, failoverDelayMs } from '../shared/timeout.js';
import { IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN } from '../shared/limits.js';
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

  it('the callers wait what they waited before: their constants, as they use them, against the old formulas on the old numbers', () => {
    for (let n = 0; n < 64; n++) {
      // The Router's wait after a WrongOwner (shared/wrong-owner.ts), before: 5 ms, doubled, at most 250 ms.
      expect(wrongOwnerDelayMs(n), `WrongOwner wait ${n}`).toBe(Math.min(5 * 2 ** Math.min(n, 30), 250));
      // keyslice import/export's wait before a retry (coordinator/cli/cli-retry.ts, before its jitter), before:
      // 20 ms, doubled, at most 2 s.
      expect(backoffMs(n, IMPORT_RETRY_DELAY_MS_MIN, IMPORT_RETRY_DELAY_MS_MAX), `import retry wait ${n}`).toBe(Math.min(2_000, 20 * 2 ** n));
    }
    // (The client's write resend and reconnect waits, 50 ms to 1 s and 100 ms to 2 s, use constants private to
    // coordinator/client/client.ts: not checked here.)
  });

  it('failoverDelayMs grows by 10 ms a try up to 100 ms', () => {
    expect(Array.from({ length: 12 }, (_, i) => failoverDelayMs(i))).toEqual([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 100, 100]);
    for (let n = 12; n < 200; n++) expect(failoverDelayMs(n)).toBe(100);
  });
});

// Test fixture: the machine's wall clock stepped (an NTP step, a VM resumed), for code that must time its durations on
// the monotonic clock (performance.now()), which a step does not move.
import { vi } from 'vitest';

/** Steps Date.now() by `ms` from now on; it runs on from there as before (the monotonic clock does not move). Undone
 * by vi.restoreAllMocks(). */
export function stepWallClock(ms: number): void {
  const now = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => now() + ms);
}

// Waits on other processes: a promise with a deadline (what every wait that must not wait forever uses), and how
// long to wait between tries.
import { assert } from './errors.js';
import { FAILOVER_RETRY_DELAY_MS_MAX, FAILOVER_RETRY_DELAY_MS_STEP } from './limits.js';

/** `p`, or a rejection with `late()` after `ms` (Infinity: `p` itself). The timer is cleared either way. */
export function withTimeout<T>(p: Promise<T>, ms: number, late: () => Error): Promise<T> {
  if (ms === Infinity) return p;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(late()), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

/** How long a router waits after the `attempt`-th try (from 0) that found no serving leader before the next (the
 * Routing's afterNoLeader): FAILOVER_RETRY_DELAY_MS_STEP longer each time, at most FAILOVER_RETRY_DELAY_MS_MAX. A
 * failover ends when an election does, so the wait grows slowly and stays short. */
export function failoverDelayMs(attempt: number): number {
  return Math.min(FAILOVER_RETRY_DELAY_MS_STEP * (attempt + 1), FAILOVER_RETRY_DELAY_MS_MAX);
}

/** A doubling backoff: the wait after the `attempt`-th failed try (from 0) is `minMs`, then twice as long after each
 * next one, at most `maxMs`. (The exponent stops at 30, where any `minMs` of 1 ms or more has passed any `maxMs` we
 * use, so that a large `attempt` cannot make Infinity.) */
export function backoffMs(attempt: number, minMs: number, maxMs: number): number {
  assert(Number.isInteger(attempt) && attempt >= 0 && 0 < minMs && minMs <= maxMs, `backoffMs(${attempt}, ${minMs}, ${maxMs})`);
  return Math.min(minMs * 2 ** Math.min(attempt, 30), maxMs);
}

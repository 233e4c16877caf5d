// How `keyslice import` and `keyslice export` send a request again that failed with an error a later try may mend and
// that the router did not already retry (callerMayRetry): at most IMPORT_RETRIES_MAX more times and within
// IMPORT_RETRY_MS_MAX of the first try, waiting twice as long each time from IMPORT_RETRY_DELAY_MS_MIN to
// IMPORT_RETRY_DELAY_MS_MAX, with jitter. That is ThroughputExceeded (a slice at its capacity: the backoff is what
// spreads the load), and Unavailable where the router waits for nothing: a slice of one replica whose node is down
// or restarting, or the connection to the router lost. Both commands may repeat what they send: export reads, and
// import puts whole items (a put sent twice leaves the item as one put does, and a later line of the same key waits
// for it). Not WrongOwner, nor an Unavailable of a replicated slice whose failover outlasted the router's wait
// (routerRetried): the router already sent the op again for as long as its bounds allow (shared/wrong-owner.ts,
// FAILOVER_RETRY_MS_MAX), and asking again here would multiply its tries and its wait.
import { performance } from 'node:perf_hooks';
import { callerMayRetry, toKeysliceError, type KeysliceError } from '../../shared/errors.js';
import { IMPORT_RETRIES_MAX, IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN, IMPORT_RETRY_MS_MAX } from '../../shared/limits.js';
import { backoffMs } from '../../shared/timeout.js';

/** The wait before try `attempt + 1` (attempt from 0). */
export function backoff(attempt: number): Promise<void> {
  const base = backoffMs(attempt, IMPORT_RETRY_DELAY_MS_MIN, IMPORT_RETRY_DELAY_MS_MAX);
  return new Promise((r) => setTimeout(r, base * (0.5 + Math.random() / 2)));
}

/** Whether a request first sent at `started` (performance.now(): IMPORT_RETRY_MS_MAX is a duration, and on
 * Date.now()'s clock a wall clock stepped forward spent it at once, stepped back stretched it by the step) whose try `attempt` (from 0) failed with `err` (a
 * KeysliceError, or an ItemFailure of a batch) is sent again. */
export function mayRetry(err: Pick<KeysliceError, 'code' | 'retryable'> & { routerRetried?: boolean }, attempt: number, started: number): boolean {
  return callerMayRetry(err) && attempt < IMPORT_RETRIES_MAX && performance.now() - started < IMPORT_RETRY_MS_MAX;
}

/** `f` until it answers, or fails with an error that mayRetry does not send again. */
export async function withRetries<T>(f: () => Promise<T>): Promise<T> {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      const e = toKeysliceError(err);
      if (!mayRetry(e, attempt, started)) throw e;
      await backoff(attempt);
    }
  }
}

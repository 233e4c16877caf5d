// How `keyslice import` and `keyslice export` send a request again that failed with an error a later try may mend
// (callerMayRetry: ThroughputExceeded, Unavailable): at most IMPORT_RETRIES_MAX more times, waiting twice as long
// each time from IMPORT_RETRY_DELAY_MS_MIN to IMPORT_RETRY_DELAY_MS_MAX, with jitter. Not WrongOwner: the router
// already sent the op again for as long as its bounds allow (shared/wrong-owner.ts), and asking again here would
// multiply its tries.
import { callerMayRetry, toKeysliceError } from '../../shared/errors.js';
import { IMPORT_RETRIES_MAX, IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN } from '../../shared/limits.js';

/** The wait before try `attempt + 1` (attempt from 0). */
export function backoff(attempt: number): Promise<void> {
  const base = Math.min(IMPORT_RETRY_DELAY_MS_MAX, IMPORT_RETRY_DELAY_MS_MIN * 2 ** attempt);
  return new Promise((r) => setTimeout(r, base * (0.5 + Math.random() / 2)));
}

/** `f` until it answers, fails with an error no retry mends, or has been tried IMPORT_RETRIES_MAX + 1 times. */
export async function withRetries<T>(f: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      const e = toKeysliceError(err);
      if (!callerMayRetry(e) || attempt >= IMPORT_RETRIES_MAX) throw e;
      await backoff(attempt);
    }
  }
}

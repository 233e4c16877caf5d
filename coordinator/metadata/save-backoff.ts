import { assert } from '../../shared/errors.js';
import { MAP_SAVE_RETRY_MS_MAX } from '../../shared/limits.js';
import { backoffMs } from '../../shared/timeout.js';

/** When the coordinator may try its cluster map's save again after saves failed in a row. One for the whole map
 * (replica-leaders.ts holds it; the map tells it of every write, ClusterMap.onSave), not one a slice or a kind of save:
 * every save goes to the same file on the same disk, so each failure counts and each success ends it, whichever saver
 * made it (an operator's change included). The savers that retry on their own clock wait for it: the redo of failovers
 * whose turns were not recorded, the settled changes' record, leadership rebalancing's and a drain's handovers, and
 * membership.ts's turn (placement, drain steps, replica moves and their undo, replacements, an automatic remove). The
 * first retry is at the next tick; each failure in a row doubles the wait, up to MAP_SAVE_RETRY_MS_MAX. Nothing else
 * tells that the disk is back, so a retry is the probe: it is never put off for longer than the cap (and a 500 ms
 * membership turn). A save asked once, refused to its asker on failure (an operator's add, drain, remove), does not
 * wait: it retries nothing. */
export class SaveBackoff {
  private failures = 0;
  private notBefore = -Infinity;

  constructor(
    /** The runner's tick: the first wait, and the slack a due time is read with (a tick that comes a little before
     * it counts, else each wait would stretch to the tick after). */
    private readonly tickMs: number,
    private readonly maxMs: number = MAP_SAVE_RETRY_MS_MAX,
  ) {
    assert(tickMs > 0 && maxMs >= tickMs, 'a save backoff waits at least a tick, and its cap is no shorter');
  }

  /** Whether a save may be tried at `now` (a monotonic clock). */
  due(now: number): boolean {
    return now + this.tickMs / 2 >= this.notBefore;
  }

  /** Saves failed in a row (the failed save's log line: replica-leaders.ts). */
  get failing(): number {
    return this.failures;
  }

  failed(now: number): void {
    // The shared doubling every other retry of ours uses (shared/timeout.ts): a tick, twice that, ... up to the cap.
    this.notBefore = now + backoffMs(this.failures++, this.tickMs, this.maxMs);
  }

  saved(): void {
    this.failures = 0;
    this.notBefore = -Infinity;
  }
}

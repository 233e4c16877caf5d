// The one retry policy for WrongOwner. A node refuses an op, a scan page or a load report's Stats with WrongOwner
// when it was not the owner at the asker's map (a slice move switched the slice, or a router's copy of the map
// lags the nodes'). Nothing was applied, so the asker reads the map again and asks again: the Router for every op
// and scan page (coordinator/router/router.ts), and a load report for its Stats (coordinator/metadata/load-report.ts,
// which asks the nodes itself), each with a WrongOwnerTries and the Routing's afterWrongOwner between tries.
// Nothing above them asks the same router again (callerMayRetry in errors.ts): a WrongOwner that reaches a client is
// the typed error made here, which says that the bounds were spent and that nothing was applied (a write with a copy
// of unknown outcome ends Unavailable instead: router.ts). The TypeScript client alone sends it on, once to each other
// router address it has (client.ts requestOnce): a router whose map lags for good (cut off from its coordinator) would
// otherwise fail every request of a moved slice while another router could answer it. Once per address, not once per
// try, nor once per copy that the client sends again (writeRetries): the tries stay the routers' own times the addresses.
import { performance } from 'node:perf_hooks';
import { assert, KeysliceError } from './errors.js';
import { WRONG_OWNER_RETRIES_MAX, WRONG_OWNER_RETRY_DELAY_MS_MAX, WRONG_OWNER_RETRY_DELAY_MS_MIN, WRONG_OWNER_RETRY_MS_MAX } from './limits.js';
import { backoffMs } from './timeout.js';

/** How long to wait after the `refusal`-th refusal (from 0) before the next try: doubling from
 * WRONG_OWNER_RETRY_DELAY_MS_MIN up to WRONG_OWNER_RETRY_DELAY_MS_MAX (a router stops waiting at a newer map). */
export function wrongOwnerDelayMs(refusal: number): number {
  return backoffMs(refusal, WRONG_OWNER_RETRY_DELAY_MS_MIN, WRONG_OWNER_RETRY_DELAY_MS_MAX);
}

/** What a try refused WrongOwner waits for before the next (Routing.afterWrongOwner) besides its delay
 * (wrongOwnerDelayMs): null, nothing (the next try goes at once); else `reach`, the map's epoch at which the wait ends
 * early, and `ask`, whether to ask the coordinator for a newer map now. From the epoch of the asker's map now
 * (`mapEpoch`), the one the refused try was sent at (`sentAt`), and the epoch the node named in refusing the try's
 * batch for its epoch (`nodeEpoch`, BatchError's own field: KeysliceError details.nodeEpoch; undefined where a worker
 * refused an op on a slice it did not own at the batch's epoch):
 * - none named: a map newer than the try's (the owner changed: a move's freeze or switch), asked for; at once if one
 *   came while the try was in flight;
 * - a node ahead of the map: a map that new, asked for (one between the two would be refused again);
 * - a node at the map's epoch now (a newer map came while the try was in flight): at once;
 * - a node behind the map, which moved since the try was sent: at once (the map now may route the op elsewhere, as
 *   to a slice's new leader after a handover; the try was refused for the old map's node, not the new one's);
 * - a node behind the map the try was sent at (its Epoch frame, or its worker's, is on the way): the delay, or a newer
 *   map (which may route the op elsewhere), asked for only from the op's second refusal on (`attempt` >= 1: attempt
 *   counts every WrongOwner refusal of the op from 0, wrongOwnerDelayMs's count). Not at the first: the coordinator
 *   usually has nothing newer to give, and a router asked it so after every such refusal, at most every
 *   ROUTER_REFRESH_INTERVAL_MS_MIN, when a router's batch reached a worker before its node's new epoch did. But from
 *   the second: a router whose feed stalled while the coordinator moved on would otherwise spend the op's whole bound
 *   (5-10 s) on refusals and end it WrongOwner. */
export function wrongOwnerWait(mapEpoch: number, sentAt: number, nodeEpoch: number | undefined, attempt: number): { reach: number; ask: boolean } | null {
  if (nodeEpoch === undefined) return mapEpoch === sentAt ? { reach: mapEpoch + 1, ask: true } : null;
  if (nodeEpoch > mapEpoch) return { reach: nodeEpoch, ask: true };
  if (nodeEpoch === mapEpoch || mapEpoch !== sentAt) return null;
  return { reach: mapEpoch + 1, ask: attempt >= 1 };
}

// The time bound, not the count, ends a Router's tries (limits.ts): the waits between WRONG_OWNER_RETRIES_MAX tries
// add up to more than WRONG_OWNER_RETRY_MS_MAX.
assert(
  Array.from({ length: WRONG_OWNER_RETRIES_MAX - 1 }, (_, i) => wrongOwnerDelayMs(i)).reduce((a, b) => a + b, 0) > WRONG_OWNER_RETRY_MS_MAX,
  'the waits between WRONG_OWNER_RETRIES_MAX tries outlast WRONG_OWNER_RETRY_MS_MAX',
);

/** The refusals of one op (or page, or report) and whether it may be tried again. */
export class WrongOwnerTries {
  /** Refusals so far; the next wait is afterWrongOwner(refusals - 1). */
  refusals = 0;

  constructor(
    /** What is asked, for the error: "slice 17", "a scan page of slices 0-1023". */
    private readonly what: string,
    private readonly triesMax = WRONG_OWNER_RETRIES_MAX,
    private readonly msMax = WRONG_OWNER_RETRY_MS_MAX,
    /** When the op was first sent, on performance.now()'s clock: msMax is a duration, and on Date.now()'s a wall
     * clock stepped forward (an NTP step, a VM resumed) spent it at once, stepped back stretched it by the step. */
    private readonly started = performance.now(),
  ) {}

  /** Counts a refusal; whether another try is allowed (fewer than triesMax tries so far, within msMax). */
  again(): boolean {
    this.refusals++;
    return this.refusals < this.triesMax && performance.now() - this.started < this.msMax;
  }

  /** The error once again() said no: WrongOwner (the code a client switches on), saying that the owner kept
   * changing for as long as the bounds allow, with the last refusal's reason. */
  exhausted(last: KeysliceError): KeysliceError {
    const ms = Math.round(performance.now() - this.started);
    return new KeysliceError(
      'WrongOwner',
      `${this.what}: refused WrongOwner ${this.refusals} times in ${ms} ms (a slice's owner kept changing, or the router could not get a newer cluster map; at most ${this.triesMax} tries within ${this.msMax} ms); last: ${last.message}; retry later`,
    );
  }
}

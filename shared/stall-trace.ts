// KEYSLICE_TRACE_STALLS=1 (issue 14: a node silent to the coordinator for over 750 ms under write load): each thread
// that calls startStallTrace (the coordinator's, a slice node's main thread and its workers) prints, every second, its
// event loop's longest delay in that second (perf_hooks.monitorEventLoopDelay: how long a timer due then waited; 0
// with utilization 100 means one turn held the thread the whole second) and its utilization; gapTracker prints the
// gaps over a bound between events of one kind (frames a node's main thread sent the coordinator or took from it).
// The coordinator prints, for each node's frame, how long since its last frame and since the first question it left
// unanswered (coordinator/metadata/replica-leaders.ts traceHeard). For bench measurements and diagnosis only.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

export const TRACE_STALLS = process.env.KEYSLICE_TRACE_STALLS === '1';
const STALL_TRACE_PERIOD_MS = 1_000;
/** Prints this thread's longest event-loop delay and its utilization (%) every STALL_TRACE_PERIOD_MS, as one line. */
export function startStallTrace(thread: string): void {
  if (!TRACE_STALLS) return;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let elu = performance.eventLoopUtilization();
  setInterval(() => {
    const next = performance.eventLoopUtilization();
    const used = performance.eventLoopUtilization(next, elu).utilization;
    elu = next;
    console.log(`keyslice stall ${thread} at ${Date.now()} maxDelayMs=${Math.round(delay.max / 1e6)} elu=${Math.round(used * 100)}`);
    delay.reset();
  }, STALL_TRACE_PERIOD_MS).unref();
}
/** A tracker of the gaps between events of one kind (frames sent or taken): prints each gap over `overMs`. */
export function gapTracker(what: string, overMs: number): () => void {
  if (!TRACE_STALLS) return () => {};
  let last = -1;
  return () => {
    const now = performance.now();
    if (last >= 0 && now - last > overMs) console.log(`keyslice gap ${what} at ${Date.now()} ms=${Math.round(now - last)}`);
    last = now;
  };
}

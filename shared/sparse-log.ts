// A log line written at most once a second, with a count of the ones left out since: what a peer or a client can
// cause (refused frames, malformed records) must not let it flood the log.
import { performance } from 'node:perf_hooks';

/** Writes `line` (by `write`) now if the last was a second ago or more, else counts it; `kind` names the left-out ones. */
export function sparseLog(kind: string, write: (line: string) => void = console.error): (line: string) => void {
  let unlogged = 0;
  // The monotonic clock: on Date.now()'s a wall clock stepped back held every line back for the step.
  let lastAt = -Infinity;
  return (line) => {
    const now = performance.now();
    if (now - lastAt < 1000) {
      unlogged++;
      return;
    }
    write(`${line}${unlogged > 0 ? ` (and ${unlogged} more ${kind} since the last such line)` : ''}`);
    lastAt = now;
    unlogged = 0;
  };
}

// KEYSLICE_TRACE_TURNS=1: a worker counts the shape of its turns (tasks, puts, frames, socket writes) and prints the
// running totals once a second as one line, with the time, for bench measurements of the replicated write path.
export const TRACE_TURNS = process.env.KEYSLICE_TRACE_TURNS === '1';
export const turns = {
  tasks: 0,
  chunks: 0,
  replPuts: 0,
  flushes: 0,
  peerFramesOut: 0,
  answersOut: 0,
  peerFramesIn: 0,
  appendsIn: 0,
  appendOkSlicesIn: 0,
  appendOksOut: 0,
  appendsOut: 0,
  portMessages: 0,
};
/** Each line carries when it was printed (Date.now(), ms), so that a reader can wait for the counts as of a given time
 * rather than for a guess at the period (bench/put-shape.ts). */
export function startTurnTrace(worker: number): void {
  if (!TRACE_TURNS) return;
  setInterval(() => console.log(`keyslice turns w${worker} at ${Date.now()} ${JSON.stringify(turns)}`), 1000).unref();
}

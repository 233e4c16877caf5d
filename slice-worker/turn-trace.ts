// KEYSLICE_TRACE_TURNS=1: a worker counts the shape of its turns (tasks, puts, frames, socket writes, held reads) and prints the
// running totals every TURN_TRACE_PERIOD_MS (a second) as one line, with the time, for bench measurements of the replicated write path. With it, each
// thread that calls startGcTrace (a slice node's main thread and workers, a router) also prints its garbage collections' running totals (count and ms by kind, from
// PerformanceObserver 'gc'; durations are wall time, long on a loaded machine) and its heap (MiB: used, external, and
// the old, new and large-object spaces' use, and the new space's size) and the bytes its V8 heap allocated so far (allocKB: not the contents of ArrayBuffers, which are outside the heap) as a line of its own, with the
// time, for bench/put-shape (allocation per put by thread) and its SHAPE_LOG.
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { GCProfiler, getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
export const TRACE_TURNS = process.env.KEYSLICE_TRACE_TURNS === '1';
/** How often a worker prints its turns line (and a thread its gc line): a reader that waits for a line as of a given
 * time bounds its wait in these periods (bench/put-shape.ts traceAfter). */
export const TURN_TRACE_PERIOD_MS = 1_000;
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
  /** Chunks with a read that the leader held (what it saw uncommitted, or no lease): at one request in flight on an
   * idle cluster none is (bench/PROFILE.md, "one request in flight at R=3"). */
  heldReads: 0,
  /** Records in the Appends sent (over appendsOut: records per Append), and the KeepAlives and KeepAliveOks sent (one
   * slice's each, before the link folds KeepAlives). */
  recordsOut: 0,
  keepAlivesOut: 0,
  keepAliveOksOut: 0,
  /** The replica log's flushes that wrote a record (each one `write`: group commit), the ops they held, of which
   * commit points and appends, and the syncs asked of it (each answered by a flush): bench/PROFILE.md, "how far an
   * R=3 put's messages are amortized". */
  logFlushes: 0,
  logOps: 0,
  commitOps: 0,
  appendOps: 0,
  logSyncs: 0,
};
/** Each line carries when it was printed (Date.now(), ms), so that a reader can wait for the counts as of a given time
 * rather than for a guess at the period (bench/put-shape.ts). */
export function startTurnTrace(worker: number): void {
  if (!TRACE_TURNS) return;
  setInterval(() => console.log(`keyslice turns w${worker} at ${Date.now()} ${JSON.stringify(turns)}`), TURN_TRACE_PERIOD_MS).unref();
  startGcTrace(`w${worker}`);
}

const GC_KINDS: [number, string][] = [
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
];
/** Prints, every TURN_TRACE_PERIOD_MS, this thread's GC counts and ms by kind so far and its heap now (MiB). Minor: scavenges of the
 * young generation; major: mark-compacts. */
export function startGcTrace(thread: string): void {
  if (!TRACE_TURNS) return;
  const gc: Record<string, number> = {};
  for (const [, name] of GC_KINDS) gc[name] = gc[`${name}Ms`] = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const name = GC_KINDS.find(([k]) => k === (e as unknown as { detail: { kind: number } }).detail.kind)?.[1] ?? 'other';
      gc[name] = (gc[name] ?? 0) + 1;
      gc[`${name}Ms`] = (gc[`${name}Ms`] ?? 0) + e.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  const mib = (n: number) => Math.round(n / 104_857.6) / 10;
  const allocated = allocationCounter();
  setInterval(() => {
    const spaces = getHeapSpaceStatistics();
    const sp = Object.fromEntries(spaces.map((x) => [x.space_name, mib(x.space_used_size)]));
    // The new space's size (its two semi-spaces, as V8 has grown them so far): a scavenge comes when half of it is full.
    const newSize = mib(spaces.find((x) => x.space_name === 'new_space')?.space_size ?? 0);
    const h = getHeapStatistics();
    const ms: Record<string, number> = {};
    for (const [k, v] of Object.entries(gc)) ms[k] = Math.round(v * 10) / 10;
    const allocKB = Math.round(allocated.read(h.used_heap_size) / 1024);
    console.log(`keyslice gc ${thread} ${JSON.stringify({ at: Date.now(), ...ms, allocKB, usedMiB: mib(h.used_heap_size), totalMiB: mib(h.total_heap_size), externalMiB: mib(h.external_memory), old: sp.old_space, newS: sp.new_space, newSizeMiB: newSize, lo: sp.large_object_space })}`);
  }, TURN_TRACE_PERIOD_MS).unref();
}

/** The bytes this thread's heap has allocated since the counter started, as of each read (given the heap's use then):
 * its growth since the last read plus what the collections in between freed (v8.GCProfiler: the heap before and after
 * each). V8 keeps no such total; what a put allocates sets how often the young generation is collected
 * (bench/README.md, "Allocation per replicated put"). Heap objects only: an ArrayBuffer's contents (the bytes of a
 * Uint8Array or Buffer longer than the 64 that V8 keeps in the heap) are allocated outside it, so that
 * `new Uint8Array(4096)` counts its two objects, about 184 bytes. A collection in the moment between one profiler's
 * stop and the next's start is missed. */
function allocationCounter(): { read(usedNow: number): number } {
  let total = 0;
  let usedBefore = getHeapStatistics().used_heap_size;
  let gcs = new GCProfiler();
  gcs.start();
  return {
    read(usedNow: number): number {
      for (const s of gcs.stop().statistics) total += s.beforeGC.heapStatistics.usedHeapSize - s.afterGC.heapStatistics.usedHeapSize;
      gcs = new GCProfiler();
      gcs.start();
      total += usedNow - usedBefore;
      usedBefore = usedNow;
      return total;
    },
  };
}

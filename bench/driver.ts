// The closed-loop driver of the comparisons, shared by bench/compare.ts (one
// process, every system in turn) and bench/redis-load.ts (the Redis side of
// bench/scale.ts): the item rows, the adapter a system is driven through, and
// the loop itself. Every loop is bounded by an op count and a time.
import { KeysliceError } from '../shared/errors.js';

export interface Row {
  device: string;
  seq: number;
  payload: string;
}

/** One system as the driver sees it. `c` picks the connection (the driver's loop index mod the connections). */
export interface Adapter {
  put(c: number, row: Row): Promise<void>;
  /** Throws if the item is not there. */
  get(c: number, device: string, seq: number): Promise<void>;
  /** The first `n` items of `device` in sorting order; answers how many came back. */
  range(c: number, device: string, n: number): Promise<number>;
  /** Loads rows in batches, before the rounds (not measured). */
  load(rows: Row[]): Promise<void>;
  close(): Promise<void>;
}

export class NotFound extends Error {
  constructor() {
    super('an item of the data set was not found');
  }
}

/** Runs `fn` over `batches`, `inFlight` at a time; stops (throwing) once `stop()` says so. */
export async function inBatches<T>(batches: T[], inFlight: number, fn: (b: T) => Promise<void>, stop: () => boolean = () => false): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(inFlight, batches.length) }, async () => {
    while (next < batches.length) {
      if (stop()) throw new Error('interrupted');
      await fn(batches[next++]);
    }
  }));
}
export const chunk = <T>(xs: T[], n: number): T[][] => Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, (i + 1) * n));

export interface Sample {
  ok: number;
  errors: Record<string, number>;
  seconds: number;
  opsPerSec: number;
  itemsPerSec: number;
  p50: number;
  p99: number;
  max: number;
  stoppedBy: 'ops' | 'duration' | 'interrupt';
}

/** `concurrency` loops, each sending one op and awaiting it; loop j uses connection j mod `connections`.
 * Stops at `maxOps` ops or `seconds`, whichever comes first (or once `stop()` says so). `op` answers the
 * items it returned (or wrote). */
export async function closedLoop(
  shape: { concurrency: number; connections: number },
  maxOps: number,
  seconds: number,
  op: (c: number) => Promise<number>,
  stop: () => boolean = () => false,
): Promise<Sample> {
  let latencies = new Float64Array(1 << 16);
  let n = 0;
  let issued = 0;
  let ok = 0;
  let items = 0;
  const errors: Record<string, number> = {};
  let stoppedBy: Sample['stoppedBy'] = 'ops';
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const loop = async (c: number) => {
    while (issued < maxOps) {
      if (stop()) {
        stoppedBy = 'interrupt';
        return;
      }
      if (performance.now() >= deadline) {
        if (stoppedBy !== 'interrupt') stoppedBy = 'duration';
        return;
      }
      issued++;
      const t0 = performance.now();
      try {
        const got = await op(c);
        const t1 = performance.now();
        if (n === latencies.length) {
          const grown = new Float64Array(n * 2);
          grown.set(latencies);
          latencies = grown;
        }
        latencies[n++] = t1 - t0;
        ok++;
        items += got;
      } catch (err) {
        const code = err instanceof KeysliceError ? err.code : err instanceof NotFound ? 'NotFound' : ((err as Error)?.name ?? 'Error') + ': ' + String((err as Error)?.message ?? err).slice(0, 80);
        errors[code] = (errors[code] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: shape.concurrency }, (_, j) => loop(j % shape.connections)));
  const secs = (performance.now() - start) / 1000;
  const sorted = latencies.subarray(0, n).sort();
  const pct = (p: number) => (sorted.length === 0 ? NaN : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]);
  return { ok, errors, seconds: secs, opsPerSec: ok / secs, itemsPerSec: items / secs, p50: pct(50), p99: pct(99), max: sorted.length ? sorted[sorted.length - 1] : NaN, stoppedBy };
}

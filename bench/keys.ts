// Key choice for the load generator (--keys-dist): uniform, zipfian or hot-key
// over the key indexes 0 .. n-1, drawn from a seeded PRNG so that a run's
// sequence of keys (by op index) is the same every time.

export type KeysDist = 'uniform' | 'zipfian' | 'hotkey';
export const KEYS_DISTS: readonly KeysDist[] = ['uniform', 'zipfian', 'hotkey'];
export const ZIPF_S_DEFAULT = 0.99;
/** hotkey: this share of the ops go to key 0; the rest are uniform over the other keys. */
export const HOTKEY_SHARE = 0.9;

/** mulberry32: a small, fast 32-bit PRNG; plenty for choosing keys. Answers floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A seed of its own for each workload, so that its keys do not depend on the workloads run before it. */
export function workloadSeed(seed: number, workload: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < workload.length; i++) h = Math.imul(h ^ workload.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** The CDF of the Zipf distribution over ranks 0 .. n-1: P(k) proportional to 1 / (k + 1)^s. */
function zipfCdf(n: number, s: number): Float64Array {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 0; k < n; k++) {
    sum += 1 / Math.pow(k + 1, s);
    cdf[k] = sum;
  }
  for (let k = 0; k < n; k++) cdf[k] /= sum;
  cdf[n - 1] = 1;
  return cdf;
}

/** The first index whose CDF value exceeds u (u in [0, 1)). */
function search(cdf: Float64Array, u: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

export interface KeyChooser {
  /** A key index in 0 .. n-1. Draws from the PRNG, so call it in op order (synchronously at an op's start). */
  next(): number;
  /** The PRNG itself, for other choices of the same workload (a read or a write in mixed). */
  random: () => number;
  describe: string;
}

/** Zipf CDFs are kept per (n, s): a run may use the same one in several workloads. */
const cdfs = new Map<string, Float64Array>();

export function keyChooser(dist: KeysDist, n: number, zipfS: number, seed: number): KeyChooser {
  const random = prng(seed);
  const over = `over ${n.toLocaleString('en-US')} keys`;
  if (dist === 'zipfian') {
    const id = `${n}/${zipfS}`;
    let cdf = cdfs.get(id);
    if (cdf === undefined) cdfs.set(id, (cdf = zipfCdf(n, zipfS)));
    const top = cdf[0];
    return { next: () => search(cdf, random()), random, describe: `zipfian s=${zipfS} ${over} (hottest key ${(100 * top).toFixed(1)}% of ops)` };
  }
  if (dist === 'hotkey') {
    const next = n === 1 ? () => 0 : () => (random() < HOTKEY_SHARE ? 0 : 1 + Math.floor(random() * (n - 1)));
    return { next, random, describe: `hotkey (${100 * HOTKEY_SHARE}% to key 0, the rest uniform) ${over}` };
  }
  return { next: () => Math.floor(random() * n), random, describe: `uniform ${over}` };
}

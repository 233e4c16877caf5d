// A promise with a deadline: what every wait on another process that must not wait forever uses.

/** `p`, or a rejection with `late()` after `ms` (Infinity: `p` itself). The timer is cleared either way. */
export function withTimeout<T>(p: Promise<T>, ms: number, late: () => Error): Promise<T> {
  if (ms === Infinity) return p;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(late()), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

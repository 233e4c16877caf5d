// expect(actual, what).toEqual(expected) for values that carry many bytes (replication messages, a replica log's
// records): node's isDeepStrictEqual is asked first. Where it holds, toEqual holds too (it is the stricter: prototypes,
// -0), and it compares a Uint8Array's bytes at once where toEqual walks them one by one, which was most of the time of
// the tests that compare megabytes so. Where it does not hold, toEqual decides and says the difference, as before.
import { isDeepStrictEqual } from 'node:util';
import { expect } from 'vitest';

export function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual, what).toEqual(expected);
}

// The two secrets of a cluster: the client token (clients -> coordinator) and
// the cluster secret (coordinator <-> slice nodes). Compared in constant time;
// an empty configured value means "not required" (a local, loopback-only cluster).
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** True when nothing is required, or when `given` equals `expected`. */
export function secretMatches(expected: string, given: string | string[] | null | undefined): boolean {
  if (expected === '') return true;
  if (typeof given !== 'string') return false;
  return timingSafeEqual(digest(expected), digest(given));
}

/** The token of an `Authorization: Bearer <token>` header, or of `?token=` in a URL. */
export function bearerToken(authorization: string | undefined, url: string | undefined): string | null {
  const m = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  if (m !== null) return m[1];
  const q = (url ?? '').indexOf('?');
  if (q < 0) return null;
  return new URLSearchParams(url!.slice(q + 1)).get('token');
}

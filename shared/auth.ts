// The two secrets of a cluster: the client token (clients -> coordinator) and
// the cluster secret (coordinator <-> slice nodes). Compared in constant time;
// an empty configured value means "not required" (a local, loopback-only cluster).
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4 } from 'node:net';

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

/** True for an address that only this machine reaches: 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice('::ffff:'.length) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}

/** The sentence a coordinator or slice node refuses to start with when it would listen
 * beyond this machine without a cluster secret (anyone who reaches the port could
 * then send slice commands or register as a node); null when it may start. */
export function missingSecretProblem(host: string, clusterSecret: string): string | null {
  if (clusterSecret !== '' || isLoopbackHost(host)) return null;
  return `--host ${host} can be reached from other machines, so a cluster secret is required: set --cluster-secret (env KEYSLICE_CLUSTER_SECRET) to the same value on the coordinator and every slice node.`;
}

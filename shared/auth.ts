// The two secrets of a cluster: the client token (clients -> coordinator) and
// the cluster secret (coordinator <-> slice nodes). Compared in constant time;
// an empty configured value means "not required" (a local, loopback-only cluster).
// A refusal says whether the secret was missing or wrong (the code is the same,
// Unauthorized), so that a misconfigured client is told which of the two to fix.
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

/** Why a client request is refused (null: it is not). `authorization` is its header;
 * `url` is searched for `?token=` (the WebSocket handshake), or undefined (HTTP). */
export function clientTokenRefusal(expected: string, authorization: string | undefined, url: string | undefined): string | null {
  const given = bearerToken(authorization, url);
  if (secretMatches(expected, given)) return null;
  const how = url === undefined ? 'send "Authorization: Bearer <token>"' : 'send "Authorization: Bearer <token>" (or ?token=)';
  if (given !== null) return 'the client token is wrong: it is not the token this cluster was started with (--token)';
  if (authorization !== undefined) return `the client token is missing: the Authorization header is not of the form "Bearer <token>"; ${how}`;
  return `the client token is missing: this cluster needs one; ${how}`;
}

/** Why a node's request with cluster secret `given` is refused (null: it is not). */
export function clusterSecretRefusal(expected: string, given: string | string[] | undefined): string | null {
  if (secretMatches(expected, given)) return null;
  if (typeof given === 'string') return 'the cluster secret is wrong: a slice node needs the same --cluster-secret as the coordinator';
  return 'the cluster secret is missing: this cluster has one; a slice node needs the same --cluster-secret as the coordinator';
}

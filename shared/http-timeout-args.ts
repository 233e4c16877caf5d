// The HTTP timeouts as options (--http-headers-timeout-ms, --http-request-timeout-ms), taken alike by every process
// that serves HTTP: `keyslice coordinator` and `keyslice router` for the client port, `keyslice node` for its
// --metrics-port. One spec and one reading, so that the names, environment variables, bounds and help agree.
import { fail, intArg, type OptionSpecs } from './cli-args.js';
import type { HttpTimeouts } from './http-server.js';
import { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_TIMEOUT_MS_MAX, HTTP_TIMEOUT_MS_MIN } from './limits.js';

export const HTTP_TIMEOUT_ARGS = {
  'http-headers-timeout-ms': {
    default: String(HTTP_HEADERS_TIMEOUT_MS),
    help: `an HTTP request whose headers have not all arrived this long after its first byte is answered 408 and its connection closed (from ${HTTP_TIMEOUT_MS_MIN}, at most --http-request-timeout-ms; docs/operations.md)`,
    env: 'KEYSLICE_HTTP_HEADERS_TIMEOUT_MS',
  },
  'http-request-timeout-ms': {
    default: String(HTTP_REQUEST_TIMEOUT_MS),
    help: `an HTTP request that has not all arrived (its body too) this long after its first byte is answered 408 and its connection closed (from ${HTTP_TIMEOUT_MS_MIN}; docs/operations.md)`,
    env: 'KEYSLICE_HTTP_REQUEST_TIMEOUT_MS',
  },
} satisfies OptionSpecs;

/** The timeouts the options name; a headers' timeout over the request's is refused (node:http refuses it too). */
export function httpTimeoutsOf(args: Partial<Record<keyof typeof HTTP_TIMEOUT_ARGS, string>>): HttpTimeouts {
  const http = {
    headersMs: intArg('http-headers-timeout-ms', args['http-headers-timeout-ms'], HTTP_TIMEOUT_MS_MIN, HTTP_TIMEOUT_MS_MAX),
    requestMs: intArg('http-request-timeout-ms', args['http-request-timeout-ms'], HTTP_TIMEOUT_MS_MIN, HTTP_TIMEOUT_MS_MAX),
  };
  if (http.headersMs > http.requestMs) fail(`--http-headers-timeout-ms (${http.headersMs}) must be at most --http-request-timeout-ms (${http.requestMs})`);
  return http;
}

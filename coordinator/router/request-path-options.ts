// The options of the request path, taken by `keyslice router` and by `keyslice coordinator`, which uses them for its
// own request path (--routers 0) and hands them to the routers it starts (their environment): the router's retry
// bounds (--wrong-owner-retry-ms, --failover-retry-ms: only shorter than their defaults, limits.ts says why) and the
// client port's HTTP timeouts (--http-headers-timeout-ms, --http-request-timeout-ms).
import { intArg, type OptionSpecs } from '../../shared/cli-args.js';
import { HTTP_TIMEOUT_ARGS, httpTimeoutsOf } from '../../shared/http-timeout-args.js';
import {
  FAILOVER_RETRIES_MAX,
  FAILOVER_RETRY_MS_MAX,
  FAILOVER_RETRY_MS_MIN,
  WRONG_OWNER_RETRIES_MAX,
  WRONG_OWNER_RETRY_MS_MAX,
  WRONG_OWNER_RETRY_MS_MIN,
} from '../../shared/limits.js';
import type { HttpTimeouts } from '../../shared/http-server.js';
import type { RouterRetryMs } from './router.js';

export const REQUEST_PATH_ARGS = {
  'wrong-owner-retry-ms': {
    default: String(WRONG_OWNER_RETRY_MS_MAX),
    help: `how long a router sends an op refused WrongOwner again (at most ${WRONG_OWNER_RETRIES_MAX} tries) before it answers WrongOwner, from ${WRONG_OWNER_RETRY_MS_MIN} up to this default; a single slice's op on replicated slices keeps --failover-retry-ms where that is longer (docs/operations.md)`,
    env: 'KEYSLICE_WRONG_OWNER_RETRY_MS',
  },
  'failover-retry-ms': {
    default: String(FAILOVER_RETRY_MS_MAX),
    help: `how long a router sends an op on a replicated slice with no serving leader again (at most ${FAILOVER_RETRIES_MAX} tries) before it answers Unavailable, from ${FAILOVER_RETRY_MS_MIN} up to this default (docs/operations.md)`,
    env: 'KEYSLICE_FAILOVER_RETRY_MS',
  },
  ...HTTP_TIMEOUT_ARGS,
} satisfies OptionSpecs;

type Args = Partial<Record<keyof typeof REQUEST_PATH_ARGS, string>>;

export interface RequestPathOptions {
  retryMs: RouterRetryMs;
  http: HttpTimeouts;
}

export function requestPathOptions(args: Args): RequestPathOptions {
  const http = httpTimeoutsOf(args);
  return {
    retryMs: {
      wrongOwner: intArg('wrong-owner-retry-ms', args['wrong-owner-retry-ms'], WRONG_OWNER_RETRY_MS_MIN, WRONG_OWNER_RETRY_MS_MAX),
      failover: intArg('failover-retry-ms', args['failover-retry-ms'], FAILOVER_RETRY_MS_MIN, FAILOVER_RETRY_MS_MAX),
    },
    http,
  };
}

/** The environment that gives a router started by the coordinator the coordinator's options. */
export function requestPathEnv(o: RequestPathOptions): Record<string, string> {
  const value: Record<keyof typeof REQUEST_PATH_ARGS, number> = {
    'wrong-owner-retry-ms': o.retryMs.wrongOwner,
    'failover-retry-ms': o.retryMs.failover,
    'http-headers-timeout-ms': o.http.headersMs,
    'http-request-timeout-ms': o.http.requestMs,
  };
  return Object.fromEntries(Object.entries(REQUEST_PATH_ARGS).map(([k, spec]) => [spec.env, String(value[k as keyof typeof REQUEST_PATH_ARGS])]));
}

// The options of a router's retry bounds (--wrong-owner-retry-ms, --failover-retry-ms), taken by `keyslice router`
// and by `keyslice coordinator`, which uses them for its own request path (--routers 0) and hands them to the routers
// it starts (their environment). Only shorter than the defaults: limits.ts says why not longer.
import { type ArgSpec, intArg } from '../../shared/cli-args.js';
import { FAILOVER_RETRIES_MAX, FAILOVER_RETRY_MS_MAX, FAILOVER_RETRY_MS_MIN, WRONG_OWNER_RETRIES_MAX, WRONG_OWNER_RETRY_MS_MAX, WRONG_OWNER_RETRY_MS_MIN } from '../../shared/limits.js';
import type { RouterRetryMs } from './router.js';

export const ROUTER_RETRY_ARGS = {
  'wrong-owner-retry-ms': {
    default: String(WRONG_OWNER_RETRY_MS_MAX),
    help: `how long a router sends an op refused WrongOwner again (at most ${WRONG_OWNER_RETRIES_MAX} tries) before it answers WrongOwner, from ${WRONG_OWNER_RETRY_MS_MIN} up to this default (docs/operations.md)`,
    env: 'KEYSLICE_WRONG_OWNER_RETRY_MS',
  },
  'failover-retry-ms': {
    default: String(FAILOVER_RETRY_MS_MAX),
    help: `how long a router sends an op on a replicated slice with no serving leader again (at most ${FAILOVER_RETRIES_MAX} tries) before it answers Unavailable, from ${FAILOVER_RETRY_MS_MIN} up to this default (docs/operations.md)`,
    env: 'KEYSLICE_FAILOVER_RETRY_MS',
  },
} satisfies ArgSpec;

export function routerRetryMs(args: Partial<Record<keyof typeof ROUTER_RETRY_ARGS, string>>): RouterRetryMs {
  return {
    wrongOwner: intArg('wrong-owner-retry-ms', args['wrong-owner-retry-ms'], WRONG_OWNER_RETRY_MS_MIN, WRONG_OWNER_RETRY_MS_MAX),
    failover: intArg('failover-retry-ms', args['failover-retry-ms'], FAILOVER_RETRY_MS_MIN, FAILOVER_RETRY_MS_MAX),
  };
}

/** The environment that gives a router started by the coordinator the coordinator's bounds. */
export function routerRetryEnv(r: RouterRetryMs): Record<string, string> {
  return { [ROUTER_RETRY_ARGS['wrong-owner-retry-ms'].env]: String(r.wrongOwner), [ROUTER_RETRY_ARGS['failover-retry-ms'].env]: String(r.failover) };
}

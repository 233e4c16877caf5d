// The options every `keyslice` command that talks to a cluster takes (status, add,
// drain, remove, advise, import, export): the coordinator's address and the client
// token, each from its environment variable when the command line does not say.
// The command line itself is read by shared/cli-args.ts's readCommandLine.
import { fromEnv } from '../../shared/cli-args.js';
import { COORDINATOR_PORT_DEFAULT } from '../../shared/limits.js';

export const CLUSTER_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
} as const;

/** --url (env KEYSLICE_URL; default http://127.0.0.1:7100, without a trailing slash) and --token (env KEYSLICE_TOKEN;
 * undefined: none), each variable read as a process reads its options' (fromEnv: empty is unset). Not in
 * CLUSTER_OPTIONS' env: advise tells a --url on the command line from none (a design judged here). */
export function clusterOf(v: { url?: string; token?: string }): { url: string; token: string | undefined } {
  return { url: (v.url ?? fromEnv('KEYSLICE_URL') ?? `http://127.0.0.1:${COORDINATOR_PORT_DEFAULT}`).replace(/\/+$/, ''), token: v.token ?? fromEnv('KEYSLICE_TOKEN') };
}

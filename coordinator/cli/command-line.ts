// The options every `keyslice` command that talks to a cluster takes (status, add,
// drain, remove, advise, import, export): the coordinator's address and the client
// token, each from its environment variable when the command line does not say.
// The command line itself is read by shared/cli-args.ts's readCommandLine.

export const CLUSTER_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
} as const;

/** --url (env KEYSLICE_URL; default http://127.0.0.1:7100, without a trailing slash) and --token (env KEYSLICE_TOKEN;
 * undefined: none). */
export function clusterOf(v: { url?: string; token?: string }): { url: string; token: string | undefined } {
  return { url: (v.url ?? process.env.KEYSLICE_URL ?? 'http://127.0.0.1:7100').replace(/\/+$/, ''), token: v.token ?? process.env.KEYSLICE_TOKEN };
}

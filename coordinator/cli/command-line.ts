// The command line of a `keyslice` command that talks to a cluster: its own options
// plus the ones every such command takes (--url, --token, --json, --help), with
// --help answered here.
import { type parseArgs, type ParseArgsConfig } from 'node:util';
import { readCommandLine } from '../../shared/cli-args.js';

const COMMON_OPTIONS = {
  json: { type: 'boolean' },
  url: { type: 'string' },
  token: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Options = NonNullable<ParseArgsConfig['options']>;

type Parsed<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O & typeof COMMON_OPTIONS; strict: true; allowPositionals: true }>>;

export function readCommand<const O extends Options>(args: string[], usage: string, options: O): Parsed<O> {
  const parsed: Parsed<O> = readCommandLine({ args, options: { ...options, ...COMMON_OPTIONS }, strict: true, allowPositionals: true });
  if ((parsed.values as { help?: boolean }).help === true) {
    console.log(usage);
    process.exit(0);
  }
  return parsed;
}

// Command lines of the process entry points and the benches, read by node:util's
// parseArgs (strict) with its errors said as plain sentences; a process refuses
// to start on bad config. Processes also take each option from an environment
// variable (docker-compose configures them that way).
import { parseArgs as parseArgv, type ParseArgsConfig } from 'node:util';

/** Bad arguments: the process says so and exits with EXIT_USAGE. */
export const EXIT_USAGE = 2;
/** A server could not listen (the port is taken, the address is not this machine's, no permission). */
export const EXIT_CANNOT_LISTEN = 1;

export class UsageError extends Error {}

/** node:util parseArgs, strict; what it refuses becomes a UsageError with one plain sentence. Under readArguments;
 * called directly only where parseArgs' tokens are wanted (bench/load.ts refuses an option given twice). */
export function readCommandLine<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgv<T>> {
  try {
    return parseArgv(config);
  } catch (err) {
    throw new UsageError(plainParseError(err as Error & { code?: string }));
  }
}

/** util.parseArgs words its errors for programmers ("Option '--port <value>' argument missing"); say them for users. */
function plainParseError(err: Error & { code?: string }): string {
  const quoted = /'([^']*)'/.exec(err.message)?.[1] ?? '';
  const option = quoted.split(/[ ,]+/).find((w) => w.startsWith('--')) ?? quoted;
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option "${quoted}"`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument "${quoted}"`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(err.message)) return `${option} takes no value`;
      if (/ambiguous/.test(err.message)) return `${option} needs a value (one that starts with a dash goes as ${option}=-...)`;
      return `${option} needs a value`;
    default:
      throw err;
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/** What readArguments answers: parseArgs' values (typed by each option's type, default and `multiple`, and --help),
 * and the arguments where `allowPositionals`. */
type Arguments<O extends Options, P extends boolean> = ReturnType<typeof parseArgv<{ args: string[]; options: O & typeof HELP_OPTION; strict: true; allowPositionals: P }>>;

/** The one reader of options: a command line as node:util parseArgs reads it (`options`, strict; arguments besides
 * only where `allowPositionals`), and `--help` (-h), which prints `help` and exits 0. Anything it does not take (an
 * option it does not know, a value missing or given to a flag, an argument not allowed) is thrown as a UsageError of
 * one plain sentence, which the caller says its way: readOptions (a process, a bench) with its usage line, a keyslice
 * command that talks to a cluster (coordinator/cli) naming the command, after its own checks' UsageErrors. */
export function readArguments<const O extends Options, const P extends boolean>(args: string[], options: O, help: string, allowPositionals: P): Arguments<O, P> {
  const read = readCommandLine({ args, options: { ...options, ...HELP_OPTION }, strict: true, allowPositionals }) as Arguments<O, P>;
  if ((read.values as { help?: boolean }).help === true) {
    console.log(help);
    process.exit(0);
  }
  return read;
}

/** A process's or a bench's options (readArguments, no arguments besides): `--help` prints `help` and exits 0;
 * anything it does not take prints what is wrong, where to look, and the usage line, and exits EXIT_USAGE
 * (refuseCommandLine): a sentence, never parseArgs' stack trace. `usage`'s first line is "usage: <command> ...",
 * whose command the sentence names ("try keyslice node --help", "try node dist/bench/hops.js --help"). */
export function readOptions<O extends Options>(argv: string[], options: O, usage: string, help = usage): OptionValues<O> {
  return refusing(usage, () => readArguments(argv, options, help, false).values as OptionValues<O>);
}

/** readOptions for a bench that also takes arguments (folders, files: `positionals`), refused the same way; how many it
 * takes is the bench's to check (refuseCommandLine). */
export function readOptionsAndArguments<O extends Options>(argv: string[], options: O, usage: string, help = usage): { values: OptionValues<O>; positionals: string[] } {
  return refusing(usage, () => {
    const read = readArguments(argv, options, help, true);
    return { values: read.values as OptionValues<O>, positionals: read.positionals };
  });
}

/** `read`'s UsageError refused with `usage` (refuseCommandLine). */
function refusing<T>(usage: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UsageError) refuseCommandLine(err.message, usage);
    throw err;
  }
}

/** Refuses a command line (readOptions, or a bench's own check of its options, a UsageError): `message`, where to
 * look (the command of `usage`'s first line, "usage: <command> [...]", up to its first option or the first argument
 * it names, "DIR" or "<folder>", with --help; after `--` where npm runs it), then that usage line, on stderr; exits
 * EXIT_USAGE. */
export function refuseCommandLine(message: string, usage: string): never {
  const line = usage.split('\n')[0];
  const m = /^usage: (.+?)( \[-- | \[| --| (?=[A-Z<])|$)/.exec(line);
  const command = m === null ? undefined : m[1] + (m[2] === ' [-- ' ? ' --' : '');
  fail(`${message}${command === undefined ? '' : ` (try ${command} --help)`}\n${line}`);
}

/** What readOptions answers for `options`: parseArgs' values, typed by each option's type, default and `multiple`. */
type OptionValues<O extends Options> = ReturnType<typeof parseArgv<{ options: O; strict: true; allowPositionals: false }>>['values'];

/** `env`: an environment variable that sets the option when the command line does not (docker-compose). */
export type ArgSpec = Record<string, { default?: string; help: string; env?: string }>;

/** `--name value` options of a process or a bench, each a string, with env fallbacks and defaults, read by
 * readOptions; `--help` prints `usage` and the options. */
export function parseArgs<S extends ArgSpec>(argv: string[], spec: S, usage: string): { [K in keyof S]: string | undefined } {
  const options: Record<string, { type: 'string' }> = {};
  for (const k of Object.keys(spec)) options[k] = { type: 'string' };
  const help = usage + '\n' + Object.entries(spec).map(([k, v]) => `  --${k.padEnd(12)} ${v.help}${v.env !== undefined ? ` [env ${v.env}]` : ''}${v.default !== undefined ? ` (default ${v.default})` : ''}`).join('\n');
  const values = readOptions(argv, options, usage, help) as Record<string, string | undefined>;
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(spec)) {
    const fromEnv = v.env !== undefined && process.env[v.env] !== undefined && process.env[v.env] !== '' ? process.env[v.env] : undefined;
    out[k] = values[k] ?? fromEnv ?? v.default;
  }
  return out as { [K in keyof S]: string | undefined };
}

/** The one reader of a whole-number option: `value` (a command line's or an environment variable's text) as a whole
 * number from `min` to `max`, or `dflt` where the option is not given (`value` undefined) and there is a default.
 * Anything else is thrown as a UsageError, "--NAME must be a whole number from MIN to MAX, got ...", which the caller
 * says its way: intArg (a process, a bench) prints it and exits EXIT_USAGE; a keyslice command (coordinator/cli) names
 * itself and its --help. Number() reads the text, so "1e3", "0x10" and " 5" are whole numbers too; Number('') is 0,
 * so an empty value (--port=) is refused on its own. */
export function wholeNumber(name: string, value: string | undefined, min: number, max: number, dflt?: number): number {
  if (value === undefined && dflt !== undefined) return dflt;
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
  }
  return n;
}

/** A number from `min` to `max`, fractions too (seconds), read as wholeNumber reads a whole number. */
export function anyNumber(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !(n >= min && n <= max)) {
    throw new UsageError(`--${name} must be a number from ${min} to ${max}, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
  }
  return n;
}

/** wholeNumber for a process or a bench: what it refuses is printed and the process exits EXIT_USAGE (fail). */
export function intArg(name: string, value: string | undefined, min: number, max: number): number {
  return failing(() => wholeNumber(name, value, min, max));
}

/** anyNumber for a process or a bench, refused as intArg refuses. */
export function numberArg(name: string, value: string | undefined, min: number, max: number): number {
  return failing(() => anyNumber(name, value, min, max));
}

/** `read`'s UsageError said by fail. */
function failing<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof UsageError) fail(err.message);
    throw err;
  }
}

export function fail(message: string): never {
  console.error(`keyslice: ${message}`);
  process.exit(EXIT_USAGE);
}

/** A server that cannot listen says why in one sentence, names the option that changes it, and exits
 * EXIT_CANNOT_LISTEN: no stack trace. `who`: "coordinator", "slice node"; `portEnv`: the port's variable. */
export function cannotListen(who: string, host: string, port: number, err: NodeJS.ErrnoException, portEnv: string, portFlag = '--port'): never {
  const choose = `choose another with ${portFlag} or ${portEnv}`;
  const why =
    err.code === 'EADDRINUSE'
      ? `port ${port} on ${host} is in use by another process; stop that process or ${choose}`
      : err.code === 'EADDRNOTAVAIL'
        ? `${host} is not an address of this machine; choose one with --host`
        : err.code === 'EACCES'
          ? `no permission to listen on port ${port} of ${host} (ports below 1024 need privileges); ${choose}`
          : `cannot listen on ${host}:${port} (${err.message})`;
  console.error(`keyslice ${who}: ${why}`);
  process.exit(EXIT_CANNOT_LISTEN);
}

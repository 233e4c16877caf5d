// Command lines of the process entry points, the keyslice commands and the benches,
// all read by readCommandLine (node:util's parseArgs, strict, with its errors said as
// plain sentences) and their numbers by wholeNumber/anyNumber; a process refuses to
// start on bad config. Processes also take each option from an environment variable
// (docker-compose configures them that way).
import { parseArgs as parseArgv } from 'node:util';
import { assert } from './errors.js';

/** Bad arguments: the process says so and exits with EXIT_USAGE. */
export const EXIT_USAGE = 2;
/** A server could not listen (the port is taken, the address is not this machine's, no permission). */
export const EXIT_CANNOT_LISTEN = 1;

export class UsageError extends Error {}

/** One option of a command line: a string (`type` left out) or a flag (`type: 'boolean'`). Its value is the command
 * line's, else (a string option) its environment variable `env`'s where that is set and not empty (docker-compose
 * configures the processes that way), else `default`. `help`: its line in the generated --help (readCommandLine). */
export type OptionSpec = TextOption | FlagOption;
interface TextOption {
  type?: 'string';
  default?: string;
  env?: string;
  help?: string;
}
/** A flag takes no `env` (its text would not be a flag) and a flag's default only. */
interface FlagOption {
  type: 'boolean';
  default?: boolean;
  env?: never;
  help?: string;
}
export type OptionSpecs = Record<string, OptionSpec>;

/** An option's value as readCommandLine answers it: a string or a flag, never undefined where it has a default. */
type OptionValue<S extends OptionSpec> = S extends { type: 'boolean' }
  ? S extends { default: boolean } ? boolean : boolean | undefined
  : S extends { default: string } ? string : string | undefined;
type OptionValues<O extends OptionSpecs> = { -readonly [K in keyof O]: OptionValue<O[K]> };

interface ReadHow {
  /** Arguments besides the options (a table, a folder) are taken; how many is the command's to check. */
  positionals?: boolean;
  /** What --help prints; by default `usage` and a line for each option that has `help`. */
  help?: string;
  /** What the command line does not take is thrown as a UsageError, for a command that says it its own way (a keyslice
   * command that talks to a cluster names itself); by default it is refused (refuseCommandLine). */
  throws?: boolean;
}

/** The one reader of a command line, every process's, bench's and keyslice command's: node:util parseArgs, strict
 * (options are `options`, arguments besides only with `positionals`), then each option's env and default
 * (OptionSpec). `--help` (-h) prints the help and exits 0. Refused, in one plain sentence, never parseArgs' stack
 * trace: an option it does not know, a value missing or given to a flag, an argument where none is taken, and an
 * option given twice (which one was meant? parseArgs would keep the last silently). `usage`'s first line is
 * "usage: <command> ...", whose command the refusal names ("try keyslice node --help"). */
export function readCommandLine<const O extends OptionSpecs>(argv: string[], options: O, usage: string, how: ReadHow = {}): { values: OptionValues<O>; positionals: string[] } {
  try {
    const read = parseCommandLine(argv, options, how.positionals === true);
    if (read.help) {
      console.log(how.help ?? helpOf(options, usage));
      process.exit(0);
    }
    return { values: read.values as OptionValues<O>, positionals: read.positionals };
  } catch (err) {
    if (err instanceof UsageError && how.throws !== true) refuseCommandLine(err.message, usage);
    throw err;
  }
}

function parseCommandLine(args: string[], options: OptionSpecs, allowPositionals: boolean): { values: Record<string, string | boolean | undefined>; positionals: string[]; help: boolean } {
  const config: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  assert(!('help' in options), '--help (-h) is every command line\'s own');
  for (const [name, o] of Object.entries(options)) config[name] = { type: o.type ?? 'string' };
  let read;
  try {
    read = parseArgv({ args, options: config, strict: true, allowPositionals, tokens: true });
  } catch (err) {
    throw new UsageError(plainParseError(err as Error & { code?: string }));
  }
  const seen = new Set<string>();
  for (const t of read.tokens) {
    if (t.kind !== 'option' || t.name === 'help') continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} is given twice`);
    seen.add(t.name);
  }
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, o] of Object.entries(options)) {
    values[name] = read.values[name] ?? (o.type === 'boolean' || o.env === undefined ? undefined : fromEnv(o.env)) ?? o.default;
  }
  return { values, positionals: read.positionals, help: read.values.help === true };
}

/** An option's environment variable `name`: its value where set and not empty (docker-compose's `${X:-}` sets one
 * empty: not given), else undefined. */
export function fromEnv(name: string): string | undefined {
  const value = process.env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** `usage`, and a line for each option with `help`: its env and default where it has them. */
function helpOf(options: OptionSpecs, usage: string): string {
  const lines = Object.entries(options)
    .filter(([, o]) => o.help !== undefined)
    .map(([k, o]) => `  --${k.padEnd(12)} ${o.help}${o.env !== undefined ? ` [env ${o.env}]` : ''}${o.default !== undefined ? ` (default ${o.default})` : ''}`);
  return [usage, ...lines].join('\n');
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

/** Refuses a command line (readCommandLine, or a command's own check of its options, a UsageError): `message`, where
 * to look (the command of `usage`'s first line, "usage: <command> [...]", up to its first option or the first argument
 * it names, "DIR" or "<folder>", with --help; after `--` where npm runs it), then that usage line, on stderr; exits
 * EXIT_USAGE. */
export function refuseCommandLine(message: string, usage: string): never {
  const line = usage.split('\n')[0];
  const m = /^usage: (.+?)( \[-- | \[| --| (?=[A-Z<])|$)/.exec(line);
  const command = m === null ? undefined : m[1] + (m[2] === ' [-- ' ? ' --' : '');
  fail(`${message}${command === undefined ? '' : ` (try ${command} --help)`}\n${line}`);
}

/** The one reader of a whole-number option: `value` (a command line's or an environment variable's text) as a whole
 * number from `min` to `max`, or `dflt` where the option is not given (`value` undefined) and there is a default.
 * Anything else is thrown as a UsageError, "--NAME must be a whole number from MIN to MAX, got ...", which the caller
 * says its way: intArg (a process, a bench) prints it and exits EXIT_USAGE; a keyslice command (coordinator/cli) names
 * itself and its --help. Number() reads the text, so "1e3", "0x10" and " 5" are whole numbers too; Number('') is 0,
 * so an empty value (--port=) is refused on its own. */
export function wholeNumber(name: string, value: string | undefined, min: number, max: number, dflt?: number): number {
  return wholeNumberOf(`--${name}`, value, min, max, dflt);
}

/** wholeNumber of what `said` names (an option, `--name`, or an environment variable). */
function wholeNumberOf(said: string, value: string | undefined, min: number, max: number, dflt?: number): number {
  if (value === undefined && dflt !== undefined) return dflt;
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(`${said} must be a whole number from ${min} to ${max}, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
  }
  return n;
}

/** A setting that only an environment variable gives (`npm start`'s: coordinator/cli/local-cluster.ts): `name`'s value
 * (fromEnv: empty is unset) as a whole number from `min` to `max`, else `dflt`; anything else refused as intArg refuses,
 * naming the variable. */
export function envNumber(name: string, min: number, max: number, dflt: number): number {
  return failing(() => wholeNumberOf(name, fromEnv(name), min, max, dflt));
}

/** A number from `min` (above `min` with `above`: 0 seconds is no time at all) to `max`, fractions too (seconds, a
 * share), or `dflt` where the option is not given and there is a default; read as wholeNumber reads a whole number. */
export function anyNumber(name: string, value: string | undefined, min: number, max: number, { dflt, above = false }: { dflt?: number; above?: boolean } = {}): number {
  if (value === undefined && dflt !== undefined) return dflt;
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !((above ? n > min : n >= min) && n <= max)) {
    throw new UsageError(`--${name} must be a number ${above ? 'above' : 'from'} ${min} ${above ? 'and at most' : 'to'} ${max}, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
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

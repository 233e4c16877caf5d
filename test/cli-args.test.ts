// shared/cli-args.ts readCommandLine in process: each option's value from the command line, its environment variable
// and its default, and the types it answers them with (tsc -p tsconfig.test.json checks those). The processes' and
// commands' refusals are checked through real processes in test/cli.test.ts and test/bench-smoke.test.ts.
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { clusterOf, CLUSTER_OPTIONS } from '../coordinator/cli/command-line.js';
import { readCommandLine, UsageError } from '../shared/cli-args.js';

const USAGE = 'usage: keyslice test [options]';
const PORT_ENV = 'KEYSLICE_TEST_CLI_ARGS_PORT';
const FLAG_ENV = 'KEYSLICE_TEST_CLI_ARGS_FLAG';

const saved = { KEYSLICE_URL: process.env.KEYSLICE_URL, KEYSLICE_TOKEN: process.env.KEYSLICE_TOKEN };
afterEach(() => {
  delete process.env[PORT_ENV];
  delete process.env[FLAG_ENV];
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

/** The options of a process: a string with env and default, a string with neither, a flag. */
const read = (argv: string[]) => readCommandLine(argv, { port: { default: '7100', env: PORT_ENV, help: 'port' }, name: {}, quiet: { type: 'boolean' } }, USAGE, { throws: true }).values;

describe('readCommandLine', () => {
  it('a string option is the command line\'s, else its environment variable\'s where set and not empty, else its default', () => {
    expect(read([])).toEqual({ port: '7100', name: undefined, quiet: undefined });
    process.env[PORT_ENV] = '';
    expect(read([]).port).toBe('7100');
    process.env[PORT_ENV] = '7200';
    expect(read([]).port).toBe('7200');
    expect(read(['--port', '7300', '--name=x', '--quiet'])).toEqual({ port: '7300', name: 'x', quiet: true });
  });

  it('answers a string for an option with a default, a string or undefined without, a flag as a boolean', () => {
    expectTypeOf(read([])).toEqualTypeOf<{ port: string; name: string | undefined; quiet: boolean | undefined }>();
    expectTypeOf(readCommandLine([], { on: { type: 'boolean', default: false } }, USAGE).values).toEqualTypeOf<{ on: boolean }>();
  });

  it('a flag takes no environment variable and no text default: refused by the type, and never a string at run time', () => {
    process.env[FLAG_ENV] = 'yes';
    // @ts-expect-error a flag's value is true or absent: an environment variable's text is not one
    const flagged = readCommandLine([], { quiet: { type: 'boolean', env: FLAG_ENV } }, USAGE, { throws: true }).values;
    expect(flagged.quiet).toBeUndefined();
    // @ts-expect-error a flag's default is a boolean
    readCommandLine([], { quiet: { type: 'boolean', default: 'yes' } }, USAGE, { throws: true });
    // @ts-expect-error a string option's default is a string
    readCommandLine([], { port: { default: true } }, USAGE, { throws: true });
  });

  it('refuses an option given twice, in either spelling, rather than keep the last', () => {
    expect(() => read(['--port', '1', '--port=2'])).toThrow(new UsageError('--port is given twice'));
    expect(() => read(['--quiet', '--quiet'])).toThrow(new UsageError('--quiet is given twice'));
  });

  it('a keyslice command reads --url and --token as a process reads its options: an empty environment variable is unset', () => {
    const cluster = (argv: string[]) => clusterOf(readCommandLine(argv, CLUSTER_OPTIONS, 'usage: keyslice status', { throws: true }).values);
    process.env.KEYSLICE_URL = '';
    process.env.KEYSLICE_TOKEN = '';
    expect(cluster([])).toEqual({ url: 'http://127.0.0.1:7100', token: undefined });
    process.env.KEYSLICE_URL = 'http://127.0.0.1:7200/';
    process.env.KEYSLICE_TOKEN = 't';
    expect(cluster([])).toEqual({ url: 'http://127.0.0.1:7200', token: 't' });
    expect(cluster(['--url', 'http://127.0.0.1:7300//', '--token', 'u'])).toEqual({ url: 'http://127.0.0.1:7300', token: 'u' });
  });
});

// Minimal `--name value` argument parsing for the process entry points, with
// validation in plain sentences (a process refuses to start on bad config).

/** `env`: an environment variable that sets the option when the command line does not (docker-compose). */
export type ArgSpec = Record<string, { default?: string; help: string; env?: string }>;

export function parseArgs<S extends ArgSpec>(argv: string[], spec: S, usage: string): { [K in keyof S]: string | undefined } {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(spec)) out[k] = (v.env !== undefined && process.env[v.env] !== undefined && process.env[v.env] !== '' ? process.env[v.env] : undefined) ?? v.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      console.log(usage + '\n' + Object.entries(spec).map(([k, v]) => `  --${k.padEnd(12)} ${v.help}${v.env !== undefined ? ` [env ${v.env}]` : ''}${v.default !== undefined ? ` (default ${v.default})` : ''}`).join('\n'));
      process.exit(0);
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m || !(m[1] in spec)) fail(`unknown argument "${arg}" (try --help)`);
    const value = m[2] ?? argv[++i];
    if (value === undefined) fail(`--${m[1]} needs a value`);
    out[m[1]] = value;
  }
  return out as { [K in keyof S]: string | undefined };
}

export function intArg(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < min || n > max) {
    fail(`--${name} must be a whole number from ${min} to ${max}, got ${value === undefined ? 'nothing' : JSON.stringify(value)}`);
  }
  return n;
}

export function fail(message: string): never {
  console.error(`keyslice: ${message}`);
  process.exit(2);
}

// The peers the benchmarks compare keyslice with, found or installed: Debian's
// redis-server (apt-get, as root or through sudo) and, in bench/peers/node_modules,
// the npm packages that drive them (from bench/peers/package.json and its lock;
// loaded with createRequire, never keyslice dependencies). Shared by
// bench/compare.ts and bench/scale.ts.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'); // dist/bench -> the repository
export const PEERS_DIR = join(ROOT, 'bench', 'peers');

/** Runs a command to its end; its exit status and its output, stdout and stderr together. */
export function run(cmd: string, args: string[], opts: { cwd?: string } = {}): { ok: boolean; output: string } {
  const r = spawnSync(cmd, args, { cwd: opts.cwd, encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 << 20 });
  return { ok: r.status === 0, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

export function findRedisServer(): string | null {
  for (const p of ['/usr/bin/redis-server', '/usr/local/bin/redis-server']) if (existsSync(p)) return p;
  const r = run('sh', ['-c', 'command -v redis-server']);
  return r.ok && r.output.trim() !== '' ? r.output.trim() : null;
}

/** The path of redis-server: found, or installed with apt-get (as root, or through `sudo -n` otherwise).
 * Throws, saying why, where it cannot be had. */
export function ensureRedis(log: (line: string) => void): string {
  const found = findRedisServer();
  if (found !== null) return found;
  const root = process.getuid?.() === 0;
  // Not root: sudo without a password prompt (a prompt would hang a benchmark), or nothing.
  if (!root && !run('sh', ['-c', 'command -v sudo']).ok) throw new Error('redis-server is not installed, this is not root and there is no sudo: run `apt-get install -y redis-server` (Debian), then this again');
  const aptGet = (args: string[]) => (root ? run('apt-get', args) : run('sudo', ['-n', 'apt-get', ...args]));
  log(`redis-server is missing: ${root ? '' : 'sudo -n '}apt-get install -y redis-server`);
  let r = aptGet(['install', '-y', 'redis-server']);
  if (!r.ok) {
    log('apt-get install failed; apt-get update, then again');
    const u = aptGet(['update']);
    if (!u.ok) throw new Error(`apt-get update failed:\n${u.output.slice(-2000)}`);
    r = aptGet(['install', '-y', 'redis-server']);
    if (!r.ok) throw new Error(`apt-get install -y redis-server failed:\n${r.output.slice(-2000)}`);
  }
  const installed = findRedisServer();
  if (installed === null) throw new Error('apt-get installed redis-server but no redis-server binary is on the PATH');
  return installed;
}

/** bench/peers/node_modules: npm ci from bench/peers/package-lock.json (npm install without it), if any of
 * `packages` is missing. Answers a require() that loads from there. */
export function ensureNpmPeers(packages: readonly string[], log: (line: string) => void): NodeJS.Require {
  if (!existsSync(join(PEERS_DIR, 'package.json'))) throw new Error(`${PEERS_DIR}/package.json is missing (run from the repository, compiled: node dist/bench/...)`);
  const req = createRequire(join(PEERS_DIR, 'package.json'));
  const missing = () => packages.filter((p) => {
    try {
      req.resolve(`${p}/package.json`);
      return false;
    } catch {
      return true;
    }
  });
  const absent = missing();
  if (absent.length > 0) {
    const lock = existsSync(join(PEERS_DIR, 'package-lock.json'));
    const args = [lock ? 'ci' : 'install', '--prefix', PEERS_DIR, '--no-audit', '--no-fund'];
    log(`peers missing in bench/peers/node_modules (${absent.join(', ')}): npm ${args.join(' ')}`);
    const r = run('npm', args, { cwd: PEERS_DIR });
    if (!r.ok) throw new Error(`npm ${args.join(' ')} failed:\n${r.output.slice(-3000)}`);
    const still = missing();
    if (still.length > 0) throw new Error(`after npm ${args[0]}, still missing in bench/peers: ${still.join(', ')}`);
  }
  return req;
}

export const versionOf = (req: NodeJS.Require, pkg: string): string => (JSON.parse(readFileSync(req.resolve(`${pkg}/package.json`), 'utf8')) as { version: string }).version;

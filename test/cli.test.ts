// The `keyslice` command as a user meets it: help and exit codes, --version,
// one plain sentence for a busy port (coordinator and node), separate
// environment variables for the coordinator and the node, and `keyslice local`
// saying which process exited and why it stops the rest. Real processes of the
// built CLI (dist/coordinator/cli/cli.js), each bounded in time and stopped by PID.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCAL_NODES, startProcess, stopProcess } from '../coordinator/cli/local-cluster.js';
import { BATCH_WRITE_ITEMS_MAX, CLI_WAIT_S_MAX, IMPORT_PARALLEL_MAX, SCAN_SEGMENTS_MAX } from '../shared/limits.js';
import { cleanEnv, keyslice, stopRunning } from './cli-run.js';
import { waitFor } from './elastic-fixture.js';
import { liveProcesses } from './procs.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'coordinator', 'cli', 'cli.js');
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-cli-'));
const children: ChildProcess[] = [];
/** Process groups of the keyslice local runs, each started detached (a group of its own): killed whole at the
 * cleanup, so that what a run started goes even if its test failed before it knew their PIDs (a start past its bound). */
const groups: number[] = [];

afterAll(async () => {
  for (const pgid of groups) for (const p of liveProcesses()) if (p.pgid === pgid) process.kill(p.pid, 'SIGKILL');
  stopRunning();
  await Promise.all(children.map((c) => stopProcess(c)));
  rmSync(dataDir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A port that something else holds: what a user meets when an old process still runs. */
async function holdPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe('keyslice help and version', () => {
  it('with no arguments prints the help on stderr and exits 2', async () => {
    const r = await keyslice([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^usage:/m);
    expect(r.stderr).toContain('keyslice coordinator');
  });

  it('--help exits 0; --version prints the version of package.json', async () => {
    expect((await keyslice(['--help'])).code).toBe(0);
    const r = await keyslice(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it('every help text names the command as keyslice <command>, none a path under dist/', async () => {
    for (const [args, first] of [
      [['--help'], 'keyslice: a distributed NoSQL item store'],
      [['coordinator', '--help'], 'usage: keyslice coordinator'],
      [['node', '--help'], 'usage: keyslice node'],
      [['local', '--help'], 'usage: keyslice local'],
      [['status', '--help'], 'keyslice: a distributed NoSQL item store'],
      // The commands that take arguments (shared/cli-args.ts readCommandLine answers their --help too).
      [['export', '--help'], 'usage: keyslice export TABLE'],
      [['import', '-h'], 'usage: keyslice import TABLE FILE'],
      [['advise', '--help'], 'usage: keyslice advise FILE'],
    ] as const) {
      const r = await keyslice([...args]);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout.split('\n')[0]).toContain(first);
      expect(r.stdout).not.toMatch(/dist\//);
    }
  });

  it('refuses an unknown option in a sentence that says where to look, then its usage line, exit 2', async () => {
    const r = await keyslice(['node', '--prot', '7101']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual(['keyslice: unknown option "--prot" (try keyslice node --help)', 'usage: keyslice node [--coordinator http://127.0.0.1:7100] [options]']);
    // The commands that talk to a cluster name themselves.
    for (const command of ['export', 'import', 'advise', 'status']) {
      const r = await keyslice([command, '--prot', '7101']);
      expect([r.code, r.stderr.trim()], command).toEqual([2, `keyslice${command === 'status' ? '' : ` ${command}`}: unknown option "--prot" (try keyslice${command === 'status' ? '' : ` ${command}`} --help)`]);
    }
    // An option given twice is refused, not the last one taken (which was meant?): a process, and a command that names itself.
    const twice = await keyslice(['node', '--port', '7101', '--port=7102']);
    expect([twice.code, ...twice.stderr.trim().split('\n')]).toEqual([2, 'keyslice: --port is given twice (try keyslice node --help)', 'usage: keyslice node [--coordinator http://127.0.0.1:7100] [options]']);
    const exported = await keyslice(['export', 't', '--url', 'http://127.0.0.1:1', '--parallel', '1', '--parallel', '2']);
    expect([exported.code, exported.stderr.trim()]).toEqual([2, 'keyslice export: --parallel is given twice (try keyslice export --help)']);
  });
  it("refuses a request path's or a down wait's option out of its bounds in one sentence, exit 2, before it starts anything (coordinator and router)", async () => {
    const data = join(dataDir, 'refused-options');
    for (const [args, env, said] of [
      [['coordinator', '--failover-retry-ms', '20000'], {}, 'keyslice: --failover-retry-ms must be a whole number from 1000 to 10000, got "20000"'],
      [['coordinator', '--wrong-owner-retry-ms', '999'], {}, 'keyslice: --wrong-owner-retry-ms must be a whole number from 1000 to 5000, got "999"'],
      // The headers' default (10 s) over a request timeout set alone below it.
      [['coordinator', '--http-request-timeout-ms', '5000'], {}, 'keyslice: --http-headers-timeout-ms (10000) must be at most --http-request-timeout-ms (5000)'],
      [['coordinator'], { KEYSLICE_MOVE_UNDO_DOWN_MS: '10' }, 'keyslice: --move-undo-down-ms must be a whole number from 1000 to 2147483648, got "10"'],
      [['coordinator', '--drain-replace-down-ms', '2.5s'], {}, 'keyslice: --drain-replace-down-ms must be a whole number from 1000 to 2147483648, got "2.5s"'],
      // An empty value is no number (Number('') is 0: it read as 0, no limit on moves).
      [['coordinator', '--move-items-per-second='], {}, 'keyslice: --move-items-per-second must be a whole number from 0 to 1000000000, got ""'],
      [['router', '--coordinator', 'http://127.0.0.1:1', '--http-headers-timeout-ms', '999'], {}, 'keyslice: --http-headers-timeout-ms must be a whole number from 1000 to 600000, got "999"'],
      [['router', '--coordinator', 'http://127.0.0.1:1'], { KEYSLICE_FAILOVER_RETRY_MS: '10001' }, 'keyslice: --failover-retry-ms must be a whole number from 1000 to 10000, got "10001"'],
    ] as const) {
      const extra = args[0] === 'coordinator' ? ['--data', data, '--port', '0'] : ['--port', '0'];
      const r = await keyslice([...args, ...extra], 20_000, cleanEnv(env));
      expect([r.code, r.stderr.trim()], args.join(' ')).toEqual([2, said]);
    }
    expect(existsSync(data), 'a coordinator refused made its data folder').toBe(false);
  });
  it("the commands that talk to a cluster take a whole-number option from its least to its most, and refuse one past either end, a fraction, an empty or a non-numeric value naming the command, exit 2 (shared/cli-args.ts wholeNumber; --timeout anyNumber)", async () => {
    // Nothing listens on port 1 and no file x.jsonl is there: a command line taken ends at the file or the connection (exit 1).
    const url = ['--url', 'http://127.0.0.1:1'];
    const missing = join(dataDir, 'x.jsonl');
    for (const [args, code, said] of [
      [['import', 't', missing, ...url, '--parallel', '1', '--batch', String(BATCH_WRITE_ITEMS_MAX), '--seed', String(2 ** 31)], 1, `keyslice import: cannot read ${missing}: no such file`],
      [['import', 't', missing, ...url, '--parallel', '0'], 2, `keyslice import: --parallel must be a whole number from 1 to ${IMPORT_PARALLEL_MAX}, got "0" (try keyslice import --help)`],
      [['import', 't', missing, ...url, '--batch', String(BATCH_WRITE_ITEMS_MAX + 1)], 2, `keyslice import: --batch must be a whole number from 1 to ${BATCH_WRITE_ITEMS_MAX}, got "${BATCH_WRITE_ITEMS_MAX + 1}" (try keyslice import --help)`],
      [['import', 't', missing, ...url, '--seed=-1'], 2, `keyslice import: --seed must be a whole number from 0 to ${2 ** 31}, got "-1" (try keyslice import --help)`],
      [['advise', missing, '--sharding', 'id:string', '--nodes', '1024', '--slices', '1'], 1, `keyslice advise: cannot read ${missing}: no such file`],
      [['advise', missing, '--sharding', 'id:string', '--nodes', '1.5'], 2, 'keyslice advise: --nodes must be a whole number from 1 to 1024, got "1.5" (try keyslice advise --help)'],
      [['advise', missing, '--sharding', 'id:string', '--sorting', 's:number', '--even='], 2, 'keyslice advise: --even must be a whole number from 1 to 1024, got "" (try keyslice advise --help)'],
      [['export', 't', ...url, '--parallel', 'abc'], 2, `keyslice export: --parallel must be a whole number from 1 to ${SCAN_SEGMENTS_MAX}, got "abc" (try keyslice export --help)`],
      // --timeout (seconds, fractions too) read by the same reader, bounded: "Infinity" made the waits endless.
      [['status', ...url, '--timeout', String(CLI_WAIT_S_MAX)], 1, 'keyslice: cannot reach the coordinator at http://127.0.0.1:1: fetch failed'],
      [['status', ...url, '--watch', '--timeout', 'Infinity'], 2, `keyslice: --timeout must be a number from 1 to ${CLI_WAIT_S_MAX}, got "Infinity" (try keyslice --help)`],
      [['drain', 'ws://127.0.0.1:2', ...url, '--timeout', '0'], 2, `keyslice: --timeout must be a number from 1 to ${CLI_WAIT_S_MAX}, got "0" (try keyslice --help)`],
    ] as const) {
      const r = await keyslice([...args], 20_000);
      expect([r.code, r.stderr.trim()], args.join(' ')).toEqual([code, said]);
    }
  });
  it('npm start\'s script answers --help and refuses an argument, starting nothing', async () => {
    const script = join(root, 'dist', 'coordinator', 'cli', 'local-cluster.js');
    const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-start-help-'));
    const env = cleanEnv({ KEYSLICE_DATA: dataDir, KEYSLICE_PORT: '0' });
    const runScript = (args: string[]) =>
      new Promise<{ code: number | null; out: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
        let out = '';
        child.stdout!.on('data', (d: Buffer) => (out += d));
        child.stderr!.on('data', (d: Buffer) => (out += d));
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`local-cluster.js ${args.join(' ')} did not exit within 20 s: ${out}`));
        }, 20_000);
        child.on('exit', (code) => {
          clearTimeout(timer);
          resolve({ code, out });
        });
      });
    try {
      const help = await runScript(['--help']);
      expect(help.code).toBe(0);
      expect(help.out).toMatch(/^usage: npm start/m);
      const wrong = await runScript(['--nodes', '3']);
      expect(wrong.code).toBe(2);
      expect(wrong.out).toMatch(/keyslice local --help/);
      expect(existsSync(join(dataDir, 'coordinator'))).toBe(false);
      // Its port read as every process reads its settings, refused before a node starts (Number() made "abc" NaN,
      // started three nodes, then the coordinator refused "--port NaN"; an empty one was 0: any free ports).
      env.KEYSLICE_PORT = 'abc';
      const badPort = await runScript([]);
      expect([badPort.code, badPort.out.trim()]).toEqual([2, `keyslice: KEYSLICE_PORT must be a whole number from 0 to ${65535 - LOCAL_NODES}, got "abc"`]);
      expect(readdirSync(dataDir)).toEqual([]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('a busy port', () => {
  it.each([
    ['coordinator', 'KEYSLICE_COORDINATOR_PORT'],
    ['node', 'KEYSLICE_NODE_PORT'],
  ])('keyslice %s says so in one sentence and exits 1, no stack trace', async (command, portEnv) => {
    const held = await holdPort();
    try {
      const r = await keyslice([command, '--port', String(held.port), '--data', join(dataDir, `busy-${command}`)]);
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^keyslice (coordinator|slice node): port ${held.port} on 127\\.0\\.0\\.1 is in use by another process; .*--port or ${portEnv}$`));
    } finally {
      held.server.close();
    }
  });
});

describe('environment variables', () => {
  it('the coordinator and the node each read their own port and data folder from one shared environment', async () => {
    // One shell, both processes: what a user who exports the variables gets.
    const [c, n] = await Promise.all([holdPort(), holdPort()]);
    c.server.close();
    n.server.close();
    const env = cleanEnv({
      KEYSLICE_COORDINATOR_PORT: String(c.port),
      KEYSLICE_COORDINATOR_DATA: join(dataDir, 'env-coordinator'),
      KEYSLICE_NODE_PORT: String(n.port),
      KEYSLICE_NODE_DATA: join(dataDir, 'env-node'),
      KEYSLICE_COORDINATOR: `http://127.0.0.1:${c.port}`,
    });
    const coordinator = await startProcess('coordinator', 'coordinator/cli/cli.js', ['coordinator', '--slices', '16'], /coordinator ready (http:\/\/\S+)/, undefined, env);
    children.push(coordinator.proc.child);
    const node = await startProcess('node', 'coordinator/cli/cli.js', ['node', '--workers', '1'], /slice node ready (ws:\/\/\S+)/, undefined, env);
    children.push(node.proc.child);
    expect(coordinator.proc.url).toBe(`http://127.0.0.1:${c.port}`);
    expect(node.proc.url).toBe(`ws://127.0.0.1:${n.port}`);
    // Each wrote into its own folder: the node its workers' logs, the coordinator its state.
    await waitFor(async () => {
      const res = await fetch(`${coordinator.proc.url}/cluster/status`, { signal: AbortSignal.timeout(5000) });
      return ((await res.json()) as { nodes: { up: boolean }[] }).nodes.some((x) => x.up);
    }, 'the node to register');
    expect(existsSync(join(dataDir, 'env-node', 'worker-0'))).toBe(true);
    expect(existsSync(join(dataDir, 'env-coordinator', 'worker-0'))).toBe(false);
    expect(existsSync(join(dataDir, 'env-coordinator'))).toBe(true);
    await Promise.all([stopProcess(node.proc.child), stopProcess(coordinator.proc.child)]);
  });
});

describe('keyslice local', () => {
  /** `keyslice local` on 16 slices in a process group of its own (killed whole at the cleanup), with what it prints
   * and its exit code within `ms` ('timeout' past it). */
  function startLocal(folder: string): { child: ChildProcess; out: () => string; exit: (ms: number) => Promise<number | null | 'timeout'> } {
    const child = spawn(process.execPath, [cli, 'local'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: cleanEnv({ KEYSLICE_PORT: '0', KEYSLICE_DATA: join(dataDir, folder), KEYSLICE_SLICES: '16' }),
    });
    children.push(child);
    groups.push(child.pid!);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const exit = (ms: number) => Promise.race([exited, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms))]);
    return { child, out: () => out, exit };
  }

  it('stopped (SIGTERM) while it starts, stops every process it started before it exits', async () => {
    const run = startLocal('local-stopped');
    // A slice node is up, the coordinator not yet: the start is under way.
    await waitFor(async () => /\[slice-node-\d\] .* ready /.test(run.out()), 'a slice node of keyslice local to be ready', 30_000);
    expect(run.out()).not.toContain('keyslice is running');
    process.kill(run.child.pid!, 'SIGTERM');
    expect(await run.exit(40_000), run.out()).toBe(0);
    expect(run.out()).toContain('keyslice: stopping once the processes started so far are up');
    // The coordinator's routers (node:cluster workers) go when their link to it closes, a moment after it.
    const left = () => liveProcesses().filter((p) => p.pgid === run.child.pid);
    await waitFor(async () => left().length === 0, 'every process keyslice local started to be gone', 10_000).catch(() => {
      expect(left().map((p) => p.cmdline), 'processes of keyslice local left').toEqual([]);
    });
  }, 60_000);

  it('when a slice node dies, names it, says why the rest stops, stops every process and exits 1', async () => {
    // 16 slices (the coordinator's KEYSLICE_SLICES, which keyslice local passes on) rather than 1,024: the story is
    // which node went and what the rest does, the same at R=3 for any slice count; its start and elections cost less.
    const run = startLocal('local');
    await waitFor(async () => run.out().includes('keyslice is running'), 'keyslice local to start', 30_000);
    const pidOf = (name: string) => Number(new RegExp(`\\[${name}\\] .* ready .*pid=(\\d+)`).exec(run.out())?.[1]);
    const pids = { coordinator: pidOf('coordinator'), node1: pidOf('slice-node-1'), node2: pidOf('slice-node-2'), node3: pidOf('slice-node-3') };
    for (const pid of Object.values(pids)) expect(pid).toBeGreaterThan(0);
    // One node lost: every slice has replicas on the other two (R=3), so the cluster goes on and says so.
    process.kill(pids.node1, 'SIGKILL');
    await waitFor(async () => run.out().includes(`keyslice: slice-node-1 (pid ${pids.node1}) was killed by SIGKILL; every slice has replicas on the other nodes`), 'the first node\'s exit to be reported', 20_000);
    expect(alive(pids.coordinator)).toBe(true);
    // A second one: slices lose their majority, so the rest stops.
    process.kill(pids.node2, 'SIGKILL');
    expect(await run.exit(20_000)).toBe(1);
    expect(run.out()).toContain(`keyslice: slice-node-2 (pid ${pids.node2}) was killed by SIGKILL; a second node is down`);
    expect(run.out()).toContain('Stopping the other processes');
    expect(alive(pids.coordinator)).toBe(false);
    expect(alive(pids.node3)).toBe(false);
  }, 60_000);
});

// Nothing a bench starts outlives it: every process it started (its children, found by PID in Linux's /proc, with
// their own children: a coordinator's routers) is stopped, and every temp data folder it made is removed, on every
// way out: the end of the run, an error (a cluster that fails while it starts or loads its data), SIGINT or SIGTERM.
// The children are found in /proc rather than kept as handles because a cluster that fails part way through
// startLocalCluster (of this build or of the base build a bench compares with) returns no handle to its processes.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { STOP_TIMEOUT_MS } from '../coordinator/cli/local-cluster.js';
import { childPids } from './proc-cpu.js';

const dirs = new Set<string>();
let stopping: Promise<void> | null = null;

/** A fresh folder under the OS temp folder, removed by stopAll (and at exit) whatever happens. */
export function benchTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  return dir;
}

/** Removes a folder of benchTempDir now (a run that is over). */
export function removeBenchDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

/** This process's descendants, children before their own. */
function descendants(): number[] {
  const out: number[] = [];
  const queue = [process.pid];
  // Bounded: a pid is visited once, and the tree of a bench is a few dozen processes.
  for (let i = 0; i < queue.length && i < 10_000; i++) {
    for (const pid of childPids(queue[i])) {
      if (!out.includes(pid)) {
        out.push(pid);
        queue.push(pid);
      }
    }
  }
  return out;
}

/** Whether `pid` still runs (a zombie, waiting to be reaped, does not). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/** SIGTERM to every descendant, by PID; SIGKILL to those still there after STOP_TIMEOUT_MS; then the temp
 * folders are removed. Once: a second call waits for the first. */
export function stopAll(): Promise<void> {
  stopping ??= (async () => {
    const pids = descendants();
    // SIGCONT first: a frozen process (a failover run's SIGSTOP) would not see the SIGTERM.
    for (const pid of pids) signal(pid, 'SIGCONT');
    for (const pid of pids) signal(pid, 'SIGTERM');
    const deadline = performance.now() + STOP_TIMEOUT_MS;
    while (pids.some(alive) && performance.now() < deadline) await sleep(50);
    // Anything left, and anything started meanwhile.
    for (const pid of new Set([...pids, ...descendants()])) if (alive(pid)) signal(pid, 'SIGKILL');
    for (const dir of dirs) removeBenchDir(dir);
  })();
  return stopping;
}

/** At this process's exit (a process.exit that skipped stopAll, a second Ctrl-C): SIGKILL to every descendant still
 * there, and the temp folders removed. For a bench that handles its signals itself. */
export function stopAllAtExit(): void {
  process.on('exit', () => {
    for (const pid of descendants()) signal(pid, 'SIGKILL');
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
}

/** Installs the ways out: SIGINT and SIGTERM stop everything, then exit with 130 (a second one: at once, with
 * stopAllAtExit's SIGKILLs). */
export function stopAllOnExit(log: (line: string) => void): void {
  let signals = 0;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      if (++signals > 1) process.exit(130);
      log(`${sig}: stopping every process this bench started (again: exit at once)`);
      stopAll().then(() => process.exit(130));
    });
  }
  stopAllAtExit();
}

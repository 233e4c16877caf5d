// Test fixture: freezes a process (SIGSTOP) and resolves once it really is frozen.
import { readdirSync, readFileSync } from 'node:fs';

/** How long freezeProcess waits for every thread to stop unless told: measured on an idle machine, all stopped a
 * median 3.2 ms after kill() (p90 39 ms, max 136 ms); far longer under load. */
export const FREEZE_WAIT_MS = 15_000;

/** Threads of `pid` not (yet) stopped. Linux: a thread's state is the field after its name in
 * /proc/<pid>/task/<tid>/stat ('T': stopped; the name, in parentheses, may itself hold ')' or spaces). */
function runningThreads(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).filter((tid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return stat[stat.lastIndexOf(')') + 2] !== 'T';
    } catch {
      return false; // the thread ended meanwhile
    }
  }).length;
}

/** Freezes process `pid` (SIGSTOP) and resolves once every thread of it has stopped. kill() returns before that:
 * the signal is taken by one thread (the main thread), which must be scheduled to start the stop of the others, and
 * on a loaded machine a node's worker threads ran on for milliseconds meanwhile, long enough to take a leader's
 * Append on their own links (node protocol 25: the main thread is on no write's path), write it and answer AppendOk,
 * or to answer a client. A test that asserts what a frozen process did or did not do must wait for the full stop.
 * Bounded in count and time: throws if a thread still runs after `maxMs`. */
export async function freezeProcess(pid: number, maxMs = FREEZE_WAIT_MS): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + maxMs;
  for (let n = 0; n < 3000 && Date.now() < deadline; n++) {
    if (runningThreads(pid) === 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  if (runningThreads(pid) === 0) return;
  throw new Error(`process ${pid} has threads that did not stop within ${maxMs} ms of SIGSTOP`);
}

/** Whether every thread of `pid` is stopped now (false once it ended). */
export function isFrozen(pid: number): boolean {
  try {
    return runningThreads(pid) === 0;
  } catch {
    return false; // no /proc/<pid>/task: it ended
  }
}

/** Thaws each process of `frozen` (SIGCONT), taking a pid off the list only once its signal was sent: one that fails
 * (ESRCH: it ended) stays listed, and the others are thawed all the same (a throw from the first would leave the rest
 * stopped, and a stopped process takes no SIGTERM). The failures, one per pid left listed. */
export function thawProcesses(frozen: number[]): Error[] {
  const failed: Error[] = [];
  for (const pid of [...frozen]) {
    try {
      process.kill(pid, 'SIGCONT');
      frozen.splice(frozen.indexOf(pid), 1);
    } catch (err) {
      failed.push(err as Error);
    }
  }
  return failed;
}

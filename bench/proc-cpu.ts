// CPU time of server processes, from Linux's /proc, for the benchmarks' "how
// busy was each server" columns. NaN where /proc cannot tell (another OS, a
// process gone).
import { readdirSync, readFileSync } from 'node:fs';
import { run } from './peers.js';

const CLOCK_TICKS_PER_S = Number(run('getconf', ['CLK_TCK']).output.trim()) || 100;

/** User + system CPU seconds of these processes so far, all their threads. */
export function cpuSecondsOf(pids: number[]): number {
  if (pids.length === 0) return NaN;
  let ticks = 0;
  for (const pid of pids) {
    try {
      // Fields after the command name (which is in parentheses and may hold spaces): utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      return NaN;
    }
  }
  return ticks / CLOCK_TICKS_PER_S;
}

/** The child processes of `pid` (the routers a coordinator started), from /proc/<pid>/task/<tid>/children. */
export function childPids(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter((s) => s.trim() !== '').map(Number);
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

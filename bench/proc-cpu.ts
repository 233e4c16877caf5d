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

/** `syscw` (write syscalls so far) of a /proc io file; NaN where /proc cannot tell. */
function syscwAt(path: string): number {
  try {
    return Number(/^syscw: (\d+)$/m.exec(readFileSync(path, 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

/** Write syscalls (write, writev, pwrite...) these processes made so far, all their threads (`syscw` of /proc/PID/io):
 * a router's are its socket writes, one per WebSocket frame (ws corks a frame's head and body into one writev); a
 * slice node's add its log's writes. NaN where /proc cannot tell. */
export function writeSyscallsOf(pids: number[]): number {
  return pids.reduce((n, pid) => n + syscwAt(`/proc/${pid}/io`), 0);
}

/** Write syscalls so far of one thread of `pid` (/proc/PID/task/TID/io: a slice worker's socket and log writes). */
export function threadWriteSyscallsOf(pid: number, tid: number): number {
  return syscwAt(`/proc/${pid}/task/${tid}/io`);
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

/** CPU seconds so far of one process's threads, by role: its main thread (tid = pid), its `workers` worker threads
 * and the rest (V8's GC and compiler helpers, libuv's pool). Node names every thread "node", so the worker threads
 * are told by their start: a slice node starts its worker threads after V8's and libuv's (on Node 20 a slice node's
 * 13 threads were main, 6 of V8's and Node's, 4 of libuv's pool, then the 2 workers, started last). NaN where /proc cannot tell. */
export function threadCpuOf(pid: number, workers: number): { main: number; workers: number[]; workerTids: number[]; other: number } {
  const ticks = (tid: number): [start: number, ticks: number] => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return [Number(f[19]), Number(f[11]) + Number(f[12])];
  };
  try {
    const threads = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .map((tid) => ({ tid, ...(([start, t]) => ({ start, t }))(ticks(tid)) }))
      .sort((a, b) => a.start - b.start || a.tid - b.tid);
    const main = threads.find((t) => t.tid === pid)!.t / CLOCK_TICKS_PER_S;
    const rest = threads.filter((t) => t.tid !== pid);
    // (workers 0: a process of one main thread and helpers, a router; slice(-0) would take them all.)
    const last = workers === 0 ? [] : rest.slice(-workers);
    const w = last.map((t) => t.t / CLOCK_TICKS_PER_S);
    const other = rest.slice(0, rest.length - workers).reduce((a, t) => a + t.t, 0) / CLOCK_TICKS_PER_S;
    return { main, workers: w, workerTids: last.map((t) => t.tid), other };
  } catch {
    return { main: NaN, workers: Array.from({ length: workers }, () => NaN), workerTids: [], other: NaN };
  }
}

/** The machine's CPU counters so far (all cores, from /proc/stat's first line): busy and total clock ticks; null
 * where /proc cannot tell. Two readings give the share of the machine that was busy between them. */
export function machineTicks(): { busy: number; total: number } | null {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
    const n = fields.map(Number);
    // user nice system idle iowait irq softirq steal (guest time is counted in user already)
    const total = n.slice(0, 8).reduce((a, x) => a + x, 0);
    return { busy: total - n[3] - n[4], total };
  } catch {
    return null;
  }
}

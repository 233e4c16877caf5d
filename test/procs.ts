// The live processes of this machine, from Linux's /proc (zombies left out: exited, not reaped yet, they hold
// nothing): what tests use to check that a process tree they started is gone.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

export type LiveProcess = { pid: number; pgid: number; cmdline: string };

/** Every live process, with its process group and command line. */
export function liveProcesses(): LiveProcess[] {
  const out: LiveProcess[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // After the command name (in parentheses, which may hold spaces): state, ppid, pgrp.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      out.push({ pid: Number(name), pgid: Number(fields[2]), cmdline: readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** A port free now on 127.0.0.1 (the kernel's pick, closed again), for a process a test starts on it later. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

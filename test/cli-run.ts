// Runs the built `keyslice` command (dist/coordinator/cli/cli.js) as a process, to
// its end or killed after a timeout, with only the environment the test gives.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'coordinator', 'cli', 'cli.js');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Processes still running, for an afterAll to stop if a test failed midway. */
export const running = new Set<ChildProcess>();

/** The environment of a process that should see only what the test gives it. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('KEYSLICE_')) env[k] = v;
  return { ...env, ...extra };
}

export function keyslice(args: string[], timeoutMs = 60_000, env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Stops what is still running (by PID, each one). */
export function stopRunning(): void {
  for (const child of running) child.kill('SIGKILL');
}

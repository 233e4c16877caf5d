// Two slice nodes on one data folder, through real processes: the second is
// refused with a sentence naming the first's pid and exits; once the first has
// stopped (SIGTERM), or was SIGKILLed and left its lock file behind, a new node
// on the folder starts. A frozen (SIGSTOPped) holder still holds it, and a lock
// file naming a pid that now belongs to another process (pid reuse) does not.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';

const root = mkdtempSync(join(tmpdir(), 'keyslice-lock-'));
const started: ManagedProcess[] = [];
const nodeScript = join(process.cwd(), 'dist', 'slice-worker', 'main.js');

afterAll(async () => {
  for (const p of started) {
    if (p.child.pid !== undefined && p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGCONT');
    await stopProcess(p.child);
  }
  rmSync(root, { recursive: true, force: true });
});

async function start(folder: string): Promise<ManagedProcess> {
  const p = await startSliceNode({ name: 'slice-node', dataDir: folder, port: 0, workers: 1, durability: 'os' });
  started.push(p);
  return p;
}

/** A node start that is expected to exit: its exit code and what it wrote on stderr (bounded: 20 s). */
function startExpectingExit(folder: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [nodeScript, '--port', '0', '--workers', '1', '--data', folder], { timeout: 20_000 }, (err, _stdout, stderr) =>
      done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stderr }),
    );
  });
}

describe('one slice node per data folder', () => {
  it('refuses a second node on a folder in use, and lets a new one start once the first is gone', async () => {
    const folder = join(root, 'a');
    const first = await start(folder);
    const refused = await startExpectingExit(folder);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`data folder ${folder} is in use by slice node pid ${first.child.pid}`);

    await stopProcess(first.child); // SIGTERM: it releases the lock on its way out
    const lockFiles = readdirSync(folder).filter((f) => f.startsWith('slice-node.lock.'));
    expect(lockFiles).toHaveLength(1);
    expect(JSON.parse(readFileSync(join(folder, lockFiles[0]), 'utf8')).pid).toBe(0);
    const second = await start(folder);

    await stopProcess(second.child, 'SIGKILL'); // leaves its lock file, naming a pid that is gone
    expect(JSON.parse(readFileSync(join(folder, readdirSync(folder).filter((f) => f.startsWith('slice-node.lock.')).sort().at(-1)!), 'utf8')).pid).toBe(second.child.pid);
    const third = await start(folder);

    // A frozen node still holds its folder.
    third.child.kill('SIGSTOP');
    try {
      const whileFrozen = await startExpectingExit(folder);
      expect(whileFrozen.code).toBe(2);
      expect(whileFrozen.stderr).toContain(`is in use by slice node pid ${third.child.pid}`);
    } finally {
      third.child.kill('SIGCONT');
    }
    await stopProcess(third.child);
    // Only the newest lock file is kept: the numbers grow, the older files go.
    expect(readdirSync(folder).filter((f) => f.startsWith('slice-node.lock.'))).toEqual(['slice-node.lock.3']);
  }, 60_000);

  it('does not take a live process that reused a dead holder\'s pid for the holder', async () => {
    const folder = join(root, 'b');
    const first = await start(folder);
    await stopProcess(first.child, 'SIGKILL');
    // The holder's pid is now this test process's (alive), with another start identity: a reused pid.
    writeFileSync(join(folder, 'slice-node.lock.1'), JSON.stringify({ pid: process.pid, start: 'another-boot:1' }));
    const second = await start(folder);
    const refused = await startExpectingExit(folder);
    expect(refused.stderr).toContain(`is in use by slice node pid ${second.child.pid}`);
    await stopProcess(second.child);
  }, 60_000);
});

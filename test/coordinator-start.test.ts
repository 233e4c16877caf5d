// A coordinator with routers forks them as soon as it listens, while its links to the slice nodes come up (and its
// ready line waits for both): the routers serve the client port before that line. What a client gets there from a
// node not reached yet is Unavailable (retryable, not applied) after the router's bounded first wait, never a hang;
// and a coordinator that dies before its ready line (say, killed by a start timeout) takes its routers with it.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnUntilReady, stopProcess } from '../coordinator/cli/local-cluster.js';
import { ROUTER_LINK_FIRST_WAIT_MS } from '../shared/limits.js';
import { HTTP_API_PREFIX } from '../shared/protocol.js';
import { freePort, liveProcesses } from './procs.js';

const COORDINATOR = join(import.meta.dirname, '..', 'dist', 'coordinator', 'main.js');
/** Beyond the router's own bound: a request still open then hangs. */
const HANG_MS = ROUTER_LINK_FIRST_WAIT_MS + 15_000;

const started: { child: ChildProcess; dir: string; routerPid: number }[] = [];
afterEach(async () => {
  for (const s of started.splice(0)) {
    await stopProcess(s.child, 'SIGKILL');
    if (liveProcesses().some((p) => p.pid === s.routerPid)) process.kill(s.routerPid, 'SIGKILL');
    rmSync(s.dir, { recursive: true, force: true });
  }
});

/** A coordinator with one router and one slice node that nothing listens for, resolved once its router serves
 * (the ready line is 10 s away: CLUSTER_READY_WAIT_MS for the node). */
async function startWithUnreachableNode() {
  const dir = mkdtempSync(join(tmpdir(), 'keyslice-coordinator-start-'));
  const lines: string[] = [];
  const args = [COORDINATOR, '--port', '0', '--routers', '1', '--data', dir, '--slices', '4', '--replication-factor', '1', '--nodes', `ws://127.0.0.1:${await freePort()}`];
  const { child, match } = await spawnUntilReady('coordinator', process.execPath, args, /router (\d+) serves port (\d+)/, { log: (l) => lines.push(l) }).catch((e: unknown) => {
    rmSync(dir, { recursive: true, force: true }); // a start that failed leaves no folder behind
    throw e;
  });
  const s = { child, dir, routerPid: Number(match[1]) };
  started.push(s);
  return { ...s, port: Number(match[2]), lines };
}

describe('a coordinator that forks its routers before its nodes are reached', () => {
  it('serves the client port before its ready line; a request for the node not reached answers Unavailable, retryable and not applied, not a hang', async () => {
    const c = await startWithUnreachableNode();
    expect(c.lines.filter((l) => l.includes('coordinator ready'))).toEqual([]);
    const post = async (op: string, body: unknown) => {
      const res = await fetch(`http://127.0.0.1:${c.port}${HTTP_API_PREFIX}${op}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(HANG_MS) });
      return { status: res.status, body: (await res.json()) as { error?: { code: string; retryable: boolean; notApplied?: boolean } } };
    };
    // A table change goes to the coordinator, which serves its own port from its start.
    expect((await post('CreateTable', { table: 'early', shardingKey: { name: 'k', type: 'string' } })).status).toBe(200);
    // Both at once: each waits out the router's first wait (ROUTER_LINK_FIRST_WAIT_MS) on its own, side by side.
    const ops = [['PutItem', { table: 'early', item: { k: 'a' } }], ['GetItem', { table: 'early', key: 'a' }]] as const;
    const answers = await Promise.all(ops.map(async ([op, body]) => ({ op, ...(await post(op, body)) })));
    for (const r of answers) {
      expect({ op: r.op, status: r.status, code: r.body.error?.code, retryable: r.body.error?.retryable, notApplied: r.body.error?.notApplied }).toEqual({ op: r.op, status: 503, code: 'Unavailable', retryable: true, notApplied: true });
    }
  }, HANG_MS * 2 + 30_000);

  it('killed before its ready line, takes its router with it', async () => {
    const c = await startWithUnreachableNode();
    expect(c.lines.filter((l) => l.includes('coordinator ready'))).toEqual([]);
    c.child.kill('SIGKILL');
    // The router exits on losing its IPC channel to the coordinator (node:cluster's worker does so by itself).
    const until = Date.now() + 15_000;
    while (liveProcesses().some((p) => p.pid === c.routerPid) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(liveProcesses().some((p) => p.pid === c.routerPid), `router ${c.routerPid} outlived its coordinator`).toBe(false);
  }, 45_000);
});

// startLocalCluster when one slice node fails to start (its port is taken): it fails, and leaves none of the
// cluster's processes running. The other nodes are still starting when the first fails; they are waited for and
// stopped, not left to run on with no handle to stop them (the benches' clusters, bench/stop-all.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import { liveProcesses } from './procs.js';

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-local-cluster-'));
const blocker = net.createServer();

afterAll(async () => {
  await new Promise((done) => blocker.close(done));
  rmSync(dataDir, { recursive: true, force: true });
});

/** The PIDs of live processes whose command line names `dir` (a cluster's data folder). */
const processesOf = (dir: string): number[] => liveProcesses().flatMap((p) => (p.cmdline.includes(dir) ? [p.pid] : []));

describe('a local cluster whose first slice node cannot start', () => {
  it('fails, and stops the nodes that were still starting', async () => {
    await new Promise<void>((done) => blocker.listen(0, '127.0.0.1', done));
    const { port } = blocker.address() as net.AddressInfo;
    // slice-node-1 on the taken port fails at once; slice-node-2 and -3 (the next ports) are still starting then.
    await expect(startLocalCluster({ dataDir, nodes: 3, workers: 1, nodePortBase: port })).rejects.toThrow(/slice-node-1/);
    expect(processesOf(dataDir)).toEqual([]);
    // Long enough for a node that was starting to be up (a slice node starts in well under a second when idle).
    await sleep(3000);
    expect(processesOf(dataDir)).toEqual([]);
  });
});

// Test fixture: two real slice nodes, a ClusterMap of them (4 slices, one replica each) and the real NodeLinks to them,
// with no coordinator: for a slice move's tests that choose when each step goes (slice-move-reassign,
// wall-clock-step). The nodes are stopped by PID (stopProcess) and their folders removed after the file's tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { ClusterMap } from '../coordinator/metadata/cluster-map.js';
import { NodeLink } from '../coordinator/metadata/node-link.js';
import { waitFor } from './elastic-fixture.js';

/** Registers the afterAll that stops them; `start()` starts both nodes, opens the map and waits (at most 10 s) for
 * both links to be ready. */
export function useSliceNodePair(prefix: string): { start(): Promise<{ map: ClusterMap; links: NodeLink[] }> } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  const nodes: ManagedProcess[] = [];
  const links: NodeLink[] = [];
  afterAll(async () => {
    for (const l of links) l.close();
    for (const n of nodes) await stopProcess(n.child);
    rmSync(root, { recursive: true, force: true });
  });
  return {
    async start() {
      for (const i of [0, 1]) nodes.push(await startSliceNode({ name: `slice-node-${i}`, dataDir: join(root, `node-${i}`), port: 0, workers: 1, durability: 'os' }));
      const map = ClusterMap.open(join(root, 'coordinator'), nodes.map((n) => n.url), 4, 1);
      if (typeof map === 'string') throw new Error(map);
      for (const [i, n] of nodes.entries()) {
        links.push(new NodeLink(n.url, () => ({ epoch: map.epoch, sliceCount: map.sliceCount, slices: map.slicesOf(i), clusterId: map.clusterId, replication: null }), () => map.epoch, () => {}));
      }
      await waitFor(() => links.every((l) => l.state === 'ready'), 'both links ready', 10_000, undefined, 10);
      return { map, links };
    },
  };
}

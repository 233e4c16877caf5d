// A full-table scan while slices change owners (docs/replication.md, "Routers retry"): through real processes, 3 slice
// nodes at R=3; scans run without a pause while a node is SIGKILLed and restarted, so that its slices fail over
// to the others and are then led by it again (each an owner change at a new epoch, the second one away from a
// live node). Every scan answers every item, or fails with a typed error: never a part of the table. A scan page
// asked of the owners at one epoch whose frames left at the next went to a node that no longer owned a slice,
// and its worker left that slice out without saying so (12 of 1,577 scans answered 271 of 300 items); now a worker
// is asked for the slices it should own and refuses unless it owns every one (partition.ts scan), and the router
// asks the page again.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { testLog } from './cluster-fixture.js';
import { elasticClusters, led, SECRET, seen, threeReplicasHolding, waitFor } from './elastic-fixture.js';

const cluster = elasticClusters();
const ITEMS = 300;
/** Scans run side by side: the ops of one queue behind another's batches in flight (send-queue.ts), so the turn
 * in which a page's owners were read and the one in which its frames leave are further apart. */
const SCANNERS = 6;
const RESTARTS = 3;

describe('a scan while slices change owners (R=3)', () => {
  it('answers every item or a typed error, never a part of the table', async () => {
    const e = await threeReplicasHolding(cluster, ITEMS);

    let stop = false;
    const partial: number[] = [];
    const refused: string[] = [];
    let whole = 0;
    let killed = false; // a scan that starts after the first SIGKILL can cross an owner change
    let wholeAfterKill = 0;
    const until = Date.now() + 150_000;
    const scanner = async () => {
      // Bounded in count and time; stops when the restarts are done.
      for (let k = 0; k < 50_000 && !stop && Date.now() < until; k++) {
        const afterKill = killed;
        try {
          const n = (await e.client.getAllItems({ table: 'elastic' })).filter((x) => String(x.id).startsWith('bulk-')).length;
          if (n === ITEMS) [whole, wholeAfterKill] = [whole + 1, wholeAfterKill + (afterKill ? 1 : 0)];
          else partial.push(n);
        } catch (err) {
          if (!(err instanceof KeysliceError)) throw err;
          refused.push(err.code);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const scans = Array.from({ length: SCANNERS }, scanner);

    try {
      for (let round = 0; round < RESTARTS; round++) {
        const i = round % e.nodes.length;
        const old = e.nodes[i];
        killed = true;
        await stopProcess(old.child, 'SIGKILL');
        await waitFor(async () => led(await e.status()), `the slices ${old.name} led to fail over`, 30_000, seen(e));
        e.nodes[i] = await startSliceNode({ name: old.name, dataDir: join(e.dataDir, old.name), port: Number(new URL(old.url).port), workers: 2, coordinator: e.coordinator.url, clusterSecret: SECRET, ...(testLog ? { log: testLog } : {}) });
        await waitFor(
          async () => {
            const st = await e.status();
            return led(st) && st.replication.leaders.unsettled === 0 && (st.nodes.find((n) => n.node === old.url)?.slices ?? 0) > 0;
          },
          `${old.name} to lead slices again`,
          60_000,
          seen(e),
        );
      }
    } finally {
      stop = true;
      await Promise.all(scans);
    }
    expect(partial, `scans that answered a part of the ${ITEMS} items (${whole} whole, refused: ${refused.join(' ')})`).toEqual([]);
    // Else the scans could all have run before the owner changes, and the story checked nothing.
    expect(wholeAfterKill, 'whole scans started after the first SIGKILL').toBeGreaterThan(0);
  }, 240_000);
});

// Waiting for a local cluster's slices to be led, as the start and restart benches time it.
import { performance } from 'node:perf_hooks';
import type { LocalCluster } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { CLUSTER_API_PREFIX } from '../shared/protocol.js';

/** Resolves once c's status counts every replicated slice led (polled every 50 ms, each ask bounded to 5 s); throws
 * after waitS seconds, so that a bench round that never gets there ends. */
export async function untilAllLed(c: Pick<LocalCluster, 'url'>, waitS: number): Promise<void> {
  const t0 = performance.now();
  while (performance.now() - t0 < waitS * 1000) {
    try {
      const l = ((await (await fetch(`${c.url}${CLUSTER_API_PREFIX}status`, { signal: AbortSignal.timeout(5_000) })).json()) as ClusterStatus).replication.leaders;
      if (l.replicated > 0 && l.led === l.replicated) return;
    } catch {
      // not answering yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`not every slice led ${waitS} s after the wait began`);
}

/** Resolves once c's status lists `nodes` nodes up, counts every replicated slice led, no replica move under way or to
 * make, and every replica-set change settled: the cluster balanced (a node that joined full sets got its share by
 * replica moves). The node count first: a node's ready line comes before its join, which no move waits for yet. */
export async function untilBalanced(c: Pick<LocalCluster, 'url'>, nodes: number, waitS: number): Promise<void> {
  const t0 = performance.now();
  while (performance.now() - t0 < waitS * 1000) {
    try {
      const st = (await (await fetch(`${c.url}${CLUSTER_API_PREFIX}status`, { signal: AbortSignal.timeout(5_000) })).json()) as ClusterStatus;
      const l = st.replication.leaders;
      if (st.nodes.filter((n) => n.up).length >= nodes && l.replicated > 0 && l.led === l.replicated && st.moves.pending === 0 && l.unsettled === 0 && l.moving === 0) return;
    } catch {
      // not answering yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the cluster not balanced ${waitS} s after the wait began`);
}

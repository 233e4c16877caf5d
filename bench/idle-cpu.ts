// CPU of an idle local cluster: a coordinator (and its routers) and --nodes slice
// nodes at the default replication factor (3 with 3 nodes), nothing sent to it.
// Once every replicated slice has an elected leader (GET /cluster/status), it
// measures each process's CPU (user + system, all threads, from /proc) over
// --seconds: what heartbeats, pings and timers cost a cluster that does nothing.
//
//   npm run build && node dist/bench/idle-cpu.js [--nodes 3] [--seconds 10] [--rounds 3] [--replication-factor auto]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, parseArgs } from '../shared/cli-args.js';
import type { ClusterStatus } from '../shared/api.js';
import { CLUSTER_API_PREFIX } from '../shared/protocol.js';
import { childPids, cpuSecondsOf } from './proc-cpu.js';

const args = parseArgs(
  process.argv.slice(2),
  {
    nodes: { default: '3', help: 'slice nodes' },
    seconds: { default: '10', help: 'seconds per measurement' },
    rounds: { default: '3', help: 'measurements, one after another' },
    'replication-factor': { default: 'auto', help: "the coordinator's (auto: 3 with 3 nodes; 1: no replication, the baseline)" },
    'settle-s': { default: '60', help: 'at most this long to wait for every slice to have a leader' },
  },
  'usage: node dist/bench/idle-cpu.js [options]',
);
const NODES = intArg('nodes', args.nodes, 1, 16);
const SECONDS = intArg('seconds', args.seconds, 1, 600);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const SETTLE_S = intArg('settle-s', args['settle-s'], 1, 600);
const FACTOR = args['replication-factor'] === 'auto' ? 'auto' : intArg('replication-factor', args['replication-factor'], 1, 16);

const root = mkdtempSync(join(tmpdir(), 'keyslice-bench-idle-'));
let cluster: LocalCluster | null = null;
try {
  cluster = await startLocalCluster({ dataDir: join(root, 'cluster'), nodes: NODES, durability: 'os', replicationFactor: FACTOR });
  const deadline = Date.now() + SETTLE_S * 1000;
  let note = '';
  for (;;) {
    const res = await fetch(`${cluster.url}${CLUSTER_API_PREFIX}status`, { signal: AbortSignal.timeout(5_000) });
    const st = (await res.json()) as ClusterStatus;
    note = st.replication.note;
    if (st.replication.leaders.led === st.replication.leaders.replicated) break;
    if (Date.now() > deadline) throw new Error(`not every slice has a leader after ${SETTLE_S} s: ${note}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  console.log(`${NODES} slice nodes, ${note === '' ? 'no replicated slices' : note}`);
  const coordinatorPids = [cluster.coordinator.child.pid!, ...childPids(cluster.coordinator.child.pid!)];
  const nodePids = cluster.nodes.map((n) => n.child.pid!);
  await new Promise((r) => setTimeout(r, 2_000)); // the elections' own traffic is over
  for (let round = 1; round <= ROUNDS; round++) {
    const c0 = cpuSecondsOf(coordinatorPids);
    const n0 = nodePids.map((p) => cpuSecondsOf([p]));
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const pct = (s: number) => `${((100 * s) / SECONDS).toFixed(1)}%`;
    const nodes = nodePids.map((p, i) => cpuSecondsOf([p]) - n0[i]);
    console.log(
      `round ${round}: slice nodes ${nodes.map(pct).join(', ')} of a core (sum ${pct(nodes.reduce((a, b) => a + b, 0))}); ` +
        `coordinator and routers ${pct(cpuSecondsOf(coordinatorPids) - c0)}; load average ${loadavg()[0].toFixed(1)}`,
    );
  }
} finally {
  await cluster?.stop();
  rmSync(root, { recursive: true, force: true });
}

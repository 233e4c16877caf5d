// How long a whole local cluster takes to have every replicated slice led again after all of its processes
// restarted (a machine rebooted, `keyslice local` started again): a coordinator and --nodes slice nodes at R=3,
// 1,024 slices, started, led, stopped, started again on the same folders and ports; the time is from the restarted
// coordinator's ready line to the status that counts every slice led. With --other DIR (another build's dist/), its
// runs alternate with this build's, for a side-by-side figure (docs/replication.md, "A coordinator that restarts").
//
//   npm run build && node dist/bench/cluster-restart.js [--rounds 3] [--other /path/to/old/dist]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { ClusterOptions, LocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { untilAllLed } from './cluster-led.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    nodes: { default: '3', help: 'slice nodes' },
    rounds: { default: '3', help: 'restarts per build' },
    other: { help: "another build's dist/ folder, run alternately with this one" },
    port: { default: '47300', help: 'first slice node port (the coordinator takes port + 10)' },
  },
  'usage: node dist/bench/cluster-restart.js [options]',
).values;
const NODES = intArg('nodes', args.nodes, 1, 9);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const PORT = intArg('port', args.port, 1024, 65000);
const LED_WAIT_S = 120;
const own = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const builds = args.other === undefined ? [own] : [resolve(args.other), own];

/** Seconds until the status counts every replicated slice led (at most LED_WAIT_S). */
async function secondsToLed(c: LocalCluster): Promise<number> {
  const t0 = performance.now();
  await untilAllLed(c, LED_WAIT_S);
  return (performance.now() - t0) / 1000;
}

async function restartOnce(dist: string): Promise<number> {
  const { startLocalCluster } = (await import(join(dist, 'coordinator', 'cli', 'local-cluster.js'))) as typeof import('../coordinator/cli/local-cluster.js');
  const root = mkdtempSync(join(tmpdir(), 'keyslice-bench-restart-'));
  const opts: ClusterOptions = { dataDir: join(root, 'cluster'), nodes: NODES, durability: 'os', nodePortBase: PORT, coordinatorPort: PORT + 10, clusterSecret: 'r'.repeat(43), routers: 0 };
  try {
    let c = await startLocalCluster(opts);
    try {
      await secondsToLed(c);
      await new Promise((r) => setTimeout(r, 2_000)); // leaders hold leases: their followers answered keep-alives
    } finally {
      await c.stop();
    }
    c = await startLocalCluster(opts);
    try {
      return await secondsToLed(c);
    } finally {
      await c.stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const times = new Map<string, number[]>(builds.map((b) => [b, []]));
for (let round = 1; round <= ROUNDS; round++) {
  for (const b of builds) {
    const s = await restartOnce(b);
    times.get(b)!.push(s);
    console.log(`round ${round}, ${b}: every slice led ${s.toFixed(2)} s after the restarted coordinator was ready; load average ${loadavg()[0].toFixed(1)}`);
  }
}
for (const [b, xs] of times) console.log(`${b}: median ${median(xs).toFixed(2)} s (${xs.map((x) => x.toFixed(2)).join(', ')})`);

// How long a new local cluster takes from its launch (startLocalCluster, as `npm start` and the process tests' fixture
// start one) to every replicated slice led: a coordinator and --nodes slice nodes at R=3, --slices slices, on empty
// folders. Besides the total it prints the phases the coordinator's log shows: nodes ready, the first elections
// started, and the last line of an elected leader ("elected their leaders", "leads at term") before every slice was led (the elections' share), and how many
// handovers were elected meanwhile, and when it was balanced (no replica move under way or to make, every change
// settled: with --join later and 4 nodes or more, the later nodes get their share by moves). With --other DIR (another build's dist/), its runs alternate with this build's,
// for a side-by-side figure (docs/replication.md, "Leases": a slice never led waits out no lease). With --join later the
// coordinator starts first, on no node, and the slice nodes start one by one after it, each once the one before is
// ready, and join it (as docker compose starts a cluster); the time is then from the coordinator's launch.
//
//   npm run build && node dist/bench/cluster-start.js [--rounds 3] [--join at-start|later] [--other /path/to/old/dist]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { ClusterOptions, LocalCluster, ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { untilAllLed, untilBalanced } from './cluster-led.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    nodes: { default: '3', help: 'slice nodes' },
    slices: { default: '1024', help: 'slices' },
    rounds: { default: '3', help: 'starts per build' },
    other: { help: "another build's dist/ folder, run alternately with this one" },
    port: { default: '47500', help: 'first slice node port (the coordinator takes port + 10); 0: free ports' },
    join: { default: 'at-start', help: "at-start: the nodes first, the coordinator started with them (startLocalCluster); later: the coordinator first, the nodes join it one by one" },
  },
  'usage: node dist/bench/cluster-start.js [options]',
).values;
const NODES = intArg('nodes', args.nodes, 1, 9);
const SLICES = intArg('slices', args.slices, 1, 65_536);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const PORT = args.port === '0' ? 0 : intArg('port', args.port, 1024, 65000);
const LED_WAIT_S = 120;
const LOG_LAG_MS = 1_000;
if (args.join !== 'at-start' && args.join !== 'later') fail(`--join must be at-start or later, got ${args.join}`);
const JOIN_LATER = args.join === 'later';
/** When the start call returned: the coordinator's ready line, or with --join later the last node's. */
const READY = JOIN_LATER ? 'last node ready' : 'coordinator ready';
const own = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const builds = args.other === undefined ? [own] : [resolve(args.other), own];

interface Run {
  ready: number;
  led: number;
  /** Every slice led, no replica move under way or to make, every change settled (untilBalanced). */
  balanced: number;
  nodesReady: number;
  electionsFrom: number;
  electedBy: number;
  handovers: number;
}

type Cli = typeof import('../coordinator/cli/local-cluster.js');

/** The cluster of --join later: its coordinator on no node, then each slice node, once the one before is ready,
 * registering with it. What untilAllLed reads (the url) and stop() are all that is used of it. */
async function startJoiningLater(cli: Cli, opts: ClusterOptions & { clusterSecret: string }): Promise<Pick<LocalCluster, 'url' | 'stop'>> {
  const procs: ManagedProcess[] = [];
  const stop = () => Promise.all(procs.map((p) => cli.stopProcess(p.child))).then(() => undefined);
  try {
    const coordinator = await cli.startCoordinator(join(opts.dataDir, 'coordinator'), opts.coordinatorPort ?? 0, [], opts.slices, opts.log, ['--replication-factor', String(opts.replicationFactor)], opts.clusterSecret);
    procs.push(coordinator);
    for (let i = 0; i < (opts.nodes ?? 1); i++) {
      const name = `slice-node-${i + 1}`;
      const port = opts.nodePortBase ? opts.nodePortBase + i : 0;
      procs.push(await cli.startSliceNode({ name, dataDir: join(opts.dataDir, name), port, ...cli.nodeOptionsOf(opts), coordinator: coordinator.url, clusterSecret: opts.clusterSecret }));
    }
    return { url: coordinator.url, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function startOnce(dist: string): Promise<Run> {
  const cli = (await import(join(dist, 'coordinator', 'cli', 'local-cluster.js'))) as Cli;
  const root = mkdtempSync(join(tmpdir(), 'keyslice-bench-start-'));
  const lines: [number, string][] = [];
  const t0 = performance.now();
  const log = (line: string) => lines.push([(performance.now() - t0) / 1000, line]);
  const opts: ClusterOptions = { dataDir: join(root, 'cluster'), nodes: NODES, slices: SLICES, replicationFactor: 3, nodePortBase: PORT, coordinatorPort: PORT === 0 ? 0 : PORT + 10, clusterSecret: 's'.repeat(43), log };
  try {
    const c = JOIN_LATER ? await startJoiningLater(cli, { ...opts, clusterSecret: opts.clusterSecret! }) : await cli.startLocalCluster(opts);
    try {
      const ready = (performance.now() - t0) / 1000;
      await untilAllLed(c, LED_WAIT_S);
      const led = (performance.now() - t0) / 1000;
      await untilBalanced(c, NODES, LED_WAIT_S);
      const balanced = (performance.now() - t0) / 1000;
      // The log comes through the processes' pipes, a little behind the status: lines up to a second after it count.
      await new Promise((r) => setTimeout(r, LOG_LAG_MS));
      const until = led + LOG_LAG_MS / 1000;
      const at = (re: RegExp) => lines.filter(([t, l]) => t <= until && re.test(l)).map(([t]) => t);
      const handovers = lines.filter(([t, l]) => t <= until && /elections started for \d+ slices \(a leadership handover/.test(l)).reduce((n, [, l]) => n + Number(/for (\d+) slices/.exec(l)![1]), 0);
      return { ready, led, balanced, nodesReady: Math.max(...at(/coordinator: slice node .* ready/)), electionsFrom: Math.min(...at(/elections started for/)), electedBy: Math.max(...at(/elected their leaders| leads at term /)), handovers };
    } finally {
      await c.stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const runs = new Map<string, Run[]>(builds.map((b) => [b, []]));
for (let round = 1; round <= ROUNDS; round++) {
  // The order swapped each round, so that neither build always runs on the machine the other just warmed.
  for (const b of round % 2 === 1 ? builds : [...builds].reverse()) {
    const r = await startOnce(b);
    runs.get(b)!.push(r);
    console.log(
      `round ${round}, ${b}: nodes ready ${r.nodesReady.toFixed(2)} s, elections from ${r.electionsFrom.toFixed(2)} s to ${r.electedBy.toFixed(2)} s, ` +
        `${READY} ${r.ready.toFixed(2)} s, every slice led ${r.led.toFixed(2)} s, balanced ${r.balanced.toFixed(2)} s; ${r.handovers} handovers; load average ${loadavg()[0].toFixed(1)}`,
    );
  }
}
for (const [b, rs] of runs) {
  const m = (f: (r: Run) => number) => median(rs.map(f)).toFixed(2);
  console.log(`${b}: medians: every slice led ${m((r) => r.led)} s, balanced ${m((r) => r.balanced)} s, elections ${m((r) => r.electedBy - r.electionsFrom)} s, nodes ready ${m((r) => r.nodesReady)} s, ${READY} ${m((r) => r.ready)} s`);
}

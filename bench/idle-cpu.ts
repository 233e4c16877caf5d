// CPU of an idle local cluster: a coordinator (and its routers) and --nodes slice
// nodes at the default replication factor (3 with 3 nodes), --slices slices,
// nothing sent to it. It starts the cluster, waits until every replicated slice has
// an elected leader (GET /cluster/status; the time that took is "led after"), then
// watches the whole cluster's CPU in --window-s windows for --watch-s (a cluster's
// CPU falls for a while after its elections: "settled after" is the end of the last
// window above twice the measured rounds' median, plus 1% of a core for the noise
// of a shared machine), then measures each process's CPU (user + system, all threads,
// from /proc) over --rounds rounds of --seconds: what heartbeats, pings and timers
// cost a cluster that does nothing. Nothing polls the cluster while it is watched
// or measured (a status request costs the coordinator a few % of a core itself).
//
// With --base DIR (a built checkout) and --sides this,base, the builds run one
// after the other, --runs times, alternating which goes first, so that a shared
// machine's load falls on both alike; medians per side at the end.
//
//   npm run build && node dist/bench/idle-cpu.js [--nodes 3] [--slices 1024] [--seconds 10] [--rounds 3] [--replication-factor auto]
//     [--watch-s 60 --window-s 5] [--base DIR --sides this,base --runs 3]
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, numberArg, readCommandLine } from '../shared/cli-args.js';
import type { ClusterStatus } from '../shared/api.js';
import { SLICE_COUNT_DEFAULT, SLICE_COUNT_MAX } from '../shared/limits.js';
import { CLUSTER_API_PREFIX } from '../shared/protocol.js';
import { childPids, cpuSecondsOf } from './proc-cpu.js';
import { benchTempDir, removeBenchDir, stopAllOnExit } from './stop-all.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    nodes: { default: '3', help: 'slice nodes' },
    slices: { default: String(SLICE_COUNT_DEFAULT), help: 'slices of the cluster' },
    seconds: { default: '10', help: 'seconds per measurement (from 0.1; under a second only for a smoke run: /proc counts CPU in 10 ms ticks)' },
    rounds: { default: '3', help: 'measurements, one after another, after the watch' },
    'watch-s': { default: '60', help: 'seconds to watch the cluster settle after every slice has a leader (0: none)' },
    'window-s': { default: '5', help: 'seconds per window of the watch (from 0.1, as --seconds)' },
    'replication-factor': { default: 'auto', help: "the coordinator's (auto: 3 with 3 nodes; 1: no replication, the baseline)" },
    'settle-s': { default: '120', help: 'at most this long to wait for every slice to have a leader' },
    base: { default: '', help: 'a built checkout to compare with (its dist/)' },
    sides: { default: 'this', help: 'builds to run, comma separated: this, base' },
    runs: { default: '1', help: 'runs of every side, alternating which goes first' },
  },
  'usage: node dist/bench/idle-cpu.js [options]',
).values;
const NODES = intArg('nodes', args.nodes, 1, 16);
const SLICES = intArg('slices', args.slices, 1, SLICE_COUNT_MAX);
const SECONDS = numberArg('seconds', args.seconds, 0.1, 600);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const WATCH_S = numberArg('watch-s', args['watch-s'], 0, 600);
const WINDOW_S = numberArg('window-s', args['window-s'], 0.1, 60);
/** Whole windows in the watch (counted, not summed: 0.1 s added up drifts below a whole watch). */
const WINDOWS = Math.floor(WATCH_S / WINDOW_S + 1e-9);
const SETTLE_S = intArg('settle-s', args['settle-s'], 1, 600);
const RUNS = intArg('runs', args.runs, 1, 20);
const FACTOR = args['replication-factor'] === 'auto' ? 'auto' : intArg('replication-factor', args['replication-factor'], 1, 16);
const here = resolve(new URL('.', import.meta.url).pathname, '..');
const SIDES = args.sides.split(',').map((name) => {
  if (name !== 'this' && name !== 'base') throw new Error(`--sides: ${name} is not this or base`);
  if (name === 'base' && (args.base ?? '') === '') throw new Error('--sides names base: give --base DIR');
  return { name, distRoot: name === 'this' ? here : join(resolve(args.base), 'dist') };
});

/** One measured process: its name and the pids whose CPU counts for it. */
interface Proc {
  name: string;
  pids: number[];
}

/** What one run of a side measured: seconds to every slice led, seconds after that to settle, and each round's CPU
 * per process (% of a core). */
interface RunResult {
  ledS: number;
  settledS: number;
  rounds: Map<string, number>[];
  load: number[];
}

const pct = (cpuS: number, wallS: number) => (100 * cpuS) / wallS;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU of each process over `seconds`, % of a core, and the cluster's sum ("all"). */
async function cpuOver(procs: Proc[], seconds: number): Promise<Map<string, number>> {
  const before = procs.map((p) => cpuSecondsOf(p.pids));
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const wallS = (performance.now() - t0) / 1000;
  const out = new Map<string, number>();
  procs.forEach((p, i) => out.set(p.name, pct(cpuSecondsOf(p.pids) - before[i], wallS)));
  out.set('all', [...out.values()].reduce((a, b) => a + b, 0));
  return out;
}

async function runSide(side: (typeof SIDES)[number]): Promise<RunResult> {
  const lc = (await import(pathToFileURL(join(side.distRoot, 'coordinator', 'cli', 'local-cluster.js')).href)) as typeof import('../coordinator/cli/local-cluster.js');
  const dir = benchTempDir('keyslice-bench-idle-');
  let cluster: LocalCluster | null = null;
  try {
    const t0 = performance.now();
    cluster = await lc.startLocalCluster({ dataDir: join(dir, 'cluster'), nodes: NODES, slices: SLICES, durability: 'os', replicationFactor: FACTOR });
    const deadline = Date.now() + SETTLE_S * 1000;
    let note = '';
    // Bounded by SETTLE_S; each request by its own timeout. A coordinator busy with thousands of elections on a loaded
    // machine may not answer one in time (seen at 4,096 slices, load 15): asked again, not a failed run.
    for (;;) {
      const st = await fetch(`${cluster.url}${CLUSTER_API_PREFIX}status`, { signal: AbortSignal.timeout(5_000) }).then(
        (res) => res.json() as Promise<ClusterStatus>,
        (err: Error) => ((note = `status not answered: ${err.message}`), null),
      );
      if (st !== null) note = st.replication.note;
      if (st !== null && st.replication.leaders.led === st.replication.leaders.replicated) break;
      if (Date.now() > deadline) throw new Error(`not every slice has a leader after ${SETTLE_S} s: ${note}`);
      await sleep(250);
    }
    const ledS = (performance.now() - t0) / 1000;
    const routers = childPids(cluster.coordinator.child.pid!);
    const procs: Proc[] = [
      { name: 'coordinator', pids: [cluster.coordinator.child.pid!] },
      ...routers.map((pid, i) => ({ name: `router ${i + 1}`, pids: [pid] })),
      ...cluster.nodes.map((n, i) => ({ name: `node ${i + 1}`, pids: [n.child.pid!] })),
    ];
    console.log(`${side.name}: ${NODES} slice nodes, ${SLICES} slices, ${routers.length} routers; every slice led ${ledS.toFixed(1)} s after the start (${note === '' ? 'no replicated slices' : note})`);
    const windows: number[] = [];
    for (let w = 0; w < WINDOWS; w++) windows.push((await cpuOver(procs, WINDOW_S)).get('all')!);
    if (windows.length > 0) console.log(`${side.name}: cluster CPU, % of a core, per ${WINDOW_S} s after every slice was led: ${windows.map((w) => w.toFixed(1)).join(' ')}`);
    const rounds: Map<string, number>[] = [];
    const load: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const r = await cpuOver(procs, SECONDS);
      rounds.push(r);
      load.push(loadavg()[0]);
      console.log(`${side.name} round ${round}: ${[...r].map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')} (% of a core); load average ${loadavg()[0].toFixed(1)}`);
    }
    // Settled: after the last window of the watch above twice what the rounds measured, plus a percent of a core.
    const floor = median(rounds.map((r) => r.get('all')!));
    let last = -1;
    windows.forEach((w, i) => w > 2 * floor + 1 && (last = i));
    const settledS = Number(((last + 1) * WINDOW_S).toFixed(1));
    if (windows.length > 0) console.log(`${side.name}: settled ${settledS} s after every slice was led${last + 1 === windows.length ? ' (or later: the watch ended first)' : ''}`);
    return { ledS, settledS, rounds, load };
  } finally {
    await cluster?.stop();
    removeBenchDir(dir);
  }
}

// SIGINT or SIGTERM mid-run: the cluster's processes and its folder go too, as in the other benches.
stopAllOnExit((line) => process.stderr.write(`idle-cpu: ${line}\n`));
const results = new Map<string, RunResult[]>(SIDES.map((s) => [s.name, []]));
for (let run = 0; run < RUNS; run++) {
  for (let k = 0; k < SIDES.length; k++) {
    const side = SIDES[(k + run) % SIDES.length];
    results.get(side.name)!.push(await runSide(side));
  }
}
// Medians over every round of every run, per process (routers and nodes in their order of the run).
const keys = [...results.values()][0][0].rounds[0].keys();
console.log(`\n| medians of ${RUNS} run(s) x ${ROUNDS} rounds of ${SECONDS} s, % of a core (${SLICES} slices, ${NODES} nodes) | ${SIDES.map((s) => s.name).join(' | ')} |`);
console.log(`|---|${SIDES.map(() => '--:').join('|')}|`);
const row = (label: string, f: (r: RunResult) => number[], digits = 1) => console.log(`| ${label} | ${SIDES.map((s) => median(results.get(s.name)!.flatMap(f)).toFixed(digits)).join(' | ')} |`);
for (const key of keys) row(key, (r) => r.rounds.map((x) => x.get(key) ?? NaN));
row('every slice led after (s)', (r) => [r.ledS]);
if (WATCH_S > 0) row(`settled after, s (window ${WINDOW_S} s)`, (r) => [r.settledS], Number.isInteger(WINDOW_S) ? 0 : 1);
row('load average', (r) => r.load);

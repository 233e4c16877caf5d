// Where a put's CPU goes, R=1 against R=3, through the whole cluster (router, 3 slice nodes of 2 workers, durability
// os), and the shape of the slice workers' turns (KEYSLICE_TRACE_TURNS, slice-worker/turn-trace.ts). Sides are a
// build and a replication factor; they run at once and take turns, round by round, the order rotating, so that the
// machine's other load falls on each alike:
//
//   node dist/bench/put-shape.js [--base DIR] [--sides this:3,this:1,base:3] [--rounds 3] [--seconds 3] [--in-flight 256] [--rate N] [--warm-s 0] [--slices N]
//
// Prints, per side (medians of the rounds): puts/s, p50 and p99; CPU µs per put of the client, the routers, the
// coordinator (and its ms of CPU a second while the side is driven and while the other sides are: at R>1 it is mostly
// per second, not per put), each node's main thread, its two workers and its other threads (GC, libuv); socket and disk write
// calls per put of the workers (/proc/<pid>/task/<tid>/io syscw); KB allocated per put by the workers, the nodes' main
// threads and the routers, each kind all together (each thread's V8 heap, not ArrayBuffers' contents: allocKB of
// slice-worker/turn-trace.ts's gc line, NaN on a build without it; not the coordinator's or this process's); and per put: the leader tasks, Replicate frames
// sent, answers sent, frames taken from peers, Appends and AppendOks. `--rate N`: N puts/s offered (all loops
// together), so that CPU per put compares at the same load. `--warm-s N`: each side first takes N seconds of puts,
// unmeasured: a fresh cluster's V8 compiles its hot functions on the nodes' other threads for tens of seconds of load
// (at R=3 most of their CPU per put in the first rounds: bench/README.md), which a warm one does not. Each round's line
// says the other threads' µs per put (all nodes), so that the rounds show how far the cluster is warm, and the nodes',
// the routers' and the whole cluster's (nodes, routers, coordinator; not the client) µs per put.
// `--slices N`: the clusters' slice count (1,024 by default): fewer make each record carry more puts.
// `this:3@KEYSLICE_NODE_ARGS=...`: the side's processes start with those Node options (space separated), e.g.
// `--no-concurrent-recompilation --single-threaded-gc` to move V8's compiler and GC into the thread served, or
// `--max-semi-space-size=64` (V8's flags are the process's: its worker threads' heaps take it too).
// SHAPE_LOG=FILE (environment): every line the clusters' processes print is appended there, prefixed by its side.
import { appendFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { KeysliceClient } from '../coordinator/client/client.js';
import type { LocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { TURN_TRACE_PERIOD_MS } from '../slice-worker/turn-trace.js';
import { childPids, cpuSecondsOf, threadCpuOf, threadWriteSyscallsOf } from './proc-cpu.js';
import { benchTempDir, removeBenchDir, stopAll, stopAllOnExit } from './stop-all.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    base: { default: '', help: 'a built checkout to compare with (its dist/)' },
    sides: { default: 'this:3,this:1', help: 'build:factor, comma separated (build: this or base)' },
    rounds: { default: '3', help: 'rounds' },
    seconds: { default: '3', help: 'seconds measured per side and round' },
    'in-flight': { default: '256', help: 'puts in flight over 4 connections' },
    rate: { default: '0', help: 'puts per second offered (0: as many as the cluster takes)' },
    'warm-s': { default: '0', help: 'seconds of unmeasured puts per side before the first round' },
    slices: { default: '0', help: "the clusters' slice count (0: the coordinator's default, 1,024)" },
  },
  'usage: node dist/bench/put-shape.js [options]',
).values;
const ROUNDS = intArg('rounds', args.rounds, 1, 50);
const SECONDS = intArg('seconds', args.seconds, 1, 60);
const IN_FLIGHT = intArg('in-flight', args['in-flight'], 1, 4096);
const RATE = intArg('rate', args.rate, 0, 1_000_000);
const WARM_S = intArg('warm-s', args['warm-s'], 0, 600);
const SLICES = intArg('slices', args.slices, 0, 1 << 20);
const TABLE = 'shape';
const PAD = 'x'.repeat(160);

interface Side {
  name: string;
  cluster: LocalCluster;
  clients: KeysliceClient[];
  dir: string;
  putN: number;
  /** Each worker's last KEYSLICE_TRACE_TURNS line, by "node/worker": its counts and when it was printed. */
  turns: Map<string, { at: number; counts: Record<string, number> }>;
  /** Each thread's last `keyslice gc` line (slice-worker/turn-trace.ts), by "process/thread" (a node's `main` and
   * `w<i>`, a router's `router<pid>` under the coordinator's prefix): when it was printed and the KB its heap has
   * allocated so far (none from a build from before allocKB). */
  gcs: Map<string, { at: number; allocKB: number | undefined }>;
  /** How many workers print trace lines (every node's). */
  workers: number;
  /** The coordinator's CPU seconds and the time (performance.now) when the side's last puts ended: from then until
   * its next measured seconds nothing is sent to it (the other sides are driven), which gives its idle CPU. */
  idleFrom: { at: number; coordinator: number } | null;
}

async function startSide(name: string, distRoot: string, factor: number): Promise<Side> {
  const lc = (await import(pathToFileURL(join(distRoot, 'coordinator', 'cli', 'local-cluster.js')).href)) as typeof import('../coordinator/cli/local-cluster.js');
  const dir = benchTempDir(`keyslice-shape-${name.replace(/[^\w.=-]/g, '-')}-`);
  const turns: Side['turns'] = new Map();
  const gcs: Side['gcs'] = new Map();
  process.env.KEYSLICE_TRACE_TURNS = '1';
  const log = (line: string) => {
    if (process.env.SHAPE_LOG) appendFileSync(process.env.SHAPE_LOG, `${name} ${line}\n`);
    // A build from before the lines carried their time (a --base) prints none: its line counts as of its arrival.
    const m = line.match(/^\[(slice-node-\d+)\] keyslice turns w(\d+) (?:at (\d+) )?(\{.*\})$/);
    if (m) turns.set(`${m[1]}/${m[2]}`, { at: m[3] === undefined ? Date.now() : Number(m[3]), counts: JSON.parse(m[4]) as Record<string, number> });
    const g = line.match(/^\[([\w-]+)\] keyslice gc (\S+) (\{.*\})$/);
    if (g) {
      const v = JSON.parse(g[3]) as { at?: number; allocKB?: number };
      gcs.set(`${g[1]}/${g[2]}`, { at: v.at ?? Date.now(), allocKB: v.allocKB });
    }
  };
  const nodes = 3;
  const workers = 2;
  const cluster = await lc.startLocalCluster({ dataDir: dir, nodes, workers, durability: 'os', replicationFactor: factor, log, slices: SLICES === 0 ? undefined : SLICES });
  const clients: KeysliceClient[] = [];
  for (let i = 0; i < 4; i++) clients.push(await KeysliceClient.connect(cluster.url, { requestTimeoutMs: 10_000 }));
  await clients[0].createTable(TABLE, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
  return { name, cluster, clients, dir, putN: 0, turns, gcs, workers: nodes * workers, idleFrom: null };
}

interface Reading {
  client: number;
  routers: number;
  coordinator: number;
  nodes: { main: number; workers: number[]; other: number; syscw: number[] }[];
  turns: Record<string, number>;
  /** KB allocated so far by the nodes' workers, the nodes' main threads and the routers (each thread's last gc line). */
  allocKB: { workers: number; mains: number; routers: number };
}

function read(side: Side): Reading {
  const coordinator = side.cluster.coordinator.child.pid!;
  const self = process.cpuUsage();
  const turns: Record<string, number> = {};
  for (const t of side.turns.values()) for (const [k, v] of Object.entries(t.counts)) turns[k] = (turns[k] ?? 0) + v;
  const allocKB = { workers: 0, mains: 0, routers: 0 };
  for (const [key, g] of side.gcs) {
    const thread = key.slice(key.lastIndexOf('/') + 1);
    const role = /^w\d+$/.test(thread) ? 'workers' : thread === 'main' ? 'mains' : 'routers';
    allocKB[role] += g.allocKB ?? NaN;
  }
  return {
    client: (self.user + self.system) / 1e6,
    routers: cpuSecondsOf(childPids(coordinator)),
    coordinator: cpuSecondsOf([coordinator]),
    nodes: side.cluster.nodes.map((n) => {
      const t = threadCpuOf(n.child.pid!, 2);
      return { main: t.main, workers: t.workers, other: t.other, syscw: t.workerTids.map((tid) => threadWriteSyscallsOf(n.child.pid!, tid)) };
    }),
    turns,
    allocKB,
  };
}

interface Sample {
  rate: number;
  p50: number;
  p99: number;
  /** Name -> value per put (CPU in µs). */
  per: Map<string, number>;
  load: number;
}

/** traceAfter waits for up to this many trace periods (a loaded host may delay a line), polling every TRACE_POLL_MS. */
const TRACE_WAIT_PERIODS = 10;
const TRACE_POLL_MS = 50;

/** Waits until every worker has printed a trace line at or after `since` (Date.now()): its counts then include all
 * that came before. Lines come every TURN_TRACE_PERIOD_MS; a loaded host may delay one, so it polls for up to
 * TRACE_WAIT_PERIODS of them. */
async function traceAfter(side: Side, since: number): Promise<void> {
  const waitMs = TRACE_WAIT_PERIODS * TURN_TRACE_PERIOD_MS;
  for (let poll = 0; poll < waitMs / TRACE_POLL_MS; poll++) {
    const fresh = [...side.turns.values()].filter((t) => t.at >= since).length;
    // And every thread that prints gc lines (the nodes' mains and the routers print on their own schedules).
    if (fresh === side.workers && [...side.gcs.values()].every((g) => g.at >= since)) return;
    await new Promise((r) => setTimeout(r, TRACE_POLL_MS));
  }
  throw new Error(`${side.name}: no trace line from every one of its ${side.workers} workers within ${waitMs / 1000} s of the measurement`);
}

/** Measures SECONDS of puts after half a second of warm-up; `warmOnly`: only warm up, for that long. */
async function measure(side: Side, warmOnly = 0): Promise<Sample> {
  const lat: number[] = [];
  let ops = 0;
  const loop = async (j: number, seconds: number, record: boolean) => {
    const start = performance.now();
    const end = start + seconds * 1000;
    const gap = RATE > 0 ? (IN_FLIGHT * 1000) / RATE : 0;
    for (let k = 0; performance.now() < end; k++) {
      if (gap > 0) {
        const wait = start + (j / IN_FLIGHT) * gap + k * gap - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      const t0 = performance.now();
      const n = side.putN++;
      await side.clients[j % 4].putItem(TABLE, { device: `p${n % 10_000}`, seq: Math.floor(n / 10_000), payload: PAD });
      if (record) {
        ops++;
        lat.push(performance.now() - t0);
      }
    }
  };
  // The coordinator's idle CPU (ms a second) since the side's last puts ended: at R>1
  // its failure detector pings every slice's leader every LEADER_HEARTBEAT_INTERVAL_MS whether or not anything is
  // written, so its µs per put is mostly this rate over the puts' rate (bench/PROFILE.md, 2026-11-27, branch coordcpu).
  const idle = side.idleFrom;
  const idleMsPerS = idle === null ? NaN : (read(side).coordinator - idle.coordinator) * 1e6 / (performance.now() - idle.at);
  await Promise.all(Array.from({ length: IN_FLIGHT }, (_, j) => loop(j, warmOnly > 0 ? warmOnly : 0.5, false)));
  if (warmOnly > 0) {
    side.idleFrom = { at: performance.now(), coordinator: read(side).coordinator };
    return { rate: 0, p50: 0, p99: 0, per: new Map(), load: 0 };
  }
  await traceAfter(side, Date.now()); // a trace line of every worker after the warm-up
  const a = read(side);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, (_, j) => loop(j, SECONDS, true)));
  // The wall time the measured puts took: the last ones started before the SECONDS bound end after it.
  const secs = (performance.now() - t0) / 1000;
  // The coordinator's driven seconds end with the puts: the wait for the trace lines below sends nothing, so it is
  // the start of the side's idle time, not part of its driven rate.
  const putsEnd = { at: performance.now(), coordinator: cpuSecondsOf([side.cluster.coordinator.child.pid!]) };
  await traceAfter(side, Date.now()); // and after the measured seconds (counts of the idle second are small)
  const b = read(side);
  side.idleFrom = putsEnd;
  const per = new Map<string, number>();
  const us = (x: number) => (x * 1e6) / ops;
  per.set('cpu client', us(b.client - a.client));
  per.set('cpu routers', us(b.routers - a.routers));
  per.set('cpu coordinator', us(b.coordinator - a.coordinator));
  // ms a second, not per put: the same row while the side is driven and while it is not (idleMsPerS).
  per.set('cpu coordinator ms/s driven', ((putsEnd.coordinator - a.coordinator) * 1000) / secs);
  per.set('cpu coordinator ms/s idle', idleMsPerS);
  let nodes = 0;
  b.nodes.forEach((n, i) => {
    const o = a.nodes[i];
    per.set(`cpu node${i + 1} main`, us(n.main - o.main));
    n.workers.forEach((w, k) => per.set(`cpu node${i + 1} w${k}`, us(w - o.workers[k])));
    per.set(`cpu node${i + 1} other`, us(n.other - o.other));
    nodes += n.main - o.main + n.workers.reduce((s, w, k) => s + w - o.workers[k], 0) + n.other - o.other;
    per.set(`writes node${i + 1} workers`, (n.syscw.reduce((s, w, k) => s + w - o.syscw[k], 0)) / ops);
  });
  per.set('cpu nodes all', us(nodes));
  per.set('cpu cluster all', us(nodes + b.routers - a.routers + b.coordinator - a.coordinator));
  for (const k of Object.keys(b.turns)) per.set(`turns ${k}`, ((b.turns[k] ?? 0) - (a.turns[k] ?? 0)) / ops);
  // KB allocated per put, by thread kind (all of the kind together; NaN for a build without allocKB).
  for (const role of ['workers', 'mains', 'routers'] as const) per.set(`alloc KB ${role}`, (b.allocKB[role] - a.allocKB[role]) / ops);
  lat.sort((x, y) => x - y);
  return { rate: ops / secs, p50: lat[Math.floor(lat.length / 2)], p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))], per, load: loadavg()[0] };
}


async function main(): Promise<void> {
  const here = resolve(new URL('.', import.meta.url).pathname, '..');
  const specs = args.sides.split(',').map((s) => {
    const [spec, env] = s.split('@');
    const [build, factor] = spec.split(':');
    if ((build !== 'this' && build !== 'base') || !['1', '2', '3'].includes(factor)) throw new Error(`--sides: ${s} is not this|base:1|2|3`);
    if (build === 'base' && (args.base ?? '') === '') throw new Error('--sides names base: give --base DIR');
    return { name: s, root: build === 'this' ? here : join(resolve(args.base), 'dist'), factor: Number(factor), env };
  });
  const sides: Side[] = [];
  const results: Sample[][] = specs.map(() => []);
  try {
    for (const s of specs) {
      // build:factor@NAME=VALUE: the side's processes start with NAME=VALUE in their environment.
      // Split at the first '=' only: a Node option may carry one of its own (--max-semi-space-size=64).
      const eq = s.env?.indexOf('=') ?? -1;
      const [k, v] = s.env === undefined || eq < 0 ? [] : [s.env.slice(0, eq), s.env.slice(eq + 1)];
      if (k !== undefined) process.env[k] = v;
      sides.push(await startSide(s.name, s.root, s.factor));
      if (k !== undefined) delete process.env[k];
    }
    for (const side of sides) if (WARM_S > 0) await measure(side, WARM_S);
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < sides.length; k++) {
        const i = (k + round) % sides.length;
        const s = await measure(sides[i]);
        results[i].push(s);
        process.stderr.write(`round ${round + 1} ${sides[i].name.padEnd(7)} ${Math.round(s.rate)}/s p50 ${s.p50.toFixed(3)} p99 ${s.p99.toFixed(3)} ms nodes ${s.per.get('cpu nodes all')!.toFixed(1)} routers ${s.per.get('cpu routers')!.toFixed(1)} cluster ${s.per.get('cpu cluster all')!.toFixed(1)} us/put (other threads ${[...s.per].filter(([key]) => / other$/.test(key)).reduce((sum, [, v]) => sum + v, 0).toFixed(1)}) AppendOks ${(s.per.get('turns appendOkSlicesIn') ?? NaN).toFixed(2)}/put alloc KB/put workers ${s.per.get('alloc KB workers')!.toFixed(2)} routers ${s.per.get('alloc KB routers')!.toFixed(2)} load ${s.load.toFixed(1)}\n`);
      }
    }
  } finally {
    for (const s of sides) {
      await Promise.allSettled(s.clients.map((c) => c.close()));
      await s.cluster.stop();
      removeBenchDir(s.dir);
    }
  }
  console.log(`| per put (medians of ${ROUNDS} rounds of ${SECONDS} s, ${IN_FLIGHT} in flight${RATE > 0 ? `, ${RATE}/s offered` : ''}) | ${specs.map((s) => s.name).join(' | ')} |`);
  console.log(`|---|${specs.map(() => '--:').join('|')}|`);
  // NaN readings (the idle coordinator's first round of a side with no warm-up before it) are left out by median.
  const row = (label: string, f: (x: Sample) => number, digits: number) => console.log(`| ${label} | ${results.map((r) => median(r.map(f)).toFixed(digits)).join(' | ')} |`);
  row('puts/s', (x) => x.rate, 0);
  row('p50 ms', (x) => x.p50, 3);
  row('p99 ms', (x) => x.p99, 3);
  row('load average', (x) => x.load, 1);
  for (const key of results[0][0].per.keys()) row(key, (x) => x.per.get(key) ?? NaN, key.startsWith('cpu') ? 1 : 3);
}

stopAllOnExit((line) => process.stderr.write(`put-shape: ${line}\n`));
main().then(
  () => stopAll().then(() => process.exit(0)),
  (err) => {
    console.error(err);
    return stopAll().then(() => process.exit(1));
  },
);

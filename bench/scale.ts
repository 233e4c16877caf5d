// npm run bench:scale: how throughput grows with the shape of a cluster, side by
// side with Redis. For each shape (routers, slice nodes, workers per node) it
// starts a local cluster and drives it from several client processes at once
// (each one bench/load.ts --url, with its own table); then it drives one Redis
// server, and a Redis Cluster of as many shards as each shape's slice nodes, with
// the same number of client processes of the same shape (bench/redis-load.ts).
// It writes bench/SCALE.md: per workload the ops/s (and items/s) of all clients
// together, the median of their p50, the worst of their p99, the CPU of every
// server process, and keyslice's ratio to each Redis. Every process is started
// here and stopped here by its PID; each client run is bounded by --duration
// and --ops per workload.
//
// It runs from a built tree alone (node dist/bench/scale.js, no npm, no network)
// where bench/peers/node_modules holds ioredis and --redis-server names a
// redis-server: see bench/README.md, "Running the scale benchmark on another machine".
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newClusterSecret, startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { CLIENT_OLD_SPACE_FLOOR_MB, oldSpaceFloorOption } from '../shared/limits.js';
import { median } from './median.js';
import { ensureNpmPeers, ensureRedis, run, versionOf } from './peers.js';
import { childPids, cpuSecondsOf, machineTicks, threadCpuOf } from './proc-cpu.js';
import type { ClusterStatus } from '../shared/api.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { benchTempDir, removeBenchDir, stopAll, stopAllAtExit } from './stop-all.js';
import { type RedisCtor } from './redis-adapter.js';
import { startRedisCluster, startRedisServer, type RedisProcess } from './redis-servers.js';

const here = dirname(fileURLToPath(import.meta.url));
const WORKLOADS = ['put', 'get', 'range', 'batch'];
const args = readCommandLine(
  process.argv.slice(2),
  {
    shapes: { default: '0:2:2,1:2:2,2:2:2,1:3:2:1,1:3:2:3', help: 'routers:nodes:workers[:R] of each cluster to measure, comma-separated (R: --replication-factor; left out, the coordinator\'s default)' },
    clients: { default: '2', help: 'client processes driving each cluster (and each Redis) at once' },
    workload: { default: WORKLOADS.join(','), help: `workloads run in order by every client: ${WORKLOADS.join(', ')}` },
    duration: { default: '10', help: 'seconds per workload' },
    ops: { default: '1000000', help: 'ops per workload per client, at most' },
    rounds: { default: '1', help: 'rounds; each runs every shape and every Redis once, the order turned by one from round to round, and each figure is the median over them' },
    connections: { default: '4', help: 'connections per client process (to Redis: to each shard)' },
    concurrency: { default: '32', help: 'requests in flight per client process' },
    durability: { default: 'os', help: 'the slice nodes\' durability (os: the request path is measured, not the disk; Redis runs without persistence)' },
    'redis-server': { default: '', help: 'the redis-server binary (empty: the one on this machine, installed with apt-get if missing; none: no Redis runs)' },
    out: { default: join(here, '..', '..', 'bench', 'SCALE.md'), help: 'the report to write' },
    note: { default: '', help: 'a sentence about the machine or the run, put in the report as it is' },
    'warm-s': { default: '0', help: 'seconds of every workload each system takes from its clients, unmeasured, before it is measured (a fresh cluster\'s V8 still compiles its hot code on the nodes\' other threads during its first tens of seconds of load)' },
    'cpu-by-workload': { default: 'no', help: 'yes: each workload is a client run of its own, so that the CPU figures are each workload\'s (get then reads a key set its run writes first, as get alone does in bench/load.ts); no: one client run of every workload in turn, its CPU figures over all of them' },
  },
  'usage: node dist/bench/scale.js [--shapes 0:2:2,2:2:2,1:3:2:1] [--clients 2] [--workload put,get,range,batch] [--duration 10] [--redis-server /usr/bin/redis-server]',
).values;
const shapes = args.shapes.split(',').map((s) => {
  const parts = s.split(':').map(Number);
  const ok = (parts.length === 3 || parts.length === 4) && parts.every((n) => Number.isInteger(n) && n >= 0) && parts[1] >= 1 && parts[2] >= 1;
  if (!ok) fail(`--shapes: "${s}" is not routers:nodes:workers[:R]`);
  if (parts.length === 4 && (parts[3] < 1 || parts[3] > parts[1])) fail(`--shapes: "${s}": R must be 1 to the node count (${parts[1]})`);
  return { routers: parts[0], nodes: parts[1], workers: parts[2], replication: parts.length === 4 ? parts[3] : null };
});
const clients = intArg('clients', args.clients, 1, 64);
const duration = intArg('duration', args.duration, 1, 3600);
const ops = intArg('ops', args.ops, 1, 10_000_000);
const roundCount = intArg('rounds', args.rounds, 1, 20);
const warmSeconds = intArg('warm-s', args['warm-s'], 0, 600);
const failedRounds: string[] = [];
const workloads = args.workload.split(',');
for (const w of workloads) if (!WORKLOADS.includes(w)) fail(`--workload: "${w}" is not one of ${WORKLOADS.join(', ')}`);
if (args['cpu-by-workload'] !== 'yes' && args['cpu-by-workload'] !== 'no') fail(`--cpu-by-workload must be yes or no, got ${args['cpu-by-workload']}`);
/** The client runs of each system per round: every workload in one run, or (--cpu-by-workload yes) one run each. */
const clientRuns: string[][] = args['cpu-by-workload'] === 'yes' ? workloads.map((w) => [w]) : [workloads];
const shape = (seconds: number) => ['--duration', String(seconds), '--ops', String(ops), '--connections', args.connections, '--concurrency', args.concurrency];

const log = (line: string) => process.stderr.write(`keyslice scale: ${line}\n`);

// Every process started here, so that none outlives the bench (stopped by PID at the end, killed on exit).
const children = new Set<ChildProcess>();
const track = (child: ChildProcess) => {
  children.add(child);
  child.once('exit', () => children.delete(child));
};
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${sig}: stopping after this run (again: exit at once)`);
  });
}
// Whatever way this process exits, no process it started (tracked or not: a node of a cluster that failed to start)
// outlives it, and its temp folders go (bench/stop-all.ts).
stopAllAtExit();

interface Result {
  workload: string;
  opsPerSec: number;
  itemsPerSec?: number;
  /** Failed ops by error code (bench/load.ts: the KeysliceError's code; bench/redis-load.ts: its own names). */
  errors: Record<string, number>;
  latencyMs: { p50: number; p99: number } | null;
}

/** One client process (`script` under dist/bench with `scriptArgs`) running `ws` in turn; resolves with its results
 * (or an error). Keyslice's and Redis's clients alike start with the clients' old-space floor (CLIENT_OLD_SPACE_FLOOR_MB:
 * what it saves keyslice's), so that the two systems are driven by the same client shape. */
function runClient(script: string, scriptArgs: string[], ws: string[], seconds = duration): Promise<{ results: Result[]; redirects?: number }> {
  const child = spawn(process.execPath, [oldSpaceFloorOption(CLIENT_OLD_SPACE_FLOOR_MB), join(here, script), ...scriptArgs, ...shape(seconds), '--workload', ws.join(',')], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  child.stderr.on('data', (c: Buffer) => (err += c));
  // Preloading (range) is not in --duration: a generous bound on top.
  const timer = setTimeout(() => child.kill('SIGKILL'), (seconds * ws.length + 300) * 1000);
  return new Promise((resolveRun, reject) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      try {
        const parsed = JSON.parse(out.slice(out.indexOf('{'))) as { results: Result[]; redirects?: number; failure?: string };
        if (parsed.failure !== undefined && parsed.results.length < ws.length) throw new Error(parsed.failure);
        resolveRun(parsed);
      } catch (e) {
        reject(new Error(`a client (${script}) exited (${code}) without all results: ${(e as Error).message.slice(0, 200)} ${err.split('\n').slice(-5).join(' ')}`));
      }
    }),
  );
}

/** Failed ops by code, summed over `counts` (clients, or rounds). */
const errorsByCode = (counts: Record<string, number>[]): Record<string, number> => {
  const sum: Record<string, number> = {};
  for (const c of counts) for (const [code, n] of Object.entries(c)) sum[code] = (sum[code] ?? 0) + n;
  return sum;
};
/** Errors as the log and the report show them: their count, then each code's, most first ("12: Unavailable 10,
 * WrongOwner 2"), so that a count can be explained from the report alone. */
const showErrors = (byCode: Record<string, number>): string => {
  const codes = Object.entries(byCode).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const total = codes.reduce((a, [, n]) => a + n, 0);
  return total === 0 ? '0' : `${total}: ${codes.map(([code, n]) => `${code} ${n}`).join(', ')}`;
};
const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');

/** One workload on one system: all its clients together. */
interface Row {
  ops: number;
  items: number | null;
  p50: number;
  p99: number;
  /** Failed ops by error code. */
  errors: Record<string, number>;
}
/** system label -> one entry per round: workload -> its row, or 'failed: ...' where that round failed. */
const rounds = new Map<string, (Map<string, Row> | string)[]>();
/** CPU label (the system's label, with the workload's name where each workload is a client run of its own) -> server
 * process name -> its CPU over each round's client run, in % of one core. */
const cpuShares = new Map<string, Map<string, number[]>>();
/** CPU label -> server process name -> its threads' CPU over each round's client run (% of one core): the main thread
 * and each worker thread, for the processes measured by thread (slice nodes, routers). One thread at 100% is a limit
 * that the process's total hides. */
const threadShares = new Map<string, Map<string, { main: number[]; workers: number[][] }>>();
/** CPU label -> the share of the whole machine's CPU (every core) busy over each round's client run, in %: near
 * 100%, clients and servers together want more than the machine has, and no shape can add throughput. */
const machineBusy = new Map<string, number[]>();
/** CPU label -> MOVED answers its clients met, all rounds (Redis Cluster clients only). */
const redirectsMet = new Map<string, number>();
const record = (label: string, entry: Map<string, Row> | string) => rounds.set(label, [...(rounds.get(label) ?? []), entry]);

/** An error as one line of the report: no table cell breaks (|), no line breaks, at most 300 characters. */
const reportLine = (err: unknown): string => (err as Error).message.replace(/\|/g, '/').replace(/\s+/g, ' ').slice(0, 300);

/** Runs every client run of `clientRuns` in turn, each `clients` client processes at once, and records their rows under
 * `label`; `servers` are the processes whose CPU is reported (name and PID, looked up when each run starts). */
async function measure(label: string, script: string, scriptArgs: string[], servers: () => { name: string; pid: number; workers?: number }[]): Promise<void> {
  if (warmSeconds > 0) {
    // Unmeasured: its results, CPU and errors are dropped (a warm-up that fails fails the round, as a run would).
    log(`${label}: warming up, ${warmSeconds} s of ${workloads.join(',')} from ${clients} clients`);
    await Promise.all(Array.from({ length: clients }, () => runClient(script, scriptArgs, workloads, warmSeconds)));
  }
  const rows = new Map<string, Row>();
  for (const ws of clientRuns) {
    try {
      for (const [w, row] of await measureRun(clientRuns.length === 1 ? label : `${label}, ${ws.join(',')}`, script, scriptArgs, ws, servers)) rows.set(w, row);
    } catch (err) {
      if (rows.size === 0) throw err; // the round failed whole (the caller records it)
      // --cpu-by-workload yes: the workloads measured before keep their rows, as their CPU figures are kept; this one
      // and those after it are not measured in this round.
      const message = reportLine(err);
      failedRounds.push(`${label}: ${ws.join(',')} failed in a round, the workloads after it not run in that round (${message})`);
      log(`${label}, ${ws.join(',')}: failed: ${message}`);
      break;
    }
  }
  record(label, rows);
}

/** One client run of `ws`: its rows, and the servers' CPU over it recorded under `cpuLabel`. */
async function measureRun(cpuLabel: string, script: string, scriptArgs: string[], ws: string[], servers: () => { name: string; pid: number; workers?: number }[]): Promise<Map<string, Row>> {
  log(`${cpuLabel}: ${clients} clients`);
  const procs = servers();
  const cpu0 = procs.map((p) => cpuSecondsOf([p.pid]));
  const threads0 = procs.map((p) => (p.workers === undefined ? null : threadCpuOf(p.pid, p.workers)));
  const machine0 = machineTicks();
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: clients }, () => runClient(script, scriptArgs, ws)));
  const wall = (performance.now() - t0) / 1000;
  const machine1 = machineTicks();
  if (machine0 !== null && machine1 !== null && machine1.total > machine0.total) {
    machineBusy.set(cpuLabel, [...(machineBusy.get(cpuLabel) ?? []), ((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * 100]);
  }
  const results = runs.map((r) => r.results);
  // A Redis Cluster client follows MOVED answers; with a right slot map there are none.
  if (runs.some((r) => r.redirects !== undefined)) redirectsMet.set(cpuLabel, (redirectsMet.get(cpuLabel) ?? 0) + runs.reduce((a, r) => a + (r.redirects ?? 0), 0));
  const shares = cpuShares.get(cpuLabel) ?? new Map<string, number[]>();
  procs.forEach((p, i) => shares.set(p.name, [...(shares.get(p.name) ?? []), ((cpuSecondsOf([p.pid]) - cpu0[i]) / wall) * 100]));
  cpuShares.set(cpuLabel, shares);
  const byThread = threadShares.get(cpuLabel) ?? new Map<string, { main: number[]; workers: number[][] }>();
  procs.forEach((p, i) => {
    const before = threads0[i];
    if (before === null) return;
    const after = threadCpuOf(p.pid, p.workers!);
    const t = byThread.get(p.name) ?? { main: [], workers: before.workers.map(() => []) };
    t.main.push(((after.main - before.main) / wall) * 100);
    // Matched by thread id, not by position: a thread started during the run would shift the positions.
    const was = new Map(before.workerTids.map((tid, k) => [tid, before.workers[k]]));
    after.workers.forEach((w, k) => t.workers[k]?.push(((w - (was.get(after.workerTids[k]) ?? NaN)) / wall) * 100));
    byThread.set(p.name, t);
  });
  threadShares.set(cpuLabel, byThread);
  const rows = new Map<string, Row>();
  for (const w of ws) {
    const mine = results.map((r) => r.find((x) => x.workload === w)).filter((x): x is Result => x !== undefined);
    const items = mine.every((r) => r.itemsPerSec !== undefined) ? mine.reduce((a, r) => a + r.itemsPerSec!, 0) : null;
    const row: Row = {
      ops: mine.reduce((a, r) => a + r.opsPerSec, 0),
      items,
      p50: median(mine.map((r) => r.latencyMs?.p50 ?? NaN)),
      p99: Math.max(...mine.map((r) => r.latencyMs?.p99 ?? NaN)),
      errors: errorsByCode(mine.map((r) => r.errors)),
    };
    rows.set(w, row);
    log(`  ${w}: ${fmt(row.ops)} ops/s${row.items !== null ? `, ${fmt(row.items)} items/s` : ''}, p50 ${row.p50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)} ms, errors ${showErrors(row.errors)}`);
  }
  return rows;
}

/** A replicated cluster serves a slice's writes once its replicas elected a leader: until every slice has one, clients
 * would measure the elections (seconds on a small machine), not the request path. Bounded: asked every 100 ms for
 * at most LEADERS_WAIT_MS. */
const LEADERS_WAIT_MS = 120_000;
async function everySliceLed(url: string, secret: string, replicated: boolean): Promise<void> {
  const deadline = performance.now() + LEADERS_WAIT_MS;
  let last = 'no status read';
  while (performance.now() < deadline) {
    try {
      const res = await fetch(`${url}${CLUSTER_API_PREFIX}status`, { headers: { [CLUSTER_SECRET_HEADER]: secret }, signal: AbortSignal.timeout(5_000) });
      const st = (await res.json()) as ClusterStatus;
      // (replicated 0: the map has not placed the replicas yet, or R=1; the shape says which.)
      if (st.replication.leaders.led === st.replication.leaders.replicated && (st.replication.leaders.replicated > 0 || !replicated)) return;
      last = `${st.replication.leaders.led} of ${st.replication.leaders.replicated} replicated slices led`;
    } catch (err) {
      last = `status failed: ${(err as Error).message}`;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`not every slice had a leader within ${LEADERS_WAIT_MS / 1000} s (${last})`);
}

const failed = (label: string, err: unknown) => {
  const message = reportLine(err);
  record(label, `failed: ${message}`);
  log(`${label}: failed: ${message}`);
};

const loadBefore = loadavg();
const t0 = performance.now();

/** One system to measure: it starts its servers, measures, and stops them by PID, in every case. */
interface Target {
  label: string;
  run: () => Promise<void>;
}
const targets: Target[] = [];

// ---- keyslice, shape by shape ----------------------------------------------------------

const shapeLabel = (s: (typeof shapes)[number]) => `keyslice ${s.routers} routers, ${s.nodes} nodes x ${s.workers} workers${s.replication === null ? '' : `, R=${s.replication}`}`;
const shapeName = (s: (typeof shapes)[number]) => `${s.routers}:${s.nodes}:${s.workers}${s.replication === null ? '' : `:${s.replication}`}`;
for (const s of shapes) {
  const label = shapeLabel(s);
  targets.push({
    label,
    run: async () => {
      const dataDir = benchTempDir('keyslice-scale-');
      const secret = newClusterSecret();
      const procs: ManagedProcess[] = [];
      try {
        // Every start waited for, failed or not, so that each node that started is among `procs` (stopped below).
        const starts = await Promise.allSettled(
          Array.from({ length: s.nodes }, (_, i) =>
            startSliceNode({ name: `slice-node-${i + 1}`, dataDir: join(dataDir, `n${i + 1}`), port: 0, workers: s.workers, durability: args.durability as 'os', clusterSecret: secret }).then((n) => {
              procs.push(n);
              track(n.child);
              return n;
            }),
          ),
        );
        const failedStart = starts.find((r) => r.status === 'rejected');
        if (failedStart !== undefined) throw failedStart.reason;
        const nodes = starts.map((r) => (r as PromiseFulfilledResult<ManagedProcess>).value);
        const coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, nodes.map((n) => n.url), undefined, undefined, ['--routers', String(s.routers), ...(s.replication === null ? [] : ['--replication-factor', String(s.replication)])], secret);
        procs.push(coordinator);
        track(coordinator.child);
        await everySliceLed(coordinator.url, secret, s.replication === null ? s.nodes > 1 : s.replication > 1); // (auto: R>1 from 2 nodes on)
        await measure(label, 'load.js', ['--url', coordinator.url, '--json'], () => [
          { name: 'coordinator', pid: coordinator.child.pid! },
          // The routers are the coordinator's children (node:cluster workers).
          ...childPids(coordinator.child.pid!).map((pid, i) => ({ name: `router ${i + 1}`, pid, workers: 0 })),
          ...nodes.map((n) => ({ name: n.name, pid: n.child.pid!, workers: s.workers })),
        ]);
      } catch (err) {
        failed(label, err);
      } finally {
        await Promise.all(procs.map((p) => stopProcess(p.child)));
        removeBenchDir(dataDir);
      }
    },
  });
}

// ---- Redis: one server, and a Redis Cluster per node count -------------------------------

let redisNote: string;
const shardCounts = [...new Set(shapes.map((s) => s.nodes))].sort((a, b) => a - b);
const clusterLabel = (n: number) => `Redis Cluster, ${n} shard${n === 1 ? '' : 's'}`;
const ONE_REDIS = 'Redis, one server';
if (args['redis-server'] === 'none') {
  redisNote = 'Redis was not run (--redis-server none).';
} else {
  let redisServer: string | null = null;
  let Redis: RedisCtor | null = null;
  try {
    redisServer = args['redis-server'] !== '' ? resolve(args['redis-server']) : ensureRedis(log);
    const version = run(redisServer, ['--version']);
    if (!version.ok) throw new Error(`${redisServer} --version failed: ${version.output.slice(0, 300)}`);
    const req = ensureNpmPeers(['ioredis'], log);
    const mod = req('ioredis') as { default?: RedisCtor } & RedisCtor;
    Redis = mod.default ?? mod;
    redisNote = `${version.output.trim().split('\n')[0]} (${redisServer}), no persistence; driven through ioredis ${versionOf(req, 'ioredis')} by bench/redis-load.ts.`;
  } catch (err) {
    redisNote = `Redis was not run: ${(err as Error).message.replace(/\s+/g, ' ').slice(0, 400)}`;
    log(redisNote);
  }
  const redisTargets: { label: string; shards: number | null }[] = [{ label: ONE_REDIS, shards: null }, ...shardCounts.map((n) => ({ label: clusterLabel(n), shards: n }))];
  for (const target of redisServer !== null && Redis !== null ? redisTargets : []) {
    targets.push({
      label: target.label,
      run: async () => {
        const dir = benchTempDir('keyslice-scale-redis-');
        const servers: RedisProcess[] = [];
        try {
          if (target.shards === null) servers.push(await startRedisServer(redisServer!, dir, track));
          else servers.push(...(await startRedisCluster(Redis!, redisServer!, dir, target.shards, track)));
          log(`${target.label}: redis-server pids ${servers.map((r) => r.child.pid).join(', ')}`);
          await measure(target.label, 'redis-load.js', ['--port', String(servers[0].port), ...(target.shards === null ? [] : ['--cluster'])], () =>
            servers.map((r, i) => ({ name: target.shards === null ? 'redis-server' : `shard ${i + 1}`, pid: r.child.pid! })),
          );
        } catch (err) {
          failed(target.label, err);
        } finally {
          await Promise.all(servers.map((r) => stopProcess(r.child)));
          // A server that failed to start is still in `children`: stop it too.
          await Promise.all([...children].filter((c) => c.spawnfile === redisServer).map((c) => stopProcess(c)));
          removeBenchDir(dir);
        }
      },
    });
  }
}

// ---- the rounds: every target once per round, the order turned by one each round ------------

for (let r = 0; r < roundCount && !interrupted; r++) {
  const order = [...targets.slice(r % targets.length), ...targets.slice(0, r % targets.length)];
  log(`round ${r + 1} of ${roundCount}`);
  for (const t of order) {
    if (interrupted) break;
    await t.run();
  }
}

/** Per system: each workload's figures, the median over the rounds that measured it (each figure on its own). */
const measured = new Map<string, Map<string, Row> | string>();
for (const [label, entries] of rounds) {
  const ok = entries.filter((e): e is Map<string, Row> => typeof e !== 'string');
  if (ok.length === 0) {
    measured.set(label, entries[0] as string);
    continue;
  }
  const rows = new Map<string, Row>();
  for (const w of workloads) {
    const all = ok.map((e) => e.get(w)).filter((x): x is Row => x !== undefined);
    if (all.length === 0) continue;
    rows.set(w, {
      ops: median(all.map((x) => x.ops)),
      items: all.every((x) => x.items !== null) ? median(all.map((x) => x.items!)) : null,
      p50: median(all.map((x) => x.p50)),
      p99: median(all.map((x) => x.p99)),
      errors: errorsByCode(all.map((x) => x.errors)),
    });
  }
  measured.set(label, rows);
  if (ok.length < entries.length) failedRounds.push(`${label}: ${entries.length - ok.length} of ${entries.length} rounds failed (${(entries.find((e) => typeof e === 'string') as string).slice(0, 200)})`);
}

// ---- the report ----------------------------------------------------------------------------

/** The figure a workload is compared by: items/s where an op carries many items, else ops/s. */
const byItems = (w: string) => w === 'range' || w === 'batch';
const figure = (r: Row, w: string) => (byItems(w) && r.items !== null ? r.items : r.ops);
const ratio = (a: Row | undefined, b: Row | undefined, w: string) => (a === undefined || b === undefined || !(figure(b, w) > 0) ? '-' : `${(figure(a, w) / figure(b, w)).toFixed(2)}x`);

const resultLines: string[] = [];
for (const [label, rows] of measured) {
  if (typeof rows === 'string') {
    resultLines.push(`| ${label} | - | ${rows} | | | | |`);
    continue;
  }
  for (const [w, r] of rows) resultLines.push(`| ${label} | ${w} | ${fmt(r.ops)} | ${r.items === null ? '-' : fmt(r.items)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${showErrors(r.errors)} |`);
}
const rowOf = (label: string, w: string) => {
  const rows = measured.get(label);
  return typeof rows === 'object' ? rows.get(w) : undefined;
};
const sideLines: string[] = [];
for (const s of shapes) {
  for (const w of workloads) {
    const ks = rowOf(shapeLabel(s), w);
    if (ks === undefined) continue;
    const one = rowOf(ONE_REDIS, w);
    const cl = rowOf(clusterLabel(s.nodes), w);
    const unit = byItems(w) ? 'items/s' : 'ops/s';
    sideLines.push(`| ${shapeName(s)} | ${w} (${unit}) | ${fmt(figure(ks, w))} | ${one ? fmt(figure(one, w)) : '-'} | ${ratio(ks, one, w)} | ${cl ? fmt(figure(cl, w)) : '-'} | ${ratio(ks, cl, w)} |`);
  }
}
// Issue 14 asks R=3 writes at 0.5x R=1's or better: every pair of shapes that differ only in R, put by put.
const replicationLines: string[] = [];
for (const a of shapes) {
  for (const b of shapes) {
    if (a.replication === null || b.replication === null || a.replication <= b.replication) continue;
    if (a.routers !== b.routers || a.nodes !== b.nodes || a.workers !== b.workers) continue;
    for (const w of workloads) {
      const ra = rowOf(shapeLabel(a), w);
      const rb = rowOf(shapeLabel(b), w);
      if (ra !== undefined && rb !== undefined) replicationLines.push(`| ${shapeName(a)} / ${shapeName(b)} | ${w} | ${fmt(figure(ra, w))} | ${fmt(figure(rb, w))} | ${ratio(ra, rb, w)} |`);
    }
  }
}
const loadAfter = loadavg();
const la = (l: number[]) => l.map((x) => x.toFixed(2)).join(' / ');
const argv = process.argv.slice(2).join(' ');
const cores = availableParallelism();
// Before the run nothing of ours ran: a load average then is other work on the machine.
const shared = loadBefore[0] >= cores / 2
  ? `\n**Other work shared this machine**: the 1-minute load average was ${loadBefore[0].toFixed(2)} on ${cores} cores before the run began, so the figures are lower and noisier than on an idle machine; compare the systems within this run, not with other runs.`
  : '';
const note = args.note === '' ? '' : `\n${args.note}`;
const report = `# Scale: throughput by cluster shape, side by side with Redis

Written by \`npm run bench:scale\` (bench/scale.ts) on ${new Date().toISOString()}:
${cpus()[0]?.model ?? 'unknown CPU'}, ${cores} cores, Node ${process.version}; every process on this one machine
(1-minute load average ${la(loadBefore)} before, ${la(loadAfter)} after; ${((performance.now() - t0) / 60000).toFixed(1)} min).
Command: \`${process.env.npm_lifecycle_event === 'bench:scale' ? `npm run bench:scale${argv ? ' -- ' + argv : ''}` : `node dist/bench/scale.js${argv ? ' ' + argv : ''}`}\`.${shared}${note}

Each keyslice shape is a fresh local cluster (routers:nodes:workers; slice durability \`${args.durability}\`), driven by
${clients} client processes at once (bench/load.ts, ${args.connections} connections and ${args.concurrency} requests in flight
each, ${duration} s or ${fmt(ops)} ops per workload, one table per client)${warmSeconds > 0 ? `, after ${warmSeconds} s of every workload unmeasured (\`--warm-s\`; Redis too)` : ', measured from its first request (no `--warm-s`)'}. Each Redis is driven by ${clients} client
processes of the same shape (bench/redis-load.ts: ${args.connections} connections to each shard, ${args.concurrency} requests
in flight, the same keys and ~200-byte items, a key prefix per client): put is HSET of a new item, get HGETALL
of an item put wrote, range ZRANGEBYLEX of 100 items from a sorted set per device (100,000 items preloaded per
client, as load.ts preloads range's), batch 25 new items' HSETs in one pipeline (one per shard in a cluster).
The cluster client is the bench's own: CRC16 slots (bench/redis-slot.ts) over the CLUSTER SLOTS map, MOVED
answered by reading the map again. ${redisNote}

${roundCount} round${roundCount === 1 ? '' : 's'}: each ran every keyslice shape and every Redis once, the order turned by one from
round to round; each figure below is the median over the rounds (each figure on its own; of an even count, the mean
of the two middle values; errors are summed, by code: their count, then each code's).
Within a round, ops/s and items/s: all clients together; p50: the median of the clients' p50; p99: the worst
client's p99 (ms).

| system | workload | ops/s | items/s | p50 ms | p99 ms | errors |
|---|---|---:|---:|---:|---:|---|
${resultLines.join('\n')}

## keyslice beside Redis

Per shape and workload: keyslice's figure (ops/s for put and get, items/s for range and batch), one Redis
server's, and a Redis Cluster's with as many shards as the shape has slice nodes, each with keyslice's ratio to it.

| shape | workload | keyslice | Redis, one server | keyslice / Redis | Redis Cluster (shards = nodes) | keyslice / Redis Cluster |
|---|---|---:|---:|---:|---:|---:|
${sideLines.join('\n')}

${replicationLines.length === 0 ? '' : `## Replication factors side by side

Shapes that differ only in R (every write acknowledged once a majority of R copies hold it), in this run:

| shapes | workload | higher R | lower R | ratio |
|---|---|---:|---:|---:|
${replicationLines.join('\n')}

On one machine the R copies share its cores: at R=3 each write costs the CPU of three replicas. Whether that is
what bounds the ratio shows below: a thread near 100%, or the whole machine near 100% busy, is a CPU bound; with
neither, a write waits on its replication round trip (more threads' turns per write), and a closed loop with more
requests in flight gets more writes per second (bench/README.md, "Replication on slice nodes").

`}## CPU of each server process while its clients ran (% of one core, all threads; preloading included; median over the rounds)

${workloads.length === 1 ? `One workload (${workloads[0]}): each figure is its alone, its preloading included.` : clientRuns.length === 1 ? `Over each system's whole client run: every workload (${workloads.join(', ')}) in turn, so a figure is their mix (\`--cpu-by-workload yes\` gives one per workload).` : 'One client run per workload (`--cpu-by-workload yes`): each figure is that workload\'s alone, its preloading included.'}

${[...cpuShares].map(([label, shares]) => `- ${label}: ${machineBusy.has(label) ? `(the whole machine ${Math.round(median(machineBusy.get(label)!))}% busy, clients included) ` : ''}${[...shares].map(([name, pct]) => `${name} ${Math.round(median(pct))}%`).join(', ')}${redirectsMet.has(label) ? `; MOVED answers met by its clients: ${redirectsMet.get(label)}` : ''}`).join('\n')}

## CPU of the threads that do the work (% of one core; median over the rounds)

A process's main thread and, in slice nodes, each worker thread (the rest of its CPU is V8's collector and compiler
threads and libuv's pool). A thread near 100% is the limit of its process whatever the process's total says.

${[...threadShares].filter(([, byName]) => byName.size > 0).map(([label, byName]) => `- ${label}: ${[...byName].map(([name, t]) => `${name} main ${Math.round(median(t.main))}%${t.workers.length > 0 ? `, workers ${t.workers.map((w) => `${Math.round(median(w))}%`).join(' / ')}` : ''}`).join('; ')}`).join('\n')}
${failedRounds.length > 0 ? `\nFailed rounds (the figures above are the medians of the others):\n\n${failedRounds.map((f) => `- ${f}`).join('\n')}\n` : ''}
Clients, routers, slice nodes and Redis servers all share this machine's ${availableParallelism()} cores: once they
want more CPU than that, a shape with more routers cannot add throughput. Compare systems within a run, and
choose shapes that fit the cores (bench/README.md says how to carry the benchmark to a larger machine).
`;
writeFileSync(resolve(args.out), report);
log(`wrote ${resolve(args.out)}`);
await Promise.all([...children].map((c) => stopProcess(c)));
await stopAll();

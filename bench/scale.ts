// npm run bench:scale: how throughput grows with the shape of a cluster. For each
// shape (routers, slice nodes, workers per node) it starts a local cluster, drives
// it from several client processes at once (each one bench/load.ts --url, with its
// own table), and writes bench/SCALE.md: per workload the ops/s of all clients
// together, the median of their p50 and the worst of their p99. Every process is
// started here and stopped here by its PID; each client run is bounded by
// --duration (and load.ts's own op bound).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newClusterSecret, startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { intArg, parseArgs, fail } from '../shared/cli-args.js';

const here = dirname(fileURLToPath(import.meta.url));
const args = parseArgs(
  process.argv.slice(2),
  {
    shapes: { default: '0:2:2,1:2:2,2:2:2', help: 'routers:nodes:workers of each cluster to measure, comma-separated' },
    clients: { default: '2', help: 'client processes driving each cluster at once' },
    workload: { default: 'put,get', help: 'bench/load.ts workloads, run in order by every client' },
    duration: { default: '10', help: 'seconds per workload' },
    connections: { default: '4', help: 'WebSocket connections per client process' },
    concurrency: { default: '32', help: 'requests in flight per client process' },
    durability: { default: 'os', help: 'the slice nodes\' durability (os: the request path is measured, not the disk)' },
    out: { default: join(here, '..', '..', 'bench', 'SCALE.md'), help: 'the report to write' },
  },
  'usage: node dist/bench/scale.js [--shapes 0:2:2,2:2:2] [--clients 2] [--workload put,get] [--duration 10]',
);
const shapes = args.shapes!.split(',').map((s) => {
  const parts = s.split(':').map(Number);
  if (parts.length !== 3 || !parts.every((n) => Number.isInteger(n) && n >= 0) || parts[1] < 1 || parts[2] < 1) fail(`--shapes: "${s}" is not routers:nodes:workers`);
  return { routers: parts[0], nodes: parts[1], workers: parts[2] };
});
const clients = intArg('clients', args.clients, 1, 64);
const duration = intArg('duration', args.duration, 1, 3600);
const workloads = args.workload!.split(',');

interface Result {
  workload: string;
  opsPerSec: number;
  errors: Record<string, number> | number;
  latencyMs: { p50: number; p99: number } | null;
}

/** One bench/load.ts client process; resolves with its results (or an error). */
function runClient(url: string): Promise<Result[]> {
  const child = spawn(
    process.execPath,
    [join(here, 'load.js'), '--url', url, '--workload', args.workload!, '--duration', String(duration), '--connections', args.connections!, '--concurrency', args.concurrency!, '--json'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  child.stderr.on('data', (c: Buffer) => (err += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), (duration * workloads.length + 300) * 1000);
  return new Promise((resolveRun, reject) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      try {
        resolveRun((JSON.parse(out) as { results: Result[] }).results);
      } catch {
        reject(new Error(`a client exited (${code}) without results: ${err.split('\n').slice(-5).join(' ')}`));
      }
    }),
  );
}

const errorCount = (e: Result['errors']) => (typeof e === 'number' ? e : Object.values(e ?? {}).reduce((a, b) => a + b, 0));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

const rows: string[] = [];
for (const shape of shapes) {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-scale-'));
  const secret = newClusterSecret();
  const procs: ManagedProcess[] = [];
  const label = `${shape.routers} routers, ${shape.nodes} nodes x ${shape.workers} workers`;
  try {
    const nodes = await Promise.all(
      Array.from({ length: shape.nodes }, (_, i) =>
        startSliceNode({ name: `slice-node-${i + 1}`, dataDir: join(dataDir, `n${i + 1}`), port: 0, workers: shape.workers, durability: args.durability as 'os', clusterSecret: secret }),
      ),
    );
    procs.push(...nodes);
    const coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, nodes.map((n) => n.url), undefined, undefined, ['--routers', String(shape.routers)], secret);
    procs.push(coordinator);
    process.stderr.write(`keyslice scale: ${label}: ${clients} clients at ${coordinator.url}\n`);
    const results = await Promise.all(Array.from({ length: clients }, () => runClient(coordinator.url)));
    for (const w of workloads) {
      const mine = results.map((r) => r.find((x) => x.workload === w)).filter((x): x is Result => x !== undefined);
      const ops = mine.reduce((a, r) => a + r.opsPerSec, 0);
      const p50 = median(mine.map((r) => r.latencyMs?.p50 ?? NaN));
      const p99 = Math.max(...mine.map((r) => r.latencyMs?.p99 ?? NaN));
      const errors = mine.reduce((a, r) => a + errorCount(r.errors), 0);
      rows.push(`| ${label} | ${w} | ${Math.round(ops).toLocaleString('en-US')} | ${p50.toFixed(2)} | ${p99.toFixed(2)} | ${errors} |`);
      process.stderr.write(`  ${w}: ${Math.round(ops)} ops/s, p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, ${errors} errors\n`);
    }
  } catch (err) {
    rows.push(`| ${label} | - | failed: ${(err as Error).message.replace(/\|/g, '/').slice(0, 200)} | | | |`);
  } finally {
    await Promise.all(procs.map((p) => stopProcess(p.child)));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const report = `# Scale: throughput by cluster shape

Written by \`npm run bench:scale\` (bench/scale.ts) on ${new Date().toISOString()}:
${cpus()[0]?.model ?? 'unknown CPU'}, ${availableParallelism()} cores, Node ${process.version}; every process on this one machine.
Each shape is a fresh local cluster (slice durability \`${args.durability}\`), driven by ${clients} client
processes at once (bench/load.ts, ${args.connections} connections and ${args.concurrency} requests in flight each,
${duration} s per workload, one table per client). ops/s: all clients together; p50: the median of
the clients' p50; p99: the worst client's p99 (ms).

| shape | workload | ops/s | p50 ms | p99 ms | errors |
|---|---|---:|---:|---:|---:|
${rows.join('\n')}

On a machine with few cores the routers, nodes and clients compete for the same
cores, so these figures say little about a larger machine: run it there with
shapes that fit its cores (e.g. \`--shapes 0:4:4,4:4:4,8:4:4 --clients 8\`).
`;
writeFileSync(resolve(args.out!), report);
process.stderr.write(`keyslice scale: wrote ${resolve(args.out!)}\n`);

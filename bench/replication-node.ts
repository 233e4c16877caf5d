// Put throughput of replicated (R=3) against unreplicated (R=1) slices, side by
// side on the same three slice node processes, driven over the node protocol as
// the coordinator drives them (no coordinator or router in the way, so the
// figure is the nodes' own cost of replication). Node 0 leads slices 0..2N-1
// (N = --slices, 8 by default); slices 0..N-1 have followers on nodes 1 and 2
// (elected with Prepare/Lead), slices N..2N-1 have one replica. A batch's puts go
// to its worker's slices in turn, so with many slices (--slices 512) each put of a
// batch is on a slice of its own, as in a cluster of 1,024 slices under random
// keys. Rounds alternate R=1 and R=3 so that the machine's other load falls on
// both alike.
//
//   npm run build && node dist/bench/replication-node.js [--seconds 5] [--rounds 2] [--warmup 0] [--in-flight 16] [--batch 32] [--slices 8] [--durability os|fsync] [--only 1|3] [--rate N] [--request-ids yes|no]
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startSliceNode, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import type { DurabilityMode } from '../shared/limits.js';
import {
  CLUSTER_SECRET_HEADER,
  decodeNodeFrame,
  decodeSliceResults,
  encodeNodeFrame,
  encodeSliceOps,
  NodeFrame,
  RESULT_OK,
  SliceOp,
  type AssignReplication,
  type NodeFrameMessage,
  type SliceOpMessage,
} from '../shared/protocol.js';
import { COORDINATOR, type ReplicationMessage } from '../shared/replication-protocol.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { cpuSecondsOf, threadCpuOf } from './proc-cpu.js';
import { workerOf } from '../shared/hashing.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    seconds: { default: '5', help: 'seconds per round' },
    rounds: { default: '2', help: 'rounds of each (R=1, R=3 alternating)' },
    warmup: { default: '0', help: 'seconds of puts at each factor before the measured rounds, not counted (the first round of a path runs it unoptimized and fills its slices\' logs)' },
    'in-flight': { default: '16', help: 'batches in flight' },
    batch: { default: '32', help: 'puts per batch' },
    slices: { default: '8', help: 'slices of each factor (node 0 leads twice as many): with more slices than a batch has puts, each put of a batch is on a slice of its own, the shape of a cluster of many slices under random keys' },
    durability: { default: 'os', help: 'os | fsync' },
    workers: { default: '2', help: 'worker threads per node' },
    only: { default: '', help: 'run only this factor (1 or 3): to profile one path alone' },
    'request-ids': { default: 'yes', help: 'yes | no: whether each put carries a request id, as a router\'s do (what applying a write once per id costs)' },
    keys: { default: '0', help: 'distinct keys the puts overwrite (0: every put a new key); with a fixed key set the state stops growing, and a log that still grows is one that is not compacted' },
    rate: { default: '0', help: 'puts per second offered, all loops together (0: as many as the nodes take); at a fixed rate, CPU per put compares builds on a busy machine' },
  },
  'usage: node dist/bench/replication-node.js [options]',
).values;
const SECONDS = intArg('seconds', args.seconds, 1, 600);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const WARMUP = intArg('warmup', args.warmup, 0, 600);
const IN_FLIGHT = intArg('in-flight', args['in-flight'], 1, 1024);
const BATCH = intArg('batch', args.batch, 1, 512);
const WORKERS = intArg('workers', args.workers, 1, 16);
const DURABILITY = args.durability as DurabilityMode;
if (args.only !== '' && args.only !== '1' && args.only !== '3') throw new Error('--only is 1 or 3');
const ONLY = args.only;
const RATE = intArg('rate', args.rate, 0, 10_000_000);
const KEYS = intArg('keys', args.keys, 0, 100_000_000);
if (args['request-ids'] !== 'yes' && args['request-ids'] !== 'no') throw new Error('--request-ids is yes or no');
const REQUEST_IDS = args['request-ids'] === 'yes';
const CLUSTER = '0123456789abcdef0123456789abcdef';
const PER_FACTOR = intArg('slices', args.slices, 1, 512);
const SLICES = 2 * PER_FACTOR;
const REPLICATED = Array.from({ length: PER_FACTOR }, (_, s) => s);
const SINGLE = Array.from({ length: PER_FACTOR }, (_, s) => PER_FACTOR + s);
const WAIT_MS = 30_000;

class Link {
  readonly ws: WebSocket;
  private readonly waiting = new Map<number, (f: NodeFrameMessage) => void>();
  private nextId = 1;
  private constructor(url: string) {
    this.ws = new WebSocket(url, { headers: { [CLUSTER_SECRET_HEADER]: '' } });
    this.ws.on('message', (data: Buffer) => {
      const f = decodeNodeFrame(data, 'coordinator');
      const key = f[0] === NodeFrame.Assigned ? -f[1] - 1 : f[0] === NodeFrame.BatchReply || f[0] === NodeFrame.BatchError ? f[1] : f[0] === NodeFrame.Replicate ? -1e9 : null;
      if (key !== null) this.waiting.get(key)?.(f);
    });
  }
  static open(url: string): Promise<Link> {
    const l = new Link(url);
    return new Promise((resolve, reject) => {
      l.ws.once('message', () => resolve(l));
      l.ws.once('error', reject);
    });
  }
  private wait(key: number): Promise<NodeFrameMessage> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no answer ${key}`)), WAIT_MS);
      this.waiting.set(key, (f) => {
        clearTimeout(t);
        this.waiting.delete(key);
        resolve(f);
      });
    });
  }
  async assign(epoch: number, led: number[], replication: AssignReplication): Promise<void> {
    const done = this.wait(-epoch - 1);
    this.ws.send(encodeNodeFrame([NodeFrame.Assign, epoch, SLICES, led, CLUSTER, replication]));
    await done;
  }
  replicate(entries: [number, ReplicationMessage][]): void {
    this.ws.send(encodeNodeFrame([NodeFrame.Replicate, COORDINATOR, entries]));
  }
  async batch(epoch: number, worker: number, ops: SliceOpMessage[]): Promise<boolean> {
    const id = this.nextId++;
    const answer = this.wait(id);
    this.ws.send(encodeNodeFrame([NodeFrame.Batch, id, epoch, [[worker, encodeSliceOps(ops)]]]));
    const f = await answer;
    return f[0] === NodeFrame.BatchReply && decodeSliceResults(f[3]).every((r) => r[0] === RESULT_OK);
  }
}

/** Bytes a process (all its threads) had written towards storage so far (/proc/PID/io write_bytes: its logs); NaN where /proc cannot tell. */
function writtenBytesOf(pid: number): number {
  try {
    return Number(/^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

const root = mkdtempSync(join(tmpdir(), 'keyslice-bench-repl-'));
const procs: ManagedProcess[] = [];
try {
  for (let i = 0; i < 3; i++) procs.push(await startSliceNode({ name: `node-${i}`, dataDir: join(root, `node-${i}`), port: 0, workers: WORKERS, durability: DURABILITY }));
  const links = await Promise.all(procs.map((p) => Link.open(p.url)));
  const replication = (self: number): AssignReplication => ({
    self,
    peers: [0, 1, 2].filter((n) => n !== self).map((n) => [n, procs[n].url] as [number, string]),
    replicas: REPLICATED.map((s) => [s, [0, 1, 2]] as [number, number[]]),
  });
  await links[0].assign(1, [...REPLICATED, ...SINGLE], replication(0));
  await links[1].assign(1, [], replication(1));
  await links[2].assign(1, [], replication(2));
  for (const l of links) l.replicate(REPLICATED.map((s) => [s, { type: 'Prepare', term: 1 }]));
  await new Promise((r) => setTimeout(r, 500)); // the promises are durable on every node by then
  links[0].replicate(REPLICATED.map((s) => [s, { type: 'Lead', term: 1, followers: [1, 2], sets: [] }]));
  // Serving once each slice's barrier is committed.
  for (let i = 0; i < 100; i++) {
    const ok = await Promise.all(REPLICATED.map((s) => links[0].batch(1, workerOf(s, WORKERS), [[SliceOp.Get, 1, s, 'x', null, false]])));
    if (ok.every(Boolean)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  let n = 0;
  /** Per round, the bytes the leader's node wrote to its logs per put. */
  const leaderWritten: number[] = [];
  const value = { v: 'x'.repeat(100) };
  /** Puts per second, and each slice node's CPU (all its threads) in microseconds per put: node 0 leads. */
  async function round(slices: number[], seconds = SECONDS): Promise<[rate: number, cpuUsPerPut: number[], threadUsPerPut: number[][]]> {
    const deadline = Date.now() + seconds * 1000;
    let done = 0;
    const cpu0 = procs.map((p) => cpuSecondsOf([p.child.pid!]));
    const threads0 = procs.map((p) => threadsOf(p.child.pid!));
    const written0 = writtenBytesOf(procs[0].child.pid!);
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async (_, loop) => {
        const worker = loop % WORKERS;
        const mine = slices.filter((s) => workerOf(s, WORKERS) === worker);
        const started = Date.now();
        for (let sent = 0; Date.now() < deadline; sent++) {
          // At a fixed rate, each loop sends its batches on a schedule (and catches up if it fell behind).
          const due = RATE === 0 ? 0 : started + (sent * BATCH * IN_FLIGHT * 1000) / RATE - Date.now();
          if (due > 0) await new Promise((r) => setTimeout(r, due));
          if (Date.now() >= deadline) break;
          const ops: SliceOpMessage[] = Array.from({ length: BATCH }, () => {
            const key = `k${KEYS === 0 ? n++ : n++ % KEYS}`;
            // Each put of a replicated slice carries a request id, as a router's does (coordinator/router/request-ids.ts),
            // unless told not to; one of an R=1 slice has none (a node refuses one there: worker.ts, unreplicatedWrite).
            return [SliceOp.Put, 1, mine[n % mine.length], key, { ...value }, 120, null, REQUEST_IDS && slices === REPLICATED ? [0x123456789abcd, n] : null];
          });
          if (!(await links[0].batch(1, worker, ops))) throw new Error('a put failed');
          done += BATCH;
        }
      }),
    );
    leaderWritten.push((writtenBytesOf(procs[0].child.pid!) - written0) / done);
    return [
      done / seconds,
      procs.map((p, i) => ((cpuSecondsOf([p.child.pid!]) - cpu0[i]) * 1e6) / done),
      procs.map((p, i) => threadsOf(p.child.pid!).map((s, k) => ((s - threads0[i][k]) * 1e6) / done)),
    ];
  }
  /** One node's CPU seconds so far per thread: [main, worker 0, ..., other threads]. */
  function threadsOf(pid: number): number[] {
    const t = threadCpuOf(pid, WORKERS);
    return [t.main, ...t.workers, t.other];
  }
  const rates: Record<string, number[]> = { 'R=1': [], 'R=3': [] };
  const cpu: Record<string, number[][]> = { 'R=1': [], 'R=3': [] };
  const threadCpu: Record<string, number[][][]> = { 'R=1': [], 'R=3': [] };
  const load: number[] = [];
  for (const [k, slices] of [['R=1', SINGLE], ['R=3', REPLICATED]] as const) {
    if (WARMUP > 0 && (ONLY === '' || k === `R=${ONLY}`)) await round(slices, WARMUP);
  }
  leaderWritten.length = 0;
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, slices] of [['R=1', SINGLE], ['R=3', REPLICATED]] as const) {
      if (ONLY !== '' && k !== `R=${ONLY}`) continue;
      const [rate, us, threads] = await round(slices);
      rates[k].push(rate);
      cpu[k].push(us);
      threadCpu[k].push(threads);
      load.push(loadavg()[0]);
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(`durability ${DURABILITY}, ${WORKERS} workers per node, ${PER_FACTOR} slices of each factor, ${IN_FLIGHT} batches of ${BATCH} puts in flight${REQUEST_IDS ? '' : ' (no request ids)'}, ${ROUNDS} rounds of ${SECONDS} s each, load average ${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)}`);
  for (const [k, xs] of Object.entries(rates)) {
    if (xs.length === 0) continue;
    const perNode = [0, 1, 2].map((i) => mean(cpu[k].map((c) => c[i])));
    console.log(
      `${k}: ${Math.round(mean(xs))} puts/s (rounds: ${xs.map(Math.round).join(', ')}); slice nodes' CPU ${perNode.reduce((a, b) => a + b, 0).toFixed(1)} us per put ` +
        `(leader ${perNode[0].toFixed(1)}, the others ${perNode[1].toFixed(1)} and ${perNode[2].toFixed(1)})`,
    );
    // Per thread (/proc/PID/task): main, each worker, the rest (V8's GC and compiler helpers, libuv's pool).
    const names = ['main', ...Array.from({ length: WORKERS }, (_, w) => `worker ${w}`), 'other'];
    for (const i of [0, 1, 2]) {
      const per = names.map((_, t) => mean(threadCpu[k].map((c) => c[i][t])));
      console.log(`  ${k} node ${i}${i === 0 ? ' (leader)' : ''} us per put by thread: ${names.map((n, t) => `${n} ${per[t].toFixed(1)}`).join(', ')}`);
    }
  }
  console.log(`leader's node wrote ${leaderWritten.map((b) => b.toFixed(0)).join(', ')} bytes to disk per put (each round)`);
  if (ONLY === '') console.log(`R=3 / R=1: ${(mean(rates['R=3']) / mean(rates['R=1'])).toFixed(2)}`);
  for (const l of links) l.ws.terminate();
} finally {
  // SIGTERM: the nodes stop cleanly (and write their CPU profiles under KEYSLICE_PROFILE_DIR, if set).
  await Promise.all(
    procs.map((p) => {
      if (p.child.exitCode !== null || p.child.signalCode !== null) return undefined;
      const exited = new Promise((r) => p.child.once('exit', r));
      p.child.kill('SIGTERM');
      const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
      return exited.then(() => clearTimeout(timer));
    }),
  );
  // What the leader's replica logs hold when it stops: what a restart reads back (records per slice, bytes on disk).
  const logDirs = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (!e.isDirectory() ? [] : e.name === 'replicas' ? [join(dir, e.name)] : logDirs(join(dir, e.name))));
  let records = 0;
  let maxRecords = 0;
  let slices = 0;
  let bytes = 0;
  for (const dir of logDirs(join(root, 'node-0'))) {
    for (const f of readdirSync(dir)) bytes += statSync(join(dir, f)).size;
    const { log } = ReplicaLog.open(dir, 'os');
    for (const s of log.sliceIds) {
      const n = log.durable(s).records.length;
      records += n;
      maxRecords = Math.max(maxRecords, n);
      slices++;
    }
  }
  if (slices > 0) console.log(`leader's replica logs at the end: ${(records / slices).toFixed(0)} records per replicated slice (at most ${maxRecords}), ${(bytes / 1024).toFixed(0)} KiB on disk`);
  rmSync(root, { recursive: true, force: true });
}

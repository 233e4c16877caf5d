// Side by side of two builds of keyslice on this machine, for work on the request
// path's hops (router -> node -> worker): `--base DIR` is a checkout of the code to
// compare against, built (DIR/dist), e.g.
//   git archive <commit> | tar -x -C /tmp/base && ln -s $PWD/node_modules /tmp/base/ && (cd /tmp/base && npx tsc -p tsconfig.json)
//   node dist/bench/hops.js --base /tmp/base [--rounds 5] [--duration 4]
// Both clusters run at once (2 nodes x 2 workers, or --nodes N: 3 for R=3; --replication-factor 1 for R=1;
// --base-replication-factor for the base side's alone, e.g. R=1 against R=3 with --base of this build;
// durability os, the default routers; --with-r1: a third cluster, of this build at R=1, alternated with them),
// each loaded with the same data (--devices devices, 50 by default, of 100 items, in each of three tables); every
// workload runs on one and then the other, the order alternating from round to round, and each figure is the median
// over the rounds.
// Workloads: the native WebSocket client (GetItem and PutItem at 1 in flight, PutItem and GetItem at
// 256 in flight over 4 connections (--connections N), GetItems of 100 at 1, 50 (bench:compare's), 64 and 256 in flight, the same by forEachItemPage at 50 and 256, of 100 from 8 buckets
// of an even-distribution table, scan pages) and the DynamoDB
// endpoint over plain HTTP/1.1 keep-alive (unsigned JSON, no SDK: GetItem at 1 and at
// 64 in flight, one request per socket at a time, as the AWS SDK sends them), and the same endpoint driven by the AWS SDK
// v3 itself (PutItem, GetItem and Query of 100 at 50 in flight from --sdk-processes client processes of bench/sdk-clients.ts
// per cluster, bench:compare's client shape; needs bench/peers' npm packages): the requests as the SDK signs and sends them.
// --base-client: the base side's WebSocket clients are the base build's too (else both sides use this build's).
// Prints a Markdown table (server CPU: coordinator, its routers and the nodes, all threads), and the write syscalls per op
// of the routers and the nodes (/proc/PID/io: a router makes one per frame it sends, to a node or to a client).
// On a loaded machine the cluster started first (the base) has tended to use less CPU per op, clients and nodes
// included: run it both ways round as well (the other build's hops.js with --base this checkout) before reading a
// difference of a few percent (bench/PROFILE.md, "the router's CPU per point op, second pass").
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { KeysliceClient } from '../coordinator/client/client.js';
import type { LocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, numberArg, readCommandLine } from '../shared/cli-args.js';
import type { Request } from '../shared/api.js';
import type { Item } from '../shared/values.js';
import { PEERS_DIR } from './peers.js';
import { childPids, writeSyscallsOf } from './proc-cpu.js';
import { SDK_SECRET_ACCESS_KEY, SdkClientPool, type SdkWorkload } from './sdk-clients.js';
import { benchTempDir, removeBenchDir, stopAll, stopAllOnExit } from './stop-all.js';
import { median } from './median.js';

const opts = readCommandLine(
  process.argv.slice(2),
  {
    base: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '4' },
    only: { type: 'string' },
    profile: { type: 'string' },
    // 3: the shape of `npm start` (3 nodes, every slice on all three, R=3); 2: the shape of earlier runs.
    nodes: { type: 'string', default: '2' },
    // 1: unreplicated slices (the shape of the 16-core scale runs); by default the coordinator's own (auto: R = nodes, at most 3).
    'replication-factor': { type: 'string' },
    // The base side's replication factor, where it differs (--base of this same build: R=1 against R=3 side by side).
    'base-replication-factor': { type: 'string' },
    // A third cluster, of this build at R=1, in the same rounds: the R / R=1 ratio of one run (issue 14's target).
    'with-r1': { type: 'boolean', default: false },
    // The clients of "this" side send frames with the zero mask (ClientOptions.maskFrames false); with --base DIR of
    // the same build, what unmasking costs the router.
    'this-unmasked': { type: 'boolean', default: false },
    // Devices of PER_DEVICE items loaded into each table: fewer load faster (test/bench-smoke.test.ts runs 2).
    devices: { type: 'string', default: '50' },
    // The WebSocket connections that the workloads of several in flight spread over: 32 gives the 16-core scale runs'
    // 8 requests in flight per connection at 256 (bench/SCALE.md), where a connection's answers come from many batches.
    connections: { type: 'string', default: '4' },
    // The client processes of each cluster's AWS SDK workloads (bench/sdk-clients.ts), started only when one runs.
    'sdk-processes': { type: 'string', default: '2' },
    // Both clusters require a client token, the SDK clients' secret key: every SDK request's SigV4 signature is checked
    // (the other clients send it as a bearer token).
    signed: { type: 'boolean', default: false },
    // The base side's WebSocket clients are the base build's KeysliceClient (its decode of answers), not this build's:
    // for a change to the client, whose CPU is the column "client" (this process, while it drives that side alone).
    'base-client': { type: 'boolean', default: false },
  },
  'usage: node dist/bench/hops.js [--base DIR] [--rounds 5] [--duration 4] [--only WORKLOAD,...] [options] (each option: the head of bench/hops.ts)',
).values;
const ROUNDS = intArg('rounds', opts.rounds, 1, 100);
const SECONDS = numberArg('duration', opts.duration, 0.5, 600);
const NODES = intArg('nodes', opts.nodes, 1, 16);
const TABLE = 'hops';
const DDB_TABLE = 'hops_ddb';
/** The same items in an even-distribution table of EVEN_BUCKETS buckets: a GetItems by device merges them. */
const EVEN_TABLE = 'hops_even';
const EVEN_BUCKETS = 8;
const CONNECTIONS = intArg('connections', opts.connections, 1, 256);
const DEVICES = intArg('devices', opts.devices, 1, 10_000);
const PER_DEVICE = 100;
const SDK_PROCESSES = intArg('sdk-processes', opts['sdk-processes'], 1, 16);
/** The SDK workloads' requests in flight per cluster (bench:compare's). */
const SDK_IN_FLIGHT = 50;
/** Unmeasured ops of each SDK workload per client process when its pool starts: a fresh SDK client costs 3-4x the CPU of a warm one (bench/README.md). */
const SDK_WARMUP_OPS = 500;
/** The DynamoDB table's devices are named as bench/sdk-clients.ts reads them. */
const ddbDevice = (d: number) => `range-${d}`;
/** The clusters' client token (the coordinators read KEYSLICE_TOKEN), or none. */
const TOKEN = opts.signed ? SDK_SECRET_ACCESS_KEY : undefined;
if (TOKEN !== undefined) process.env.KEYSLICE_TOKEN = TOKEN;
const PAD = 'x'.repeat(160);
const OPS_MAX = 2_000_000;

interface Side {
  name: string;
  cluster: LocalCluster;
  clients: KeysliceClient[];
  agent1: http.Agent;
  agent64: http.Agent;
  port: number;
  dir: string;
  putN: number;
  /** The AWS SDK client processes, started by the first SDK workload. */
  sdk: SdkClientPool | null;
}

async function startSide(name: string, distRoot: string, rf = opts['replication-factor']): Promise<Side> {
  const lc = (await import(pathToFileURL(join(distRoot, 'coordinator', 'cli', 'local-cluster.js')).href)) as typeof import('../coordinator/cli/local-cluster.js');
  const dir = benchTempDir(`keyslice-hops-${name}-`);
  const cluster = await lc.startLocalCluster({ dataDir: dir, nodes: NODES, workers: 2, durability: 'os', ...(rf === undefined ? {} : { replicationFactor: rf === 'auto' ? 'auto' : Number(rf) }) });
  const Client =
    name === 'base' && opts['base-client']
      ? ((await import(pathToFileURL(join(distRoot, 'coordinator', 'client', 'client.js')).href)) as typeof import('../coordinator/client/client.js')).KeysliceClient
      : KeysliceClient;
  const clients: KeysliceClient[] = [];
  const maskFrames = !(name === 'this' && opts['this-unmasked']);
  for (let i = 0; i < CONNECTIONS; i++) clients.push(await Client.connect(cluster.url, { requestTimeoutMs: 10_000, maskFrames, ...(TOKEN === undefined ? {} : { token: TOKEN }) }));
  const port = Number(new URL(cluster.url).port);
  const side: Side = { name, cluster, clients, agent1: new http.Agent({ keepAlive: true, maxSockets: 1 }), agent64: new http.Agent({ keepAlive: true, maxSockets: 64 }), port, dir, putN: 0, sdk: null };
  await clients[0].createTable(TABLE, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
  await clients[0].createTable(EVEN_TABLE, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' }, { evenDistribution: { buckets: EVEN_BUCKETS } });
  await ddb(side, side.agent1, 'CreateTable', {
    TableName: DDB_TABLE,
    AttributeDefinitions: [{ AttributeName: 'device', AttributeType: 'S' }, { AttributeName: 'seq', AttributeType: 'N' }],
    KeySchema: [{ AttributeName: 'device', KeyType: 'HASH' }, { AttributeName: 'seq', KeyType: 'RANGE' }],
    BillingMode: 'PAY_PER_REQUEST',
  });
  for (let d = 0; d < DEVICES; d++) {
    const rows = Array.from({ length: PER_DEVICE }, (_, s) => ({ device: `d${d}`, seq: s, payload: PAD }));
    for (let i = 0; i < rows.length; i += 25) {
      const part = rows.slice(i, i + 25);
      const failed = await clients[0].batchWrite(TABLE, { puts: part as unknown as Item[] });
      if (failed.length > 0) throw new Error(`${name}: load failed`);
      if ((await clients[0].batchWrite(EVEN_TABLE, { puts: part as unknown as Item[] })).length > 0) throw new Error(`${name}: load of ${EVEN_TABLE} failed`);
      const r = (await ddb(side, side.agent1, 'BatchWriteItem', { RequestItems: { [DDB_TABLE]: part.map((row) => ({ PutRequest: { Item: { device: { S: ddbDevice(d) }, seq: { N: String(row.seq) }, payload: { S: row.payload } } } })) } })) as { UnprocessedItems?: Record<string, unknown[]> };
      if ((r.UnprocessedItems?.[DDB_TABLE]?.length ?? 0) > 0) throw new Error(`${name}: ddb load left items`);
    }
  }
  return side;
}

function ddb(side: Side, agent: http.Agent, target: string, body: unknown): Promise<unknown> {
  const data = JSON.stringify(body);
  return new Promise((done, fail) => {
    const req = http.request(
      { host: '127.0.0.1', port: side.port, path: '/', method: 'POST', agent, timeout: 10_000, headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': `DynamoDB_20120810.${target}`, 'content-length': Buffer.byteLength(data), ...(TOKEN === undefined ? {} : { authorization: `Bearer ${TOKEN}` }) } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (b: Buffer) => parts.push(b));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString();
          if (res.statusCode !== 200) fail(new Error(`${target}: ${res.statusCode} ${text.slice(0, 200)}`));
          else done(JSON.parse(text));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', fail);
    req.end(data);
  });
}

const rnd = (n: number) => Math.floor(Math.random() * n);
/** One page of a GetItems by forEachItemPage: its item count. */
async function pageOf(client: KeysliceClient, request: Request<'GetItems'>): Promise<number> {
  if (typeof client.forEachItemPage !== 'function') throw new Error('this client has no forEachItemPage (a --base-client build before it)');
  return (await client.forEachItemPage(request, () => {}, { maxPages: 1 })).items;
}
type Op = (side: Side, loop: number) => Promise<number>;
interface Workload {
  name: string;
  inFlight: number;
  op: Op;
  /** Driven by the side's AWS SDK client processes instead of `op`. */
  sdk?: SdkWorkload;
}
const viaSdk = (): never => {
  throw new Error('an SDK workload runs in bench/sdk-clients.ts');
};
const WORKLOADS: Workload[] = [
  { name: 'ws GetItem, 1 in flight', inFlight: 1, op: async (s) => ((await s.clients[0].getItem(TABLE, { device: `d${rnd(DEVICES)}`, seq: rnd(PER_DEVICE) })) === null ? fail() : 1) },
  { name: 'ws PutItem, 1 in flight', inFlight: 1, op: async (s) => (await s.clients[0].putItem(TABLE, { device: `p${s.putN % 10_000}`, seq: Math.floor(s.putN++ / 10_000), payload: PAD }), 1) },
  { name: 'ws PutItem, 256 in flight', inFlight: 256, op: async (s, j) => (await s.clients[j % s.clients.length].putItem(TABLE, { device: `p${s.putN % 10_000}`, seq: Math.floor(s.putN++ / 10_000), payload: PAD }), 1) },
  { name: 'ws GetItem, 256 in flight', inFlight: 256, op: async (s, j) => ((await s.clients[j % s.clients.length].getItem(TABLE, { device: `d${rnd(DEVICES)}`, seq: rnd(PER_DEVICE) })) === null ? fail() : 1) },
  { name: 'ws GetItems of 100, 1 in flight (items/s)', inFlight: 1, op: async (s) => (await s.clients[0].getItems({ table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 })).items.length },
  { name: 'ws GetItems of 100, 64 in flight (items/s)', inFlight: 64, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 })).items.length },
  // Issue 15's load shape for a range: 256 in flight over the connections.
  { name: 'ws GetItems of 100, 256 in flight (items/s)', inFlight: 256, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 })).items.length },
  // bench:compare's range shape: 50 in flight over the 4 connections.
  { name: 'ws GetItems of 100, 50 in flight (items/s)', inFlight: 50, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 })).items.length },
  // The same ranges read with forEachItemPage (one page: the same request), whose promise does not hold the page
  // (bench/PROFILE.md, "forEachItemPage"); a --base-client build older than it has no such method.
  { name: 'ws forEachItemPage of 100, 50 in flight (items/s)', inFlight: 50, op: (s, j) => pageOf(s.clients[j % s.clients.length], { table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 }) },
  { name: 'ws forEachItemPage of 100, 256 in flight (items/s)', inFlight: 256, op: (s, j) => pageOf(s.clients[j % s.clients.length], { table: TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 }) },
  { name: `ws GetItems of 100 from ${EVEN_BUCKETS} buckets, 50 in flight (items/s)`, inFlight: 50, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: EVEN_TABLE, shardingKey: `d${rnd(DEVICES)}`, limit: 100 })).items.length },
  // A full-table scan's page (no sharding key): one of 64 segments, 100 items of it.
  { name: 'ws scan page of 100, 50 in flight (items/s)', inFlight: 50, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: TABLE, segment: rnd(64), totalSegments: 64, limit: 100 })).items.length },
  // A page of the whole table: every worker is asked, for all the slices it owns (a Scan names them).
  { name: 'ws scan page of 100 of the whole table, 50 in flight (items/s)', inFlight: 50, op: async (s, j) => (await s.clients[j % s.clients.length].getItems({ table: TABLE, limit: 100 })).items.length },
  { name: 'ws BatchGet of 25, 50 in flight (items/s)', inFlight: 50, op: async (s, j) => (await s.clients[j % s.clients.length].batchGet(TABLE, batchKeys())).items.length },
  { name: 'http DynamoDB GetItem, 1 in flight', inFlight: 1, op: async (s) => ((await ddb(s, s.agent1, 'GetItem', { TableName: DDB_TABLE, Key: { device: { S: ddbDevice(rnd(DEVICES)) }, seq: { N: String(rnd(PER_DEVICE)) } } })) as { Item?: unknown }).Item === undefined ? fail() : 1 },
  { name: 'http DynamoDB GetItem, 64 in flight', inFlight: 64, op: async (s) => (((await ddb(s, s.agent64, 'GetItem', { TableName: DDB_TABLE, Key: { device: { S: ddbDevice(rnd(DEVICES)) }, seq: { N: String(rnd(PER_DEVICE)) } } })) as { Item?: unknown }).Item === undefined ? fail() : 1) },
  { name: 'http DynamoDB Query of 100, 16 in flight (items/s)', inFlight: 16, op: async (s) => ((await ddb(s, s.agent64, 'Query', { TableName: DDB_TABLE, KeyConditionExpression: 'device = :d', ExpressionAttributeValues: { ':d': { S: ddbDevice(rnd(DEVICES)) } }, Limit: 100 })) as { Items: unknown[] }).Items.length },
  { name: `sdk PutItem, ${SDK_IN_FLIGHT} in flight`, inFlight: SDK_IN_FLIGHT, op: viaSdk, sdk: 'put' },
  { name: `sdk GetItem, ${SDK_IN_FLIGHT} in flight`, inFlight: SDK_IN_FLIGHT, op: viaSdk, sdk: 'get' },
  { name: `sdk Query of 100, ${SDK_IN_FLIGHT} in flight (items/s)`, inFlight: SDK_IN_FLIGHT, op: viaSdk, sdk: 'range' },
];
/** 25 random keys of the data set, each once. */
function batchKeys(): { device: string; seq: number }[] {
  const keys = new Map<string, { device: string; seq: number }>();
  while (keys.size < 25) {
    const k = { device: `d${rnd(DEVICES)}`, seq: rnd(PER_DEVICE) };
    keys.set(`${k.device}.${k.seq}`, k);
  }
  return [...keys.values()];
}
function fail(): never {
  throw new Error('an item of the data set is missing');
}

interface Sample {
  rate: number;
  p50: number;
  p99: number;
  cpuMsPerOp: number;
  /** Of cpuMsPerOp: the slice nodes' share (the rest is the coordinator and its routers). */
  nodeCpuMsPerOp: number;
  /** CPU ms per op of each kind of process (PARTS). */
  parts: number[];
  /** Write syscalls per op of the routers (socket writes: frames to the nodes and to the clients) and of the slice
   * nodes (their frames back, and their logs' writes). */
  routerWritesPerOp: number;
  nodeWritesPerOp: number;
}

/** Where the CPU per op went: the bench's own process (the client), the routers (the
 * coordinator's children), the coordinator itself, the slice nodes' main threads, and
 * their other threads (the worker threads, with V8's and libuv's helper threads). */
const PARTS = ['client', 'routers', 'coordinator', 'node main threads', 'node other threads'];

/** CPU seconds of each of PARTS so far, from /proc (threads: /proc/PID/task/TID/stat). */
function partsOf(side: Side): number[] {
  const ticks = (path: string) => {
    try {
      const stat = readFileSync(path, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(f[11]) + Number(f[12]);
    } catch {
      return 0; // gone
    }
  };
  const self = process.cpuUsage();
  const coordinator = side.cluster.coordinator.child.pid!;
  let routers = 0;
  for (const tid of readdirSync(`/proc/${coordinator}/task`)) {
    const kids = readFileSync(`/proc/${coordinator}/task/${tid}/children`, 'utf8').trim();
    if (kids !== '') for (const k of kids.split(' ')) routers += ticks(`/proc/${k}/stat`);
  }
  let main = 0;
  let other = 0;
  for (const node of side.cluster.nodes) {
    const pid = node.child.pid!;
    const all = ticks(`/proc/${pid}/stat`);
    const mainThread = ticks(`/proc/${pid}/task/${pid}/stat`);
    main += mainThread;
    other += all - mainThread;
  }
  return [(self.user + self.system) / 1e6, routers / 100, ticks(`/proc/${coordinator}/stat`) / 100, main / 100, other / 100];
}

/** CPU seconds of a process and its children (the routers), all threads. */
function cpuOf(pids: number[]): number {
  let ticks = 0;
  const seen = new Set<number>();
  const visit = (pid: number) => {
    if (seen.has(pid)) return;
    seen.add(pid);
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const kids = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
        if (kids !== '') for (const k of kids.split(' ')) visit(Number(k));
      }
    } catch {
      // gone
    }
  };
  for (const p of pids) visit(p);
  return ticks / 100;
}

/** The side's AWS SDK client processes, started (and warmed: SDK_WARMUP_OPS of each SDK workload) on first use. */
async function sdkPool(side: Side): Promise<SdkClientPool> {
  if (side.sdk !== null) return side.sdk;
  const shape = { rangeDevices: DEVICES, rangeItems: PER_DEVICE, putKeys: 10_000, putPadding: PAD };
  side.sdk = await SdkClientPool.start({ processes: SDK_PROCESSES, inFlight: SDK_IN_FLIGHT, endpoint: side.cluster.url, table: DDB_TABLE, peersDir: PEERS_DIR, timeoutMs: 10_000, shape, onSpawn: () => {} });
  for (const w of ['put', 'get', 'range'] as const) await side.sdk.run(w, 20, SDK_WARMUP_OPS * SDK_PROCESSES, false);
  return side.sdk;
}

async function measure(side: Side, w: Workload): Promise<Sample> {
  const pids = [side.cluster.coordinator, ...side.cluster.nodes].map((p) => p.child.pid!);
  const nodePids = side.cluster.nodes.map((p) => p.child.pid!);
  const runFor = async (seconds: number, record: boolean) => {
    if (w.sdk !== undefined) {
      const got = await (await sdkPool(side)).run(w.sdk, seconds, OPS_MAX, record);
      const failed = Object.entries(got.errors);
      if (failed.length > 0) throw new Error(`${side.name}: ${w.name}: errors ${JSON.stringify(got.errors)}`);
      return { ops: got.ok, items: got.items, lat: Array.from(got.latencies) };
    }
    const lat: number[] = [];
    let ops = 0;
    let items = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: w.inFlight }, async (_, j) => {
        while (performance.now() < end && ops < OPS_MAX) {
          const t0 = performance.now();
          const got = await w.op(side, j);
          items += got;
          ops++;
          if (record) lat.push(performance.now() - t0);
        }
      }),
    );
    return { ops, items, lat };
  };
  await runFor(0.5, false);
  const cpu0 = cpuOf(pids);
  const nodeCpu0 = cpuOf(nodePids);
  const parts0 = partsOf(side);
  const routerPids = childPids(side.cluster.coordinator.child.pid!);
  const writes0 = [writeSyscallsOf(routerPids), writeSyscallsOf(nodePids)];
  const t0 = performance.now();
  const r = await runFor(SECONDS, true);
  const secs = (performance.now() - t0) / 1000;
  const cpu = cpuOf(pids) - cpu0;
  const nodeCpu = cpuOf(nodePids) - nodeCpu0;
  const parts = partsOf(side).map((x, k) => ((x - parts0[k]) * 1000) / r.ops);
  const writes = [writeSyscallsOf(routerPids) - writes0[0], writeSyscallsOf(nodePids) - writes0[1]].map((x) => x / r.ops);
  r.lat.sort((a, b) => a - b);
  return { rate: (w.name.includes('items/s') ? r.items : r.ops) / secs, p50: r.lat[Math.floor(r.lat.length / 2)], p99: r.lat[Math.min(r.lat.length - 1, Math.floor(r.lat.length * 0.99))], cpuMsPerOp: (cpu * 1000) / r.ops, nodeCpuMsPerOp: (nodeCpu * 1000) / r.ops, parts, routerWritesPerOp: writes[0], nodeWritesPerOp: writes[1] };
}


/** `--profile DIR --only NAME`: one cluster of this build with every process under `node --cpu-prof`
 * (profiles of main and worker threads land in DIR when the processes stop), driven by the workloads
 * whose name contains NAME (or one of NAME|NAME, as in a side by side) for --duration seconds each. Summarize with dist/bench/profile-top.js. */
async function profile(dir: string): Promise<void> {
  process.env.KEYSLICE_PROFILE_DIR = resolve(dir);
  const side = await startSide('profiled', resolve(new URL('.', import.meta.url).pathname, '..'));
  delete process.env.KEYSLICE_PROFILE_DIR;
  try {
    for (const w of WORKLOADS.filter((x) => opts.only === undefined || opts.only.split('|').some((o) => x.name.includes(o)))) {
      const s = await measure(side, w);
      process.stderr.write(`${w.name}: ${Math.round(s.rate)}/s p50 ${s.p50.toFixed(3)} ms cpu ${s.cpuMsPerOp.toFixed(3)} ms/op; ${PARTS.map((p, k) => `${p} ${s.parts[k].toFixed(3)}`).join(', ')} ms/op; write syscalls per op: routers ${s.routerWritesPerOp.toFixed(3)}, nodes ${s.nodeWritesPerOp.toFixed(3)}\n`);
    }
  } finally {
    await Promise.allSettled(side.clients.map((c) => c.close()));
    await side.sdk?.close();
    side.agent1.destroy();
    side.agent64.destroy();
    await side.cluster.stop();
    removeBenchDir(side.dir);
  }
}

async function main(): Promise<void> {
  if (opts.profile !== undefined) return profile(opts.profile);
  if (opts.base === undefined) throw new Error('--base DIR (a built checkout to compare with) is required');
  const here = resolve(new URL('.', import.meta.url).pathname, '..');
  const sides: Side[] = [];
  const workloads = opts.only === undefined ? WORKLOADS : WORKLOADS.filter((w) => opts.only!.split('|').some((o) => w.name.includes(o)));
  const results = new Map<string, Sample[][]>();
  try {
    // A side that fails while it starts or loads its data leaves its processes to stopAll (bench/stop-all.ts).
    sides.push(await startSide('base', join(resolve(opts.base), 'dist'), opts['base-replication-factor'] ?? opts['replication-factor']));
    sides.push(await startSide('this', here));
    if (opts['with-r1']) sides.push(await startSide('r1', here, '1'));
    for (const w of workloads) results.set(w.name, sides.map(() => []));
    for (let round = 0; round < ROUNDS; round++) {
      for (const w of workloads) {
        const order = sides.map((_, i) => (i + round) % sides.length);
        for (const i of order) {
          const s = await measure(sides[i], w);
          results.get(w.name)![i].push(s);
          process.stderr.write(`round ${round + 1} ${w.name.padEnd(48)} ${sides[i].name.padEnd(5)} ${Math.round(s.rate).toString().padStart(7)}/s p50 ${s.p50.toFixed(3)} p99 ${s.p99.toFixed(3)} ms cpu ${s.cpuMsPerOp.toFixed(3)} ms/op (nodes ${s.nodeCpuMsPerOp.toFixed(3)}) [${s.parts.map((x) => x.toFixed(3)).join(' ')}] writes/op router ${s.routerWritesPerOp.toFixed(3)} nodes ${s.nodeWritesPerOp.toFixed(3)} load ${loadavg()[0].toFixed(1)}\n`);
        }
      }
    }
  } finally {
    for (const s of sides) {
      await Promise.allSettled(s.clients.map((c) => c.close()));
      await s.sdk?.close();
      s.agent1.destroy();
      s.agent64.destroy();
      await s.cluster.stop();
      removeBenchDir(s.dir);
    }
  }
  console.log(`| workload | base ops/s | this ops/s | this / base | base p50 ms | this p50 ms | base p99 ms | this p99 ms | base server CPU ms/op (nodes) | this (nodes) |`);
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const w of workloads) {
    const [b, t] = results.get(w.name)!;
    const m = (xs: Sample[], k: Exclude<keyof Sample, 'parts'>) => median(xs.map((x) => x[k]));
    console.log(`| ${w.name} | ${Math.round(m(b, 'rate'))} | ${Math.round(m(t, 'rate'))} | ${(m(t, 'rate') / m(b, 'rate')).toFixed(2)}x | ${m(b, 'p50').toFixed(3)} | ${m(t, 'p50').toFixed(3)} | ${m(b, 'p99').toFixed(3)} | ${m(t, 'p99').toFixed(3)} | ${m(b, 'cpuMsPerOp').toFixed(3)} (${m(b, 'nodeCpuMsPerOp').toFixed(3)}) | ${m(t, 'cpuMsPerOp').toFixed(3)} (${m(t, 'nodeCpuMsPerOp').toFixed(3)}) |`);
  }
  if (sides.length === 3) {
    console.log('');
    console.log(`| workload | this R=1 ops/s | this / R=1 | base / R=1 | R=1 p50 ms | R=1 p99 ms | R=1 server CPU ms/op (nodes) |`);
    console.log('|---|--:|--:|--:|--:|--:|--:|');
    for (const w of workloads) {
      const [b, t, one] = results.get(w.name)!;
      const m = (xs: Sample[], k: Exclude<keyof Sample, 'parts'>) => median(xs.map((x) => x[k]));
      console.log(`| ${w.name} | ${Math.round(m(one, 'rate'))} | ${(m(t, 'rate') / m(one, 'rate')).toFixed(2)}x | ${(m(b, 'rate') / m(one, 'rate')).toFixed(2)}x | ${m(one, 'p50').toFixed(3)} | ${m(one, 'p99').toFixed(3)} | ${m(one, 'cpuMsPerOp').toFixed(3)} (${m(one, 'nodeCpuMsPerOp').toFixed(3)}) |`);
    }
  }
  console.log('');
  console.log(`| workload: CPU ms per op, base -> this (medians) | ${PARTS.join(' | ')} |`);
  console.log(`|---|${PARTS.map(() => '--:').join('|')}|`);
  for (const w of workloads) {
    const [b, t] = results.get(w.name)!;
    const m = (xs: Sample[], k: number) => median(xs.map((x) => x.parts[k]));
    console.log(`| ${w.name} | ${PARTS.map((_, k) => `${m(b, k).toFixed(3)} -> ${m(t, k).toFixed(3)}`).join(' | ')} |`);
  }
  console.log('');
  console.log('| workload: write syscalls per op, base -> this (medians) | routers | nodes |');
  console.log('|---|--:|--:|');
  for (const w of workloads) {
    const [b, t] = results.get(w.name)!;
    const m = (xs: Sample[], k: 'routerWritesPerOp' | 'nodeWritesPerOp') => median(xs.map((x) => x[k])).toFixed(3);
    console.log(`| ${w.name} | ${m(b, 'routerWritesPerOp')} -> ${m(t, 'routerWritesPerOp')} | ${m(b, 'nodeWritesPerOp')} -> ${m(t, 'nodeWritesPerOp')} |`);
  }
  // The client's (this process: see --base-client), the routers' and the nodes' CPU per op (the nodes: main and other
  // threads, workers included) finer than whole µs, and round by round: each round measures both builds under about the
  // same load, so the median of the rounds' ratios is steadier than the ratio of the medians on a shared machine.
  const ROUTERS = PARTS.indexOf('routers');
  const NODES = [PARTS.indexOf('node main threads'), PARTS.indexOf('node other threads')];
  const by: [string, (x: Sample) => number][] = [
    ['client', (x) => x.parts[PARTS.indexOf('client')]],
    ['routers', (x) => x.parts[ROUTERS]],
    ['nodes', (x) => NODES.reduce((sum, k) => sum + x.parts[k], 0)],
  ];
  for (const [who, of] of by) {
    console.log('');
    console.log(`| workload | ${who.endsWith('s') ? `${who}'` : `${who}'s`} CPU µs per op, base | this | this / base, median of the rounds' ratios | rounds where this used less |`);
    console.log('|---|--:|--:|--:|--:|');
    for (const w of workloads) {
      const [b, t] = results.get(w.name)!;
      const ratios = b.map((x, r) => of(t[r]) / of(x));
      const lower = ratios.filter((x) => x < 1).length;
      console.log(`| ${w.name} | ${(median(b.map(of)) * 1000).toFixed(1)} | ${(median(t.map(of)) * 1000).toFixed(1)} | ${median(ratios).toFixed(2)}x | ${lower} of ${ratios.length} |`);
    }
  }
}

stopAllOnExit((line) => process.stderr.write(`hops: ${line}\n`));
main().then(
  () => stopAll().then(() => process.exit(0)),
  (err) => {
    console.error(err);
    return stopAll().then(() => process.exit(1));
  },
);

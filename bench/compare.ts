// The comparison (issue 7): keyslice side by side with Redis (driven by ioredis)
// and dynalite (driven by the AWS SDK v3), in one run on this machine, with one
// closed-loop driver and three adapters. It
//   1. makes sure the peers are there: Debian's redis-server (apt-get, installed
//      if missing) and, in bench/peers/node_modules, dynalite, the AWS SDK v3
//      DynamoDB client and ioredis (npm, from bench/peers/package.json and its
//      lock; loaded with createRequire, never keyslice dependencies);
//   2. starts Redis (loopback, no persistence), dynalite (loopback, in memory)
//      and two local keyslice clusters (2 slice nodes x 2 workers each), one
//      with durability 'os' (comparable to Redis without persistence) and one
//      with 'fsync' (its writes are reported in their own row);
//   3. loads the same data set into each and runs point writes, point reads and
//      range reads of 100 items against each, the same concurrency over the same
//      number of connections, each run bounded by an op count and a time, after
//      an unmeasured warm-up, in interleaved rounds;
//   4. writes bench/RESULTS.md with the medians, the ratios and the targets.
// It also drives keyslice's DynamoDB-compatible endpoint with the same AWS SDK
// client as dynalite (issue 11: the SDK against keyslice vs the SDK against
// dynalite) and, as the ceiling of both, a null server that answers every
// request with a ready answer at almost no cost (bench/null-dynamodb.ts): the
// most any server could reach through that client shape on this machine.
// `--only dynamodb` runs just those three, quickly, and writes
// bench/DYNAMODB.md. The DynamoDB APIs are driven from --sdk-processes client
// processes of their own (bench/sdk-clients.ts), since one SDK client was the
// limit of both.
// Every process it starts is stopped by it, by its PID, also on an error and on
// Ctrl-C. Only 127.0.0.1 is contacted.
//
//   npm run bench:compare [-- --rounds 3 --duration 8 --warmup 2] [-- --only dynamodb]
import { type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { KeysliceClient } from '../coordinator/client/client.js';
import { spawnUntilReady, startLocalCluster, stopProcess, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { anyNumber, readCommandLine, refuseCommandLine, UsageError, wholeNumber } from '../shared/cli-args.js';
import { KeysliceError } from '../shared/errors.js';
import { BATCH_WRITE_ITEMS_MAX, type DurabilityMode } from '../shared/limits.js';
import type { Item } from '../shared/values.js';
import { chunk, closedLoop, inBatches, NotFound, type Adapter, type Row, type Sample } from './driver.js';
import { childPids, cpuSecondsOf } from './proc-cpu.js';
import { benchTempDir, removeBenchDir, stopAll, stopAllAtExit } from './stop-all.js';
import { ensureNpmPeers, ensureRedis, PEERS_DIR, ROOT, run, versionOf } from './peers.js';
import { RedisAdapter, SEQ_DIGITS, type RedisCtor } from './redis-adapter.js';
import { median } from './median.js';
import { freePort, startRedisServer } from './redis-servers.js';
import { getInput, queryInput, SdkClientPool, sdkItem, type PoolSample } from './sdk-clients.js';

// ---- fixed shape of the comparison ------------------------------------------------

const PEER_PACKAGES = ['dynalite', 'ioredis', '@aws-sdk/client-dynamodb', '@smithy/node-http-handler'] as const;

const LOCAL_NODES = 2;
const LOCAL_WORKERS = 2;
const ITEM_BYTES = 200;
const RANGE_ITEMS = 100;
/** The read data set: RANGE_DEVICES sharding keys x RANGE_ITEMS items each, loaded into every system before the rounds. */
const RANGE_DEVICES = 200;
/** Point writes spread over this many new sharding keys (op n writes put-<n mod PUT_KEYS>, seq floor(n / PUT_KEYS)). */
const PUT_KEYS = 10_000;
const REQUEST_TIMEOUT_MS = 10_000;
/** How long each server's CPU is measured while idle, before the rounds. */
const IDLE_SECONDS = 3;
/** Each SDK client process's unmeasured ops of each workload before the rounds (default of --sdk-warmup-ops): a fresh
 * process spends 3-4x the CPU per request of a warm one on its first ~1,500 requests, while V8 compiles the SDK's
 * code (measured against the null server: about 1.9 ms per PutItem over its first 100, 0.44 ms after 3,000). */
const SDK_WARMUP_OPS_PER_PROCESS = 1_000;
/** At most this long for each system and workload of that warm-up. */
const SDK_WARMUP_SECONDS_MAX = 20;
const LOAD_IN_FLIGHT = 8;
const LOAD_ATTEMPTS = 5;
const TABLE = 'compare';
/** The table keyslice's DynamoDB endpoint serves to the SDK, made with CreateTable (not the native 'compare'). */
const SDK_TABLE = 'compare_sdk';
/** The peers' figures written in issue 7 (this machine, 50 in flight, ~200-byte items), quoted in the report's notes. */
const ANCHORS = {
  redis: { put: 26_000, get: 19_000, range: 3_200, rangeItems: 320_000 },
  dynalite: { put: 650, get: 740, range: 170 },
};
/** Issue 11's targets: keyslice's DynamoDB endpoint / dynalite, both through the AWS SDK v3. */
const DYNAMODB_TARGETS: Record<Workload, number> = { put: 10, get: 10, range: 5 };

// ---- command line -------------------------------------------------------------------

interface Config {
  rounds: number;
  durationS: number;
  warmupS: number;
  ops: number;
  concurrency: number;
  connections: number;
  /** Client processes that drive each DynamoDB API (one SDK client each). */
  sdkProcesses: number;
  /** Unmeasured ops of each workload per SDK client process before the rounds (JIT warm-up). */
  sdkWarmupOps: number;
  out: string;
  /** 'dynamodb': only keyslice's DynamoDB endpoint, dynalite and the null server, all through the AWS SDK. */
  only: 'all' | 'dynamodb';
  /** Where the SDK client processes write their CPU profiles (`node --cpu-prof`), one folder per system; '' for none. */
  sdkCpuProf: string;
}

const USAGE = `usage: npm run bench:compare [-- options]   (or: node dist/bench/compare.js [options])

Runs keyslice, Redis (ioredis) and dynalite (AWS SDK v3) side by side on this machine
and writes the table to bench/RESULTS.md. Installs the peers if they are missing:
apt-get install redis-server (needs root), npm install in bench/peers.

  --rounds N        interleaved rounds; each figure is the median over them (default 3)
  --duration S      measured seconds per run, at most (default 8)
  --warmup S        unmeasured seconds before each run (default 2)
  --ops N           measured ops per run, at most (default 1000000)
  --concurrency N   requests in flight (default 50)
  --connections N   client connections to keyslice and to Redis (default 4)
  --sdk-processes N client processes (one AWS SDK client each) that drive each DynamoDB API
                    together, the requests in flight shared among them (default 4)
  --sdk-warmup-ops N  unmeasured ops of each workload per SDK client process before the rounds,
                    at most ${SDK_WARMUP_SECONDS_MAX} s per system and workload, so that V8 has compiled the SDK's code
                    (default ${SDK_WARMUP_OPS_PER_PROCESS}; 0: none, only each run's --warmup)
  --only dynamodb   only keyslice's DynamoDB endpoint, dynalite and the null server (the ceiling),
                    all through the AWS SDK v3 (no Redis, no native client, no fsync cluster);
                    report in bench/DYNAMODB.md
  --sdk-cpu-prof DIR  run the SDK client processes under node --cpu-prof, their profiles in
                    DIR/<system>/ (summarize them: node dist/bench/profile-top.js DIR/<system>)
  --out FILE        where the report goes (default bench/RESULTS.md; with --only dynamodb, bench/DYNAMODB.md)`;

function parseArgs(argv: string[]): Config {
  const cfg: Config = { rounds: 3, durationS: 8, warmupS: 2, ops: 1_000_000, concurrency: 50, connections: 4, sdkProcesses: 4, sdkWarmupOps: SDK_WARMUP_OPS_PER_PROCESS, out: '', only: 'all', sdkCpuProf: '' };
  const text = { type: 'string' } as const;
  const { values: v } = readCommandLine(
    argv,
    { rounds: text, duration: text, warmup: text, ops: text, concurrency: text, connections: text, 'sdk-processes': text, 'sdk-warmup-ops': text, 'sdk-cpu-prof': text, out: text, only: text },
    USAGE,
  );
  cfg.rounds = wholeNumber('rounds', v.rounds, 1, 20, cfg.rounds);
  cfg.durationS = anyNumber('duration', v.duration, 0.5, 600, { dflt: cfg.durationS });
  cfg.warmupS = anyNumber('warmup', v.warmup, 0, 60, { dflt: cfg.warmupS });
  cfg.ops = wholeNumber('ops', v.ops, 1, 100_000_000, cfg.ops);
  cfg.concurrency = wholeNumber('concurrency', v.concurrency, 1, 10_000, cfg.concurrency);
  cfg.connections = wholeNumber('connections', v.connections, 1, 64, cfg.connections);
  cfg.sdkProcesses = wholeNumber('sdk-processes', v['sdk-processes'], 1, 64, cfg.sdkProcesses);
  cfg.sdkWarmupOps = wholeNumber('sdk-warmup-ops', v['sdk-warmup-ops'], 0, 1_000_000, cfg.sdkWarmupOps);
  if (v.only !== undefined) {
    if (v.only !== 'dynamodb') throw new UsageError(`--only takes "dynamodb", got "${v.only}"`);
    cfg.only = 'dynamodb';
  }
  if (v['sdk-cpu-prof'] !== undefined) {
    if (v['sdk-cpu-prof'] === '') throw new UsageError('--sdk-cpu-prof needs a folder');
    cfg.sdkCpuProf = resolve(v['sdk-cpu-prof']);
  }
  if (v.out !== undefined) {
    if (v.out === '') throw new UsageError('--out needs a file name');
    cfg.out = resolve(v.out);
  } else {
    cfg.out = join(ROOT, 'bench', cfg.only === 'dynamodb' ? 'DYNAMODB.md' : 'RESULTS.md');
  }
  if (cfg.concurrency < cfg.connections) throw new UsageError(`--concurrency (${cfg.concurrency}) must be at least --connections (${cfg.connections})`);
  return cfg;
}

// ---- processes: every one started here is stopped here, by its PID -------------------

const children = new Set<ChildProcess>();
let interrupted = false;
/** Set once the run is over and the processes are being stopped on purpose. */
let stopping = false;

function log(line: string): void {
  process.stderr.write(`compare: ${line}\n`);
}

/** Keeps `child` among the processes to stop. */
function adopt(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** Spawns `cmd` and resolves when a line of its output matches `ready`. */
async function startChild(name: string, cmd: string, args: string[], ready: RegExp): Promise<ChildProcess> {
  return (await spawnUntilReady(name, cmd, args, ready, { onSpawn: adopt })).child;
}

// ---- 1. the peers: bench/peers.ts ---------------------------------------------------

// ---- the data ---------------------------------------------------------------------------

/** The payload that makes an item about ITEM_BYTES, counted as keyslice counts it (names + values; a number is 8). */
function paddingFor(exampleDevice: string): string {
  const fixed = 'device'.length + exampleDevice.length + 'seq'.length + 8 + 'payload'.length;
  return 'x'.repeat(Math.max(0, ITEM_BYTES - fixed));
}
const PUT_PADDING = paddingFor(`put-${PUT_KEYS - 1}`);
const RANGE_PADDING = paddingFor(`range-${RANGE_DEVICES - 1}`);
const rangeDevice = (d: number) => `range-${d}`;
const rangeRow = (i: number): Row => ({ device: rangeDevice(Math.floor(i / RANGE_ITEMS)), seq: i % RANGE_ITEMS, payload: RANGE_PADDING });
const putRow = (n: number, prefix = 'put'): Row => ({ device: `${prefix}-${n % PUT_KEYS}`, seq: Math.floor(n / PUT_KEYS), payload: PUT_PADDING });
const retryPause = (attempt: number) => new Promise((r) => setTimeout(r, 100 * attempt));

// ---- the adapters -------------------------------------------------------------------------

// -- keyslice: PutItem / GetItem / GetItems limit 100 over KeysliceClient (WebSocket, msgpack); the GetItems by
// forEachItemPage, one page, so that no promise holds the page (bench/PROFILE.md, "forEachItemPage") --

class KeysliceAdapter implements Adapter {
  private constructor(private readonly clients: KeysliceClient[]) {}
  static async open(url: string, connections: number): Promise<KeysliceAdapter> {
    const clients: KeysliceClient[] = [];
    for (let i = 0; i < connections; i++) clients.push(await KeysliceClient.connect(url, { requestTimeoutMs: REQUEST_TIMEOUT_MS }));
    await clients[0].createTable(TABLE, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    return new KeysliceAdapter(clients);
  }
  async put(c: number, row: Row): Promise<void> {
    await this.clients[c].putItem(TABLE, row as unknown as Item);
  }
  async get(c: number, device: string, seq: number): Promise<void> {
    if ((await this.clients[c].getItem(TABLE, { device, seq })) === null) throw new NotFound();
  }
  /** One GetItems request, as getItems sends it; each item is looked at, as the Redis adapter parses each. */
  async range(c: number, device: string, n: number): Promise<number> {
    let count = 0;
    const request = { table: TABLE, shardingKey: device, sortingKey: { between: [0, n - 1] as [number, number] }, limit: n };
    await this.clients[c].forEachItemPage(request, (page) => {
      for (const item of page.items) if (item.device === device) count++;
    }, { maxPages: 1 });
    return count;
  }
  async load(rows: Row[]): Promise<void> {
    let k = 0;
    await inBatches(chunk(rows, BATCH_WRITE_ITEMS_MAX), LOAD_IN_FLIGHT, async (batch) => {
      let pending = batch as unknown as Item[];
      for (let attempt = 1; ; attempt++) {
        const client = this.clients[k++ % this.clients.length];
        try {
          const failures = await client.batchWrite(TABLE, { puts: pending });
          if (failures.length === 0) return;
          if (attempt >= LOAD_ATTEMPTS) throw new Error(`${failures.length} items failed, e.g. ${failures[0].code}: ${failures[0].message}`);
          pending = failures.map((f) => pending[f.index]);
        } catch (err) {
          if (!(err instanceof KeysliceError && err.retryable) || attempt >= LOAD_ATTEMPTS) throw err;
        }
        await retryPause(attempt);
      }
    }, () => interrupted);
  }
  async close(): Promise<void> {
    await Promise.allSettled(this.clients.map((c) => c.close()));
  }
}

// -- Redis via ioredis: bench/redis-adapter.ts (a hash per item, a sorted set per sharding key) --

// -- a DynamoDB API via the AWS SDK v3 (DynamoDBClient, keep-alive agent): PutItem / GetItem / Query Limit 100 --
// The same class, so the same client settings, drives dynalite and keyslice's DynamoDB endpoint.

interface DynamoSdk {
  DynamoDBClient: new (config: Record<string, unknown>) => { send(command: unknown): Promise<Record<string, unknown>>; destroy(): void };
  [command: string]: unknown;
}
type CommandCtor = new (input: Record<string, unknown>) => unknown;

class DynamoSdkAdapter implements Adapter {
  private readonly cmd: (name: string, input: Record<string, unknown>) => unknown;
  private constructor(
    private readonly client: InstanceType<DynamoSdk['DynamoDBClient']>,
    private readonly agent: http.Agent,
    sdk: DynamoSdk,
    private readonly table: string,
  ) {
    this.cmd = (name, input) => new (sdk[name] as CommandCtor)(input);
  }
  /** `endpoint`: http://127.0.0.1:<port> of dynalite or of a keyslice coordinator; creates `table` there. */
  static async open(sdk: DynamoSdk, NodeHttpHandler: new (o: Record<string, unknown>) => unknown, endpoint: string, table: string, inFlight: number): Promise<DynamoSdkAdapter> {
    // One SDK client; HTTP/1.1 has no pipelining, so the agent keeps up to `inFlight` sockets alive.
    const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });
    const client = new sdk.DynamoDBClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
      requestHandler: new NodeHttpHandler({ httpAgent: agent, requestTimeout: REQUEST_TIMEOUT_MS, connectionTimeout: REQUEST_TIMEOUT_MS }),
      maxAttempts: 1,
    });
    const a = new DynamoSdkAdapter(client, agent, sdk, table);
    await client.send(a.cmd('CreateTableCommand', {
      TableName: table,
      AttributeDefinitions: [{ AttributeName: 'device', AttributeType: 'S' }, { AttributeName: 'seq', AttributeType: 'N' }],
      KeySchema: [{ AttributeName: 'device', KeyType: 'HASH' }, { AttributeName: 'seq', KeyType: 'RANGE' }],
      BillingMode: 'PAY_PER_REQUEST',
    }));
    for (let i = 0; ; i++) {
      const d = (await client.send(a.cmd('DescribeTableCommand', { TableName: table }))) as { Table?: { TableStatus?: string } };
      if (d.Table?.TableStatus === 'ACTIVE') break;
      if (i >= 100) throw new Error(`${endpoint}: the table is still ${d.Table?.TableStatus} after 10 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return a;
  }
  private static item(row: Row): ReturnType<typeof sdkItem> {
    return sdkItem(row);
  }
  async put(_c: number, row: Row): Promise<void> {
    await this.client.send(this.cmd('PutItemCommand', { TableName: this.table, Item: DynamoSdkAdapter.item(row) }));
  }
  async get(_c: number, device: string, seq: number): Promise<void> {
    const r = await this.client.send(this.cmd('GetItemCommand', getInput(this.table, device, seq)));
    if (r.Item === undefined) throw new NotFound();
  }
  async range(_c: number, device: string, n: number): Promise<number> {
    const r = await this.client.send(this.cmd('QueryCommand', queryInput(this.table, device, n)));
    return (r.Items as unknown[] | undefined)?.length ?? 0;
  }
  async load(rows: Row[]): Promise<void> {
    await inBatches(chunk(rows, 25), LOAD_IN_FLIGHT, async (batch) => {
      let requests: unknown[] = batch.map((row) => ({ PutRequest: { Item: DynamoSdkAdapter.item(row) } }));
      for (let attempt = 1; ; attempt++) {
        const r = (await this.client.send(this.cmd('BatchWriteItemCommand', { RequestItems: { [this.table]: requests } }))) as { UnprocessedItems?: Record<string, unknown[]> };
        requests = r.UnprocessedItems?.[this.table] ?? [];
        if (requests.length === 0) return;
        if (attempt >= LOAD_ATTEMPTS) throw new Error(`${this.table}: BatchWriteItem left ${requests.length} items unprocessed after ${attempt} attempts`);
        await retryPause(attempt);
      }
    }, () => interrupted);
  }
  async close(): Promise<void> {
    this.client.destroy();
    this.agent.destroy();
  }
}

// ---- 3. the driver: one closed loop for all (bench/driver.ts) ----------------------------------

// ---- the cells of the table ------------------------------------------------------------------

type Workload = 'put' | 'get' | 'range';
type SystemId = 'keyslice' | 'keyslice-r1' | 'keyslice-fsync' | 'keyslice-sdk' | 'redis' | 'redis-multi' | 'dynalite' | 'null-sdk';
interface Cell {
  system: SystemId;
  workload: Workload;
  /** The op, given the connection; answers the items it returned. */
  op: (c: number) => Promise<number>;
  /** The DynamoDB APIs: driven by these client processes instead of `op` in this one. */
  pool?: SdkClientPool;
}

/** A pool run as the driver's own closed loop reports it. */
function poolSample(p: PoolSample, maxOps: number): Sample {
  const pct = (q: number) => (p.latencies.length === 0 ? NaN : p.latencies[Math.max(0, Math.ceil((q / 100) * p.latencies.length) - 1)]);
  const seconds = Math.max(p.seconds, 1e-9);
  return {
    ok: p.ok,
    errors: p.errors,
    seconds,
    opsPerSec: p.ok / seconds,
    itemsPerSec: p.items / seconds,
    p50: pct(50),
    p99: pct(99),
    max: p.latencies.length === 0 ? NaN : p.latencies[p.latencies.length - 1],
    stoppedBy: interrupted ? 'interrupt' : p.ok + Object.values(p.errors).reduce((a, b) => a + b, 0) >= maxOps ? 'ops' : 'duration',
  };
}
interface RunRecord {
  round: number;
  system: SystemId;
  workload: Workload;
  sample: Sample;
  load1: number;
  /** CPU time of the system's server processes (user + system, all threads) per successful op, in ms; NaN where unknown. */
  serverCpuMsPerOp: number;
  /** CPU time of the SDK client processes per successful op, in ms; NaN for the driver's own clients. */
  clientCpuMsPerOp: number;
}

const SYSTEM_LABEL: Record<SystemId, string> = {
  keyslice: "keyslice (durability 'os')",
  'keyslice-r1': "keyslice (durability 'os', one copy: R=1)",
  'keyslice-fsync': "keyslice (durability 'fsync')",
  'keyslice-sdk': "keyslice DynamoDB endpoint via AWS SDK v3",
  redis: 'Redis via ioredis',
  'redis-multi': 'Redis via ioredis, MULTI HSET+ZADD',
  dynalite: 'dynalite via AWS SDK v3',
  'null-sdk': 'null DynamoDB server via AWS SDK v3',
};
const OP_LABEL: Record<SystemId, Record<Workload, string>> = {
  keyslice: { put: 'PutItem', get: 'GetItem', range: 'GetItems limit 100 (forEachItemPage)' },
  'keyslice-r1': { put: 'PutItem', get: 'GetItem', range: 'GetItems limit 100 (forEachItemPage)' },
  'keyslice-fsync': { put: 'PutItem', get: 'GetItem', range: 'GetItems limit 100 (forEachItemPage)' },
  'keyslice-sdk': { put: 'PutItem', get: 'GetItem', range: 'Query Limit 100' },
  redis: { put: 'HSET', get: 'HGETALL', range: 'ZRANGEBYLEX LIMIT 0 100' },
  'redis-multi': { put: 'MULTI HSET ZADD EXEC', get: '-', range: '-' },
  dynalite: { put: 'PutItem', get: 'GetItem', range: 'Query Limit 100' },
  'null-sdk': { put: 'PutItem', get: 'GetItem', range: 'Query Limit 100' },
};

// ---- 4. the report ---------------------------------------------------------------------------

interface Summary {
  runs: number;
  opsPerSec: number;
  opsMin: number;
  opsMax: number;
  itemsPerSec: number;
  p50: number;
  p99: number;
  serverCpuMsPerOp: number;
  clientCpuMsPerOp: number;
  errors: Record<string, number>;
}

function summarize(records: RunRecord[], system: SystemId, workload: Workload): Summary | null {
  const rs = records.filter((r) => r.system === system && r.workload === workload);
  if (rs.length === 0) return null;
  const errors: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.sample.errors)) errors[k] = (errors[k] ?? 0) + v;
  const ops = rs.map((r) => r.sample.opsPerSec);
  return {
    runs: rs.length,
    opsPerSec: median(ops),
    opsMin: Math.min(...ops),
    opsMax: Math.max(...ops),
    itemsPerSec: median(rs.map((r) => r.sample.itemsPerSec)),
    p50: median(rs.map((r) => r.sample.p50)),
    p99: median(rs.map((r) => r.sample.p99)),
    serverCpuMsPerOp: median(rs.map((r) => r.serverCpuMsPerOp)),
    clientCpuMsPerOp: median(rs.map((r) => r.clientCpuMsPerOp)),
    errors,
  };
}

/** The median over the rounds of a's ops/s (items/s) over b's in the same round: each round's systems ran
 * minutes apart at most, so the load of the machine, which drifts between rounds, cancels out better than in
 * the ratio of the two medians. */
function roundRatio(records: RunRecord[], a: SystemId, b: SystemId, workload: Workload, items = false): number {
  const rate = (r: RunRecord) => (items ? r.sample.itemsPerSec : r.sample.opsPerSec);
  const ratios: number[] = [];
  for (const ra of records) {
    if (ra.system !== a || ra.workload !== workload) continue;
    const rb = records.find((r) => r.system === b && r.workload === workload && r.round === ra.round);
    if (rb !== undefined) ratios.push(rate(ra) / rate(rb));
  }
  return median(ratios);
}

const fmt = (n: number) => (Number.isNaN(n) ? '-' : Math.round(n).toLocaleString('en-US'));
const fms = (n: number) => (Number.isNaN(n) ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0));
const fratio = (n: number) => (!Number.isFinite(n) ? '-' : n >= 100 ? `${n.toFixed(0)}x` : n >= 10 ? `${n.toFixed(1)}x` : `${n.toFixed(2)}x`);

interface Environment {
  date: string;
  command: string;
  nproc: string;
  cpuModel: string;
  memGiB: number;
  node: string;
  redisVersion: string;
  dynaliteVersion: string;
  ioredisVersion: string;
  sdkVersion: string;
  commit: string;
  loadBefore: number[];
  loadAfter: number[];
  wallSeconds: number;
  setupSeconds: number;
  /** CPU time per second of each system's server processes while nobody sends them anything, in ms (measured before the rounds). */
  idleCpuMsPerSec: Partial<Record<SystemId, number>>;
  loadSeconds: Record<string, number>;
}

/** keyslice's DynamoDB endpoint against dynalite, both through the same AWS SDK client settings, the null
 * server as the ceiling of both, and issue 11's targets. */
function dynamoLines(cfg: Config, env: Environment, records: RunRecord[]): string[] {
  const S = (s: SystemId, w: Workload) => summarize(records, s, w);
  const workloads: Workload[] = ['put', 'get', 'range'];
  const name = (w: Workload) => ({ put: 'PutItem', get: 'GetItem', range: `Query of ${RANGE_ITEMS} items` })[w];
  const ops = (s: Summary | null) => s?.opsPerSec ?? NaN;
  const L: string[] = [];
  L.push(`## The DynamoDB API: keyslice's endpoint vs dynalite, and the null server as the ceiling, all through the AWS SDK v3 (medians of ${cfg.rounds} rounds)`);
  L.push('');
  L.push(`${cfg.sdkProcesses} client processes per system (\`bench/sdk-clients.ts\`), each with one \`DynamoDBClient\` with the same settings (a \`NodeHttpHandler\` with a keep-alive \`http.Agent\` of as many sockets as its share of the requests in flight; \`maxAttempts: 1\`; static credentials; signed requests), ${cfg.concurrency} requests in flight in all, shared equally among them; their ops/s added, their latencies merged. keyslice: its coordinator's DynamoDB endpoint (\`POST /\`, \`X-Amz-Target\`) on a local cluster with durability 'os' and its default replication ('auto': each write is on both slice nodes before it is answered), table \`${SDK_TABLE}\` made with CreateTable (hash key \`device\` S, range key \`seq\` N); dynalite in memory. The same items, data set and requests for both. **null**: \`bench/null-dynamodb.ts\`, one Node.js process that answers each request with a DynamoDB answer made at start-up (PutItem \`{}\`, GetItem one item, Query ${RANGE_ITEMS} items of the same shape; content type, request id, \`x-amz-crc32\`) and stores nothing: what the same client processes reach when the server costs next to nothing, i.e. the most any server could reach through this client shape on this machine.`);
  L.push('');
  L.push('Ratios are the median over the rounds of the two systems\' ops/s in the same round (the load of the shared machine drifts between rounds).');
  L.push('');
  L.push('| workload | keyslice ops/s | p50 ms | p99 ms | dynalite ops/s | p50 ms | p99 ms | null ops/s | p50 ms | p99 ms | keyslice / dynalite | null / dynalite (ceiling) | issue 11 target | |');
  L.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|');
  for (const w of workloads) {
    const [k, d, n] = [S('keyslice-sdk', w), S('dynalite', w), S('null-sdk', w)];
    const r = roundRatio(records, 'keyslice-sdk', 'dynalite', w);
    const want = DYNAMODB_TARGETS[w];
    const verdict = Number.isNaN(r) ? 'not measured' : r >= want ? '**met**' : `**missed** (needs ${fmt(want * ops(d))} ops/s)`;
    const lat = (s: Summary | null) => `${fmt(ops(s))} | ${fms(s?.p50 ?? NaN)} | ${fms(s?.p99 ?? NaN)}`;
    L.push(`| ${name(w)} | ${lat(k)} | ${lat(d)} | ${lat(n)} | ${fratio(r)} | ${fratio(roundRatio(records, 'null-sdk', 'dynalite', w))} | >= ${want}x | ${verdict} |`);
  }
  const [kr, dr, nr] = [S('keyslice-sdk', 'range'), S('dynalite', 'range'), S('null-sdk', 'range')];
  if (kr !== null && dr !== null) L.push(`| Query, **items/s** | ${fmt(kr.itemsPerSec)} | | | ${fmt(dr.itemsPerSec)} | | | ${fmt(nr?.itemsPerSec ?? NaN)} | | | ${fratio(roundRatio(records, 'keyslice-sdk', 'dynalite', 'range', true))} | ${fratio(roundRatio(records, 'null-sdk', 'dynalite', 'range', true))} | | |`);
  L.push('');
  L.push('CPU time per op (ms, user + system, every thread, from /proc, divided by the run\'s ops; medians over the rounds). **Server**: the system\'s server processes (keyslice: the coordinator, its routers and both slice nodes; dynalite and null: their one process). **SDK client**: the client processes that drove that system in the same run. **Bound from CPU**: with every core busy, a system does at most cores / (client + server CPU per op); so no server, even one that costs nothing, can pass (client + server CPU per op against dynalite) / (client CPU per op against null) times dynalite\'s ops/s on these cores.');
  L.push('');
  const idleMs = (s: SystemId) => env.idleCpuMsPerSec[s] ?? NaN;
  L.push(`**keyslice less idle** takes out what its processes spend with nothing sent (${fms(idleMs('keyslice-sdk'))} ms of CPU per second, measured before the rounds; below), divided by the run's ops/s: the server CPU that the requests themselves cost.`);
  L.push('');
  L.push('| workload | server keyslice | keyslice less idle | server dynalite | server null | SDK client against keyslice | against dynalite | against null | bound from CPU: any server / dynalite |');
  L.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const w of workloads) {
    const [k, d, n] = [S('keyslice-sdk', w), S('dynalite', w), S('null-sdk', w)];
    const c = (s: Summary | null) => fms(s?.serverCpuMsPerOp ?? NaN);
    const cl = (s: Summary | null) => fms(s?.clientCpuMsPerOp ?? NaN);
    const bound = d !== null && n !== null ? (d.clientCpuMsPerOp + d.serverCpuMsPerOp) / n.clientCpuMsPerOp : NaN;
    const lessIdle = median(records.filter((r) => r.system === 'keyslice-sdk' && r.workload === w).map((r) => r.serverCpuMsPerOp - idleMs('keyslice-sdk') / r.sample.opsPerSec));
    L.push(`| ${name(w)} | ${c(k)} | ${fms(lessIdle)} | ${c(d)} | ${c(n)} | ${cl(k)} | ${cl(d)} | ${cl(n)} | ${fratio(bound)} |`);
  }
  L.push('');
  // Whether this machine can show the targets at all: the null server is the most any server reaches here.
  const can: string[] = [];
  for (const w of workloads) {
    const [d, n] = [S('dynalite', w), S('null-sdk', w)];
    if (d === null || n === null) continue;
    const ceiling = roundRatio(records, 'null-sdk', 'dynalite', w);
    const want = DYNAMODB_TARGETS[w];
    // A server that cost nothing would leave the cores to the clients alone: (c + s against dynalite) / (c against null).
    const bound = (d.clientCpuMsPerOp + d.serverCpuMsPerOp) / n.clientCpuMsPerOp;
    const keyslice = `keyslice reached ${fratio(roundRatio(records, 'keyslice-sdk', 'dynalite', w))}, ${fratio(roundRatio(records, 'keyslice-sdk', 'null-sdk', w))} of the null server.`;
    const reached = `the null server, which does no work, reached ${fratio(ceiling)} dynalite (${fmt(ops(n))} vs ${fmt(ops(d))} ops/s)`;
    if (bound < want) can.push(`${name(w)}: ${reached}, and from the CPU per op no server can pass ${fratio(bound)}: the ${want}x target **cannot be shown through this client shape on these ${env.nproc} cores, whatever the server**. ${keyslice}`);
    else if (ceiling < want) can.push(`${name(w)}: ${reached}, below the ${want}x target: **no server showed ${want}x through this client shape on these ${env.nproc} cores** (the CPU per op would allow up to ${fratio(bound)}). ${keyslice}`);
    else can.push(`${name(w)}: ${reached}, at or above the ${want}x target, so this machine can show it. ${keyslice}`);
  }
  if (can.length > 0) {
    L.push('**Can this machine show issue 11\'s targets?**');
    L.push('');
    L.push(...can.map((c) => `- ${c}`));
    L.push('');
  }
  L.push("On a machine with few cores the client processes and the servers share the cores, and the SDK's cost per request (its middleware, SigV4 signing, JSON, one HTTP request per socket at a time) is as large as a server's or larger, so the clients take most of the CPU and bound the ops/s of every system: the ratio of ops/s cannot pass the bound from CPU above, whatever the server does. The servers' own CPU per op (left) is what sets them apart.");
  L.push('');
  const idle = (s: SystemId) => env.idleCpuMsPerSec[s];
  L.push(`**Idle servers** (measured for ${IDLE_SECONDS} s before the rounds, nothing sent): keyslice's processes ${fms(idle('keyslice-sdk') ?? NaN)} ms of CPU per second (heartbeats, load reports, the feed to the routers, metrics), dynalite ${fms(idle('dynalite') ?? NaN)}, null ${fms(idle('null-sdk') ?? NaN)}; that much is in keyslice's server CPU per op at any rate (at 300 ops/s, ${fms((idle('keyslice-sdk') ?? NaN) / 300)} ms/op of it).`);
  L.push('');
  const native = S('keyslice', 'put') !== null;
  if (native) {
    const cost = workloads.map((w) => {
      const k = S('keyslice-sdk', w);
      const n = S('keyslice', w);
      return k && n ? `${w} ${fratio(k.opsPerSec / n.opsPerSec)}` : null;
    }).filter((x) => x !== null);
    L.push(`The SDK path against the native client on the same cluster (keyslice SDK / keyslice native ops/s): ${cost.join(', ')}. The difference is HTTP/1.1 with one request per socket at a time, JSON in DynamoDB's AttributeValue form and SigV4 signing in the client, and their parsing and answering in the coordinator, on the same 2 cores.`);
    L.push('');
  }
  return L;
}

function detailLines(records: RunRecord[], systems: SystemId[]): string[] {
  const S = (s: SystemId, w: Workload) => summarize(records, s, w);
  const L: string[] = [];
  L.push('## Each system and workload (medians, with the spread of ops/s over the rounds)');
  L.push('');
  L.push('| system | workload | op | ops/s median | ops/s min..max | items/s | p50 ms | p99 ms | errors |');
  L.push('|---|---|---|--:|--:|--:|--:|--:|---|');
  for (const w of ['put', 'get', 'range'] as Workload[]) {
    for (const s of systems) {
      const x = S(s, w);
      if (x === null) continue;
      const errs = Object.entries(x.errors).map(([k, v]) => `${k} ${v}`).join(', ') || '0';
      L.push(`| ${SYSTEM_LABEL[s]} | ${w} | ${OP_LABEL[s][w]} | ${fmt(x.opsPerSec)} | ${fmt(x.opsMin)}..${fmt(x.opsMax)} | ${w === 'range' ? fmt(x.itemsPerSec) : ''} | ${fms(x.p50)} | ${fms(x.p99)} | ${errs} |`);
    }
  }
  L.push('');
  L.push('## Every run, in the order they ran');
  L.push('');
  L.push('| round | workload | system | ops | seconds | ops/s | items/s | p50 ms | p99 ms | max ms | stopped by | load avg 1 min | errors |');
  L.push('|--:|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|---|');
  for (const r of records) {
    const s = r.sample;
    const errs = Object.entries(s.errors).map(([k, v]) => `${k} ${v}`).join(', ') || '0';
    L.push(`| ${r.round} | ${r.workload} | ${SYSTEM_LABEL[r.system]} | ${fmt(s.ok)} | ${s.seconds.toFixed(1)} | ${fmt(s.opsPerSec)} | ${r.workload === 'range' ? fmt(s.itemsPerSec) : ''} | ${fms(s.p50)} | ${fms(s.p99)} | ${fms(s.max)} | ${s.stoppedBy} | ${r.load1.toFixed(2)} | ${errs} |`);
  }
  L.push('');
  return L;
}

/** `--only dynamodb`: keyslice's DynamoDB endpoint and dynalite, nothing else. */
function dynamoReport(cfg: Config, env: Environment, records: RunRecord[]): string {
  const L: string[] = [];
  L.push("# keyslice's DynamoDB endpoint side by side with dynalite and a null server, all through the AWS SDK v3");
  L.push('');
  L.push('Written by `npm run bench:compare -- --only dynamodb` (`bench/compare.ts`) from one run; do not edit by hand, run it again. The full comparison (with Redis and the native client, and these rows as well) is `npm run bench:compare`, in bench/RESULTS.md.');
  L.push('');
  L.push('## The run');
  L.push('');
  L.push(`- Date: ${env.date} (UTC). Wall time of \`node dist/bench/compare.js\`: ${(env.wallSeconds / 60).toFixed(1)} min (of which ${env.setupSeconds.toFixed(0)} s installing peers if missing, starting the servers and loading the data set).`);
  L.push(`- Command: \`${env.command}\``);
  L.push(`- Machine: \`nproc\` = ${env.nproc} (${env.cpuModel}), ${env.memGiB} GiB. **The ${env.nproc} cores are shared by the clients (${cfg.sdkProcesses} SDK client processes per system, and this driver) and every server**: the keyslice coordinator with its default routers and ${LOCAL_NODES} slice nodes (a main thread and ${LOCAL_WORKERS} worker threads each), dynalite, the null server.`);
  L.push(`- Versions: Node ${env.node}; dynalite ${env.dynaliteVersion}; @aws-sdk/client-dynamodb ${env.sdkVersion}; keyslice at ${env.commit}.`);
  L.push(`- **The figures are noisy**: the machine was shared with other engineers' test runs (1-minute load average ${env.loadBefore.map((x) => x.toFixed(2)).join(' / ')} before, ${env.loadAfter.map((x) => x.toFixed(2)).join(' / ')} after; each run's is in the per-run table). Compare systems within this run.`);
  L.push(`- Before the rounds, each SDK client process ran ${cfg.sdkWarmupOps.toLocaleString('en-US')} ops of each workload against its system, not measured (at most ${SDK_WARMUP_SECONDS_MAX} s per system and workload): a fresh client spends 3-4x the CPU per request of a warm one while V8 compiles the SDK's code, and a user's long-running client is warm.`);
  L.push(`- Every run: ${cfg.warmupS} s of warm-up (not measured), then at most ${cfg.durationS} s or ${cfg.ops.toLocaleString('en-US')} ops; ${cfg.rounds} rounds, the order of the systems rotated from round to round; each figure is the median over the rounds. Latency is per op in the client, including queueing at ${cfg.concurrency} in flight; p99 nearest-rank.`);
  L.push(`- Items of about ${ITEM_BYTES} bytes \`{device, seq, payload}\`. Reads: ${(RANGE_DEVICES * RANGE_ITEMS).toLocaleString('en-US')} items (${RANGE_DEVICES} hash keys x ${RANGE_ITEMS}) loaded with BatchWriteItem first; GetItem of a random one; Query \`#d = :d AND #s BETWEEN :a AND :b\`, \`Limit: ${RANGE_ITEMS}\` of a random hash key. PutItem writes new items. Raw \`DynamoDBClient\` (AttributeValue form, no DocumentClient).`);
  const loads = Object.entries(env.loadSeconds).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ');
  L.push(`- Loading the read data set took: ${loads}.`);
  L.push('');
  L.push(...dynamoLines(cfg, env, records));
  L.push(...detailLines(records, ['keyslice-sdk', 'dynalite', 'null-sdk']));
  return L.join('\n');
}

function report(cfg: Config, env: Environment, records: RunRecord[]): string {
  if (cfg.only === 'dynamodb') return dynamoReport(cfg, env, records);
  const S = (s: SystemId, w: Workload) => summarize(records, s, w);
  const L: string[] = [];
  L.push('# keyslice side by side with Redis and dynalite');
  L.push('');
  L.push('Written by `npm run bench:compare` (`bench/compare.ts`) from one run; do not edit by hand, run it again.');
  L.push('');
  L.push('## The run');
  L.push('');
  L.push(`- Date: ${env.date} (UTC). Wall time of \`node dist/bench/compare.js\`: ${(env.wallSeconds / 60).toFixed(1)} min (of which ${env.setupSeconds.toFixed(0)} s installing peers if missing, starting the servers and loading the data set; the rest the ${cfg.rounds} rounds). \`npm run bench:compare\` builds first, a few seconds more.`);
  L.push(`- Command: \`${env.command}\``);
  L.push(`- Machine: \`nproc\` = ${env.nproc} (${env.cpuModel}), ${env.memGiB} GiB. **The ${env.nproc} cores are shared by the clients (this driver, one Node.js process, for keyslice's native client and Redis; ${cfg.sdkProcesses} SDK client processes per DynamoDB API) and every server**: the keyslice coordinator with its default routers and 2 slice nodes (a main thread and 2 worker threads each), redis-server, dynalite, the null DynamoDB server.`);
  L.push(`- Versions: Node ${env.node}; ${env.redisVersion}; dynalite ${env.dynaliteVersion}; ioredis ${env.ioredisVersion}; @aws-sdk/client-dynamodb ${env.sdkVersion}; keyslice at ${env.commit}.`);
  L.push(`- **The figures are noisy**: the machine was shared with other engineers' test and benchmark runs during this run (1-minute load average ${env.loadBefore.map((x) => x.toFixed(2)).join(' / ')} before, ${env.loadAfter.map((x) => x.toFixed(2)).join(' / ')} after; each run's is in the per-run table). Compare systems within this run, not with other runs.`);
  L.push('');
  L.push('## What ran');
  L.push('');
  L.push(`- One closed-loop driver for all systems: ${cfg.concurrency} requests in flight (each loop sends one op and awaits it), loop *j* on connection *j* mod ${cfg.connections}. keyslice: ${cfg.connections} WebSocket connections of \`KeysliceClient\` to the coordinator. Redis: ${cfg.connections} ioredis connections (default options, no auto-pipelining). dynalite, keyslice's DynamoDB endpoint and the null DynamoDB server (bench/null-dynamodb.ts, the ceiling of the SDK client shape): ${cfg.sdkProcesses} client processes each (\`bench/sdk-clients.ts\`), each one \`DynamoDBClient\` whose \`NodeHttpHandler\` has a keep-alive \`http.Agent\` of its share of the ${cfg.concurrency} sockets (HTTP/1.1 has no pipelining), \`maxAttempts: 1\`.`);
  L.push(`- Before the rounds, each SDK client process ran ${cfg.sdkWarmupOps.toLocaleString('en-US')} ops of each workload against its DynamoDB API, not measured (at most ${SDK_WARMUP_SECONDS_MAX} s per system and workload), so that V8 has compiled the SDK's code, as in a user's long-running client.`);
  L.push(`- Every run: ${cfg.warmupS} s of warm-up with the same op (not measured), then at most ${cfg.durationS} s or ${cfg.ops.toLocaleString('en-US')} ops. ${cfg.rounds} rounds; in each round every workload runs on every system, the order of the systems rotated from round to round. Each figure below is the median over the rounds (ops/s, p99 and so on each taken separately). Latency: per successful op, send to answer, in the client (so it includes queueing at ${cfg.concurrency} in flight); p99 is nearest-rank.`);
  L.push(`- Items of about ${ITEM_BYTES} bytes: \`{device, seq, payload}\` (names + values, numbers counted as 8 bytes, as keyslice counts them).`);
  L.push(`- Data set for reads, loaded into each system before the rounds (not measured): ${RANGE_DEVICES} sharding keys \`range-<d>\` x ${RANGE_ITEMS} items (seq 0..${RANGE_ITEMS - 1}) = ${(RANGE_DEVICES * RANGE_ITEMS).toLocaleString('en-US')} items. **point reads** read a random item of it; **range reads** read the ${RANGE_ITEMS} items of a random sharding key in sorting order. **point writes** write new items \`put-<n mod ${PUT_KEYS}>\`, seq \`floor(n / ${PUT_KEYS})\`.`);
  L.push(`- keyslice: three local clusters, each a coordinator + ${LOCAL_NODES} slice nodes x ${LOCAL_WORKERS} worker threads on 127.0.0.1 at the default replication ('auto': here R=${LOCAL_NODES}, every write on each node before it is answered) unless said; one with \`--durability os\` (a write is acknowledged once handed to the OS: comparable to Redis without persistence) for all workloads, one with \`--durability fsync\` (acknowledged after fsync) for writes only, and one with \`--durability os --replication-factor 1\` (one copy of each item, as every cluster was before replication) for writes only. Table: sharding key \`device\` (string), sorting key \`seq\` (number). PutItem / GetItem / GetItems \`{shardingKey, sortingKey: {between: [0, 99]}, limit: 100}\`, read with the client's \`forEachItemPage\` for one page (\`maxPages: 1\`: the same one request as \`getItems\`), whose callback looks at each item's device as the Redis side parses each item's JSON; \`getItems\` fulfils its promise with the page, which a promise promoted while it waited keeps alive to the young collector (bench/PROFILE.md, "forEachItemPage").`);
  L.push(`- Redis: Debian's \`redis-server --save '' --appendonly no --port P --bind 127.0.0.1\` (no persistence). The data model a user would pick: a hash per item \`item:<device>:<seq>\` (fields device, seq, payload; HSET / HGETALL) and a sorted set per sharding key \`range:<device>\` for range reads. In the sorted set every member has score 0 and is \`<seq zero-padded to ${SEQ_DIGITS}>|<item as JSON>\`: the item is stored in the member, so ZRANGEBYLEX \`[0000000000 (0000000100 LIMIT 0 100\` answers the 100 items themselves in one round trip (looking each up with HGETALL would be 101 commands), and the client parses their JSON. The point-write row measures HSET alone, as the issue's anchor does; it does not add the item to the sorted set. A write that keeps both (what one keyslice PutItem does) is MULTI HSET ZADD EXEC, measured as its own row. ZRANGEBYLEX sorts by bytes, hence the zero padding; ZRANGEBYSCORE with score = seq would serve this numeric sorting key as well.`);
  L.push('- dynalite: `dynalite --host 127.0.0.1 --port P` (in memory), a table with hash key `device` (S) and range key `seq` (N); PutItem / GetItem / Query `#d = :d AND #s BETWEEN :a AND :b`, `Limit: 100`, with the raw `DynamoDBClient` (items stay in AttributeValue form, no DocumentClient).');
  const loads = Object.entries(env.loadSeconds).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ');
  L.push(`- Loading the read data set took: ${loads}.`);
  L.push('');

  // The main table.
  L.push(`## Results (medians of ${cfg.rounds} rounds)`);
  L.push('');
  L.push('| workload | keyslice ops/s | keyslice p99 ms | Redis ops/s | Redis p99 ms | dynalite ops/s | dynalite p99 ms | keyslice / Redis ops | keyslice / dynalite ops | keyslice p99 / Redis p99 |');
  L.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  const rowFor = (label: string, ks: Summary | null, redis: Summary | null, dyn: Summary | null, items = false) => {
    const v = (s: Summary | null) => (s === null ? NaN : items ? s.itemsPerSec : s.opsPerSec);
    const p = (s: Summary | null) => (s === null ? NaN : s.p99);
    L.push(`| ${label} | ${fmt(v(ks))} | ${items ? '' : fms(p(ks))} | ${fmt(v(redis))} | ${items ? '' : fms(p(redis))} | ${fmt(v(dyn))} | ${items ? '' : fms(p(dyn))} | ${fratio(v(ks) / v(redis))} | ${fratio(v(ks) / v(dyn))} | ${items ? '' : fratio(p(ks) / p(redis))} |`);
  };
  rowFor("point writes (keyslice 'os' PutItem; Redis HSET; dynalite PutItem)", S('keyslice', 'put'), S('redis', 'put'), S('dynalite', 'put'));
  rowFor('point reads (GetItem; HGETALL; GetItem)', S('keyslice', 'get'), S('redis', 'get'), S('dynalite', 'get'));
  rowFor('range reads of 100 items, ops/s (GetItems; ZRANGEBYLEX; Query)', S('keyslice', 'range'), S('redis', 'range'), S('dynalite', 'range'));
  rowFor('range reads, **items/s**', S('keyslice', 'range'), S('redis', 'range'), S('dynalite', 'range'), true);
  rowFor("point writes with one copy of each item: keyslice 'os' at `--replication-factor 1` (Redis HSET; dynalite PutItem)", S('keyslice-r1', 'put'), S('redis', 'put'), S('dynalite', 'put'));
  rowFor("**durable** point writes: keyslice `--durability fsync` (vs. the same non-durable Redis and dynalite figures)", S('keyslice-fsync', 'put'), S('redis', 'put'), S('dynalite', 'put'));
  rowFor('point writes that keep the range index: keyslice \'os\' PutItem vs Redis MULTI HSET ZADD EXEC (dynalite: PutItem)', S('keyslice', 'put'), S('redis-multi', 'put'), S('dynalite', 'put'));
  L.push('');
  L.push("Ratios are keyslice / peer (above 1x: keyslice is ahead on ops; for p99, below 1x: keyslice's is lower). Redis runs without persistence and dynalite in memory in every row; only the keyslice figure of the `fsync` row is durable.");
  L.push('');

  // Targets.
  L.push('## Against the targets of issue 7');
  L.push('');
  const targetLines: string[] = [];
  const ratioTarget = (what: string, ks: Summary | null, peer: Summary | null, peerName: string, want: number, items = false) => {
    if (ks === null || peer === null) return targetLines.push(`- ${what}: not measured.`);
    const k = items ? ks.itemsPerSec : ks.opsPerSec;
    const p = items ? peer.itemsPerSec : peer.opsPerSec;
    const r = k / p;
    const unit = items ? 'items/s' : 'ops/s';
    if (r >= want) targetLines.push(`- ${what}: **met**, ${fratio(r)} ${peerName} (${fmt(k)} vs ${fmt(p)} ${unit}; target ${want}x).`);
    else targetLines.push(`- ${what}: **missed**, ${fratio(r)} ${peerName} (${fmt(k)} vs ${fmt(p)} ${unit}); the target ${want}x needs ${fmt(want * p)} ${unit}, ${fratio((want * p) / k)} of what keyslice did (${fmt(want * p - k)} ${unit} short).`);
  };
  ratioTarget('Point writes >= 1.0x Redis', S('keyslice', 'put'), S('redis', 'put'), 'Redis', 1);
  ratioTarget('Point reads >= 1.0x Redis', S('keyslice', 'get'), S('redis', 'get'), 'Redis', 1);
  ratioTarget('Point writes >= 40x dynalite', S('keyslice', 'put'), S('dynalite', 'put'), 'dynalite', 40);
  ratioTarget('Point reads >= 40x dynalite', S('keyslice', 'get'), S('dynalite', 'get'), 'dynalite', 40);
  ratioTarget('Range reads of 100 items >= 1.0x Redis ZRANGEBYLEX items/s', S('keyslice', 'range'), S('redis', 'range'), 'Redis', 1, true);
  for (const w of ['put', 'get', 'range'] as Workload[]) {
    const ks = S('keyslice', w);
    const rd = S('redis', w);
    const name = { put: 'point writes', get: 'point reads', range: 'range reads' }[w];
    if (ks === null || rd === null) {
      targetLines.push(`- p99 of ${name} <= 2x Redis: not measured.`);
      continue;
    }
    const r = ks.p99 / rd.p99;
    if (r <= 2) targetLines.push(`- p99 of ${name} <= 2x Redis: **met**, ${fratio(r)} (${fms(ks.p99)} ms vs ${fms(rd.p99)} ms).`);
    else targetLines.push(`- p99 of ${name} <= 2x Redis: **missed**, ${fratio(r)} (${fms(ks.p99)} ms vs ${fms(rd.p99)} ms; the target is at most ${fms(2 * rd.p99)} ms, ${fms(ks.p99 - 2 * rd.p99)} ms over).`);
  }
  const fs = S('keyslice-fsync', 'put');
  const rp = S('redis', 'put');
  const dp = S('dynalite', 'put');
  if (fs !== null) targetLines.push(`- Durable writes (\`--durability fsync\`), reported, no target: ${fmt(fs.opsPerSec)} ops/s, p99 ${fms(fs.p99)} ms; ${rp ? fratio(fs.opsPerSec / rp.opsPerSec) + ' Redis without persistence' : ''}${dp ? ', ' + fratio(fs.opsPerSec / dp.opsPerSec) + ' dynalite in memory' : ''}.`);
  L.push(...targetLines);
  L.push('');

  // What stands out.
  L.push('## Notes on this run');
  L.push('');
  const notes: string[] = [];
  const systems: SystemId[] = ['keyslice', 'keyslice-r1', 'keyslice-fsync', 'keyslice-sdk', 'redis', 'redis-multi', 'dynalite', 'null-sdk'];
  const spread: string[] = [];
  for (const w of ['put', 'get', 'range'] as Workload[]) {
    for (const s of systems) {
      const x = S(s, w);
      if (x !== null && x.runs > 1 && x.opsMax / x.opsMin >= 1.5) spread.push(`${SYSTEM_LABEL[s]} ${w} ${fmt(x.opsMin)}..${fmt(x.opsMax)} (${fratio(x.opsMax / x.opsMin)})`);
    }
  }
  if (spread.length > 0) notes.push(`Best and worst round differ by 1.5x or more for: ${spread.join('; ')}. Read the ratios with that noise in mind.`);
  const os = S('keyslice', 'put');
  if (fs !== null && os !== null && fs.opsPerSec > os.opsPerSec) {
    notes.push(`keyslice's fsync writes (${fmt(fs.opsPerSec)} ops/s) came out faster than its 'os' writes (${fmt(os.opsPerSec)} ops/s). fsync does strictly more work per write, so this difference is noise (other load on the machine during those runs; see the per-run table), not a property of the modes.`);
  }
  const anchors: [string, Summary | null, number, boolean][] = [
    ['Redis HSET', S('redis', 'put'), ANCHORS.redis.put, false],
    ['Redis HGETALL', S('redis', 'get'), ANCHORS.redis.get, false],
    ['Redis ZRANGEBYLEX items/s', S('redis', 'range'), ANCHORS.redis.rangeItems, true],
    ['dynalite PutItem', S('dynalite', 'put'), ANCHORS.dynalite.put, false],
    ['dynalite GetItem', S('dynalite', 'get'), ANCHORS.dynalite.get, false],
    ['dynalite Query', S('dynalite', 'range'), ANCHORS.dynalite.range, false],
  ];
  const vsAnchor = anchors.filter(([, x]) => x !== null).map(([name, x, a, items]) => `${name} ${fmt(items ? x!.itemsPerSec : x!.opsPerSec)} vs ${fmt(a)} (${fratio((items ? x!.itemsPerSec : x!.opsPerSec) / a)})`);
  notes.push(`The peers against the anchors written in issue 7 (this run vs the issue): ${vsAnchor.join('; ')}. The targets above are taken against this run's peers, as the issue asks, not against the anchors.`);
  // Issue 15 asks that the default shape on 2 cores is not worse than before the router tier; that run had one copy of each item.
  const r = (ks: Summary | null, peer: Summary | null, items = false) => (ks === null || peer === null ? '-' : fratio(items ? ks.itemsPerSec / peer.itemsPerSec : ks.opsPerSec / peer.opsPerSec));
  notes.push(`Issue 15's 2-core bar (a run of 2026-11-22, one coordinator process, one copy of each item): writes 0.21x Redis, reads 0.32x, range items 0.59x. This run: writes ${r(S('keyslice-r1', 'put'), S('redis', 'put'))} at R=1 and ${r(S('keyslice', 'put'), S('redis', 'put'))} at the default replication (R=${LOCAL_NODES}: each write is sent to the other node and waits for it), reads ${r(S('keyslice', 'get'), S('redis', 'get'))}, range items ${r(S('keyslice', 'range'), S('redis', 'range'), true)}.`);
  L.push(...notes.map((n) => `- ${n}`));
  L.push('');

  L.push(...dynamoLines(cfg, env, records));
  L.push(...detailLines(records, systems));
  return L.join('\n');
}

/** The code this run measures, in words: the commit and the tracked files changed in the work tree. */
function codeState(): string {
  const head = run('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']);
  if (!head.ok) return 'an unknown commit (no git)';
  const status = run('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no']);
  const changed = status.ok ? status.output.split('\n').filter((l) => l.trim() !== '').map((l) => l.slice(3)) : [];
  const merging = existsSync(join(ROOT, '.git', 'MERGE_HEAD'));
  const files = changed.length === 0 ? '' : changed.length <= 6 ? ` with uncommitted changes to ${changed.join(', ')}` : ` with uncommitted changes to ${changed.length} tracked files`;
  return `commit \`${head.output.trim()}\`${files}${merging ? ' (a merge in progress)' : ''}`;
}

// ---- main ----------------------------------------------------------------------------------------

async function main(): Promise<number> {
  let cfg: Config;
  try {
    cfg = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) refuseCommandLine(err.message, USAGE);
    throw err;
  }
  const t0 = performance.now();
  const codeAtStart = codeState();
  const loadBefore = loadavg();

  process.on('SIGINT', () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log('interrupted: stopping (Ctrl-C again exits at once)');
  });
  process.on('SIGTERM', () => {
    interrupted = true;
  });
  // Last resort: nothing outlives this process, and no data folder (bench/stop-all.ts).
  const clusters: LocalCluster[] = [];
  stopAllAtExit();

  const dataDirs: string[] = [];
  const adapters: Adapter[] = [];
  const pools: SdkClientPool[] = [];
  let failure: unknown = null;
  let code = 0;
  try {
    // 1. the peers
    const all = cfg.only === 'all';
    const redisServer = all ? ensureRedis(log) : null;
    const req = ensureNpmPeers(PEER_PACKAGES, log);
    const redisVersion = redisServer === null ? 'Redis not run' : run(redisServer, ['--version']).output.trim().split('\n')[0];
    const ioredisMod = req('ioredis') as { default?: RedisCtor } & RedisCtor;
    const Redis: RedisCtor = ioredisMod.default ?? ioredisMod;
    const sdk = req('@aws-sdk/client-dynamodb') as DynamoSdk;
    const { NodeHttpHandler } = req('@smithy/node-http-handler') as { NodeHttpHandler: new (o: Record<string, unknown>) => unknown };
    const dynaliteCli = join(dirname(req.resolve('dynalite/package.json')), 'cli.js');

    // 2. the servers
    let redisPort = 0;
    let redisPid: number | null = null;
    if (redisServer !== null) {
      const redisProc = await startRedisServer(redisServer, tmpdir(), adopt);
      redisPort = redisProc.port;
      redisPid = redisProc.child.pid ?? null;
      log(`${redisServer} on 127.0.0.1:${redisPort} (no persistence): pid ${redisPid}`);
    }
    const dynPort = await freePort();
    log(`starting dynalite on 127.0.0.1:${dynPort} (in memory)`);
    const dynProc = await startChild('dynalite', process.execPath, [dynaliteCli, '--host', '127.0.0.1', '--port', String(dynPort), '--createTableMs', '0', '--deleteTableMs', '0', '--updateTableMs', '0'], /Dynalite listening/);
    log(`dynalite pid ${dynProc.pid}`);
    // The ceiling: answers every request with a ready answer of the comparison's shape (bench/null-dynamodb.ts).
    const nullProc = await spawnUntilReady('null DynamoDB server', process.execPath, [join(ROOT, 'dist', 'bench', 'null-dynamodb.js'), '--port', '0', '--query-items', String(RANGE_ITEMS), '--payload-bytes', String(RANGE_PADDING.length)], /listening on (http:\/\/\S+)/, { onSpawn: adopt });
    const nullUrl = nullProc.match[1];
    log(`null DynamoDB server at ${nullUrl}: pid ${nullProc.child.pid}`);
    const startCluster = async (durability: DurabilityMode, replicationFactor?: number) => {
      const dir = benchTempDir(`keyslice-compare-${durability}-`);
      dataDirs.push(dir);
      const cl = await startLocalCluster({ dataDir: dir, nodes: LOCAL_NODES, workers: LOCAL_WORKERS, durability, replicationFactor });
      clusters.push(cl);
      log(`keyslice cluster (durability ${durability}${replicationFactor === undefined ? "" : `, R=${replicationFactor}`}) at ${cl.url}: pids ${[cl.coordinator, ...cl.nodes].map((p) => p.child.pid).join(', ')}; data in ${dir}`);
      for (const p of [cl.coordinator, ...cl.nodes]) p.child.once('exit', (c, s) => { if (!stopping) log(`keyslice ${durability} ${p.name} exited (${s ?? c}) during the run`); });
      return cl;
    };
    const ksOs = await startCluster('os');
    const ksFsync = all ? await startCluster('fsync') : null;
    const ksOne = all ? await startCluster('os', 1) : null;

    const ks = all ? await KeysliceAdapter.open(ksOs.url, cfg.connections) : null;
    if (ks !== null) adapters.push(ks);
    const ksF = ksFsync !== null ? await KeysliceAdapter.open(ksFsync.url, cfg.connections) : null;
    if (ksF !== null) adapters.push(ksF);
    const ks1 = ksOne !== null ? await KeysliceAdapter.open(ksOne.url, cfg.connections) : null;
    if (ks1 !== null) adapters.push(ks1);
    const redis = all ? await RedisAdapter.open(Redis, redisPort, cfg.connections) : null;
    if (redis !== null) adapters.push(redis);
    // The same SDK client settings for both DynamoDB APIs: one client, a keep-alive agent of `concurrency` sockets.
    const dyn = await DynamoSdkAdapter.open(sdk, NodeHttpHandler, `http://127.0.0.1:${dynPort}`, TABLE, cfg.concurrency);
    adapters.push(dyn);
    const ksSdk = await DynamoSdkAdapter.open(sdk, NodeHttpHandler, ksOs.url, SDK_TABLE, cfg.concurrency);
    adapters.push(ksSdk);
    const nullSdk = await DynamoSdkAdapter.open(sdk, NodeHttpHandler, nullUrl, TABLE, cfg.concurrency);
    adapters.push(nullSdk);

    // The read data set, into each system that is read.
    const rows = Array.from({ length: RANGE_DEVICES * RANGE_ITEMS }, (_, i) => rangeRow(i));
    const loadSeconds: Record<string, number> = {};
    const readable = ([['keyslice', ks], ['Redis', redis], ['dynalite', dyn], ['keyslice (SDK)', ksSdk]] as [string, Adapter | null][]).filter((e): e is [string, Adapter] => e[1] !== null);
    for (const [name, a] of readable) {
      const s = performance.now();
      log(`loading ${rows.length.toLocaleString('en-US')} items into ${name}`);
      await a.load(rows);
      loadSeconds[name] = (performance.now() - s) / 1000;
    }
    // Check that each answers a full range and a point read before measuring anything (the null server stores
    // nothing, so it is not loaded; it answers every read with items of the same shape).
    for (const [name, a] of [...readable, ['null server', nullSdk] as [string, Adapter]]) {
      // The DynamoDB API reads eventually consistent by default, so a follower may miss the last writes for a
      // replica tick or so (docs/replication.md): asked again for up to 2 s before it counts as wrong.
      let got = await a.range(0, rangeDevice(RANGE_DEVICES - 1), RANGE_ITEMS);
      for (let tries = 0; got !== RANGE_ITEMS && tries < 20; tries++) {
        await new Promise((r) => setTimeout(r, 100));
        got = await a.range(0, rangeDevice(RANGE_DEVICES - 1), RANGE_ITEMS);
      }
      if (got !== RANGE_ITEMS) throw new Error(`${name}: a range read of the loaded data answered ${got} items, not ${RANGE_ITEMS}`);
      await a.get(0, rangeDevice(0), RANGE_ITEMS - 1);
    }
    // The DynamoDB APIs are measured from client processes of their own (bench/sdk-clients.ts), the same settings for both.
    const shape = { rangeDevices: RANGE_DEVICES, rangeItems: RANGE_ITEMS, putKeys: PUT_KEYS, putPadding: PUT_PADDING };
    const poolFor = (system: SystemId, endpoint: string, table: string) =>
      SdkClientPool.start({ processes: cfg.sdkProcesses, inFlight: cfg.concurrency, endpoint, table, peersDir: PEERS_DIR, timeoutMs: REQUEST_TIMEOUT_MS, shape, onSpawn: (c) => {
        children.add(c);
        c.once('exit', () => children.delete(c));
      }, execArgv: cfg.sdkCpuProf === '' ? [] : ['--cpu-prof', '--cpu-prof-dir', join(cfg.sdkCpuProf, system)] });
    const dynPool = await poolFor('dynalite', `http://127.0.0.1:${dynPort}`, TABLE);
    pools.push(dynPool);
    const ksPool = await poolFor('keyslice-sdk', ksOs.url, SDK_TABLE);
    pools.push(ksPool);
    const nullPool = await poolFor('null-sdk', nullUrl, TABLE);
    pools.push(nullPool);
    if (cfg.sdkCpuProf !== '') log(`SDK client processes write CPU profiles under ${cfg.sdkCpuProf}/<system> when they exit`);
    // Warm the SDK client processes (and the servers' code paths) before anything is measured: a user's
    // long-running client has compiled the SDK's code; a fresh one costs 3-4x the CPU per request.
    // The systems warm up at once (nothing is measured, so they may share the cores), each workload in turn.
    if (cfg.sdkWarmupOps > 0) {
      for (const w of ['put', 'get', 'range'] as Workload[]) {
        if (interrupted) break;
        await Promise.all(([['dynalite', dynPool], ['keyslice-sdk', ksPool], ['null-sdk', nullPool]] as [SystemId, SdkClientPool][]).map(async ([system, pool]) => {
          const c0 = cpuSecondsOf(pool.pids);
          const p = await pool.run(w, SDK_WARMUP_SECONDS_MAX, cfg.sdkWarmupOps * pool.pids.length, false);
          const cpuMs = ((cpuSecondsOf(pool.pids) - c0) * 1000) / Math.max(1, p.ok);
          log(`warm-up ${w.padEnd(5)} ${SYSTEM_LABEL[system].padEnd(36)} ${fmt(p.ok)} ops in ${p.seconds.toFixed(1)} s, SDK client CPU ${fms(cpuMs)} ms/op`);
        }));
      }
    }
    const setupSeconds = (performance.now() - t0) / 1000;

    // 3. the rounds
    const putCounters = new Map<SystemId, number>();
    // Every put writes a new item; redis-multi's go to sharding keys of their own (putm-<k>), not over redis's.
    const nextPut = (s: SystemId) => {
      const n = putCounters.get(s) ?? 0;
      putCounters.set(s, n + 1);
      return putRow(n, s === 'redis-multi' ? 'putm' : 'put');
    };
    const randomItem = () => Math.floor(Math.random() * RANGE_DEVICES * RANGE_ITEMS);
    const randomDevice = () => rangeDevice(Math.floor(Math.random() * RANGE_DEVICES));
    const poolOf: Partial<Record<SystemId, SdkClientPool>> = { dynalite: dynPool, 'keyslice-sdk': ksPool, 'null-sdk': nullPool };
    const cellsFor = (w: Workload): Cell[] => cellsOf(w).map((c) => ({ ...c, pool: poolOf[c.system] }));
    const cellsOf = (w: Workload): Cell[] => {
      const getOp = (a: Adapter) => async (c: number) => {
        const i = randomItem();
        await a.get(c, rangeDevice(Math.floor(i / RANGE_ITEMS)), i % RANGE_ITEMS);
        return 1;
      };
      const rangeOp = (a: Adapter) => async (c: number) => {
        const n = await a.range(c, randomDevice(), RANGE_ITEMS);
        if (n !== RANGE_ITEMS) throw new Error(`short range: ${n} items`);
        return n;
      };
      const cells: Cell[] = [];
      if (w === 'put') {
        const putOp = (a: Adapter, s: SystemId) => async (c: number) => (await a.put(c, nextPut(s)), 1);
        if (ks !== null) cells.push({ system: 'keyslice', workload: w, op: putOp(ks, 'keyslice') });
        if (ks1 !== null) cells.push({ system: 'keyslice-r1', workload: w, op: putOp(ks1, 'keyslice-r1') });
        if (ksF !== null) cells.push({ system: 'keyslice-fsync', workload: w, op: putOp(ksF, 'keyslice-fsync') });
        if (redis !== null) {
          cells.push({ system: 'redis', workload: w, op: putOp(redis, 'redis') });
          cells.push({ system: 'redis-multi', workload: w, op: async (c) => (await redis.putIndexed(c, nextPut('redis-multi')), 1) });
        }
        cells.push({ system: 'dynalite', workload: w, op: putOp(dyn, 'dynalite') });
        cells.push({ system: 'keyslice-sdk', workload: w, op: putOp(ksSdk, 'keyslice-sdk') });
        cells.push({ system: 'null-sdk', workload: w, op: putOp(nullSdk, 'null-sdk') });
        return cells;
      }
      const make = w === 'get' ? getOp : rangeOp;
      if (ks !== null) cells.push({ system: 'keyslice', workload: w, op: make(ks) });
      if (redis !== null) cells.push({ system: 'redis', workload: w, op: make(redis) });
      cells.push({ system: 'dynalite', workload: w, op: make(dyn) });
      cells.push({ system: 'keyslice-sdk', workload: w, op: make(ksSdk) });
      cells.push({ system: 'null-sdk', workload: w, op: make(nullSdk) });
      return cells;
    };
    // Whose CPU time counts for each system: its server processes (a keyslice cluster: coordinator, its routers and slice nodes).
    const pidsOf = (cl: LocalCluster | null) =>
      cl === null ? [] : [cl.coordinator, ...cl.nodes].map((p) => p.child.pid ?? -1).flatMap((pid) => [pid, ...childPids(pid)]);
    const serverPids: Record<SystemId, number[]> = {
      keyslice: pidsOf(ksOs),
      'keyslice-sdk': pidsOf(ksOs),
      'keyslice-r1': pidsOf(ksOne),
      'keyslice-fsync': pidsOf(ksFsync),
      redis: redisPid === null ? [] : [redisPid],
      'redis-multi': redisPid === null ? [] : [redisPid],
      dynalite: [dynProc.pid ?? -1],
      'null-sdk': [nullProc.child.pid ?? -1],
    };
    // Each server's CPU while nothing is sent to it: the background share of its CPU per op.
    const idleCpuMsPerSec: Environment['idleCpuMsPerSec'] = {};
    for (const system of ['keyslice-sdk', 'dynalite', 'null-sdk'] as SystemId[]) {
      const pids = serverPids[system];
      const c0 = cpuSecondsOf(pids);
      await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
      idleCpuMsPerSec[system] = ((cpuSecondsOf(pids) - c0) * 1000) / IDLE_SECONDS;
    }
    const records: RunRecord[] = [];
    const total = cfg.rounds * (['put', 'get', 'range'] as Workload[]).reduce((n, w) => n + cellsFor(w).length, 0);
    let done = 0;
    for (let round = 1; round <= cfg.rounds && !interrupted; round++) {
      for (const w of ['put', 'get', 'range'] as Workload[]) {
        const cells = cellsFor(w);
        const shift = (round - 1) % cells.length;
        const ordered = [...cells.slice(shift), ...cells.slice(0, shift)];
        for (const cell of ordered) {
          if (interrupted) break;
          const measure = async (maxOps: number, seconds: number, record: boolean) =>
            cell.pool === undefined ? closedLoop(cfg, maxOps, seconds, cell.op, () => interrupted) : poolSample(await cell.pool.run(w, seconds, maxOps, record), maxOps);
          if (cfg.warmupS > 0) await measure(Number.MAX_SAFE_INTEGER, cfg.warmupS, false);
          const load1 = loadavg()[0];
          const pids = serverPids[cell.system];
          const clientPids = cell.pool?.pids ?? [];
          const cpu0 = cpuSecondsOf(pids);
          const clientCpu0 = cpuSecondsOf(clientPids);
          const sample = await measure(cfg.ops, cfg.durationS, true);
          const serverCpuMsPerOp = ((cpuSecondsOf(pids) - cpu0) * 1000) / sample.ok;
          const clientCpuMsPerOp = cell.pool === undefined ? NaN : ((cpuSecondsOf(clientPids) - clientCpu0) * 1000) / sample.ok;
          records.push({ round, system: cell.system, workload: w, sample, load1, serverCpuMsPerOp, clientCpuMsPerOp });
          done++;
          const errs = Object.values(sample.errors).reduce((a, b) => a + b, 0);
          log(`[${done}/${total}] round ${round} ${w.padEnd(5)} ${SYSTEM_LABEL[cell.system].padEnd(36)} ${fmt(sample.opsPerSec).padStart(8)} ops/s${w === 'range' ? ` ${fmt(sample.itemsPerSec).padStart(9)} items/s` : ''}  p50 ${fms(sample.p50)} ms  p99 ${fms(sample.p99)} ms  errors ${errs}  (load ${load1.toFixed(2)})`);
        }
      }
    }
    if (interrupted) throw new Error('interrupted: no report written');

    // 4. the report
    const sdkVersion = versionOf(req, '@aws-sdk/client-dynamodb');
    const codeAtEnd = codeState();
    const commit = codeAtStart === codeAtEnd ? codeAtStart : `${codeAtStart} when the run started and was built (the processes ran that code); by the end of the run the work tree had changed to ${codeAtEnd}`;
    const argsText = process.argv.slice(2).join(' ');
    const command = process.env.npm_lifecycle_event === 'bench:compare' ? `npm run bench:compare${argsText ? ' -- ' + argsText : ''}` : `node ${relative(ROOT, process.argv[1])}${argsText ? ' ' + argsText : ''}`;
    const env: Environment = {
      date: new Date().toISOString().replace('T', ' ').replace(/\.\d+Z$/, ''),
      command,
      nproc: run('nproc', []).output.trim() || String(cpus().length),
      cpuModel: cpus()[0]?.model ?? '?',
      memGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      redisVersion: redisVersion,
      dynaliteVersion: versionOf(req, 'dynalite'),
      ioredisVersion: versionOf(req, 'ioredis'),
      sdkVersion,
      commit,
      loadBefore,
      loadAfter: loadavg(),
      wallSeconds: (performance.now() - t0) / 1000,
      setupSeconds,
      loadSeconds,
      idleCpuMsPerSec,
    };
    writeFileSync(cfg.out, report(cfg, env, records));
    log(`wrote ${relative(process.cwd(), cfg.out) || cfg.out} (${(env.wallSeconds / 60).toFixed(1)} min)`);
  } catch (err) {
    failure = err;
    code = interrupted ? 130 : 1;
  }
  // Stop everything, in every case.
  stopping = true;
  await Promise.allSettled(adapters.map((a) => a.close()));
  await Promise.allSettled(pools.map((p) => p.close()));
  await Promise.allSettled(clusters.map((c) => c.stop()));
  await Promise.allSettled([...children].map((c) => stopProcess(c)));
  for (const d of dataDirs) removeBenchDir(d);
  // Anything left: a cluster that failed part way through its start.
  await stopAll();
  if (failure !== null) console.error(`compare: ${failure instanceof Error ? failure.message : String(failure)}`);
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`compare: ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);

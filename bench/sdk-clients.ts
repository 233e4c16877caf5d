// Several client processes, each with one AWS SDK v3 DynamoDBClient, that drive one
// DynamoDB API (dynalite or keyslice's endpoint) together for bench/compare.ts. One
// SDK client in the driver process was the limit of both systems (profiled: about 90%
// busy; its middleware, SigV4 signing and JSON cost more per request than either
// server), so the comparison measured the SDK. Every process gets the same client
// settings and an equal share of the requests in flight; the parent adds their ops and
// merges their latencies. The requests are built here for the driver's own SDK client
// (loading and checks) as well, so that both send the same thing.
//
// The parent forks this file with `--child`; they talk over IPC (structured clone):
//   parent -> child  { kind: 'run', workload, seconds, maxOps, record, putBase, putStride }
//   child -> parent  { kind: 'done', ok, items, puts, errors, latencies, seconds, stoppedBy }
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type SdkWorkload = 'put' | 'get' | 'range';

/** The shape of the data set, as compare.ts makes it. */
export interface SdkDataShape {
  rangeDevices: number;
  rangeItems: number;
  putKeys: number;
  putPadding: string;
}

type AttributeValue = { S: string } | { N: string };
export interface SdkRow {
  device: string;
  seq: number;
  payload: string;
}

export const sdkItem = (row: SdkRow): Record<string, AttributeValue> => ({ device: { S: row.device }, seq: { N: String(row.seq) }, payload: { S: row.payload } });
export const getInput = (table: string, device: string, seq: number) => ({ TableName: table, Key: { device: { S: device }, seq: { N: String(seq) } } });
export const queryInput = (table: string, device: string, n: number) => ({
  TableName: table,
  KeyConditionExpression: '#d = :d AND #s BETWEEN :a AND :b',
  ExpressionAttributeNames: { '#d': 'device', '#s': 'seq' },
  ExpressionAttributeValues: { ':d': { S: device }, ':a': { N: '0' }, ':b': { N: String(n - 1) } },
  Limit: n,
});

export interface SdkClient {
  send(command: unknown): Promise<Record<string, unknown>>;
  destroy(): void;
}

/** The secret access key the clients sign with: a cluster started with it as its client token (bench/hops.ts --signed) checks every signature. */
export const SDK_SECRET_ACCESS_KEY = 'bench';

/** One DynamoDBClient with the comparison's settings: a keep-alive agent of `sockets` sockets, one attempt, signed requests. */
export function makeSdkClient(peersDir: string, endpoint: string, sockets: number, timeoutMs: number): { client: SdkClient; agent: http.Agent; cmd: (name: string, input: Record<string, unknown>) => unknown } {
  const req = createRequire(join(peersDir, 'package.json'));
  const sdk = req('@aws-sdk/client-dynamodb') as { DynamoDBClient: new (c: Record<string, unknown>) => SdkClient } & Record<string, unknown>;
  const { NodeHttpHandler } = req('@smithy/node-http-handler') as { NodeHttpHandler: new (o: Record<string, unknown>) => unknown };
  // HTTP/1.1 has no pipelining, so the agent keeps up to `sockets` sockets alive.
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  const client = new sdk.DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'bench', secretAccessKey: SDK_SECRET_ACCESS_KEY },
    requestHandler: new NodeHttpHandler({ httpAgent: agent, requestTimeout: timeoutMs, connectionTimeout: timeoutMs }),
    maxAttempts: 1,
  });
  return { client, agent, cmd: (name, input) => new (sdk[name] as new (i: Record<string, unknown>) => unknown)(input) };
}

interface RunMessage {
  kind: 'run';
  workload: SdkWorkload;
  seconds: number;
  maxOps: number;
  record: boolean;
  putBase: number;
  putStride: number;
}
interface DoneMessage {
  kind: 'done';
  ok: number;
  items: number;
  puts: number;
  errors: Record<string, number>;
  latencies: Float64Array;
  seconds: number;
}

/** What one run of all the processes together gave. */
export interface PoolSample {
  ok: number;
  items: number;
  errors: Record<string, number>;
  seconds: number;
  /** Every op's latency in ms, sorted (empty unless recorded). */
  latencies: Float64Array;
}

/** `processes` client processes against `endpoint`, `inFlight` requests in flight among them. */
export class SdkClientPool {
  private nextPut = 0;
  private constructor(
    private readonly children: ChildProcess[],
    readonly inFlight: number,
  ) {}

  /** `execArgv`: Node's options for the client processes (e.g. `--cpu-prof`, to see where a client's CPU goes). */
  static async start(o: { processes: number; inFlight: number; endpoint: string; table: string; peersDir: string; timeoutMs: number; shape: SdkDataShape; onSpawn: (c: ChildProcess) => void; execArgv?: string[] }): Promise<SdkClientPool> {
    const script = fileURLToPath(import.meta.url);
    const n = Math.min(o.processes, o.inFlight);
    const children = Array.from({ length: n }, (_, i) => {
      const share = Math.floor(o.inFlight / n) + (i < o.inFlight % n ? 1 : 0);
      const child = fork(script, ['--child', JSON.stringify({ endpoint: o.endpoint, table: o.table, peersDir: o.peersDir, timeoutMs: o.timeoutMs, inFlight: share, shape: o.shape, index: i })], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, ...(o.execArgv ?? [])] });
      o.onSpawn(child);
      return child;
    });
    await Promise.all(children.map((c) => reply(c, 'ready')));
    return new SdkClientPool(children, o.inFlight);
  }

  /** The client processes' pids (their CPU time is the client's cost per op). */
  get pids(): number[] {
    return this.children.map((c) => c.pid ?? -1);
  }

  /** Runs `workload` in every process at once for at most `seconds` and `maxOps` ops in all. */
  async run(workload: SdkWorkload, seconds: number, maxOps: number, record: boolean): Promise<PoolSample> {
    const stride = this.children.length;
    const msg = (): RunMessage => ({ kind: 'run', workload, seconds, maxOps: Math.max(1, Math.floor(maxOps / stride)), record, putBase: this.nextPut, putStride: stride });
    const waits = this.children.map((c) => reply(c, 'done') as Promise<DoneMessage>);
    for (const c of this.children) c.send(msg());
    const done = await Promise.all(waits);
    this.nextPut += stride * (Math.max(...done.map((d) => d.puts)) + 1);
    const errors: Record<string, number> = {};
    for (const d of done) for (const [k, v] of Object.entries(d.errors)) errors[k] = (errors[k] ?? 0) + v;
    const total = done.reduce((a, d) => a + d.latencies.length, 0);
    const latencies = new Float64Array(total);
    let at = 0;
    for (const d of done) {
      latencies.set(d.latencies, at);
      at += d.latencies.length;
    }
    latencies.sort();
    return { ok: done.reduce((a, d) => a + d.ok, 0), items: done.reduce((a, d) => a + d.items, 0), errors, seconds: Math.max(...done.map((d) => d.seconds)), latencies };
  }

  async close(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((done) => {
            if (c.exitCode !== null || c.signalCode !== null) return done();
            c.once('exit', () => done());
            c.send({ kind: 'exit' });
          }),
      ),
    );
  }
}

/** The child's next message of `kind`; fails if the child exits first. */
function reply(child: ChildProcess, kind: string): Promise<unknown> {
  return new Promise((done, fail) => {
    const onMessage = (m: { kind: string }) => {
      if (m.kind !== kind) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      done(m);
    };
    const onExit = (code: number | null, signal: string | null) => {
      child.off('message', onMessage);
      fail(new Error(`an SDK client process exited (${signal ?? code}) before it answered '${kind}'`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

// ---- the child ---------------------------------------------------------------------------

async function child(): Promise<void> {
  const o = JSON.parse(process.argv[3]) as { endpoint: string; table: string; peersDir: string; timeoutMs: number; inFlight: number; shape: SdkDataShape; index: number };
  const { client, agent, cmd } = makeSdkClient(o.peersDir, o.endpoint, o.inFlight, o.timeoutMs);
  const { shape } = o;
  const rangeDevice = (d: number) => `range-${d}`;
  let putN = 0;
  let putBase = 0;
  let putStride = 1;
  const ops: Record<SdkWorkload, () => Promise<number>> = {
    put: async () => {
      const n = putBase + o.index + putStride * putN++;
      await client.send(cmd('PutItemCommand', { TableName: o.table, Item: sdkItem({ device: `put-${n % shape.putKeys}`, seq: Math.floor(n / shape.putKeys), payload: shape.putPadding }) }));
      return 1;
    },
    get: async () => {
      const i = Math.floor(Math.random() * shape.rangeDevices * shape.rangeItems);
      const r = await client.send(cmd('GetItemCommand', getInput(o.table, rangeDevice(Math.floor(i / shape.rangeItems)), i % shape.rangeItems)));
      if (r.Item === undefined) throw new Error('NotFound');
      return 1;
    },
    range: async () => {
      const r = await client.send(cmd('QueryCommand', queryInput(o.table, rangeDevice(Math.floor(Math.random() * shape.rangeDevices)), shape.rangeItems)));
      const n = (r.Items as unknown[] | undefined)?.length ?? 0;
      if (n !== shape.rangeItems) throw new Error(`short range: ${n} items`);
      return n;
    },
  };
  const run = async (m: RunMessage): Promise<DoneMessage> => {
    putN = 0;
    putBase = m.putBase;
    putStride = m.putStride;
    const op = ops[m.workload];
    let latencies = new Float64Array(m.record ? 1 << 14 : 0);
    let n = 0;
    let issued = 0;
    let ok = 0;
    let items = 0;
    const errors: Record<string, number> = {};
    const start = performance.now();
    const deadline = start + m.seconds * 1000;
    await Promise.all(
      Array.from({ length: o.inFlight }, async () => {
        while (issued < m.maxOps && performance.now() < deadline) {
          issued++;
          const t0 = performance.now();
          try {
            const got = await op();
            ok++;
            items += got;
            if (m.record) {
              if (n === latencies.length) {
                const grown = new Float64Array(n * 2);
                grown.set(latencies);
                latencies = grown;
              }
              latencies[n++] = performance.now() - t0;
            }
          } catch (err) {
            const code = (err as Error)?.name === 'Error' ? String((err as Error).message).slice(0, 80) : ((err as Error)?.name ?? 'Error');
            errors[code] = (errors[code] ?? 0) + 1;
          }
        }
      }),
    );
    return { kind: 'done', ok, items, puts: putN, errors, latencies: latencies.slice(0, n), seconds: (performance.now() - start) / 1000 };
  };
  process.on('message', (m: RunMessage | { kind: 'exit' }) => {
    if (m.kind === 'exit') {
      client.destroy();
      agent.destroy();
      process.disconnect();
      return;
    }
    run(m).then(
      (d) => process.send!(d),
      (err) => {
        console.error(`sdk client process: ${err instanceof Error ? err.stack : err}`);
        process.exit(1);
      },
    );
  });
  // The parent gone (killed): nothing to drive for.
  process.on('disconnect', () => process.exit(0));
  process.send!({ kind: 'ready' });
}

if (process.argv[2] === '--child') {
  child().catch((err) => {
    console.error(`sdk client process: ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  });
}

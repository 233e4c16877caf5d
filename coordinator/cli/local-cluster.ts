// A local cluster as plain processes on 127.0.0.1: slice nodes first, then the
// coordinator pointed at them. Used by `npm start`, the tests and the bench.
// Every process is started here and stopped here, by its PID. The cluster gets a
// random cluster secret (or KEYSLICE_CLUSTER_SECRET's), handed to its processes in
// their environment (not on the command line, which other users can read), so
// that no other local process can send slice commands to its nodes.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { envNumber, fromEnv } from '../../shared/cli-args.js';
import { COORDINATOR_PORT_DEFAULT, oldSpaceFloorOption, ROUTER_OLD_SPACE_FLOOR_MB, type DurabilityMode, type SliceCapacity } from '../../shared/limits.js';

const here = dirname(fileURLToPath(import.meta.url));
// Run from dist/coordinator (compiled) or from coordinator/ (tests import the source): processes run the compiled code.
const distRoot = here.endsWith(join('dist', 'coordinator', 'cli')) ? resolve(here, '..', '..') : resolve(here, '..', '..', 'dist');

const START_TIMEOUT_MS = 20_000;
/** How long stopProcess waits after its signal before SIGKILL (bench/stop-all.ts waits as long). */
export const STOP_TIMEOUT_MS = 5_000;

export interface ClusterOptions {
  dataDir: string;
  nodes?: number;
  workers?: number;
  slices?: number;
  /** 0 picks free ports. */
  coordinatorPort?: number;
  /** First slice node port; node i listens on nodePortBase + i. 0 picks free ports. */
  nodePortBase?: number;
  /** Node i serves its own /metrics on nodeMetricsPortBase + i (--metrics-port); default none. */
  nodeMetricsPortBase?: number;
  /** Slice node durability (default: the node's own default, fsync). */
  durability?: DurabilityMode;
  /** Slice node snapshot threshold (default SNAPSHOT_AFTER_LOG_BYTES). */
  snapshotAfterBytes?: number;
  /** Per-slice capacity (default: none). */
  capacity?: SliceCapacity;
  /** Where process output goes; by default it is kept for error messages only. */
  log?: (line: string) => void;
  /** The cluster secret (default: KEYSLICE_CLUSTER_SECRET, or a random one made here). */
  clusterSecret?: string;
  /** Router processes on the client port (default: the coordinator's, from the core count; 0: none). */
  routers?: number;
  /** --replication-factor of the coordinator (default: its own, auto). */
  replicationFactor?: number | 'auto';
  /** More options of the coordinator (`keyslice coordinator --help`). */
  coordinatorArgs?: string[];
  /** More options of each slice node (`keyslice node --help`). */
  nodeArgs?: string[];
}

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  url: string;
  args: string[];
}

export interface LocalCluster {
  url: string;
  wsUrl: string;
  coordinator: ManagedProcess;
  nodes: ManagedProcess[];
  /** The secret its coordinator and nodes share: a process restarting one of them needs it. */
  clusterSecret: string;
  stop(): Promise<void>;
}

/** A fresh cluster secret: 256 random bits. */
export function newClusterSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** This environment with the cluster secret set (undefined: as it is). */
function withSecret(secret: string | undefined): NodeJS.ProcessEnv | undefined {
  return secret === undefined ? undefined : { ...process.env, KEYSLICE_CLUSTER_SECRET: secret };
}

/** Spawns `cmd` and resolves when a line of its output (stdout or stderr) matches `ready`;
 * kills it and fails if that takes longer than START_TIMEOUT_MS or it exits first. */
export function spawnUntilReady(
  name: string,
  cmd: string,
  args: string[],
  ready: RegExp,
  opts: { log?: (line: string) => void; env?: NodeJS.ProcessEnv; onSpawn?: (child: ChildProcess) => void } = {},
): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
  opts.onSpawn?.(child);
  const recent: string[] = [];
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within ${START_TIMEOUT_MS} ms:\n${recent.join('\n')}`));
    }, START_TIMEOUT_MS);
    let isReady = false;
    const onLine = (line: string) => {
      opts.log?.(`[${name}] ${line}`);
      if (isReady) return;
      recent.push(line);
      if (recent.length > 50) recent.shift();
      const match = line.match(ready);
      if (match) {
        isReady = true;
        clearTimeout(timer);
        resolveStart({ child, match });
      }
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${name} could not be started: ${err.message}`));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!isReady) reject(new Error(`${name} exited (${signal ?? code}) before it was ready:\n${recent.join('\n')}`));
    });
  });
}

/** Starts one of our processes (a compiled script under dist/) and resolves when it prints its ready line.
 * `env`: the whole environment of the process (default: this one's). `nodeOptions`: Node's options of this process,
 * ahead of KEYSLICE_NODE_ARGS's (so that one of those, taken last by V8, overrides them). */
export async function startProcess(name: string, script: string, args: string[], ready: RegExp, log?: (line: string) => void, env?: NodeJS.ProcessEnv, nodeOptions: string[] = []): Promise<{ proc: ManagedProcess; match: RegExpMatchArray }> {
  // KEYSLICE_PROFILE_DIR (bench/hops.ts --profile): every process writes V8 CPU profiles of its threads there when it stops.
  const profileDir = (env ?? process.env).KEYSLICE_PROFILE_DIR;
  // KEYSLICE_NODE_ARGS (bench/put-shape.ts): Node's options for every process, space separated (e.g. V8's GC and compiler
  // threads off: --single-threaded-gc --no-concurrent-recompilation), to see which thread a cost lands on.
  const extraArgs = ((env ?? process.env).KEYSLICE_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const nodeArgs = [...nodeOptions, ...(profileDir === undefined || profileDir === '' ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`]), ...extraArgs];
  const { child, match } = await spawnUntilReady(name, process.execPath, [...nodeArgs, join(distRoot, script), ...args], ready, { log, env });
  return { proc: { name, child, url: match[1], args }, match };
}

export interface SliceNodeOptions {
  name: string;
  dataDir: string;
  /** 0 picks a free port. */
  port: number;
  workers: number;
  durability?: DurabilityMode;
  snapshotAfterBytes?: number;
  capacity?: SliceCapacity;
  /** Register with this coordinator (http://host:port) and heartbeat to it. */
  coordinator?: string;
  clusterSecret?: string;
  /** Serve the node's own /metrics on this port (--metrics-port), asking for `token` where one is given. */
  metricsPort?: number;
  token?: string;
  /** More options (`keyslice node --help`). */
  extraArgs?: string[];
  log?: (line: string) => void;
}

export function startSliceNode(o: SliceNodeOptions): Promise<ManagedProcess> {
  const args = ['--port', String(o.port), '--workers', String(o.workers), '--data', o.dataDir];
  if (o.coordinator !== undefined) args.push('--coordinator', o.coordinator);
  if (o.durability !== undefined) args.push('--durability', o.durability);
  if (o.metricsPort !== undefined) args.push('--metrics-port', String(o.metricsPort));
  if (o.token !== undefined) args.push('--token', o.token);
  if (o.snapshotAfterBytes !== undefined) args.push('--snapshot-after-bytes', String(o.snapshotAfterBytes));
  if (o.capacity !== undefined) args.push('--slice-reads-per-second', String(o.capacity.readsPerSecond), '--slice-writes-per-second', String(o.capacity.writesPerSecond));
  args.push(...(o.extraArgs ?? []));
  return startProcess(o.name, 'slice-worker/main.js', args, /slice node ready (ws:\/\/\S+)/, o.log, withSecret(o.clusterSecret)).then((r) => r.proc);
}

/** The routers a coordinator started with these arguments is asked for, as it reads them: the last --routers, else
 * KEYSLICE_ROUTERS (what it inherits); undefined: its default, at least one. */
function routersAsked(extra: string[]): string | undefined {
  let asked: string | undefined;
  extra.forEach((a, i) => {
    if (a === '--routers') asked = extra[i + 1];
    else if (a.startsWith('--routers=')) asked = a.slice('--routers='.length);
  });
  return asked ?? fromEnv('KEYSLICE_ROUTERS');
}

/** `extra`: more coordinator arguments (--token, --cluster-secret, --move-items-per-second, ...).
 * `clusterSecret`: passed in the environment. */
export function startCoordinator(
  dataDir: string,
  port: number,
  nodeUrls: string[],
  slices: number | undefined,
  log?: (line: string) => void,
  extra: string[] = [],
  clusterSecret?: string,
): Promise<ManagedProcess> {
  const args = ['--port', String(port), '--data', dataDir, ...extra];
  if (nodeUrls.length > 0) args.push('--nodes', nodeUrls.join(','));
  if (slices !== undefined) args.push('--slices', String(slices));
  // A coordinator that serves the request path itself (--routers 0) reads every byte as a router does, and ran as many
  // mark-compacts under range load (ROUTER_OLD_SPACE_FLOOR_MB); with routers its own thread serves none of it.
  const nodeOptions = Number(routersAsked(extra)) === 0 ? [oldSpaceFloorOption(ROUTER_OLD_SPACE_FLOOR_MB)] : [];
  return startProcess('coordinator', 'coordinator/main.js', args, /coordinator ready (http:\/\/\S+)/, log, withSecret(clusterSecret), nodeOptions).then((r) => r.proc);
}

/** A router (coordinator/router/main.ts) fed by the coordinator at `coordinatorUrl`. */
export function startRouter(name: string, coordinatorUrl: string, port: number, clusterSecret?: string, log?: (line: string) => void, extra: string[] = []): Promise<ManagedProcess> {
  const args = ['--coordinator', coordinatorUrl, '--port', String(port), ...extra];
  return startProcess(name, 'coordinator/router/main.js', args, /router ready (http:\/\/\S+)/, log, withSecret(clusterSecret), [oldSpaceFloorOption(ROUTER_OLD_SPACE_FLOOR_MB)]).then((r) => r.proc);
}

/** Sends SIGTERM, waits, then SIGKILL: the process is gone when this resolves. */
export function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    child.once('exit', () => {
      clearTimeout(timer);
      done();
    });
    child.kill(signal);
  });
}

/** Slice nodes of `npm start` / `keyslice local` (ports 7101-7103 by default). */
export const LOCAL_NODES = 3;

/** What each slice node of a cluster started with `opts` is given, but its name, folder, port and secret: a test
 * that restarts one of its nodes starts it the same way. */
export function nodeOptionsOf(opts: Partial<ClusterOptions>): Pick<SliceNodeOptions, 'workers' | 'durability' | 'snapshotAfterBytes' | 'capacity' | 'extraArgs' | 'log'> {
  return { workers: opts.workers ?? 2, durability: opts.durability, snapshotAfterBytes: opts.snapshotAfterBytes, capacity: opts.capacity, extraArgs: opts.nodeArgs, log: opts.log };
}

export async function startLocalCluster(opts: ClusterOptions): Promise<LocalCluster> {
  const nodeCount = opts.nodes ?? 2;
  const envSecret = process.env.KEYSLICE_CLUSTER_SECRET;
  const clusterSecret = opts.clusterSecret ?? (envSecret !== undefined && envSecret !== '' ? envSecret : newClusterSecret());
  const started: ManagedProcess[] = [];
  try {
    // Every node's start is waited for, failed or not: with Promise.all, one that failed first would leave the
    // others starting, out of `started`, to run on after the catch below.
    const starts = await Promise.allSettled(
      Array.from({ length: nodeCount }, (_, i) =>
        startSliceNode({
          name: `slice-node-${i + 1}`,
          dataDir: join(opts.dataDir, `slice-node-${i + 1}`),
          port: opts.nodePortBase ? opts.nodePortBase + i : 0,
          metricsPort: opts.nodeMetricsPortBase ? opts.nodeMetricsPortBase + i : undefined,
          ...nodeOptionsOf(opts),
          clusterSecret,
        }).then((p) => {
          started.push(p);
          return p;
        }),
      ),
    );
    const failed = starts.find((s) => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const nodes = starts.map((s) => (s as PromiseFulfilledResult<ManagedProcess>).value);
    const extra = [
      ...(opts.routers === undefined ? [] : ['--routers', String(opts.routers)]),
      ...(opts.replicationFactor === undefined ? [] : ['--replication-factor', String(opts.replicationFactor)]),
      ...(opts.coordinatorArgs ?? []),
    ];
    const coordinator = await startCoordinator(join(opts.dataDir, 'coordinator'), opts.coordinatorPort ?? 0, nodes.map((n) => n.url), opts.slices, opts.log, extra, clusterSecret);
    started.push(coordinator);
    const url = coordinator.url;
    const cluster: LocalCluster = {
      url,
      wsUrl: url.replace(/^http/, 'ws') + '/ws',
      coordinator,
      nodes,
      clusterSecret,
      // Stops the processes the cluster holds now (a test may have restarted one).
      stop: () => Promise.all([cluster.coordinator, ...cluster.nodes].map((p) => stopProcess(p.child))).then(() => undefined),
    };
    return cluster;
  } catch (err) {
    await Promise.all(started.map((p) => stopProcess(p.child)));
    throw err;
  }
}

// `npm start`: a coordinator and three slice nodes of two workers each, data under ./data: with the
// default replication factor (3 replicas of each slice) the cluster keeps serving when one node dies.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // `npm start` takes its settings from the environment only; an argument is a mistake, said before anything starts.
  const args = process.argv.slice(2);
  if (args.length > 0) {
    const help = args.every((a) => a === '--help' || a === '-h');
    (help ? console.log : console.error)(
      'usage: npm start (node dist/coordinator/cli/local-cluster.js): a coordinator and three slice nodes on 127.0.0.1\n' +
        'settings from the environment: KEYSLICE_DATA (default ./data), KEYSLICE_PORT (default 7100; nodes on the next ports),\n' +
        'KEYSLICE_REPLICATION_FACTOR, KEYSLICE_CLUSTER_SECRET. For flags, use `keyslice local --help`.',
    );
    process.exit(help ? 0 : 2);
  }
  // Each variable read as a process reads its options' (fromEnv: empty is unset), the port checked before anything
  // starts: Number() of an empty KEYSLICE_PORT was 0 (any free ports, where 7100 was meant), and of "abc" NaN, which
  // started the three nodes before the coordinator refused a --port of "NaN".
  const dataDir = resolve(fromEnv('KEYSLICE_DATA') ?? 'data');
  const port = envNumber('KEYSLICE_PORT', 0, 65535 - LOCAL_NODES, COORDINATOR_PORT_DEFAULT);
  const replicationFactor = fromEnv('KEYSLICE_REPLICATION_FACTOR');
  // A stop asked for during the start (SIGTERM, or SIGINT sent to this process alone) is taken at once, and done once
  // the start has ended: without handlers yet, the signal ended this process and left the processes it had started
  // running, with no one to stop them. (startLocalCluster stops what it started if the start fails.)
  let cluster: LocalCluster | undefined;
  let stopping = false;
  const stop = async (exitCode: number) => {
    if (stopping) return;
    stopping = true;
    console.log('keyslice: stopping the cluster');
    await cluster?.stop();
    process.exit(exitCode);
  };
  let stopAsked = false;
  const onSignal = () => {
    if (cluster !== undefined) return void stop(0);
    if (!stopAsked) console.log('keyslice: stopping once the processes started so far are up');
    stopAsked = true;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  cluster = await startLocalCluster({
    dataDir,
    nodes: LOCAL_NODES,
    replicationFactor: replicationFactor === undefined ? undefined : replicationFactor === 'auto' ? 'auto' : Number(replicationFactor),
    coordinatorPort: port,
    nodePortBase: port === 0 ? 0 : port + 1,
    log: (line) => console.log(line),
  }).catch((err) => {
    console.error(`keyslice: the local cluster did not start: ${err.message}`);
    process.exit(1);
  });
  if (stopAsked) await stop(0);
  console.log(`\nkeyslice is running: ${cluster.url} (HTTP, POST /api/<Operation>) and ${cluster.wsUrl} (WebSocket)`);
  console.log(`the studio (a live page of the slices and their load): ${cluster.url}/ in a browser; DynamoDB's API: POST ${cluster.url}/`);
  console.log(`data under ${dataDir}; Ctrl-C stops every process.`);
  console.log(
    process.env.KEYSLICE_CLUSTER_SECRET
      ? 'slice nodes take commands only with the cluster secret in KEYSLICE_CLUSTER_SECRET.\n'
      : 'slice nodes take commands only with this run\'s random cluster secret (set KEYSLICE_CLUSTER_SECRET before npm start to choose it, e.g. to add a node).\n',
  );
  // With replicas on every node (the default factor), one node lost leaves every slice a majority of its replicas.
  const survivesOneNode = replicationFactor === undefined || replicationFactor === '' || replicationFactor === 'auto' || Number(replicationFactor) >= 3;
  let nodesDown = 0;
  for (const p of [cluster.coordinator, ...cluster.nodes]) {
    p.child.on('exit', (code, signal) => {
      if (stopping) return;
      const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
      if (p !== cluster.coordinator && survivesOneNode && ++nodesDown === 1) {
        console.error(
          `keyslice: ${p.name} (pid ${p.child.pid}) ${how}; every slice has replicas on the other nodes, which elect new leaders, so the cluster keeps serving. ` +
            `Restart the whole cluster (Ctrl-C, then npm start) to bring the node back, or remove it for good: keyslice remove ${p.url}`,
        );
        return;
      }
      // A half cluster would look alive while part of the data answers Unavailable: better to stop it whole, and say so.
      const why =
        p === cluster.coordinator
          ? 'without the coordinator no request is served'
          : nodesDown > 1
            ? 'a second node is down, so slices without a majority of their replicas cannot be served'
            : 'its slices answer Unavailable while it is down, so the cluster would serve only part of the keys';
      console.error(`keyslice: ${p.name} (pid ${p.child.pid}) ${how}; ${why}. Stopping the other processes; run keyslice local again to restart (the data stays in ${dataDir}).`);
      void stop(1);
    });
  }
}

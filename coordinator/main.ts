// The coordinator process: the catalog, the cluster map and membership (one
// authority, persisted), one link per slice node, and the feed that gives
// routers their copy. With --routers 0 it also runs the request path (client API
// over HTTP and WebSocket) on the client port; with --routers N it starts N router
// processes (node:cluster workers, coordinator/router/main.ts) that share the
// client port, and serves its own API (feed, /cluster/, table changes the routers
// forward) on --cluster-port.
import nodeCluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isLoopbackHost, missingSecretProblem } from '../shared/auth.js';
import { cannotListen, fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { initHashing } from '../shared/hashing.js';
import {
  CLUSTER_READY_WAIT_MS,
  COORDINATOR_PORT_DEFAULT,
  DRAIN_REPLACE_DOWN_MS,
  DRAIN_REPLACE_DOWN_MS_MIN,
  LEADER_HEARTBEAT_TIMEOUT_MS,
  LEADER_HEARTBEAT_TIMEOUT_MS_MIN,
  MOVE_ITEMS_PER_SECOND_DEFAULT,
  NODE_URL_CHARS_MAX,
  REMOVE_DOWN_AFTER_MS_DEFAULT,
  REMOVE_DOWN_AFTER_MS_MIN,
  REPLICATION_FACTOR_AUTO_MAX,
  REPLICATION_FACTOR_MAX,
  REPLICA_MOVE_UNDO_DOWN_MS,
  REPLICA_MOVE_UNDO_DOWN_MS_MIN,
  ROUTER_RESTART_DELAY_MS,
  oldSpaceFloorOption,
  ROUTER_OLD_SPACE_FLOOR_MB,
  ROUTERS_MAX,
  routersDefault,
  SLICE_COUNT_DEFAULT,
  SLICE_COUNT_MAX,
} from '../shared/limits.js';
import { CLIENT_WS_PATH, isNodeUrl } from '../shared/protocol.js';
import { Catalog } from './metadata/catalog.js';
import { DynamoDbEndpoint } from './dynamodb/endpoint.js';
import { TableSettingsStore } from './dynamodb/table-settings.js';
import { ClusterMap } from './metadata/cluster-map.js';
import { FAILOVER_TIMING_DEFAULT } from './metadata/failover.js';
import { ClusterFeed } from './metadata/feed.js';
import { clientServer } from './router/client-server.js';
import { handleHttp } from './router/http-api.js';
import { renderMetrics } from './router/metrics.js';
import { Membership } from './metadata/membership.js';
import { Operations } from './router/operations.js';
import { Router } from './router/router.js';
import { REQUEST_PATH_ARGS, requestPathEnv, requestPathOptions } from './router/request-path-options.js';
import { ProcessMetrics } from './router/process-metrics.js';
import { Studio } from './studio/routes.js';
import { startStallTrace } from '../shared/stall-trace.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    host: { default: '127.0.0.1', help: 'address to listen on', env: 'KEYSLICE_HOST' },
    port: { default: String(COORDINATOR_PORT_DEFAULT), help: 'port for HTTP and WebSocket clients (0: any free port)', env: 'KEYSLICE_COORDINATOR_PORT' },
    nodes: { default: '', help: 'slice node addresses to start with, comma-separated (ws://host:port,...); nodes started with --coordinator join by themselves', env: 'KEYSLICE_NODES' },
    slices: { default: String(SLICE_COUNT_DEFAULT), help: 'slice count, fixed when the cluster is created', env: 'KEYSLICE_SLICES' },
    data: { default: './data/coordinator', help: 'data folder (catalog and cluster map)', env: 'KEYSLICE_COORDINATOR_DATA' },
    token: { default: '', help: 'client token: HTTP and WebSocket requests without it are refused (empty: none required)', env: 'KEYSLICE_TOKEN' },
    'cluster-secret': { default: '', help: 'shared secret of coordinator and slice nodes (empty: none required, allowed only on a loopback --host)', env: 'KEYSLICE_CLUSTER_SECRET' },
    rebalance: { default: 'yes', help: 'yes: move slices onto nodes that join; no: only drains move slices', env: 'KEYSLICE_REBALANCE' },
    routers: { default: String(routersDefault(availableParallelism())), help: `router processes that share the client port (0: this process serves clients itself; default from the core count, ${routersDefault(availableParallelism())} here)`, env: 'KEYSLICE_ROUTERS' },
    'cluster-port': { default: '0', help: 'with --routers N: this process\'s own port (routers\' feed, /cluster/, table changes; 0: any free port)', env: 'KEYSLICE_CLUSTER_PORT' },
    'replication-factor': { default: 'auto', help: `replicas of each slice, on distinct nodes (auto: ${REPLICATION_FACTOR_AUTO_MAX} when the cluster has at least ${REPLICATION_FACTOR_AUTO_MAX} nodes, else their count); see docs/replication.md`, env: 'KEYSLICE_REPLICATION_FACTOR' },
    'leader-timeout-ms': { default: String(LEADER_HEARTBEAT_TIMEOUT_MS), help: 'a replicated slice whose leader has not answered the coordinator for this long gets another leader (docs/replication.md)', env: 'KEYSLICE_LEADER_TIMEOUT_MS' },
    'remove-down-after-ms': { default: String(REMOVE_DOWN_AFTER_MS_DEFAULT), help: `a slice node down this long is removed as "keyslice remove" would, when no slice loses its last copy or majority; its replicas are placed again on the others (0: never; at least ${REMOVE_DOWN_AFTER_MS_MIN}; docs/replication.md). A drain replaces a down node's replicas in the slices it drains after --drain-replace-down-ms down, or after this where longer`, env: 'KEYSLICE_REMOVE_DOWN_AFTER_MS' },
    'drain-replace-down-ms': { default: String(DRAIN_REPLACE_DOWN_MS), help: `in a slice it drains, a drain replaces a follower whose node has been down this long, as "keyslice remove" would (or after --remove-down-after-ms where longer; at least ${DRAIN_REPLACE_DOWN_MS_MIN}; docs/replication.md)`, env: 'KEYSLICE_DRAIN_REPLACE_DOWN_MS' },
    'move-undo-down-ms': { default: String(REPLICA_MOVE_UNDO_DOWN_MS), help: `a replica move or drain step whose new replica's node has been down this long before it completed is undone (at least ${REPLICA_MOVE_UNDO_DOWN_MS_MIN}; docs/replication.md)`, env: 'KEYSLICE_MOVE_UNDO_DOWN_MS' },
    ...REQUEST_PATH_ARGS,
    'move-items-per-second': { default: String(MOVE_ITEMS_PER_SECOND_DEFAULT), help: 'throttle of slice moves, items copied per second over all moves (0: no limit)', env: 'KEYSLICE_MOVE_ITEMS_PER_SECOND' },
  },
  'usage: keyslice coordinator [--nodes ws://127.0.0.1:7101,ws://127.0.0.1:7102] [options]',
).values;
const port = intArg('port', args.port, 0, 65535);
const sliceCount = intArg('slices', args.slices, 1, SLICE_COUNT_MAX);
const routers = intArg('routers', args.routers, 0, ROUTERS_MAX);
const clusterPort = intArg('cluster-port', args['cluster-port'], 0, 65535);
const leaderTimeoutMs = intArg('leader-timeout-ms', args['leader-timeout-ms'], LEADER_HEARTBEAT_TIMEOUT_MS_MIN, 600_000);
const removeDownAfterMs = intArg('remove-down-after-ms', args['remove-down-after-ms'], 0, 2 ** 31);
if (removeDownAfterMs !== 0 && removeDownAfterMs < REMOVE_DOWN_AFTER_MS_MIN) {
  fail(`--remove-down-after-ms is 0 (never) or at least ${REMOVE_DOWN_AFTER_MS_MIN}: a node that only restarts must not lose its replicas; got ${removeDownAfterMs}`);
}
const requestPath = requestPathOptions(args);
const drainReplaceDownMs = intArg('drain-replace-down-ms', args['drain-replace-down-ms'], DRAIN_REPLACE_DOWN_MS_MIN, 2 ** 31);
const moveUndoDownMs = intArg('move-undo-down-ms', args['move-undo-down-ms'], REPLICA_MOVE_UNDO_DOWN_MS_MIN, 2 ** 31);
const moveItemsPerSecond = intArg('move-items-per-second', args['move-items-per-second'], 0, 1e9);
if (!['yes', 'no'].includes(args.rebalance)) fail('--rebalance must be yes or no');
const nodeUrls = (args.nodes ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
for (const u of nodeUrls) if (!isNodeUrl(u)) fail(`--nodes: "${u}" is not a ws://host:port address of at most ${NODE_URL_CHARS_MAX} characters`);
if (new Set(nodeUrls).size !== nodeUrls.length) fail('--nodes names a slice node twice');
const secretProblem = missingSecretProblem(args.host, args['cluster-secret']);
if (secretProblem !== null) fail(secretProblem);

const replication = args['replication-factor'] === 'auto' ? 'auto' : Number(args['replication-factor']);
if (replication !== 'auto' && (!Number.isInteger(replication) || replication < 1 || replication > REPLICATION_FACTOR_MAX)) {
  fail(`--replication-factor must be auto or a whole number from 1 to ${REPLICATION_FACTOR_MAX} (a slice needs at least one replica), got ${JSON.stringify(args['replication-factor'])}`);
}

await initHashing();
// The catalog and DynamoDB's table settings first: opening the map may change it (a node of --nodes joins, replicas
// are placed, an older map gets its cluster id), and a coordinator that refuses a file must leave every file as it was
// (docs/operations.md).
let catalog: Catalog;
let dynamodbSettings: TableSettingsStore;
try {
  catalog = Catalog.open(args.data);
  dynamodbSettings = TableSettingsStore.open(args.data);
} catch (err) {
  fail((err as Error).message);
}
const map = ClusterMap.open(args.data, nodeUrls, sliceCount, replication);
if (typeof map === 'string') fail(map);
catalog.createProblem = () => map.replicationProblem();

const log = (line: string) => console.log(`keyslice coordinator: ${line}`);
const security = { token: args.token, clusterSecret: args['cluster-secret'] };
if (security.token === '' && !isLoopbackHost(args.host)) log('warning: no --token; any client that reaches this port is served');
const cluster = new Membership(map, catalog, security.clusterSecret, moveItemsPerSecond, args.rebalance === 'yes', log, {
  ...FAILOVER_TIMING_DEFAULT,
  heartbeatTimeoutMs: leaderTimeoutMs,
  // A ping goes out a few times per timeout, so one lost answer does not depose a leader.
  pingIntervalMs: Math.min(FAILOVER_TIMING_DEFAULT.pingIntervalMs, Math.floor(leaderTimeoutMs / 3)),
}, removeDownAfterMs, { drainReplaceMs: drainReplaceDownMs, moveUndoMs: moveUndoDownMs });
const processMetrics = new ProcessMetrics('coordinator', log);
processMetrics.countElections(cluster.leaders.electionsBy);
if (routers > 0) processMetrics.serveRouters();
const ops = new Operations(catalog, new Router(cluster, processMetrics, requestPath.retryMs), undefined, processMetrics);
const metrics = async () => {
  const m = cluster.mover;
  // With routers, their request and process series too (process-metrics.ts): every port answers the same.
  const [own, load] = await Promise.all([
    routers > 0 ? processMetrics.allProcesses() : processMetrics.text(),
    renderMetrics(catalog, cluster, cluster.presentLinks(), { inFlight: m.moving.size, completed: m.completed, failed: m.failed, itemsMoved: m.itemsMoved }),
  ]);
  return own + load;
};
const studio = new Studio(catalog, cluster, security.token);
const feed = new ClusterFeed(map, catalog, cluster);
const dynamodb = new DynamoDbEndpoint(ops, { dataDir: args.data, settings: dynamodbSettings, token: security.token, sliceCount: map.sliceCount, metrics: processMetrics });
const client = clientServer(ops, security.token, (req, res) => handleHttp(ops, metrics, cluster, security, req, res, dynamodb, studio, { feed }), requestPath.http);
const { server, wss } = client;

// ws re-emits the server's errors on wss; either way a listen error is one sentence, not a stack trace.
const ownPort = routers === 0 ? port : clusterPort;
const listenFailed = (err: NodeJS.ErrnoException) => cannotListen('coordinator', args.host, ownPort, err, routers === 0 ? 'KEYSLICE_COORDINATOR_PORT' : 'KEYSLICE_CLUSTER_PORT');
server.on('error', listenFailed);
wss.on('error', listenFailed);
server.listen(ownPort, args.host, async () => {
  startStallTrace('coordinator');
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : ownPort;
  const links = cluster.presentLinks();
  // The routers start while the links come up, not after: they take the map from the feed, which serves from now on,
  // and dial the nodes themselves (as a router restarted later does), so nothing of theirs waits for the links; a
  // router's start (its own Node process) and the links' (the nodes' assignments, at R>1 the first elections) then
  // overlap. Ready, as before, once both are done.
  const [ready, clientPort] = await Promise.all([
    Promise.all(links.map((l) => l.waitReady(CLUSTER_READY_WAIT_MS))),
    routers === 0 ? boundPort : startRouters(boundPort),
  ]);
  const down = links.filter((_, i) => !ready[i]).map((l) => l.url);
  if (down.length > 0) log(`not reachable yet (their slices answer Unavailable until they are): ${down.join(', ')}`);
  console.log(
    `keyslice coordinator ready http://${args.host}:${clientPort} ws://${args.host}:${clientPort}${CLIENT_WS_PATH} nodes=${links.length} slices=${map.sliceCount} routers=${routers}` +
      (routers === 0 ? '' : ` cluster=http://${args.host}:${boundPort}`) +
      ` pid=${process.pid}`,
  );
});

let stopping = false;

/** Forks the routers (node:cluster workers: they share the client port, which this process
 * holds) and resolves with that port once every one listens. A router that dies is started
 * again after ROUTER_RESTART_DELAY_MS; the port stays open meanwhile, served by the others. */
function startRouters(ownPort: number): Promise<number> {
  const local = args.host === '0.0.0.0' || args.host === '::' ? '127.0.0.1' : args.host;
  const env = {
    KEYSLICE_COORDINATOR: `http://${local.includes(':') ? `[${local}]` : local}:${ownPort}`,
    KEYSLICE_HOST: args.host,
    KEYSLICE_ROUTER_PORT: String(port),
    KEYSLICE_TOKEN: security.token,
    KEYSLICE_CLUSTER_SECRET: security.clusterSecret,
    ...requestPathEnv(requestPath),
  };
  // The routers' old generation given a floor (ROUTER_OLD_SPACE_FLOOR_MB: what it saves), ahead of this process's own
  // Node options, which node:cluster gives them too, so that one of those can set it otherwise.
  nodeCluster.setupPrimary({ exec: join(dirname(fileURLToPath(import.meta.url)), 'router', 'main.js'), args: [], execArgv: [oldSpaceFloorOption(ROUTER_OLD_SPACE_FLOOR_MB), ...process.execArgv] });
  return new Promise((resolve) => {
    let waiting = routers;
    const fork = () => {
      const worker = nodeCluster.fork(env);
      worker.on('message', (m: { routerReady?: number; listenError?: { code?: string; message: string } }) => {
        if (m?.listenError !== undefined) {
          // The client port is taken (or not this machine's): one sentence, as without routers.
          stopping = true;
          for (const w of Object.values(nodeCluster.workers ?? {})) w?.process.kill('SIGTERM');
          cannotListen('coordinator', args.host, port, Object.assign(new Error(m.listenError.message), { code: m.listenError.code }), 'KEYSLICE_COORDINATOR_PORT');
        }
        if (typeof m?.routerReady !== 'number') return;
        log(`router ${worker.process.pid} serves port ${m.routerReady}`);
        if (--waiting === 0) resolve(m.routerReady);
      });
      worker.on('exit', (code, signal) => {
        if (stopping) return;
        log(`router ${worker.process.pid} ${signal !== null ? `was killed by ${signal}` : `exited with code ${code}`}; starting another in ${ROUTER_RESTART_DELAY_MS} ms`);
        setTimeout(() => !stopping && fork(), ROUTER_RESTART_DELAY_MS).unref();
      });
    };
    for (let i = 0; i < routers; i++) fork();
  });
}

function shutdown(): void {
  stopping = true;
  for (const w of Object.values(nodeCluster.workers ?? {})) w?.process.kill('SIGTERM');
  feed.close();
  studio.close();
  cluster.close();
  client.close();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

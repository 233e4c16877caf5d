// The coordinator process: client API (HTTP and WebSocket on one port),
// routing by the cluster map, and one link per slice node.
import { createServer } from 'node:http';
import { isLoopbackHost, missingSecretProblem } from '../shared/auth.js';
import { cannotListen, fail, intArg, parseArgs } from '../shared/cli-args.js';
import { initHashing } from '../shared/hashing.js';
import {
  CLUSTER_READY_WAIT_MS,
  COORDINATOR_PORT_DEFAULT,
  HTTP_HEADERS_TIMEOUT_MS,
  HTTP_IDLE_TIMEOUT_MS,
  HTTP_KEEP_ALIVE_TIMEOUT_MS,
  HTTP_REQUEST_TIMEOUT_MS,
  HTTP_TIMEOUT_CHECK_INTERVAL_MS,
  MOVE_ITEMS_PER_SECOND_DEFAULT,
  SLICE_COUNT_DEFAULT,
  SLICE_COUNT_MAX,
} from '../shared/limits.js';
import { CLIENT_WS_PATH } from '../shared/protocol.js';
import { Catalog } from './metadata/catalog.js';
import { DynamoDbEndpoint } from './dynamodb/endpoint.js';
import { ClusterMap } from './metadata/cluster-map.js';
import { answerClientError, handleHttp } from './router/http-api.js';
import { renderMetrics } from './router/metrics.js';
import { Membership } from './metadata/membership.js';
import { Operations } from './router/operations.js';
import { attachWebSocketApi } from './router/ws-api.js';
import { Studio } from './studio/routes.js';

const args = parseArgs(
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
    'move-items-per-second': { default: String(MOVE_ITEMS_PER_SECOND_DEFAULT), help: 'throttle of slice moves, items copied per second over all moves (0: no limit)', env: 'KEYSLICE_MOVE_ITEMS_PER_SECOND' },
  },
  'usage: keyslice coordinator [--nodes ws://127.0.0.1:7101,ws://127.0.0.1:7102] [options]',
);
const port = intArg('port', args.port, 0, 65535);
const sliceCount = intArg('slices', args.slices, 1, SLICE_COUNT_MAX);
const moveItemsPerSecond = intArg('move-items-per-second', args['move-items-per-second'], 0, 1e9);
if (!['yes', 'no'].includes(args.rebalance!)) fail('--rebalance must be yes or no');
const nodeUrls = (args.nodes ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
for (const u of nodeUrls) if (!/^wss?:\/\/[^/]+$/.test(u)) fail(`--nodes: "${u}" is not a ws://host:port address`);
if (new Set(nodeUrls).size !== nodeUrls.length) fail('--nodes names a slice node twice');
const secretProblem = missingSecretProblem(args.host!, args['cluster-secret']!);
if (secretProblem !== null) fail(secretProblem);

await initHashing();
const map = ClusterMap.open(args.data!, nodeUrls, sliceCount);
if (typeof map === 'string') fail(map);
let catalog: Catalog;
try {
  catalog = Catalog.open(args.data!);
} catch (err) {
  fail((err as Error).message);
}

const log = (line: string) => console.log(`keyslice coordinator: ${line}`);
const security = { token: args.token!, clusterSecret: args['cluster-secret']! };
if (security.token === '' && !isLoopbackHost(args.host!)) log('warning: no --token; any client that reaches this port is served');
const cluster = new Membership(map, catalog, security.clusterSecret, moveItemsPerSecond, args.rebalance === 'yes', log);
const ops = new Operations(catalog, cluster);
const metrics = () => {
  const m = cluster.mover;
  return renderMetrics(catalog, map, cluster.presentLinks(), { inFlight: m.moving.size, completed: m.completed, failed: m.failed, itemsMoved: m.itemsMoved });
};
const studio = new Studio(catalog, cluster, security.token);
const dynamodb = new DynamoDbEndpoint(ops, { dataDir: args.data!, token: security.token, sliceCount: map.sliceCount });
// Timeouts (shared/limits.ts) so that a slow or stalled client cannot hold a connection
// open forever; requests the HTTP parser refuses get a JSON error (answerClientError).
const server = createServer(
  { headersTimeout: HTTP_HEADERS_TIMEOUT_MS, requestTimeout: HTTP_REQUEST_TIMEOUT_MS, connectionsCheckingInterval: HTTP_TIMEOUT_CHECK_INTERVAL_MS },
  (req, res) => handleHttp(ops, metrics, cluster, security, req, res, dynamodb, studio),
);
server.keepAliveTimeout = HTTP_KEEP_ALIVE_TIMEOUT_MS;
server.timeout = HTTP_IDLE_TIMEOUT_MS;
server.on('clientError', answerClientError);
const wss = attachWebSocketApi(ops, server, security.token);

// ws re-emits the server's errors on wss; either way a listen error is one sentence, not a stack trace.
const listenFailed = (err: NodeJS.ErrnoException) => cannotListen('coordinator', args.host!, port, err, 'KEYSLICE_COORDINATOR_PORT');
server.on('error', listenFailed);
wss.on('error', listenFailed);
server.listen(port, args.host, async () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  const links = cluster.presentLinks();
  const ready = await Promise.all(links.map((l) => l.waitReady(CLUSTER_READY_WAIT_MS)));
  const down = links.filter((_, i) => !ready[i]).map((l) => l.url);
  if (down.length > 0) log(`not reachable yet (their slices answer Unavailable until they are): ${down.join(', ')}`);
  console.log(
    `keyslice coordinator ready http://${args.host}:${boundPort} ws://${args.host}:${boundPort}${CLIENT_WS_PATH} nodes=${links.length} slices=${map.sliceCount} pid=${process.pid}`,
  );
});

function shutdown(): void {
  studio.close();
  cluster.close();
  for (const c of wss.clients) c.terminate();
  wss.close();
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

// A router process: the request path (client API over HTTP and WebSocket, the
// DynamoDB endpoint, validation, routing, scatter-gather) with a read-only copy
// of the catalog and cluster map fed by the coordinator (router-view.ts), and
// its own links to the slice nodes. Table changes, /cluster/ requests and the
// studio go to the coordinator (forward.ts). Started alone (`keyslice router
// --coordinator http://host:port`), or by `keyslice coordinator --routers N` as
// a node:cluster worker that shares the coordinator's client port.
import cluster from 'node:cluster';
import { performance } from 'node:perf_hooks';
import { missingSecretProblem } from '../../shared/auth.js';
import { cannotListen, fail, intArg, readCommandLine } from '../../shared/cli-args.js';
import { initHashing } from '../../shared/hashing.js';
import { COORDINATOR_PORT_DEFAULT } from '../../shared/limits.js';
import { CLIENT_WS_PATH } from '../../shared/protocol.js';
import { DynamoDbEndpoint } from '../dynamodb/endpoint.js';
import { clientServer } from './client-server.js';
import { Forwarder } from './forward.js';
import { handleHttp } from './http-api.js';
import { renderMetrics } from './metrics.js';
import { Operations } from './operations.js';
import { Router } from './router.js';
import { REQUEST_PATH_ARGS, requestPathOptions } from './request-path-options.js';
import { ProcessMetrics } from './process-metrics.js';
import { RouterView } from './router-view.js';
import { startGcTrace } from '../../slice-worker/turn-trace.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    coordinator: { default: '', help: 'the coordinator to take the catalog and cluster map from (http://host:port)', env: 'KEYSLICE_COORDINATOR' },
    host: { default: '127.0.0.1', help: 'address to listen on', env: 'KEYSLICE_HOST' },
    port: { default: String(COORDINATOR_PORT_DEFAULT), help: 'port for HTTP and WebSocket clients (0: any free port)', env: 'KEYSLICE_ROUTER_PORT' },
    token: { default: '', help: 'client token, the coordinator\'s (empty: none required)', env: 'KEYSLICE_TOKEN' },
    'cluster-secret': { default: '', help: 'the cluster secret (empty: none required, allowed only on a loopback --host)', env: 'KEYSLICE_CLUSTER_SECRET' },
    ...REQUEST_PATH_ARGS,
  },
  'usage: keyslice router --coordinator http://127.0.0.1:7100 [--port 7100] [options]',
).values;
const coordinatorUrl = args.coordinator.replace(/\/+$/, '');
if (!/^https?:\/\/[^/]+$/.test(coordinatorUrl)) fail(`--coordinator must be http://host:port, got "${coordinatorUrl}"`);
const port = intArg('port', args.port, 0, 65535);
const requestPath = requestPathOptions(args);
const secretProblem = missingSecretProblem(args.host, args['cluster-secret']);
if (secretProblem !== null) fail(secretProblem);

await initHashing();
const log = (line: string) => console.log(`keyslice router ${process.pid}: ${line}`);
const security = { token: args.token, clusterSecret: args['cluster-secret'] };
const view = new RouterView(coordinatorUrl, security.clusterSecret, log);
await view.ready();
const forwarder = new Forwarder(view, security.clusterSecret, security.token);
// A router the coordinator started is named by its worker id (a restarted one gets a new id),
// one started by itself by its process id.
const processMetrics = new ProcessMetrics(cluster.isWorker ? `router-${cluster.worker!.id}` : `router-${process.pid}`, log);
if (cluster.isWorker) processMetrics.serveCoordinator();
const ops = new Operations(view, new Router(view, processMetrics, requestPath.retryMs), (op, payload) => forwarder.change(op, payload), processMetrics);
const coordinatorState = () => ({
  coordinator: view.coordinatorUp ? 'connected' : 'lost',
  coordinatorLostMsAgo: view.lostSince === null ? null : Math.round(performance.now() - view.lostSince),
});
const router = {
  forwards: (req: Parameters<Forwarder['forwards']>[0], path: string) => forwarder.forwards(req, path),
  forward: (req: Parameters<Forwarder['forward']>[0], res: Parameters<Forwarder['forward']>[1]) => forwarder.forward(req, res),
  health: () => ({ status: 'ok', role: 'router', pid: process.pid, epoch: view.epoch, ...coordinatorState() }),
};
const metrics = async () => {
  // Started by the coordinator: every process's series, which the coordinator merges (process-metrics.ts).
  const [own, load] = await Promise.all([cluster.isWorker ? processMetrics.fromCoordinator() : processMetrics.text(), routerLoad()]);
  return own + load;
};
const routerLoad = () =>
  renderMetrics(view, view, view.presentLinks(), undefined, [
    '# HELP keyslice_router_coordinator_connected 1 if this router reaches its coordinator; 0: it serves with the map it has, and table and membership changes wait',
    '# TYPE keyslice_router_coordinator_connected gauge',
    `keyslice_router_coordinator_connected ${view.coordinatorUp ? 1 : 0}`,
    '# HELP keyslice_router_map_epoch the epoch of the cluster map this router routes by',
    '# TYPE keyslice_router_map_epoch gauge',
    `keyslice_router_map_epoch ${view.epoch}`,
  ]);
// DynamoDB's table settings stay with the coordinator (its table operations are forwarded).
const dynamodb = new DynamoDbEndpoint(ops, { dataDir: null, token: security.token, sliceCount: view.sliceCount, metrics: processMetrics });
const client = clientServer(ops, security.token, (req, res) => handleHttp(ops, metrics, null, security, req, res, dynamodb, undefined, { router }), requestPath.http);
const { server, wss } = client;

// A router the coordinator started leaves the sentence to it (said once, however many routers).
const listenFailed = (err: NodeJS.ErrnoException) => {
  if (!cluster.isWorker) cannotListen('router', args.host, port, err, 'KEYSLICE_ROUTER_PORT');
  process.send?.({ listenError: { code: err.code, message: err.message } }, () => process.exit(1));
};
server.on('error', listenFailed);
wss.on('error', listenFailed);
server.listen(port, args.host, () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  startGcTrace(`router${process.pid}`);
  // A router the coordinator started tells it; the coordinator says it is ready once all are.
  if (cluster.isWorker) process.send?.({ routerReady: boundPort });
  else console.log(`keyslice router ready http://${args.host}:${boundPort} ws://${args.host}:${boundPort}${CLIENT_WS_PATH} coordinator=${coordinatorUrl} epoch=${view.epoch} pid=${process.pid}`);
});

function shutdown(): void {
  view.close();
  client.close();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
// A router started by the coordinator goes with it.
if (cluster.isWorker) cluster.worker?.on('disconnect', () => process.exit(0));

// The coordinator process: client API (HTTP and WebSocket on one port),
// routing by the cluster map, and one link per slice node.
import { createServer } from 'node:http';
import { fail, intArg, parseArgs } from '../shared/cli-args.js';
import { initHashing } from '../shared/hashing.js';
import { CLUSTER_READY_WAIT_MS, COORDINATOR_PORT_DEFAULT, SLICE_COUNT_DEFAULT, SLICE_COUNT_MAX } from '../shared/limits.js';
import { CLIENT_WS_PATH } from '../shared/protocol.js';
import { Catalog } from './catalog.js';
import { ClusterMap } from './cluster-map.js';
import { handleHttp } from './http-api.js';
import { renderMetrics } from './metrics.js';
import { NodeLink } from './node-link.js';
import { Operations } from './operations.js';
import { attachWebSocketApi } from './ws-api.js';

const args = parseArgs(
  process.argv.slice(2),
  {
    host: { default: '127.0.0.1', help: 'address to listen on' },
    port: { default: String(COORDINATOR_PORT_DEFAULT), help: 'port for HTTP and WebSocket clients (0: any free port)' },
    nodes: { help: 'slice node addresses, comma-separated (ws://host:port,...)' },
    slices: { default: String(SLICE_COUNT_DEFAULT), help: 'slice count, fixed when the cluster is created' },
    data: { default: './data/coordinator', help: 'data folder (catalog and cluster map)' },
  },
  'usage: node dist/coordinator/main.js --nodes ws://127.0.0.1:7101,ws://127.0.0.1:7102 [options]',
);
const port = intArg('port', args.port, 0, 65535);
const sliceCount = intArg('slices', args.slices, 1, SLICE_COUNT_MAX);
const nodeUrls = (args.nodes ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
if (nodeUrls.length === 0) fail('--nodes must name at least one slice node (ws://host:port)');
for (const u of nodeUrls) if (!/^wss?:\/\/[^/]+$/.test(u)) fail(`--nodes: "${u}" is not a ws://host:port address`);
if (new Set(nodeUrls).size !== nodeUrls.length) fail('--nodes names a slice node twice');

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
const links = map.nodes.map(
  (url, index) => new NodeLink(url, () => ({ epoch: map.epoch, sliceCount: map.sliceCount, slices: map.slicesOf(index) }), log),
);
const ops = new Operations(catalog, map, links);
const metrics = () => renderMetrics(catalog, map, links);
const server = createServer((req, res) => handleHttp(ops, metrics, req, res));
server.keepAliveTimeout = 65_000;
const wss = attachWebSocketApi(ops, server);

server.on('error', (err) => fail(`cannot listen on ${args.host}:${port}: ${err.message}`));
server.listen(port, args.host, async () => {
  const addr = server.address();
  const boundPort = typeof addr === 'object' && addr !== null ? addr.port : port;
  const ready = await Promise.all(links.map((l) => l.waitReady(CLUSTER_READY_WAIT_MS)));
  const down = links.filter((_, i) => !ready[i]).map((l) => l.url);
  if (down.length > 0) log(`not reachable yet (their slices answer Unavailable until they are): ${down.join(', ')}`);
  console.log(
    `keyslice coordinator ready http://${args.host}:${boundPort} ws://${args.host}:${boundPort}${CLIENT_WS_PATH} nodes=${links.length} slices=${map.sliceCount} pid=${process.pid}`,
  );
});

function shutdown(): void {
  for (const l of links) l.close();
  for (const c of wss.clients) c.terminate();
  wss.close();
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

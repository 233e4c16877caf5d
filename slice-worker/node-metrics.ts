// A slice node's own process series at GET /metrics on its --metrics-port (docs/metrics.md): prom-client's
// default metrics (CPU, memory, event-loop lag, GC), prefixed keyslice_ as the coordinator's and routers' are
// (coordinator/router/process-metrics.ts), and each thread's busy time, from Node's event-loop utilization: a worker
// thread busy nearly all the time is the node's limit, and the process's CPU (summed over its threads) does not
// show it.
//
// Served by the node itself, not relayed by the coordinator: an operator who runs nodes on hosts of their own scrapes
// each where it runs, the series of a hung or cut-off node stay readable, and the node protocol is unchanged. Its
// own HTTP port, not the node port: that one is for the cluster secret's holders (it takes slice commands), and a
// scraper should not need that secret. Guarded as the coordinator's /metrics is, by the client token (--token).
//
// One registry, never prom-client's global one; every series carries process="slice-node" and node="<the URL the
// node advertises>" (the node label of the coordinator's keyslice_node_* series), and `thread` takes "main" and
// "worker-<i>" only (at most WORKERS_PER_NODE_MAX + 1 values).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import { clientTokenRefusal } from '../shared/auth.js';
import { KeysliceError } from '../shared/errors.js';
import { boundedHttpServer, pathOf, sendErrorJson, type HttpTimeouts } from '../shared/http-server.js';
import { SLICE_NODE_METRICS_CONNECTIONS_MAX } from '../shared/limits.js';

/** A thread the node runs and how to read its event-loop utilization since it started (null: the thread has
 * stopped, and has no series any more). */
export interface MeteredThread {
  name: string;
  eventLoopUtilization(): EventLoopUtilization | null;
}

export function nodeRegistry(node: string, threads: readonly MeteredThread[]): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ process: 'slice-node', node });
  collectDefaultMetrics({ register: registry, prefix: 'keyslice_' });
  // A counter of busy seconds, not a gauge of utilization: its rate() over any window is the busy share, and no
  // state per scraper is kept here (a gauge 'since the previous scrape' would shorten each scraper's window for the others).
  new Counter({
    name: 'keyslice_thread_busy_seconds_total',
    help: 'seconds this thread\'s event loop was busy (not waiting for work) since it started, by thread (main, worker-<i>); its rate is the thread\'s busy share, 1 at most: a worker near 1 is the node\'s limit',
    labelNames: ['thread'],
    registers: [registry],
    collect() {
      this.reset();
      for (const t of threads) {
        const u = t.eventLoopUtilization();
        if (u !== null) this.inc({ thread: t.name }, u.active / 1000);
      }
    },
  });
  return registry;
}

/** Serves `registry` at GET /metrics on host:port to a request with `token` (none needed where it is empty); answers
 * once it listens. `onError`: the server could not listen. Refusals are the API's JSON errors (shared/http-server.ts),
 * as the coordinator's /metrics answers them; the port has the client port's bounds (`timeouts`: the node's
 * --http-headers-timeout-ms and --http-request-timeout-ms) and at most
 * SLICE_NODE_METRICS_CONNECTIONS_MAX connections, so that no client holds it (or the node's memory) for long. */
export function serveNodeMetrics(registry: Registry, host: string, port: number, token: string, timeouts: HttpTimeouts, onError: (err: NodeJS.ErrnoException) => void): Promise<Server> {
  // boundedHttpServer bounds pipelined requests as on the client port: a client that sends thousands of GETs on one
  // connection and reads no answer would otherwise have each exposition (about 10 KB) made and held.
  const server = boundedHttpServer((req: IncomingMessage, res: ServerResponse): void => {
    const path = pathOf(req.url ?? '/');
    if (path !== '/metrics') return sendErrorJson(res, new KeysliceError('UnknownOperation', `no such path ${path.slice(0, 100)}; this port serves GET /metrics only`));
    // GET and HEAD, as the coordinator's /metrics takes.
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendErrorJson(res, new KeysliceError('MethodNotAllowed', `/metrics takes GET or HEAD, not ${req.method}`), { allow: 'GET, HEAD' });
    // HTTP: the token in the Authorization header only (no ?token=), as the coordinator's /metrics takes it.
    const refusal = clientTokenRefusal(token, req.headers.authorization, undefined);
    if (refusal !== null) return sendErrorJson(res, new KeysliceError('Unauthorized', refusal));
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: Error) => {
        console.error(`keyslice slice node: cannot gather the metrics: ${err.stack}`);
        sendErrorJson(res, new KeysliceError('Internal', `cannot gather the metrics: ${err.message}`));
      },
    );
  }, timeouts);
  server.maxConnections = SLICE_NODE_METRICS_CONNECTIONS_MAX;
  // Only a failure to listen is the caller's: once listening, an error (e.g. an accept that finds no file
  // descriptor) is logged, and the port keeps serving.
  server.once('error', onError);
  return new Promise((resolve) =>
    server.listen(port, host, () => {
      server.off('error', onError);
      server.on('error', (err) => console.error(`keyslice slice node: metrics port: ${err.message}`));
      resolve(server);
    }),
  );
}

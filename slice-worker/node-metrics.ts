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
import { createServer, type Server } from 'node:http';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { clientTokenRefusal } from '../shared/auth.js';

/** A thread the node runs and how to read its event-loop utilization since it started. */
export interface MeteredThread {
  name: string;
  eventLoopUtilization(): EventLoopUtilization;
}

export function nodeRegistry(node: string, threads: readonly MeteredThread[]): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ process: 'slice-node', node });
  collectDefaultMetrics({ register: registry, prefix: 'keyslice_' });
  const registers = [registry];
  new Counter({
    name: 'keyslice_thread_busy_seconds_total',
    help: 'seconds this thread\'s event loop was busy (not waiting for work) since it started, by thread (main, worker-<i>); its rate is the thread\'s busy share, 1 at most: a worker near 1 is the node\'s limit',
    labelNames: ['thread'],
    registers,
    collect() {
      this.reset();
      for (const t of threads) this.inc({ thread: t.name }, t.eventLoopUtilization().active / 1000);
    },
  });
  // Utilization since the previous scrape (since the start at the first), as prom-client's event-loop lag
  // percentiles cover the time since the previous scrape; the rate of the counter above is the one to alert on
  // (it does not depend on how many scrape).
  const previous = new Map<string, EventLoopUtilization>();
  new Gauge({
    name: 'keyslice_thread_event_loop_utilization',
    help: 'share of the time since the previous scrape this thread\'s event loop was busy (0 to 1), by thread (main, worker-<i>)',
    labelNames: ['thread'],
    registers,
    collect() {
      for (const t of threads) {
        const now = t.eventLoopUtilization();
        const before = previous.get(t.name);
        previous.set(t.name, now);
        const u = before === undefined ? now.utilization : performance.eventLoopUtilization(now, before).utilization;
        this.set({ thread: t.name }, u);
      }
    },
  });
  return registry;
}

/** Serves `registry` at GET /metrics on host:port to a request with `token` (none needed where it is empty); answers
 * once it listens. `onError`: the server could not listen. */
export function serveNodeMetrics(registry: Registry, host: string, port: number, token: string, onError: (err: NodeJS.ErrnoException) => void): Promise<Server> {
  const server = createServer((req, res) => {
    // Plain text, errors too: a scraper reads the status, a person the sentence.
    const answer = (status: number, text: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
      res.end(req.method === 'HEAD' ? undefined : text);
    };
    const path = (req.url ?? '').split('?')[0].replace(/(.)\/$/, '$1');
    if (path !== '/metrics') return answer(404, `no such path ${path.slice(0, 100)}; this port serves GET /metrics only\n`);
    // GET and HEAD, as the coordinator's /metrics takes.
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(405, `/metrics takes GET or HEAD, not ${req.method}\n`, { allow: 'GET, HEAD' });
    // HTTP: the token in the Authorization header only (no ?token=), as the coordinator's /metrics takes it.
    const refusal = clientTokenRefusal(token, req.headers.authorization, undefined);
    if (refusal !== null) return answer(401, `${refusal}\n`);
    registry.metrics().then(
      (text) => answer(200, text, { 'content-type': registry.contentType }),
      (err: Error) => answer(500, `cannot gather the metrics: ${err.message}\n`),
    );
  });
  server.on('error', onError);
  return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
}

// A slice node's own /metrics (--metrics-port, slice-worker/node-metrics.ts), through real processes on 127.0.0.1:
// the process series of prom-client and each thread's busy time are there, labelled by the node's URL, the exposition
// parses strictly, and they move as the node works (CPU seconds and the workers' busy seconds grow under writes, each
// thread's utilization stays between 0 and 1); the client token guards it as it guards the coordinator's; and a bad
// --metrics-port is refused before the node starts.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, SLICE_NODE_METRICS_CONNECTIONS_MAX } from '../shared/limits.js';
import { nodeRegistry } from '../slice-worker/node-metrics.js';
import { cleanEnv, keyslice, stopRunning } from './cli-run.js';
import { useCluster } from './cluster-fixture.js';
import { parseExposition, samples, total, type Family } from './prometheus-text.js';
import { freePort } from './procs.js';

const WORKERS = 2;
/** The node's --http-headers-timeout-ms, which the slow clients' story waits out (by default HTTP_HEADERS_TIMEOUT_MS,
 * 10 s): 2 s, a second over the option's least, so that the lower bound below (a second of room for the check
 * interval, HTTP_TIMEOUT_CHECK_INTERVAL_MS) still says the cut was not at once. */
const HEADERS_TIMEOUT_MS = 2_000;
const metricsPort = await freePort();
const c = useCluster({ nodes: 1, workers: WORKERS, slices: 8, routers: 0, nodeMetricsPortBase: metricsPort, nodeArgs: ['--http-headers-timeout-ms', String(HEADERS_TIMEOUT_MS)] });
const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;

async function scrape(headers: Record<string, string> = {}): Promise<Map<string, Family>> {
  const res = await fetch(metricsUrl, { headers, signal: AbortSignal.timeout(10_000) });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

const THREADS = ['main', ...Array.from({ length: WORKERS }, (_, i) => `worker-${i}`)];
const byThread = (m: Map<string, Family>, name: string) => new Map(samples(m, name).map((s) => [s.labels.thread, s.value]));
const workersBusy = (m: Map<string, Family>) => THREADS.slice(1).reduce((a, t) => a + byThread(m, 'keyslice_thread_busy_seconds_total').get(t)!, 0);

afterAll(() => stopRunning());

/** The {"error": {...}} of a JSON error answer. */
const errorOf = async (res: Response) => ((await res.json()) as { error: Record<string, unknown> }).error;

describe('a slice node\'s own /metrics', () => {
  it('has its process series and each thread\'s busy time, labelled by the node, and they grow as it works', async () => {
    const node = c.cluster.nodes[0].url;
    const before = await scrape();
    // Every series is the node's: process="slice-node" and the URL the coordinator's node label names it by.
    for (const name of ['keyslice_process_cpu_seconds_total', 'keyslice_process_resident_memory_bytes', 'keyslice_nodejs_heap_size_used_bytes', 'keyslice_nodejs_eventloop_lag_p99_seconds', 'keyslice_thread_busy_seconds_total']) {
      const s = samples(before, name);
      expect(s.length, name).toBeGreaterThan(0);
      for (const x of s) expect(x.labels, name).toMatchObject({ process: 'slice-node', node });
    }
    expect(before.get('keyslice_nodejs_gc_duration_seconds')?.type).toBe('histogram');
    expect(total(before, 'keyslice_process_resident_memory_bytes')).toBeGreaterThan(10 * 2 ** 20);
    // One series per thread, no more (the label is bounded by the worker count).
    expect([...byThread(before, 'keyslice_thread_busy_seconds_total').keys()].sort()).toEqual([...THREADS].sort());
    // The coordinator's node label names the same node, so the two scrapes join.
    const coordinator = parseExposition(await (await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) })).text());
    expect(total(coordinator, 'keyslice_node_up', { node })).toBe(1);

    // A small load: writes on every slice, so both workers run.
    const T = 'node_metrics';
    await c.client.createTable(T, { name: 'id', type: 'string' });
    const deadline = Date.now() + 1_500;
    for (let round = 0; round < 200 && Date.now() < deadline; round++) {
      await c.client.batchWrite(T, { puts: Array.from({ length: 25 }, (_, i) => ({ id: `k${round}-${i}`, v: 'x'.repeat(200) })) });
    }
    const after = await scrape();
    const cpu = (m: Map<string, Family>) => total(m, 'keyslice_process_cpu_seconds_total');
    expect(cpu(after), 'CPU seconds grow under writes').toBeGreaterThan(cpu(before));
    expect(workersBusy(after) - workersBusy(before), 'the workers were busy with the writes').toBeGreaterThan(0.01);
    // Busy seconds only grow, and a thread is busy at most as long as the process has run (seconds, not ms).
    const upSeconds = Date.now() / 1000 - total(after, 'keyslice_process_start_time_seconds');
    for (const [t, busy] of byThread(after, 'keyslice_thread_busy_seconds_total')) {
      expect(busy, `${t} busy seconds only grow`).toBeGreaterThanOrEqual(byThread(before, 'keyslice_thread_busy_seconds_total').get(t)!);
      expect(busy, `${t} busy at most the ${upSeconds.toFixed(1)} s the node has run`).toBeLessThanOrEqual(upSeconds);
    }
  });
});

describe('the client token and bad input', () => {
  it('asks for the client token as the coordinator\'s /metrics does, and serves GET /metrics only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-node-metrics-'));
    const port = await freePort();
    let proc: ManagedProcess | undefined;
    try {
      proc = await startSliceNode({ name: 'slice-node-token', dataDir: dir, port: 0, workers: 1, metricsPort: port, token: 'metrics-token' });
      const url = `http://127.0.0.1:${port}/metrics`;
      const get = (headers: Record<string, string> = {}, method = 'GET', u = url) => fetch(u, { method, headers, signal: AbortSignal.timeout(10_000) });
      // Refusals in the API's JSON shape with its codes, as the coordinator's /metrics answers them.
      const none = await get();
      expect(none.status).toBe(401);
      expect(none.headers.get('content-type')).toBe('application/json');
      expect(await errorOf(none)).toMatchObject({ code: 'Unauthorized', retryable: false, message: expect.stringMatching(/client token is missing/) });
      const wrong = await get({ authorization: 'Bearer not-it' });
      expect(wrong.status).toBe(401);
      expect(await errorOf(wrong)).toMatchObject({ code: 'Unauthorized', message: expect.stringMatching(/client token is wrong/) });
      expect((await get({}, 'GET', `${url}?token=metrics-token`)).status, 'no ?token= on HTTP, as the coordinator').toBe(401);
      const post = await get({ authorization: 'Bearer metrics-token' }, 'POST');
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      expect(await errorOf(post)).toMatchObject({ code: 'MethodNotAllowed' });
      const head = await get({ authorization: 'Bearer metrics-token' }, 'HEAD');
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
      const elsewhere = await get({ authorization: 'Bearer metrics-token' }, 'GET', `http://127.0.0.1:${port}/`);
      expect(elsewhere.status).toBe(400);
      expect(await errorOf(elsewhere)).toMatchObject({ code: 'UnknownOperation', message: expect.stringMatching(/serves GET \/metrics only/) });
      const ok = await get({ authorization: 'Bearer metrics-token' });
      expect(ok.status).toBe(200);
      expect(total(parseExposition(await ok.text()), 'keyslice_thread_busy_seconds_total', { thread: 'worker-0', process: 'slice-node' })).toBeGreaterThan(0);
    } finally {
      if (proc !== undefined) await stopProcess(proc.child);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a --metrics-port out of range, or the node port itself, before it starts, and says so in one sentence when it is in use', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-node-metrics-'));
    try {
      const range = await keyslice(['node', '--port', '0', '--data', dir, '--metrics-port', '70000'], 20_000, cleanEnv());
      expect(range.code).toBe(2);
      expect(range.stderr).toMatch(/--metrics-port must be a whole number from 0 to 65535, got "70000"/);
      const same = await keyslice(['node', '--port', '7391', '--data', dir, '--metrics-port', '7391'], 20_000, cleanEnv());
      expect(same.code).not.toBe(0);
      expect(same.stderr).toMatch(/--metrics-port must differ from --port \(7391\)/);
      const env = await keyslice(['node', '--port', '0', '--data', dir], 20_000, cleanEnv({ KEYSLICE_NODE_METRICS_PORT: 'x' }));
      expect(env.code).toBe(2);
      expect(env.stderr).toMatch(/--metrics-port must be a whole number/);
      // A metrics port in use: one sentence that names the flag to change, exit 1, as for a busy --port.
      const held = createServer();
      await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
      const busyPort = (held.address() as { port: number }).port;
      try {
        const busy = await keyslice(['node', '--port', '0', '--data', dir, '--metrics-port', String(busyPort)], 20_000, cleanEnv());
        expect(busy.code).toBe(1);
        expect(busy.stderr.trim()).toBe(`keyslice slice node: port ${busyPort} on 127.0.0.1 is in use by another process; stop that process or choose another with --metrics-port or KEYSLICE_NODE_METRICS_PORT`);
      } finally {
        await new Promise((resolve) => held.close(resolve));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it(`takes the client port's HTTP timeouts for --metrics-port, refused out of range or the headers' over the request's (defaults ${HTTP_HEADERS_TIMEOUT_MS} and ${HTTP_REQUEST_TIMEOUT_MS} ms)`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyslice-node-metrics-'));
    try {
      // The defaults, as the message names them: the node's port keeps the coordinator's bounds unless told otherwise.
      const over = await keyslice(['node', '--port', '0', '--data', dir, '--http-request-timeout-ms', '5000'], 20_000, cleanEnv());
      expect(over.code).toBe(2);
      expect(over.stderr).toMatch(new RegExp(`--http-headers-timeout-ms \\(${HTTP_HEADERS_TIMEOUT_MS}\\) must be at most --http-request-timeout-ms \\(5000\\)`));
      const low = await keyslice(['node', '--port', '0', '--data', dir], 20_000, cleanEnv({ KEYSLICE_HTTP_HEADERS_TIMEOUT_MS: '999' }));
      expect(low.code).toBe(2);
      expect(low.stderr).toMatch(/--http-headers-timeout-ms must be a whole number from 1000 to 600000, got "999"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Connects to the metrics port, writes `request` (if any), and reads until the server closes the connection or
 * `waitMs` passes: what came back, and how long the connection lasted (null: still open at waitMs). */
async function rawExchange(request: string | null, waitMs: number, keep?: (s: Socket) => void): Promise<{ text: string; closedAfterMs: number | null }> {
  const socket = connect(metricsPort, '127.0.0.1');
  const t0 = Date.now();
  let text = '';
  socket.on('data', (d) => (text += d.toString('latin1')));
  socket.on('error', () => {}); // a reset while we still write: what was read is the answer
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  if (request !== null) socket.write(request);
  keep?.(socket);
  const closed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), waitMs);
    socket.once('close', () => (clearTimeout(timer), resolve(true)));
  });
  const closedAfterMs = closed ? Date.now() - t0 : null;
  socket.destroy();
  return { text, closedAfterMs };
}

const jsonErrorOf = (text: string) => (JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: Record<string, unknown> }).error;

describe('the metrics port under bad input', () => {
  it('answers a malformed request and over-long headers with the API\'s JSON errors, and goes on serving', async () => {
    const garbage = await rawExchange('NOT HTTP AT ALL\r\n\r\n', 10_000);
    expect(garbage.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(jsonErrorOf(garbage.text)).toMatchObject({ code: 'MalformedRequest' });
    const huge = await rawExchange(`GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(256 * 1024)}\r\n\r\n`, 10_000);
    expect(huge.text).toMatch(/^HTTP\/1\.1 413 /);
    expect(jsonErrorOf(huge.text)).toMatchObject({ code: 'RequestTooLarge' });
    expect(huge.closedAfterMs, 'the connection is closed').not.toBeNull();
    await scrape();
  });

  it(`cuts a client that sends nothing, or its headers a line at a time, after the headers' ${HEADERS_TIMEOUT_MS} ms (--http-headers-timeout-ms), serving others meanwhile`, async () => {
    const waitMs = HEADERS_TIMEOUT_MS + 5_000;
    let drip: NodeJS.Timeout | undefined;
    const [silent, slowloris] = await Promise.all([
      rawExchange(null, waitMs),
      rawExchange('GET /metrics HTTP/1.1\r\nHost: x\r\n', waitMs, (s) => {
        drip = setInterval(() => s.write('X-Slow: 1\r\n'), 500);
      }),
      // Meanwhile, a scraper gets its answer.
      new Promise((resolve) => setTimeout(resolve, 1_000)).then(() => scrape()),
    ]);
    clearInterval(drip);
    for (const [name, r] of [['silent', silent], ['slowloris', slowloris]] as const) {
      expect(r.closedAfterMs, `${name}: cut within ${waitMs} ms`).not.toBeNull();
      expect(r.closedAfterMs!, name).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 1_000);
      expect(r.text, name).toMatch(/^HTTP\/1\.1 408 /);
      expect(jsonErrorOf(r.text), name).toMatchObject({ code: 'RequestTimeout', retryable: true, message: expect.stringContaining(`headers within ${HEADERS_TIMEOUT_MS} ms, all of it within ${HTTP_REQUEST_TIMEOUT_MS} ms`) });
    }
  });

  it('holds few answers for a client that pipelines thousands of GETs and reads none, and serves others meanwhile', async () => {
    const rss = async () => total(await scrape(), 'keyslice_process_resident_memory_bytes');
    const before = await rss();
    const flood = connect(metricsPort, '127.0.0.1');
    flood.on('error', () => {});
    flood.pause(); // reads no answer
    try {
      await new Promise<void>((resolve) => flood.once('connect', resolve));
      const one = 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n';
      for (let i = 0; i < 20; i++) flood.write(one.repeat(1_000));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      // Each exposition is about 10 KB: unbounded, the node made and held thousands (about 200 MiB here).
      const grew = (await rss()) - before;
      expect(grew / 2 ** 20, 'MiB the node grew by').toBeLessThan(64);
    } finally {
      flood.destroy();
    }
  });

  it(`holds at most ${SLICE_NODE_METRICS_CONNECTIONS_MAX} connections at once, and serves again once they go`, async () => {
    const held: Socket[] = [];
    try {
      for (let i = 0; i < SLICE_NODE_METRICS_CONNECTIONS_MAX; i++) {
        const s = connect(metricsPort, '127.0.0.1');
        s.on('error', () => {});
        held.push(s);
        await new Promise<void>((resolve) => s.once('connect', resolve));
      }
      const over = await rawExchange('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n', 3_000);
      expect(over.closedAfterMs, 'a connection past the bound is closed at once').not.toBeNull();
      expect(over.text).toBe('');
    } finally {
      for (const s of held) s.destroy();
    }
    // The server counts them gone as their closes arrive: a few tries, 100 ms apart.
    let status = 0;
    for (let i = 0; i < 20 && status !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status, () => 0);
    }
    expect(status).toBe(200);
  });
});

describe('each thread\'s series (nodeRegistry, with threads whose busy and idle time the test sets)', () => {
  const elu = (activeMs: number, idleMs: number): EventLoopUtilization => ({ active: activeMs, idle: idleMs, utilization: activeMs / (activeMs + idleMs) });
  const values = async (registry: ReturnType<typeof nodeRegistry>) => {
    const m = parseExposition(await registry.metrics());
    return { busy: byThread(m, 'keyslice_thread_busy_seconds_total') };
  };

  it('counts each thread\'s busy seconds since it started, in seconds', async () => {
    let now = elu(100, 900);
    const registry = nodeRegistry('ws://127.0.0.1:1', [{ name: 'worker-0', eventLoopUtilization: () => now }]);
    expect((await values(registry)).busy.get('worker-0')).toBeCloseTo(0.1, 9);
    now = elu(1_000, 1_000);
    expect((await values(registry)).busy.get('worker-0')).toBeCloseTo(1, 9);
  });

  it('drops the series of a thread that has stopped, rather than show zeros', async () => {
    let stopped = false;
    const registry = nodeRegistry('ws://127.0.0.1:1', [
      { name: 'main', eventLoopUtilization: () => elu(50, 50) },
      { name: 'worker-0', eventLoopUtilization: () => (stopped ? null : elu(100, 900)) },
    ]);
    expect([...(await values(registry)).busy.keys()].sort()).toEqual(['main', 'worker-0']);
    stopped = true;
    const after = await values(registry);
    expect([...after.busy.keys()]).toEqual(['main']);
  });
});

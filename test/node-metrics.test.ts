// A slice node's own /metrics (--metrics-port, slice-worker/node-metrics.ts), through real processes on 127.0.0.1:
// the process series of prom-client and each thread's busy time are there, labelled by the node's URL, the exposition
// parses strictly, and they move as the node works (CPU seconds and the workers' busy seconds grow under writes, each
// thread's utilization stays between 0 and 1); the client token guards it as it guards the coordinator's; and a bad
// --metrics-port is refused before the node starts.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { cleanEnv, keyslice, stopRunning } from './cli-run.js';
import { useCluster } from './cluster-fixture.js';
import { parseExposition, samples, total, type Family } from './prometheus-text.js';

/** A port free now (the kernel's pick, closed again) for a --metrics-port. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

const WORKERS = 2;
const metricsPort = await freePort();
const c = useCluster({ nodes: 1, workers: WORKERS, slices: 8, routers: 0, nodeMetricsPortBase: metricsPort });
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

describe('a slice node\'s own /metrics', () => {
  it('has its process series and each thread\'s busy time, labelled by the node, and they grow as it works', async () => {
    const node = c.cluster.nodes[0].url;
    const before = await scrape();
    // Every series is the node's: process="slice-node" and the URL the coordinator's node label names it by.
    for (const name of ['keyslice_process_cpu_seconds_total', 'keyslice_process_resident_memory_bytes', 'keyslice_nodejs_heap_size_used_bytes', 'keyslice_nodejs_eventloop_lag_p99_seconds', 'keyslice_thread_busy_seconds_total', 'keyslice_thread_event_loop_utilization']) {
      const s = samples(before, name);
      expect(s.length, name).toBeGreaterThan(0);
      for (const x of s) expect(x.labels, name).toMatchObject({ process: 'slice-node', node });
    }
    expect(before.get('keyslice_nodejs_gc_duration_seconds')?.type).toBe('histogram');
    expect(total(before, 'keyslice_process_resident_memory_bytes')).toBeGreaterThan(10 * 2 ** 20);
    // One series per thread, no more (the label is bounded by the worker count).
    expect([...byThread(before, 'keyslice_thread_busy_seconds_total').keys()].sort()).toEqual([...THREADS].sort());
    expect([...byThread(before, 'keyslice_thread_event_loop_utilization').keys()].sort()).toEqual([...THREADS].sort());
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
    const utilization = byThread(after, 'keyslice_thread_event_loop_utilization');
    for (const [t, u] of utilization) {
      expect(u, t).toBeGreaterThanOrEqual(0);
      expect(u, t).toBeLessThanOrEqual(1);
    }
    expect(Math.max(...THREADS.slice(1).map((t) => utilization.get(t)!)), 'a worker was busy part of the time since the last scrape').toBeGreaterThan(0);
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
      const none = await get();
      expect(none.status).toBe(401);
      expect(await none.text()).toMatch(/client token is missing/);
      const wrong = await get({ authorization: 'Bearer not-it' });
      expect(wrong.status).toBe(401);
      expect(await wrong.text()).toMatch(/client token is wrong/);
      expect((await get({}, 'GET', `${url}?token=metrics-token`)).status, 'no ?token= on HTTP, as the coordinator').toBe(401);
      const post = await get({ authorization: 'Bearer metrics-token' }, 'POST');
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      const head = await get({ authorization: 'Bearer metrics-token' }, 'HEAD');
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
      expect((await get({ authorization: 'Bearer metrics-token' }, 'GET', `http://127.0.0.1:${port}/`)).status).toBe(404);
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
});

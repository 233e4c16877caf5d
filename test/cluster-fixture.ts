// Test fixture: a real local cluster (coordinator and slice nodes as processes
// on 127.0.0.1, built code from dist/) and the two transports to talk to it.
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { prng } from '../bench/keys.js';
import { KeysliceClient } from '../coordinator/client/client.js';
import { nodeOptionsOf, startLocalCluster, startSliceNode, stopProcess, type ClusterOptions, type LocalCluster, type ManagedProcess, type SliceNodeOptions } from '../coordinator/cli/local-cluster.js';
import type { OperationName, Request, Response } from '../shared/api.js';
import { KeysliceError, isErrorCode } from '../shared/errors.js';
import { sliceOf } from '../shared/hashing.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER, HTTP_API_PREFIX } from '../shared/protocol.js';
import type { ClusterStatus } from '../shared/api.js';
import { fromJson, toJson, type Item } from '../shared/values.js';
import { parseExposition, samples } from './prometheus-text.js';

/** What both transports offer: one operation call. */
export interface Api {
  request<Op extends OperationName>(op: Op, payload: Request<Op>): Promise<Response<Op>>;
}

export interface ClusterHandle {
  cluster: LocalCluster;
  client: KeysliceClient;
  http: Api;
  dataDir: string;
  /** What useCluster was given: restartNode starts a node as the cluster's others were. */
  options: Partial<ClusterOptions>;
}

/** Starts a cluster before the file's tests and stops every process after them. */
export function useCluster(opts: Partial<ClusterOptions> = {}): ClusterHandle {
  const handle = { options: opts } as ClusterHandle;
  beforeAll(async () => {
    handle.dataDir = mkdtempSync(join(tmpdir(), 'keyslice-test-'));
    // Replication factor 1 unless a test asks for more: the stories written before replication (slice moves,
    // a node down answering Unavailable) assume one copy; test/failover.test.ts runs R=3.
    handle.cluster = await startLocalCluster({ dataDir: handle.dataDir, replicationFactor: 1, ...opts });
    handle.client = await KeysliceClient.connect(handle.cluster.url);
    handle.http = httpApi(handle.cluster.url);
  });
  afterAll(async () => {
    await handle.client?.close();
    // SIGKILL, not the graceful stop of LocalCluster.stop: the folder goes next, so nothing a graceful stop leaves is
    // read, and a process a failed test left frozen (SIGSTOP) needs no 5 s wait (STOP_TIMEOUT_MS) to go. A cluster's
    // stop took 390 ms by SIGTERM and 245 ms by SIGKILL (medians of 4 pairs, load 50). The processes the handle holds
    // now (a test may have restarted one); the coordinator's routers go with it (node:cluster).
    const c = handle.cluster;
    if (c !== undefined) await Promise.all([c.coordinator, ...c.nodes].map((p) => stopProcess(p.child, 'SIGKILL')));
    if (handle.dataDir) rmSync(handle.dataDir, { recursive: true, force: true });
  });
  return handle;
}

/** The cluster's status, as `keyslice status` reads it (cluster secret). */
export async function clusterStatus(h: ClusterHandle): Promise<ClusterStatus> {
  const res = await fetch(`${h.cluster.url}${CLUSTER_API_PREFIX}status`, { headers: { [CLUSTER_SECRET_HEADER]: h.cluster.clusterSecret } });
  return (await res.json()) as ClusterStatus;
}

/** Bounds on each wait of a replicated test cluster for a failover or a restart: a failover takes the heartbeat timeout
 * (1.5 s) plus an election. */
export const RECOVERY_MS_MAX = 20_000;

/** A counter summed over the samples of the coordinator's /metrics (every process's: the nodes' too), of `table`
 * only where one is named (the nodes' duplicate writes: keyslice_node_duplicate_writes_total). */
export async function metricSum(h: ClusterHandle, name: string, table?: string): Promise<number> {
  const res = await fetch(`${h.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  return samples(parseExposition(await res.text()), name)
    .filter((s) => table === undefined || s.labels.table === table)
    .reduce((n, s) => n + s.value, 0);
}

/** Waits, at most `maxMs`, until `ok` holds of the cluster's status, and answers that status; a status that cannot
 * be read is asked again. */
export async function statusUntil(h: ClusterHandle, what: string, ok: (st: ClusterStatus) => boolean, maxMs = RECOVERY_MS_MAX): Promise<ClusterStatus> {
  const deadline = Date.now() + maxMs;
  let last = 'no status read';
  for (;;) {
    const st = await clusterStatus(h).catch((err: Error) => err);
    if (!(st instanceof Error) && ok(st)) return st;
    last = st instanceof Error ? `status failed: ${st.message}` : st.replication.note;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${maxMs} ms (${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every replicated slice has a leader (and some slice is replicated). */
export const led = (st: ClusterStatus): boolean => st.replication.leaders.replicated > 0 && st.replication.leaders.led === st.replication.leaders.replicated;

/** Waits (RECOVERY_MS_MAX) until status says every replicated slice has an elected leader; answers that status. */
export const allLed = (h: ClusterHandle, what = 'every slice led'): Promise<ClusterStatus> => statusUntil(h, what, led);

/** Every slice led, and `node` leads none of them (its leaderships went to the others). */
export const leadsNothing = (node: ManagedProcess) => (st: ClusterStatus): boolean => led(st) && st.nodes.find((n) => n.node === node.url)?.slices === 0;

/** The node that leads the slice of item `id` of `table` (which holds items on that slice), by DescribeSlices: asked
 * again every 100 ms, within RECOVERY_MS_MAX, while it names none. */
export async function leaderOf(h: ClusterHandle, table: string, id: string): Promise<ManagedProcess> {
  const deadline = Date.now() + RECOVERY_MS_MAX;
  for (;;) {
    const layout = await h.client.describeSlices(table).catch(() => null);
    const slice = layout === null ? -1 : sliceOf('string', id, layout.sliceCount);
    const url = layout?.slices.find((s) => s.slice === slice)?.node;
    const node = h.cluster.nodes.find((n) => n.url === url);
    if (node !== undefined) return node;
    if (Date.now() > deadline) throw new Error(`no node leads the slice of ${id} within ${RECOVERY_MS_MAX} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Starts `node` (stopped) again on its port and data folder, in place, with the cluster's node options (workers,
 * durability, snapshot threshold, capacity, log) unless `extra` says otherwise: whoever stops the cluster stops the new
 * process. Of the handle it needs the cluster, its folder and its options (a test that starts its own cluster passes
 * those). */
export async function restartNode(h: Pick<ClusterHandle, 'cluster' | 'dataDir' | 'options'>, node: ManagedProcess, extra: Partial<SliceNodeOptions> = {}): Promise<void> {
  const port = Number(new URL(node.url).port);
  const again = await startSliceNode({ name: node.name, dataDir: join(h.dataDir, node.name), port, ...nodeOptionsOf(h.options), clusterSecret: h.cluster.clusterSecret, ...extra });
  node.child = again.child;
}

/** The HTTP/JSON transport as an Api: errors become KeysliceError, status kept on `httpStatus`. */
export function httpApi(baseUrl: string): Api {
  return {
    async request(op, payload) {
      const res = await httpPost(baseUrl, op, JSON.stringify(toJson(payload)));
      // The body is the response of `op` (typed by the caller's Api); the server checked what it sent.
      return res.body as never;
    },
  };
}

export async function httpPost(baseUrl: string, path: string, body: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(baseUrl + HTTP_API_PREFIX + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const json = (await res.json()) as { error?: { code: string; message: string; item?: unknown } };
  if (res.status !== 200) {
    const details = json.error !== undefined && 'item' in json.error ? { item: fromJson(json.error.item) as Item | null } : undefined;
    const err = new KeysliceError(isErrorCode(json.error?.code) ? json.error!.code : 'Internal', json.error?.message ?? 'no message', details);
    (err as KeysliceError & { httpStatus: number }).httpStatus = res.status;
    throw err;
  }
  return { status: res.status, body: fromJson(json) };
}

/** Values compared across transports: binary as base64 text, so Buffer and Uint8Array agree. */
export function plain(v: unknown): unknown {
  return toJson(v);
}

/** A seeded PRNG, so that a failing random case can be replayed. */
export const rng = prng;

/** KEYSLICE_TEST_LOG: the stories print their counts, and every process's output goes to a log with the time:
 * `=1` on stdout, any other value a file of that name. Unset: nothing. */
export const testLog: ((line: string) => void) | undefined = ((v) =>
  v === undefined || v === ''
    ? undefined
    : v === '1'
      ? (l: string) => console.log(`${Date.now()} ${l}`)
      : (l: string) => appendFileSync(v, `${Date.now()} ${l}\n`))(process.env.KEYSLICE_TEST_LOG);

export async function expectError(p: Promise<unknown>, code: string): Promise<KeysliceError> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof KeysliceError)) throw err;
    if (err.code !== code) throw new Error(`expected error ${code}, got ${err.code}: ${err.message}`);
    return err;
  }
  throw new Error(`expected error ${code}, but the request succeeded`);
}

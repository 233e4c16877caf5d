// A story of a node that lost its data, through real processes: a coordinator
// and two slice nodes that register themselves; items written; node 2 stopped
// and started again under its address with an empty data folder. It is refused
// (its log, the coordinator's log, /cluster/status and `keyslice status` say
// why and what to do), and its items answer Unavailable, never null. Its
// original folder brings everything back. A folder of another cluster is
// refused the same way. Finally the operator accepts the loss with
// `keyslice remove <node> --forget-data`: the slices go, empty, to node 1.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import { waitFor } from './elastic-fixture.js';

const SECRET = 'identity-test-secret';
const T = 'kept';
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-identity-'));
const cli = join(process.cwd(), 'dist', 'coordinator', 'cli', 'cli.js');
const coordinatorLog: string[] = [];
const procs: ManagedProcess[] = [];
let coordinator: ManagedProcess;
let node1: ManagedProcess;
let node2: ManagedProcess;
let client: KeysliceClient;
const ids = Array.from({ length: 60 }, (_, i) => `id-${i}`);
let onNode2: string[] = [];

async function status(): Promise<ClusterStatus> {
  const res = await fetch(`${coordinator.url}/cluster/status`, { signal: AbortSignal.timeout(10_000) });
  return (await res.json()) as ClusterStatus;
}

/** Starts node 2 on its address with folder `folder`; its output goes to `log`. */
async function startNode2(folder: string, log: string[] = []): Promise<ManagedProcess> {
  const port = Number(new URL(node2.url).port);
  const p = await startSliceNode({ name: 'slice-node-2', dataDir: folder, port, workers: 2, coordinator: coordinator.url, clusterSecret: SECRET, log: (l) => log.push(l) });
  procs.push(p);
  return p;
}

/** Every item: its value, or the error code it answers with. */
async function readAll(): Promise<Map<string, unknown>> {
  const out = new Map<string, unknown>();
  for (const id of ids) out.set(id, await client.getItem(T, id).then((item) => item?.v ?? null, (err: KeysliceError) => err.code));
  return out;
}

beforeAll(async () => {
  await initHashing();
  coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, [], 16, (l) => coordinatorLog.push(l), ['--cluster-secret', SECRET, '--replication-factor', '1']);
  procs.push(coordinator);
  node1 = await startSliceNode({ name: 'slice-node-1', dataDir: join(dataDir, 'n1'), port: 0, workers: 2, coordinator: coordinator.url, clusterSecret: SECRET });
  procs.push(node1);
  await waitFor(async () => (await status()).nodes.some((n) => n.up), 'node 1 to join');
  node2 = await startSliceNode({ name: 'slice-node-2', dataDir: join(dataDir, 'n2'), port: 0, workers: 2, coordinator: coordinator.url, clusterSecret: SECRET });
  procs.push(node2);
  await waitFor(async () => {
    const st = await status();
    return st.nodes.length === 2 && st.nodes.every((n) => n.up && n.slices === 8) && st.moves.inFlight.length === 0;
  }, 'the two nodes to share the slices');
  client = await KeysliceClient.connect(coordinator.url);
  await client.createTable(T, { name: 'id', type: 'string' });
  expect(await client.batchWrite(T, { puts: ids.slice(0, 25).map((id, i) => ({ id, v: i })) })).toEqual([]);
  expect(await client.batchWrite(T, { puts: ids.slice(25, 50).map((id, i) => ({ id, v: 25 + i })) })).toEqual([]);
  expect(await client.batchWrite(T, { puts: ids.slice(50).map((id, i) => ({ id, v: 50 + i })) })).toEqual([]);
  const { sliceCount, slices } = await client.describeSlices(T);
  const owner = new Map(slices.map((s) => [s.slice, s.node]));
  onNode2 = ids.filter((id) => owner.get(sliceOf('string', id, sliceCount)) === node2.url);
  expect(onNode2.length).toBeGreaterThan(0);
  expect(onNode2.length).toBeLessThan(ids.length);
});
afterAll(async () => {
  await client?.close();
  await Promise.all(procs.map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a node that lost its data', () => {
  it('is refused under its old address, and its items answer Unavailable, not null', async () => {
    await stopProcess(node2.child);
    const log: string[] = [];
    const empty = await startNode2(join(dataDir, 'n2-empty'), log);
    await waitFor(async () => log.some((l) => /cannot register: InvalidState: .*came back with a different data folder/.test(l)), 'the node to be told why', 15_000);
    expect(log.join('\n')).toMatch(/Restore its data folder and restart it, or accept that the data of those slices is lost: keyslice remove ws:\/\/\S+ --forget-data/);
    await waitFor(async () => (await status()).nodes.find((n) => n.node === node2.url)?.problem != null, 'the status to show the problem', 15_000);
    const st = await status();
    const n2 = st.nodes.find((n) => n.node === node2.url)!;
    expect(n2).toMatchObject({ up: false, slices: 8, problem: expect.stringMatching(/came back with a different data folder .* its 8 slices are not given to it and answer Unavailable/) });
    expect(coordinatorLog.some((l) => l.includes(n2.problem!))).toBe(true);
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'status', '--url', coordinator.url], { timeout: 15_000 });
    expect(stdout).toContain(`NOT USED: ${n2.problem}`);

    const read = await readAll();
    for (const id of ids) expect(read.get(id), id).toBe(onNode2.includes(id) ? 'Unavailable' : ids.indexOf(id));
    await stopProcess(empty.child);
  });

  it('is refused with a data folder of another cluster', async () => {
    const foreign = join(dataDir, 'n2-foreign');
    mkdirSync(foreign, { recursive: true });
    writeFileSync(join(foreign, 'node-identity.json'), JSON.stringify({ nodeId: 'cd'.repeat(16), clusterId: 'ef'.repeat(16) }));
    const log: string[] = [];
    const other = await startNode2(foreign, log);
    await waitFor(async () => log.some((l) => /cannot register: InvalidState: .*holds the data of another keyslice cluster \(cluster id efef/.test(l)), 'the refusal', 15_000);
    expect((await readAll()).get(onNode2[0])).toBe('Unavailable');
    await stopProcess(other.child);
  });

  it('serves everything again once its own folder is back', async () => {
    await startNode2(join(dataDir, 'n2'));
    await waitFor(async () => (await status()).nodes.every((n) => n.up && n.problem === null), 'node 2 to be accepted', 20_000);
    const read = await readAll();
    for (const id of ids) expect(read.get(id), id).toBe(ids.indexOf(id));
  });

  it('keyslice remove --forget-data gives its slices, empty, to the other node', async () => {
    await stopProcess(procs.at(-1)!.child);
    await startNode2(join(dataDir, 'n2-empty-again'));
    await waitFor(async () => (await status()).nodes.find((n) => n.node === node2.url)?.problem != null, 'the refusal', 15_000);
    // Without the flag, a node that owns slices is not removed.
    const plain = await promisify(execFile)(process.execPath, [cli, 'remove', node2.url, '--url', coordinator.url], { timeout: 15_000 }).catch((err: { stderr: string }) => err);
    expect((plain as { stderr: string }).stderr).toMatch(/still owns 8 slices; .*--forget-data/);
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'remove', node2.url, '--forget-data', '--url', coordinator.url], { timeout: 15_000 });
    expect(stdout).toContain(`removed ${node2.url}`);
    expect(coordinatorLog.some((l) => /removed with its data given up: 8 slices lost their data and went, empty, to 1 active nodes/.test(l))).toBe(true);
    const st = await status();
    expect(st.nodes.map((n) => [n.node, n.slices])).toEqual([[node1.url, 16]]);
    const read = await readAll();
    for (const id of ids) expect(read.get(id), id).toBe(onNode2.includes(id) ? null : ids.indexOf(id));
    // The lost slices take writes again.
    await client.putItem(T, { id: onNode2[0], v: 'again' });
    expect(await client.getItem(T, onNode2[0])).toMatchObject({ v: 'again' });
  });
});

// The compose topology without a Docker engine: read docker-compose.yml and run
// each service's command as a process on 127.0.0.1 with the service's
// environment (the service's replicas as separate processes, each with its own
// data folder and a free port; service host names mapped to the loopback
// address of the process that plays that service). Then check that the cluster
// forms and serves, and that `--scale slice=5` adds nodes that join by themselves.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client.js';
import { startProcess, stopProcess, type ManagedProcess } from '../coordinator/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { interpolate, readCompose, type YamlValue } from './compose-file.js';
import { expectError } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';

const compose = readCompose(join(dirname(fileURLToPath(import.meta.url)), '..', 'docker-compose.yml'));
const services = compose.services as Record<string, Record<string, YamlValue>>;
// What an operator would put in .env.
const hostEnv = { KEYSLICE_TOKEN: 'compose-test-token', KEYSLICE_CLUSTER_SECRET: 'compose-test-secret' };
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-compose-'));
const started: ManagedProcess[] = [];
/** service name -> the address its (first) process listens on, host:port */
const addresses = new Map<string, string>();
const READY = /(?:coordinator ready (http:\/\/\S+)|slice node ready (ws:\/\/\S+))/;

afterAll(async () => {
  await Promise.all(started.map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
});

/** Starts replica `replica` of a service as the compose file describes it. */
async function startReplica(name: string, replica: number): Promise<ManagedProcess> {
  const service = services[name];
  const command = service.command as string[];
  expect(command[0]).toBe('node');
  expect(command[1]).toMatch(/^dist\//);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
  for (const [k, v] of Object.entries(service.environment as Record<string, string>)) {
    let value = interpolate(v, hostEnv);
    // Host names of services become the loopback address of the process playing them.
    for (const [other, address] of addresses) value = value.replace(new RegExp(`//${other}:\\d+`), `//${address}`);
    env[k] = value;
  }
  // One host instead of one network namespace per container: loopback, free ports, a folder each.
  env.KEYSLICE_HOST = '127.0.0.1';
  env.KEYSLICE_PORT = '0';
  env.KEYSLICE_DATA = join(dataDir, `${name}-${replica}`);
  const { proc, match } = await startProcess(`${name}-${replica}`, command[1].slice('dist/'.length), command.slice(2), READY, undefined, env);
  started.push(proc);
  if (!addresses.has(name)) addresses.set(name, new URL(match[1] ?? match[2]).host);
  return proc;
}

async function status(): Promise<ClusterStatus> {
  const res = await fetch(`http://${addresses.get('coordinator')}/cluster/status`, { headers: { authorization: `Bearer ${hostEnv.KEYSLICE_TOKEN}` }, signal: AbortSignal.timeout(10_000) });
  return (await res.json()) as ClusterStatus;
}

async function balanced(nodes: number): Promise<ClusterStatus> {
  let st: ClusterStatus | undefined;
  await waitFor(async () => {
    st = await status();
    const counts = st.nodes.map((n) => n.slices);
    return st.nodes.length === nodes && st.nodes.every((n) => n.up) && st.unassignedSlices === 0 && st.moves.inFlight.length === 0 && Math.max(...counts) - Math.min(...counts) <= 1;
  }, `${nodes} nodes to share the slices`, 40_000);
  return st!;
}

describe('docker-compose.yml, run as processes', () => {
  it('publishes the client port on the loopback address only, and needs the cluster secret', () => {
    for (const s of Object.values(services)) for (const p of (s.ports as string[] | undefined) ?? []) expect(p).toMatch(/^127\.0\.0\.1:/);
    expect(() => interpolate((services.slice.environment as Record<string, string>).KEYSLICE_CLUSTER_SECRET, {})).toThrow(/KEYSLICE_CLUSTER_SECRET/);
    expect(Number(services.slice.scale)).toBe(3);
  });

  it('forms a cluster of a coordinator and three slice nodes that serves, then grows to five', async () => {
    const dependsOn = (name: string) => (services[name].depends_on as string[] | undefined) ?? [];
    const order = [...Object.keys(services).filter((n) => dependsOn(n).length === 0), ...Object.keys(services).filter((n) => dependsOn(n).length > 0)];
    for (const name of order) for (const d of dependsOn(name)) expect(order.indexOf(d)).toBeLessThan(order.indexOf(name));
    for (const name of order) {
      const replicas = Number(services[name].scale ?? 1);
      await Promise.all(Array.from({ length: replicas }, (_, i) => startReplica(name, i + 1)));
    }
    const st = await balanced(3);
    expect(st.sliceCount).toBe(1024);

    const url = `http://${addresses.get('coordinator')}`;
    await expectError(KeysliceClient.connect(url), 'Unauthorized');
    const client = await KeysliceClient.connect(url, { token: hostEnv.KEYSLICE_TOKEN });
    try {
      await client.createTable('compose', { name: 'id', type: 'string' });
      const ids = Array.from({ length: 200 }, (_, i) => `item-${i}`);
      for (let i = 0; i < ids.length; i += 25) expect(await client.batchWrite('compose', { puts: ids.slice(i, i + 25).map((id) => ({ id })) })).toEqual([]);
      // docker compose up --scale slice=5
      await Promise.all([4, 5].map((i) => startReplica('slice', i)));
      await balanced(5);
      const got = await client.batchGet('compose', ids.slice(0, 100));
      expect(got.failures).toEqual([]);
      expect(got.items.map((i) => i?.id)).toEqual(ids.slice(0, 100));
      expect((await client.getAllItems({ table: 'compose' })).length).toBe(200);
    } finally {
      await client.close();
    }
  }, 90_000);
});

// The compose topology without a Docker engine: read docker-compose.yml and run
// each service's command as a process on 127.0.0.1 with the service's
// environment. One host plays the compose network: each service gets a port of
// its own on the loopback address (kept across restarts, as a service's address
// is), service host names map to it, and each volume is a folder. Services start
// in depends_on order, each once its dependencies' healthchecks (run as the
// processes they name) pass. Then: the cluster forms and serves, through the
// coordinator's port and through the router service; `docker compose down && up`
// brings back the same three nodes with their data; a second router replica
// (`--scale router=2`) serves, and goes on serving when the first one is
// stopped; a fourth node added as the file's header says joins and takes its share.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { interpolate, readCompose, type Service } from './compose-file.js';
import { expectError } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { freePort } from './procs.js';

const compose = readCompose(join(dirname(fileURLToPath(import.meta.url)), '..', 'docker-compose.yml'));
const services = compose.services;
// What an operator would put in .env.
// Replication factor 1: this story has a fourth node join and take its share by slice moves, which are
// refused for replicated slices (docs/replication.md); test/failover.test.ts covers R=3.
const hostEnv = { KEYSLICE_TOKEN: 'compose-test-token', KEYSLICE_CLUSTER_SECRET: 'compose-test-secret', KEYSLICE_REPLICATION_FACTOR: '1' };
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-compose-'));
const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'coordinator', 'cli', 'cli.js');
const running = new Map<string, ChildProcess>();
/** The last lines each service printed, for the message of a failed wait. */
const output = new Map<string, string[]>();
/** service name -> its port on 127.0.0.1 (the service's address, stable like a compose service name) */
const ports = new Map<string, number>();

afterAll(async () => {
  await Promise.all([...running.values()].map((child) => stopProcess(child)));
  rmSync(dataDir, { recursive: true, force: true });
});

/** The variable that sets a service's port, and its value in the file (the port inside its container). */
function portVariable(service: Service): [name: string, containerPort: string] {
  const found = Object.entries(service.environment).find(([k]) => /^KEYSLICE_(COORDINATOR|NODE|ROUTER)_PORT$/.test(k));
  expect(found, 'every service sets its port').toBeDefined();
  return found!;
}

/** The environment the service's process gets on this host. */
function environmentOf(name: string, service: Service): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
  const mounts = (service.volumes ?? []).map((v) => {
    const [volume, target] = v.split(':');
    expect(compose.volumes, `volume ${volume} is declared`).toHaveProperty(volume);
    return { target, folder: join(dataDir, volume) };
  });
  for (const [k, v] of Object.entries(service.environment)) {
    let value = interpolate(v, hostEnv);
    // Service host names and their container ports become the loopback address and the port that service has here.
    for (const [other, port] of ports) value = value.replace(new RegExp(`//${other}:${portVariable(services[other])[1]}\\b`), `//127.0.0.1:${port}`);
    // A path on a volume becomes the same path in that volume's folder.
    for (const m of mounts) if (value === m.target || value.startsWith(`${m.target}/`)) value = m.folder + value.slice(m.target.length);
    env[k] = value;
  }
  env.KEYSLICE_HOST = '127.0.0.1';
  env[portVariable(service)[0]] = String(ports.get(name));
  return env;
}

/** Runs the service's healthcheck command as docker would, in the service's environment; true if it exits 0. */
function healthy(name: string): Promise<boolean> {
  const check = services[name].healthcheck!;
  expect(check.test[0]).toBe('CMD');
  expect(check.test[1]).toBe('node');
  const child = spawn(process.execPath, check.test.slice(2), { stdio: 'ignore', env: environmentOf(name, services[name]) });
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

/** Waits until every dependency of `names` passes its healthcheck: each is run once per poll, however many of `names`
 * depend on it (the three nodes and the router of `up` each ran the coordinator's, four node processes a poll while the
 * coordinator started). */
async function dependenciesHealthy(names: string[]): Promise<void> {
  const dependents = new Map<string, string[]>();
  for (const name of names) {
    for (const [dependency, { condition }] of Object.entries(services[name].depends_on ?? {})) {
      expect(condition).toBe('service_healthy');
      dependents.set(dependency, [...(dependents.get(dependency) ?? []), name]);
    }
  }
  await Promise.all([...dependents].map(([dependency, of]) => waitFor(() => healthy(dependency), `${dependency} to be healthy before ${of.join(', ')} start`)));
}

async function start(name: string): Promise<void> {
  await dependenciesHealthy([name]);
  await spawnService(name);
}

/** Starts the service's process (its dependencies healthy). */
async function spawnService(name: string): Promise<void> {
  const service = services[name];
  if (!ports.has(name)) ports.set(name, await freePort());
  // The image's `keyslice` is dist/coordinator/cli/cli.js. Like compose, nothing waits for a ready line:
  // a dependent waits for the healthcheck.
  expect(service.command[0]).toBe('keyslice');
  const child = spawn(process.execPath, [cli, ...service.command.slice(1)], { stdio: ['ignore', 'pipe', 'pipe'], env: environmentOf(name, service) });
  running.set(name, child);
  const lines: string[] = [];
  output.set(name, lines);
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (d: Buffer) => lines.push(...d.toString().trimEnd().split('\n')) > 40 && lines.splice(0, lines.length - 40));
}

/** Fails at once, with its output, if a service's process is gone. */
function noneExited(): void {
  for (const [name, child] of running) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited (${child.signalCode ?? child.exitCode}):\n${output.get(name)!.join('\n')}`);
  }
}

/** `docker compose up`: every service, dependencies first. */
async function up(): Promise<void> {
  const started = new Set<string>();
  for (let round = 0; started.size < Object.keys(services).length; round++) {
    expect(round, 'depends_on has no cycle').toBeLessThan(10);
    const ready = Object.keys(services).filter((n) => !started.has(n) && Object.keys(services[n].depends_on ?? {}).every((d) => started.has(d)));
    await dependenciesHealthy(ready);
    await Promise.all(ready.map((n) => spawnService(n)));
    for (const n of ready) started.add(n);
  }
}

/** `docker compose down` (volumes kept): dependents first. */
async function down(): Promise<void> {
  const dependents = [...running.keys()].filter((n) => Object.keys(services[n].depends_on ?? {}).length > 0);
  for (const group of [dependents, [...running.keys()].filter((n) => !dependents.includes(n))]) {
    await Promise.all(group.map((n) => stopProcess(running.get(n)!)));
    for (const n of group) running.delete(n);
  }
}

async function status(): Promise<ClusterStatus> {
  const res = await fetch(`http://127.0.0.1:${ports.get('coordinator')}/cluster/status`, {
    headers: { authorization: `Bearer ${hostEnv.KEYSLICE_TOKEN}` },
    signal: AbortSignal.timeout(10_000),
  });
  return (await res.json()) as ClusterStatus;
}

/** Waits (bounded) until `nodes` nodes are up and share the slices evenly, with no move left. */
async function balanced(nodes: number, timeoutMs = 120_000): Promise<ClusterStatus> {
  const until = Date.now() + timeoutMs;
  let st: ClusterStatus | undefined;
  while (Date.now() < until) {
    noneExited();
    st = await status().catch(() => undefined);
    const counts = st?.nodes.map((n) => n.slices) ?? [];
    if (st?.nodes.length === nodes && st.nodes.every((n) => n.up) && st.unassignedSlices === 0 && st.moves.inFlight.length === 0 && Math.max(...counts) - Math.min(...counts) <= 1) return st;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${nodes} nodes to share the slices; last status: ${JSON.stringify(st?.nodes)}`);
}

const sliceServices = Object.keys(services).filter((n) => n.startsWith('slice-'));

describe('docker-compose.yml', () => {
  it('publishes the client port on the loopback address only, needs the cluster secret, and checks the health of every service', () => {
    for (const s of Object.values(services)) for (const p of s.ports ?? []) expect(p).toMatch(/^127\.0\.0\.1:/);
    expect(() => interpolate(services['slice-1'].environment.KEYSLICE_CLUSTER_SECRET, {})).toThrow(/KEYSLICE_CLUSTER_SECRET/);
    expect(sliceServices).toEqual(['slice-1', 'slice-2', 'slice-3']);
    expect(Object.keys(services).sort()).toEqual(['coordinator', 'router', ...sliceServices].sort());
    for (const [name, s] of Object.entries(services)) {
      expect(s.healthcheck?.test[0], name).toBe('CMD');
      expect(s.scale, `${name}: replicas of one service would share an identity`).toBeUndefined();
    }
  });

  it('has a router service that scales: no volume, no address of its own, a host port per replica, the coordinator\'s token and secret', () => {
    const router = services.router;
    expect(router.command).toEqual(['keyslice', 'router']);
    expect(router.volumes).toBeUndefined();
    expect(router.environment.KEYSLICE_ADVERTISE).toBeUndefined();
    expect(router.environment.KEYSLICE_COORDINATOR).toBe(`http://coordinator:${services.coordinator.environment.KEYSLICE_COORDINATOR_PORT}`);
    expect(router.environment.KEYSLICE_TOKEN).toBe(services.coordinator.environment.KEYSLICE_TOKEN);
    expect(router.environment.KEYSLICE_CLUSTER_SECRET).toBe(services.coordinator.environment.KEYSLICE_CLUSTER_SECRET);
    expect(router.depends_on).toEqual({ coordinator: { condition: 'service_healthy' } });
    // "127.0.0.1:7110-7117:7100": a range of host ports, so that --scale router=N publishes each replica.
    const [, hostPorts, containerPort] = router.ports![0].split(':');
    expect(hostPorts).toMatch(/^\d+-\d+$/);
    expect(containerPort).toBe(router.environment.KEYSLICE_ROUTER_PORT);
    // The README's URL stays the coordinator's.
    expect(services.coordinator.ports).toEqual(['127.0.0.1:7100:7100']);
  });

  it('gives each slice node an address and a volume of its own, so it is the same node after down and up', () => {
    const volumes = sliceServices.map((n) => services[n].volumes!.map((v) => v.split(':')[0])).flat();
    expect(new Set(volumes).size).toBe(sliceServices.length);
    expect(volumes).not.toContain(services.coordinator.volumes![0].split(':')[0]);
    for (const n of sliceServices) {
      expect(services[n].environment.KEYSLICE_ADVERTISE).toBe(`ws://${n}:${services[n].environment.KEYSLICE_NODE_PORT}`);
      expect(services[n].volumes).toEqual([`${n}-data:${services[n].environment.KEYSLICE_NODE_DATA}`]);
    }
  });
});

describe('docker-compose.yml, run as processes', () => {
  it('forms a cluster that serves through the coordinator and the router service; after down and up the same three nodes serve every item; a second router replica serves on when the first stops; a fourth node joins', async () => {
    ports.set('coordinator', await freePort());
    expect(await healthy('coordinator'), 'the coordinator healthcheck fails while nothing listens').toBe(false);
    await up();
    const first = await balanced(3);
    // The router listens once the coordinator's view has reached it; nothing above waited for that.
    await waitFor(() => healthy('router'), 'the router to be healthy');
    for (const n of Object.keys(services)) expect(await healthy(n), n).toBe(true);
    expect(first.sliceCount).toBe(1024);
    const addresses = first.nodes.map((n) => n.node).sort();
    expect(addresses).toEqual(sliceServices.map((n) => `ws://127.0.0.1:${ports.get(n)}`).sort());

    const url = `http://127.0.0.1:${ports.get('coordinator')}`;
    const routerUrl = () => `http://127.0.0.1:${ports.get('router')}`;
    await expectError(KeysliceClient.connect(url), 'Unauthorized');
    await expectError(KeysliceClient.connect(routerUrl()), 'Unauthorized');
    const ids = Array.from({ length: 200 }, (_, i) => `item-${i}`);
    // The table is made and the items written through the router service; the coordinator's port serves them.
    let client = await KeysliceClient.connect(routerUrl(), { token: hostEnv.KEYSLICE_TOKEN });
    try {
      expect(((await (await fetch(`${routerUrl()}/health`, { signal: AbortSignal.timeout(10_000) })).json()) as { role: string }).role).toBe('router');
      await client.createTable('compose', { name: 'id', type: 'string' });
      for (let i = 0; i < ids.length; i += 25) expect(await client.batchWrite('compose', { puts: ids.slice(i, i + 25).map((id) => ({ id })) })).toEqual([]);
    } finally {
      await client.close();
    }
    client = await KeysliceClient.connect(url, { token: hostEnv.KEYSLICE_TOKEN });
    try {
      expect((await client.getAllItems({ table: 'compose' })).map((i) => i.id).sort()).toEqual([...ids].sort());
    } finally {
      await client.close();
    }

    // docker compose down && docker compose up: the volumes and the service addresses stay.
    await down();
    expect(await healthy('slice-1'), 'the node healthcheck fails while the node is down').toBe(false);
    await up();
    const again = await balanced(3);
    expect(again.nodes.map((n) => n.node).sort()).toEqual(addresses);
    client = await KeysliceClient.connect(url, { token: hostEnv.KEYSLICE_TOKEN });
    try {
      expect((await client.getAllItems({ table: 'compose' })).map((i) => i.id).sort()).toEqual([...ids].sort());

      // --scale router=2: a second replica of the same service (its own host port, nothing else of its own).
      services['router#2'] = services.router;
      await start('router#2');
      await waitFor(() => healthy('router#2'), 'the second router replica to be healthy');
      const second = await KeysliceClient.connect(`http://127.0.0.1:${ports.get('router#2')}`, { token: hostEnv.KEYSLICE_TOKEN });
      try {
        expect(await second.batchWrite('compose', { puts: [{ id: 'via-router-2' }] })).toEqual([]);
        // Scaled back down (the first replica stops): the other serves on, every item there.
        await stopProcess(running.get('router')!);
        running.delete('router');
        expect((await second.getAllItems({ table: 'compose' })).map((i) => i.id).sort()).toEqual([...ids, 'via-router-2'].sort());
      } finally {
        await second.close();
      }
      expect((await client.getItem('compose', { id: 'via-router-2' }))?.id).toBe('via-router-2');

      // A fourth node as the header says: slice-3's block copied as slice-4.
      services['slice-4'] = JSON.parse(JSON.stringify(services['slice-3']).replaceAll('slice-3', 'slice-4')) as Service;
      compose.volumes!['slice-4-data'] = null;
      await start('slice-4');
      await balanced(4);
      const got = await client.batchGet('compose', ids.slice(0, 100));
      expect(got.failures).toEqual([]);
      expect(got.items.map((i) => i?.id)).toEqual(ids.slice(0, 100));
      expect((await client.getAllItems({ table: 'compose' })).length).toBe(201);
    } finally {
      await client.close();
    }
  }, 420_000);
});

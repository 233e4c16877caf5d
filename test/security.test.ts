// Authentication through real processes: with a client token configured, HTTP
// and WebSocket requests without it are refused with the typed Unauthorized
// error; a slice node with a wrong cluster secret cannot register, and a
// process without the secret cannot open a slice-command connection to a node.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, startProcess, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { expectError } from './cluster-fixture.js';
import { waitFor } from './elastic-fixture.js';
import { wsHandshakeStatus } from './raw-socket.js';

const TOKEN = 'client-token-1';
const SECRET = 'cluster-secret-1';
const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-security-'));
const procs: ManagedProcess[] = [];
let coordinator: ManagedProcess;
let node: ManagedProcess;

beforeAll(async () => {
  coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, [], 16, undefined, ['--token', TOKEN, '--cluster-secret', SECRET]);
  procs.push(coordinator);
  node = await startSliceNode({ name: 'good', dataDir: join(dataDir, 'good'), port: 0, workers: 1, coordinator: coordinator.url, clusterSecret: SECRET });
  procs.push(node);
  await waitFor(async () => (await status()).nodes.some((n) => n.up), 'the node to register');
});
afterAll(async () => {
  await Promise.all(procs.map((p) => stopProcess(p.child)));
  rmSync(dataDir, { recursive: true, force: true });
});

async function status(): Promise<{ nodes: { node: string; up: boolean }[] }> {
  const res = await fetch(`${coordinator.url}/cluster/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.json()) as { nodes: { node: string; up: boolean }[] };
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(coordinator.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; retryable: boolean } } };
}

describe('client token', () => {
  it('HTTP: no token or a wrong one is 401 Unauthorized; the right one is served', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: TOKEN }] as Record<string, string>[]) {
      const r = await post('/api/ListTables', {}, headers);
      expect(r.status).toBe(401);
      expect(r.body.error).toMatchObject({ code: 'Unauthorized', retryable: false });
    }
    expect((await fetch(`${coordinator.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${coordinator.url}/cluster/status`)).status).toBe(401);
    expect((await post('/cluster/drain', { node: node.url })).status).toBe(401);
    expect((await fetch(`${coordinator.url}/health`)).status).toBe(200);
    expect(await post('/api/ListTables', {}, { authorization: `Bearer ${TOKEN}` })).toEqual({ status: 200, body: { tables: [] } });
  });

  it('WebSocket: the handshake without the token fails with Unauthorized; with it, requests are served', async () => {
    await expectError(KeysliceClient.connect(coordinator.url), 'Unauthorized');
    await expectError(KeysliceClient.connect(coordinator.url, { token: 'wrong' }), 'Unauthorized');
    const client = await KeysliceClient.connect(coordinator.url, { token: TOKEN });
    await client.createTable('secured', { name: 'id', type: 'string' });
    await client.putItem('secured', { id: 'a', v: 1 });
    expect(await client.getItem('secured', 'a')).toMatchObject({ v: 1 });
    await client.close();
  });
});

describe('cluster secret', () => {
  it('a node with a wrong secret cannot register', async () => {
    const lines: string[] = [];
    const stray = await startSliceNode({ name: 'stray', dataDir: join(dataDir, 'stray'), port: 0, workers: 1, coordinator: coordinator.url, clusterSecret: 'guess', log: (l) => lines.push(l) });
    procs.push(stray);
    await waitFor(async () => lines.some((l) => /cannot register: Unauthorized/.test(l)), 'the refusal', 10_000);
    expect((await status()).nodes.map((n) => n.node)).toEqual([node.url]);
    const r = await post('/cluster/join', { url: stray.url }, { [CLUSTER_SECRET_HEADER]: 'guess' });
    expect(r.status).toBe(401);
    expect(r.body.error?.code).toBe('Unauthorized');
  });

  it('a process without the secret cannot send slice commands to a node', async () => {
    const attempts: Record<string, string>[] = [{}, { [CLUSTER_SECRET_HEADER]: 'guess' }];
    for (const headers of attempts) {
      const code = await wsHandshakeStatus(node.url, headers);
      expect(code).toBe(401);
    }
  });

  it('a coordinator with a wrong secret is refused by the node', async () => {
    // Started when it says the node refused it (it would say it is ready only after waiting for the node).
    const other = await startProcess('other-coordinator', 'coordinator/main.js', ['--port', '0', '--data', join(dataDir, 'other'), '--nodes', node.url, '--cluster-secret', 'guess'], /(refused the connection \(HTTP 401: the cluster secrets differ\))/);
    procs.push(other.proc);
    expect(other.match[1]).toBeDefined();
  });
});

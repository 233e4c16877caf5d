// The cluster secret by default, through real processes: a local cluster makes a
// random one (kept out of command lines and output) and its nodes refuse a
// connection or a join without it; a coordinator or slice node that would listen
// beyond this machine without a secret refuses to start, before it binds or
// touches its data folder.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCluster, type LocalCluster } from '../coordinator/cli/local-cluster.js';
import { isLoopbackHost } from '../shared/auth.js';
import { CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { wsHandshakeStatus as handshake } from './raw-socket.js';

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-secret-'));
const lines: string[] = [];
let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await startLocalCluster({ dataDir: join(dataDir, 'local'), nodes: 1, workers: 1, slices: 4, log: (l) => lines.push(l) });
});
afterAll(async () => {
  await cluster?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a local cluster', () => {
  it('has a random cluster secret, and its node refuses a connection without it', async () => {
    expect(cluster.clusterSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const node = cluster.nodes[0].url;
    expect(await handshake(node, {})).toBe(401);
    expect(await handshake(node, { [CLUSTER_SECRET_HEADER]: 'guess' })).toBe(401);
    expect(await handshake(node, { [CLUSTER_SECRET_HEADER]: cluster.clusterSecret })).toBe(101);
    const join = await fetch(`${cluster.url}/cluster/join`, { method: 'POST', body: JSON.stringify({ url: 'ws://127.0.0.1:9', nodeId: 'ab'.repeat(16), clusterId: null }) });
    expect(join.status).toBe(401);
  });

  it('keeps the secret out of command lines and output', () => {
    for (const p of [cluster.coordinator, ...cluster.nodes]) {
      expect(readFileSync(`/proc/${p.child.pid}/cmdline`, 'utf8')).not.toContain(cluster.clusterSecret);
    }
    expect(lines.join('\n')).not.toContain(cluster.clusterSecret);
  });
});

describe('listening beyond this machine without a secret', () => {
  const run = promisify(execFile);
  // 192.0.2.1 is a documentation address no machine has: binding it would fail with
  // "cannot listen", so the secret's sentence shows that the refusal came first.
  for (const [name, script] of [
    ['a slice node', 'slice-worker/main.js'],
    ['a coordinator', 'coordinator/main.js'],
  ]) {
    it(`${name} refuses to start, with one sentence and exit code 2`, async () => {
      const folder = join(dataDir, name.replace(/\W/g, '-'));
      const env = { ...process.env, KEYSLICE_CLUSTER_SECRET: '' };
      const err = await run(process.execPath, [join('dist', script), '--host', '192.0.2.1', '--port', '0', '--data', folder], { env, timeout: 15_000 }).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      );
      expect(err?.code).toBe(2);
      expect(err?.stderr.trim()).toBe(
        'keyslice: --host 192.0.2.1 can be reached from other machines, so a cluster secret is required: set --cluster-secret (env KEYSLICE_CLUSTER_SECRET) to the same value on the coordinator and every slice node.',
      );
      expect(existsSync(folder)).toBe(false);
    });
  }

  it('loopback addresses need none', () => {
    for (const h of ['127.0.0.1', '127.3.2.1', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '192.168.1.5', '10.0.0.1', 'example.com', '128.0.0.1', '127.0.0.256']) expect(isLoopbackHost(h), h).toBe(false);
  });
});

// Redis servers for the benchmarks, on 127.0.0.1 without persistence: one
// server, or a Redis Cluster of N shards (N servers with --cluster-enabled yes,
// each given an equal run of the 16384 slots with CLUSTER ADDSLOTSRANGE and
// introduced with CLUSTER MEET; `redis-cli --cluster create` would refuse fewer
// than 3 masters). The caller stops every process by its PID (`children`).
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { join } from 'node:path';
import { spawnUntilReady } from '../coordinator/cli/local-cluster.js';
import { connectRedis, type RedisCtor } from './redis-adapter.js';
import { REDIS_CLUSTER_SLOTS } from './redis-slot.js';

/** How long a new cluster may take to agree (every node: cluster_state:ok, all nodes known). */
const CLUSTER_FORM_TIMEOUT_MS = 30_000;
const CLUSTER_POLL_MS = 100;

export interface RedisProcess {
  port: number;
  child: ChildProcess;
}

/** A port that was free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const s = net.createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => done(port));
    });
  });
}

/** redis-server on 127.0.0.1:`port` with no persistence; `dir` holds whatever it writes (a cluster's nodes file).
 * `onSpawn` sees the process before it is ready, so that the caller can stop it on any error. */
export async function startRedisServer(redisServer: string, dir: string, onSpawn: (child: ChildProcess) => void, extra: (port: number) => string[] = () => []): Promise<RedisProcess> {
  const port = await freePort();
  const args = ['--save', '', '--appendonly', 'no', '--port', String(port), '--bind', '127.0.0.1', '--protected-mode', 'yes', '--dir', dir, ...extra(port)];
  const { child } = await spawnUntilReady(`redis-server:${port}`, redisServer, args, /Ready to accept connections/, { onSpawn });
  return { port, child };
}

/** A Redis Cluster of `shards` masters (no replicas), slots split evenly; resolves once every node says the
 * cluster is ok. Its nodes write their nodes-<port>.conf under `dir`. */
export async function startRedisCluster(Redis: RedisCtor, redisServer: string, dir: string, shards: number, onSpawn: (child: ChildProcess) => void): Promise<RedisProcess[]> {
  const nodes: RedisProcess[] = [];
  for (let i = 0; i < shards; i++) {
    nodes.push(await startRedisServer(redisServer, dir, onSpawn, (port) => ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', '5000']));
  }
  const conns = await Promise.all(nodes.map((n) => connectRedis(Redis, n.port)));
  try {
    for (let i = 0; i < shards; i++) {
      const first = Math.floor((i * REDIS_CLUSTER_SLOTS) / shards);
      const last = Math.floor(((i + 1) * REDIS_CLUSTER_SLOTS) / shards) - 1;
      await conns[i].call('CLUSTER', 'ADDSLOTSRANGE', first, last);
    }
    for (let i = 1; i < shards; i++) await conns[0].call('CLUSTER', 'MEET', '127.0.0.1', nodes[i].port);
    const until = Date.now() + CLUSTER_FORM_TIMEOUT_MS;
    for (;;) {
      const infos = await Promise.all(conns.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
      if (infos.every((s) => /cluster_state:ok/.test(s) && new RegExp(`cluster_known_nodes:${shards}\\b`).test(s) && /cluster_slots_assigned:16384\b/.test(s))) break;
      if (Date.now() > until) throw new Error(`the Redis Cluster of ${shards} shards did not form within ${CLUSTER_FORM_TIMEOUT_MS} ms: ${infos[0].split('\n').slice(0, 6).join(' ')}`);
      await new Promise((r) => setTimeout(r, CLUSTER_POLL_MS));
    }
  } finally {
    await Promise.allSettled(conns.map((c) => c.quit()));
  }
  return nodes;
}

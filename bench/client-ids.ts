// What a client's idempotency id costs a write, end to end: a local cluster (coordinator and three slice nodes),
// writers that send UpdateItem ADD over the WebSocket API with and without an `idempotencyId`, in rounds that
// alternate the two so that the machine's other load falls on both alike. At R=3 the router hashes the id and
// the slice remembers it (docs/replication.md, "A client's write sent twice"); at R=1 the id is only checked.
//
//   npm run build && node dist/bench/client-ids.js [--replication 3] [--seconds 4] [--rounds 3] [--writers 32]
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER } from '../shared/protocol.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    replication: { default: '3', help: 'the cluster replication factor' },
    seconds: { default: '4', help: 'seconds per round' },
    rounds: { default: '3', help: 'rounds of each (without and with ids, alternating)' },
    writers: { default: '32', help: 'writes in flight' },
  },
  'usage: node dist/bench/client-ids.js [options]',
).values;
const R = intArg('replication', args.replication, 1, 3);
const SECONDS = intArg('seconds', args.seconds, 1, 60);
const ROUNDS = intArg('rounds', args.rounds, 1, 20);
const WRITERS = intArg('writers', args.writers, 1, 512);
const KEYS = 1000;

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-bench-ids-'));
const cluster = await startLocalCluster({ dataDir, nodes: 3, slices: 64, replicationFactor: R, durability: 'os' });
const client = await KeysliceClient.connect(cluster.url, { connections: 4 });
try {
  await client.createTable('ids', { name: 'id', type: 'string' });
  // Every slice led before the rounds (bounded).
  for (let t = 0; ; t++) {
    const res = await fetch(`${cluster.url}${CLUSTER_API_PREFIX}status`, { headers: { [CLUSTER_SECRET_HEADER]: cluster.clusterSecret } });
    const st = (await res.json()) as ClusterStatus;
    if (R === 1 || st.replication.leaders.led === st.replication.leaders.replicated) break;
    if (t > 600) throw new Error('the slices were not all led within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const round = async (withIds: boolean): Promise<number> => {
    const end = Date.now() + SECONDS * 1000;
    let done = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        for (let n = 0; Date.now() < end && n < 10_000_000; n++) {
          const payload = { table: 'ids', key: { id: `k${(w * 7919 + n) % KEYS}` }, update: 'ADD n :one', values: { ':one': 1 } };
          await client.request('UpdateItem', withIds ? { ...payload, idempotencyId: randomUUID() } : payload);
          done++;
        }
      }),
    );
    return done / SECONDS;
  };
  await round(false); // warm-up
  await round(true);
  const without: number[] = [];
  const withIds: number[] = [];
  // Pairs in turn without-with, with-without: a trend over the run falls on both alike.
  for (let i = 0; i < ROUNDS; i++) {
    if (i % 2 === 0) without.push(await round(false));
    withIds.push(await round(true));
    if (i % 2 === 1) without.push(await round(false));
  }
  console.log(
    `R=${R}, ${WRITERS} writers, ${ROUNDS} rounds of ${SECONDS} s each: without ids ${without.map(Math.round).join(', ')} writes/s (median ${Math.round(median(without))}), ` +
      `with ids ${withIds.map(Math.round).join(', ')} (median ${Math.round(median(withIds))}): ${(median(withIds) / median(without)).toFixed(2)}x; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`,
  );
} finally {
  await client.close();
  await cluster.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

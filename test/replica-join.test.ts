// Replica rebalancing onto a node that joins a replicated cluster, through real processes
// (docs/replication.md): 3 slice nodes at R=3 hold a replica of every slice; a 4th joins under writes.
// Each of its share of slices gets a replica on it (caught up from the leader) before a replica of the
// most loaded node leaves the set; then leaderships spread to it. Checked: each node ends with about a
// quarter of the replicas (each slice still exactly 3 replicas on distinct nodes), the new node leads
// some slices, status showed the moves while they ran, and every acknowledged write reads back.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClusterStatus } from '../shared/api.js';
import { keyslice } from './cli-run.js';
import { bulk, elasticClusters, waitFor, WriteLoad, type Elastic } from './elastic-fixture.js';

const cluster = elasticClusters();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The coordinator's persisted map: every slice's replicas [leader, ...followers] as node URLs, and the leaving marks. */
function persisted(e: Elastic): { sets: string[][]; leaving: number[] } {
  const m = JSON.parse(readFileSync(join(e.dataDir, 'coordinator', 'cluster-map.json'), 'utf8')) as { nodes: string[]; owners: number[]; followers: number[][]; leaving?: number[] };
  return { sets: m.owners.map((o, s) => [o, ...m.followers[s]].map((n) => m.nodes[n])), leaving: m.leaving ?? [] };
}

const led = (st: ClusterStatus) => st.replication.leaders.replicated > 0 && st.replication.leaders.led === st.replication.leaders.replicated;

describe('replica rebalancing onto a node that joins (R=3)', () => {
  it('a 4th node joining 3 nodes at R=3 under writes takes a quarter of the replicas and leads some slices; nothing is lost', async () => {
    const e = await cluster({ nodes: 3, slices: 12, replicationFactor: 3 });
    await waitFor(async () => led(await e.status()), 'every slice to have a leader');
    await bulk(e, 300);
    const load = new WriteLoad(e.client, 'elastic', 4, 8);
    await sleep(500);
    const joined = await e.addNode();
    const started = Date.now();
    // Progress shows in status while the moves run.
    let sawMoving = false;
    let sawPending = 0;
    let st: ClusterStatus | undefined;
    await waitFor(
      async () => {
        st = await e.status();
        if (st.replication.leaders.moving > 0) sawMoving = true;
        sawPending = Math.max(sawPending, st.moves.pending);
        const replicas = st.nodes.map((n) => n.replicas);
        const slices = st.nodes.map((n) => n.slices);
        return (
          led(st) &&
          st.moves.pending === 0 &&
          st.replication.leaders.unsettled === 0 &&
          st.replication.leaders.moving === 0 &&
          Math.max(...replicas) - Math.min(...replicas) <= 1 &&
          Math.max(...slices) - Math.min(...slices) <= 1
        );
      },
      'the replicas and leaderships to be spread over the 4 nodes',
      90_000,
    );
    const tookMs = Date.now() - started;
    expect(sawMoving || sawPending > 0, 'status showed the replica moves').toBe(true);
    const mine = st!.nodes.find((n) => n.node === joined.url)!;
    expect(mine.replicas).toBeGreaterThanOrEqual(8); // 36 replicas over 4 nodes: 9 each
    expect(mine.replicas).toBeLessThanOrEqual(10);
    expect(mine.slices).toBeGreaterThan(0);
    const { sets, leaving } = persisted(e);
    for (const set of sets) {
      expect(set.length).toBe(3);
      expect(new Set(set).size).toBe(3);
    }
    expect(leaving.every((n) => n === -1)).toBe(true);
    expect(sets.filter((set) => set.includes(joined.url)).length).toBe(mine.replicas);
    // keyslice status shows each node's replicas beside the slices it leads.
    const shown = await keyslice(['status', '--url', e.coordinator.url], 30_000);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/NODE\s+STATUS\s+UP\s+SLICES\s+REPLICAS\s+ITEMS/);
    expect(shown.stdout).toMatch(new RegExp(`${joined.url.replace(/[.]/g, '\\.')}\\s+active\\s+yes\\s+\\d+\\s+${mine.replicas}\\s`));
    expect(shown.stdout).toMatch(/moves: 0 in flight, about 0 to go/);
    const acksBefore = load.acks;
    await sleep(1_000);
    await load.stop();
    expect(load.acks).toBeGreaterThan(acksBefore);
    await load.verify(300);
    if (process.env.KEYSLICE_TEST_LOG) {
      console.log(
        `join at R=3 under writes: balanced in ${tookMs} ms; ${load.acks} updates acknowledged, ${load.errors.length} failed (${[...new Set(load.errors.map((x) => x.message.slice(0, 80)))].join(' | ')}); ${st!.replication.note}`,
      );
    }
  }, 150_000);
});

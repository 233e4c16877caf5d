// A drain at the largest replication factor (REPLICATION_FACTOR_MAX, 7), through real processes: 8 slice nodes
// (one worker each) hold 4 slices at R=7, and one node drains. A drain step lists R+1 replicas of a slice in the
// nodes' assignments until it settles (docs/replication.md, "Replica-set changes"); a node that refused such an
// Assign would close its link mid-change. The drain must end with every slice led, 7 replicas on the other nodes,
// and every item read back.
import { describe, expect, it } from 'vitest';
import { REPLICATION_FACTOR_MAX } from '../shared/limits.js';
import { bulk, elasticClusters, led, replicaSets, untilLed, waitFor } from './elastic-fixture.js';

const cluster = elasticClusters();
const ITEMS = 100;


describe(`a drain at R=${REPLICATION_FACTOR_MAX}`, () => {
  it('ends with every slice led by 7 replicas on the other nodes, nothing lost', async () => {
    const R = REPLICATION_FACTOR_MAX;
    const e = await cluster({ nodes: R + 1, slices: 4, replicationFactor: R, workers: 1, coordinatorArgs: ['--rebalance', 'no'] });
    await untilLed(e, 60_000);
    // Nodes join one at a time and each slice's set grows to R as they come (a replica placed, caught up, settled), so
    // "every slice led" can come before every set holds R: wait for the sets, not assume them.
    await waitFor(
      async () => {
        const s = await e.status();
        return led(s) && s.replication.leaders.unsettled === 0 && replicaSets(e).every((set) => set.length === R);
      },
      `every slice at ${R} replicas, settled`,
      60_000,
    );
    await bulk(e, ITEMS);
    const before = replicaSets(e);
    expect(before.every((set) => set.length === R)).toBe(true);
    // A node that holds a replica of every slice: each of its slices gets an 8th replica while the drain runs.
    const drained = e.nodes.map((n) => n.url).find((url) => before.every((set) => set.includes(url)))!;
    expect(drained).toBeDefined();
    const r = await e.post('drain', drained);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    let last = '';
    await waitFor(
      async () => {
        const s = await e.status();
        const n = s.nodes.find((x) => x.node === drained)!;
        last = `drained node holds ${n.replicas} replicas; unsettled ${s.replication.leaders.unsettled}; led ${s.replication.leaders.led}/${s.replication.leaders.replicated}; ${s.nodes.filter((x) => !x.up).length} nodes down`;
        return s.loadComplete && n.replicas === 0 && s.replication.leaders.unsettled === 0 && led(s);
      },
      'the drain to end',
      90_000,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}: ${last}`);
    });
    const after = replicaSets(e);
    for (const set of after) {
      expect(set.length).toBe(R);
      expect(set).not.toContain(drained);
    }
    const st = await e.status();
    expect(st.nodes.every((n) => n.up)).toBe(true);
    const all = await e.client.getAllItems({ table: 'elastic' });
    expect(all.filter((x) => String(x.id).startsWith('bulk-')).length).toBe(ITEMS);
  }, 240_000);
});

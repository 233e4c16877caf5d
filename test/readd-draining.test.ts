// `keyslice add` of a node that is draining, through real processes: the drain
// stops, the node is active again, and the rebalancer moves slices back to it.
import { beforeAll, describe, expect, it } from 'vitest';
import { initHashing } from '../shared/hashing.js';
import { bulk, elasticClusters, seen, waitBalanced, waitFor } from './elastic-fixture.js';

beforeAll(() => initHashing());
const cluster = elasticClusters();

describe('adding a draining node', () => {
  it('makes it active again, and it gets its share of the slices back', async () => {
    const e = await cluster({ nodes: 2, slices: 16 });
    await bulk(e, 500);
    await waitBalanced(e);
    const node = e.nodes[1].url;
    expect((await e.post('drain', node)).status).toBe(200);
    await waitFor(async () => (await e.status()).nodes.find((n) => n.node === node)?.slices === 0, 'the drain to finish', 30_000, seen(e));
    expect((await e.post('add', node)).status).toBe(200);
    expect((await e.status()).nodes.find((n) => n.node === node)?.status).toBe('active');
    const st = await waitBalanced(e, 30_000);
    expect(st.nodes.map((n) => [n.node, n.status, n.slices])).toEqual([
      [e.nodes[0].url, 'active', 8],
      [node, 'active', 8],
    ]);
    expect((await e.client.getAllItems({ table: 'elastic' })).length).toBe(500);
  }, 90_000);
});

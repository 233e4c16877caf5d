// Stories of an elastic cluster, through real processes: a node joins under a
// write load and slices move onto it; a node is drained under load and ends
// with no slices (kills in the middle of a move: elastic-crash.test.ts).
// After each, every acknowledged write is there exactly once with its latest
// value (test/elastic-fixture.ts, WriteLoad).
import { beforeAll, describe, expect, it } from 'vitest';
import { initHashing } from '../shared/hashing.js';
import { bulk, elasticClusters, waitBalanced, waitFor, WriteLoad } from './elastic-fixture.js';

beforeAll(() => initHashing());
const cluster = elasticClusters();

describe('a node joins under a write load', () => {
  it('gets its share of the slices; every acknowledged write is there once, with its latest value; no request failed', async () => {
    const e = await cluster({ nodes: 2, slices: 64 });
    await bulk(e, 5_000);
    const load = new WriteLoad(e.client, 'elastic', 8, 40);
    await new Promise((r) => setTimeout(r, 300));
    const third = await e.addNode(3);
    const st = await waitBalanced(e);
    const acksAtEnd = load.acks;
    await new Promise((r) => setTimeout(r, 300));
    await load.stop();
    expect(load.acks).toBeGreaterThan(acksAtEnd); // the load kept going
    expect(st.nodes.find((n) => n.node === third.url)!.slices).toBeGreaterThanOrEqual(21);
    expect(st.moves.completed).toBeGreaterThanOrEqual(21);
    expect(st.moves.failed).toBe(0);
    expect(load.errors.map((x) => x.code)).toEqual([]); // re-routed, never refused
    expect(await load.verify(5_000)).toBe(5_000 + load.acked.size);
    expect(st.epoch).toBeGreaterThan(st.moves.completed);
  });
});

describe('a node is drained under a write load', () => {
  it('gives every slice away, is removed, and nothing is lost or doubled', async () => {
    const lines: string[] = []; // every process's output
    const e = await cluster({ nodes: 3, slices: 64, log: (line) => lines.push(line) });
    await bulk(e, 3_000);
    const load = new WriteLoad(e.client, 'elastic', 8, 40);
    await new Promise((r) => setTimeout(r, 300));
    const drained = e.nodes[0];
    expect((await e.post('remove', drained.url)).status).toBe(409); // it still owns slices
    expect((await e.post('drain', drained.url)).status).toBe(200);
    const st = await waitBalanced(e);
    await load.stop();
    const d = st.nodes.find((n) => n.node === drained.url)!;
    expect(d).toMatchObject({ status: 'draining', slices: 0, items: 0 });
    expect(st.nodes.filter((n) => n.node !== drained.url).map((n) => n.slices)).toEqual([32, 32]);
    expect(load.errors.map((x) => x.code)).toEqual([]);
    expect(await load.verify(3_000)).toBe(3_000 + load.acked.size);
    const saidBefore = lines.length;
    expect((await e.post('remove', drained.url)).status).toBe(200);
    expect((await e.status()).nodes.map((n) => n.node)).not.toContain(drained.url);
    // A removed node's heartbeats are refused: it does not come back by itself. Its next heartbeat (one a second) is
    // waited for by what the node says of the refusal, rather than by a fixed 1.5 s.
    const refused = `[${drained.name}] keyslice slice node: cannot register: InvalidState: node ${drained.url} was removed`;
    await waitFor(() => lines.slice(saidBefore).some((l) => l.startsWith(refused)), `${drained.name}'s heartbeat to be refused`, 15_000, () => lines.slice(saidBefore).join(' | '));
    expect((await e.status()).nodes.map((n) => n.node)).not.toContain(drained.url);
  });
});

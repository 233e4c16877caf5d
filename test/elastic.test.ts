// Stories of an elastic cluster, through real processes: a node joins under a
// write load and slices move onto it; a node is drained under load and ends
// with no slices; the target, then the source, of a move is killed in the
// middle of it. After each, every acknowledged write is there exactly once
// with its latest value (test/elastic-fixture.ts, WriteLoad).
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/local-cluster.js';
import { initHashing } from '../shared/hashing.js';
import { startElastic, waitBalanced, waitFor, WriteLoad, type Elastic } from './elastic-fixture.js';

const running: Elastic[] = [];
afterEach(async () => {
  for (const e of running.splice(0)) await e.stop();
});
beforeAll(() => initHashing());

async function cluster(opts: Parameters<typeof startElastic>[0]): Promise<Elastic> {
  const e = await startElastic(opts);
  running.push(e);
  await e.client.createTable('elastic', { name: 'id', type: 'string' });
  return e;
}

/** Items that give the moves something to copy. */
async function bulk(e: Elastic, count: number): Promise<void> {
  const pad = 'x'.repeat(100);
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < count; i += 25) {
    writes.push(e.client.batchWrite('elastic', { puts: Array.from({ length: Math.min(25, count - i) }, (_, j) => ({ id: `bulk-${i + j}`, pad })) }));
  }
  const failures = (await Promise.all(writes)).flat();
  expect(failures).toEqual([]);
}

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
    const e = await cluster({ nodes: 3, slices: 64 });
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
    expect((await e.post('remove', drained.url)).status).toBe(200);
    expect((await e.status()).nodes.map((n) => n.node)).not.toContain(drained.url);
    // A removed node's heartbeats are refused: it does not come back by itself.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await e.status()).nodes.map((n) => n.node)).not.toContain(drained.url);
  });
});

describe('a node dies in the middle of a move', () => {
  // Throttled moves (4,000 items/s; about 1,900 items per slice, copied 1,000 at a time)
  // so that the kill comes while a move is copying.
  const BULK = 30_000;
  async function midMove() {
    const e = await cluster({ nodes: 1, slices: 16, moveItemsPerSecond: 4_000 });
    await bulk(e, BULK);
    const load = new WriteLoad(e.client, 'elastic', 4, 20);
    const target = await e.addNode();
    await waitFor(async () => (await e.status()).moves.inFlight.some((m) => m.copied > 0 && m.phase === 'copy'), 'a move to copy items', 10_000);
    return { e, load, source: e.nodes[0], target };
  }

  it('the target: the move rolls back, the source keeps serving; after a restart the moves complete', async () => {
    const { e, load, target } = await midMove();
    await stopProcess(target.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).moves.failed > 0, 'the move to roll back');
    const acks = load.acks;
    await new Promise((r) => setTimeout(r, 300));
    expect(load.acks).toBeGreaterThan(acks); // slices on the source are served throughout
    await load.stop();
    await load.verify(BULK);
    // Back on the same address and folder: the rebalancer tries again and succeeds.
    const load2 = new WriteLoad(e.client, 'elastic', 4, 20, 'x');
    await e.addNode(2, Number(new URL(target.url).port), target.name);
    const st = await waitBalanced(e, 40_000);
    await load2.stop();
    expect(st.nodes.map((n) => n.slices).sort()).toEqual([8, 8]);
    await load.verify(BULK);
    await load2.verify(BULK);
  }, 90_000);

  it('the source: the move rolls back; after the source restarts, no acknowledged write is lost and the moves complete', async () => {
    const { e, load, source } = await midMove();
    await stopProcess(source.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).moves.failed > 0, 'the move to roll back');
    await new Promise((r) => setTimeout(r, 300));
    await e.addNode(2, Number(new URL(source.url).port), source.name);
    const st = await waitBalanced(e, 40_000);
    await load.stop();
    expect(st.nodes.map((n) => n.slices).sort()).toEqual([8, 8]);
    await load.verify(BULK);
  }, 90_000);
});

// Crashes in the middle of a slice move, through real processes: the target,
// the source, then the coordinator is SIGKILLed while a move copies. No acknowledged write is
// lost (test/elastic-fixture.ts, WriteLoad), the move rolls back, and once the
// node is back the moves complete. (A file of its own, so that it runs beside
// test/elastic.test.ts.)
import { beforeAll, describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { initHashing } from '../shared/hashing.js';
import { bulk, elasticClusters, seen, waitBalanced, waitFor, WriteLoad } from './elastic-fixture.js';

beforeAll(() => initHashing());
const cluster = elasticClusters();

describe('a node dies in the middle of a move', () => {
  // Throttled moves (2,000 items/s over all moves; about 1,900 items per slice, copied 1,000 at a time, 4 moves at
  // once) so that the kill comes while a move is copying: the first move completes about 2.4 s after the first
  // copy. (At 4,000 items/s, 1.2 s: at load average 30 a status answer came later than that, a move to the target
  // had completed, and with the target killed its slice had no node, which the target story's first check read.)
  // 8 slices: the second node's share, 4, is one round of MOVES_IN_FLIGHT_MAX moves, each as long as before; with 16
  // slices and twice the items, each story also waited out a second round (about 4 s at the throttle) and wrote twice
  // the items, for nothing it checks.
  const SLICES = 8;
  const BULK = SLICES * 1_875;
  async function midMove() {
    const e = await cluster({ nodes: 1, slices: SLICES, moveItemsPerSecond: 2_000 });
    await bulk(e, BULK);
    const load = new WriteLoad(e.client, 'elastic', 4, 20);
    const target = await e.addNode();
    let completed = -1;
    await waitFor(
      async () => {
        const st = await e.status();
        completed = st.moves.completed;
        return st.moves.inFlight.some((m) => m.copied > 0 && m.phase === 'copy');
      },
      'a move to copy items',
      10_000,
      seen(e),
    );
    return { e, load, source: e.nodes[0], target, completed };
  }

  it('the target: the move rolls back, the source keeps serving; after a restart the moves complete', async () => {
    const { e, load, target, completed } = await midMove();
    // The source holds every slice (replication factor 1): a move that completed would leave its slice on the target alone.
    expect(completed, 'no move completed before the target is killed').toBe(0);
    await stopProcess(target.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).moves.failed > 0, 'the move to roll back', 30_000, seen(e));
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
    expect(st.nodes.map((n) => n.slices).sort()).toEqual([SLICES / 2, SLICES / 2]);
    await load.verify(BULK);
    await load2.verify(BULK);
  }, 90_000);

  it('the source: the move rolls back; after the source restarts, no acknowledged write is lost and the moves complete', async () => {
    const { e, load, source } = await midMove();
    await stopProcess(source.child, 'SIGKILL');
    await waitFor(async () => (await e.status()).moves.failed > 0, 'the move to roll back', 30_000, seen(e));
    await new Promise((r) => setTimeout(r, 300));
    await e.addNode(2, Number(new URL(source.url).port), source.name);
    const st = await waitBalanced(e, 40_000);
    await load.stop();
    expect(st.nodes.map((n) => n.slices).sort()).toEqual([SLICES / 2, SLICES / 2]);
    await load.verify(BULK);
  }, 90_000);

  it('the coordinator: after a restart on its folder, no acknowledged write is lost and the moves complete', async () => {
    const { e, load } = await midMove();
    await e.restartCoordinator();
    load.client = e.client;
    await waitFor(async () => (await e.status()).nodes.every((n) => n.up), 'the nodes to be back', 30_000, seen(e));
    const st = await waitBalanced(e, 40_000);
    await load.stop();
    expect(st.nodes.map((n) => n.slices).sort()).toEqual([SLICES / 2, SLICES / 2]);
    await load.verify(BULK);
  }, 90_000);
});

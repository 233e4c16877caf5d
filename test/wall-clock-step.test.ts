// The router's, the slice mover's and the CLI's durations across a wall-clock step (an NTP step, a VM resumed): each is timed on
// the monotonic clock (performance.now()), which a step does not move, so none ends at once nor runs the step long.
// The router's retry bounds have theirs in router-retries.test.ts, the coordinator's down clocks in
// replica-map.test.ts ("... across a wall-clock step"). Times that are sent or shown (a move's startedAt, a sample's
// `at`) stay on the wall clock.
//
// The RouterView here has no coordinator (its address refuses connections, as one that is down): it serves with the
// copies the test gives it as its feed would (apply), since a real coordinator holds a slice frozen only for the few
// milliseconds of a move's switch, too short to step a clock into. The mover runs against real slice nodes, as
// slice-move-reassign.test.ts.
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SliceMover, Throttle } from '../coordinator/metadata/slice-mover.js';
import { withRetries } from '../coordinator/cli/cli-retry.js';
import { RouterView } from '../coordinator/router/router-view.js';
import { KeysliceError } from '../shared/errors.js';
import type { ClusterView } from '../shared/cluster-view.js';
import { ROUTER_REFRESH_INTERVAL_MS_MIN, WRONG_OWNER_RETRY_DELAY_MS_MIN } from '../shared/limits.js';
import { SliceOp, type SliceOpMessage } from '../shared/protocol.js';
import { freePort } from './procs.js';
import { useSliceNodePair } from './slice-node-pair.js';
import { stepWallClock } from './wall-clock.js';

const HOUR_MS = 3_600_000;
/** How long a wait that should end after a few ms (or at a copy) is given before the test says it did not: the
 * stepped-back clock would hold it an hour. */
const ENDS_WITHIN_MS = 2_000;

afterEach(() => vi.restoreAllMocks());

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** 'ended', or 'still waiting' once ENDS_WITHIN_MS passed. */
const endsSoon = (p: Promise<unknown>) => Promise.race([p.then(() => 'ended'), sleep(ENDS_WITHIN_MS).then(() => 'still waiting')]);

/** A router's view whose coordinator is down (its address a port just given up, freePort: it refuses connections), fed
 * copies by hand: `feed(epoch, frozen)` gives it the next version. */
async function routerView() {
  const view = new RouterView(`http://127.0.0.1:${await freePort()}`, 'secret', () => {});
  let version = 0;
  const feed = (epoch: number, frozen: number[]) => {
    const v: ClusterView = { incarnation: 'test', version: ++version, clusterId: 'c', epoch, sliceCount: 4, nodes: [], status: [], up: [], owners: [-1, -1, -1, -1], frozen, tables: [] };
    (view as unknown as { apply(v: ClusterView): void }).apply(v);
  };
  return { view, feed };
}

describe("a router's waits, across a wall-clock step", () => {
  it("a scan's wait for a frozen slice (ROUTER_FROZEN_WAIT_MS) does not end at once when the wall clock steps forward an hour", async () => {
    // A scan waits for slice 0's switch; the wall clock steps forward an hour meanwhile, and a newer copy comes with
    // the slice still frozen (the wait looks at its bound again). On Date.now()'s clock the bound was spent: the scan
    // was refused Unavailable ("being handed to another node") though the switch came a moment later.
    const { view, feed } = await routerView();
    try {
      feed(1, [0]);
      const waited = view.scanUnfrozen(0, 1).then(
        () => 'thawed',
        (err: Error) => `refused: ${err.message}`,
      );
      await sleep(20);
      stepWallClock(HOUR_MS);
      feed(2, [0]);
      await sleep(20);
      feed(3, []);
      expect(await waited, 'the scan, after the switch came').toBe('thawed');
    } finally {
      view.close();
    }
  });

  it('the wait for a newer map after a WrongOwner refusal ends after its delay when the wall clock steps back an hour', async () => {
    // Refused WrongOwner naming no epoch: the router waits for a map newer than its own, at most
    // wrongOwnerDelayMs(0) (WRONG_OWNER_RETRY_DELAY_MS_MIN), and none comes (its coordinator is down). The wall clock
    // steps back an hour as it starts: on Date.now()'s clock the wait's end was an hour away, and the op hung there.
    const { view, feed } = await routerView();
    try {
      feed(1, []);
      const started = performance.now();
      const waited = view.afterWrongOwner(0);
      stepWallClock(-HOUR_MS);
      expect(await endsSoon(waited), 'the wait for a newer map').toBe('ended');
      expect(performance.now() - started).toBeGreaterThanOrEqual(WRONG_OWNER_RETRY_DELAY_MS_MIN - 1);
    } finally {
      view.close();
    }
  });

  it('asks its coordinator again ROUTER_REFRESH_INTERVAL_MS_MIN after the last time, when the wall clock stepped back an hour', async () => {
    // The throttle of refresh (a WrongOwner's "ask the coordinator now"): on Date.now()'s clock a wall clock stepped
    // back an hour asked nothing for that hour, every wait for a newer map running out instead.
    const { view, feed } = await routerView();
    const asking = () => (view as unknown as { refreshing: Promise<void> | null }).refreshing !== null;
    try {
      feed(1, []);
      await view.refresh();
      stepWallClock(-HOUR_MS);
      await sleep(ROUTER_REFRESH_INTERVAL_MS_MIN + 20);
      void view.refresh();
      expect(asking(), `asked again ${ROUTER_REFRESH_INTERVAL_MS_MIN + 20} ms later`).toBe(true);
    } finally {
      view.close();
    }
  });
});

describe("keyslice import's and export's retry bound (IMPORT_RETRY_MS_MAX), across a wall-clock step", () => {
  it('a request refused ThroughputExceeded while the wall clock stepped forward an hour is sent again', async () => {
    // On Date.now()'s clock the bound was spent at the first refusal, and the command gave the line (or the export
    // its page) up at once.
    let tries = 0;
    const answer = await withRetries(async () => {
      if (tries++ > 0) return 'answered';
      stepWallClock(HOUR_MS);
      throw new KeysliceError('ThroughputExceeded', 'the slice is at its capacity');
    });
    expect(answer).toBe('answered');
    expect(tries).toBe(2);
  });
});

describe("a slice move's throttle and time bound, across a wall-clock step", () => {
  it('the copy throttle waits its share, not the step, when the wall clock steps back an hour', async () => {
    // 1,000 items a second: a step of 100 items books the next 100 ms. On Date.now()'s clock, stepped back an hour, the
    // booking stood an hour ahead and the next copy step waited that long.
    const throttle = new Throttle(1_000);
    await throttle.take(100);
    stepWallClock(-HOUR_MS);
    expect(await endsSoon(throttle.take(1)), "the next copy step's wait").toBe('ended');
  });

  const pair = useSliceNodePair('keyslice-clock-step-');

  it('a move is not rolled back as too long (MOVE_TIME_MS_MAX) when the wall clock steps forward an hour during its copy', async () => {
    // Two real slice nodes, the real NodeLink and ClusterMap; slice 0 moves from node 0 to node 1 and the wall clock
    // steps forward an hour as the copy starts. On the move's startedAt (Date.now()) it was rolled back at its next
    // step: "the move took longer than 600 s". Its startedAt stays the wall clock's (status sends it).
    const TABLE = 1;
    const SLICE = 0;
    const { map, links } = await pair.start();
    const [source] = links;
    for (let i = 0; i < 20; i++) await source.send(SLICE, [SliceOp.Put, TABLE, SLICE, `k-${i}`, { __name: `k-${i}`, v: i }, 20, null, null]);
    const sourceSend = source.send.bind(source);
    source.send = (<Op extends SliceOpMessage>(slice: number, op: Op) => {
      if (op[0] === SliceOp.MoveStart) stepWallClock(HOUR_MS);
      return sourceSend(slice, op);
    }) as typeof source.send;
    const mover = new SliceMover(map, links, new Throttle(0), () => {});
    const moved = await mover.move(SLICE, 1);
    expect(moved, `the move (last rollback: ${mover.lastError || 'none'})`).toBe(true);
    expect(map.ownerOf(SLICE)).toBe(1);
  }, 30_000);
});

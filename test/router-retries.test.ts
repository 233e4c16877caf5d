// Router's retry loop (router.ts sendLoop, scan) against answers that a real cluster gives only in a narrow order: a
// copy of a write whose outcome is unknown followed by resends that meet no ready leader until the failover bound runs
// out, or a map that changes while the router awaits a link it chose by the older map. Through the typed seam that
// slice-channel.ts leaves for an in-process cluster (as scan-plans.test.ts): a map (Routing) and nodes (SliceChannel)
// that answer as scripted; the process path of both is covered by routers, write-resend and unavailable-retries.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KeysliceError } from '../shared/errors.js';
import { FAILOVER_RETRIES_MAX } from '../shared/limits.js';
import { errorOfBatchError, SliceOp, staleBatchError, type ResultOf, type ScanResult, type SliceOpMessage, type StatsResult } from '../shared/protocol.js';
import { wrongOwnerWait } from '../shared/wrong-owner.js';
import type { Table } from '../coordinator/metadata/catalog.js';
import { gatherTableLoad } from '../coordinator/metadata/load-report.js';
import { Router, type ScanRequest } from '../coordinator/router/router.js';
import type { Routing } from '../coordinator/router/routing.js';
import type { SliceChannel } from '../coordinator/router/slice-channel.js';
import { stepWallClock } from './wall-clock.js';

const TABLE = 1;

/** A slice node that answers each op with the next of `answers` (an error is thrown; the last answer repeats). */
class Node implements SliceChannel {
  state: SliceChannel['state'] = 'ready';
  readonly workerCount = 1;
  sent = 0;
  /** Called as each op arrives, before it is answered: what changes while it is in flight. */
  onSend: () => void = () => {};

  constructor(
    readonly url: string,
    public answers: (KeysliceError | unknown)[],
  ) {}

  private next(): unknown {
    this.onSend();
    const a = this.answers[Math.min(this.sent++, this.answers.length - 1)];
    if (a instanceof KeysliceError) throw a;
    return a;
  }

  async send<Op extends SliceOpMessage>(): Promise<ResultOf<Op>> {
    return this.next() as ResultOf<Op>;
  }

  async sendToWorker<Op extends SliceOpMessage>(): Promise<ResultOf<Op>> {
    return this.next() as ResultOf<Op>;
  }
}

/** One node owns every slice; three replicas per slice (so writes carry request ids and failovers are waited out). */
class Cluster implements Routing {
  epoch = 1;
  readonly sliceCount = 4;
  readonly replicationFactor = 3;
  /** The `sentAt` each afterWrongOwner was given. */
  readonly wrongOwnerSentAt: (number | undefined)[] = [];
  /** The `nodeEpoch` each afterWrongOwner was given. */
  readonly wrongOwnerNodeEpoch: (number | undefined)[] = [];
  /** Called while the router awaits a link (linkReady): what changes meanwhile. */
  onLinkReady: () => void = () => {};

  constructor(readonly node: Node) {}

  linkOf(): Node {
    return this.node;
  }
  layout() {
    return { nodes: [this.node.url], owners: Array.from({ length: this.sliceCount }, () => 0) };
  }
  replicaLinks(): Node[] {
    return [this.node];
  }
  replicated(): boolean {
    return true;
  }
  presentLinks(): Node[] {
    return [this.node];
  }
  async scanUnfrozen(): Promise<void> {}
  async linkReady(): Promise<void> {
    this.onLinkReady();
  }
  async afterWrongOwner(_attempt: number, sentAt?: number, nodeEpoch?: number): Promise<void> {
    this.wrongOwnerSentAt.push(sentAt);
    this.wrongOwnerNodeEpoch.push(nodeEpoch);
  }
  async afterNoLeader(): Promise<void> {}
}

const put = (): SliceOpMessage & [typeof SliceOp.Put, ...unknown[]] => [SliceOp.Put, TABLE, 2, 'k', { id: 'k' }, 8, null, null];
const unknownOutcome = () => new KeysliceError('Unavailable', 'the leader lost its majority with the write in flight: outcome unknown');
const noLeader = () => new KeysliceError('Unavailable', 'slice 2 has no serving leader; retry later', { notApplied: true });
const wrongOwner = () => new KeysliceError('WrongOwner', 'slice 2 is not owned here at epoch 1');
/** A node's refusal of the batch for its epoch, as a router's link makes it of the BatchError (node protocol 26). */
const staleBatch = (nodeEpoch: number) => errorOfBatchError(staleBatchError(7, 1, nodeEpoch));

async function failure(p: Promise<unknown>): Promise<KeysliceError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(KeysliceError);
    return err as KeysliceError;
  }
  throw new Error('expected the op to fail');
}

describe("a router's failover bound", () => {
  it('spent on a write whose earlier copy had an unknown outcome: not notApplied, and says so', async () => {
    const node = new Node('n0', [unknownOutcome(), noLeader()]);
    const router = new Router(new Cluster(node));
    const err = await failure(router.send(put()));
    expect(node.sent).toBe(FAILOVER_RETRIES_MAX + 1);
    expect(err.code).toBe('Unavailable');
    expect(err.routerRetried).toBe(true);
    // The last try was refused unapplied, but the first copy may still commit under the next leader.
    expect(err.details?.notApplied).toBeUndefined();
    expect(err.message).toMatch(/earlier copy of this write had an unknown outcome/);
  });

  it('spent on tries that were all refused unapplied: notApplied', async () => {
    const node = new Node('n0', [noLeader()]);
    const err = await failure(new Router(new Cluster(node)).send(put()));
    expect(node.sent).toBe(FAILOVER_RETRIES_MAX + 1);
    expect(err.details).toEqual({ notApplied: true, routerRetried: true });
    expect(err.message).not.toMatch(/unknown outcome/);
  });
});

describe('a refusal waits for a map newer than the one that chose its link', () => {
  it('a write sent on a link awaited while the map moved', async () => {
    const node = new Node('n0', [wrongOwner(), null]);
    node.state = 'connecting';
    const c = new Cluster(node);
    c.onLinkReady = () => {
      c.epoch = 2; // the map moved while the link was awaited: the refused try was chosen at epoch 1
      node.state = 'ready';
    };
    await new Router(c).send(put());
    expect(node.sent).toBe(2);
    expect(c.wrongOwnerSentAt).toEqual([1]);
  });

  it('a scan page planned while the map moved', async () => {
    const page: ScanResult = [[], true, null];
    const node = new Node('n0', [wrongOwner(), page]);
    node.state = 'connecting';
    const c = new Cluster(node);
    c.onLinkReady = () => {
      c.epoch = 2;
      node.state = 'ready';
    };
    const r: ScanRequest = { tableId: TABLE, fromSlice: 0, afterKey: null, limit: 10, projection: null, filter: null, toSlice: c.sliceCount, packed: false };
    expect(await new Router(c).scan(r)).toEqual([page]);
    expect(c.wrongOwnerSentAt).toEqual([1]);
  });
});

describe("a refusal that names the node's epoch (BatchError's own field)", () => {
  it('is passed to the wait, for an op and for a scan page; a refusal of a slice not owned names none', async () => {
    const node = new Node('n0', [staleBatch(3), wrongOwner(), null]);
    const c = new Cluster(node);
    await new Router(c).send(put());
    expect(c.wrongOwnerNodeEpoch).toEqual([3, undefined]);
    const page: ScanResult = [[], true, null];
    const scanned = new Cluster(new Node('n0', [staleBatch(5), page]));
    const r: ScanRequest = { tableId: TABLE, fromSlice: 0, afterKey: null, limit: 10, projection: null, filter: null, toSlice: scanned.sliceCount, packed: false };
    expect(await new Router(scanned).scan(r)).toEqual([page]);
    expect(scanned.wrongOwnerNodeEpoch).toEqual([5]);
  });

  it('decides the wait: a map as new as a node ahead, at once at the node\'s epoch or once the map moved since the try, the node behind the try\'s map waited for, the coordinator asked from the second refusal on', () => {
    // wrongOwnerWait(map's epoch now, epoch the try was sent at, the node's, the op's refusals before this one)
    expect(wrongOwnerWait(4, 4, 9, 0), 'the map lags the node: a map that new, not the next one').toEqual({ reach: 9, ask: true });
    expect(wrongOwnerWait(5, 4, 5, 0), 'a map at the node\'s epoch came while the try was in flight').toBeNull();
    expect(wrongOwnerWait(6, 6, 5, 0), 'the node lags the map: nothing newer to ask for').toEqual({ reach: 7, ask: false });
    // From the op's second refusal on the coordinator is asked (rate-limited by the router): a router whose feed stalled
    // would otherwise spend the op's whole bound on refusals while the coordinator had the newer map.
    expect(wrongOwnerWait(6, 6, 5, 1), 'the node lags the map, a second time: asked').toEqual({ reach: 7, ask: true });
    expect(wrongOwnerWait(6, 6, 5, 5), 'and every time after').toEqual({ reach: 7, ask: true });
    // Chosen at 5, sent, refused by a node still at 5 with the map at 6: the map at 6 may route the op to another node
    // (a handover's new leader), so the next try goes at once rather than after the delay for a map at 7.
    expect(wrongOwnerWait(6, 5, 5, 0), 'the node lags the map that moved since the try was sent: at once').toBeNull();
    expect(wrongOwnerWait(7, 5, 6, 0), 'the node lags the map, and is past the try\'s: at once').toBeNull();
    // None named (a worker refused an op on a slice it does not own at the batch's epoch): a newer map, as before.
    expect(wrongOwnerWait(4, 4, undefined, 0)).toEqual({ reach: 5, ask: true });
    expect(wrongOwnerWait(5, 4, undefined, 0)).toBeNull();
  });
});

describe("a load report's refusal (load-report.ts gatherTableLoad)", () => {
  it('waits from the epoch its asks were sent at: a map that moved while they were in flight takes the next try at once', async () => {
    const stats: StatsResult = [[], [], [0, 0, 0, 0, 0, 0], [0, 0]];
    // The node is behind the map the asks were sent at (epoch 1) and refuses them for its epoch; meanwhile the map
    // moved to 2 (a handover's new leader, a move's switch), which may route the asks elsewhere.
    const node = new Node('n0', [staleBatch(0), stats]);
    const c = new Cluster(node);
    node.onSend = () => {
      if (node.sent === 0) c.epoch = 2;
    };
    const { failures } = await gatherTableLoad({ id: TABLE, name: 't' } as Table, c);
    expect(failures).toEqual([]);
    expect(node.sent).toBe(2);
    // Without it the wait's sentAt defaulted to the epoch after the try (2): wrongOwnerWait(2, 2, 0) waits for a map at 3.
    expect(c.wrongOwnerSentAt).toEqual([1]);
    expect(wrongOwnerWait(c.epoch, c.wrongOwnerSentAt[0]!, 0, 0), 'so the next try goes at once').toBeNull();
  });
});

describe("a router's retry bounds, across a wall-clock step (an NTP step, a VM resumed)", () => {
  afterEach(() => vi.restoreAllMocks());
  const HOUR_MS = 3_600_000;

  it('the failover bound counts by the monotonic clock: a wall clock stepped forward an hour during the first try does not spend it at once', async () => {
    // The node has no serving leader for the op's every try; the wall clock steps forward an hour while the first is
    // in flight. On Date.now()'s clock the bound (FAILOVER_RETRY_MS_MAX) was spent at the first refusal: one try,
    // "in 3600000 ms". By the monotonic one the router tries FAILOVER_RETRIES_MAX times more, as without the step.
    const node = new Node('n0', [noLeader()]);
    node.onSend = () => {
      if (node.sent === 0) stepWallClock(HOUR_MS);
    };
    const err = await failure(new Router(new Cluster(node)).send(put()));
    expect(err.code).toBe('Unavailable');
    expect(node.sent, `tries before the router gave up (${err.message})`).toBe(FAILOVER_RETRIES_MAX + 1);
  });

  it('the WrongOwner bound counts by the monotonic clock: a wall clock stepped forward an hour at the first refusal does not end the op WrongOwner', async () => {
    // Refused WrongOwner twice (a move's switch), then answered; the wall clock steps forward an hour while the first
    // try is in flight. On Date.now()'s clock WrongOwnerTries.again said no at the first refusal ("refused WrongOwner
    // 1 times in 3600000 ms"): a scan page likewise (its own WrongOwnerTries from the same start).
    const node = new Node('n0', [wrongOwner(), wrongOwner(), null]);
    node.onSend = () => {
      if (node.sent === 0) stepWallClock(HOUR_MS);
    };
    await new Router(new Cluster(node)).send(put());
    expect(node.sent).toBe(3);
    vi.restoreAllMocks();
    const page: ScanResult = [[], true, null];
    const scanned = new Node('n0', [wrongOwner(), page]);
    scanned.onSend = () => {
      if (scanned.sent === 0) stepWallClock(HOUR_MS);
    };
    const c = new Cluster(scanned);
    const r: ScanRequest = { tableId: TABLE, fromSlice: 0, afterKey: null, limit: 10, projection: null, filter: null, toSlice: c.sliceCount, packed: false };
    expect(await new Router(c).scan(r)).toEqual([page]);
  });
});

// A router keeps, per scan range, which worker it asks for which slices (Router.scanAsks, router.ts): built from the
// map once per epoch, used while the map's epoch, each asked node's link and its worker count stay as they were, and
// built again after any refusal; at most SCAN_PLANS_BYTES_MAX of them. Through the typed seam that slice-channel.ts
// leaves for an in-process cluster: a map (Routing) that counts the owners it is asked for, and nodes (SliceChannel)
// whose workers are the real partitions (SliceStore), which refuse a Scan naming a slice they do not own, as a slice
// node's do. The process path (routers, nodes, moves) is covered by routers, scan-owner-change and range.
import { describe, expect, it } from 'vitest';
import { workerOf } from '../shared/hashing.js';
import { KeysliceError, type ErrorCode } from '../shared/errors.js';
import { SCAN_ASK_OVERHEAD_BYTES, SCAN_PLAN_OVERHEAD_BYTES, SCAN_PLANS_BYTES_MAX } from '../shared/limits.js';
import { RESULT_OK, SliceOp, type ResultOf, type ScanResult, type SliceOpMessage } from '../shared/protocol.js';
import { itemBytes, type Item } from '../shared/values.js';
import { SliceStore } from '../slice-worker/partition.js';
import { Router, type ScanRequest } from '../coordinator/router/router.js';
import type { Routing } from '../coordinator/router/routing.js';
import type { SliceChannel } from '../coordinator/router/slice-channel.js';

const TABLE = 1;

/** A slice node of `workerCount` partitions. */
class Node implements SliceChannel {
  state: SliceChannel['state'] = 'ready';
  stores: SliceStore[] = [];
  /** Scans asked of it, and those its workers refused. */
  asked = 0;
  refused = 0;

  constructor(
    readonly url: string,
    public workerCount: number,
  ) {
    this.restart(workerCount);
  }

  /** Back with `workerCount` workers and nothing in them (the map assigns and fills them again). */
  restart(workerCount: number): void {
    this.workerCount = workerCount;
    this.stores = Array.from({ length: workerCount }, (_, w) => new SliceStore(w, workerCount, () => 1_764_000_000_000));
  }

  send<Op extends SliceOpMessage>(): Promise<ResultOf<Op>> {
    throw new Error('a scan asks workers, not slices');
  }

  async sendToWorker<Op extends SliceOpMessage>(worker: number, op: Op): Promise<ResultOf<Op>> {
    this.asked++;
    const r = this.stores[worker].execute(op);
    if (r[0] === RESULT_OK) return r[1] as ResultOf<Op>;
    this.refused++;
    throw new KeysliceError(r[1] as ErrorCode, r[2] as string);
  }
}

/** The cluster map: slice -> node, an epoch, and the items it places on the owners' workers. */
class Cluster implements Routing {
  epoch = 1;
  readonly replicationFactor = 1;
  /** Owners read (linkOf): what building a plan costs, slice by slice. */
  ownerReads = 0;
  readonly owners: number[];

  constructor(
    readonly sliceCount: number,
    public nodes: Node[],
    readonly itemsPerSlice: number,
  ) {
    // Pairs of slices to each node in turn, so that every worker of a node owns some.
    this.owners = Array.from({ length: sliceCount }, (_, s) => (s >> 1) % nodes.length);
    this.assign();
  }

  /** Every worker gets the slices the map gives it, at the map's epoch, and holds their items. */
  assign(): void {
    this.nodes.forEach((node, n) => {
      node.stores.forEach((store, w) => {
        const mine = this.owners.flatMap((o, s) => (o === n && workerOf(s, node.workerCount) === w ? [s] : []));
        expect(store.execute([SliceOp.Assign, this.epoch, mine])[0]).toBe(RESULT_OK);
        for (const s of mine) {
          for (let i = 0; i < this.itemsPerSlice; i++) {
            const item: Item = { id: `s${s}-${i}` };
            expect(store.execute([SliceOp.Put, TABLE, s, `k${String(i).padStart(4, '0')}`, item, itemBytes(item), null, null])[0]).toBe(RESULT_OK);
          }
        }
      });
    });
  }

  linkOf(slice: number): Node {
    this.ownerReads++;
    return this.nodes[this.owners[slice]];
  }
  layout() {
    return { nodes: this.nodes.map((n) => n.url), owners: [...this.owners] };
  }
  replicaLinks(slice: number): Node[] {
    return [this.linkOf(slice)];
  }
  replicated(): boolean {
    return false;
  }
  presentLinks(): Node[] {
    return this.nodes;
  }
  async scanUnfrozen(): Promise<void> {}
  async linkReady(): Promise<void> {}
  async afterWrongOwner(): Promise<void> {}
  async afterNoLeader(): Promise<void> {}
}

const scanOf = (fromSlice: number, toSlice: number, limit = 10_000): ScanRequest => ({ tableId: TABLE, fromSlice, afterKey: null, limit, projection: null, filter: null, toSlice, packed: false });
/** The ids of a scan's items, sorted. */
const idsOf = (results: ScanResult[]) => results.flatMap(([entries]) => entries.map((e) => (e[2] as Item).id as string)).sort();
const allIds = (c: Cluster, from = 0, to = c.sliceCount) =>
  Array.from({ length: to - from }, (_, k) => Array.from({ length: c.itemsPerSlice }, (_, i) => `s${from + k}-${i}`)).flat().sort();
const refusals = (c: Cluster) => c.nodes.reduce((n, node) => n + node.refused, 0);

describe("a router's scan plans", () => {
  it('read the owner of every slice of a range once per epoch; a page of a kept range reads one per node', async () => {
    const c = new Cluster(64, [new Node('n0', 2), new Node('n1', 2)], 2);
    const router = new Router(c);
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(c.ownerReads).toBe(64 + 0);
    for (let page = 0; page < 5; page++) expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(c.ownerReads).toBe(64 + 5 * 2);
    // Another range (a segment) is a plan of its own.
    expect(idsOf(await router.scan(scanOf(16, 32)))).toEqual(allIds(c, 16, 32));
    expect(c.ownerReads).toBe(64 + 5 * 2 + 16);
    expect(c.nodes.map((n) => n.asked)).toEqual([2 * 6 + 2, 2 * 6 + 2]);
  });

  it('are built again at a new epoch: a page after a slice moved asks its new owner, and nobody refuses', async () => {
    const c = new Cluster(64, [new Node('n0', 2), new Node('n1', 2)], 2);
    const router = new Router(c);
    await router.scan(scanOf(0, 64));
    c.owners[5] = 1 - c.owners[5];
    c.owners[8] = 1 - c.owners[8];
    c.epoch++;
    c.assign();
    const reads = c.ownerReads;
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(refusals(c)).toBe(0);
    expect(c.ownerReads - reads).toBe(64);
  });

  it("are built again when a node is back with another worker count at the same epoch: its new workers are asked, and nobody refuses", async () => {
    const c = new Cluster(64, [new Node('n0', 2), new Node('n1', 2)], 2);
    const router = new Router(c);
    await router.scan(scanOf(0, 64));
    c.nodes[1].restart(3); // a NodeLink's worker count changes with the node's Hello, not the map
    c.assign();
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(refusals(c)).toBe(0);
  });

  it('are built again when a node\'s link is replaced at the same epoch: the new link is asked, the old one not', async () => {
    const c = new Cluster(64, [new Node('n0', 2), new Node('n1', 2)], 2);
    const router = new Router(c);
    await router.scan(scanOf(0, 64));
    const old = c.nodes[1];
    c.nodes = [c.nodes[0], new Node('n1', 2)]; // a router's view names another link for node 1 (RouterView.apply)
    c.assign();
    const asked = old.asked;
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(old.asked).toBe(asked);
    expect(c.nodes[1].asked).toBe(2);
  });

  it('kept past a change the epoch missed (another map at the same epoch) cost one refusal and a rebuild, never a slice', async () => {
    const c = new Cluster(64, [new Node('n0', 2), new Node('n1', 2)], 2);
    const router = new Router(c);
    await router.scan(scanOf(0, 64));
    // Two slices change nodes, and no new epoch; not the first slice of either node in the range (what a kept plan
    // checks of each link, so that a link replaced is seen).
    [c.owners[4], c.owners[6]] = [c.owners[6], c.owners[4]];
    c.assign();
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(refusals(c)).toBeGreaterThan(0);
    const refused = refusals(c);
    expect(idsOf(await router.scan(scanOf(0, 64)))).toEqual(allIds(c));
    expect(refusals(c)).toBe(refused);
  });

  it(`keep at most SCAN_PLANS_BYTES_MAX (${SCAN_PLANS_BYTES_MAX} bytes) of plans, the oldest dropped first`, async () => {
    // Ranges of two slices of one node, one on each of its workers: a plan counts two SliceSets of one byte, the
    // overhead of two asks and of the plan. Built, it reads two owners; kept, one (its node's first slice).
    const perPlan = 2 * (1 + SCAN_ASK_OVERHEAD_BYTES) + SCAN_PLAN_OVERHEAD_BYTES;
    const fit = Math.floor(SCAN_PLANS_BYTES_MAX / perPlan);
    const ranges = fit + 500;
    const c = new Cluster(2 * ranges, [new Node('n0', 2), new Node('n1', 2)], 0);
    const router = new Router(c);
    const range = (k: number) => scanOf(2 * k, 2 * k + 2);
    for (let k = 0; k < ranges; k++) await router.scan(range(k));
    expect(c.ownerReads).toBe(2 * ranges);
    // The last `fit` ranges are kept; the first ones were dropped for them, and are built again.
    await router.scan(range(ranges - 1));
    await router.scan(range(ranges - fit));
    expect(c.ownerReads).toBe(2 * ranges + 2);
    await router.scan(range(0));
    expect(c.ownerReads).toBe(2 * ranges + 2 + 2);
    expect(refusals(c)).toBe(0);
  });
});

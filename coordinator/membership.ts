// Membership and rebalancing. Slice nodes register (POST /cluster/join with the
// cluster secret) and repeat it as a heartbeat; the coordinator dials each one
// (coordinator/node-link.ts). When a node joins or an operator drains one, the
// rebalancer plans slice moves so that every active node owns its share, and
// runs a few at a time (coordinator/slice-mover.ts). The cluster map stays the
// coordinator's alone.
import type { NodeStatusReport, ClusterStatus } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { MOVE_RETRY_DELAY_MS, MOVES_IN_FLIGHT_MAX, NODE_HEARTBEAT_TIMEOUT_MS } from '../shared/limits.js';
import type { ClusterMap } from './cluster-map.js';
import { tableLoad } from './load-report.js';
import type { Catalog } from './catalog.js';
import { NodeLink } from './node-link.js';
import { SliceMover, Throttle } from './slice-mover.js';

const NODE_URL = /^wss?:\/\/[^/\s]+$/;
const REBALANCE_INTERVAL_MS = 500;

export class Membership {
  /** links[i] talks to map.nodes[i]; a removed node's link is closed. */
  readonly links: NodeLink[] = [];
  readonly mover: SliceMover;
  private readonly lastHeartbeat = new Map<number, number>();
  /** Nodes that failed a move recently, and until when the rebalancer leaves them be. */
  private readonly backoffUntil = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private running = 0;

  constructor(
    readonly map: ClusterMap,
    private readonly catalog: Catalog,
    private readonly clusterSecret: string,
    itemsPerSecond: number,
    private readonly autoRebalance: boolean,
    private readonly log: (line: string) => void,
  ) {
    map.nodes.forEach((url, i) => this.links.push(this.newLink(url, i)));
    this.mover = new SliceMover(map, this.links, new Throttle(itemsPerSecond), log);
    this.timer = setInterval(() => this.rebalance(), REBALANCE_INTERVAL_MS);
    this.timer.unref();
  }

  private newLink(url: string, index: number): NodeLink {
    const link = new NodeLink(
      url,
      () => ({ epoch: this.map.epoch, sliceCount: this.map.sliceCount, slices: this.map.slicesOf(index) }),
      () => this.map.epoch,
      this.log,
      this.clusterSecret,
    );
    if (this.map.statusOf(index) === 'removed') link.close();
    return link;
  }

  /** The link of the node that owns `slice`, or null while no node has joined. */
  linkOf(slice: number): NodeLink | null {
    const owner = this.map.ownerOf(slice);
    return owner < 0 ? null : this.links[owner];
  }

  /** Links of the nodes that are part of the cluster (not removed). */
  presentLinks(): NodeLink[] {
    return this.links.filter((_, i) => this.map.statusOf(i) !== 'removed');
  }

  /** A node registers or heartbeats. */
  join(url: unknown): { node: string; epoch: number } {
    const u = checkUrl(url);
    let index = this.map.indexOf(u);
    if (index >= 0 && this.map.statusOf(index) === 'removed') {
      throw new KeysliceError('InvalidState', `node ${u} was removed; an operator adds it again with "keyslice add ${u}"`);
    }
    if (index < 0) index = this.add(u);
    this.lastHeartbeat.set(index, Date.now());
    return { node: u, epoch: this.map.epoch };
  }

  /** Operator: adds a node by address (it need not heartbeat). */
  add(url: unknown): number {
    const u = checkUrl(url);
    const before = this.map.indexOf(u);
    const index = this.map.addNode(u);
    if (before < 0) {
      this.links.push(this.newLink(u, index));
      this.log(`node ${u} joined (node ${index}); ${this.map.slicesOf(index).length} slices without a node went to it`);
    } else if (this.links[index].state === 'closed') {
      this.links[index] = this.newLink(u, index);
      this.log(`node ${u} added again`);
    }
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.rebalance();
    return index;
  }

  /** Operator: moves every slice of the node away; it stays a member until removed. */
  drain(url: unknown): void {
    const index = this.indexOf(url);
    if (this.map.statusOf(index) === 'draining') return;
    const others = this.map.nodes.filter((_, i) => i !== index && this.map.statusOf(i) === 'active');
    if (others.length === 0) throw new KeysliceError('InvalidState', `node ${this.map.nodes[index]} is the only active node; its slices have nowhere to go`);
    this.map.setStatus(index, 'draining');
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.log(`draining node ${this.map.nodes[index]} (${this.map.slicesOf(index).length} slices)`);
    this.rebalance();
  }

  /** Operator: forgets a node that owns no slice (drain it first). */
  remove(url: unknown): void {
    const index = this.indexOf(url);
    const owned = this.map.slicesOf(index).length;
    if (owned > 0) throw new KeysliceError('InvalidState', `node ${this.map.nodes[index]} still owns ${owned} slices; drain it first (keyslice drain)`);
    this.map.setStatus(index, 'removed');
    this.links[index].close();
    this.lastHeartbeat.delete(index);
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.log(`node ${this.map.nodes[index]} removed`);
  }

  private indexOf(url: unknown): number {
    const u = checkUrl(url);
    const index = this.map.indexOf(u);
    if (index < 0 || this.map.statusOf(index) === 'removed') throw new KeysliceError('ValidationError', `no node ${u} in this cluster`);
    return index;
  }

  /** A node is up when its link is ready and, if it heartbeats, its last heartbeat is recent. */
  private isUp(index: number): boolean {
    if (this.links[index].state !== 'ready') return false;
    const beat = this.lastHeartbeat.get(index);
    return beat === undefined || Date.now() - beat < NODE_HEARTBEAT_TIMEOUT_MS;
  }

  /** Starts moves until MOVES_IN_FLIGHT_MAX run: first every slice of a draining node,
   * then from the node with the most slices to the one with the fewest while they
   * differ by more than one. Nodes that are down are counted but not moved to or from. */
  rebalance(): void {
    if (!this.autoRebalance && !this.map.nodes.some((_, i) => this.map.statusOf(i) === 'draining')) return;
    const now = Date.now();
    const usable = (i: number) => this.isUp(i) && (this.backoffUntil.get(i) ?? 0) <= now;
    for (let guard = 0; guard < MOVES_IN_FLIGHT_MAX && this.running < MOVES_IN_FLIGHT_MAX; guard++) {
      const counts = this.map.counts();
      // Slices already moving count at their destination.
      for (const m of this.mover.moving.values()) {
        counts[this.map.indexOf(m.from)]--;
        counts[this.map.indexOf(m.to)]++;
      }
      const targets = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active' && usable(i));
      if (targets.length === 0) return;
      const lightest = targets.reduce((a, b) => (counts[b] < counts[a] ? b : a));
      let source = -1;
      for (let i = 0; i < counts.length; i++) {
        if (this.map.statusOf(i) === 'draining' && counts[i] > 0 && usable(i)) source = i;
      }
      if (source < 0) {
        const sources = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active' && usable(i));
        const heaviest = sources.reduce((a, b) => (counts[b] > counts[a] ? b : a), sources[0]);
        if (!this.autoRebalance || heaviest === undefined || counts[heaviest] - counts[lightest] <= 1) return;
        source = heaviest;
      }
      const slice = this.map.slicesOf(source).find((s) => !this.mover.moving.has(s));
      if (slice === undefined) return;
      this.running++;
      void this.mover.move(slice, lightest).then((moved) => {
        this.running--;
        if (!moved) {
          this.backoffUntil.set(source, Date.now() + MOVE_RETRY_DELAY_MS);
          this.backoffUntil.set(lightest, Date.now() + MOVE_RETRY_DELAY_MS);
        }
        this.rebalance();
      });
    }
  }

  /** Nodes, slices per node, items/bytes/load per node (when every node answers; not
   * asked for when `withLoad` is false, e.g. by the studio, which has every table's load), moves. */
  async status(withLoad = true): Promise<ClusterStatus> {
    const counts = this.map.counts();
    const nodes: NodeStatusReport[] = this.map.nodes.map((url, i) => ({
      node: url,
      status: this.map.statusOf(i),
      up: this.map.statusOf(i) !== 'removed' && this.isUp(i),
      heartbeatMsAgo: this.lastHeartbeat.has(i) ? Date.now() - this.lastHeartbeat.get(i)! : null,
      workers: this.links[i].workerCount,
      slices: counts[i],
      items: 0,
      bytes: 0,
      readsPerSecond: 0,
      writesPerSecond: 0,
    }));
    let loadComplete = true;
    for (const name of withLoad ? this.catalog.names() : []) {
      try {
        const load = await tableLoad(this.catalog.get(name), this.presentLinks(), this.map.sliceCount);
        for (const n of load.nodes) {
          const r = nodes.find((x) => x.node === n.node)!;
          r.items += n.items;
          r.bytes += n.bytes;
          r.readsPerSecond += n.readsPerSecond;
          r.writesPerSecond += n.writesPerSecond;
        }
      } catch {
        loadComplete = false;
      }
    }
    const unassigned = counts.length === 0 ? this.map.sliceCount : this.map.sliceCount - counts.reduce((a, b) => a + b, 0);
    return {
      epoch: this.map.epoch,
      sliceCount: this.map.sliceCount,
      unassignedSlices: unassigned,
      loadComplete,
      nodes: nodes.filter((n) => n.status !== 'removed'),
      moves: {
        inFlight: [...this.mover.moving.values()],
        completed: this.mover.completed,
        failed: this.mover.failed,
        itemsMoved: this.mover.itemsMoved,
        lastError: this.mover.lastError,
        pending: this.pendingMoves(counts),
      },
    };
  }

  /** Moves still to make (a rough count: draining slices plus the excess over an even share). */
  private pendingMoves(counts: number[]): number {
    const active = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active');
    if (active.length === 0) return 0;
    let pending = 0;
    const share = Math.ceil(this.map.sliceCount / active.length);
    counts.forEach((c, i) => {
      if (this.map.statusOf(i) === 'draining') pending += c;
      else if (this.map.statusOf(i) === 'active' && this.autoRebalance) pending += Math.max(0, c - share);
    });
    return pending;
  }

  close(): void {
    clearInterval(this.timer);
    for (const l of this.links) l.close();
  }
}

function checkUrl(url: unknown): string {
  if (typeof url !== 'string' || !NODE_URL.test(url)) throw new KeysliceError('ValidationError', `a node address is ws://host:port; got ${JSON.stringify(url)}`);
  return url;
}

// A router's read-only copy of the catalog and the cluster map, fed by the
// coordinator (GET /cluster/feed, a long poll: metadata/feed.ts), and its own
// links to the slice nodes (node-link.ts without Assign). It routes by the copy;
// a batch the nodes refuse WrongOwner (they moved on to a newer map) makes it ask
// the coordinator at once and wait, bounded, for the newer epoch before the op is
// sent again. When the coordinator cannot be reached the copy stays in use: the
// router keeps serving reads and writes with the map it has, and says so.
import { performance } from 'node:perf_hooks';
import type { ClusterView } from '../../shared/cluster-view.js';
import { KeysliceError } from '../../shared/errors.js';
import {
  ROUTER_FEED_RETRY_MS,
  ROUTER_FEED_TIMEOUT_MS,
  ROUTER_FROZEN_WAIT_MS,
  ROUTER_LINK_FIRST_WAIT_MS,
  ROUTER_REFRESH_INTERVAL_MS_MIN,
  LEADER_HEARTBEAT_TIMEOUT_MS_MIN,
} from '../../shared/limits.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER } from '../../shared/protocol.js';
import { failoverDelayMs } from '../../shared/timeout.js';
import { wrongOwnerDelayMs, wrongOwnerWait } from '../../shared/wrong-owner.js';
import { tableNamed, withColumns, type Table } from '../metadata/catalog.js';
import { NodeLink } from '../metadata/node-link.js';
import type { Routing, TableSource } from './routing.js';
import type { SliceChannel } from './slice-channel.js';

export class RouterView implements Routing, TableSource {
  private view: ClusterView | null = null;
  private tables = new Map<string, Table>();
  /** links[i] talks to view.nodes[i] (null: removed). */
  private links: (NodeLink | null)[] = [];
  /** upSince[i]: when the view last said that the coordinator reaches node i again (performance.now()'s clock, as the
   * link's lostAt it is compared with; 0: it does not). */
  private upSince: number[] = [];
  private waiters: (() => void)[] = [];
  private closed = false;
  /** Whether the map poll's last request was answered, and since when it was not: the poll alone says, so that a
   * poll that keeps failing (a proxy that times out held requests) is not hidden by refreshes that get through. */
  coordinatorUp = false;
  /** performance.now()'s clock: /health shows how long ago (coordinatorLostMsAgo), not when. */
  lostSince: number | null = null;
  private lastProblem = '';
  private refreshing: Promise<void> | null = null;
  private lastRefreshAt = -Infinity;
  private polling: AbortController | null = null;

  constructor(
    readonly coordinatorUrl: string,
    private readonly clusterSecret: string,
    private readonly log: (line: string) => void,
  ) {
    void this.pollLoop();
  }

  /** Resolves once the first copy has arrived. */
  async ready(): Promise<void> {
    while (this.view === null && !this.closed) await this.changed(1_000);
  }

  get epoch(): number {
    return this.view?.epoch ?? 0;
  }
  get version(): number {
    return this.view?.version ?? 0;
  }

  // ---- Routing ---------------------------------------------------------------

  get sliceCount(): number {
    return this.current().sliceCount;
  }

  layout(): { nodes: string[]; owners: number[] } {
    const v = this.current();
    return { nodes: [...v.nodes], owners: [...v.owners] };
  }

  linkOf(slice: number): NodeLink | null {
    const owner = this.current().owners[slice];
    return owner < 0 ? null : this.links[owner];
  }

  replicated(slice: number): boolean {
    const v = this.current();
    if (v.owners[slice] < 0) return false;
    let n = this.links[v.owners[slice]] ? 1 : 0;
    for (const node of v.followers?.[slice] ?? []) if (this.links[node]) n++;
    return n > 1;
  }

  replicaLinks(slice: number): NodeLink[] {
    const v = this.current();
    const owner = v.owners[slice];
    if (owner < 0) return [];
    const out: NodeLink[] = [];
    for (const node of [owner, ...(v.followers?.[slice] ?? [])]) {
      const link = this.links[node];
      if (link !== undefined && link !== null) out.push(link);
    }
    return out;
  }

  presentLinks(): NodeLink[] {
    return this.links.filter((l): l is NodeLink => l !== null);
  }

  /** Waits, at most ROUTER_FROZEN_WAIT_MS by the monotonic clock, for no slice of [from, to) to be frozen. On
   * Date.now()'s a wall clock stepped forward (an NTP step, a VM resumed) ended the wait at once (the scan refused),
   * and stepped back held it for the step, unless a copy came. */
  async scanUnfrozen(from: number, to: number): Promise<void> {
    const until = performance.now() + ROUTER_FROZEN_WAIT_MS;
    // A frozen slice is owned by no worker until the switch, which comes as a newer copy.
    while (this.current().frozen.some((s) => s >= from && s < to)) {
      if (performance.now() >= until) throw new KeysliceError('Unavailable', `a slice of this scan is being handed to another node; retry`);
      await this.changed(until - performance.now());
    }
  }

  /** A node this router has not reached yet since it started (its link was never ready), or one that the coordinator
   * reached again after this link lost it (it came back; the link is still in its back-off), is waited for, bounded;
   * one that is down (for the coordinator too, or not yet known to be down there) answers Unavailable at once.
   * Reached means ready, not greeted: a node that just joined greets this link as soon as it took the coordinator's
   * Assign, before the coordinator has its Assigned and the map says it is up, and the link is ready only once it
   * opened the node's batch ports too (a few hundred ms under load); a request meanwhile waits for it. */
  async linkReady(channel: SliceChannel): Promise<void> {
    if (channel.state === 'ready' || channel.state === 'closed') return;
    const i = this.links.findIndex((l) => l === channel);
    const link = this.links[i];
    if (link === undefined || link === null) return; // not one of this view's links: closed
    // A link not ready now that ever was lost it at lostAt (performance.now(), so above 0); one never ready has 0.
    const reached = link.lostAt > 0;
    const back = this.view?.up?.[i] === true && (this.upSince[i] ?? 0) > link.lostAt;
    if (reached && !back) return;
    link.reconnectNow();
    await link.waitReady(ROUTER_LINK_FIRST_WAIT_MS);
  }

  get replicationFactor(): number {
    return this.view?.replicationFactor ?? 1;
  }

  afterNoLeader(attempt: number): Promise<void> {
    return this.epochReaches(this.epoch + 1, failoverDelayMs(attempt), true);
  }

  afterWrongOwner(attempt: number, sentAt = this.epoch, nodeEpoch?: number): Promise<void> {
    const wait = wrongOwnerWait(this.epoch, sentAt, nodeEpoch, attempt);
    return wait === null ? Promise.resolve() : this.epochReaches(wait.reach, wrongOwnerDelayMs(attempt), wait.ask);
  }

  /** Waits until this copy's epoch reaches `epoch` or `ms` passed (by the monotonic clock); at once when it already
   * has (a newer copy came while the try that waits was in flight: it goes again by that copy). `ask`: asks the
   * coordinator for a newer map first. (A copy's epoch only grows: apply ignores an older one.) */
  private async epochReaches(epoch: number, ms: number, ask: boolean): Promise<void> {
    if (this.epoch >= epoch) return;
    if (ask) void this.refresh();
    const until = performance.now() + ms;
    while (this.epoch < epoch && performance.now() < until) await this.changed(until - performance.now());
  }

  // ---- TableSource -----------------------------------------------------------

  get(name: unknown): Table {
    return tableNamed(this.tables, name);
  }

  names(): string[] {
    return [...this.tables.keys()].sort();
  }

  // ---- the feed --------------------------------------------------------------

  /** Asks the coordinator for its copy now (after a WrongOwner, or a forwarded change);
   * coalesced, and at most once per ROUTER_REFRESH_INTERVAL_MS_MIN (monotonic: on Date.now()'s clock a wall clock
   * stepped back asked nothing for the step, the router's waits for a newer map all running out) unless `force`. */
  refresh(force = false): Promise<void> {
    if (this.refreshing !== null) return this.refreshing;
    if (!force && performance.now() - this.lastRefreshAt < ROUTER_REFRESH_INTERVAL_MS_MIN) return Promise.resolve();
    this.lastRefreshAt = performance.now();
    this.refreshing = this.fetchView(false)
      .then((v) => this.apply(v))
      .catch(() => {})
      .finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  close(): void {
    this.closed = true;
    this.polling?.abort();
    for (const l of this.links) l?.close();
    for (const w of this.waiters.splice(0)) w();
  }

  private current(): ClusterView {
    if (this.view === null) throw new KeysliceError('Unavailable', 'this router has no copy of the cluster map yet; retry later');
    return this.view;
  }

  /** Resolves at the next applied copy, or after `ms`. */
  private changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      const self = this;
      function done() {
        clearTimeout(timer);
        const i = self.waiters.indexOf(done);
        if (i >= 0) self.waiters.splice(i, 1);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  /** The first poll after a failure is not held (answered at once, even with nothing newer than our copy, which a
   * refresh may have taken meanwhile): the router says 'connected' at the coordinator's first answer, then holds. */
  private async pollLoop(): Promise<void> {
    while (!this.closed) {
      try {
        this.apply(await this.fetchView(this.coordinatorUp, true));
        if (!this.coordinatorUp) this.log(`coordinator ${this.coordinatorUrl} reached: map epoch ${this.epoch}, ${this.tables.size} tables`);
        this.coordinatorUp = true;
        this.lostSince = null;
        this.lastProblem = '';
      } catch (err) {
        if (this.closed) return;
        const problem = (err as Error).message;
        if (this.coordinatorUp || problem !== this.lastProblem) {
          this.log(`coordinator ${this.coordinatorUrl} not reachable (${problem}); serving with map epoch ${this.epoch}, no table or membership changes until it is back`);
        }
        if (this.coordinatorUp || this.lostSince === null) this.lostSince = performance.now();
        this.coordinatorUp = false;
        this.lastProblem = problem;
        await new Promise((r) => setTimeout(r, ROUTER_FEED_RETRY_MS));
      }
    }
  }

  /** One feed request: `hold` waits for a change newer than our copy; `poll`: the map poll's (aborted by close). */
  private async fetchView(hold: boolean, poll = false): Promise<ClusterView> {
    const q = hold && this.view !== null ? `?after=${this.view.version}&incarnation=${this.view.incarnation}` : '';
    const abort = new AbortController();
    if (poll) this.polling = abort;
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${ROUTER_FEED_TIMEOUT_MS} ms`)), ROUTER_FEED_TIMEOUT_MS);
    try {
      const res = await fetch(`${this.coordinatorUrl}${CLUSTER_API_PREFIX}feed${q}`, { headers: { [CLUSTER_SECRET_HEADER]: this.clusterSecret }, signal: abort.signal });
      const body = (await res.json()) as ClusterView & { error?: { code: string; message: string } };
      if (res.status !== 200) throw new Error(`${body.error?.code ?? res.status}: ${body.error?.message ?? ''}`);
      return body;
    } catch (err) {
      const cause = (err as Error & { cause?: Error }).cause;
      throw new Error(cause?.message ?? (err as Error).message);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Takes a copy that is newer than ours (or from a restarted coordinator). */
  private apply(v: ClusterView): void {
    const old = this.view;
    if (old !== null && old.incarnation === v.incarnation && v.version <= old.version) return;
    // The coordinator persists the map before using it, so a restarted one never goes back.
    if (old !== null && old.clusterId === v.clusterId && v.epoch < old.epoch) {
      this.log(`ignored a map at epoch ${v.epoch}, older than this router's ${old.epoch}`);
      return;
    }
    // A replicated slice led elsewhere now: its old leader's node lost an election, most likely because
    // it stopped answering (frozen); what this router still waits for from it is given up (outcome unknown)
    // rather than held for the whole request timeout.
    const deposed = new Set<number>();
    if (old !== null && (v.replicationFactor ?? 1) > 1 && old.nodes.length <= v.nodes.length) {
      old.owners.forEach((o, s) => o >= 0 && v.owners[s] !== o && deposed.add(o));
    }
    this.view = v;
    for (const node of deposed) this.links[node]?.abandonInFlight(LEADER_HEARTBEAT_TIMEOUT_MS_MIN, 'lost the leadership of slices to an election');
    this.tables = new Map(v.tables.map((t) => [t.name, withColumns(t)]));
    v.nodes.forEach((url, i) => {
      const link = this.links[i];
      const up = v.up?.[i] === true;
      if (!up) this.upSince[i] = 0;
      else if (!(this.upSince[i] > 0)) {
        this.upSince[i] = performance.now();
        // The coordinator reaches the node again: no need to wait out this link's back-off.
        if (link !== undefined && link !== null && link.url === url) link.reconnectNow();
      }
      if (v.status[i] === 'removed') {
        link?.close();
        this.links[i] = null;
      } else if (link === undefined || link === null || link.url !== url) {
        link?.close();
        this.links[i] = new NodeLink(url, null, () => this.epoch, this.log, this.clusterSecret, (hello) => this.admit(url, hello.clusterId));
      }
    });
    for (const w of this.waiters.slice()) w();
  }

  private admit(url: string, clusterId: string | null): string | null {
    const mine = this.view?.clusterId;
    if (clusterId === mine) return null;
    if (clusterId === null) return `slice node ${url} has not been assigned its slices by the coordinator yet`;
    return `slice node ${url} belongs to cluster ${clusterId}, not ${mine}`;
  }
}

// The routers' feed: GET /cluster/feed?after=<version>&incarnation=<id> (with the
// cluster secret) answers the catalog and cluster map (shared/cluster-view.ts) at
// once when the caller's copy is older or from another coordinator process, else
// when the next change is in force, else after ROUTER_FEED_HOLD_MS (a long poll:
// one request open per router, no extra port, no second WebSocket server on the
// client port). A change is answered once the turn of the event loop that made it
// has ended, so that a move's switch (new owner, epoch, thaw) goes out as one view.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { ClusterView } from '../../shared/cluster-view.js';
import { ROUTER_FEED_HOLD_MS } from '../../shared/limits.js';
import type { Catalog } from './catalog.js';
import type { ClusterMap } from './cluster-map.js';
import type { Membership } from './membership.js';

type Waiter = { res: ServerResponse; timer: NodeJS.Timeout };

export class ClusterFeed {
  readonly incarnation = randomBytes(8).toString('hex');
  private version = 1;
  private waiters = new Set<Waiter>();
  private scheduled = false;

  constructor(
    private readonly map: ClusterMap,
    private readonly catalog: Catalog,
    private readonly membership: Membership,
  ) {
    map.onChange = () => this.changed();
    catalog.onChange = () => this.changed();
    membership.mover.onFrozenChange = () => this.changed();
    membership.onLinkChange = () => this.changed();
  }

  view(): ClusterView {
    return {
      incarnation: this.incarnation,
      version: this.version,
      ...this.map.view(),
      up: this.membership.linksUp(),
      frozen: this.membership.mover.frozenSlices(),
      tables: this.catalog.stored(),
    };
  }

  /** Answers now if the caller is behind, else holds `res` until a change or the hold time. */
  serve(query: URLSearchParams, res: ServerResponse): void {
    const after = Number(query.get('after') ?? -1);
    if (query.get('incarnation') !== this.incarnation || !(after >= this.version)) return this.answer(res);
    const waiter: Waiter = { res, timer: setTimeout(() => this.release(waiter), ROUTER_FEED_HOLD_MS) };
    this.waiters.add(waiter);
    res.on('close', () => {
      clearTimeout(waiter.timer);
      this.waiters.delete(waiter);
    });
  }

  /** Ends every held request (the coordinator is stopping). */
  close(): void {
    for (const w of [...this.waiters]) this.release(w);
  }

  private changed(): void {
    this.version++;
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      for (const w of [...this.waiters]) this.release(w);
    });
  }

  private release(w: Waiter): void {
    clearTimeout(w.timer);
    this.waiters.delete(w);
    this.answer(w.res);
  }

  private answer(res: ServerResponse): void {
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(this.view());
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

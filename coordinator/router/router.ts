// How the request path reaches the slices, and the one place of its retry policy.
// operations.ts says what to send (one op to the slice of a key, a scan page from
// the workers of a range of slices, or one op to every worker); Router finds the
// channel (slice-channel.ts) by the map that Routing (routing.ts) holds, sends,
// and decides whether an op that failed is sent again:
//
// - WrongOwner: the node was not the owner at the op's epoch (a slice move
//   switched it, or this router's map lags the nodes'). Nothing was applied, so
//   it is sent again with the map as it is then: at most WRONG_OWNER_RETRIES_MAX
//   tries within WRONG_OWNER_RETRY_MS_MAX or --wrong-owner-retry-ms (for a single
//   slice's op on replicated slices, the failover bound if longer; a scan keeps
//   the WrongOwner bound),
//   after Routing.afterWrongOwner (doubling waits; a router also asks for the
//   newer map and stops waiting once it has it; where the node refused the
//   batch for its epoch it named it, details.nodeEpoch, and the wait is for a
//   map that new, or for the node where it is the one behind): shared/wrong-owner.ts. This is
//   the only place an op or a scan page refused WrongOwner is sent again through
//   the same router: `keyslice export` and import pass it on (errors.ts
//   callerMayRetry), and the client sends it once to each other router address
//   it has (client.ts requestOnce), so that tries do not multiply; once the
//   bounds are spent the caller gets WrongOwner with a message that says so
//   (WrongOwnerTries.exhausted), which means that nothing was applied: a write
//   whose earlier copy had an unknown outcome (below) ends Unavailable instead.
// - No serving leader, on replicated slices: the node answered that the slice has
//   no serving leader, or the owner's node is not connected; nothing was applied
//   (a failover is under way). Sent again once the map names the new leader: at
//   most FAILOVER_RETRIES_MAX times within FAILOVER_RETRY_MS_MAX, after
//   Routing.afterNoLeader. So is an op that was still queued for a node whose
//   link was lost or given up ("the op was not sent to it"). So is an op whose
//   outcome is unknown (a lost connection or a silent node with the op in
//   flight, a deposed leader): a read, since reading twice changes nothing, and
//   a write that carries a request id (send gives it one while the map
//   replicates its slice, kept across its resends): a node runs such a write
//   only where its slice is replicated (a node whose assignment lags the map
//   refuses it, not applied), and a slice's replicas remember the ids of the
//   writes they applied with their answers: a leader that gets a write it
//   already applied answers what it answered then and applies nothing, for
//   APPLIED_REQUESTS_KEPT_MS, longer than this loop resends (docs/replication.md,
//   "A write sent twice is applied once"). A write sent while the map gave its
//   slice one replica has no id and is not resent after an unknown outcome: the
//   worker log path (R=1) keeps no ids, and it has no failover to wait for anyway.
//   Once the bounds are spent the op fails Unavailable with routerRetried
//   (failoverSpent), which the client, `keyslice export` and import pass on as
//   they pass WrongOwner on: this is the only place that waits for a failover.
//   On slices of one replica nothing is retried here, and those callers ask
//   again what they may repeat (errors.ts callerMayRetry, cli/cli-retry.ts).
// - A move's freeze: a scan waits in Routing.scanUnfrozen until no slice of its
//   range is between freeze and switch (no worker owns such a slice); a point op
//   on a frozen slice is refused WrongOwner by the old owner and retried as above.
//
// A scan page asks each worker that owns a slice of its range for those slices
// (a SliceSet). Which worker owns which slices of a range changes only with the
// map's epoch (or a node's link), so a router keeps each range's asks while they
// hold (scanAsks), within SCAN_PLANS_BYTES_MAX: a whole-table page of 1,024 slices
// read the owner of every slice to build them, about a fifth of the router's CPU
// per page (bench/PROFILE.md, "one walk per packed page, and scan plans kept per epoch").
import { assert, KeysliceError, wasNotApplied } from '../../shared/errors.js';
import { withTimeout } from '../../shared/timeout.js';
import { WrongOwnerTries } from '../../shared/wrong-owner.js';
import { workerOf } from '../../shared/hashing.js';
import {
  FAILOVER_RETRIES_MAX,
  FAILOVER_RETRY_MS_MAX,
  REPLICA_READ_TIMEOUT_MS,
  REPLICA_SILENT_SKIP_MS,
  SCAN_ASK_OVERHEAD_BYTES,
  SCAN_PLAN_OVERHEAD_BYTES,
  SCAN_PLANS_BYTES_MAX,
  SLICE_COUNT_MAX,
  WRONG_OWNER_RETRIES_MAX,
  WRONG_OWNER_RETRY_MS_MAX,
} from '../../shared/limits.js';
import type { Condition } from '../../shared/expression-ast.js';
import { isWriteOp, requestIdOf, setRequestId, SliceOp, sliceSetOf, type Projection, type ResultOf, type ScanResult, type SliceOpMessage, type SliceSet } from '../../shared/protocol.js';
import type { EventualAnswer } from './process-metrics.js';
import { clientRequestId, RequestIds, type ClientName } from './request-ids.js';
import type { Routing } from './routing.js';
import type { SliceChannel } from './slice-channel.js';

/** The ops on one key or one key range of one slice: [kind, tableId, slice, ...]. */
export type SliceBoundOp = Extract<SliceOpMessage, [typeof SliceOp.Put | typeof SliceOp.Get | typeof SliceOp.Delete | typeof SliceOp.Update | typeof SliceOp.Range, ...unknown[]]>;
/** The reads that any replica of the slice may answer when the caller asks for an eventually consistent read. */
export type ReadOp = Extract<SliceOpMessage, [typeof SliceOp.Get | typeof SliceOp.Range, ...unknown[]]>;
/** A page of a full-table scan (or of one segment) as a request asks for it (item-requests.ts): the table's items in
 * the slices [fromSlice, toSlice), in (slice, key) order after (fromSlice, afterKey). Router.scan asks each worker
 * for its part in a Scan that names its slices. */
export interface ScanRequest {
  tableId: number;
  fromSlice: number;
  afterKey: string | null;
  limit: number;
  projection: Projection;
  filter: Condition | null;
  toSlice: number;
  packed: boolean;
}

/** One worker's part of a scan page: the slices of the range the map gives it, as a SliceSet from the range's first. */
interface ScanAsk {
  link: SliceChannel;
  worker: number;
  slices: SliceSet;
}

/** What a scan of one range asks, from one reading of the map (at Router.scanPlansEpoch: scanAsks), and what else must
 * be as it was for the asks to hold: each link's owner of one of its slices (`probe`), and its worker count. */
interface ScanPlan {
  asks: ScanAsk[];
  links: { link: SliceChannel; probe: number; workerCount: number }[];
  /** What it counts against SCAN_PLANS_BYTES_MAX. */
  bytes: number;
}

/** A router's time bounds on its tries (--wrong-owner-retry-ms, --failover-retry-ms). */
export interface RouterRetryMs {
  wrongOwner: number;
  failover: number;
}
export const ROUTER_RETRY_MS_DEFAULT: RouterRetryMs = { wrongOwner: WRONG_OWNER_RETRY_MS_MAX, failover: FAILOVER_RETRY_MS_MAX };

export class Router {
  /** Counts eventually consistent reads: each goes to the next connected replica of its slice (read below). */
  private spread = 0;
  /** Followers' links that let an eventual read time out, and until when they get none (a WeakMap: a link
   * dropped from the map takes its entry with it). */
  private readonly silentUntil = new WeakMap<SliceChannel, number>();
  /** The ids this router gives its writes. */
  private readonly ids = new RequestIds();
  /** Each scan range's plan (scanKey), all of one epoch, oldest first; their bytes, within SCAN_PLANS_BYTES_MAX. */
  private readonly scanPlans = new Map<number, ScanPlan>();
  private scanPlansEpoch = -1;
  private scanPlansBytes = 0;

  constructor(
    private readonly cluster: Routing,
    /** Told what answered each eventually consistent read (ProcessMetrics: keyslice_eventual_reads_total), and of each
     * write sent again after an unknown outcome (keyslice_writes_resent_total, and a log line that says why). */
    private readonly counts: { eventualRead(answered: EventualAnswer): void; writeResent(slice: number, why: string): void } = { eventualRead() {}, writeResent() {} },
    /** The time bounds of an op's or a page's tries: after WrongOwner (--wrong-owner-retry-ms) and, on replicated
     * slices, while no leader serves (--failover-retry-ms); limits.ts. */
    private readonly retryMs: RouterRetryMs = ROUTER_RETRY_MS_DEFAULT,
  ) {}

  get sliceCount(): number {
    return this.cluster.sliceCount;
  }

  /** The map's epoch (DescribeSlices: the epoch its asks were sent at). */
  get epoch(): number {
    return this.cluster.epoch;
  }

  /** The map's nodes and each slice's owner (the advisor, DescribeSlices). */
  layout(): { nodes: string[]; owners: number[] } {
    return this.cluster.layout();
  }

  /** The channels of the nodes that are part of the cluster (DescribeSlices asks each for its load). */
  presentLinks(): SliceChannel[] {
    return this.cluster.presentLinks();
  }

  /** The wait between a load report's tries after a node refused it WrongOwner (load-report.ts: DescribeSlices asks
   * the nodes itself, under this policy): the same as between an op's. */
  afterWrongOwner(attempt: number, sentAt?: number, nodeEpoch?: number): Promise<void> {
    return this.cluster.afterWrongOwner(attempt, sentAt, nodeEpoch);
  }

  /** Sends an op to the node that owns its slice, again while the policy above allows. A write is
   * given its request id here, when it is sent while the map replicates its slice (once: `op` keeps it, so each
   * later copy carries the same). A copy sent without one (the map gave the slice one replica) is not sent again
   * after an unknown outcome, and a node runs a copy with one only where the slice is replicated (worker.ts,
   * unreplicatedWrite), so no copy that may have been applied is forgotten by the replica a resend reaches.
   * `named`: the client's idempotency id (and which write of a batch this is); the write's id is then made from it
   * (request-ids.ts, clientRequestId) instead of being one of this router's, under the same rule: so the copies the
   * client sends, through any router, and this router's resends of each, all carry the same. Made only where the map
   * replicates the slice (it would be dropped on a slice of one replica, whose node keeps no ids: no work there). */
  send<Op extends SliceBoundOp>(op: Op, named: ClientName | null = null): Promise<ResultOf<Op>> {
    const slice = op[2];
    // The op's retry bounds (failover, WrongOwner) count from here on the monotonic clock: on Date.now()'s a wall
    // clock stepped forward spent them at once (the op failed at its first refusal) and stepped back stretched them.
    const started = performance.now();
    // The first try on a ready link, as the loop below makes it, without the loop's async frame (per op on
    // the router's busiest path); a failure goes on in the loop as that try's. Whatever throws here rejects,
    // as it would in the loop.
    let link: SliceChannel | null;
    let epoch: number;
    try {
      link = this.cluster.linkOf(slice);
      if (link === null || link.state !== 'ready') return this.sendLoop(op, named, started, null);
      this.giveRequestId(op, named);
      epoch = this.cluster.epoch;
    } catch (err) {
      return Promise.reject(err);
    }
    let sent: Promise<ResultOf<Op>>;
    try {
      sent = link.send(slice, op);
    } catch (err) {
      return this.sendLoop(op, named, started, { err, epoch });
    }
    return sent.catch((err: unknown) => this.sendLoop(op, named, started, { err, epoch }));
  }

  /** send's tries; `first`: how its first try (on a ready link) failed, and the map's epoch when it was sent, or null
   * if none was made yet. */
  private async sendLoop<Op extends SliceBoundOp>(op: Op, named: ClientName | null, started: number, first: { err: unknown; epoch: number } | null): Promise<ResultOf<Op>> {
    const slice = op[2];
    let failoverTries = 0;
    let wrongOwner: WrongOwnerTries | null = null; // made at the first refusal: most ops meet none
    // A write sent again after a copy whose outcome is unknown: that copy may have been applied.
    let unsure = false;
    // The epoch of the map that chose the last try's link: a refusal waits for a newer one (Routing.afterWrongOwner).
    let sentAt = first?.epoch ?? this.cluster.epoch;
    for (let attempt = 0; ; attempt++) {
      const tried = attempt === 0 && first !== null;
      const link = tried ? null : this.cluster.linkOf(slice);
      if (!tried) {
        // The epoch of the map that chose the link, read with it as send's first try reads it: a map that changes while
        // the link is awaited below makes a refusal of this try one of the older map, which waits for no further change.
        sentAt = this.cluster.epoch;
        if (link === null) throw new KeysliceError('Unavailable', `slice ${slice} has no slice node yet (none has joined); retry later`, { notApplied: true });
        this.giveRequestId(op, named);
        if (link.state !== 'ready') await this.cluster.linkReady(link);
        if (link.state !== 'ready' && link.state !== 'closed' && this.failoverRetry(started, failoverTries)) {
          await this.cluster.afterNoLeader(failoverTries++);
          continue;
        }
      }
      try {
        if (link === null) {
          assert(first !== null, 'only the try that send made has no link here');
          throw first.err;
        }
        return await link.send(slice, op);
      } catch (err) {
        if (err instanceof KeysliceError && mayResend(err, op, this.cluster.replicated(op[2]))) {
          if (!this.failoverRetry(started, failoverTries)) throw this.failoverSpent(`slice ${slice}`, err, failoverTries, started, unsure);
          if (isWriteOp(op) && !wasNotApplied(err)) {
            this.counts.writeResent(slice, err.message);
            unsure = true;
          }
          await this.cluster.afterNoLeader(failoverTries++);
          continue;
        }
        if (!(err instanceof KeysliceError) || err.code !== 'WrongOwner') throw err;
        wrongOwner ??= new WrongOwnerTries(`slice ${slice}`, WRONG_OWNER_RETRIES_MAX, Math.max(this.retryMs.wrongOwner, this.cluster.replicationFactor > 1 ? this.retryMs.failover : 0), started);
        if (!wrongOwner.again()) throw unsure ? mayHaveApplied(wrongOwner.exhausted(err)) : wrongOwner.exhausted(err);
        await this.cluster.afterWrongOwner(wrongOwner.refusals - 1, sentAt, err.details?.nodeEpoch);
      }
    }
  }

  /** A write gets its request id when it is sent while the map replicates its slice, once (send). */
  private giveRequestId(op: SliceBoundOp, named: ClientName | null): void {
    if (isWriteOp(op) && requestIdOf(op) === null && this.cluster.replicated(op[2])) setRequestId(op, named === null ? this.ids.next() : clientRequestId(named.text, named.part, op));
  }

  /** A read: `consistent`, from the leader (send). Otherwise from one replica of the slice, the leader among
   * them, taken in turn by a counter over the replicas whose nodes are connected: it costs nothing per read, needs
   * no load figures, and spreads a slice's reads evenly over its R replicas (random choice would too, but less
   * evenly over short runs, and not reproducibly). The replica answers from what it applied (committed records,
   * maybe behind the leader: docs/replication.md); one that may not answer yet (ReplicaNotReady), is not at this
   * map's epoch (WrongOwner), cannot be reached (Unavailable: a read changes nothing, so it is simply asked of
   * the leader) or does not answer within REPLICA_READ_TIMEOUT_MS (frozen) leaves the read to the leader's path,
   * with its retries; there a read whose outcome is unknown (its leader froze or was deposed with it in flight)
   * is sent again, since reading twice changes nothing. A follower that let a read time out is passed over for
   * REPLICA_SILENT_SKIP_MS (below), so that a frozen one costs one slow read per router, not a third of them. */
  read<Op extends ReadOp>(op: Op, consistent: boolean): Promise<ResultOf<Op>> {
    // A consistent read is send's promise itself: an async function around it cost a promise and two turns of
    // the microtask queue per GetItem (bench/PROFILE.md).
    if (consistent || this.cluster.replicationFactor <= 1) return this.send(op);
    return this.readEventual(op);
  }

  private async readEventual<Op extends ReadOp>(op: Op): Promise<ResultOf<Op>> {
    const replicas = this.cluster.replicaLinks(op[2]);
    const now = performance.now(); // monotonic: silentUntil must not move with the wall clock
    // The leader (replicas[0]) is never passed over here: its path has its own timeouts and failover.
    const ready = replicas.filter((l, i) => l.state === 'ready' && (i === 0 || !((this.silentUntil.get(l) ?? 0) > now)));
    this.spread = (this.spread + 1) % 0x40000000;
    const link = ready.length === 0 ? replicas[0] : ready[this.spread % ready.length];
    if (link === replicas[0]) {
      // The leader (its turn, or no replica's node is connected): its own path.
      this.counts.eventualRead('leader');
      return this.send(op);
    }
    const replicaOp: SliceOpMessage = op[0] === SliceOp.Get ? [SliceOp.ReplicaGet, op[1], op[2], op[3], op[4], op[5]] : [SliceOp.ReplicaRange, op[1], op[2], op[3]];
    const asked = link.send(op[2], replicaOp);
    asked.catch(() => {}); // a late answer, or its failure, is not waited for once the leader is asked
    try {
      const answer = (await withTimeout(asked, REPLICA_READ_TIMEOUT_MS, () => {
        this.silentUntil.set(link, performance.now() + REPLICA_SILENT_SKIP_MS);
        return new KeysliceError('Unavailable', `no answer from ${link.url} within ${REPLICA_READ_TIMEOUT_MS} ms`);
      })) as ResultOf<Op>;
      this.counts.eventualRead('follower');
      return answer;
    } catch (err) {
      if (!(err instanceof KeysliceError) || !FALL_BACK_TO_LEADER.has(err.code)) throw err;
      this.counts.eventualRead('leader_after_follower');
      return this.send(op);
    }
  }

  /** Asks every worker that owns a slice of the scan's [fromSlice, toSlice) for its part of a page: a Scan that
   * names the slices this map gives it, which it refuses (WrongOwner) unless it owns every one of them when it runs
   * (partition.ts scan). So a page never leaves out a slice whose owner changed between this map and the scan, at any
   * epoch and in any order of events: the page is asked again, with the map as it is then. A slice between freeze
   * and switch is owned by no worker: scanUnfrozen waits for its switch (else its owner would refuse it until then). */
  async scan(r: ScanRequest): Promise<ScanResult[]> {
    const started = performance.now(); // the bounds' clock, as send's
    let failoverTries = 0;
    let wrongOwner: WrongOwnerTries | null = null; // made at the first refusal: most pages meet none
    let sentAt = this.cluster.epoch;
    for (;;) {
      let err: unknown;
      try {
        const { asks, epoch } = await this.scanAsks(r.fromSlice, r.toSlice);
        sentAt = epoch;
        const answers = asks.map((a) => a.link.sendToWorker(a.worker, [SliceOp.Scan, r.tableId, r.fromSlice, r.afterKey, r.limit, r.projection, r.filter, a.slices, r.packed]));
        const settled = await Promise.allSettled(answers);
        const failed = settled.find((a): a is PromiseRejectedResult => a.status === 'rejected');
        if (failed === undefined) return settled.map((a) => (a as PromiseFulfilledResult<ScanResult>).value);
        // Asked again, the range's asks are built from the map as it is then: kept ones could be what was refused (a
        // map that changed without a new epoch, as from another coordinator; a link that went down and came back).
        this.forgetScanPlan(scanKey(r.fromSlice, r.toSlice));
        err = failed.reason;
      } catch (e) {
        err = e; // scanAsks: no node for a slice, or one not ready
      }
      // A scan only reads: on replicated slices a node that is down is waited out (a failover names another).
      if (err instanceof KeysliceError && err.code === 'Unavailable') {
        if (!this.failoverRetry(started, failoverTries)) throw this.failoverSpent(scanWhat(r), err, failoverTries, started);
        await this.cluster.afterNoLeader(failoverTries++);
        continue;
      }
      if (!(err instanceof KeysliceError) || err.code !== 'WrongOwner') throw err;
      wrongOwner ??= new WrongOwnerTries(scanWhat(r), WRONG_OWNER_RETRIES_MAX, this.retryMs.wrongOwner, started);
      if (!wrongOwner.again()) throw wrongOwner.exhausted(err);
      await this.cluster.afterWrongOwner(wrongOwner.refusals - 1, sentAt, err.details?.nodeEpoch);
    }
  }

  /** Each worker that owns a slice of [from, to) by the map, with those slices, once none of them is frozen and every
   * node asked is ready (Unavailable if one has no node or its node is not ready), and the map's epoch they were read
   * at: a refusal of them waits for a map after that one (scan), not after one that came while the links were awaited. Kept per range while the map's
   * epoch, each link's owner and worker count stay as they were, so that a page does not read the owner of every
   * slice of its range again; the worker checks what it is asked for anyway (it refuses unless it owns every slice),
   * so a plan kept past a change the epoch missed costs a refusal and a rebuild, never a page without a slice. */
  private async scanAsks(from: number, to: number): Promise<{ asks: readonly ScanAsk[]; epoch: number }> {
    await this.cluster.scanUnfrozen(from, to);
    const epoch = this.cluster.epoch;
    if (epoch !== this.scanPlansEpoch) {
      // Every plan kept is of an older map: none holds any more.
      this.scanPlans.clear();
      this.scanPlansBytes = 0;
      this.scanPlansEpoch = epoch;
    }
    const key = scanKey(from, to);
    const kept = this.scanPlans.get(key);
    if (kept !== undefined && kept.links.every((l) => l.link.state === 'ready' && l.link.workerCount === l.workerCount && this.cluster.linkOf(l.probe) === l.link)) return { asks: kept.asks, epoch };
    if (kept !== undefined) this.forgetScanPlan(key);

    // The owner of every slice, each link's first slice as its probe.
    const owners: SliceChannel[] = new Array(to - from);
    const probes = new Map<SliceChannel, number>();
    for (let s = from; s < to; s++) {
      const link = this.cluster.linkOf(s);
      if (link === null) throw new KeysliceError('Unavailable', 'some slices have no slice node yet (none has joined); retry later');
      owners[s - from] = link;
      if (!probes.has(link)) probes.set(link, s);
    }
    // Ready before anything is sent (a link's worker count is known once it is), so that no ask is left in flight
    // without anyone awaiting it.
    await Promise.all([...probes.keys()].map((l) => this.cluster.linkReady(l)));
    for (const link of probes.keys()) if (link.state !== 'ready') throw new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`);
    // Only the workers that own a slice of the range are asked, each once, for its slices in ascending order.
    const slicesOf = new Map<SliceChannel, number[][]>();
    for (let s = from; s < to; s++) {
      const link = owners[s - from];
      let workers = slicesOf.get(link);
      if (workers === undefined) slicesOf.set(link, (workers = []));
      (workers[workerOf(s, link.workerCount)] ??= []).push(s);
    }
    const asks: ScanAsk[] = [];
    let bytes = SCAN_PLAN_OVERHEAD_BYTES;
    for (const [link, workers] of slicesOf) {
      // forEach passes over the workers that own none of the range.
      workers.forEach((slices, worker) => {
        const set = sliceSetOf(from, slices);
        asks.push({ link, worker, slices: set });
        bytes += set.byteLength + SCAN_ASK_OVERHEAD_BYTES;
      });
    }
    // Kept only if the map did not move while the links were awaited: the owners were read at `epoch`.
    if (this.cluster.epoch === epoch && this.scanPlansEpoch === epoch && bytes <= SCAN_PLANS_BYTES_MAX) {
      const links = [...probes].map(([link, probe]) => ({ link, probe, workerCount: link.workerCount }));
      this.forgetScanPlan(key); // one built meanwhile by another page of the range
      this.scanPlans.set(key, { asks, links, bytes });
      this.scanPlansBytes += bytes;
      for (const [oldest, plan] of this.scanPlans) {
        if (this.scanPlansBytes <= SCAN_PLANS_BYTES_MAX) break;
        this.scanPlans.delete(oldest);
        this.scanPlansBytes -= plan.bytes;
      }
      assert(this.scanPlansBytes >= 0 && this.scanPlansBytes <= SCAN_PLANS_BYTES_MAX, 'the scan plans kept are counted within their budget');
    }
    return { asks, epoch };
  }

  private forgetScanPlan(key: number): void {
    const plan = this.scanPlans.get(key);
    if (plan === undefined) return;
    this.scanPlans.delete(key);
    this.scanPlansBytes -= plan.bytes;
  }

  /** Sends `op` once to every worker of every node of the cluster, without retries (a table
   * drop: what a node that is down misses stays unreachable). A node that is not ready
   * answers Unavailable. */
  everyWorker<Op extends SliceOpMessage>(op: Op): Promise<ResultOf<Op>>[] {
    const out: Promise<ResultOf<Op>>[] = [];
    for (const link of this.cluster.presentLinks()) {
      if (link.state !== 'ready') {
        out.push(Promise.reject(new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)));
        continue;
      }
      for (let w = 0; w < link.workerCount; w++) out.push(link.sendToWorker(w, op));
    }
    return out;
  }

  /** Whether an op that met a failover (no serving leader) is tried again: only on replicated
   * slices, within FAILOVER_RETRIES_MAX tries and FAILOVER_RETRY_MS_MAX (--failover-retry-ms) since `started`
   * (performance.now()). */
  private failoverRetry(started: number, tries: number): boolean {
    return this.cluster.replicationFactor > 1 && tries < FAILOVER_RETRIES_MAX && performance.now() - started < this.retryMs.failover;
  }

  /** The error once failoverRetry says no to `last` (an Unavailable this loop would have sent again). On replicated
   * slices the router waited out the failover for as long as its bounds allow: the Unavailable says so, how often in
   * how long, and carries routerRetried, so that no caller multiplies that wait (errors.ts callerMayRetry). It says
   * notApplied only if `last` did and no earlier copy had an unknown outcome (`unsure`, a write's): `last` speaks for
   * its own copy alone, and a copy that an outcome-unknown leader logged may still commit under the next leader, so
   * a caller that trusted notApplied and wrote again would apply the write twice. On slices of one replica there is
   * no failover to wait for and nothing was retried: `last` goes on as it is, and a caller may ask again what is safe to
   * ask again. */
  private failoverSpent(what: string, last: KeysliceError, tries: number, started: number, unsure = false): KeysliceError {
    assert(last.code === 'Unavailable', 'only an Unavailable waits for a failover');
    // unsure with one replica: the map gave the slice more when a copy was resent (failoverRetry), that copy's doubt stays.
    if (this.cluster.replicationFactor <= 1 && !unsure) return last;
    const ms = Math.round(performance.now() - started);
    const earlier = unsure ? '; an earlier copy of this write had an unknown outcome, so it may have been applied' : '';
    return new KeysliceError(
      'Unavailable',
      `${what}: no serving leader answered ${tries + 1} tries in ${ms} ms (the router waits for a failover at most ${FAILOVER_RETRIES_MAX} tries within ${this.retryMs.failover} ms; the slice's replicas may be down or cut off from a majority); last: ${last.message}${earlier}`,
      wasNotApplied(last) && !unsure ? { notApplied: true, routerRetried: true } : { routerRetried: true },
    );
  }
}

/** Whether an op that failed with `err` during a failover may be sent again: it was not applied (refused by a
 * replica that does not serve, or never sent), or its outcome is unknown (any other Unavailable: a lost connection, a
 * deposed or silent leader, a leader that could not commit it in time) and a second copy changes nothing: a read, or
 * a write (with its request id) of a slice the map replicates (`replicated`), whose leader answers a copy of a write
 * it applied from memory. The seeded simulation's router follows it too (test/replication-sim.ts). */
export function mayResend(err: Pick<KeysliceError, 'code' | 'details'>, op: SliceBoundOp, replicated: boolean): boolean {
  if (err.code !== 'Unavailable') return false;
  if (wasNotApplied(err) || !isWriteOp(op)) return true;
  // An id: every copy of it that may have run ran where the id is remembered (send).
  return requestIdOf(op) !== null && replicated;
}

/** The error of a write whose WrongOwner tries were spent after a copy of it had an unknown outcome: not WrongOwner,
 * which says that nothing was applied (a client sends a WrongOwner to another router: client.ts requestOnce), but the
 * unknown outcome, which the router already waited out (routerRetried: nobody above it asks again). */
function mayHaveApplied(spent: KeysliceError): KeysliceError {
  assert(spent.code === 'WrongOwner', 'only spent WrongOwner tries end so');
  return new KeysliceError('Unavailable', `${spent.message}; an earlier copy of this write had an unknown outcome, so it may have been applied`, { routerRetried: true });
}

/** A scan page, as its errors name it. */
function scanWhat(r: ScanRequest): string {
  return `a scan page of slices ${r.fromSlice}-${r.toSlice - 1}`;
}

/** What an eventually consistent read answered by a follower may fail with and still be read from the leader. */
const FALL_BACK_TO_LEADER: ReadonlySet<string> = new Set(['ReplicaNotReady', 'WrongOwner', 'Unavailable']);

/** A scan range's key among the plans kept (Router.scanAsks): both ends are at most SLICE_COUNT_MAX. */
function scanKey(from: number, to: number): number {
  return from * (SLICE_COUNT_MAX + 1) + to;
}

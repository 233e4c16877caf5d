// Membership and rebalancing. Slice nodes register (POST /cluster/join with the
// cluster secret) and repeat it as a heartbeat; the coordinator dials each one
// (coordinator/metadata/node-link.ts). When a node joins or an operator drains one, the
// rebalancer plans slice moves so that every active node owns its share, and
// runs a few at a time (coordinator/metadata/slice-mover.ts). The cluster map stays the
// coordinator's alone.
//
// Node identity: a node says which data folder it has (node id) and which cluster
// it belongs to (cluster id) in its Hello and in each join. A node that comes back
// under a known address with another folder while it owns slices, or that holds
// another cluster's data, is not given slices: its slices answer Unavailable
// (never an empty answer) until its folder is back, or an operator accepts the
// loss (remove with forgetData), which hands them, empty, to the active nodes.
import type { ClusterStatus, LeadersReport, NodeStatusReport } from '../../shared/api.js';
import { assert, KeysliceError } from '../../shared/errors.js';
import { COORDINATOR_STALL_MS, DRAIN_REPLACE_DOWN_MS, FAILOVER_TICK_MS, LEADER_HANDOVER_BEFORE_CHANGE_MS, LEADER_HANDOVERS_IN_FLIGHT_MAX, MAP_SAVE_RETRY_MS_MAX, MOVE_RETRY_DELAY_MS, REPLICA_MOVE_UNDO_DOWN_MS, REPLICA_MOVES_IN_FLIGHT_MAX, REPLICA_WAITS_REPORTED_MAX, MOVES_IN_FLIGHT_MAX, NODE_HEARTBEAT_TIMEOUT_MS, NODE_URL_CHARS_MAX, REBALANCE_INTERVAL_MS, REPLICA_CATCH_UP_PROBE_MS } from '../../shared/limits.js';
import { performance } from 'node:perf_hooks';
import { failoverDelayMs } from '../../shared/timeout.js';
import { wrongOwnerDelayMs, wrongOwnerWait } from '../../shared/wrong-owner.js';
import { MapSaveError, savedOr, type ClusterMap } from './cluster-map.js';
import { gatherTableLoad } from './load-report.js';
import type { Catalog } from './catalog.js';
import { isIdentity, isNodeUrl, noMovedEffects, SliceOp } from '../../shared/protocol.js';
import { slicesOfWorker } from '../../shared/hashing.js';
import { NodeLink, type NodeHello } from './node-link.js';
import { FAILOVER_TIMING_DEFAULT, majority, type FailoverTiming } from './failover.js';
import { assignReplication, ReplicaLeaders } from './replica-leaders.js';
import { NodeCountLog } from './node-count-log.js';
import { SliceMover, Throttle } from './slice-mover.js';

// A node known by address is heard from by the pong to the ping each turn sends it (pingLinks) and counts down once
// silent NODE_HEARTBEAT_TIMEOUT_MS (countsUp): the bound must hold several turns, so that a running node is never
// counted down for want of a ping, nor for a turn or two late or a slow pong.
assert(4 * REBALANCE_INTERVAL_MS <= NODE_HEARTBEAT_TIMEOUT_MS, 'a running node pongs several times within the node heartbeat bound');

/** A replicated slice that, without a node being removed, keeps no majority of live replicas (`up` of `size` up;
 * `down`, its replicas that are down). */
type ShortSlice = { slice: number; up: number; size: number; down: number[] };
/** What `keyslice remove` of a node found it may do (Membership.removeChecks), for removeNow. */
type RemovePlan = { held: number[]; owned: number[]; counted: number[]; short: ShortSlice[] };

export class Membership {
  /** links[i] talks to map.nodes[i]; a removed node's link is closed. */
  readonly links: NodeLink[] = [];
  readonly mover: SliceMover;
  /** Elects each replicated slice's leader (coordinator/metadata/replica-leaders.ts). */
  readonly leaders: ReplicaLeaders;
  /** When each node that heartbeats last did (join), on performance.now()'s clock, as every duration here: isUp counts
   * a node down NODE_HEARTBEAT_TIMEOUT_MS after it, and on Date.now()'s a wall clock stepped forward counted every node
   * down at once (starting downSince), one stepped back kept a dead node up for the step. */
  private readonly lastHeartbeat = new Map<number, number>();
  /** Nodes that failed a move recently, and until when the rebalancer leaves them be (performance.now()'s clock). */
  private readonly backoffUntil = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;
  private running = 0;
  /** A forget-data removal is handing slices over (one at a time). */
  private forgetting = false;
  /** Since when each node that is not removed has been seen down (absent: up), on performance.now()'s clock: autoRemove
   * (--remove-down-after-ms) and deadReplica (--drain-replace-down-ms) count from it, and on Date.now()'s a wall clock
   * stepped forward (an NTP step, a VM resumed) removed a node, or replaced its replicas, as soon as it was found down;
   * stepped back, that long late. Never persisted nor shown as a time (status and the log say "down for N s"). */
  private readonly downSince = new Map<number, number>();
  /** Says when a node stops or starts counting up (noteDown), at most once a node per NODE_COUNT_LOG_INTERVAL_MS. */
  private readonly countLog: NodeCountLog;
  /** Per slice whose move or drain step names a new replica (joining), that replica's node, and since when it has not
   * answered for the step (answersForStep of the slice: its node down, or the node's worker that runs the slice leaving
   * a question unanswered past the heartbeat bound while the node pongs), on performance.now()'s clock (a wall clock
   * stepped forward undid a step at once); absent: it answers. The step is undone --move-undo-down-ms after
   * (undoStalledMoves). Per slice, not per node: a node with one worker stuck answers for the steps of its other
   * workers' slices. */
  private readonly unansweringSince = new Map<number, { node: number; since: number }>();
  /** Why a node that has been down past --remove-down-after-ms is not removed (for status; logged once per change). */
  private readonly autoRemoveRefusal = new Map<number, string>();
  private autoRemoving = false;
  /** Replica moves undone since this process started (their new replica's node was down: undoStalledMoves). */
  private movesUndone = 0;
  /** The slices whose drain step or replica move's second step waits, and why, as drainReplicas last looked (status). */
  private replicaWaits: { slice: number; node: number; why: string }[] = [];
  /** Drain steps and replica moves whose leaving replica leads the slice: the node, and since when its leadership is
   * being handed to a replica that stays before the change (performance.now: drainReplicas; LEADER_HANDOVER_BEFORE_CHANGE_MS
   * bounds it). */
  private readonly handingOver = new Map<number, { node: number; since: number }>();
  /** Set while a node that registered itself (join) is added to the map: placement counts it up before it has a link. */
  private registering = false;
  /** Nodes that `keyslice remove` is handing the leaderships of before it removes them: leadership rebalancing gives
   * them none meanwhile. */
  private readonly removing = new Set<number>();
  /** Slices whose leading replica a change took out after its handover did not complete in time, one per slice of a drain
   * step, replica move or remove (status: handoversGivenUp). */
  private handoversGivenUp = 0;
  /** Called when a node's link becomes ready or is lost (routers are told: metadata/feed.ts). */
  onLinkChange: () => void = () => {};

  constructor(
    readonly map: ClusterMap,
    private readonly catalog: Catalog,
    private readonly clusterSecret: string,
    itemsPerSecond: number,
    private readonly autoRebalance: boolean,
    private readonly log: (line: string) => void,
    failoverTiming: FailoverTiming = FAILOVER_TIMING_DEFAULT,
    /** --remove-down-after-ms: a node down this long is removed as `keyslice remove` would (0: never). */
    private readonly removeDownAfterMs = 0,
    /** How long a node is down before what waits for it is given up: a drain's follower on it replaced
     * (--drain-replace-down-ms, drainReplaceDownMs), a move or drain step onto it undone (--move-undo-down-ms,
     * undoStalledMoves). */
    private readonly downWaits: { drainReplaceMs: number; moveUndoMs: number } = { drainReplaceMs: DRAIN_REPLACE_DOWN_MS, moveUndoMs: REPLICA_MOVE_UNDO_DOWN_MS },
  ) {
    map.nodes.forEach((url, i) => this.links.push(this.newLink(url, i)));
    // Placement chooses a slice's new replica on a node whose worker of that slice answers for a drain step only
    // (answersForStep: counted up, not silent past the heartbeat bound, and that worker has left no question unanswered
    // that long, kept across the drop of its questions of a slice its node no longer replicates: a worker stuck while
    // its main thread pongs would get back the new replica whose step undoStalledMoves undid off it, and the step would
    // be undone and placed there again without end), and not on one that keyslice remove is about to take out
    // (this.removing). A node with no link yet is one being added: up where it registered just now (its join is the
    // proof), down where an operator named it (keyslice add: it may not run yet; refillReplicas fills the sets once its
    // link is ready). The map's isUp (its leader fallbacks, status's drain waits) is the node's: up with every worker
    // answering.
    map.takesReplica = (i, slice) => (this.links[i] === undefined ? this.registering : this.answersForStep(i, slice) && !this.removing.has(i));
    map.isUp = (i) => (this.links[i] === undefined ? this.registering : this.everyWorkerAnswers(i) && !this.removing.has(i));
    map.placementKey = () => this.placementKey();
    this.mover = new SliceMover(map, this.links, new Throttle(itemsPerSecond), log);
    this.countLog = new NodeCountLog(log);
    this.leaders = new ReplicaLeaders(map, this.links, failoverTiming, log, () => this.reassignAll());
    this.leaders.onProgress = () => this.turnSoon();
    // One change per slice at a time: the map starts none on a slice whose last change the failover runner does not
    // count settled yet (it records that in the map a tick later).
    map.isSettled = (s) => this.leaders.settled(s);
    map.mayPlace = (s) => this.mayPlace(s);
    this.timer = setInterval(() => this.turnDue(), REBALANCE_INTERVAL_MS);
    this.timer.unref();
  }

  /** When the last turn came (performance.now): a turn that comes COORDINATOR_STALL_MS or more late says this process
   * did not run meanwhile (turnDue). */
  private lastTurnAt = performance.now();
  private closed = false;

  /** The turn's timer fired. Where it came late by more than COORDINATOR_STALL_MS this process did not run meanwhile (a
   * starved machine, a long GC, a stop): what the nodes sent in that time waits unread in the sockets, and the nodes were
   * not pinged, so the silence clocks (NodeLink.heardAt, the questions' times) count this process's stall as the nodes'.
   * Stalled 5 s or more, every node known by address counted down for that turn (placement skipped it, the undo's and
   * autoRemove's clocks started). So each link is told to leave the stall out of its node's silence (NodeLink.excuse),
   * and the turn runs once the sockets were read (setImmediate: after this loop's poll phase), its pongs, frames and
   * answers taken. A node frozen meanwhile is found silent as much later as the stall lasted. */
  private turnDue(): void {
    const now = performance.now();
    const late = now - this.lastTurnAt - REBALANCE_INTERVAL_MS;
    this.lastTurnAt = now;
    if (late <= COORDINATOR_STALL_MS) return this.turn();
    for (const link of this.links) link.excuse(late, now);
    this.excusedTurnDue = true;
    setImmediate(() => {
      this.excusedTurnDue = false;
      this.turn();
    });
  }

  /** A turn after a stall waits for the sockets to be read (turnDue): a soon turn (turnSoon) whose timer fires in the
   * same timers phase as turnDue, after it, would run its steps before, on what the stall left unread. */
  private excusedTurnDue = false;

  private turn(): void {
    if (this.closed) return;
    this.noteDown();
    this.pingLinks();
    this.refillReplicas();
    void this.autoRemove();
    this.rebalance();
  }

  /** The soon turn's timer (turnSoon), while one is due; when the last one ran (performance.now). */
  private soonTimer: NodeJS.Timeout | undefined;
  private lastSoonAt = -Infinity;

  /** What placement or a replica move's step waited for came (ReplicaLeaders.onProgress: a change settled, leaders
   * elected, a replica answered its catch-up probe; or a node's link became ready): the turn's placement and moves
   * (refillReplicas, rebalance) run now, by the same checks, rather than at the next turn up to REBALANCE_INTERVAL_MS
   * later. A replica move waited about two turns per batch of REPLICA_MOVES_IN_FLIGHT_MAX, two more where its leader
   * handed over, for a catch-up that took milliseconds: the 4th node of a new cluster at R=3 took 4-6 s to get its
   * share of 12 slices. At most once per FAILOVER_TICK_MS (a burst of Pongs makes one); the pings, the down counts and
   * the automatic removal keep the turn's clock. Not after a stall (turnDue): the turn that excuses it comes first. */
  private turnSoon(): void {
    if (this.closed || this.soonTimer !== undefined) return;
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      // The turn due after a stall comes first (its excuse, then the sockets read): it runs these steps itself. (No
      // closed check here: close clears this timer.)
      if (this.excusedTurnDue || performance.now() - this.lastTurnAt > REBALANCE_INTERVAL_MS + COORDINATOR_STALL_MS) return;
      this.lastSoonAt = performance.now();
      this.refillReplicas();
      this.rebalance();
    }, Math.max(0, this.lastSoonAt + FAILOVER_TICK_MS - performance.now()));
    this.soonTimer.unref();
  }

  /** Whether placement (the map's, at any map change, and refillReplicas) may change the slice's set: its last change
   * settled under an elected leader (or it has one replica), so that changes do not chain and a handover in its hold or
   * its election is not replaced by an election (change_chained), and no whole-slice move copies it. */
  private mayPlace(slice: number): boolean {
    return this.leaders.settled(slice) && !this.mover.moving.has(slice) && (this.map.replicasOf(slice).length <= 1 || this.leaders.electedTerm(slice) !== null);
  }

  private newLink(url: string, index: number): NodeLink {
    const link = new NodeLink(
      url,
      () => ({
        epoch: this.map.epoch,
        sliceCount: this.map.sliceCount,
        slices: this.map.slicesOf(index),
        clusterId: this.map.clusterId,
        replication: assignReplication(this.map, index, (s) => this.leaders?.membersOf(s) ?? this.map.replicasOf(s)),
      }),
      () => this.map.epoch,
      this.log,
      this.clusterSecret,
      (hello) => this.admit(index, hello),
    );
    link.onStateChange = () => {
      if (link.state !== 'ready') this.leaders?.linkLost(index);
      else {
        this.leaders?.linkUp(index);
        // A node that registers (or is back) takes replicas now (placement, a replica move onto it), not at the next turn.
        this.turnSoon();
      }
      this.onLinkChange();
    };
    link.onReplicate = (entries) => this.leaders.receive(index, entries);
    if (this.map.statusOf(index) === 'removed') link.close();
    return link;
  }

  /** The link of the node that owns `slice`, or null while no node has joined. */
  linkOf(slice: number): NodeLink | null {
    const owner = this.map.ownerOf(slice);
    return owner < 0 ? null : this.links[owner];
  }

  replicaLinks(slice: number): NodeLink[] {
    return this.map.replicasOf(slice).filter((node) => this.map.statusOf(node) !== 'removed').map((node) => this.links[node]);
  }

  replicated(slice: number): boolean {
    return this.replicaLinks(slice).length > 1;
  }

  /** Every node that is connected gets its assignment again (its led slices or replica sets changed). */
  private reassignAll(): void {
    this.links.forEach((l, i) => this.map.statusOf(i) !== 'removed' && l.reassign());
  }

  /** Links of the nodes that are part of the cluster (not removed). */
  presentLinks(): NodeLink[] {
    return this.links.filter((_, i) => this.map.statusOf(i) !== 'removed');
  }

  get sliceCount(): number {
    return this.map.sliceCount;
  }

  get epoch(): number {
    return this.map.epoch;
  }

  layout(): { nodes: string[]; owners: number[] } {
    return { nodes: [...this.map.nodes], owners: Array.from({ length: this.map.sliceCount }, (_, s) => this.map.ownerOf(s)) };
  }

  /** Per node of the map: whether this process is connected to it now. */
  linksUp(): boolean[] {
    return this.map.nodes.map((_, i) => this.links[i]?.state === 'ready');
  }

  /** Once no slice of [from, to) is frozen. The caller reads the owners and queues its asks right after, in the same
   * turn: every ask queued then is queued before the next freeze is, so each worker answers for the slices it owned
   * when the owners were read. */
  scanUnfrozen(from: number, to: number): Promise<void> {
    return this.mover.unfrozen(from, to);
  }

  /** A node that is not connected answers Unavailable at once. */
  linkReady(): Promise<void> {
    return Promise.resolve();
  }

  /** In this process the map is always the newest, so a refusal comes from a move's freeze (the old owner refuses
   * the frozen slice until the switch) or an epoch the map left just now: wait, longer each time (shared/wrong-owner.ts),
   * and go on at once when the map's epoch is another than when the refused try was sent (`sentAt`: the switch, also
   * one made while that try was in flight), as a router goes on at a newer copy (router-view.ts). Without that, an op
   * refused during a freeze waited up to WRONG_OWNER_RETRY_DELAY_MS_MAX past the switch. A node that refused the
   * batch for its epoch named it (`nodeEpoch`): one at the map's epoch takes the next try at once, one behind it (its
   * Epoch frame on the way) is waited for (wrongOwnerWait). (A move rolled back thaws without a new epoch: its refused
   * ops wait out their delay, here as on a router.) */
  afterWrongOwner(attempt: number, sentAt = this.map.epoch, nodeEpoch?: number): Promise<void> {
    const wait = wrongOwnerWait(this.map.epoch, sentAt, nodeEpoch, attempt);
    return wait === null ? Promise.resolve() : this.map.epochReaches(wait.reach, wrongOwnerDelayMs(attempt));
  }

  get replicationFactor(): number {
    return this.map.replicationFactor;
  }

  /** In this process the map is always the newest: the election moves it on; wait a little, or until it does. */
  afterNoLeader(attempt: number): Promise<void> {
    return this.map.epochReaches(this.map.epoch + 1, failoverDelayMs(attempt));
  }

  /** Why node `index` (or a node new to the map, index -1) may not serve under this
   * address with this data folder and cluster id; null when it may. */
  private identityProblem(index: number, url: string, nodeId: string, clusterId: string | null): string | null {
    const owned = index < 0 ? 0 : this.map.slicesOf(index).length;
    const forget = `keyslice remove ${url} --forget-data`;
    if (clusterId !== null && clusterId !== this.map.clusterId) {
      return (
        `slice node ${url} holds the data of another keyslice cluster (cluster id ${clusterId}; this one is ${this.map.clusterId}), so it is not given slices. ` +
        `Point it at its own coordinator, or start it with an empty data folder to join this cluster as a new node` +
        (owned > 0 ? `; its ${owned} slices here answer Unavailable until its own data folder is back, or "${forget}" accepts that their data is lost.` : '.')
      );
    }
    const other = this.map.indexOfNodeId(nodeId);
    if (other >= 0 && other !== index) {
      return `slice node ${url} has the data folder of node ${this.map.nodes[other]} (node id ${nodeId}), so it is not given slices: start it at ${this.map.nodes[other]} again.`;
    }
    const known = index < 0 ? null : this.map.nodeIdOf(index);
    if (known !== null && known !== nodeId && owned > 0) {
      return (
        `slice node ${url} came back with a different data folder (node id ${nodeId}; this cluster knows ${known}): it lost its data or is another node, so its ${owned} slices are not given to it and answer Unavailable. ` +
        `Restore its data folder and restart it, or accept that the data of those slices is lost: ${forget}`
      );
    }
    return null;
  }

  /** A node said Hello: null to assign it its slices, or why not. Records its folder's id. */
  private admit(index: number, hello: NodeHello): string | null {
    const url = this.map.nodes[index];
    const problem = this.identityProblem(index, url, hello.nodeId, hello.clusterId);
    if (problem !== null) return problem;
    const known = this.map.nodeIdOf(index);
    if (known !== hello.nodeId) {
      // Saving the map can fail (a full disk): the node is then refused, not the coordinator stopped.
      let unsaved = null as string | null;
      savedOr(
        () => this.map.setNodeId(index, hello.nodeId),
        (err) => {
          unsaved = `cannot record slice node ${url}'s node id in the cluster map (${err.message}); it is not given slices until the map can be saved`;
          this.log(unsaved);
        },
      );
      if (unsaved !== null) return unsaved;
      if (known !== null) this.log(`slice node ${url} has a new data folder (node id ${hello.nodeId}, was ${known}); it owned no slices, so no data was lost`);
    }
    return null;
  }

  /** A node registers or heartbeats: {url, nodeId, clusterId} (POST /cluster/join). */
  join(body: Record<string, unknown>): { node: string; epoch: number } {
    const u = checkUrl(body.url);
    const { nodeId, clusterId } = body;
    if (!isIdentity(nodeId) || !(clusterId === null || isIdentity(clusterId))) {
      throw new KeysliceError('ValidationError', 'a join names the node\'s "nodeId" and "clusterId" (32 hex digits; clusterId null before the first assignment); a node that sends neither is older than this coordinator');
    }
    let index = this.map.indexOf(u);
    if (index >= 0 && this.map.statusOf(index) === 'removed') {
      throw new KeysliceError('InvalidState', `node ${u} was removed; an operator adds it again with "keyslice add ${u}"`);
    }
    const problem = this.identityProblem(index, u, nodeId, clusterId);
    if (problem !== null) throw new KeysliceError('InvalidState', problem);
    if (index < 0) index = this.add(u, nodeId);
    this.lastHeartbeat.set(index, performance.now());
    this.links[index]?.heard();
    return { node: u, epoch: this.map.epoch };
  }

  /** Operator: adds a node by address (it need not heartbeat), or makes a draining one active again. */
  add(url: unknown, nodeId: string | null = null): number {
    const u = checkUrl(url);
    const before = this.map.indexOf(u);
    if (before >= 0 && this.map.statusOf(before) === 'draining') {
      this.map.setStatus(before, 'active');
      // Its drain's handovers end with it (a drain of it again waits its full time: drainReplicas).
      for (const [slice, h] of this.handingOver) if (h.node === before) this.handingOver.delete(slice);
      for (const l of this.links) l.sendEpoch(this.map.epoch);
      this.log(`node ${u} was draining and is active again (${this.map.slicesOf(before).length} slices); slices move back to it`);
      this.rebalance();
      return before;
    }
    // Only join passes the node's id: the node is running. An operator's add names an address alone.
    this.registering = nodeId !== null;
    let index: number;
    try {
      index = this.map.addNode(u, nodeId);
    } finally {
      this.registering = false;
    }
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
    const node = this.map.nodes[index];
    const others = this.map.nodes.filter((_, i) => i !== index && this.map.statusOf(i) === 'active');
    if (others.length === 0) throw new KeysliceError('InvalidState', `node ${node} is the only active node; its slices have nowhere to go`);
    const factor = this.map.replicationFactor;
    if (factor > 1 && others.length < 2) {
      // Its slices would be left with one replica, and a slice does not go back from R>1 to R=1 (docs/replication.md).
      throw new KeysliceError('InvalidState', `the slices of ${node} have ${factor} replicas; without it only ${others.length} active node would hold them, and a replicated slice keeps at least 2: add a node first`);
    }
    if (factor > 1 && this.map.nodes.some((_, i) => i !== index && this.map.statusOf(i) === 'draining')) {
      throw new KeysliceError('InvalidState', 'another node is draining; with replicated slices one node drains at a time: retry when it is done (keyslice status)');
    }
    this.map.setStatus(index, 'draining');
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    if (factor > 1) {
      // The map placed a replica on an active node for each slice the node holds one of (R + 1 for a while);
      // the nodes learn their sets, then the elections tell the leaders.
      this.leaders.sync();
    }
    this.log(`draining node ${node} (${factor > 1 ? `replicas of ${this.map.replicaCounts()[index]} slices, leading ${this.map.slicesOf(index).length}` : `${this.map.slicesOf(index).length} slices`})`);
    this.rebalance();
  }

  /** Operator: forgets a node that owns no slice (drain it first). With `forgetData`, also
   * one that owns slices whose data is lost: they go, empty, to the active nodes that are up. */
  async remove(url: unknown, forgetData: unknown = false, force: unknown = false): Promise<void> {
    if (typeof forgetData !== 'boolean') throw new KeysliceError('ValidationError', '"forgetData" is true or false');
    if (typeof force !== 'boolean') throw new KeysliceError('ValidationError', '"force" is true or false');
    const index = this.indexOf(url);
    const node = this.map.nodes[index];
    if (this.removing.has(index)) {
      throw new KeysliceError('InvalidState', `a removal of ${node} is under way already (it hands over its leaderships first, at most ${LEADER_HANDOVER_BEFORE_CHANGE_MS / 1000} s); nothing was changed: see keyslice status once it ended`);
    }
    // Refused now if it would be refused after the handovers; they take a moment, during which drain steps, elections
    // and links go on, so everything is looked at again from the state after them (removeChecks), and only that decides.
    const first = this.removeChecks(index, forgetData, force);
    if (first.held.length === 0) return this.removeNow(index, first);
    // Meanwhile placement and replica rebalancing give the node no new replica nor take one off it, and leadership
    // rebalancing and handovers give it no leadership (this.removing); a second remove of it is refused (above).
    this.removing.add(index);
    try {
      const { gaveUp, handed } = await this.handOverLeaderships(index);
      await this.askKeptLately(index);
      this.indexOf(url); // not removed meanwhile
      await this.removeNow(index, this.removeChecks(index, forgetData, force), handed);
      // Counted once the node is out (its slices elect): a remove refused or whose map save failed lost no leader.
      this.handoversGivenUp += gaveUp;
    } finally {
      this.removing.delete(index);
    }
  }

  /** The replicated slices node `index` holds a replica of. */
  private replicatedHeldBy(index: number): number[] {
    return Array.from({ length: this.map.sliceCount }, (_, s) => s).filter((s) => this.map.replicasOf(s).length > 1 && this.map.replicasOf(s).includes(index));
  }

  /** What `keyslice remove` of node `index` would do now, or the refusal it meets (thrown): the replicated slices it
   * holds a replica of (`held`: replicatedRemoveChecks, which names the slices `short` of a live majority without it:
   * refused unless `force`), those it owns (without replicas: refused unless `forgetData`), and the unsettled changes
   * that still count it (`counted`: refused unless `force`). */
  private removeChecks(index: number, forgetData: boolean, force: boolean): RemovePlan {
    const node = this.map.nodes[index];
    const owned = this.map.slicesOf(index);
    const held = this.replicatedHeldBy(index);
    // A node may still be needed by a change that took a replica of it out (a drain step, a move) and has not settled:
    // until it does, elections and commits need a majority of the set before it, this node included. A drain or move
    // goes on without a replica on a node that is down (drainReplicas), so where another replica of that old set is
    // down, this node's answer is what settles the change: removed now (keyslice drain, then remove at once), the
    // slice would elect no leader nor commit a write until the down one is back. (Slices it holds a replica of are
    // refused while unsettled by removeReplicated, whatever --force.)
    const counted = this.unsettledCounting(index);
    if (counted.length > 0 && !force) {
      throw new KeysliceError(
        'InvalidState',
        `${counted.length} slice${counted.length === 1 ? '' : 's'} (e.g. slice ${counted[0]}) still count${counted.length === 1 ? 's' : ''} ${node} in a replica-set change that took its replica out and has not settled yet (its leader's first record is not yet on a majority of the set before it); nothing was changed. ` +
          `Retry once it settled (keyslice status: "unsettled" 0), with ${node} up; or remove it anyway with: keyslice remove ${node} --force (where other replicas of that set are down, those slices then elect no leader nor commit a write until they are back)`,
      );
    }
    const short = held.length > 0 ? this.replicatedRemoveChecks(index, held, force) : [];
    if (held.length === 0 && owned.length > 0 && !forgetData) {
      throw new KeysliceError(
        'InvalidState',
        `node ${node} still owns ${owned.length} slices; drain it first (keyslice drain), or, if their data is lost for good, accept the loss: keyslice remove ${node} --forget-data`,
      );
    }
    return { held, owned, counted, short };
  }

  /** Removes node `index` as removeChecks (just run, nothing awaited since) found it may be: its checks are not run
   * again. */
  private async removeNow(index: number, { held, owned, counted, short }: RemovePlan, handed = 0): Promise<void> {
    const node = this.map.nodes[index];
    try {
      if (held.length > 0) this.removeReplicated(index, held, short);
      else {
        if (owned.length > 0) await this.forgetSlices(index, owned);
        else this.map.setStatus(index, 'removed');
        // Closed once the map without it is saved: a failed save leaves the node as it was, link open.
        this.links[index].close();
        this.lastHeartbeat.delete(index);
        for (const l of this.links) l.sendEpoch(this.map.epoch);
        this.log(`node ${node} removed`);
      }
    } catch (err) {
      // Each path saves the map before it closes the node's link, and a failed save (a full disk) leaves the map as it
      // was: the node is in the cluster and serving as before, so the operator (or autoRemove, next turn) may retry.
      if (!(err instanceof MapSaveError)) throw err; // a broken invariant is not caught
      throw notRemoved(node, err, handed);
    }
    if (counted.length > 0) this.log(`removed ${node} by force: ${counted.length} slices (e.g. slice ${counted[0]}) still counted it in a replica-set change that had not settled`);
  }

  /** Removes a node that holds replicas of replicated slices, up or down (docs/replication.md): once the map
   * without it is saved, its link is closed (so it takes no part in what follows), the map names another replica
   * as each of its slices' leader until their elections (which count the old replica set's majority)
   * choose one, and its replicas are placed again on the other active nodes, where they catch up
   * from their leaders. Refused when a slice would be left without a majority of its replicas or
   * without a copy; and, unless `force`, when the replicas left that are up would not be a majority of a
   * slice's set (ReplicaMajorityDown): until the change settles its elections need a majority of the set
   * before it, which the removed node no longer helps to make, so such a slice would elect no leader until
   * the replicas that are down are back. Those refusals are replicatedRemoveChecks'; `short`, what they let through
   * under `force`. */
  private removeReplicated(index: number, held: number[], short: readonly ShortSlice[]): void {
    const node = this.map.nodes[index];
    if (short.length > 0) this.log(`removing ${node} by force: ${short.length} slices (e.g. slice ${short[0].slice}) keep no majority of live replicas and elect no leader until their replicas that are down are back`);
    const ledSlices = this.map.slicesOf(index);
    const led = ledSlices.length;
    // A slice it still leads (its handover given up) is led in the map, until it elects, by the replica that a drain
    // step would name (leaderUntilElected), where one is.
    const leaders = new Map<number, number>();
    for (const slice of ledSlices) {
      const term = this.leaders.electedTerm(slice);
      const named = term === null ? undefined : this.leaderUntilElected(slice, this.map.replicasOf(slice).filter((n) => n !== index), term);
      if (named !== undefined) leaders.set(slice, named);
    }
    // Saved before the link closes: a failed save (MapSaveError, thrown on) leaves the node in the map with its link
    // open and its replicas serving. Placement in the change skips it meanwhile (map.takesReplica: this.removing).
    this.map.removeReplicatedNode(index, leaders);
    this.links[index].close();
    assert(this.map.slicesOf(index).length === 0, 'a removed node owns no slice');
    this.lastHeartbeat.delete(index);
    this.reassignAll();
    this.leaders.sync();
    this.log(
      `node ${node} removed: it held replicas of ${held.length} slices (leading ${led}); their leaders are elected among the other replicas and their replicas placed again on the other active nodes`,
    );
  }

  /** removeReplicated's refusals (thrown) for node `index`, which holds replicas of the replicated slices `held`;
   * returns the slices that keep no live majority without it, which only `force` lets through. */
  private replicatedRemoveChecks(index: number, held: number[], force: boolean): ShortSlice[] {
    const node = this.map.nodes[index];
    const lone = this.map.slicesOf(index).filter((s) => this.map.replicasOf(s).length === 1);
    if (lone.length > 0) {
      throw new KeysliceError(
        'InvalidState',
        `node ${node} holds the only copy of ${lone.length} slices (e.g. slice ${lone[0]}) besides replicas of others; removing it would lose them: drain it first, or bring a replica up`,
      );
    }
    for (const s of held) {
      const set = this.map.replicasOf(s);
      if (!this.leaders.settled(s)) {
        // Its last change still counts the set before it (joint majorities): a change made now would count
        // that one too, and a node that left it no longer answers, which could leave no majority of it to elect.
        throw new KeysliceError('InvalidState', `slice ${s} is changing its replica set (its leader's first record is not yet held by a majority of both the new and the old set); retry in a moment`);
      }
      if (set.length - 1 < majority(set.length)) {
        throw new KeysliceError(
          'InvalidState',
          `slice ${s} has ${set.length} replicas; without node ${node} the ${set.length - 1} left are not a majority of them, so none can be chosen as sure to hold every acknowledged write. ` +
            (set.length === 2 ? (this.map.replicationFactor === 2 ? 'With replication factor 2 a node that is gone for good cannot be removed safely; ' : `its set is short of the factor (${this.map.replicationFactor}) until the coordinator refills it, once its leader is elected; `) : '') +
            'bring the node back, then remove it once its slices have more replicas',
        );
      }
    }
    if ([...this.mover.moving.values()].some((m) => m.from === node || m.to === node)) {
      throw new KeysliceError('InvalidState', `a slice move to or from ${node} is in flight; retry when it ends (keyslice status)`);
    }
    const short = this.slicesShortOfLiveMajority(index, held);
    if (short.length > 0 && !force) {
      const e = short[0];
      const down = [...new Set(short.flatMap((x) => x.down))].map((n) => this.map.nodes[n]);
      throw new KeysliceError(
        'ReplicaMajorityDown',
        `removing ${node} would leave ${short.length} slice${short.length === 1 ? '' : 's'} without a majority of live replicas (e.g. slice ${e.slice}: ${e.up} of its ${e.size} replicas up besides ${node}, not a majority), ` +
          `so they could elect no leader nor commit a write until ${down.join(', ')} ${down.length === 1 ? 'is' : 'are'} back; nothing was changed. ` +
          `Bring ${down.length === 1 ? 'that node' : 'those nodes'} back first, or remove it anyway with: keyslice remove ${node} --force (those slices stay unavailable until ${down.length === 1 ? 'it is' : 'they are'} back, and for good if ${down.length === 1 ? 'it never comes' : 'they never come'} back)`,
      );
    }
    return short;
  }

  /** Before `keyslice remove` of node `index` while it is up: hands the leadership of each replicated slice it leads to a
   * replica that stays (handOverTarget), as a drain step does, so that the removal is led on by those leaders rather
   * than deposing this one with its writes not yet committed (docs/replication.md, "Remove"). Waits until each such
   * slice has an elected leader on another node, at most LEADER_HANDOVER_BEFORE_CHANGE_MS; then the removal goes on
   * and the slices still led here elect, as without a handover (logged; counted in status by remove once the node is
   * out). Answers how many slices' handovers were given up, and how many were handed over (a save of the removal that
   * fails after them says so: notRemoved). */
  private async handOverLeaderships(index: number): Promise<{ gaveUp: number; handed: number }> {
    assert(this.removing.has(index), 'leaderships are handed over only for a node being removed');
    const ledHere = () => this.map.slicesOf(index).filter((s) => this.map.replicasOf(s).length > 1);
    // Each slice led here at the start or since (an election may choose this node while it waits) that still holds a
    // replica here, until another node leads it by an election for its set: a handover names its target in the map at
    // once, so a slice no longer named here may still have its election under way, which the removal would cut off.
    const watched = new Set<number>();
    const handing = () => {
      for (const s of ledHere()) watched.add(s);
      return [...watched].filter((s) => this.map.replicasOf(s).includes(index) && (this.map.ownerOf(s) === index || this.leaders.electedTerm(s) === null));
    };
    // Every other slice holding a replica here whose handover (leadership rebalancing's, begun before this remove: it
    // starts none while one runs) or election is under way: the removal's change would cut it off too, and elect again
    // (change_chained). Waited for within the same bound; not counted as given up, as this node did not lead it. Not a
    // slice left short of a live majority without this node (a forced remove): its election may never finish (one
    // without a majority connected waits), and finished, its leader would commit nothing after the change, which
    // counts the set before it too, until its replicas that are down are back: waiting for it would only hold the
    // remove, up to the whole bound (test/replica-map.test.ts: 5,017 ms for one such slice).
    const busy = () => {
      const unelected = this.replicatedHeldBy(index).filter((s) => !watched.has(s) && this.leaders.electedTerm(s) === null);
      const short = new Set(this.slicesShortOfLiveMajority(index, unelected).map((x) => x.slice));
      return unelected.filter((s) => !short.has(s));
    };
    const pending = () => [...handing(), ...busy()];
    if (pending().length === 0 || !this.isUp(index)) return { gaveUp: 0, handed: 0 };
    const started = performance.now();
    const until = started + LEADER_HANDOVER_BEFORE_CHANGE_MS;
    // A handover's save that failed (a full disk): the removal's own save, after the wait, would fail as well (the
    // same file, written a moment later), so the remove is refused now rather than after the whole bound. Not a
    // write made to find out: the handover's own, which the remove would have made anyway. So it is tried at once, even
    // while the map's save backoff runs (handOver with `unsaved`): the remove retries none, and waiting the backoff out
    // would delay its answer, up to the whole bound where other saves kept failing and pushing the backoff on.
    let unsaved = null as MapSaveError | null;
    let handed = 0;
    for (let i = 0; i < LEADER_HANDOVER_BEFORE_CHANGE_MS / REPLICA_CATCH_UP_PROBE_MS + 1 && performance.now() < until && pending().length > 0; i++) {
      const moves: { slice: number; to: number }[] = [];
      const counts = this.map.counts();
      for (const slice of ledHere()) {
        const term = this.leaders.electedTerm(slice);
        if (term === null || !this.leaders.settled(slice) || this.leaders.leaderOf(slice) !== index) continue;
        const to = this.handOverTarget(slice, this.map.replicasOf(slice).filter((n) => n !== index), term, counts);
        if (to !== null) moves.push({ slice, to });
      }
      if (moves.length > 0) handed += this.leaders.handOver(moves, (err) => (unsaved = err));
      if (unsaved !== null) throw notRemoved(this.map.nodes[index], unsaved, handed);
      await new Promise((r) => setTimeout(r, REPLICA_CATCH_UP_PROBE_MS));
    }
    const left = handing();
    const unelected = busy();
    // The wait as this process measured it (a test bounds the remove by it, not by its own clock on a loaded machine).
    const waited = `waited ${Math.round(performance.now() - started)} ms`;
    if (left.length > 0) {
      this.log(`remove: the leadership of ${left.length} slices (e.g. slice ${left[0]}) on ${this.map.nodes[index]} was not handed over (an election on another node) within ${LEADER_HANDOVER_BEFORE_CHANGE_MS} ms (${waited}); the node is removed all the same and they elect`);
    } else if (watched.size > 0) {
      this.log(`remove: handed the leadership of ${watched.size} slices on ${this.map.nodes[index]} to replicas that stay (${waited})`);
    }
    if (unelected.length > 0) this.log(`remove: ${unelected.length} slices holding a replica on ${this.map.nodes[index]} (e.g. slice ${unelected[0]}) still had a handover or an election under way after ${LEADER_HANDOVER_BEFORE_CHANGE_MS} ms (${waited}); the node is removed all the same and they elect again`);
    return { gaveUp: left.length, handed };
  }

  /** The replica of `kept` (those a change keeps) that the map names as the slice's leader when the change takes its
   * leader's replica out, until the slice elects (a drain step's or a remove's handover given up): the first that may
   * take a leadership (active, up, not being removed itself: two removes may run at once) and holds the barrier of
   * the leader's term `term`. Routers send to the map's leader
   * meanwhile, and the first one that is up may be the frozen target of the handover given up (up for a coordinator
   * that knows its node by address), where writes would stall. "Holds" is said lately: in a Pong at most
   * probeIntervalMs old, the age a handover target's must have (handOverTarget), as a replica that confirmed the term
   * and froze since would otherwise be named. Where none said so lately (a remove of a node that is down tried no
   * handover, so nothing asked the replicas kept; askKeptLately asks them first), one that answers (ReplicaLeaders.answers),
   * holding the barrier by a Pong of any age first: the map's own rule (the first follower that is up) would name a
   * frozen one known by address. undefined: none (the map's own rule names one). The rule is leaderUntilElected's,
   * below (the simulation's remove and drain steps use it). */
  private leaderUntilElected(slice: number, kept: readonly number[], term: number): number | undefined {
    return leaderUntilElected(kept, (n) => this.mayTakeLeadership(n), (n) => this.holdsLately(slice, n, term), {
      answers: (n) => this.leaders.answers(n, slice),
      heldOnce: (n) => this.leaders.holdsTerm(slice, n, term),
    });
  }

  /** Whether node `n`'s replica of the slice said lately (a Pong at most probeIntervalMs old, the age a handover
   * target's must have) that it holds the barrier of term `term`; asks it (holdsTerm) where not, or half that old. */
  private holdsLately(slice: number, n: number, term: number): boolean {
    return this.leaders.holdsTerm(slice, n, term, this.leaders.probeIntervalMs);
  }

  /** Before keyslice remove names, for each replicated slice node `index` still leads in the map (its handover given
   * up, or none tried: its node down), the leader until the slice elects (removeReplicated, leaderUntilElected): asks
   * the replicas kept (holdsTerm with the age limit sends a Ping) until each such slice has one that said lately it
   * holds the barrier, probeIntervalMs from its start (longer than a node answering takes to count as silent: one
   * frozen then counts as silent, ReplicaLeaders.answers). Without it, after a remove of a node that is down, no replica kept
   * had been asked lately, none was named, and the map named its first follower that is up, frozen or not.
   * The wait is per replica, from when this wait first found it up (and asked it): where none said lately, it goes on
   * while the replica the rule's second choice would name (one that answers) was found up less than probeIntervalMs
   * ago, so at most twice that in all. Timed from the wait's start alone, a frozen replica whose link came up during
   * the wait (its node back from a restart) was first asked too late to count as silent, and was named (the
   * simulation's 'remove-down', seed 1458: asked 40 ms before the naming; docs/replication-notes.md). */
  private async askKeptLately(index: number): Promise<void> {
    const probeMs = this.leaders.probeIntervalMs;
    const started = performance.now();
    const upFrom = new Map<number, number>();
    /** Whether to wait on: a slice has no replica kept that said lately it holds the barrier, and keepAskingKept says
     * so (the wait younger than probeIntervalMs, or the replica its second choice names found up more lately). Every
     * slice is looked at (no early stop): holdsLately asks each replica it finds not saying so. */
    const waitOn = (now: number): boolean => {
      let wait = false;
      for (const s of this.map.slicesOf(index)) {
        const term = this.leaders.electedTerm(s);
        const kept = this.map.replicasOf(s).filter((n) => n !== index);
        if (kept.length === 0 || term === null) continue;
        // (One that went down meanwhile is asked afresh once back: what it was asked before is forgotten with its link.)
        for (const n of kept) if (!this.mayTakeLeadership(n)) upFrom.delete(n);
        else if (!upFrom.has(n)) upFrom.set(n, now);
        const named = this.leaderUntilElected(s, kept, term);
        if (named !== undefined && this.holdsLately(s, named, term)) continue;
        if (keepAskingKept(now, started, upFrom, named, probeMs)) wait = true;
      }
      return wait;
    };
    const stepMs = FAILOVER_TICK_MS / 2;
    for (let i = 0; i < (2 * probeMs) / stepMs + 1 && performance.now() - started < 2 * probeMs && waitOn(performance.now()); i++) {
      await new Promise((r) => setTimeout(r, stepMs));
    }
  }

  /** A node that leadership may be handed to (for balance, or before a change takes a leader out): active, up, and not
   * being removed. */
  private mayTakeLeadership(n: number): boolean {
    return this.map.statusOf(n) === 'active' && this.isUp(n) && !this.removing.has(n);
  }

  /** The replica of `rest` (those a change keeps) to hand the slice's leadership to before the change takes its
   * leader's replica out: on an active node that is up, saying lately (Pong) that it durably holds the barrier of the
   * leader's term `term` (so it can win the handover's election), leading fewest slices; null: none yet (each is asked,
   * holdsTerm, so that a later turn may find one). `counts`: slices led per node as they will be once the handovers
   * chosen before it in the same turn are made, which it updates for its own (else a turn's handovers all go to the
   * node leading fewest, and leadership rebalancing hands them on again after). */
  private handOverTarget(slice: number, rest: readonly number[], term: number, counts: number[]): number | null {
    let best: number | null = null;
    for (const n of rest) {
      if (!this.mayTakeLeadership(n) || !this.holdsLately(slice, n, term)) continue;
      if (best === null || counts[n] < counts[best]) best = n;
    }
    assert(best === null || (rest.includes(best) && this.map.replicasOf(slice).includes(best)), `slice ${slice}'s leadership goes to a replica that stays in its set`);
    if (best !== null) {
      counts[best]++;
      counts[this.map.ownerOf(slice)]--;
    }
    return best;
  }

  /** The slices whose last replica-set change took node `index`'s replica out and has not settled: it still counts
   * the node (joint majorities), so a remove waits for none (status: NodeStatusReport.unsettledChanges). */
  private unsettledCounting(index: number): number[] {
    return Array.from({ length: this.map.sliceCount }, (_, s) => s).filter((s) => !this.map.replicasOf(s).includes(index) && !this.leaders.settled(s) && this.leaders.membersOf(s).includes(index));
  }

  /** The slices of `held` (node `index` holds a replica of each) whose other replicas that are up are fewer than a
   * majority of their set: without the node's answer their elections (which count the set before a change until it
   * settles) cannot finish while those replicas are down. With each one's count up and the nodes down. */
  private slicesShortOfLiveMajority(index: number, held: readonly number[]): ShortSlice[] {
    const out: { slice: number; up: number; size: number; down: number[] }[] = [];
    for (const slice of held) {
      const set = this.map.replicasOf(slice);
      const rest = set.filter((n) => n !== index);
      const up = rest.filter((n) => this.isUp(n)).length;
      if (up < majority(set.length)) out.push({ slice, up, size: set.length, down: rest.filter((n) => !this.isUp(n)) });
    }
    return out;
  }

  /** Hands the slices of node `index` to the active nodes that are up (fewest slices
   * first), empty, and removes the node, in one map change. Each target first drops
   * whatever it holds of the slice (a failed move's leftover) and takes it as its own
   * (MoveBegin, then MoveApply with no changes), so nothing stale comes back. */
  private async forgetSlices(index: number, slices: number[]): Promise<void> {
    const node = this.map.nodes[index];
    if (this.forgetting) throw new KeysliceError('InvalidState', 'another forget-data removal is running; retry when it ends');
    if ([...this.mover.moving.values()].some((m) => m.from === node || m.to === node)) {
      throw new KeysliceError('InvalidState', `a slice move to or from ${node} is in flight; retry when it ends (keyslice status)`);
    }
    const targets = this.map.nodes.map((_, i) => i).filter((i) => i !== index && this.map.statusOf(i) === 'active' && this.links[i].state === 'ready');
    if (targets.length === 0) throw new KeysliceError('InvalidState', `no other active node is up to take the ${slices.length} slices of ${node}`);
    this.forgetting = true;
    // Nothing more goes to the node, and the rebalancer no longer counts it as up.
    this.links[index].close();
    try {
      const counts = this.map.counts();
      const to = slices.map(() => {
        const t = targets.reduce((a, b) => (counts[b] < counts[a] ? b : a));
        counts[t]++;
        return t;
      });
      const handed = slices.map((s, i) => {
        const link = this.links[to[i]];
        return link.send(s, [SliceOp.MoveBegin, s]).then(() => link.send(s, [SliceOp.MoveApply, s, noMovedEffects(), true]));
      });
      const outcomes = await Promise.allSettled(handed);
      const failed = outcomes.find((o) => o.status === 'rejected');
      try {
        if (failed !== undefined) {
          throw new KeysliceError('Unavailable', `handing the slices of ${node} over failed (${(failed as PromiseRejectedResult).reason?.message ?? failed}); nothing changed, retry`);
        }
        // A target drained (or removed) while the hand-over was awaited: the map would give it slices it is leaving.
        const left = to.filter((t) => this.map.statusOf(t) !== 'active');
        if (left.length > 0) {
          throw new KeysliceError('Unavailable', `${this.map.nodes[left[0]]}, which took slices of ${node}, is no longer active (drained or removed meanwhile); nothing changed, retry`);
        }
        this.map.forgetNode(index, slices, to);
      } catch (err) {
        // Whatever failed (the hand-over, a target that left, a save, which removeNow answers, or a broken invariant),
        // the map still names the node as their owner: back as it was, the targets forget the slices and the node
        // stays (its link, closed above, is opened again).
        if (this.map.statusOf(index) !== 'removed') {
          await Promise.allSettled(slices.map((s, i) => this.links[to[i]].send(s, [SliceOp.MoveAbort, s, 'target'])));
          this.links[index] = this.newLink(node, index);
        }
        throw err;
      }
      assert(this.map.slicesOf(index).length === 0, 'a forgotten node owns no slice');
      this.log(`node ${node} removed with its data given up: ${slices.length} slices lost their data and went, empty, to ${new Set(to).size} active nodes`);
    } finally {
      this.forgetting = false;
    }
  }

  /** Pings every node's link (NodeLink.probe), once a turn: its pong keeps the link's heardAt young while the node's
   * event loop runs, whatever else it is asked (a node that holds no replica, or one whose every replica's step was
   * undone away, is asked nothing else), so that a frozen node known by address (no heartbeats, its link open) is found
   * silent (countsUp) and one that thawed counts up again at the next turn. */
  private pingLinks(): void {
    for (const link of this.links) link.probe();
  }

  /** Since when each node has been down, as this process saw it (autoRemove and deadReplica count from it): not
   * counted up (countsUp), so a node silent past the heartbeat bound with its link open from when it was found so
   * (autoRemove and deadReplica still take only a node that is not up, isUp), said in the log as it changes
   * (sayCounted); and since when each step's new replica has not answered for it (unansweringSince, per slice: its node
   * down, or the node's worker that runs the slice stuck; undoStalledMoves counts from it). */
  private noteDown(): void {
    const now = performance.now();
    for (let i = 0; i < this.map.nodes.length; i++) {
      const removed = this.map.statusOf(i) === 'removed';
      const up = !removed && this.countsUp(i);
      if (removed || up) this.downSince.delete(i);
      else if (!this.downSince.has(i)) this.downSince.set(i, now);
      this.sayCounted(i, removed, up, now);
    }
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      const to = this.map.joiningOf(slice);
      const was = this.unansweringSince.get(slice);
      if (to < 0 || this.map.statusOf(to) === 'removed' || this.answersForStep(to, slice)) this.unansweringSince.delete(slice);
      else if (was === undefined || was.node !== to) this.unansweringSince.set(slice, { node: to, since: now });
    }
  }

  /** Says (countLog) when a node stops counting up (its link lost, or nothing came from it for
   * NODE_HEARTBEAT_TIMEOUT_MS) and when it counts up again: the log tells a node found down from this process's own
   * stall, which counts none down (turnDue). */
  private sayCounted(i: number, removed: boolean, up: boolean, now: number): void {
    if (removed) return this.countLog.forget(i);
    const link = this.links[i];
    const why = () => (link === undefined ? 'it has no link' : link.state !== 'ready' ? `its link is ${link.state}` : `nothing came from it for ${(link.heardMsAgo(now) / 1000).toFixed(1)} s`);
    this.countLog.note(i, this.map.nodes[i], up, why, now);
  }

  /** --remove-down-after-ms: removes a node that has been down that long, as `keyslice remove` would
   * without --force (which refuses to lose a slice's last copy or the majority of its replicas, and to leave a
   * slice fewer replicas that are up than a majority, so that the slices keep a leader). Also waits while some
   * replicated slice has no elected leader (its election needs the replicas that are up).
   * The clock of a node starts when this process first sees it down (at the latest, at its start). */
  private async autoRemove(): Promise<void> {
    if (this.removeDownAfterMs <= 0 || this.autoRemoving) return;
    this.autoRemoving = true;
    try {
      const now = performance.now();
      for (let i = 0; i < this.map.nodes.length; i++) {
        // noteDown (run just before) keeps downSince; up and removed are asked again, as a remove below awaits.
        const since = this.downSince.get(i);
        if (since === undefined || this.map.statusOf(i) === 'removed' || this.isUp(i)) {
          this.autoRemoveRefusal.delete(i);
          continue;
        }
        const downMs = now - since;
        if (downMs < this.removeDownAfterMs) continue;
        // Its removal's save waits out the map's save backoff, as the turn's other map changes do (refillReplicas).
        if (!this.leaders.mapSaveDue()) continue;
        const node = this.map.nodes[i];
        let problem = this.autoRemoveProblem();
        if (problem === null) {
          // Not forgetData: a node that holds the only copy of slices is refused, as an operator's remove is.
          problem = await this.remove(node).then(() => null, (err: Error) => err.message);
          if (problem === null) {
            this.log(`node ${node} was down for ${Math.round(downMs / 1000)} s (--remove-down-after-ms ${this.removeDownAfterMs}): removed automatically`);
            this.downSince.delete(i);
            this.autoRemoveRefusal.delete(i);
            continue;
          }
        }
        if (this.autoRemoveRefusal.get(i) !== problem) this.log(`node ${node} has been down for ${Math.round(downMs / 1000)} s but is not removed automatically: ${problem}`);
        this.autoRemoveRefusal.set(i, problem);
      }
    } finally {
      this.autoRemoving = false;
    }
  }

  /** Why the node must not be removed automatically now (beyond what remove itself refuses), or null. */
  private autoRemoveProblem(): string | null {
    const s = this.leaders.summary();
    if (s.led < s.replicated) return `${s.replicated - s.led} replicated slices have no elected leader that commits yet; removing a node changes replica sets only once every slice has one`;
    return null;
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
    return beat === undefined || performance.now() - beat < NODE_HEARTBEAT_TIMEOUT_MS;
  }

  /** Up as placement (map.takesReplica), status, a drain step's wait and the undo of a stalled move or drain step count it: up
   * (isUp) and heard from (NodeLink.heardAt: any frame, a pong to pingLinks' ping, a heartbeat) within
   * NODE_HEARTBEAT_TIMEOUT_MS. A node known by address has no heartbeats, and frozen (SIGSTOP) it keeps its link open,
   * so isUp says it is up for good: a drain step whose new replica froze waited for it without end, and undone,
   * placement would have put the new replica back on it. Silent that long it counts down here, as a node with
   * heartbeats counts down after the same time without one; once anything comes from it it is an ordinary node again. */
  private countsUp(index: number): boolean {
    return countsUpBy(this.isUp(index), this.links[index].heardMsAgo(), NODE_HEARTBEAT_TIMEOUT_MS);
  }

  /** Whether node `index` answers for a drain step of `slice` (drainStepCatchUp's wait, the undo of a step onto it,
   * placement and replica rebalancing of the slice): counted up (countsUp) and its worker that runs the slice
   * (workerOf) answering what it was asked (no Ping or Prepare left unanswered NODE_HEARTBEAT_TIMEOUT_MS or longer:
   * ReplicaLeaders.workerSilentMs, whose time is kept across the drop of a stuck worker's questions and cleared by its
   * answer alone). A node whose main thread pongs while a worker is stuck counts up (its link's clock), but that worker's
   * replica never says it holds the barrier: a kept one would hold the step of a follower's drain (no handover, so no
   * bound) without end, as a frozen one did before countsUp; and once the undo of a step onto it settled (its questions
   * of the slice dropped) a node-wide rule counted it answering again, and rebalancing moved the slice straight back.
   * The worker's, not the node's: the node's other workers take new replicas of their slices (docs/replication.md, "A
   * kept replica that freezes", "A worker stuck while its node pongs"). */
  private answersForStep(index: number, slice: number): boolean {
    return answersForStepBy(this.countsUp(index), this.leaders.workerSilentMs(index, slice), NODE_HEARTBEAT_TIMEOUT_MS);
  }

  /** Whether node `index` counts up with every worker answering (the map's isUp: which replica it names as leader where
   * membership names none, status): answersForStep of a slice of each worker. */
  private everyWorkerAnswers(index: number): boolean {
    return this.workerSlices(index).every((slice) => this.answersForStep(index, slice));
  }

  /** One slice per worker of node `index` that runs any (its first: slicesOfWorker), as many as it has (1 before its
   * Hello). */
  private workerSlices(index: number): number[] {
    const workers = Math.max(1, this.links[index]?.workerCount ?? 1);
    const slices: number[] = [];
    for (let w = 0; w < workers; w++) {
      const first = slicesOfWorker(w, workers, this.map.sliceCount).next();
      if (!first.done) slices.push(first.value);
    }
    return slices;
  }

  /** What map.takesReplica answers depend on besides the map (ClusterMap.placementKey): per node, which of its workers
   * take new replicas (one slice of each: workerSlices). */
  private placementKey(): string {
    return this.map.nodes.map((_, i) => (this.links[i] === undefined ? (this.registering ? 'r' : '-') : this.workerSlices(i).map((s) => (this.map.takesReplica(i, s) ? 1 : 0)).join(''))).join(',');
  }

  /** Why placement takes none of `nodes` (active, outside the set of `slice`; map.takesReplica false for each), for a
   * drain's wait (status): down (countsUp: also silent past the bound), its worker of the slice leaving questions
   * unanswered though the node pongs, or about to be removed. "X, Y are down" where all are. */
  private whyNoNewReplicas(nodes: readonly number[], slice: number): string {
    const why = (i: number): string => {
      if (this.links[i] === undefined || !this.countsUp(i)) return 'down';
      if (!this.answersForStep(i, slice)) return `leaving questions unanswered over ${NODE_HEARTBEAT_TIMEOUT_MS / 1000} s though it answers pings (the worker that would run the slice is stuck, and takes no new replica until it answers)`;
      return 'about to be removed';
    };
    const reasons = nodes.map(why);
    if (reasons.every((r) => r === 'down')) return `${nodes.map((n) => this.map.nodes[n]).join(', ')} ${nodes.length === 1 ? 'is' : 'are'} down`;
    return nodes.map((n, k) => `${this.map.nodes[n]} ${reasons[k] === 'down' ? 'is down' : `is ${reasons[k]}`}`).join('; ');
  }

  /** Whether nothing came from node `index` for NODE_HEARTBEAT_TIMEOUT_MS (its link's clock, whatever its state). */
  private silentPastBound(index: number): boolean {
    return silentPastBoundBy(this.links[index].heardMsAgo(), NODE_HEARTBEAT_TIMEOUT_MS);
  }

  /** Starts moves until MOVES_IN_FLIGHT_MAX run: first every slice of a draining node,
   * then from the node with the most slices to the one with the fewest while they
   * differ by more than one. Nodes that are down are counted but not moved to or from. */
  rebalance(): void {
    // drainReplicas (below) says again what waits, if anything still does.
    this.replicaWaits = [];
    // A replica move started before (a coordinator restarted with --rebalance no) is finished all the same.
    if (!this.autoRebalance && !this.map.nodes.some((_, i) => this.map.statusOf(i) === 'draining') && this.movingReplicas() === 0) return;
    // Replicated slices are not copied by slice moves: a drain, and replica rebalancing onto a node that
    // joined, change their replica sets (drainReplicas, rebalanceReplicas), and leaderships are handed over
    // between replicas (rebalanceLeaders).
    if (this.map.replicationFactor > 1) {
      this.undoStalledMoves();
      this.drainReplicas();
      if (this.autoRebalance) {
        this.rebalanceReplicas();
        this.rebalanceLeaders();
      }
      return;
    }
    // A move ends in its switch's save (map.setOwner): while the map's save backoff runs (ReplicaLeaders.mapSaveDue: the
    // disk failed lately) none starts, rather than copying a whole slice to fail at that save.
    if (!this.leaders.mapSaveDue()) return;
    const now = performance.now();
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
          this.backoffUntil.set(source, performance.now() + MOVE_RETRY_DELAY_MS);
          this.backoffUntil.set(lightest, performance.now() + MOVE_RETRY_DELAY_MS);
        }
        this.rebalance();
      });
    }
  }

  /** A drain with replicated slices (docs/replication.md), and the second step of a replica move
   * (rebalanceReplicas). Setting the node draining placed a new replica on an active node for each slice
   * it holds one of (a move placed one on the node that joined, and marked the replica it replaces
   * leaving); the sets' elections (by joint majorities) told their leaders. Here a slice's replica on the
   * draining node (or the leaving one) leaves the set once the leader elected for the set is known, the change
   * settled, and every other replica of it that is up says (Pong) that it durably holds that leader's barrier:
   * every write acknowledged before, so the new replica has caught up. A replica of the set before on a node that is
   * down is not waited for (it could be for good: remove, or removal after a time down, replaces it), as long as those that
   * hold the barrier and are up are a majority of the set that is left, which then elects and commits without it
   * (one that held it on a node down since counts for nothing: drainStepCatchUp); the new replica is waited for while
   * its node is down, caught up or not, and undoStalledMoves takes it out if it stays down. In a slice a drain drains, a
   * follower on a node down for drainReplaceDownMs is first replaced on a node that is up, as keyslice remove
   * of its node would (deadReplica, replaceDeadReplicas), so that the drain leaves no slice it drained with a replica
   * on a node that stays down while another node is up to take it. Slices the
   * node led are led, in the map, by another replica, and elected again (that election counts the larger set's
   * majority). What is ready in one turn leaves in one map change. Each slice that waits is kept with why
   * (replicaWaits: status, keyslice drain). */
  private drainReplicas(): void {
    const drops: { slice: number; node: number; leader?: number }[] = [];
    const replacements: { slice: number; node: number }[] = [];
    const handoffs: { slice: number; to: number }[] = [];
    const gaveUp: number[] = [];
    // Slices led per node, for the handover targets of this turn (handOverTarget updates it): taken at the first one,
    // as a tick with no leader leaving (nearly every tick) needs none.
    let ledCounts: number[] | null = null;
    const waits: { slice: number; node: number; why: string }[] = [];
    // A wait is for one leaving replica while it leads: one that no longer leaves, or no longer leads (a handover made,
    // then its new leader lost), starts again from nothing if it leads again. It runs on through an election (no
    // leader): a handover's election that names the old leader again does not start it again (a target that froze
    // would, each time it was handed to).
    for (const [slice, h] of this.handingOver) {
      if (this.map.leaverOf(slice) !== h.node || ((this.leaders.leaderOf(slice) ?? h.node) !== h.node && this.map.ownerOf(slice) !== h.node)) this.handingOver.delete(slice);
    }
    const names = (nodes: readonly number[]) => nodes.map((n) => this.map.nodes[n]).join(', ');
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      const set = this.map.replicasOf(slice);
      const node = this.map.leaverOf(slice);
      if (node < 0) continue;
      const wait = (why: string) => waits.push({ slice, node, why });
      const down = set.filter((n) => !this.isUp(n));
      const term = this.leaders.electedTerm(slice);
      // A set of the change (joint majorities) with no majority up: nothing goes on until its nodes down are back. This
      // is the one wait on a node that is down with no bound (at R=2, or a second replica of a set down), said as such.
      const sets = this.leaders.setsOf(slice);
      const stuck = sets.find((s) => s.filter((n) => this.isUp(n)).length < majority(s.length));
      const lacking = stuck?.filter((n) => !this.isUp(n)) ?? [];
      // How many of those must be back for a majority: one may be enough of several down (a set of 5 with 3 down).
      const needed = stuck === undefined ? 0 : majority(stuck.length) - (stuck.length - lacking.length);
      const back = needed === lacking.length ? `${lacking.length === 1 ? `${names(lacking)} is` : `all of ${names(lacking)} are`} back` : `${needed} of ${names(lacking)} ${needed === 1 ? 'is' : 'are'} back`;
      const until =
        stuck === undefined
          ? ''
          : `; it waits until ${back}: ${stuck === sets[0] ? 'its replica set' : 'the set before its last change, which has not settled,'} (${names(stuck)}) has ${stuck.length - lacking.length} of ${stuck.length} replicas up, no majority`;
      if (term === null) {
        wait(`no leader elected for its replica set yet${stuck !== undefined ? until : down.length > 0 ? ` (replicas on ${names(down)} are down; it needs a majority of each of its sets up)` : ' (an election is under way)'}`);
        continue;
      }
      // The change that added the new replica settles first (joint majorities, docs/replication.md): the next one
      // then counts only the larger set, whose majorities the replicas left make without the drained node.
      if (!this.leaders.settled(slice)) {
        wait(`its last replica-set change has not settled yet (the leader's first record of term ${term} is not yet on a majority of both sets)${stuck !== undefined ? until : down.length > 0 ? `; replicas on ${names(down)} are down` : ''}`);
        continue;
      }
      const rest = set.filter((n) => n !== node);
      // And only once the replacement is in the set: the replicas left on active nodes are as many as the factor.
      // Placement skips nodes that are down, so with none up to take it the set has no replacement, and the drain
      // waits (placement adds one when a node is up: refillReplicas) rather than leave the slice a replica short.
      if (rest.filter((n) => this.map.statusOf(n) === 'active').length < this.map.replicationFactor) {
        const idle = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active' && !set.includes(i));
        // Placement (refillReplicas, on the tick) puts the new replica on an active node that is up as the map counts it
        // whose worker of the slice answers (map.takesReplica: not one being removed), as it puts any; it skipped this slice when the drain began (a change not
        // settled then) or found no such node up.
        if (idle.some((i) => this.map.takesReplica(i, slice))) wait('its new replica is placed at the next tick, on an active node that is up');
        else wait(`no active node that is up is left to take its new replica${idle.length > 0 ? ` (${this.whyNoNewReplicas(idle, slice)})` : ''}`);
        continue;
      }
      // A drain leaves no slice it drains with a replica on a node that stays down while another node is up to take
      // it: after drainReplaceDownMs down, that replica is replaced as keyslice remove of its node would replace
      // it (one change, one out and one in), and the drain step goes on once the set settled again. Until then the step
      // waits, so that a node restarting keeps its replicas. With no node up to take it, the step goes on without it.
      const dead = this.map.statusOf(node) === 'draining' ? this.deadReplica(slice, rest) : null;
      if (dead !== null && dead.replace) {
        replacements.push({ slice, node: dead.node });
        continue;
      }
      if (dead !== null) {
        wait(`its replica on ${names([dead.node])} is down (for ${(dead.downMs / 1000).toFixed(1)} s): still down after ${this.drainReplaceDownMs / 1000} s, it is replaced on a node that is up, as keyslice remove would, and the drain goes on`);
        continue;
      }
      const fresh = this.map.joiningOf(slice);
      // Past its leader's handover bound: it elects (below), and the catch-up rule asks less (drainStepCatchUp).
      const handoverSince = this.handingOver.get(slice)?.since;
      const handoverSpent = handoverSince !== undefined && performance.now() - handoverSince >= LEADER_HANDOVER_BEFORE_CHANGE_MS;
      // Up for the step's wait: answersForStep (not silent past the heartbeat bound, by its link's clock or by the
      // questions it owes). A kept replica frozen with its link open, after a handover that completed (a new term, which
      // it cannot hold), or one whose worker is stuck while its node pongs, was waited for without end; counted down, the
      // step still waits for the new replica and a majority of those kept that hold the barrier and answer
      // (drainStepCatchUp), and goes on with them as for a node down. A new replica that does not answer for the step
      // (counted down, or owing answers past the bound while its node pongs: a worker stuck) is undone after
      // --move-undo-down-ms (undoStalledMoves), and placed on a node that answers.
      const answering = (n: number) => this.answersForStep(n, slice);
      // Where the map will name the leader from those kept (the leaving replica leads in it: a handover given up, or
      // its node down), each must have said so lately, as leaderUntilElected asks (and so is asked again meanwhile).
      const maxAgeMs = this.map.ownerOf(slice) === node ? this.leaders.probeIntervalMs : Infinity;
      const { behind, holdingUp } = drainStepCatchUp(rest, fresh, (n) => this.leaders.holdsTerm(slice, n, term, maxAgeMs), answering, handoverSpent);
      if (behind.length > 0) {
        const behindDown = behind.filter((n) => !answering(n));
        wait(
          behind.length === 1 && behind[0] === fresh && behindDown.length === 1
            ? this.countsUp(fresh)
              ? `its new replica on ${names(behind)} has left a question unanswered over ${NODE_HEARTBEAT_TIMEOUT_MS / 1000} s though its node answers pings (a worker stuck): the step goes on once it answers and holds the leader's first record of term ${term}, or is undone once it has left questions unanswered ${this.downWaits.moveUndoMs / 1000} s more and placed on another node`
              : `its new replica on ${names(behind)} is ${this.isUp(fresh) ? `silent (over ${NODE_HEARTBEAT_TIMEOUT_MS / 1000} s, its link open)` : 'down'}: the step goes on once it ${this.isUp(fresh) ? 'answers' : 'is back'} and holds the leader's first record of term ${term}, or is undone once it has been ${this.isUp(fresh) ? 'silent' : 'down'} ${this.downWaits.moveUndoMs / 1000} s more and placed on another node`
            : `the replica on ${names(behind)} has not caught up yet (it must hold the leader's first record of term ${term})${behindDown.length > 0 ? `; ${names(behindDown)} is down or silent` : ''}`,
        );
        continue;
      }
      if (holdingUp.length < majority(rest.length)) {
        wait(`its replicas on ${names(rest.filter((n) => !holdingUp.includes(n)))} are down (or silent over ${NODE_HEARTBEAT_TIMEOUT_MS / 1000} s) and the caught-up ones that answer are no majority of the ${rest.length} it would keep`);
        continue;
      }
      // A leaving replica that leads hands its leadership to a replica that stays first (a handover: the old leader gets
      // no new writes, the new one waits until it holds the old one's last record, then wins an election), so that
      // the change is led on and the writes the old leader had not committed commit rather than getting an unknown
      // outcome. Bounded: past LEADER_HANDOVER_BEFORE_CHANGE_MS the replica leaves all the same and the slice elects,
      // as before. A leader whose node is down is not waited for (its slice elects anyway).
      const leads = this.leaders.leaderOf(slice) === node || this.map.ownerOf(slice) === node;
      if (leads && this.isUp(node)) {
        const now = performance.now();
        const began = this.handingOver.get(slice) ?? { node, since: now };
        this.handingOver.set(slice, began);
        if (now - began.since < LEADER_HANDOVER_BEFORE_CHANGE_MS) {
          const to = this.handOverTarget(slice, rest, term, (ledCounts ??= this.map.counts()));
          if (to !== null) handoffs.push({ slice, to });
          wait(`its leadership is being handed to ${to !== null ? names([to]) : 'a replica that stays (none said lately that it holds the leader\'s first record yet)'} before its replica on ${names([node])} leaves, so that the change is led on (at most ${LEADER_HANDOVER_BEFORE_CHANGE_MS / 1000} s, then it elects)`);
          continue;
        }
        // Its clock is kept until the drop is saved (below): a failed save must not start the handover's wait again,
        // nor count the same give-up once a turn while the fault lasts.
        gaveUp.push(slice);
      } else this.handingOver.delete(slice);
      // The invariant of a replica-set change: the replicas left that hold every acknowledged write and are up are a
      // majority of the set that is left, so it elects and commits without the replica that leaves. (Joint majorities
      // keep every acknowledged write whatever they hold; this is for the slice to go on serving.)
      assert(rest.length >= majority(set.length) && holdingUp.length >= majority(rest.length) && rest.length >= 2, `slice ${slice} keeps a majority of its replicas up and caught up`);
      drops.push({ slice, node, leader: this.leaderUntilElected(slice, rest, term) });
    }
    this.replicaWaits = waits;
    if (replacements.length > 0) this.replaceDeadReplicas(replacements);
    if (handoffs.length > 0) {
      const n = this.leaders.handOver(handoffs);
      if (n > 0) this.log(`handing the leadership of ${n} slices (e.g. slice ${handoffs[0].slice}) to replicas that stay before their leaders' replicas leave (drain or replica move)`);
    }
    if (drops.length === 0 || !this.leaders.mapSaveDue()) return;
    const moved = drops.filter((d) => this.map.statusOf(d.node) !== 'draining');
    // A failed save (a full disk) leaves the map as it was: the replicas stay, and a later turn drops them again, once the
    // map's save backoff allows (at most MAP_SAVE_RETRY_MS_MAX after the last failed save, and a turn).
    const saved = savedOr(
      () => this.map.dropLeavingReplicas(drops),
      (err) => this.log(`cannot record that ${drops.length} slices' leaving replicas (e.g. slice ${drops[0].slice}'s on ${this.map.nodes[drops[0].node]}) left, in the cluster map (${err.message}); tried again after the map's save backoff (at most ${MAP_SAVE_RETRY_MS_MAX} ms)`),
    );
    if (saved === null) return;
    // Given up once the leaving replicas are out (their slices elect): counted and logged once, with the longest wait as
    // this process measured it (test/drain-handover-bound.test.ts bounds it; a test's own clock runs on a loaded machine).
    const givenUpAt = performance.now();
    let waitedMs = 0;
    for (const slice of gaveUp) {
      waitedMs = Math.max(waitedMs, givenUpAt - (this.handingOver.get(slice)?.since ?? givenUpAt));
      this.handingOver.delete(slice);
    }
    if (gaveUp.length > 0) {
      this.handoversGivenUp += gaveUp.length;
      this.log(`the leadership of ${gaveUp.length} slices (e.g. slice ${gaveUp[0]}) was not handed over within ${LEADER_HANDOVER_BEFORE_CHANGE_MS} ms (waited ${waitedMs.toFixed(0)} ms); their leaders' replicas leave all the same and they elect`);
    }
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.leaders.sync();
    const drained = [...new Set(drops.filter((d) => this.map.statusOf(d.node) === 'draining').map((d) => d.node))];
    const counts = this.map.replicaCounts();
    if (drained.length > 0) {
      this.log(`drain: ${drops.length - moved.length} slices' replicas left ${drained.map((n) => this.map.nodes[n]).join(', ')} (their new replicas caught up); ${drained.map((n) => counts[n]).join(', ')} to go`);
    }
    if (moved.length > 0) {
      this.log(`replica rebalancing: ${moved.length} slices' replicas left ${[...new Set(moved.map((d) => this.map.nodes[d.node]))].join(', ')} (their new replicas caught up); replicas per node now ${counts.filter((_, i) => this.map.statusOf(i) !== 'removed').join(', ')}`);
    }
  }

  /** Of `rest` (the replicas a drain step keeps of a slice whose change settled under an elected leader), one on a node
   * that is down and that keyslice remove of that node would replace now (null: none): a follower on an active node,
   * not the step's new replica (undoStalledMoves takes that one out), whose slice keeps, without it, a majority of its
   * set and a majority of the set up (remove's refusals, ReplicaMajorityDown included), with an active node up (as placement counts it) outside
   * the set to take its place and the drain's own new replica placed (the active replicas kept are the factor, so
   * placement adds exactly one). `replace`: down for drainReplaceDownMs, so replace it now; else the step waits
   * (downMs) for it to come back or be replaced. */
  private deadReplica(slice: number, rest: readonly number[]): { node: number; downMs: number; replace: boolean } | null {
    const set = this.map.replicasOf(slice);
    const fresh = this.map.joiningOf(slice);
    const active = rest.filter((n) => this.map.statusOf(n) === 'active');
    const node = active.find((n) => n !== fresh && n !== this.map.ownerOf(slice) && !this.isUp(n));
    if (node === undefined || active.length !== this.map.replicationFactor || this.mover.moving.has(slice)) return null;
    const left = set.filter((n) => n !== node);
    if (left.length < majority(set.length) || left.filter((n) => this.isUp(n)).length < majority(set.length)) return null;
    // A node to take its place as placement takes one (map.takesReplica: countsUp, its worker of the slice answering,
    // not one being removed), which the map's
    // change then asserts: one isUp counted up but placement did not (silent past the heartbeat bound, its link open)
    // threw out of the tick.
    if (!this.map.nodes.some((_, i) => !set.includes(i) && this.map.statusOf(i) === 'active' && this.map.takesReplica(i, slice))) return null;
    const now = performance.now();
    const downMs = now - (this.downSince.get(node) ?? now);
    return { node, downMs, replace: downMs >= this.drainReplaceDownMs };
  }

  /** How long a drain waits for a follower's node that is down before it replaces that replica (deadReplica):
   * --drain-replace-down-ms (DRAIN_REPLACE_DOWN_MS), or --remove-down-after-ms where that is longer (a node the operator
   * lets be down that long keeps its replicas that long in a drain too). */
  private get drainReplaceDownMs(): number {
    return Math.max(this.downWaits.drainReplaceMs, this.removeDownAfterMs);
  }

  /** Replaces replicas on nodes down for good, as deadReplica chose them for the drain (ClusterMap.replaceDownReplicas,
   * which checks the change itself: one replica out, one in on an active node that is up), in one map change; the
   * nodes learn their sets, then the sets' elections (or leaders leading on) count joint majorities of the set before
   * and after. A failed save is logged and tried again at a later turn, once the map's save backoff allows; a broken
   * invariant is not caught. */
  private replaceDeadReplicas(replacements: readonly { slice: number; node: number }[]): void {
    for (const { slice, node } of replacements) {
      // The set before must be one whose change settled under a leader elected for it, and the replica replaced not
      // that leader's: the change then commits through the leader leading on (joint majorities), with no election
      // that could need the node that is down, and a write acknowledged before is on a majority of the set before.
      // (mayPlace lets a set of one replica change with no leader elected; a replacement needs one even there.)
      assert(this.mayPlace(slice) && this.leaders.electedTerm(slice) !== null, `slice ${slice}, whose replica on node ${node} is replaced, has settled under an elected leader and no whole-slice move copies it`);
      assert(this.leaders.leaderOf(slice) !== node && this.map.ownerOf(slice) !== node, `node ${node}, whose replica of slice ${slice} is replaced, does not lead it`);
    }
    if (!this.leaders.mapSaveDue()) return;
    if (savedOr(() => this.map.replaceDownReplicas(replacements), (err) => this.log(`cannot record the replacement of replicas on nodes that are down (${err.message}); tried again after the map's save backoff (at most ${MAP_SAVE_RETRY_MS_MAX} ms)`)) === null) return;
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.leaders.sync();
    const gone = [...new Set(replacements.map((r) => r.node))];
    this.log(
      `drain: replaced the replicas of ${replacements.length} slices (e.g. slice ${replacements[0].slice}) on ${gone.map((n) => this.map.nodes[n]).join(', ')}, down for at least ${this.drainReplaceDownMs / 1000} s, with replicas on nodes that are up, as keyslice remove would; ` +
        `their drain steps go on once those changes settled (the nodes stay members: keyslice remove forgets them)`,
    );
  }

  /** A replica move or drain step whose new replica's node has not answered for the step (answersForStep: down, a node
   * known by address that froze counting down once silent NODE_HEARTBEAT_TIMEOUT_MS; or a question left unanswered that
   * long while its node pongs, a worker stuck) for --move-undo-down-ms (REPLICA_MOVE_UNDO_DOWN_MS) before it completed
   * is undone (docs/replication.md): the new replica leaves the set (ClusterMap.undoReplicaMoves). A move's slice goes
   * back to its old set (the replica marked leaving stays); a drain's keeps its replica on the draining node, and
   * placement puts the new one on another node that answers, if any (else the drain waits for one): not back on the
   * silent or stuck one, as placement (map.takesReplica) puts a slice's new replica only where the worker that would run
   * it answers for a step; the stuck worker's time is kept once the undo settled and its questions of the slice are
   * dropped (OpenQuestions.unansweredSince), so it gets no new replica until it answers, while the node's other workers
   * take theirs. By the same rules as any replica-set change:
   * only once the move's own change settled and a leader was elected for it (changes do not chain), and by joint
   * majorities of both sets until the undo settles. No catch-up is needed: every acknowledged write is on a
   * majority of the larger set, and with its new replica down those are all replicas of the old one (a new replica
   * that froze holding some writes changes nothing: a majority of the larger set without it is one of the old set).
   * Without it the slice ran as R + 1 with one member down (one more failure and no majority) until the node came back or
   * was removed, and leadership rebalancing waited. Rebalancing may start the move again later, onto a node
   * that is up. */
  private undoStalledMoves(): void {
    // Monotonic, as unansweringSince is: a wall clock stepped forward undid at once a step whose node had just stopped
    // answering.
    const now = performance.now();
    const undo: number[] = [];
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      const to = this.map.joiningOf(slice);
      // Not answering for the step (answersForStep), as its wait counts the new replica: down, or its worker stuck while
      // its node pongs (counted up, its questions unanswered past the bound), which was waited for without end.
      if (to < 0 || this.answersForStep(to, slice)) continue;
      const since = this.unansweringSince.get(slice);
      if (since === undefined || since.node !== to || now - since.since < this.downWaits.moveUndoMs) continue;
      if (this.leaders.electedTerm(slice) === null || !this.leaders.settled(slice)) continue;
      const set = this.map.replicasOf(slice);
      // The set that is left is the one before the move or drain step (the replica it was to replace still in it),
      // a majority of the set that joint majorities keep counting until the undo settles.
      const replaced = set.some((n) => this.map.leaves(slice, n));
      assert(set.includes(to) && replaced && set.length - 1 >= majority(set.length), `slice ${slice} goes back to the set it had before its move or drain step`);
      undo.push(slice);
    }
    if (undo.length === 0 || !this.leaders.mapSaveDue()) return;
    const down = [...new Set(undo.map((s) => this.map.nodes[this.map.joiningOf(s)]))];
    const stuck = undo.filter((s) => this.countsUp(this.map.joiningOf(s))).length;
    if (savedOr(() => this.map.undoReplicaMoves(undo), (err) => this.log(`cannot record undone replica moves in the cluster map (${err.message}); tried again after the map's save backoff (at most ${MAP_SAVE_RETRY_MS_MAX} ms)`)) === null) return;
    this.movesUndone += undo.length;
    for (const l of this.links) l.sendEpoch(this.map.epoch);
    this.leaders.sync();
    // Where a drain's slice got a new replica again, placement chose it among the nodes up then (asserted there).
    const redirected = undo.filter((s) => this.map.joiningOf(s) >= 0);
    this.log(
      `undid the replica moves and drain steps of ${undo.length} slices (e.g. slice ${undo[0]}) to ${down.join(', ')}, not answering for the step (down, silent with their links open, or a worker leaving questions unanswered while the node pongs) for ${this.downWaits.moveUndoMs / 1000} s before they completed; each slice keeps the replica it was to lose` +
        (redirected.length > 0 ? `; ${redirected.length} drain steps placed their new replica on another node that is up` : '') +
        (stuck > 0 ? `; ${stuck} of them onto a node that answers pings but whose worker of the slice left the step's questions unanswered (stuck): that worker takes no new replica until it answers one` : ''),
    );
  }

  /** Replica sets left short of the factor because no active node was up to take a new replica when they changed
   * (placement skips nodes that are down: a drain step undone, a node removed while others were down), or because
   * their last change had not settled when a map change placed the other slices' (a node joined or started to drain:
   * the map starts no change on such a slice), are filled once one is up and it settled; sets over the factor are
   * trimmed likewise. This tick is what fills them while no other map change comes (one that places replicas, a
   * replica move say, places the settled ones too: test/replica-join.test.ts runs without rebalancing). Only slices whose
   * last change settled under an elected leader (the map asks mayPlace), so that changes do not chain (as a drain's
   * next step and remove wait), and not a slice a whole-slice move copies: its set would change under the move, and
   * the Assign that tells the nodes would end the move there (the mover then rolls it back); it is filled at a tick
   * after the move. */
  private refillReplicas(): void {
    // Not while the map's save backoff runs (ReplicaLeaders.mapSaveDue): the disk failed lately, and this turn's try
    // would be one more failed save (and log line) per turn. Nor do the turn's other map changes, below.
    if (this.map.replicationFactor <= 1 || !this.leaders.mapSaveDue()) return;
    // The sizes before come with placement's answer: this runs every turn (REBALANCE_INTERVAL_MS) and at each soon turn
    // (turnSoon: up to once a FAILOVER_TICK_MS while moves progress), and placement itself looks at no slice while
    // nothing changed (ClusterMap.placeReplicas), so neither does this.
    const placed = savedOr(
      () => this.map.placeReplicas(),
      (err) => this.log(`cannot record new replicas in the cluster map (${err.message}); tried again after the map's save backoff (at most ${MAP_SAVE_RETRY_MS_MAX} ms)`),
    );
    if (placed === null) return;
    const changed = placed.value;
    if (changed.length === 0) return;
    this.leaders.sync();
    // Fills and trims said apart: a set over the factor (the factor lowered, a drained node active again) lost replicas.
    const filled = changed.filter((c) => c.after > c.before).map((c) => c.slice);
    const trimmed = changed.filter((c) => c.after < c.before).map((c) => c.slice);
    const other = changed.length - filled.length - trimmed.length;
    const parts = [
      filled.length > 0 ? `${filled.length} slices short of ${this.map.replicationFactor} replicas (e.g. slice ${filled[0]}) got new ones on nodes that are up` : '',
      trimmed.length > 0 ? `${trimmed.length} slices over ${this.map.replicationFactor} replicas (e.g. slice ${trimmed[0]}) were trimmed to it` : '',
      other > 0 ? `${other} slices had a replica on a node no longer active replaced` : '',
    ];
    this.log(`placement: ${parts.filter((p) => p !== '').join('; ')}`);
  }

  /** Slices with a replica move under way (a new replica added, the one it replaces not dropped yet). */
  private movingReplicas(): number {
    let n = 0;
    for (let slice = 0; slice < this.map.sliceCount; slice++) if (this.map.leavingOf(slice) >= 0) n++;
    return n;
  }

  /** Replicas per node as they will be once the moves under way are done (a leaving replica counted gone). */
  private replicaCountsAfterMoves(): number[] {
    const counts = this.map.replicaCounts();
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      const leaving = this.map.leavingOf(slice);
      if (leaving >= 0) counts[leaving]--;
    }
    return counts;
  }

  /** Replica rebalancing (R > 1; docs/replication.md): while the active nodes that are up hold numbers of
   * replicas that differ by more than one (a node joined a cluster whose replica sets were full), moves a
   * replica of a slice from the node that holds most to the one that holds fewest, by the drain's two
   * steps: the slice gets a replica on the light node (the map marks the heavy node's replica leaving),
   * its set's election tells the leader, which brings the new replica up from its log or a snapshot; once
   * the change settled and every replica but the leaving one holds the elected leader's barrier,
   * drainReplicas drops the leaving one. A follower's replica is moved rather than the leader's where
   * the heavy node follows some slice (a leader's drop names another replica in the map until the
   * election). At most REPLICA_MOVES_IN_FLIGHT_MAX slices at once, each one whose leader was elected for
   * its set, whose last change settled, and whose replicas are all up (a move waits for every one of them
   * to catch up). Waits while a node drains. */
  private rebalanceReplicas(): void {
    if (this.map.nodes.some((_, i) => this.map.statusOf(i) === 'draining')) return;
    let inFlight = this.movingReplicas();
    if (inFlight >= REPLICA_MOVES_IN_FLIGHT_MAX) return;
    // Between active nodes that count up; a slice only where each replica's worker of it answers for a step, onto a node
    // whose worker of it does (answersForStep, as placement: map.takesReplica): a move onto a frozen node, or onto a
    // stuck worker, would stall, and be undone; one whose replicas do not all answer would wait. A node with a stuck
    // worker takes and gives replicas of its other workers' slices.
    const nodes = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active' && this.countsUp(i));
    if (nodes.length < 2) return;
    const counts = this.replicaCountsAfterMoves();
    const moves: { slice: number; from: number; to: number }[] = [];
    const chosen = new Set<number>();
    while (inFlight < REPLICA_MOVES_IN_FLIGHT_MAX) {
      const to = nodes.reduce((a, b) => (counts[b] < counts[a] ? b : a));
      const from = nodes.reduce((a, b) => (counts[b] > counts[a] ? b : a));
      if (counts[from] - counts[to] <= 1) break;
      let pick: number | null = null;
      for (let slice = 0; slice < this.map.sliceCount; slice++) {
        const set = this.map.replicasOf(slice);
        if (chosen.has(slice) || set.length <= 1 || !set.includes(from) || set.includes(to) || this.map.leavingOf(slice) >= 0) continue;
        if (!set.every((n) => nodes.includes(n) && this.answersForStep(n, slice)) || !this.map.takesReplica(to, slice)) continue;
        if (this.leaders.electedTerm(slice) === null || !this.leaders.settled(slice)) continue;
        // A follower's replica first: the leader keeps leading through the move's first change, and its own
        // drop would need the map to name another leader until the election.
        if (pick === null || (this.map.ownerOf(pick) === from && this.map.ownerOf(slice) !== from)) pick = slice;
        if (this.map.ownerOf(pick) !== from) break;
      }
      if (pick === null) break;
      moves.push({ slice: pick, from, to });
      chosen.add(pick);
      counts[from]--;
      counts[to]++;
      inFlight++;
    }
    if (moves.length === 0 || !this.leaders.mapSaveDue()) return;
    if (savedOr(() => this.map.moveReplicas(moves), (err) => this.log(`cannot record replica moves in the cluster map (${err.message}); tried again after the map's save backoff (at most ${MAP_SAVE_RETRY_MS_MAX} ms)`)) === null) return;
    // The nodes learn their new sets (reassign), then the sets' elections tell the leaders.
    this.leaders.sync();
    const byPair = new Map<string, number>();
    for (const m of moves) {
      const pair = `${this.map.nodes[m.from]} -> ${this.map.nodes[m.to]}`;
      byPair.set(pair, (byPair.get(pair) ?? 0) + 1);
    }
    this.log(`replica rebalancing: moving replicas of ${moves.length} slices (${[...byPair].map(([p, n]) => `${n} ${p}`).join(', ')}); ${this.pendingReplicaMoves(this.map.replicaCounts())} to go`);
  }

  /** Leadership rebalancing (R > 1): while the active nodes that are up lead numbers of slices that differ
   * by more than one, hands the leadership of slices of the one that leads most to the one that leads
   * fewest, where that one holds a replica that is caught up (ReplicaLeaders.handOver). Waits while a
   * drain runs or any replicated slice has no elected leader (an election or a handover under way). */
  private rebalanceLeaders(): void {
    // Replica moves first: each of their changes elects a leader anew, and the node that joined leads
    // only where it holds replicas. Not while a remove waits for its handovers either: a handover here of a slice
    // holding a replica on the node removed would still be in its hold or election when the removal changes the
    // slice's set, which then elects (change_chained) and drops the handover (seen in drain-handover's remove case).
    if (this.removing.size > 0 || this.map.nodes.some((_, i) => this.map.statusOf(i) === 'draining') || this.movingReplicas() > 0) return;
    const s = this.leaders.summary();
    if (s.replicated === 0 || s.led < s.replicated) return;
    const counts = this.map.counts();
    const nodes = this.map.nodes.map((_, i) => i).filter((i) => this.mayTakeLeadership(i));
    if (nodes.length < 2) return;
    // Chosen one by one against the counts as they will be, handed over together (one map change, one epoch).
    const moves: { slice: number; to: number }[] = [];
    const chosen = new Set<number>();
    for (let n = 0; n < LEADER_HANDOVERS_IN_FLIGHT_MAX; n++) {
      // From the node that leads most, or, where none of its slices has a caught-up replica on a node that leads two
      // fewer, from the next: trying only the first (of several that lead most) left leaderships unspread for good
      // where its slices' replicas all sat on nodes one short (3-3-3-2-1 at 12 slices on 5 nodes, R=3).
      let best = null as { slice: number; from: number; to: number } | null;
      for (const from of [...nodes].sort((a, b) => counts[b] - counts[a])) {
        // The node that leads fewest among those holding a caught-up replica of one of `from`'s slices.
        for (const slice of this.map.slicesOf(from)) {
          if (chosen.has(slice)) continue;
          for (const to of this.map.replicasOf(slice)) {
            if (to === from || !nodes.includes(to) || counts[from] - counts[to] <= 1 || (best !== null && counts[to] >= counts[best.to])) continue;
            if (this.holdsLately(slice, to, this.map.termOf(slice))) best = { slice, from, to };
          }
        }
        if (best !== null) break;
      }
      if (best === null) break;
      moves.push({ slice: best.slice, to: best.to });
      chosen.add(best.slice);
      counts[best.from]--;
      counts[best.to]++;
    }
    if (moves.length > 0) this.leaders.handOver(moves);
  }

  /** Nodes, slices per node, items/bytes/load per node (when every node answers; not
   * asked for when `withLoad` is false, e.g. by the studio, which has every table's load), moves. */
  async status(withLoad = true): Promise<ClusterStatus> {
    const counts = this.map.counts();
    const replicas = this.map.replicaCounts();
    const nodes: NodeStatusReport[] = this.map.nodes.map((url, i) => ({
      node: url,
      status: this.map.statusOf(i),
      up: this.map.statusOf(i) !== 'removed' && this.countsUp(i),
      silentMs: this.map.statusOf(i) !== 'removed' && this.links[i].state === 'ready' && this.silentPastBound(i) ? Math.round(this.links[i].heardMsAgo()) : null,
      heartbeatMsAgo: this.lastHeartbeat.has(i) ? Math.round(performance.now() - this.lastHeartbeat.get(i)!) : null,
      problem: this.links[i].refusal !== '' ? this.links[i].refusal : this.autoRemoveRefusal.has(i) ? `down, and not removed automatically: ${this.autoRemoveRefusal.get(i)}` : null,
      workers: this.links[i].workerCount,
      slices: counts[i],
      replicas: replicas[i],
      unsettledChanges: this.map.statusOf(i) === 'removed' ? 0 : this.unsettledCounting(i).length,
      items: 0,
      bytes: 0,
      heldItems: 0,
      heldBytes: 0,
      readsPerSecond: 0,
      writesPerSecond: 0,
    }));
    let loadComplete = true;
    for (const name of withLoad ? this.catalog.names() : []) {
      try {
        const { load, failures } = await gatherTableLoad(this.catalog.get(name), this);
        if (failures.length > 0) loadComplete = false;
        for (const n of load.nodes) {
          const r = nodes.find((x) => x.node === n.node)!;
          r.items += n.items;
          r.bytes += n.bytes;
          r.heldItems += n.heldItems;
          r.heldBytes += n.heldBytes;
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
      replication: {
        ...this.map.replicationReport(),
        ...this.replicationLeaders(),
      },
      moves: {
        inFlight: [...this.mover.moving.values()],
        completed: this.mover.completed,
        failed: this.mover.failed,
        itemsMoved: this.mover.itemsMoved,
        lastError: this.mover.lastError,
        pending: this.map.replicationFactor > 1 ? this.pendingReplicaMoves(replicas) : this.pendingMoves(counts),
        waiting: this.replicaWaits.slice(0, REPLICA_WAITS_REPORTED_MAX).map((w) => ({ slice: w.slice, node: this.map.nodes[w.node], why: w.why })),
        waitingSlices: this.replicaWaits.length,
      },
    };
  }

  /** Status's report on leaders: how many replicated slices have one, their terms, and the same in a line by node. */
  private replicationLeaders(): { leaders: LeadersReport; note: string } {
    const s = this.leaders.summary();
    // Until a change settles, an election needs a majority of the old set too: losing a node then can stall a slice.
    let unsettled = 0;
    // A set short of the factor (placement adds replicas a few slices at a time) survives fewer failures than R allows.
    let shortOfFactor = 0;
    const factor = this.map.replicationFactor;
    for (let slice = 0; slice < this.map.sliceCount; slice++) {
      if (!this.leaders.settled(slice)) unsettled++;
      const held = this.map.replicasOf(slice).length;
      if (held > 0 && held < factor) shortOfFactor++;
    }
    const moving = this.movingReplicas();
    const leaders: LeadersReport = { replicated: s.replicated, led: s.led, unsettledLed: s.unsettledLed, unsettled, shortOfFactor, moving, movesUndone: this.movesUndone, elections: s.elections, handovers: this.leaders.handovers, ledOn: this.leaders.leadOns, handoversGivenUp: this.handoversGivenUp, handoversGivenBack: this.leaders.handoversGivenBack, termMin: s.termMin, termMax: s.termMax };
    if (s.replicated === 0) return { leaders, note: '' };
    const by = s.ledBy.map((n, i) => [this.map.nodes[i], n] as const).filter(([, n]) => n > 0).map(([u, n]) => `${u} ${n}`);
    const waiting = s.replicated - s.led - s.unsettledLed;
    const note =
      `${s.led} of ${s.replicated} replicated slices have an elected leader (${by.length > 0 ? by.join(', ') : 'none yet'})` +
      (s.unsettledLed > 0 ? `; ${s.unsettledLed} whose leader commits nothing yet (its replica-set change waits for a majority of the old set to hold its first record)` : '') +
      (waiting > 0 ? `; ${waiting} without one (an election is under way or waits for a majority of their replicas)` : '') +
      (unsettled > 0 ? `; ${unsettled} with a replica-set change not settled yet (their elections need a majority of the old set too)` : '') +
      (shortOfFactor > 0 ? `; ${shortOfFactor} with fewer than ${factor} replicas (placement adds them a few slices at a time; until then losing one more node can leave them without a majority)` : '') +
      (moving > 0 ? `; ${moving} replicas moving to another node (each leaves once its replacement caught up)` : '') +
      (this.handoversGivenUp > 0 ? `; ${this.handoversGivenUp} slices lost their leader to a drain step, replica move or remove before its handover completed (within ${LEADER_HANDOVER_BEFORE_CHANGE_MS / 1000} s; those slices elected)` : '') +
      (this.leaders.handoversGivenBack > 0 ? `; ${this.leaders.handoversGivenBack} leadership handovers whose election named the old leader again (the replica handed to did not answer within half an election timeout, or lacked the old leader's last record)` : '') +
      (this.movesUndone > 0 ? `; ${this.movesUndone} replica moves undone since the coordinator started (their new replica's node was down; drain steps counted too)` : '') +
      `; leader terms ${s.termMin}..${s.termMax}, ${s.elections} elections, ${this.leaders.handovers} leadership handovers and ${this.leaders.leadOns} replica-set changes led on by their leader since the coordinator started`;
    return { leaders, note };
  }

  /** Replicas still to take off draining nodes, plus replica moves under way and (with --rebalance yes) a
   * rough count of those still to start: the replicas over an even share on active nodes. */
  private pendingReplicaMoves(replicas: number[]): number {
    const underWay = replicas.reduce((sum, n, i) => sum + (this.map.statusOf(i) === 'draining' ? n : 0), 0) + this.movingReplicas();
    const active = this.map.nodes.map((_, i) => i).filter((i) => this.map.statusOf(i) === 'active');
    if (!this.autoRebalance || active.length === 0) return underWay;
    const after = this.replicaCountsAfterMoves();
    const share = Math.ceil(active.reduce((sum, i) => sum + after[i], 0) / active.length);
    return underWay + active.reduce((sum, i) => sum + Math.max(0, after[i] - share), 0);
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
    this.closed = true;
    clearInterval(this.timer);
    clearTimeout(this.soonTimer);
    this.leaders.close();
    for (const l of this.links) l.close();
  }
}

function checkUrl(url: unknown): string {
  if (!isNodeUrl(url)) throw new KeysliceError('ValidationError', `a node address is ws://host:port of at most ${NODE_URL_CHARS_MAX} characters; got ${JSON.stringify(url)}`);
  return url;
}

/** A drain step's catch-up rule (Membership.drainReplicas, docs/replication.md), apart from the map and the links.
 * Of the replicas `rest` that the slice keeps: `behind`, those it waits for because they do not yet hold the leader's
 * barrier: every one that is up, and the new replica `fresh` (-1: none named) up or not, else nothing replaced the one
 * that leaves (undoStalledMoves takes one whose node stays down out); one that was in the set before may be down (with
 * no new replica named, a move recorded by an older map, none may). `fresh` is waited for while its node is down even
 * where it said it holds the barrier before it went down: the step would trade the replica that leaves, up, for one
 * that is down, a slice left with R - 1 replicas up and nothing to undo (undoStalledMoves undoes only a step not yet
 * done; a node killed just after catching up left its moves done onto it for good). `holdingUp`: those that hold it
 * and are up. The
 * step goes ahead only with none behind and holdingUp a majority of `rest`: a replica that held the barrier on a node
 * that is down since elects and commits nothing, so counting it would leave a slice that cannot serve. Past the leaving
 * leader's handover bound (`handoverSpent`) one that was in the set before is not behind where `fresh` is not and
 * holdingUp is a majority of `rest` (the simulation's drain steps use it: test/replication-sim.ts). `holds` is
 * asked of every replica (it asks those that have not said so yet: one turn learns about them all). */
export function drainStepCatchUp(rest: readonly number[], fresh: number, holds: (node: number) => boolean, isUp: (node: number) => boolean, handoverSpent = false): { behind: number[]; holdingUp: number[] } {
  const holding = rest.filter((n) => holds(n));
  const behind = rest.filter((n) =>
    // The new replica: until it holds the barrier and is up. One that was in the set before: until it holds it, where
    // it is up or no new replica is named.
    n === fresh ? !isUp(n) || !holding.includes(n) : !holding.includes(n) && (isUp(n) || fresh < 0),
  );
  const holdingUp = holding.filter((n) => isUp(n));
  // Past the leaving leader's handover bound (`handoverSpent`) the step waits no longer for a replica it keeps from the
  // set before, only for the new replica and a majority of those kept: a node frozen with its link open stays up, and
  // after its handover's election named the old leader again, at a new term, it would hold the step without end. The
  // slice then elects by joint majorities, which keep every acknowledged write whatever the one behind holds.
  if (handoverSpent && !behind.includes(fresh) && holdingUp.length >= majority(rest.length)) return { behind: [], holdingUp };
  return { behind, holdingUp };
}

/** Whether nothing came from a node for `boundMs` (Membership.silentPastBound, apart from its link): `heardMsAgo`
 * since its link's "last heard from" clock (NodeLink.heardAt: any frame, a pong to pingLinks' ping, a heartbeat) at
 * or past the bound (NODE_HEARTBEAT_TIMEOUT_MS on the coordinator). */
function silentPastBoundBy(heardMsAgo: number, boundMs: number): boolean {
  return heardMsAgo >= boundMs;
}

/** Membership.countsUp apart from the links: a node counts up for placement, status and the undo of a move onto it
 * where it is up (`up`: its link ready, heartbeats recent) and was heard from within `boundMs` (`heardMsAgo`:
 * NodeLink.heardMsAgo; silentPastBoundBy). Used by the simulation's 'drain-silent' runs (test/replication-sim.ts) over
 * their own per-node clock and scaled bound. */
export function countsUpBy(up: boolean, heardMsAgo: number, boundMs: number): boolean {
  return up && !silentPastBoundBy(heardMsAgo, boundMs);
}

/** Membership.answersForStep apart from the links and the questions: up for a drain step's wait (drainStepCatchUp's
 * `isUp`) where it counts up (`countsUp`: countsUpBy) and has left no question unanswered for `boundMs` or longer
 * (`silentMs`: ReplicaLeaders.workerSilentMs of the slice, with the grace). Used by the simulation's 'drain-silent' runs too. */
export function answersForStepBy(countsUp: boolean, silentMs: number, boundMs: number): boolean {
  return countsUp && silentMs < boundMs; // at the bound itself it counts silent, as silentPastBoundBy does
}

/** The rule by which a change that takes the leader's replica out names the slice's leader in the map until it elects
 * (Membership.leaderUntilElected, apart from the map and the links): the first replica of `kept` (those the change
 * keeps, in the set's order) that may take a leadership (`mayLead`: active, up, not being removed) and holds the
 * leader's barrier, said lately (`holdsBarrier`: the coordinator asks for a Pong at most probeIntervalMs old). Else,
 * given `otherwise`, the first that may lead and `answers` (not silent), one that `heldOnce` the barrier (a Pong of any
 * age) first: a router target that answers, where the map's own rule (the first follower that is up) may name a
 * frozen one. Used by the simulation's remove and drain steps (test/replication-sim.ts), with `otherwise` where it
 * tracks silence (its 'remove-down' runs, by ReplicaLeaders' own OpenQuestions and workerSilenceMs). undefined: none. */
export function leaderUntilElected(
  kept: readonly number[],
  mayLead: (node: number) => boolean,
  holdsBarrier: (node: number) => boolean,
  otherwise?: { answers: (node: number) => boolean; heldOnce: (node: number) => boolean },
): number | undefined {
  const lately = kept.find((n) => mayLead(n) && holdsBarrier(n));
  if (lately !== undefined || otherwise === undefined) return lately;
  const answering = kept.filter((n) => mayLead(n) && otherwise.answers(n));
  return answering.find((n) => otherwise.heldOnce(n)) ?? answering[0];
}

/** askKeptLately's rule for one slice none of whose replicas kept said lately that it holds the barrier
 * (Membership.askKeptLately, apart from the map and the links): whether the wait begun at `started` goes on at `now`.
 * It does for probeIntervalMs (`probeMs`) from its start, and past that while `named`, the replica the rule's second
 * choice names (leaderUntilElected's `otherwise`; undefined: none), was found up (`upFrom`, per replica) less than
 * probeIntervalMs ago, so that one whose link came up during the wait is asked long enough to count as silent if
 * frozen; never past twice probeIntervalMs. Used by the simulation's 'remove-down' step (test/replication-sim.ts). */
export function keepAskingKept(now: number, started: number, upFrom: ReadonlyMap<number, number>, named: number | undefined, probeMs: number): boolean {
  assert(named === undefined || upFrom.has(named), `the replica named (${named}) was found up during the wait`);
  if (now - started >= 2 * probeMs) return false;
  return now - started < probeMs || (named !== undefined && now - upFrom.get(named)! < probeMs);
}

/** `keyslice remove`'s answer where the cluster map could not be written (MapSaveError): retryable, and the node as
 * it was (in the map, its link open, its replicas serving); `handed` slices' leaderships it handed over before the
 * failed save stay with the replicas they went to (the leadership rebalancer may hand them back). */
function notRemoved(node: string, err: MapSaveError, handed: number): KeysliceError {
  const but = handed > 0 ? ` but the leadership of ${handed} slice${handed === 1 ? '' : 's'} it had, handed to other replicas first` : '';
  return new KeysliceError('Unavailable', `node ${node} was not removed: ${err.message}; nothing was changed${but} (it is still in the cluster and serving), retry once the map can be written`);
}

// The cluster map: which slice node owns each slice, versioned by an epoch
// that only grows. Owned by the coordinator and persisted in its data folder
// (every change is written before it is used for routing).
//
// Nodes are numbered in the order they joined; a number is never reused for
// another address, so `owners` stays valid. A slice with owner -1 has no node
// yet (a cluster whose nodes register themselves, before the first one did).
//
// Identity: the cluster has an id (made with the map), and each node the id of its
// data folder (recorded when it first says Hello), so that a node that comes back
// under a known address with another folder is not handed slices whose data it
// does not hold (coordinator/metadata/membership.ts). Ids are not routing: recording one
// does not move the epoch.
//
// Replicas (docs/replication.md): each slice has an ordered replica list on distinct
// nodes, replicasOf(slice) = [leader, ...followers]; the leader is the owner above, so
// routing is unchanged. Each slice has replicas on active nodes up to the effective
// replication factor, refilled after every change (a slice whose last replica-set change
// has not settled is left as it is, and refilled at a later tick once it settled: one
// change per slice at a time, asserted in save). A draining node keeps the replicas it
// has (and takes no new ones) until the drain takes each out (dropLeavingReplicas), once
// its replacement on an active node has caught up: for a while such a slice has R + 1.
// A replica rebalanced onto a node that joined (moveReplicas) works the same way for one slice:
// the new replica is added, and the replica it replaces is marked leaving (kept, like a draining
// node's) until it has caught up; then dropLeavingReplicas takes the leaving one out. The map also names the new
// replica (joining), so that a move whose new replica's node goes down before it caught up can be undone
// (undoReplicaMoves): the new replica leaves, the leaving one stays. A drain's new replica is named joining too,
// and undone the same way; placement then puts the slice's replica on another node that is up, if there is one.
// Placement knows which nodes take a new replica of which slice (takesReplica, set by membership.ts from its links,
// heartbeats and the questions each node's worker of the slice left unanswered): it never
// chooses a new replica on a node that is down, nor on a worker that is stuck, so a replica taken off a down node is not put straight back
// and a change never adds a replica that cannot answer. Replicas already in a set stay there, up or down
// (a node that is down is failed over, and taken out by remove or an undo, not by placement).
// Each slice has a leader term that only grows, and grows whenever its leader changes:
// a replica refuses records of an older term, so a deposed leader cannot be acknowledged.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { NodeStatus } from '../../shared/cluster-view.js';
import { assert } from '../../shared/errors.js';
import { REPLICATION_FACTOR_AUTO_MAX } from '../../shared/limits.js';
import { sameSet, setsBefore } from './failover.js';
import { readClusterMapFile, writeClusterMapFile, type ClusterMapState } from './cluster-map-file.js';
import { damagedFile, StateFileError } from '../../shared/state-file.js';

export type { NodeStatus };

type State = ClusterMapState & { clusterId: string; status: NodeStatus[]; nodeIds: (string | null)[]; followers: number[][]; terms: number[]; termsUsed: number[]; leaving: number[]; joining: number[]; unsettled: number[][][]; lastLead: ([number, number] | null)[]; everLed: boolean[] };

/** One slice's election outcome to record (coordinator/metadata/replica-leaders.ts). */
export interface Elected {
  slice: number;
  leader: number;
  term: number;
}

/** The replication factor asked for: a number, or 'auto' (shared/limits.ts replicationFactorDefault). */
export type ReplicationSetting = number | 'auto';

const newId = () => randomBytes(16).toString('hex');
/** Every slice's term in a new map (and in an older map that kept none): a Lead, a LeadOn or a new owner takes a larger
 * one, so a slice still at it was never led (how a map that kept no everLed tells it). */
const FIRST_TERM = 1;

export class ClusterMap {
  /** Called after every change that is in force (routers are told: metadata/feed.ts). */
  onChange: () => void = () => {};
  /** Those waiting for the epoch to reach theirs (epochReaches), each resolved once. */
  private readonly epochWaiters = new Set<{ epoch: number; done: () => void }>();
  /** Whether a node is up as the coordinator knows it (membership.ts: its link is ready and it heartbeats): placement
   * puts new replicas only on nodes that are up. Until a coordinator sets it, every node counts as up. */
  isUp: (node: number) => boolean = () => true;
  /** Whether a new replica of `slice` may go to `node` (membership.ts: the node is up and the worker there that would run
   * the slice answers, Membership.answersForStep): placement asks it per slice, so that a node with one worker stuck
   * takes new replicas of the slices its other workers run. Until a coordinator sets it, isUp. */
  takesReplica: (node: number, slice: number) => boolean = (node) => this.isUp(node);
  /** What takesReplica's answers depend on besides the map, as a string that changes when any of them may (placeReplicas
   * places nothing again while neither it nor the map changed). Until a coordinator sets it, the nodes isUp counts up. */
  placementKey: () => string = () => this.state.nodes.map((_, i) => (this.isUp(i) ? 1 : 0)).join('');
  /** Whether the slice's last replica-set change settled (docs/replication.md, "Changes do not chain"): a slice whose
   * change has not settled gets no new one, neither from a caller nor from placement (save asserts it; placement skips
   * such a slice, and membership.ts refillReplicas fills it at a later tick). membership.ts sets it to the failover
   * runner's view (ReplicaLeaders.settled), which is a tick fresher than the map's record; until then, the record. */
  isSettled: (slice: number) => boolean = (slice) => this.state.unsettled[slice].length === 0;
  /** Whether placement may change the slice's set now: its last change settled (isSettled), and, as membership.ts sets
   * it (Membership.mayPlace), a leader was elected for it and no whole-slice move copies it. Stricter than isSettled,
   * which save asserts: a handover's failover has no older sets, so it counts settled during its hold and its election,
   * with no leader; growing such a set elected again (change_chained) and dropped the handover. */
  mayPlace: (slice: number) => boolean = (slice) => this.isSettled(slice);
  /** Told of each write of the map file, whichever change made it (ok: written; else it threw MapSaveError): the map's
   * one save backoff counts it (replica-leaders.ts sets it to its SaveBackoff: one file on one disk, so a success
   * anywhere ends the backoff and a failure anywhere counts in it). */
  onSave: (ok: boolean) => void = () => {};

  private constructor(
    private readonly path: string,
    private state: State,
    private readonly replication: ReplicationSetting,
  ) {
    assert(replication === 'auto' || (Number.isSafeInteger(replication) && replication >= 1), 'a replication factor is at least 1');
    assert(state.followers.length === state.sliceCount && state.terms.length === state.sliceCount && state.leaving.length === state.sliceCount && state.joining.length === state.sliceCount && state.unsettled.length === state.sliceCount && state.lastLead.length === state.sliceCount && state.everLed.length === state.sliceCount, 'followers, a term, a leaving and a joining mark, unsettled sets, a last Lead and whether it was ever led per slice');
    checkReplicas(state);
    assert(state.owners.length === state.sliceCount, 'one owner per slice');
    assert(state.status.length === state.nodes.length, 'one status per node');
    assert(state.nodeIds.length === state.nodes.length, 'one node id (or null) per node');
    assert(state.owners.every((o) => o >= -1 && o < state.nodes.length), 'every owner is a known node (on a present one: checkReplicas)');
  }

  /** Loads the persisted map, or creates one that spreads the slices evenly in
   * contiguous ranges over `nodes` (none: every slice waits for the first node to
   * join). Addresses in `nodes` that the persisted map lacks join it. Returns an
   * error sentence if the persisted map disagrees with the configuration. */
  static open(dataDir: string, nodes: string[], sliceCount: number, replication: ReplicationSetting = 1): ClusterMap | string {
    const path = join(dataDir, 'cluster-map.json');
    let saved: ClusterMapState | null;
    try {
      saved = readClusterMapFile(path);
    } catch (err) {
      if (err instanceof StateFileError) return err.message;
      throw err;
    }
    if (saved !== null) {
      if (saved.sliceCount !== sliceCount) {
        return `this cluster was created with ${saved.sliceCount} slices; the slice count cannot change (asked for ${sliceCount})`;
      }
      const terms = saved.terms ?? saved.owners.map(() => FIRST_TERM);
      const lastLead = saved.lastLead ?? saved.owners.map(() => null);
      const state: State = {
        ...saved,
        clusterId: saved.clusterId ?? newId(),
        status: saved.status ?? saved.nodes.map(() => 'active'),
        nodeIds: saved.nodeIds ?? saved.nodes.map(() => null),
        followers: saved.followers ?? saved.owners.map(() => []),
        terms,
        termsUsed: saved.termsUsed ?? saved.terms ?? saved.owners.map(() => FIRST_TERM),
        leaving: saved.leaving ?? saved.owners.map(() => -1),
        joining: saved.joining ?? saved.owners.map(() => -1),
        unsettled: saved.unsettled ?? saved.owners.map(() => []),
        lastLead,
        everLed: everLedOf(saved.everLed, terms, lastLead),
      };
      // What one field says of another, as every change checks it (the fields alone were checked as read).
      const problem = replicasProblem(state);
      if (problem !== null) return damagedFile(path, problem);
      const map = new ClusterMap(path, state, replication);
      // An older map gets its cluster id written, nothing else changed.
      if (saved.clusterId === undefined) writeClusterMapFile(path, map.state);
      for (const url of nodes) map.addNode(url);
      map.placeReplicas();
      return map;
    }
    const owners = initialOwners(sliceCount, nodes.length);
    const state: State = {
      clusterId: newId(),
      epoch: 1,
      sliceCount,
      nodes: [...nodes],
      status: nodes.map(() => 'active'),
      owners,
      nodeIds: nodes.map(() => null),
      followers: owners.map(() => []),
      terms: owners.map(() => FIRST_TERM),
      termsUsed: owners.map(() => FIRST_TERM),
      leaving: owners.map(() => -1),
      joining: owners.map(() => -1),
      unsettled: owners.map(() => []),
      lastLead: owners.map(() => null),
      everLed: owners.map(() => false),
    };
    placeFollowers(state, effectiveFactor(replication, state), () => true);
    const map = new ClusterMap(path, state, replication);
    writeClusterMapFile(path, map.state);
    return map;
  }

  /** The replication factor in force: the one asked for, or with 'auto' 3 when at least 3
   * nodes are active, else their count (at least 1). With a number larger than the active
   * nodes, slices have fewer replicas until enough nodes are there (CreateTable refuses). */
  get replicationFactor(): number {
    return effectiveFactor(this.replication, this.state);
  }
  /** What was asked for (a number or 'auto') and why the effective factor is what it is. */
  replicationReport(): { factor: number; asked: ReplicationSetting; why: string } {
    const active = activeCount(this.state);
    const factor = this.replicationFactor;
    const why =
      this.replication === 'auto'
        ? `default: ${REPLICATION_FACTOR_AUTO_MAX} when the cluster has at least ${REPLICATION_FACTOR_AUTO_MAX} active nodes, else their count (${active} now)`
        : active < this.replication
          ? `--replication-factor ${this.replication}, but only ${active} active nodes: slices have at most ${active} replicas and CreateTable is refused until enough nodes join`
          : `--replication-factor ${this.replication}`;
    return { factor, asked: this.replication, why };
  }
  /** A sentence saying why tables cannot be made now, or null. */
  replicationProblem(): string | null {
    const active = activeCount(this.state);
    if (this.replication !== 'auto' && this.replication > active) {
      return `this cluster keeps ${this.replication} replicas of each slice on distinct nodes but has ${active} active node${active === 1 ? '' : 's'}; add nodes or start the coordinator with --replication-factor ${Math.max(1, active)}`;
    }
    return null;
  }
  /** How many times the map changed since this process opened it (every change, routing or not, is a new state:
   * commit, recordElections, placeReplicas, ...). The same count, the same map: ReplicaLeaders follows the replica
   * sets only when it moved, not every tick. */
  get changes(): number {
    return this.changeCount;
  }
  private changeCount = 0;
  /** The map's change count and the nodes that were up (placeReplicas) when placement last placed nothing with no
   * slice held back, or null. */
  private nothingToPlaceAt: string | null = null;
  /** Saves `next` (save: a write that fails throws MapSaveError and leaves this.state as it was), then puts it in
   * force and counts the change: every change goes through here, so that `changes` misses none. */
  private replaceState(next: State): void {
    assert(next !== this.state, 'a change is made to a copy of the state');
    this.save(next);
    this.state = next;
    this.changeCount++;
  }

  /** [leader, ...followers] of a slice (empty while no node has joined). */
  replicasOf(slice: number): number[] {
    return setOf(this.state, slice);
  }
  /** The slice's leader term; it only grows, and grows whenever the leader changes. */
  termOf(slice: number): number {
    return this.state.terms[slice];
  }

  /** The sets before the slice's set whose change has not settled, newest first (see ClusterMapState.unsettled). */
  unsettledOf(slice: number): number[][] {
    return this.state.unsettled[slice].map((set) => [...set]);
  }
  /** How many sets unsettledOf(slice) would return (no copy). */
  unsettledCountOf(slice: number): number {
    return this.state.unsettled[slice].length;
  }
  /** Where node `leader`, elected for the slice, stands (leaderPlace): the one rule recordElections asserts and
   * ReplicaLeaders.flush follows for which Lead leaves and whom it deposes. */
  leaderPlaceOf(slice: number, leader: number): LeaderPlace {
    return leaderPlace(this.state, slice, leader);
  }
  /** No replica ever led the slice: no Lead or LeadOn was ever recorded for it (everLed), and every one is recorded
   * before it leaves (recordElections; ReplicaLeaders.flush asserts it as each leaves). A replica leads, and holds a
   * lease, only from a Lead or LeadOn on (Replica.becomeLeader), so no lease of it can run (failover.ts leasesOut).
   * A change of owner (a node that joined after the coordinator started, a move, a handover named in the map) takes a
   * new term but leads nothing: such a slice still counts as never led (docs/replication.md, "Leases"). */
  neverLed(slice: number): boolean {
    return !this.state.everLed[slice];
  }
  /** [term, node] of the last Lead or LeadOn recorded for the slice, or null (see ClusterMapState.lastLead). */
  lastLeadOf(slice: number): readonly [number, number] | null {
    return this.state.lastLead[slice];
  }
  /** The failover runner's view of changes that settled (or of sets it never ran: two map changes in one turn): the
   * slices' unsettled sets become `sets` (slice -> sets), each a subset of what the map holds. One write, no epoch:
   * not routing. */
  setUnsettled(sets: ReadonlyMap<number, readonly (readonly number[])[]>): void {
    const next = structuredClone(this.state);
    for (const [slice, older] of sets) {
      assert(older.every((o) => next.unsettled[slice].some((u) => sameSet(u, o))), `slice ${slice}: unsettled sets are only dropped here, never added`);
      next.unsettled[slice] = older.map((o) => [...o]);
    }
    this.replaceState(next);
  }

  /** The largest term the slice's leader or any election of it used: the next election takes a larger one. */
  lastTermUsed(slice: number): number {
    return Math.max(this.state.terms[slice], this.state.termsUsed[slice]);
  }

  /** One turn of the failover runner, in one write: the terms its elections took (`used`, slice ->
   * term) and the leaders they chose. A new leader is recorded as promote() does (the old one stays a
   * follower); a leader elected again only takes the new term. The epoch moves only when an owner
   * changed (routing); a term alone is not routing. Returns whether owners changed. */
  recordElections(used: ReadonlyMap<number, number>, elected: readonly Elected[]): boolean {
    const next = structuredClone(this.state);
    let ownersChanged = false;
    for (const [slice, term] of used) {
      assert(Number.isSafeInteger(term) && term > next.termsUsed[slice] && term > next.terms[slice], `an election's term is new (slice ${slice}: used ${next.termsUsed[slice]}, got ${term})`);
      next.termsUsed[slice] = term;
    }
    for (const { slice, leader, term } of elected) {
      const replicas = setOf(next, slice);
      // A leader outside the set carries a change that has not settled (failover.ts finishElection): its term and Lead
      // are recorded (a later election waits out its lease by them), not as the owner: routers keep the set's, and the
      // set elects one of its own once the change settled.
      const place = leaderPlace(next, slice, leader);
      assert(place !== null, `node ${leader} is a replica of slice ${slice}, or of a set of its unsettled change`);
      assert(Number.isSafeInteger(term) && term > next.terms[slice] && term <= next.termsUsed[slice], `a leader term only grows and was used (slice ${slice} is at ${next.terms[slice]}, got ${term})`);
      if (place === 'set' && leader !== next.owners[slice]) {
        ownersChanged = true;
        next.owners[slice] = leader;
        next.followers[slice] = replicas.filter((r) => r !== leader);
      }
      next.terms[slice] = term;
      next.lastLead[slice] = [term, leader];
      next.everLed[slice] = true;
    }
    if (ownersChanged) next.epoch++;
    assert(next.terms.every((t, s) => t >= this.state.terms[s]), 'a leader term only grows');
    checkReplicas(next);
    this.replaceState(next);
    if (ownersChanged || elected.length > 0) this.changed();
    return ownersChanged;
  }

  /** Removes a node whose slices have other replicas (it may be down): each slice it leads is led,
   * in the map, by `leaders`' replica for it where one is named (a follower on an active node: membership.ts names one
   * that is up and holds the leader's barrier, as for dropLeavingReplicas), else by its first follower (one that is up,
   * if any), until an election names its leader (routers retry meanwhile), and the node's replicas are placed again on
   * the other active nodes. */
  removeReplicatedNode(node: number, leaders: ReadonlyMap<number, number> = new Map()): void {
    this.commit((next) => {
      for (let s = 0; s < next.sliceCount; s++) {
        if (next.owners[s] !== node) continue;
        assert(next.followers[s].length > 0, `slice ${s} has a replica besides node ${node}`);
        const named = leaders.get(s);
        assert(named === undefined || (next.followers[s].includes(named) && next.status[named] === 'active'), `slice ${s}'s leader named for the removal, ${named}, is a follower on an active node`);
        // Else one that is up first, as dropLeavingReplicas does: routers send to the map's leader until the election
        // names one (a forced removal, or one at R > 3, can leave a follower on a node that is down first).
        const leader = named ?? next.followers[s].find((n) => this.isUp(n)) ?? next.followers[s][0];
        next.owners[s] = leader;
        next.followers[s] = next.followers[s].filter((n) => n !== leader);
      }
      next.followers = next.followers.map((f) => f.filter((n) => n !== node));
      for (let s = 0; s < next.sliceCount; s++) {
        // A move to or from the removed node is over: undone (its new replica is gone) or done (its old one is).
        if (next.leaving[s] === node || next.joining[s] === node) {
          next.leaving[s] = -1;
          next.joining[s] = -1;
        }
      }
      next.status[node] = 'removed';
    });
  }

  /** A drain's or a replica move's second step (coordinator/metadata/membership.ts): each pair's node,
   * draining or marked leaving the slice, leaves the slice's replica set; a slice it led is led, in the
   * map, by the pair's `leader` where one is named (a replica kept on an active node: membership.ts names one that is up and
   * holds the leader's barrier), else by its first follower on an active node (one that is up, if any), until the election
   * that the changed set starts names its leader. One change at a new epoch. */
  dropLeavingReplicas(drops: readonly { slice: number; node: number; leader?: number }[]): void {
    this.commit((next) => {
      for (const { slice, node, leader: named } of drops) {
        assert(leaves(next, slice, node), `node ${node} drains or leaves slice ${slice}`);
        if (next.leaving[slice] === node) {
          next.leaving[slice] = -1;
          next.joining[slice] = -1; // the move is done: its new replica is an ordinary member
        }
        const set = [next.owners[slice], ...next.followers[slice]];
        assert(set.includes(node), `node ${node} is a replica of slice ${slice}`);
        const rest = set.filter((n) => n !== node);
        // One that is up first: a drain goes on without a replica on a node that is down (membership.ts drainReplicas),
        // and routers would send to it until the election names the leader.
        const active = rest.filter((n) => next.status[n] === 'active');
        assert(named === undefined || active.includes(named), `slice ${slice}'s leader named for the change, ${named}, is a replica it keeps on an active node`);
        const leader = next.owners[slice] === node ? (named ?? active.find((n) => this.isUp(n)) ?? active[0] ?? -1) : next.owners[slice];
        assert(leader >= 0, `slice ${slice} keeps a replica on an active node`);
        next.owners[slice] = leader;
        next.followers[slice] = rest.filter((n) => n !== leader);
      }
    });
  }

  /** A drain replaces, in the slices it drains, a replica on a node that has been down for a while (membership.ts
   * drainReplicas), as `keyslice remove` of that node would: in one change each pair's replica leaves its slice's set and
   * placement (in the same change) puts one on an active node that is up, which catches up from the leader. The
   * replica replaced is a follower that is neither the one the drain takes out nor the drain's new one (joining stays
   * as it was). Its node stays a member. One change at a new epoch, by joint majorities until it settles. Checked on
   * the next state before it is saved: each slice has one replica out (the one on the down node) and one in, on an
   * active node that is up; a broken check throws (assert) and nothing is saved. */
  replaceDownReplicas(replacements: readonly { slice: number; node: number }[]): void {
    const before = new Map(replacements.map(({ slice }) => [slice, this.replicasOf(slice)]));
    this.commit(
      (next) => {
        for (const { slice, node } of replacements) {
          assert(setOf(next, slice).includes(node) && next.owners[slice] !== node, `node ${node} follows slice ${slice}`);
          assert(!leaves(next, slice, node) && next.joining[slice] !== node, `node ${node}'s replica of slice ${slice} is neither one that leaves nor the new one`);
          assert(!this.isUp(node), `node ${node}, whose replica of slice ${slice} is replaced, is down`);
          next.followers[slice] = next.followers[slice].filter((n) => n !== node);
        }
      },
      (next) => {
        // A replacement, not a replica less: placement put one on an active node that is up, in the same change.
        for (const { slice, node } of replacements) {
          const was = before.get(slice)!;
          const now = next.replicasOf(slice);
          const added = now.filter((n) => !was.includes(n));
          assert(!now.includes(node) && now.length === was.length && added.length === 1 && next.statusOf(added[0]) === 'active' && this.takesReplica(added[0], slice), `slice ${slice}: node ${node}'s replica is replaced by one on an active node that takes it (${was.join(',')} -> ${now.join(',')})`);
        }
      },
    );
  }

  /** Replica rebalancing onto a node that joined (membership.ts rebalanceReplicas), the first step: each
   * slice gets a replica on `to` (an active node not in its set), and its replica on `from` is marked
   * leaving: it stays in the set (R + 1 for a while, like a draining node's) until the replica on `to`
   * has caught up, and then dropLeavingReplicas takes it out. No new epoch: the leader is the same, and routers
   * learn the new follower (a target of eventually consistent reads) with the next map change, by when it
   * has caught up; a follower that cannot answer yet refuses (ReplicaNotReady) and the leader answers. */
  moveReplicas(moves: readonly { slice: number; from: number; to: number }[]): void {
    const next = structuredClone(this.state);
    for (const { slice, from, to } of moves) {
      const set = [next.owners[slice], ...next.followers[slice]];
      assert(next.leaving[slice] === -1, `slice ${slice} has no replica leaving already (one change at a time)`);
      assert(set.includes(from) && !set.includes(to), `node ${from} holds a replica of slice ${slice} and node ${to} none`);
      assert(next.status[to] === 'active' && next.status[from] === 'active', 'a replica moves between active nodes');
      next.followers[slice] = [...next.followers[slice], to];
      next.leaving[slice] = from;
      next.joining[slice] = to;
    }
    placeFollowers(next, effectiveFactor(this.replication, next), this.takesReplica, this.mayPlace);
    forgetEndedSteps(next);
    for (const { slice, to } of moves) assert(next.owners[slice] === to || next.followers[slice].includes(to), `the new replica of slice ${slice} is kept`);
    checkReplicas(next);
    this.replaceState(next);
  }

  /** The replica of the slice that leaves its set once its replacement caught up (moveReplicas), or -1. */
  leavingOf(slice: number): number {
    return this.state.leaving[slice];
  }
  /** Whether node `node`'s replica of the slice is to leave its set once its replacement caught up (see leaves). */
  leaves(slice: number, node: number): boolean {
    return leaves(this.state, slice, node);
  }
  /** The replica of the slice that leaves its set next (see leaverOf), or -1. */
  leaverOf(slice: number): number {
    return leaverOf(this.state, slice);
  }
  /** The new replica of a move under way (moveReplicas), or -1 (none, or a move recorded by an older map). */
  joiningOf(slice: number): number {
    return this.state.joining[slice];
  }

  /** Undoes replica moves and drain steps whose new replica's node went down before they completed (membership.ts
   * undoStalledMoves): the new replica leaves the set. A move's slice goes back to the set it had before, the
   * replica marked leaving staying; a drain's slice keeps its replica on the draining node, and placement (in the
   * same change) puts its new replica on another active node that is up, where there is one, else the drain waits
   * until there is. A slice the new replica led is led, in the map, by another replica on an active node until the
   * election the changed set starts names its leader. One change at a new epoch. The change runs by joint majorities
   * of both sets until it settles, as every replica-set change. */
  undoReplicaMoves(slices: readonly number[]): void {
    this.commit((next) => {
      for (const slice of slices) {
        const to = next.joining[slice];
        const set = [next.owners[slice], ...next.followers[slice]];
        assert(to >= 0 && set.includes(to), `slice ${slice} has a move or drain step under way whose new replica is in its set`);
        const rest = set.filter((n) => n !== to);
        assert(rest.some((n) => leaves(next, slice, n)), `the replica that slice ${slice} was to lose is still in its set`);
        const leader = next.owners[slice] === to ? (rest.find((n) => next.status[n] === 'active') ?? -1) : next.owners[slice];
        assert(leader >= 0, `slice ${slice} keeps a replica on an active node`);
        next.owners[slice] = leader;
        next.followers[slice] = rest.filter((n) => n !== leader);
        next.leaving[slice] = -1;
        next.joining[slice] = -1;
      }
    });
  }

  /** Leadership rebalancing (coordinator/metadata/replica-leaders.ts handOver): routing names follower `to`
   * as the slice's leader at once, at a new epoch, and the old leader stays a follower; the election that
   * follows makes it so when `to` holds every record of the old leader, else gives the leadership back. */
  handOver(moves: readonly { slice: number; to: number }[]): void {
    const sets = moves.map(({ slice, to }) => {
      const set = this.replicasOf(slice);
      assert(set.includes(to) && set[0] !== to, `node ${to} is a follower of slice ${slice}`);
      assert(this.state.status[to] === 'active', 'leadership goes to an active node');
      return set;
    });
    assert(new Set(moves.map((m) => m.slice)).size === moves.length, 'one handover per slice at a time');
    // One map change (one epoch) for all of them: routers and nodes take one new assignment, not one per slice.
    this.commit((next) => {
      moves.forEach(({ slice, to }, i) => {
        next.owners[slice] = to;
        next.followers[slice] = sets[i].filter((n) => n !== to);
      });
    });
  }

  /** Per node index: the slices it holds a replica of (leading or following). */
  replicaCounts(): number[] {
    const out = this.state.nodes.map(() => 0);
    for (let s = 0; s < this.state.sliceCount; s++) for (const n of this.replicasOf(s)) out[n]++;
    return out;
  }

  /** Fills replica sets short of the factor on nodes that are up, and trims those over it (a set left short because
   * no active node was up when it changed, or one whose last change had not settled when a map change placed the others:
   * membership.ts calls it on its tick), for the slices placement may change (mayPlace). No
   * epoch change (followers are not routing). Returns the slices whose set changed, each with its set's size before
   * and after (a fill grows it, a trim shrinks it, a replica on a node no longer active replaced keeps it). */
  placeReplicas(): { slice: number; before: number; after: number }[] {
    // Placement depends on the map and on which nodes are up alone: once it placed nothing with no slice held back,
    // it places nothing until one of them changes, and is not run again over every slice (membership.ts asks every
    // REBALANCE_INTERVAL_MS; bench/README.md, "Idle cluster").
    const at = `${this.changeCount}:${this.placementKey()}`;
    if (this.nothingToPlaceAt === at) return [];
    let heldBack = false;
    // A slice placement may not change yet (mayPlace: its last change not settled under an elected leader) is held
    // back: it is placed at a later call, once it may.
    const may = (slice: number) => this.mayPlace(slice) || ((heldBack = true), false);
    // placeFollowers and forgetEndedSteps replace only followers' and joining's entries, and save (recordUnsettled) unsettled's and
    // lastLead's: the rest of the state is shared, not copied. A write that fails leaves this.state as it was.
    const next = { ...this.state, followers: [...this.state.followers], joining: [...this.state.joining], unsettled: [...this.state.unsettled], lastLead: [...this.state.lastLead] };
    if (!placeFollowers(next, this.replicationFactor, this.takesReplica, may)) {
      if (!heldBack) this.nothingToPlaceAt = at;
      return [];
    }
    forgetEndedSteps(next);
    checkReplicas(next);
    const changed = next.followers.flatMap((f, slice) =>
      f.join() !== this.state.followers[slice].join() ? [{ slice, before: setOf(this.state, slice).length, after: setOf(next, slice).length }] : [],
    );
    this.replaceState(next);
    return changed;
  }

  get clusterId(): string {
    return this.state.clusterId;
  }
  get epoch(): number {
    return this.state.epoch;
  }
  get sliceCount(): number {
    return this.state.sliceCount;
  }
  get nodes(): readonly string[] {
    return this.state.nodes;
  }
  /** The id of the node's data folder, or null when not known yet. */
  nodeIdOf(node: number): string | null {
    return this.state.nodeIds[node];
  }
  /** The present (not removed) node whose folder has this id, or -1. */
  indexOfNodeId(nodeId: string): number {
    return this.state.nodeIds.findIndex((id, i) => id === nodeId && this.state.status[i] !== 'removed');
  }
  statusOf(node: number): NodeStatus {
    return this.state.status[node];
  }
  indexOf(url: string): number {
    return this.state.nodes.indexOf(url);
  }
  ownerOf(slice: number): number {
    return this.state.owners[slice];
  }
  slicesOf(node: number): number[] {
    const out: number[] = [];
    this.state.owners.forEach((o, s) => o === node && out.push(s));
    return out;
  }
  /** Slices per node index. */
  counts(): number[] {
    const out = this.state.nodes.map(() => 0);
    for (const o of this.state.owners) if (o >= 0) out[o]++;
    return out;
  }

  /** Adds a node (or makes a removed one active again) and returns its index. Slices
   * without a node go to it at once: there is nothing to copy. */
  addNode(url: string, nodeId: string | null = null): number {
    let index = this.state.nodes.indexOf(url);
    if (index >= 0 && this.state.status[index] !== 'removed') return index;
    if (index < 0) index = this.state.nodes.length;
    const at = index;
    this.commit((next) => {
      if (at === next.nodes.length) {
        next.nodes.push(url);
        next.status.push('active');
        next.nodeIds.push(nodeId);
      } else {
        next.status[at] = 'active';
        if (nodeId !== null) next.nodeIds[at] = nodeId;
      }
      for (let s = 0; s < next.sliceCount; s++) if (next.owners[s] === -1) next.owners[s] = at;
    });
    return index;
  }

  setStatus(node: number, status: NodeStatus): void {
    assert(status !== 'removed' || !this.state.owners.includes(node), 'a removed node owns no slice');
    this.commit((next) => {
      next.status[node] = status;
    });
  }

  /** Records the id of a node's data folder (it said Hello with it). Not a routing change: same epoch. */
  setNodeId(node: number, nodeId: string): void {
    const next = structuredClone(this.state);
    next.nodeIds[node] = nodeId;
    this.replaceState(next);
    this.onChange();
  }

  /** An operator gave up a node's data: its slices go, empty, to `to[i]` (slices[i] -> to[i]),
   * and the node is removed, in one change at a new epoch. */
  forgetNode(node: number, slices: number[], to: number[]): void {
    assert(slices.length === to.length && slices.every((s) => this.state.owners[s] === node), 'each of the node\'s slices gets a new owner');
    assert(to.every((t) => t !== node && this.state.status[t] === 'active'), 'slices go to active nodes');
    this.commit((next) => {
      slices.forEach((s, i) => (next.owners[s] = to[i]));
      assert(!next.owners.includes(node), 'a removed node owns no slice');
      next.status[node] = 'removed';
    });
  }

  /** The switch of a slice move: a new owner at a new epoch, persisted before it is used. */
  setOwner(slice: number, node: number): void {
    assert(this.state.status[node] !== 'removed', 'a slice moves to a present node');
    this.commit((next) => {
      next.owners[slice] = node;
    });
  }

  /** Failover (coordinator/metadata/failover.ts): a follower of the slice leads it from now on, at
   * the term of the election that chose it (larger than the slice's; terms a failed election used are
   * skipped). The old leader stays a follower. Persisted before it is used, at a new epoch. */
  promote(slice: number, node: number, term: number): void {
    const replicas = this.replicasOf(slice);
    assert(replicas.includes(node) && node !== replicas[0], `node ${node} is a follower of slice ${slice}`);
    assert(Number.isSafeInteger(term) && term > this.state.terms[slice], `a leader term only grows (slice ${slice} is at ${this.state.terms[slice]}, got ${term})`);
    this.commit((next) => {
      next.owners[slice] = node;
      next.followers[slice] = replicas.filter((r) => r !== node);
      next.terms[slice] = term;
    });
  }

  /** A new epoch with the same owners: a move froze (or thawed) a slice, and routers must
   * not go on with the epoch at which its old owner still looked like the owner. */
  bumpEpoch(): void {
    this.commit(() => {});
  }

  /** The map as routers get it (a copy). */
  view(): { clusterId: string; epoch: number; sliceCount: number; nodes: string[]; status: NodeStatus[]; owners: number[]; followers: number[][]; replicationFactor: number } {
    const s = this.state;
    return {
      clusterId: s.clusterId,
      epoch: s.epoch,
      sliceCount: s.sliceCount,
      nodes: [...s.nodes],
      status: [...s.status],
      owners: [...s.owners],
      followers: s.followers.map((f) => [...f]),
      replicationFactor: this.replicationFactor,
    };
  }

  /** A change at a new epoch: made to a copy, saved, and only then in force, so that
   * a failed save (a full disk) leaves the map as it was. */
  private commit(change: (next: State) => void, check: (next: ClusterMapView) => void = () => {}): void {
    const next = structuredClone(this.state);
    change(next);
    next.epoch++;
    assert(next.epoch > this.state.epoch, 'an epoch only grows');
    // A new leader gets a new term, above every term an election used; a term never goes back.
    for (let s = 0; s < next.sliceCount; s++) {
      if (next.owners[s] !== this.state.owners[s] && next.terms[s] <= this.state.terms[s]) next.terms[s] = Math.max(this.state.terms[s], this.state.termsUsed[s]) + 1;
      next.termsUsed[s] = Math.max(next.termsUsed[s], next.terms[s]);
    }
    // Placement starts no change on a slice whose last change has not settled, or that has no elected leader (mayPlace,
    // of the state before this one).
    placeFollowers(next, effectiveFactor(this.replication, next), this.takesReplica, this.mayPlace);
    forgetEndedSteps(next);
    assert(next.terms.every((t, s) => t >= this.state.terms[s]), 'a leader term only grows');
    checkReplicas(next);
    check(viewOf(next));
    this.replaceState(next);
    this.changed();
  }

  /** Resolves once the epoch reaches `epoch` (at once if it has), or after `ms`: the coordinator's request path waits
   * so after a WrongOwner or a failover (membership.ts afterWrongOwner, afterNoLeader), as a router waits for a newer
   * copy. */
  epochReaches(epoch: number, ms: number): Promise<void> {
    if (this.state.epoch >= epoch) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = {
        epoch,
        done: () => {
          clearTimeout(timer);
          this.epochWaiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.done, ms);
      this.epochWaiters.add(waiter);
    });
  }

  /** A change is in force: routers are told, and those waiting for a newer epoch go on. */
  private changed(): void {
    this.onChange();
    for (const w of this.epochWaiters) if (this.state.epoch >= w.epoch) w.done();
  }

  private save(state: State): void {
    assert(state.clusterId === this.state.clusterId, 'a cluster keeps its id');
    // One replica-set change per slice at a time (docs/replication.md, "Changes do not chain"): a write that changes a
    // slice's set starts a change, which waits until the one before settled. Chained changes are safe under joint
    // majorities but can leave a slice that never elects again (the simulation's chained runs); every caller waits
    // (membership.ts), and placement skips such slices.
    for (let slice = 0; slice < state.sliceCount; slice++) {
      if (sameSet(setOf(this.state, slice), setOf(state, slice))) continue;
      assert(this.isSettled(slice), `slice ${slice}: a replica-set change starts only once the one before settled (${setOf(this.state, slice).join(',')} -> ${setOf(state, slice).join(',')})`);
    }
    recordUnsettled(this.state, state);
    // Written in the same write as each last Lead and never cleared (recordElections): a map that breaks it was written
    // by a coordinator that did not keep everLed (everLedOf reads such a one by the rule of before).
    assert(state.everLed.every((led, slice) => led || state.lastLead[slice] === null), 'a slice with a last Lead recorded is recorded as ever led');
    assert(state.everLed.every((led, slice) => led || !this.state.everLed[slice]), 'a slice once led stays led');
    try {
      writeClusterMapFile(this.path, state);
    } catch (err) {
      this.onSave(false);
      throw new MapSaveError(this.path, err as Error);
    }
    this.onSave(true);
  }
}

/** The map file could not be written (a full disk, a folder that went read-only): the change is not in force, and the
 * map is as it was. The one failure of a change a caller may log and retry later; a broken invariant is a plain Error
 * (assert) and is not one. */
export class MapSaveError extends Error {
  constructor(path: string, cause: Error) {
    super(`cannot write the cluster map ${path}: ${cause.message}`, { cause });
    this.name = 'MapSaveError';
  }
}

/** A map change the coordinator makes on its own, where a failed save (a full disk) is expected and a broken
 * invariant is not: `change()`'s value, in `value`; or, where its save failed (MapSaveError: the change is not in
 * force and the map is as it was), null once `failed` took the error (it logs it, and the caller tries again later or
 * refuses what it was asked). Anything else thrown (an assertion) is thrown on. */
export function savedOr<T>(change: () => T, failed: (err: MapSaveError) => void): { value: T } | null {
  try {
    return { value: change() };
  } catch (err) {
    if (!(err instanceof MapSaveError)) throw err; // a broken invariant is not caught
    failed(err);
    return null;
  }
}

/** What a change's check (commit) reads of the next state, before it is saved. */
interface ClusterMapView {
  replicasOf(slice: number): number[];
  statusOf(node: number): NodeStatus;
}
const viewOf = (s: State): ClusterMapView => ({ replicasOf: (slice) => setOf(s, slice), statusOf: (node) => s.status[node] });

const activeCount = (s: State) => s.status.filter((x) => x === 'active').length;

/** Whether node `node`'s replica of the slice is to leave its set once its replacement caught up: a replica move marked
 * it leaving, or its node drains. Both are taken out the same way (dropLeavingReplicas), undone the same way
 * (undoReplicaMoves), and kept by placement meanwhile. */
const leaves = (s: State, slice: number, node: number) => s.leaving[slice] === node || s.status[node] === 'draining';

/** The replica of the slice that leaves its set next, or -1: the one a move marked leaving first (a drain started while
 * the move was under way waits for it), then one on a draining node (one node drains at a time at R > 1). A slice
 * has at most one unsettled change, so one replica leaves it at a time. */
function leaverOf(s: State, slice: number): number {
  if (s.leaving[slice] >= 0) return s.leaving[slice];
  return setOf(s, slice).find((n) => s.status[n] === 'draining') ?? -1;
}

/** [leader, ...followers] of a slice in `s` (empty while no node has joined). */
const setOf = (s: State, slice: number) => (s.owners[slice] < 0 ? [] : [s.owners[slice], ...s.followers[slice]]);
/** Where a leader elected for a slice stands: 'set', a replica of the slice's set (it becomes the owner); 'carrier', a
 * replica of one of the sets of its unsettled change and not of the set, elected to carry the change (failover.ts
 * finishElection; recorded, not made owner: docs/replication.md, "A leader outside the newest set"); null, neither (a
 * failover replaced since it published: nothing of it is recorded). */
export type LeaderPlace = 'set' | 'carrier' | null;
const leaderPlace = (s: State, slice: number, leader: number): LeaderPlace =>
  setOf(s, slice).includes(leader) ? 'set' : s.unsettled[slice].some((set) => set.includes(leader)) ? 'carrier' : null;

/** everLed as the map is to keep it, from the file's (ClusterMapState.everLed, checked as read: one true or false per
 * slice, since a slice taken as never led waits no lease out). A map without it (written before it was kept) is read by
 * the rule of then: a slice may have been led where its term is past the first or a last Lead is recorded, which counts
 * any slice whose owner changed as possibly led. So is a map that records a last Lead for a slice it says was never led:
 * a coordinator that did not keep everLed (an older version run on the folder since) wrote it, carrying the field over
 * unread and unchanged while it sent Leads, so its false entries say nothing of the time since; what was true stays
 * true. */
function everLedOf(saved: boolean[] | undefined, terms: readonly number[], lastLead: readonly (readonly [number, number] | null)[]): boolean[] {
  const ruleOfBefore = terms.map((t, s) => t !== FIRST_TERM || lastLead[s] !== null);
  if (saved === undefined) return ruleOfBefore;
  if (saved.some((e, s) => !e && lastLead[s] !== null)) return saved.map((e, s) => e || ruleOfBefore[s]);
  return saved;
}

/** Each slice whose replica set changed from `prev` to `next` keeps the set before (and the older sets of its change,
 * if that had not settled) in `next.unsettled`, in the same write as the change: a coordinator that restarts before
 * the change settled must elect by majorities of those sets too. Built from the map's set alone, an election there
 * heard a majority of the new set only, which need not hold a write acknowledged on a majority of the old one (a
 * replacement, keyslice remove's refill: {A,B,C} -> {A,B,D}, a write on A and C, and B and D elect B). A set that
 * grows from one replica keeps that one too (its slice's items are on it alone: {A} -> {A,B,C}, a coordinator started
 * again with a larger factor, and the empty B and C elect B); a set of one has no failover of its own. A set that
 * loses its only replica (keyslice remove --forget-data) keeps nothing: its items are gone, and no answer of it will
 * come. */
function recordUnsettled(prev: State, next: State): void {
  // It writes next's entries: next owns these arrays, or a write that fails would change the state in force.
  assert(next.unsettled !== prev.unsettled && next.lastLead !== prev.lastLead, 'a change is recorded in a copy of the state');
  for (let slice = 0; slice < next.sliceCount; slice++) {
    const before = setOf(prev, slice);
    const after = setOf(next, slice);
    if (sameSet(before, after)) continue;
    const kept = before.length >= 2 || (before.length === 1 && after.includes(before[0]));
    next.unsettled[slice] = kept && after.length >= 2 ? setsBefore([before, ...prev.unsettled[slice]], after) : [];
    // Nothing is known of leases across a time without replicas: the next election waits reported leases out.
    if (after.length < 2) next.lastLead[slice] = null;
  }
}

function effectiveFactor(asked: ReplicationSetting, s: State): number {
  const active = activeCount(s);
  const wanted = asked === 'auto' ? REPLICATION_FACTOR_AUTO_MAX : asked;
  return Math.max(1, Math.min(wanted, active));
}

/** Every slice's replicas are on distinct, present nodes, and the leader is not among its followers; a leaving and a
 * joining replica are in the set: null, or the first rule broken, as a sentence. Asserted on every change (checkReplicas),
 * and the file's refusal where a map read breaks it (open). */
function replicasProblem(s: State): string | null {
  for (let slice = 0; slice < s.sliceCount; slice++) {
    const f = s.followers[slice];
    const owner = s.owners[slice];
    if (!(owner >= 0 || f.length === 0)) return `slice ${slice} has followers (${f.join(',')}) but no leader`;
    if (owner >= 0 && s.status[owner] === 'removed') return `slice ${slice}'s leader (node ${owner}) is on a removed node`;
    if (new Set([owner, ...f]).size !== f.length + 1) return `slice ${slice}'s replicas (${[owner, ...f].join(',')}) are not on distinct nodes`;
    if (!f.every((n) => n >= 0 && n < s.nodes.length && s.status[n] !== 'removed')) return `slice ${slice}'s followers (${f.join(',')}) are not all on present nodes`;
    if (!(Number.isSafeInteger(s.terms[slice]) && s.terms[slice] >= 1)) return `slice ${slice}'s term (${s.terms[slice]}) is not a positive whole number`;
    // A leaving replica is one of the set, and the set keeps R others besides it (its replacement included).
    if (!(s.leaving[slice] === -1 || s.leaving[slice] === owner || f.includes(s.leaving[slice]))) return `slice ${slice}'s leaving replica (node ${s.leaving[slice]}) is not in its set`;
    // A move's or drain's new replica is named only beside the replica it replaces (a leaving one, or one on a
    // draining node), and is in the set (not that one).
    const j = s.joining[slice];
    if (!(j === -1 || ((j === owner || f.includes(j)) && j !== s.leaving[slice] && [owner, ...f].some((n) => leaves(s, slice, n))))) {
      return `slice ${slice}'s joining replica (node ${j}) is not in its set beside a leaving or draining one`;
    }
  }
  return null;
}

function checkReplicas(s: State): void {
  const problem = replicasProblem(s);
  assert(problem === null, problem ?? '');
}

/** Keeps each slice's followers that are still valid (on active nodes, at most as many as the factor
 * asks for, besides a leaving one; on draining nodes and the leaving one, all of them: a drain or a
 * replica move takes them out once their replacement caught up)
 * and fills the replicas on active nodes (the leader's included) up to the factor from the active
 * nodes that take the slice (`takes`: up, and the worker there that would run it answers), after the leader in node
 * order (a ring), so that a slice's replicas spread like its leaders do. The same state and the same answers give the
 * same sets. A node that is down, or whose worker of the slice is stuck, is skipped, not waited for: a set short of the factor is filled once a node is up (ClusterMap.placeReplicas).
 * A replica added beside one on a draining node is recorded as the drain's new replica (joining).
 * Only the slices `mayChange` allows are changed (the map's callers: those whose last change settled). Returns whether
 * anything changed. */
function placeFollowers(s: State, factor: number, takes: (node: number, slice: number) => boolean, mayChange: (slice: number) => boolean = () => true): boolean {
  const candidates = s.nodes.map((_, i) => i).filter((i) => s.status[i] === 'active');
  let changed = false;
  for (let slice = 0; slice < s.sliceCount; slice++) {
    const owner = s.owners[slice];
    const before = s.followers[slice];
    if (!mayChange(slice)) continue;
    if (owner < 0) {
      if (before.length > 0) changed = true;
      s.followers[slice] = [];
      continue;
    }
    // One replica (R=1) is the leader alone: a draining owner's slice moves whole (slice-mover.ts) instead.
    const leaving = s.leaving[slice];
    const wanted = factor <= 1 ? 0 : factor - (s.status[owner] === 'active' && owner !== leaving ? 1 : 0);
    const onActive = before.filter((n) => n !== owner && n !== leaving && s.status[n] === 'active').slice(0, wanted);
    const kept = before.filter((n) => onActive.includes(n) || (n !== owner && leaves(s, slice, n)));
    const added: number[] = [];
    for (let k = 1; k <= s.nodes.length && onActive.length + added.length < wanted; k++) {
      const n = (owner + k) % s.nodes.length;
      // Asked once per node and slice (a heartbeat may time out meanwhile, a worker's silence pass the bound).
      if (n !== owner && candidates.includes(n) && !kept.includes(n) && takes(n, slice)) added.push(n);
    }
    // What placement chooses is on an active node that took the slice when asked, and not yet a replica of the slice.
    assert(added.every((n) => s.status[n] === 'active' && n !== owner && !before.includes(n)), 'a new replica goes to an active node that takes it');
    kept.push(...added);
    if (added.length > 0 && s.leaving[slice] === -1 && s.joining[slice] === -1 && [owner, ...before].some((n) => s.status[n] === 'draining')) s.joining[slice] = added[0];
    if (kept.length !== before.length || kept.some((n, i) => n !== before[i])) changed = true;
    s.followers[slice] = kept;
  }
  return changed;
}

/** A move whose new replica placement took out (its node drained or left) is no longer one, nor is a drain's new
 * replica once no replica of the slice drains (the drain of the slice is done, or the node is active again). */
function forgetEndedSteps(s: State): void {
  for (let slice = 0; slice < s.sliceCount; slice++) {
    const set = setOf(s, slice);
    if (s.joining[slice] >= 0 && (!set.includes(s.joining[slice]) || !set.some((n) => leaves(s, slice, n)))) s.joining[slice] = -1;
  }
}

/** The owners of a new cluster's slices: contiguous, even ranges over `nodeCount`
 * nodes (none: -1, every slice waits for the first node). The advisor lays out a
 * cluster that does not run yet with it. */
export function initialOwners(sliceCount: number, nodeCount: number): number[] {
  return Array.from({ length: sliceCount }, (_, s) => (nodeCount === 0 ? -1 : Math.floor((s * nodeCount) / sliceCount)));
}

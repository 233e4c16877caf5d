// The cluster map: which slice node owns each slice, versioned by an epoch
// that only grows. Owned by the coordinator and persisted in its data folder
// (every change is written before it is used for routing).
//
// Nodes are numbered in the order they joined; a number is never reused for
// another address, so `owners` stays valid. A slice with owner -1 has no node
// yet (a cluster whose nodes register themselves, before the first one did).
import { join } from 'node:path';
import { assert } from '../shared/errors.js';
import { readStateFile, writeStateFile } from './state-file.js';

export type NodeStatus = 'active' | 'draining' | 'removed';

interface ClusterMapState {
  epoch: number;
  sliceCount: number;
  nodes: string[];
  /** status[i] of nodes[i]; absent in maps written before membership (all active). */
  status?: NodeStatus[];
  /** owners[slice] = index into nodes, or -1 */
  owners: number[];
}

export class ClusterMap {
  private constructor(
    private readonly path: string,
    private state: ClusterMapState & { status: NodeStatus[] },
  ) {
    assert(state.owners.length === state.sliceCount, 'one owner per slice');
    assert(state.status.length === state.nodes.length, 'one status per node');
    assert(state.owners.every((o) => o >= -1 && o < state.nodes.length && (o === -1 || state.status[o] !== 'removed')), 'every owner is a known, present node');
  }

  /** Loads the persisted map, or creates one that spreads the slices evenly in
   * contiguous ranges over `nodes` (none: every slice waits for the first node to
   * join). Addresses in `nodes` that the persisted map lacks join it. Returns an
   * error sentence if the persisted map disagrees with the configuration. */
  static open(dataDir: string, nodes: string[], sliceCount: number): ClusterMap | string {
    const path = join(dataDir, 'cluster-map.json');
    const saved = readStateFile<ClusterMapState>(path);
    if (saved !== null) {
      if (saved.sliceCount !== sliceCount) {
        return `this cluster was created with ${saved.sliceCount} slices; the slice count cannot change (asked for ${sliceCount})`;
      }
      const map = new ClusterMap(path, { ...saved, status: saved.status ?? saved.nodes.map(() => 'active') });
      for (const url of nodes) map.addNode(url);
      return map;
    }
    const owners = initialOwners(sliceCount, nodes.length);
    const map = new ClusterMap(path, { epoch: 1, sliceCount, nodes: [...nodes], status: nodes.map(() => 'active'), owners });
    writeStateFile(path, map.state);
    return map;
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
  addNode(url: string): number {
    let index = this.state.nodes.indexOf(url);
    if (index >= 0 && this.state.status[index] !== 'removed') return index;
    if (index < 0) index = this.state.nodes.length;
    const at = index;
    this.commit((next) => {
      if (at === next.nodes.length) {
        next.nodes.push(url);
        next.status.push('active');
      } else next.status[at] = 'active';
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

  /** The switch of a slice move: a new owner at a new epoch, persisted before it is used. */
  setOwner(slice: number, node: number): void {
    assert(this.state.status[node] !== 'removed', 'a slice moves to a present node');
    this.commit((next) => {
      next.owners[slice] = node;
    });
  }

  /** A change at a new epoch: made to a copy, saved, and only then in force, so that
   * a failed save (a full disk) leaves the map as it was. */
  private commit(change: (next: ClusterMapState & { status: NodeStatus[] }) => void): void {
    const next = structuredClone(this.state);
    change(next);
    next.epoch++;
    assert(next.epoch > this.state.epoch, 'an epoch only grows');
    writeStateFile(this.path, next);
    this.state = next;
  }
}

/** The owners of a new cluster's slices: contiguous, even ranges over `nodeCount`
 * nodes (none: -1, every slice waits for the first node). The advisor lays out a
 * cluster that does not run yet with it. */
export function initialOwners(sliceCount: number, nodeCount: number): number[] {
  return Array.from({ length: sliceCount }, (_, s) => (nodeCount === 0 ? -1 : Math.floor((s * nodeCount) / sliceCount)));
}

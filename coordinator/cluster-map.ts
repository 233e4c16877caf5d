// The cluster map: which slice node owns each slice, versioned by an epoch
// that only grows. Owned by the coordinator and persisted in its data folder.
import { join } from 'node:path';
import { assert } from '../shared/errors.js';
import { readStateFile, writeStateFile } from './state-file.js';

interface ClusterMapState {
  epoch: number;
  sliceCount: number;
  nodes: string[];
  /** owners[slice] = index into nodes */
  owners: number[];
}

export class ClusterMap {
  private constructor(
    private readonly path: string,
    private state: ClusterMapState,
  ) {
    assert(state.owners.length === state.sliceCount, 'one owner per slice');
    assert(state.owners.every((o) => o >= 0 && o < state.nodes.length), 'every owner is a known node');
  }

  /** Loads the persisted map, or creates one that spreads the slices evenly in
   * contiguous ranges over `nodes`. Returns an error sentence if the persisted
   * map disagrees with the configuration. */
  static open(dataDir: string, nodes: string[], sliceCount: number): ClusterMap | string {
    const path = join(dataDir, 'cluster-map.json');
    const saved = readStateFile<ClusterMapState>(path);
    if (saved !== null) {
      if (saved.sliceCount !== sliceCount) {
        return `this cluster was created with ${saved.sliceCount} slices; the slice count cannot change (asked for ${sliceCount})`;
      }
      if (saved.nodes.join(',') !== nodes.join(',')) {
        return `this cluster's slice nodes are ${saved.nodes.join(', ')}; start the coordinator with the same --nodes (asked for ${nodes.join(', ')})`;
      }
      return new ClusterMap(path, saved);
    }
    const owners = Array.from({ length: sliceCount }, (_, s) => Math.floor((s * nodes.length) / sliceCount));
    const map = new ClusterMap(path, { epoch: 1, sliceCount, nodes, owners });
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
  ownerOf(slice: number): number {
    return this.state.owners[slice];
  }
  slicesOf(node: number): number[] {
    const out: number[] = [];
    this.state.owners.forEach((o, s) => o === node && out.push(s));
    return out;
  }
}

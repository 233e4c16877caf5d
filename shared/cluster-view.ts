// What the coordinator tells its routers (GET /cluster/feed): the catalog and the
// cluster map as one read-only copy, with the map's epoch and the slices between
// freeze and switch of a move (a full scan waits for those: no worker owns them).
// `version` counts every change the coordinator made since it started: catalog,
// map, and freezes; a router asks for a version newer than the one it has.
import type { TableDescription } from './api.js';

export type NodeStatus = 'active' | 'draining' | 'removed';

/** A table as the catalog stores it: its description and its internal id. */
export type StoredTable = TableDescription & { id: number };

export interface ClusterView {
  /** Random per coordinator process: a router that sees another one starts counting versions afresh. */
  incarnation: string;
  version: number;
  clusterId: string;
  epoch: number;
  sliceCount: number;
  nodes: string[];
  status: NodeStatus[];
  /** up[i]: the coordinator is connected to nodes[i] now (a router that is not waits for its link). */
  up: boolean[];
  /** owners[slice] = index into nodes, or -1. */
  owners: number[];
  /** Replicas of each slice in force: above 1, a node may answer that a slice has no serving leader
   * (a failover is under way), and routers retry. Absent from older coordinators (1). */
  replicationFactor?: number;
  /** followers[slice]: the nodes after the leader that hold a replica of the slice (eventually consistent reads
   * go to any of them or the leader). Absent from older coordinators (none). */
  followers?: number[][];
  /** Slices frozen for a move's switch: owned by no worker at the view's epoch. */
  frozen: number[];
  tables: StoredTable[];
}

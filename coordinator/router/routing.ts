// What the request path needs from whoever holds the catalog and the cluster map:
// the coordinator itself (metadata/membership.ts, the map's owner) or a router
// (router-view.ts, a read-only copy fed by the coordinator). operations.ts reads
// tables from a TableSource; Router (router.ts) sends over Routing's channels.
import type { Table } from '../metadata/catalog.js';
import type { SliceChannel } from './slice-channel.js';

export interface TableSource {
  /** The table, or TableNotFound. */
  get(name: unknown): Table;
  names(): string[];
}

/** Table changes: only the coordinator makes them (a router forwards them). */
export interface TableCatalog extends TableSource {
  create(name: unknown, shardingKey: unknown, sortingKey: unknown, evenDistribution: unknown): Table;
  delete(name: unknown): Table;
}

export interface Routing {
  readonly sliceCount: number;
  /** The map's nodes and each slice's owner (an index into nodes, or -1), for the advisor. */
  layout(): { nodes: string[]; owners: number[] };
  /** The link of the node that owns `slice`, or null while no node has joined. */
  linkOf(slice: number): SliceChannel | null;
  /** The links of the nodes that hold a replica of `slice`, its leader's first (the leader's alone at R=1,
   * or while the map names no follower); empty while no node has joined. */
  replicaLinks(slice: number): SliceChannel[];
  /** Whether replicaLinks(slice) names more than one link (the slice is replicated), without building the list:
   * asked for every write (Router.send). */
  replicated(slice: number): boolean;
  /** Links of the nodes that are part of the cluster (not removed). */
  presentLinks(): SliceChannel[];
  /** The map's epoch: it moves whenever a slice's owner changes, and when a move freezes or thaws a slice (Router
   * keeps each scan range's asks while it stays). */
  readonly epoch: number;
  /** Resolves once no slice of [from, to) is between a move's freeze and switch (no worker owns such a slice then);
   * Unavailable if that lasts too long. */
  scanUnfrozen(from: number, to: number): Promise<void>;
  /** Called before an op is sent on a link that is not ready: a router waits (bounded) for a
   * node it has not reached yet since it started; the coordinator does not wait. */
  linkReady(link: SliceChannel): Promise<void>;
  /** Waits before an op refused WrongOwner is sent again (`attempt`: the refusals before this one, from 0), at most
   * wrongOwnerDelayMs(attempt) (shared/wrong-owner.ts), and less as wrongOwnerWait says from the map's epoch now,
   * `sentAt`, the epoch when the refused try was sent (default: the epoch now), and `nodeEpoch`, the epoch the node
   * named in refusing its batch (details.nodeEpoch): not at all once the map moved while the try was in flight (a
   * move's switch whose Epoch reached the node before the batch) or is at the node's epoch now; until the map reaches
   * the node's epoch where the node is ahead. A router also asks the coordinator for the newer map, unless the node is
   * the one behind. */
  afterWrongOwner(attempt: number, sentAt?: number, nodeEpoch?: number): Promise<void>;
  /** Replicas per slice in force (above 1: a node may answer that a slice has no serving leader). */
  readonly replicationFactor: number;
  /** Waits before an op that met a failover (no serving leader, or the leader's node is not
   * connected) is sent again (`attempt` from 0): a router also asks for the newer map. */
  afterNoLeader(attempt: number): Promise<void>;
}

// The cluster map's file (cluster-map.json in the coordinator's data folder): its fields, its format number, and the
// check every field goes through when it is read, before any of it is used (ClusterMap.open). A file that is damaged,
// changed by hand or written by a newer coordinator is refused in one sentence naming the file, the field and what is
// wrong (shared/state-file.ts StateFields), and the coordinator exits with it: it never serves on a map read in part.
// What one field says of another (a slice's leader and followers on distinct, present nodes; a leaving or joining
// replica in its set) is the map's own rule, checked on every change too (cluster-map.ts replicasProblem).
import type { NodeStatus } from '../../shared/cluster-view.js';
import { CLUSTER_NODE_INDEX_MAX, NODE_URL_CHARS_MAX, SLICE_COUNT_MAX } from '../../shared/limits.js';
import { isIdentity } from '../../shared/protocol.js';
import { readStateFields, type StateFields, writeStateFile } from '../../shared/state-file.js';

/** The format this coordinator writes and the newest it reads. A file without one was written before it was kept and
 * reads as this one (each field added since says how it reads where absent). Raise it when a change would be misread
 * by a coordinator that does not know it (not for a field that older ones may carry over unread: everLed's rule). */
export const CLUSTER_MAP_FORMAT = 1;

const STATUSES: readonly NodeStatus[] = ['active', 'draining', 'removed'];
const TERM_MAX = Number.MAX_SAFE_INTEGER;

export interface ClusterMapState {
  /** CLUSTER_MAP_FORMAT; absent in maps written before it was kept (read as the current one). */
  format?: number;
  /** Absent in maps written before node identity: made when such a map is opened. */
  clusterId?: string;
  epoch: number;
  sliceCount: number;
  nodes: string[];
  /** status[i] of nodes[i]; absent in maps written before membership (all active). */
  status?: NodeStatus[];
  /** owners[slice] = index into nodes, or -1 */
  owners: number[];
  /** nodeIds[i]: the id of nodes[i]'s data folder; null until it is known. Absent in older maps. */
  nodeIds?: (string | null)[];
  /** followers[slice]: node indexes after the leader, distinct, none the leader. Absent in older maps (none). */
  followers?: number[][];
  /** terms[slice]: the leader term; only grows. Absent in older maps (all 1). */
  terms?: number[];
  /** termsUsed[slice]: the largest term an election of the slice used (persisted before any replica
   * hears of it), so that a restarted coordinator never uses a term twice. Absent in older maps. */
  termsUsed?: number[];
  /** leaving[slice]: a replica of the slice that leaves its set once its replacement caught up (replica
   * rebalancing, moveReplicas), or -1. Absent in older maps (none). */
  leaving?: number[];
  /** joining[slice]: the replica that moveReplicas added beside `leaving` (the move's new replica), or that placement
   * added beside a replica on a draining node (the drain's new replica), or -1. Absent in older maps (none: a move
   * recorded by one cannot be undone, only finished or ended by removing a node). */
  joining?: number[];
  /** unsettled[slice]: the replica sets before the slice's set whose change has not settled, newest first (empty:
   * none), written with the change itself (save) and cleared once the failover counts it settled
   * (replica-leaders.ts), so that a coordinator that restarts meanwhile elects by majorities of each of them and of
   * the set, as the one before did (docs/replication.md, "A coordinator that restarts"). Absent in older maps (none). */
  unsettled?: number[][][];
  /** lastLead[slice]: [term, node] of the last Lead or LeadOn recorded for the slice (recordElections: before it
   * leaves), or null: so that the failover (a restarted coordinator's too) knows which replica may hold the only lease that may still run
   * (failover.ts: every failover reads it, FailoverHost.lastLead; the one record of it). Absent in older maps (not known). */
  lastLead?: ([number, number] | null)[];
  /** everLed[slice]: a Lead or LeadOn was recorded for the slice at some time (recordElections: before it leaves), and
   * never cleared, unlike lastLead (which a time without replicas clears: not known). False: no replica ever led the
   * slice, so no lease of it can run (neverLed). Absent in older maps: taken as true for a slice that may have been led
   * by what they kept (a term past the first, or a last Lead), so that they wait no less than they did; so too where a
   * coordinator that did not keep it wrote the map since (everLedOf: checked when read). */
  everLed?: boolean[];
}
/** The map file at `path`, each field checked (StateFileError, with the sentence, where one is wrong), or null where
 * there is none. Fields it does not know are kept as they are (a coordinator carries them over unread). */
export function readClusterMapFile(path: string): ClusterMapState | null {
  const read = readStateFields(path, 'coordinator', CLUSTER_MAP_FORMAT);
  if (read === null) return null;
  const f: StateFields = read.f;
  const saved = read.saved;
  const sliceCount = f.whole(saved.sliceCount, 'sliceCount', 1, SLICE_COUNT_MAX);
  const epoch = f.whole(saved.epoch, 'epoch', 1, Number.MAX_SAFE_INTEGER);
  const nodes = f.listOf(saved.nodes, 'nodes', undefined, (e, at) => f.string(e, at, NODE_URL_CHARS_MAX), CLUSTER_NODE_INDEX_MAX);
  const twice = nodes.findIndex((url, i) => nodes.indexOf(url) !== i);
  if (twice >= 0) f.wrong(`nodes[${twice}]`, `names ${JSON.stringify(nodes[twice])} a second time (nodes[${nodes.indexOf(nodes[twice])}])`);
  const node = (e: unknown, at: string) => f.whole(e, at, 0, nodes.length - 1);
  const nodeOrNone = (e: unknown, at: string) => f.whole(e, at, -1, nodes.length - 1);
  const perSlice = <T>(field: string, entry: (e: unknown, at: string) => T): T[] | undefined =>
    saved[field] === undefined ? undefined : f.listOf(saved[field], field, sliceCount, entry);
  const perNode = <T>(field: string, entry: (e: unknown, at: string) => T): T[] | undefined =>
    saved[field] === undefined ? undefined : f.listOf(saved[field], field, nodes.length, entry);
  const status = perNode('status', (e, at) => f.oneOf(e, at, STATUSES));
  const owners = f.listOf(saved.owners, 'owners', sliceCount, nodeOrNone);
  const term = (e: unknown, at: string) => f.whole(e, at, 1, TERM_MAX);
  return {
    ...saved,
    clusterId: saved.clusterId === undefined ? undefined : identity(f, saved.clusterId, 'clusterId'),
    epoch,
    sliceCount,
    nodes,
    status,
    owners,
    nodeIds: perNode('nodeIds', (e, at) => (e === null ? null : identity(f, e, at))),
    followers: perSlice('followers', (e, at) => f.listOf(e, at, undefined, node, nodes.length)),
    terms: perSlice('terms', term),
    termsUsed: perSlice('termsUsed', term),
    leaving: perSlice('leaving', nodeOrNone),
    joining: perSlice('joining', nodeOrNone),
    unsettled: perSlice('unsettled', (e, at) => f.listOf(e, at, undefined, (set, setAt) => f.listOf(set, setAt, undefined, node, nodes.length))),
    lastLead: perSlice('lastLead', (e, at) => {
      if (e === null) return null;
      const [t, n] = f.list(e, at, 2);
      return [term(t, `${at}[0]`), node(n, `${at}[1]`)] as [number, number];
    }),
    everLed: perSlice('everLed', (e, at) => f.boolean(e, at)),
  };
}

/** Writes the map whole, with the format number. */
export function writeClusterMapFile(path: string, state: ClusterMapState): void {
  writeStateFile(path, { ...state, format: CLUSTER_MAP_FORMAT });
}

function identity(f: StateFields, v: unknown, field: string): string {
  if (!isIdentity(v)) f.wrong(field, 'must be an id of 32 hex digits');
  return v;
}

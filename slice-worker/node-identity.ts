// Who a slice node's data folder is: a node id made at random on the folder's
// first start, and the id of the cluster whose coordinator first assigned it
// slices. Both travel in the Hello frame, so that the coordinator can tell a node
// that came back with its data from one that came back empty (or with another
// cluster's data) under the same address, and give slices only to the first.
// Kept in one small file, written whole and durably (temporary file, fsync,
// rename, fsync of the folder), so that a crash leaves the old or the new one.
// And who the process is: its incarnation, in the Hello too, so that the
// coordinator can tell (and log) a node that restarted from one whose link flapped.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { assert } from '../shared/errors.js';
import { isIdentity } from '../shared/protocol.js';
import { readStateFile, writeStateFile } from '../shared/state-file.js';

export const NODE_IDENTITY_FILE = 'node-identity.json';

export interface NodeIdentity {
  nodeId: string;
  /** null until the first assignment. */
  clusterId: string | null;
}

/** This process's incarnation: 128 random bits made when it starts, never saved (the Hello's last field, node protocol
 * 29). Another one under the same node id tells the coordinator that the node restarted (it logs so); the same one, that
 * only the link went and came back. Random rather than a boot counter kept in the folder: it takes no write before the Hello (a full or read-only
 * disk would stop the start), and a folder restored from a copy would count the same boots again; two processes draw
 * the same one by chance only, about 2^-128. */
export const NODE_INCARNATION = randomBytes(16).toString('hex');

/** Reads the folder's identity, or makes and saves one for a folder that has none.
 * Throws (with the file named) when the file exists but cannot be read: a node
 * must not quietly become another node. */
export function openNodeIdentity(dataDir: string): NodeIdentity {
  const path = join(dataDir, NODE_IDENTITY_FILE);
  if (!existsSync(path)) {
    const fresh: NodeIdentity = { nodeId: randomBytes(16).toString('hex'), clusterId: null };
    saveNodeIdentity(dataDir, fresh);
    return fresh;
  }
  const saved = readStateFile<Partial<NodeIdentity>>(path) ?? {};
  if (!isIdentity(saved.nodeId) || !(saved.clusterId === null || isIdentity(saved.clusterId))) {
    throw new Error(`${path} does not hold a node id and a cluster id (32 hex digits each)`);
  }
  return { nodeId: saved.nodeId, clusterId: saved.clusterId };
}

export function saveNodeIdentity(dataDir: string, identity: NodeIdentity): void {
  assert(isIdentity(identity.nodeId) && (identity.clusterId === null || isIdentity(identity.clusterId)), 'a node identity is two ids');
  writeStateFile(join(dataDir, NODE_IDENTITY_FILE), identity);
}

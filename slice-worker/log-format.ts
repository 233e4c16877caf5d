// What the records of the log and of snapshots carry: msgpack arrays of
// effects (partition.ts). Plain msgpack maps, not records mode, so that a file
// needs no structure definitions from elsewhere to be read back.
import { Packr, Unpackr } from 'msgpackr';
import type { Effect } from './partition.js';

export const RECORD_KIND = {
  /** Log: the changes of one batch. */
  Effects: 1,
  /** Snapshot: a chunk of stored items, as set-effects. */
  SnapshotItems: 2,
  /** Snapshot: the last record, {items, lsn}. */
  SnapshotEnd: 3,
  /** Replica log (replication/replica-log.ts): what the slices' replicas wrote in one flush, [[slice, op], ...]. */
  ReplicaOps: 4,
  /** Replica log: one slice's whole durable state, [slice, state]; replaces what came before it. */
  ReplicaCheckpoint: 5,
  /** Replica log: a slice whose replica the node no longer holds, [slice, promisedTerm]; forgets what came before
   * it but the term promised. */
  ReplicaDrop: 6,
} as const;

const packr = new Packr({ useRecords: false });
// Decoded binary values end up in partitions: copy them out of the file buffer.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true });

export function encodeEffects(effects: Effect[]): Uint8Array {
  return packr.pack(effects);
}

/** The same bytes in a buffer of their own, for bytes that are kept (a replica's log) or posted to
 * another thread: packr.pack gives a view into a buffer it reuses (32 KiB or more), which a view
 * would keep alive and which a postMessage would copy whole. */
export function encodeEffectsOwned(effects: Effect[]): Uint8Array {
  return new Uint8Array(packr.pack(effects));
}

export function decodeEffects(bytes: Uint8Array): Effect[] {
  return unpackr.unpack(bytes) as Effect[];
}

export interface SnapshotEnd {
  items: number;
  lsn: number;
}

export function encodeSnapshotEnd(end: SnapshotEnd): Uint8Array {
  return packr.pack(end);
}

export function decodeSnapshotEnd(bytes: Uint8Array): SnapshotEnd {
  return unpackr.unpack(bytes) as SnapshotEnd;
}

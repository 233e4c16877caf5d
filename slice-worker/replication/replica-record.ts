// One record of a slice's replicated log: the leader's term when it was made, its
// index in the slice's log (1, 2, 3, ... without a gap), and the payload, which is
// what WAL recovery replays (slice-worker/log-format.ts: the effects of a batch on
// this slice); an empty payload is a leader's barrier (see replica.ts). The
// checksum covers term, index and payload, so that a record damaged or mixed up
// on its way is refused whole, never half applied.
import { crc32 } from 'node:zlib';
import type { ReplicaRecord } from '../../shared/replication-protocol.js';

export type { ReplicaRecord };

/** Term and index as the checksum reads them: one buffer for every record (a Buffer each was an allocation per put,
 * made by the leader and by each follower), written and read within one call. */
const head = Buffer.alloc(12);

function checksumOf(term: number, index: number, payload: Uint8Array): number {
  head.writeUIntBE(term, 0, 6);
  head.writeUIntBE(index, 6, 6);
  // Node 20's zlib.crc32 answers 0 for an empty view of a zero-length buffer (what msgpack decodes an
  // empty payload to), whatever the starting value: an empty payload adds nothing anyway.
  return payload.length === 0 ? crc32(head) : crc32(payload, crc32(head));
}

export function makeRecord(term: number, index: number, payload: Uint8Array): ReplicaRecord {
  return { term, index, payload, checksum: checksumOf(term, index, payload) };
}

export function checksumMatches(r: ReplicaRecord): boolean {
  return checksumOf(r.term, r.index, r.payload) === r.checksum;
}

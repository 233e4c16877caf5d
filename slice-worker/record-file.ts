// Checksummed records, the framing of write-ahead log segments and snapshots.
//
//   offset  size  field
//   0       4     payload length (u32, big-endian)
//   4       6     lsn: the record's sequence number (u48)
//   10      1     kind
//   11      1     reserved (0)
//   12      4     CRC-32 of the payload
//   16      4     CRC-32 of bytes 0..15 (the header)
//   20      n     payload (msgpack)
//
// Reading tells a torn tail from corruption. A crash in the middle of an
// append leaves a prefix of the last record: a header cut short, or a valid
// header whose payload runs past the end of the file, or zeros. That tail is
// cut off. Anything else that fails a check (a bad header CRC, a full-length
// payload with a bad CRC, a gap in the sequence numbers) is corruption: the
// reader stops and names the file and offset, and never drops data silently.
import { crc32 } from 'node:zlib';
import { bufferView } from '../shared/buffer-view.js';

export const RECORD_HEADER_BYTES = 20;

export interface FileRecord {
  lsn: number;
  kind: number;
  payload: Buffer;
  offset: number;
}

export class CorruptFileError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    reason: string,
  ) {
    super(`corrupt record in ${file} at offset ${offset}: ${reason}; refusing to start rather than drop data (restore the file or remove it knowingly)`);
    this.name = 'CorruptFileError';
  }
}

/** The bytes a record of this payload takes in its file (frameRecord's length). */
export const recordBytes = (payload: Uint8Array) => RECORD_HEADER_BYTES + payload.byteLength;

export function frameRecord(lsn: number, kind: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(recordBytes(payload));
  putRecordHeader(out, lsn, kind, payload.byteLength, crc32(payload));
  out.set(payload, RECORD_HEADER_BYTES);
  return out;
}

/** A record whose payload is `parts` concatenated, framed without copying them: its header, then the parts as they
 * are (the payload's checksum taken over them in order), to be written together (a checkpoint's slice state:
 * replica-log.ts). The same bytes as frameRecord of the concatenation. */
export function frameRecordParts(lsn: number, kind: number, parts: readonly Uint8Array[]): Buffer[] {
  const out: Buffer[] = [Buffer.allocUnsafe(RECORD_HEADER_BYTES)];
  let length = 0;
  let crc = 0;
  for (const p of parts) {
    // An empty part is left out: Node 20's crc32 answers 0, not the value it was given, for an empty view of an empty
    // ArrayBuffer (msgpackr's copy of an empty bin, a snapshot's empty state read back).
    if (p.byteLength === 0) continue;
    length += p.byteLength;
    crc = crc32(p, crc);
    out.push(bufferView(p));
  }
  putRecordHeader(out[0], lsn, kind, length, crc);
  return out;
}

function putRecordHeader(out: Buffer, lsn: number, kind: number, length: number, payloadCrc: number): void {
  out.writeUInt32BE(length, 0);
  out.writeUIntBE(lsn, 4, 6);
  out[10] = kind;
  out[11] = 0;
  out.writeUInt32BE(payloadCrc, 12);
  out.writeUInt32BE(crc32(out.subarray(0, 16)), 16);
}

export interface ReadResult {
  records: FileRecord[];
  /** Bytes of whole, valid records; a torn tail starts here. */
  validBytes: number;
  /** Set when a torn tail was found (and should be cut off). */
  tornAt: number | null;
}

function allZero(buf: Buffer, from: number): boolean {
  for (let i = from; i < buf.length; i++) if (buf[i] !== 0) return false;
  return true;
}

/** Reads every record of `buf` (the whole file `file`). `firstLsn`, when given,
 * is the sequence number the first record must carry; later ones count up by one. */
export function readRecords(file: string, buf: Buffer, firstLsn: number | null): ReadResult {
  const records: FileRecord[] = [];
  let offset = 0;
  let expectLsn = firstLsn;
  while (offset < buf.length) {
    const rest = buf.length - offset;
    if (rest < RECORD_HEADER_BYTES) return { records, validBytes: offset, tornAt: offset };
    const headerCrc = buf.readUInt32BE(offset + 16);
    if (crc32(buf.subarray(offset, offset + 16)) !== headerCrc) {
      if (allZero(buf, offset)) return { records, validBytes: offset, tornAt: offset };
      throw new CorruptFileError(file, offset, 'the record header fails its checksum');
    }
    const length = buf.readUInt32BE(offset);
    const lsn = buf.readUIntBE(offset + 4, 6);
    const end = offset + RECORD_HEADER_BYTES + length;
    if (end > buf.length) return { records, validBytes: offset, tornAt: offset };
    const payload = buf.subarray(offset + RECORD_HEADER_BYTES, end);
    if (crc32(payload) !== buf.readUInt32BE(offset + 12)) {
      if (end === buf.length && allZero(payload, 0)) return { records, validBytes: offset, tornAt: offset };
      throw new CorruptFileError(file, offset, `the payload of record ${lsn} fails its checksum`);
    }
    if (expectLsn !== null && lsn !== expectLsn) throw new CorruptFileError(file, offset, `record ${lsn} where ${expectLsn} was expected`);
    records.push({ lsn, kind: buf[offset + 10], payload, offset });
    expectLsn = lsn + 1;
    offset = end;
  }
  return { records, validBytes: offset, tornAt: null };
}

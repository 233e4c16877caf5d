// The log's framing at its edges: every truncation is a torn tail that leaves
// a prefix; every flipped byte in a whole record is corruption, named by file
// and offset.
import { describe, expect, it } from 'vitest';
import { CorruptFileError, frameRecord, readRecords, RECORD_HEADER_BYTES } from '../slice-worker/record-file.js';
import { rng } from './cluster-fixture.js';

function logOf(payloadSizes: number[], firstLsn = 1): { buf: Buffer; offsets: number[] } {
  const parts: Buffer[] = [];
  const offsets: number[] = [];
  let at = 0;
  payloadSizes.forEach((n, i) => {
    const payload = Buffer.alloc(n, (i * 37 + 11) & 0xff);
    const rec = frameRecord(firstLsn + i, 1, payload);
    offsets.push(at);
    at += rec.length;
    parts.push(rec);
  });
  return { buf: Buffer.concat(parts), offsets };
}

describe('record file', () => {
  it('reads back what it framed', () => {
    const { buf } = logOf([0, 1, 100, 5000], 41);
    const r = readRecords('log', buf, 41);
    expect(r.tornAt).toBeNull();
    expect(r.validBytes).toBe(buf.length);
    expect(r.records.map((x) => [x.lsn, x.payload.length])).toEqual([
      [41, 0],
      [42, 1],
      [43, 100],
      [44, 5000],
    ]);
  });

  it('treats a cut at every offset as a torn tail and keeps the whole records before it', () => {
    const { buf, offsets } = logOf([3, 50, 0, 200, 7]);
    for (let cut = 0; cut < buf.length; cut++) {
      const r = readRecords('log', buf.subarray(0, cut), 1);
      const whole = offsets.filter((o, i) => (offsets[i + 1] ?? buf.length) <= cut).length;
      expect(r.records.length, `cut at ${cut}`).toBe(whole);
      expect(r.validBytes).toBe(whole === 0 ? 0 : (offsets[whole] ?? buf.length));
      expect(r.tornAt === null).toBe(cut === r.validBytes);
    }
  });

  it('treats zeros after the last record (an extended, unwritten tail) as torn', () => {
    const { buf } = logOf([10, 10]);
    const r = readRecords('log', Buffer.concat([buf, Buffer.alloc(300)]), 1);
    expect(r.records).toHaveLength(2);
    expect(r.tornAt).toBe(buf.length);
  });

  it('names the file and the record offset for a flipped bit anywhere in a whole record (the header has its own checksum)', () => {
    const { buf, offsets } = logOf([20, 64, 1, 300, 16]);
    const r = rng(99);
    for (let round = 0; round < 400; round++) {
      const pos = Math.floor(r() * buf.length);
      const bad = Buffer.from(buf);
      bad[pos] ^= 1 << Math.floor(r() * 8);
      const recordStart = offsets.filter((o) => o <= pos).at(-1)!;
      let err: unknown = null;
      try {
        readRecords('/data/worker-0/wal-0000000000000001.log', bad, 1);
      } catch (e) {
        err = e;
      }
      expect(err, `flip at ${pos}`).toBeInstanceOf(CorruptFileError);
      expect((err as CorruptFileError).offset).toBe(recordStart);
      expect((err as Error).message).toContain('/data/worker-0/wal-0000000000000001.log');
      expect((err as Error).message).toContain(`offset ${recordStart}`);
    }
  });

  it('refuses a gap in the sequence numbers', () => {
    const a = frameRecord(1, 1, Buffer.from('a'));
    const c = frameRecord(3, 1, Buffer.from('c'));
    expect(() => readRecords('log', Buffer.concat([a, c]), 1)).toThrow(/record 3 where 2 was expected/);
    expect(RECORD_HEADER_BYTES).toBe(20);
  });
});

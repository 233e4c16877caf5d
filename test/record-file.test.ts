// The log's framing at its edges: every truncation is a torn tail that leaves
// a prefix; every flipped byte in a whole record is corruption, named by file
// and offset. And a log's segments after a power loss in 'os' mode.
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DurabilityMode } from '../shared/limits.js';
import { CorruptFileError, frameRecord, frameRecordParts, readRecords, RECORD_HEADER_BYTES } from '../slice-worker/record-file.js';
import { firstSegmentLsn, WriteAheadLog } from '../slice-worker/wal.js';
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
  it('frames a payload given in parts as the same bytes as the payload whole, an empty part of an empty ArrayBuffer too', () => {
    // (Node 20's crc32 answers 0 for an empty view of an empty ArrayBuffer whatever the value it continues: such a part
    // taken into the checksum made a checkpoint's record fail it when read back.)
    const empty = new Uint8Array(new ArrayBuffer(0));
    const parts = [Uint8Array.of(1, 2, 3), empty, Buffer.alloc(70_000, 7), new Uint8Array(0), new Uint8Array(new ArrayBuffer(10), 2, 5).fill(9)];
    const whole = Buffer.concat(parts);
    expect(Buffer.concat(frameRecordParts(42, 5, parts))).toEqual(frameRecord(42, 5, whole));
    expect(Buffer.concat(frameRecordParts(43, 5, [empty]))).toEqual(frameRecord(43, 5, new Uint8Array(0)));
    expect(readRecords('f', Buffer.concat(frameRecordParts(7, 5, parts)), 7).records[0].payload).toEqual(whole);
  });

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
      const whole = offsets.filter((_, i) => (offsets[i + 1] ?? buf.length) <= cut).length;
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

describe('a write-ahead log over its segments, after a power loss in os mode', () => {
  /** Records 1..10 in one segment, a snapshot point at 10 (a new segment), records 11..15 in it; then the old
   * segment's tail lost to the middle of record 8, as the page cache may leave it (startSegment syncs it off the thread). */
  async function image(mode: DurabilityMode) {
    const dir = mkdtempSync(join(tmpdir(), 'ks-wal-'));
    const { log } = WriteAheadLog.open(dir, mode, 0, () => {});
    for (let i = 1; i <= 15; i++) {
      if (i === 11) await log.startSegment();
      log.append(1, Buffer.from([i]));
    }
    const first = join(dir, readdirSync(dir).sort()[0]);
    const { records } = readRecords(first, readFileSync(first), 1);
    truncateSync(first, records[7].offset + 5);
    return dir;
  }
  const replayed = (dir: string, mode: DurabilityMode, afterLsn: number) => {
    const lsns: number[] = [];
    const { recovery } = WriteAheadLog.open(dir, mode, afterLsn, (r) => lsns.push(r.lsn));
    return { lsns, recovery };
  };

  it('loses nothing when the snapshot covers the lost tail: cuts it and replays the next segment', async () => {
    const dir = await image('os');
    try {
      const { lsns, recovery } = replayed(dir, 'os', 10);
      expect(lsns).toEqual([11, 12, 13, 14, 15]);
      expect(recovery).toMatchObject({ tornBytes: 5, movedAside: [], lastLsn: 15 });
      expect(readdirSync(dir).filter((f) => f.includes('.log'))).toHaveLength(2);
      expect(replayed(dir, 'os', 10).lsns, 'and again, with nothing more to cut').toEqual([11, 12, 13, 14, 15]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without that snapshot, ends the log before the torn record and moves the next segment aside; fsync mode refuses', async () => {
    const dir = await image('os');
    try {
      expect(() => replayed(dir, 'fsync', 0)).toThrow(CorruptFileError);
      const { lsns, recovery } = replayed(dir, 'os', 0);
      expect(lsns).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(recovery).toMatchObject({ tornBytes: 5, lastLsn: 7 });
      expect(recovery.movedAside).toEqual([join(dir, 'wal-0000000000000011.log.cut')]);
      expect(firstSegmentLsn(dir)).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// writevAll (shared/durable-file.ts) writes its buffers as writeAll would their concatenation, whatever each writev
// took: a write may take less than asked (at a signal, a full disk's last bytes, a pipe), and one writev takes at
// most WRITEV_BUFFERS_MAX buffers. Here writev takes a few bytes at a time, cutting buffers anywhere, so that every
// place a short write can stop is gone through.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';

const calls: number[] = []; // buffers given to each writev
let limits = [1];
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  return {
    ...fs,
    writevSync: (fd: number, buffers: readonly Uint8Array[]): number => {
      calls.push(buffers.length);
      const all = Buffer.concat(buffers);
      const limit = limits[calls.length % limits.length];
      return fs.writeSync(fd, all, 0, Math.min(all.byteLength, limit));
    },
  };
});
const { writevAll } = await import('../shared/durable-file.js');

const dir = mkdtempSync(join(tmpdir(), 'keyslice-durable-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('writevAll', () => {
  it('writes every byte in order through short writes that stop inside a buffer, at its end, and across several', () => {
    const buffers = Array.from({ length: 40 }, (_, i) => Buffer.alloc(i % 7 === 3 ? 0 : (i * 37) % 300 + 1, i));
    const whole = Buffer.concat(buffers);
    for (const l of [[1], [5, 1, 300, 2], [299, 1_000], [whole.byteLength]]) {
      limits = l;
      calls.length = 0;
      const file = join(dir, `short-${l.join('-')}`);
      const fd = openSync(file, 'w');
      writevAll(fd, buffers);
      closeSync(fd);
      expect(readFileSync(file), `writes of at most ${l.join(', ')} bytes`).toEqual(whole);
    }
  });

  it('gives one writev at most 1,024 buffers', () => {
    limits = [1 << 30];
    calls.length = 0;
    const buffers = Array.from({ length: 2_500 }, (_, i) => Buffer.of(i & 0xff, i >> 8));
    const file = join(dir, 'many');
    const fd = openSync(file, 'w');
    writevAll(fd, buffers);
    closeSync(fd);
    expect(readFileSync(file)).toEqual(Buffer.concat(buffers));
    expect(calls).toEqual([1024, 1024, 452]);
  });
});

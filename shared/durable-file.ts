// The two file-system steps every durable write here needs: writing a buffer
// whole (writeSync may write less than asked), and fsyncing a folder so that a
// file created or renamed in it survives a crash. Each also comes as a promise,
// for work done off the thread that waits (a worker's snapshot, between batches).
import { closeSync, fsyncSync, openSync, writeSync, writevSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

export function writeAll(fd: number, bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.byteLength) written += writeSync(fd, bytes, written);
}

/** Buffers one writev takes at most (POSIX IOV_MAX is at least 16; Linux's is 1,024). */
const WRITEV_BUFFERS_MAX = 1024;

/** Writes `buffers` one after another, as writeAll of their concatenation, without joining them (writev), each call
 * at most WRITEV_BUFFERS_MAX of them; a short write goes on from where it stopped. */
export function writevAll(fd: number, buffers: readonly Uint8Array[]): void {
  let i = 0;
  let skip = 0; // bytes of buffers[i] already written
  while (i < buffers.length) {
    const batch: Uint8Array[] = [];
    for (let j = i; j < buffers.length && batch.length < WRITEV_BUFFERS_MAX; j++) batch.push(j === i && skip > 0 ? buffers[j].subarray(skip) : buffers[j]);
    let written = writevSync(fd, batch);
    while (i < buffers.length && written >= buffers[i].byteLength - skip) {
      written -= buffers[i].byteLength - skip;
      skip = 0;
      i++;
    }
    skip += written;
  }
}

export async function writeAllAsync(file: FileHandle, bytes: Uint8Array): Promise<void> {
  let written = 0;
  while (written < bytes.byteLength) written += (await file.write(bytes, written)).bytesWritten;
}

export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export async function syncDirAsync(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

// The two file-system steps every durable write here needs: writing a buffer
// whole (writeSync may write less than asked), and fsyncing a folder so that a
// file created or renamed in it survives a crash. Each also comes as a promise,
// for work done off the thread that waits (a worker's snapshot, between batches).
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

export function writeAll(fd: number, bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.byteLength) written += writeSync(fd, bytes, written);
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

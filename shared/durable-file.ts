// The two file-system steps every durable write here needs: writing a buffer
// whole (writeSync may write less than asked), and fsyncing a folder so that a
// file created or renamed in it survives a crash.
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';

export function writeAll(fd: number, bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.byteLength) written += writeSync(fd, bytes, written);
}

export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

// Small JSON state files (catalog, cluster map, a node's identity) written atomically: write a
// temporary file, fsync it, rename it over the old one, fsync the folder.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync } from 'node:fs';
import { syncDir, writeAll } from './durable-file.js';
import { dirname } from 'node:path';

export function readStateFile<T>(path: string): T | null {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch (err) {
    throw new Error(`cannot read state file ${path}: ${(err as Error).message}`);
  }
}

export function writeStateFile(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w');
  try {
    writeAll(fd, Buffer.from(JSON.stringify(value, null, 2) + '\n'));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  syncDir(dirname(path));
}

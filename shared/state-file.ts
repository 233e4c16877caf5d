// Small JSON state files (catalog, cluster map, a node's identity) written atomically: write a
// temporary file, fsync it, rename it over the old one, fsync the folder. Read back checked field by
// field (StateFields): a file that is damaged, changed by hand or written by a newer version is refused
// in one sentence naming the file, the field and what is wrong, before anything of it is used.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync } from 'node:fs';
import { syncDir, writeAll } from './durable-file.js';
import { dirname } from 'node:path';

/** A state file that cannot be used as it is. Its message is the one sentence the process that reads it exits with
 * (never an answer to a client, so no ErrorCode): a process must not start on a file it read only in part. */
export class StateFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateFileError';
  }
}

/** The file's JSON as written, or null where there is none; StateFileError where it is not JSON (cut short by a full
 * disk, damaged). */
export function readStateFile<T>(path: string): T | null {
  if (!existsSync(path)) return null;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new StateFileError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new StateFileError(`${path} is not whole JSON (${(err as Error).message}): the file is cut short or damaged`);
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

/** The sentence that refuses the state file at `path`, saying what is wrong with it. */
export function damagedFile(path: string, what: string): string {
  return `${path}: ${what}; the file was changed by hand or is damaged`;
}

/** The state file at `path` read for checking (null: there is none): its JSON an object, its format number no newer
 * than `known` (StateFields.format); the fields (`saved`) to check with `f` (bind it as `const f: StateFields`: TypeScript
 * narrows by a never-returning check only through a name of declared type). Every checked reader starts here. */
export function readStateFields(path: string, who: string, known: number): { f: StateFields; saved: Record<string, unknown> } | null {
  const raw = readStateFile<unknown>(path);
  if (raw === null) return null;
  const f = new StateFields(path, who);
  const saved = f.object(raw, 'the file');
  f.format(saved.format, known);
  return { f, saved };
}

/** The checks a state file's fields go through when read, each throwing StateFileError with the file, the field (a
 * path such as `owners[3]`) and what is wrong. `who` names the version that writes it ("coordinator"). */
export class StateFields {
  constructor(
    readonly path: string,
    private readonly who: string,
  ) {}

  /** Refuses the file: `field` and what is wrong with it. */
  wrong(field: string, what: string): never {
    throw new StateFileError(damagedFile(this.path, `${field} ${what}`));
  }

  /** The file's format number: absent in files written before it was kept (read as `known`, the newest this version
   * writes); a newer one is refused, since what this version does not know of it would be dropped or misread. */
  format(v: unknown, known: number): number {
    if (v === undefined) return known;
    const format = this.whole(v, 'format', 1, Number.MAX_SAFE_INTEGER);
    if (format > known) {
      throw new StateFileError(
        `${this.path} has format ${format}, written by a newer ${this.who}; this one reads format ${known} at most: start the version that wrote it (docs/operations.md, "The coordinator's data folder")`,
      );
    }
    return format;
  }

  object(v: unknown, field: string): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) this.wrong(field, `must be a JSON object; it is ${shown(v)}`);
    return v as Record<string, unknown>;
  }

  /** A whole number from `min` to `max`. */
  whole(v: unknown, field: string, min: number, max: number): number {
    if (!Number.isSafeInteger(v) || (v as number) < min || (v as number) > max) this.wrong(field, `must be a whole number from ${min} to ${max}; it is ${shown(v)}`);
    return v as number;
  }

  /** A list of exactly `length` entries (undefined: any length up to `max`). */
  list(v: unknown, field: string, length: number | undefined, max = Number.MAX_SAFE_INTEGER): unknown[] {
    if (!Array.isArray(v)) this.wrong(field, `must be a list; it is ${shown(v)}`);
    if (length !== undefined && v.length !== length) this.wrong(field, `must be a list of ${length}; it has ${v.length}`);
    if (v.length > max) this.wrong(field, `must be a list of at most ${max}; it has ${v.length}`);
    return v;
  }

  /** A list of `length` (or any length) each checked by `entry` (given the entry's field). */
  listOf<T>(v: unknown, field: string, length: number | undefined, entry: (e: unknown, field: string) => T, max?: number): T[] {
    return this.list(v, field, length, max).map((e, i) => entry(e, `${field}[${i}]`));
  }

  string(v: unknown, field: string, maxChars: number): string {
    if (typeof v !== 'string' || v.length > maxChars) this.wrong(field, `must be a string of at most ${maxChars} characters; it is ${shown(v)}`);
    return v;
  }

  boolean(v: unknown, field: string): boolean {
    if (typeof v !== 'boolean') this.wrong(field, `must be true or false; it is ${shown(v)}`);
    return v;
  }

  /** One of `values`. */
  oneOf<T extends string>(v: unknown, field: string, values: readonly T[]): T {
    if (!values.includes(v as T)) this.wrong(field, `must be one of ${values.join(', ')}; it is ${shown(v)}`);
    return v as T;
  }
}

/** A value as a sentence shows it: short (a damaged file may hold anything). */
function shown(v: unknown): string {
  if (v === undefined) return 'missing';
  const text = JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

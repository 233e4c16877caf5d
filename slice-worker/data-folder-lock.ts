// One slice node per data folder. Two nodes on one folder would append to the
// same logs and each believe its copy of the slices is the only one, so the
// second is refused at start with a sentence that names the first's pid.
//
// The lock is a numbered file, `slice-node.lock.<n>`, holding its holder's pid
// (and, on Linux, the holder's start time, so that a reused pid is not taken
// for the holder). Taking the lock means creating the next number with link()
// (atomic: it fails if the name exists, and the content is whole from the
// first moment); it is allowed only when the highest number is held by no live
// process: after a SIGKILL or a crash nothing needs to be cleaned by hand.
// Numbers only grow, and the highest file always exists, which is what makes a
// takeover safe when two starts race: of two creators of the same number one
// fails, and a creator that finds a higher number after creating its own backs
// off. On exit the holder rewrites its file as released (rename over it), so a
// later start need not rely on the pid being gone.
import { linkSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DATA_FOLDER_LOCK_ATTEMPTS_MAX } from '../shared/limits.js';

const LOCK_PREFIX = 'slice-node.lock.';
const LOCK_NAME = /^slice-node\.lock\.([1-9][0-9]{0,14})$/;

/** Who holds a lock file. pid 0: released. start: the holder's start identity, or null where it cannot be read. */
interface Holder {
  pid: number;
  start: string | null;
}

export class DataFolderInUse extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`data folder ${dataDir} is in use by slice node pid ${pid}; stop that node first, or give this one another folder with --data`);
  }
}

/** A process's start identity on Linux (boot id and start time in clock ticks): a pid reused by
 * another process has another. null where /proc does not have it (another OS, or the pid is gone). */
function startIdentity(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces and parentheses): state is field 3, starttime field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return `${bootId}:${fields[19]}`;
  } catch {
    return null;
  }
}

function alive(h: Holder): boolean {
  if (h.pid === 0 || h.pid === process.pid) return false; // released, or a former process with our pid (a container's pid 1)
  try {
    process.kill(h.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false; // ESRCH: no such process
  }
  if (h.start === null) return true;
  const now = startIdentity(h.pid);
  return now === null || now === h.start;
}

function readHolder(path: string): Holder | null {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<Holder>;
    if (Number.isSafeInteger(h.pid) && h.pid! >= 0 && (h.start === null || typeof h.start === 'string')) return { pid: h.pid!, start: h.start };
  } catch {
    // unreadable: below
  }
  // Written whole before it got its name, so an unreadable file was damaged (a crash of the machine): it holds nothing.
  return null;
}

function lockNumbers(dataDir: string): number[] {
  return readdirSync(dataDir)
    .map((name) => LOCK_NAME.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

function unlinkIfThere(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Writes `content` under `name` in `dataDir`, whole: a temporary file first. `replace`: rename over
 * what is there; else link, which fails with EEXIST when the name is taken. */
function writeWhole(dataDir: string, name: string, content: Holder, replace: boolean): void {
  const temp = join(dataDir, `.${name}.${process.pid}.tmp`);
  writeFileSync(temp, JSON.stringify(content));
  try {
    if (replace) renameSync(temp, join(dataDir, name));
    else linkSync(temp, join(dataDir, name));
  } finally {
    if (!replace) unlinkIfThere(temp);
  }
}

export interface DataFolderLock {
  path: string;
  release(): void;
}

/** Takes `dataDir` for this process, or throws DataFolderInUse naming the live holder. The lock is
 * released when the process exits (process.on('exit')); a process killed outright leaves a file
 * that the next start sees is held by no live process. */
export function lockDataFolder(dataDir: string): DataFolderLock {
  const me: Holder = { pid: process.pid, start: startIdentity(process.pid) };
  for (let attempt = 0; attempt < DATA_FOLDER_LOCK_ATTEMPTS_MAX; attempt++) {
    const numbers = lockNumbers(dataDir);
    const top = numbers.length === 0 ? 0 : numbers[numbers.length - 1];
    if (top > 0) {
      const holder = readHolder(join(dataDir, LOCK_PREFIX + top));
      if (holder !== null && alive(holder)) throw new DataFolderInUse(dataDir, holder.pid);
    }
    const mine = top + 1;
    try {
      writeWhole(dataDir, LOCK_PREFIX + mine, me, false);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue; // another start took this number first: look again
      throw err;
    }
    // A start that saw an older top may have created a number below one that a newer holder
    // created (after that holder cleared the older files): the highest number wins.
    const after = lockNumbers(dataDir);
    if (after[after.length - 1] !== mine) {
      unlinkIfThere(join(dataDir, LOCK_PREFIX + mine));
      continue;
    }
    // The files below ours belong to processes that are gone (each was judged so by the creator of the next).
    for (const n of after) if (n < mine) unlinkIfThere(join(dataDir, LOCK_PREFIX + n));
    const path = join(dataDir, LOCK_PREFIX + mine);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      process.off('exit', release);
      // Kept (numbers only grow), marked released; best effort: a folder gone or read-only leaves a file of a dead pid.
      try {
        writeWhole(dataDir, LOCK_PREFIX + mine, { pid: 0, start: null }, true);
      } catch {
        // nothing more to do on the way out
      }
    };
    process.on('exit', release);
    return { path, release };
  }
  throw new Error(`could not lock data folder ${dataDir}: ${DATA_FOLDER_LOCK_ATTEMPTS_MAX} attempts raced with other starts on it`);
}

// The CPU a replica-log checkpoint costs right after a compaction (slice-worker/replication/replica-log.ts):
// a log holding records of a few slices, each slice then compacted into a snapshot of the given size (what
// Replica.compact writes), then checkpoint(). One process, no threads or sockets, so that two builds compare on a
// busy machine: --build names another build's folder (its dist/ modules are used), and runs alternate by hand.
//
//   npm run build && node dist/bench/checkpoint-cost.js [--state-mb 16] [--slices 4] [--reps 5] [--build DIR]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { median } from './median.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    'state-mb': { default: '16', help: 'MiB of snapshot state, all slices together' },
    slices: { default: '4', help: 'slices in the log' },
    reps: { default: '5', help: 'checkpoints timed (the median is printed)' },
    build: { default: '', help: "another build's folder (its dist/ is used): to compare two builds" },
    durability: { default: 'os', help: "the log's durability: os or fsync (a sync per append)" },
  },
  'usage: node dist/bench/checkpoint-cost.js [options]',
).values;
const STATE_MB = intArg('state-mb', args['state-mb'], 1, 1024);
const SLICES = intArg('slices', args.slices, 1, 64);
const REPS = intArg('reps', args.reps, 1, 100);
const RECORDS = 200;

const dist = args.build === '' ? new URL('..', import.meta.url).href : pathToFileURL(join(resolve(args.build), 'dist/')).href;
const { ReplicaLog } = (await import(new URL('slice-worker/replication/replica-log.js', dist).href)) as typeof import('../slice-worker/replication/replica-log.js');
const { makeRecord } = (await import(new URL('slice-worker/replication/replica-record.js', dist).href)) as typeof import('../slice-worker/replication/replica-record.js');

const ms: number[] = [];
const wall: number[] = [];
for (let r = 0; r < REPS; r++) {
  const dir = mkdtempSync(join(tmpdir(), 'keyslice-bench-checkpoint-'));
  try {
    const { log } = ReplicaLog.open(dir, args.durability === 'fsync' ? 'fsync' : 'os');
    for (let s = 0; s < SLICES; s++) {
      for (let i = 1; i <= RECORDS; i++) log.diskFor(s).write({ kind: 'append', records: [makeRecord(1, i, new Uint8Array(1024).fill(i))] });
      log.diskFor(s).write({ kind: 'commit', index: RECORDS });
    }
    await new Promise<void>((done) => log.diskFor(0).sync(done));
    // What a compaction writes: each slice's state at its commit point, with no sync waiting on it.
    const state = new Uint8Array(Math.floor((STATE_MB * 1024 * 1024) / SLICES)).fill(3);
    // (compacted(): since the compaction in steps; a build before it left a snapshot out of the checkpoint's flush.)
    for (let s = 0; s < SLICES; s++) {
      const disk = log.diskFor(s) as ReturnType<typeof log.diskFor> & { compacted?: (op: unknown) => void };
      const op = { kind: 'snapshot' as const, index: RECORDS, term: 1, state };
      if (disk.compacted !== undefined) disk.compacted(op);
      else disk.write(op);
    }
    const before = process.cpuUsage();
    const started = performance.now();
    await log.checkpoint();
    const used = process.cpuUsage(before);
    ms.push((used.user + used.system) / 1000);
    wall.push(performance.now() - started);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
ms.sort((a, b) => a - b);
wall.sort((a, b) => a - b);
console.log(`${args.build === '' ? 'this build' : args.build}: checkpoint after compacting ${SLICES} slices (${STATE_MB} MiB of state, ${args.durability}): ${median(ms).toFixed(1)} ms of CPU, ${median(wall).toFixed(1)} ms in all, medians of ${REPS} (CPU ${ms.map((m) => m.toFixed(1)).join(', ')})`);

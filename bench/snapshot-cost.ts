// The CPU a worker snapshot (slice-worker/snapshot.ts writeSnapshot of SliceStore.snapshotView) costs, and the heap it
// leaves behind, of a store whose items a follower applied from its leader's records (--held yes: kept as their packed
// bytes, SliceStore.applyRecord) or a leader's items (--held no: decoded, no bytes kept). A fresh store each
// repetition (a snapshot may change what the store holds). One process, no threads or sockets, so that two builds
// compare on a busy machine: --build names another build's folder (its dist/ modules are used); alternate runs by hand.
//
//   npm run build && node --expose-gc dist/bench/snapshot-cost.js [--items 100000] [--reps 5] [--held yes] [--build DIR]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { median } from './median.js';
import type { Effect } from '../shared/protocol.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    items: { default: '100000', help: 'items in the store (about 200 bytes each, 16 to a record, over 8 slices)' },
    reps: { default: '5', help: 'snapshots timed, a fresh store each (the median is printed)' },
    held: { default: 'yes', help: "yes: a follower's items, applied from records; no: a leader's, decoded" },
    build: { default: '', help: "another build's folder (its dist/ is used): to compare two builds" },
  },
  'usage: node dist/bench/snapshot-cost.js [options]   (under node --expose-gc: the heap left is measured after a full collection)',
).values;
const ITEMS = intArg('items', args.items, 16, 10_000_000);
const REPS = intArg('reps', args.reps, 1, 100);
if (args.held !== 'yes' && args.held !== 'no') fail('--held must be yes or no');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) fail('run with node --expose-gc (the heap left behind is measured after a full collection)');
const SLICES = 8;
const PER_RECORD = 16;

const dist = args.build === '' ? new URL('..', import.meta.url).href : pathToFileURL(join(resolve(args.build), 'dist/')).href;
const { SliceStore } = (await import(new URL('slice-worker/partition.js', dist).href)) as typeof import('../slice-worker/partition.js');
const { writeSnapshot } = (await import(new URL('slice-worker/snapshot.js', dist).href)) as typeof import('../slice-worker/snapshot.js');
const { decodeReplicated, encodeReplicated } = (await import(new URL('slice-worker/log-format.js', dist).href)) as typeof import('../slice-worker/log-format.js');
const { EFFECT_SET } = (await import(new URL('shared/protocol.js', dist).href)) as typeof import('../shared/protocol.js');
const { itemBytes } = (await import(new URL('shared/values.js', dist).href)) as typeof import('../shared/values.js');

// The records a leader replicates for puts of ~200-byte items (bench/put-path.ts's shape): plain items.
const records: { slice: number; payload: Uint8Array }[] = [];
for (let i = 0; i < ITEMS; i += PER_RECORD) {
  const slice = (i / PER_RECORD) % SLICES;
  const effects: Effect[] = [];
  for (let j = i; j < Math.min(ITEMS, i + PER_RECORD); j++) {
    const item = { device: `device-${j % 50_000}`, seq: j, v: j * 7, pad: 'x'.repeat(150) };
    effects.push([EFFECT_SET, 1, slice, `key-${String(j).padStart(9, '0')}`, item, itemBytes(item)]);
  }
  records.push({ slice, payload: encodeReplicated(effects, null) });
}

const cpu: number[] = [];
const wall: number[] = [];
const retained: number[] = [];
for (let r = 0; r < REPS; r++) {
  const store = new SliceStore(0, 1);
  for (const { slice, payload } of records) {
    if (args.held === 'yes') store.applyRecord(slice, payload);
    else for (const e of decodeReplicated(payload).effects) store.replay(e);
  }
  store.takeEffects();
  const dir = mkdtempSync(join(tmpdir(), 'keyslice-bench-snapshot-cost-'));
  try {
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const before = process.cpuUsage();
    const started = performance.now();
    await writeSnapshot(dir, 1, store.snapshotView(), { stepMs: 1_000_000, between: async () => {} });
    const used = process.cpuUsage(before);
    wall.push(performance.now() - started);
    cpu.push((used.user + used.system) / 1000);
    gc();
    retained.push((process.memoryUsage().heapUsed - heapBefore) / 2 ** 20);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (store.itemCount !== ITEMS) fail(`the store holds ${store.itemCount} items, not ${ITEMS}`);
}
const f = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(', ');
console.log(
  `${args.build === '' ? 'this build' : args.build}: snapshot of ${ITEMS} items (${args.held === 'yes' ? "a follower's, held as bytes" : "a leader's, decoded"}): ` +
    `${median(cpu).toFixed(1)} ms of CPU, ${median(wall).toFixed(1)} ms in all, heap left ${median(retained).toFixed(1)} MiB, medians of ${REPS} (CPU ${f(cpu)}; heap ${f(retained)})`,
);

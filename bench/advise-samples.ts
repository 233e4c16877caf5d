// Sample files for the key-design advisor, one per anti-pattern and two
// healthy ones, shaped like the load generator's key-design workloads
// (bench/load.ts) so that the advisor's recommendation can be run by it:
//   node dist/bench/advise-samples.js NAME FILE [ITEMS]    (JSON lines)
// Each sample names the design it is judged with (SAMPLES[name].design). The
// tests generate the same files.
import { createWriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { KeySchema } from '../shared/api.js';
import { readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import type { Item } from '../shared/values.js';

export interface SampleSpec {
  /** What the sample shows. */
  about: string;
  /** The design given to the advisor, as keyslice advise flags. */
  design: { sharding: KeySchema[]; sorting: KeySchema[] };
  /** The anti-pattern the advisor should name for the given design, or null. */
  antiPattern: 'hot-key' | 'low-cardinality' | 'time-ordered-key' | 'oversized-partition' | null;
  /** Extra advisor flags the sample is meant to be judged with. */
  flags: string[];
  /** The load-generator workload of the same shape, if there is one. */
  workload: string | null;
  items: number;
  item(i: number): Item;
}

/** Pads an item to about 200 bytes, as the load generator does. */
const pad = (n: number) => 'x'.repeat(n);
const DAY_MS = 86_400_000;
const BASE_TS = Date.UTC(2025, 0, 1);
const isoDay = (d: number) => new Date(BASE_TS + d * DAY_MS).toISOString().slice(0, 10);

export const SAMPLES: Record<string, SampleSpec> = {
  hotkey: {
    about: 'load.ts hotkey: 9 of 10 writes go to one device, the rest round the other 10,000',
    design: { sharding: [{ name: 'device', type: 'string' }], sorting: [{ name: 'seq', type: 'number' }] },
    antiPattern: 'hot-key',
    flags: [],
    workload: 'hotkey',
    items: 20_000,
    item(i) {
      if (i % 10 < 9) return { device: 'dev-hot', seq: Math.floor(i / 10) * 9 + (i % 10), payload: pad(170) };
      const k = Math.floor(i / 10);
      return { device: `dev-${k % 10_000}`, seq: Math.floor(k / 10_000), payload: pad(170) };
    },
  },
  lowcard: {
    about: 'load.ts lowcard: every write goes to one of 12 devices, in turn',
    design: { sharding: [{ name: 'device', type: 'string' }], sorting: [{ name: 'seq', type: 'number' }] },
    antiPattern: 'low-cardinality',
    flags: [],
    workload: 'lowcard',
    items: 20_000,
    item: (i) => ({ device: `dev-${i % 12}`, seq: Math.floor(i / 12), payload: pad(170) }),
  },
  timebucket: {
    about: 'load.ts timebucket: events sharded by their day (300 days of 100 events, in time order), sorted by time',
    design: { sharding: [{ name: 'day', type: 'string' }], sorting: [{ name: 'ts', type: 'number' }] },
    antiPattern: 'time-ordered-key',
    flags: [],
    workload: 'timebucket',
    items: 30_000,
    item(i) {
      const d = Math.floor(i / 100);
      return { day: isoDay(d), ts: BASE_TS + d * DAY_MS + (i % 100) * 1000, device: `dev-${i % 50}`, payload: pad(150) };
    },
  },
  oversized: {
    about: '300 accounts with 10 events of about 1 KB each, judged for a table of 4 billion events',
    design: { sharding: [{ name: 'account', type: 'string' }], sorting: [{ name: 'id', type: 'number' }] },
    antiPattern: 'oversized-partition',
    flags: ['--expected-items', '4000000000'],
    workload: null,
    items: 3_000,
    item: (i) => ({ account: `acct-${i % 300}`, id: Math.floor(i / 300), payload: pad(1000) }),
  },
  monotonic: {
    about: 'load.ts monotonic: the timestamp itself is the sharding key (every write a new, larger key)',
    design: { sharding: [{ name: 'ts', type: 'number' }], sorting: [] },
    antiPattern: null,
    flags: [],
    workload: 'monotonic',
    items: 20_000,
    item: (i) => ({ ts: 1_700_000_000_000_000 + i, payload: pad(180) }),
  },
  usertime: {
    about: 'load.ts usertime: (user, timestamp), users in turn over 10,000',
    design: { sharding: [{ name: 'user', type: 'string' }], sorting: [{ name: 'ts', type: 'number' }] },
    antiPattern: null,
    flags: [],
    workload: 'usertime',
    items: 20_000,
    item: (i) => ({ user: `user-${i % 10_000}`, ts: 1_700_000_000_000_000 + i, payload: pad(175) }),
  },
};

/** The keyslice advise flags of a sample's design. */
export function designFlags(spec: SampleSpec): string[] {
  const cols = (cs: KeySchema[]) => cs.map((c) => `${c.name}:${c.type}`).join(',');
  return ['--sharding', cols(spec.design.sharding), ...(spec.design.sorting.length > 0 ? ['--sorting', cols(spec.design.sorting)] : []), ...spec.flags];
}

/** Writes a sample as JSON lines. */
export async function writeSample(name: string, path: string, items?: number): Promise<void> {
  const spec = SAMPLES[name];
  if (spec === undefined) throw new Error(`no sample "${name}" (samples: ${Object.keys(SAMPLES).join(', ')})`);
  const out = createWriteStream(path);
  const n = items ?? spec.items;
  for (let i = 0; i < n; i++) {
    if (!out.write(JSON.stringify(spec.item(i)) + '\n')) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const USAGE = 'usage: node dist/bench/advise-samples.js NAME FILE [ITEMS]';
  const samples = `samples: ${Object.entries(SAMPLES).map(([n, s]) => `\n  ${n}: ${s.about}`).join('')}`;
  const [name, path, items, ...more] = readCommandLine(process.argv.slice(2), {}, USAGE, { positionals: true, help: `${USAGE}\n${samples}` }).positionals;
  if (name === undefined || path === undefined || more.length > 0) refuseCommandLine(`takes a sample's name, a file and at most a number of items`, USAGE);
  if (!Object.hasOwn(SAMPLES, name)) refuseCommandLine(`no sample "${name}" (samples: ${Object.keys(SAMPLES).join(', ')})`, USAGE);
  if (items !== undefined && !/^[1-9][0-9]{0,8}$/.test(items)) refuseCommandLine(`ITEMS must be a whole number from 1 to 999999999, got "${items}"`, USAGE);
  await writeSample(name, path, items === undefined ? undefined : Number(items));
}

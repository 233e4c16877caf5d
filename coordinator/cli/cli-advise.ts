// keyslice advise FILE: the key-design advisor on a sample file. With a
// running cluster (--table T, no --sharding) the cluster judges the sample with
// its Advise operation, over its own map (the first ADVISE_ITEMS_MAX items).
// Given the design by flags (--sharding ...), it runs here, streaming the file,
// over the layout a new cluster of --nodes nodes would have (the first
// --max-items items: memory grows with the distinct keys counted, not the file).
import type { AccessEntry, AdviceReport } from '../../shared/advice.js';
import type { KeySchema } from '../../shared/api.js';
import { EXIT_USAGE, readCommandLine, UsageError, wholeNumber } from '../../shared/cli-args.js';
import { CLUSTER_OPTIONS, clusterOf } from './command-line.js';
import { KeysliceError } from '../../shared/errors.js';
import { initHashing } from '../../shared/hashing.js';
import { KEY_TYPES, type KeyType } from '../../shared/key-encoding.js';
import {
  ADVISE_ACCESS_ENTRIES_MAX,
  ADVISE_ITEMS_MAX,
  ADVISOR_MOMENT_WRITES_DEFAULT,
  ADVISOR_SAMPLE_ITEMS_DEFAULT,
  ADVISOR_SAMPLE_ITEMS_MAX,
  SLICE_COUNT_DEFAULT,
  SLICE_COUNT_MAX,
} from '../../shared/limits.js';
import type { Item } from '../../shared/values.js';
import { toJson } from '../../shared/values.js';
import { KeysliceClient } from '../client/client.js';
import { accessEntry, BadRecord, formatOf, ItemParser, records } from './item-file.js';
import { Advisor } from '../studio/advisor.js';
import { givenDesign } from '../studio/advisor-designs.js';
import { newClusterLayout } from '../studio/advisor-simulation.js';
import { renderAdvice } from '../studio/advisor-text.js';

export const ADVISE_USAGE = `usage: keyslice advise FILE --table T [options]
       keyslice advise FILE --sharding name:type[,name:type] [--sorting name:type[,...]] [--even N] [options]

Judges a key design on a sample of items (JSON lines, or CSV with a header) before any data
is loaded: the design and its alternatives (key order swapped, even distribution over 4, 16
and 64 buckets, one more sharding column where the sample has one), each with its key's
characteristics and a placement simulation, ranked, with a recommendation.

  --table T              a table of the running cluster: its design, judged by the cluster (Advise)
                         over its own slices and nodes, on the first ${ADVISE_ITEMS_MAX.toLocaleString('en-US')} items of FILE
  --sharding COLUMNS     the design instead, judged on this machine: name:type, comma-separated
  --sorting COLUMNS      (types: ${KEY_TYPES.join(', ')}); --even N: even distribution over N buckets
  --slices N, --nodes N  without a cluster: the layout of a new cluster (default ${SLICE_COUNT_DEFAULT} slices, 2 nodes)
  --max-items N          without a cluster: judge at most the first N items (default ${ADVISOR_SAMPLE_ITEMS_DEFAULT.toLocaleString('en-US')})
  --access-log FILE      reads and writes to judge with: JSON lines {"op": "read"|"write", "key": {...}},
                         or CSV with an op column (r or w) and key columns; a read may name only some
                         key attributes (a query); writes replace the sample's order as the write load
  --format jsonl|csv     the files' format (default: by extension, .csv is CSV)
  --expected-items N     the table size to plan for: partitions are projected to it
  --moment N             writes per moment (default ${ADVISOR_MOMENT_WRITES_DEFAULT})
  --json                 the report as JSON
  --url, --token         the cluster (env KEYSLICE_URL, KEYSLICE_TOKEN; default http://127.0.0.1:7100)

Bad lines are skipped and reported by line number on stderr.`;

function die(message: string, code = 1): never {
  console.error(`keyslice advise: ${message}`);
  process.exit(code);
}

function columns(text: string, flag: string): KeySchema[] {
  return text.split(',').map((c) => {
    const [name, type = 'string', extra] = c.trim().split(':');
    if (name === '' || extra !== undefined || !(KEY_TYPES as readonly string[]).includes(type)) {
      throw new UsageError(`--${flag} takes name:type columns separated by commas (types ${KEY_TYPES.join(', ')}); got "${c}"`);
    }
    return { name, type: type as KeyType };
  });
}

function parse(args: string[]) {
  const { values: v, positionals } = readCommandLine(args, {
    ...CLUSTER_OPTIONS,
    json: { type: 'boolean' },
    table: { type: 'string' },
    sharding: { type: 'string' },
    sorting: { type: 'string' },
    even: { type: 'string' },
    slices: { type: 'string' },
    nodes: { type: 'string' },
    'max-items': { type: 'string' },
    'access-log': { type: 'string' },
    format: { type: 'string' },
    'expected-items': { type: 'string' },
    moment: { type: 'string' },
  }, ADVISE_USAGE, { positionals: true, throws: true });
  if (positionals.length !== 1) throw new UsageError(`advise takes one sample file, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`);
  const local = v.sharding !== undefined && v.url === undefined;
  if (v.sharding === undefined && v.table === undefined) throw new UsageError('advise needs --table T (a table of the running cluster) or the design: --sharding name:type');
  if (v.sharding === undefined && (v.sorting !== undefined || v.even !== undefined)) throw new UsageError('--sorting and --even go with --sharding');
  if (!local && (v.slices !== undefined || v.nodes !== undefined || v['max-items'] !== undefined)) {
    throw new UsageError('--slices, --nodes and --max-items are for a design judged here (--sharding without --url); a cluster judges over its own map');
  }
  return {
    file: positionals[0],
    table: v.table,
    sharding: v.sharding === undefined ? undefined : columns(v.sharding, 'sharding'),
    sorting: v.sorting === undefined ? undefined : columns(v.sorting, 'sorting'),
    even: v.even === undefined ? undefined : wholeNumber('even', v.even, 1, 1024),
    slices: wholeNumber('slices', v.slices, 1, SLICE_COUNT_MAX, SLICE_COUNT_DEFAULT),
    nodes: wholeNumber('nodes', v.nodes, 1, 1024, 2),
    maxItems: wholeNumber('max-items', v['max-items'], 1, ADVISOR_SAMPLE_ITEMS_MAX, ADVISOR_SAMPLE_ITEMS_DEFAULT),
    accessLog: v['access-log'],
    format: v.format,
    expectedItems: v['expected-items'] === undefined ? undefined : wholeNumber('expected-items', v['expected-items'], 1, 1e15),
    moment: v.moment === undefined ? undefined : wholeNumber('moment', v.moment, 1, 1_000_000),
    json: v.json === true,
    local,
    ...clusterOf(v),
  };
}

/** Reads items (or access entries) from a file up to `max`, reporting bad records on stderr;
 * answers how many good records lay beyond `max` (counted, not parsed). */
async function readFile<T>(path: string, format: string | undefined, keyTypes: Map<string, KeyType>, max: number, take: (parser: ItemParser, r: Parameters<ItemParser['item']>[0]) => T, each: (x: T) => void): Promise<number> {
  const parser = new ItemParser(formatOf(path, format), keyTypes);
  let taken = 0;
  let beyond = 0;
  let bad = 0;
  for await (const r of records(path, parser.format)) {
    try {
      if (parser.takeHeader(r)) continue;
      if (taken >= max) {
        beyond++;
        continue;
      }
      each(take(parser, r));
      taken++;
    } catch (err) {
      if (!(err instanceof BadRecord)) throw err;
      if (++bad <= 10) console.error(`keyslice advise: ${path}: ${err.message} (skipped)`);
    }
  }
  if (bad > 10) console.error(`keyslice advise: ${path}: ${bad} bad lines skipped in all`);
  return beyond;
}

export async function advise(args: string[]): Promise<void> {
  let o: ReturnType<typeof parse>;
  try {
    o = parse(args);
  } catch (err) {
    if (err instanceof UsageError || (err instanceof Error && /^--format/.test(err.message))) die(`${err.message} (try keyslice advise --help)`, EXIT_USAGE);
    throw err;
  }
  await initHashing();
  let report: AdviceReport;
  try {
    report = o.local ? await adviseHere(o) : await adviseOnCluster(o);
  } catch (err) {
    if (err instanceof KeysliceError) die(`${err.code}: ${err.message}`);
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') die(`cannot read ${(err as NodeJS.ErrnoException).path}: no such file`);
    throw err;
  }
  if (o.json) console.log(JSON.stringify(toJson(report), null, 2));
  else console.log(renderAdvice(report, o.file));
}

async function adviseHere(o: ReturnType<typeof parse>): Promise<AdviceReport> {
  const given = givenDesign(o.sharding, o.sorting ?? null, o.even === undefined ? null : { buckets: o.even });
  const keyTypes = new Map([...given.table.sharding, ...given.table.sorting].map((c) => [c.name, c.type]));
  const nodes = Array.from({ length: o.nodes }, (_, i) => `node-${i + 1}`);
  const advisor = new Advisor(given, { layout: newClusterLayout(o.slices, nodes), expectedItems: o.expectedItems, momentWrites: o.moment });
  const beyond = await readFile(o.file, o.format, keyTypes, o.maxItems, (p, r) => p.item(r), (item: Item) => advisor.addItem(item));
  if (beyond > 0) advisor.setItemsNotJudged(beyond);
  if (o.accessLog !== undefined) await readFile(o.accessLog, o.format, keyTypes, o.maxItems, accessEntry, (e: AccessEntry) => advisor.addAccess(e));
  return advisor.report();
}

async function adviseOnCluster(o: ReturnType<typeof parse>): Promise<AdviceReport> {
  const client = await KeysliceClient.connect(o.url, { token: o.token, requestTimeoutMs: 120_000 });
  try {
    const design = o.sharding !== undefined ? { shardingKey: o.sharding, sortingKey: o.sorting ?? null, ...(o.even === undefined ? {} : { evenDistribution: { buckets: o.even } }) } : null;
    const described = design === null ? await client.describeTable(o.table!) : null;
    const keyColumns = design !== null ? [...design.shardingKey, ...(design.sortingKey ?? [])] : [described!.shardingKey, described!.sortingKey ?? []].flat();
    const keyTypes = new Map(keyColumns.map((c) => [c.name, c.type]));
    const items: Item[] = [];
    const beyond = await readFile(o.file, o.format, keyTypes, ADVISE_ITEMS_MAX, (p, r) => p.item(r), (item: Item) => items.push(item));
    const accessLog: AccessEntry[] = [];
    if (o.accessLog !== undefined) {
      const extra = await readFile(o.accessLog, o.format, keyTypes, ADVISE_ACCESS_ENTRIES_MAX, accessEntry, (e: AccessEntry) => accessLog.push(e));
      if (extra > 0) console.error(`keyslice advise: the Advise operation takes ${ADVISE_ACCESS_ENTRIES_MAX} access-log entries; ${extra} more were not sent`);
    }
    if (beyond > 0) {
      console.error(`keyslice advise: the Advise operation takes ${ADVISE_ITEMS_MAX} sample items; the first ones are judged, ${beyond} more are not (--sharding ... judges up to --max-items here)`);
    }
    const report = await client.request('Advise', {
      ...(design ?? { table: o.table! }),
      items,
      ...(accessLog.length > 0 ? { accessLog } : {}),
      ...(o.expectedItems === undefined ? {} : { expectedItems: o.expectedItems }),
      ...(o.moment === undefined ? {} : { momentWrites: o.moment }),
    });
    // The cluster saw only what was sent; the report says how much more the file had.
    if (beyond > 0) report.sample.itemsNotJudged = beyond;
    return report;
  } finally {
    await client.close();
  }
}

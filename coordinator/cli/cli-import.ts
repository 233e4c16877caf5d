// keyslice import TABLE FILE: loads an item file (JSON lines or CSV) into a
// table with BatchWrite over the TypeScript client's WebSocket, --parallel
// requests in flight. --order decides the order of the writes: as-is streams the
// file; by-sharding-key, by-sorting-key and shuffled index it first (a key and a
// byte range per item, not the items) and read each item again by its range.
// Every item is checked here as the cluster checks it (keyOfItem), so a bad line
// is reported by its number before it is sent. Throttled and unavailable writes
// are sent again, a bounded number of times, with backoff; only acknowledged
// writes count as imported.
import { performance } from 'node:perf_hooks';
import { openSync, readSync, closeSync, statSync } from 'node:fs';
import type { ItemFailure } from '../../shared/api.js';
import { EXIT_USAGE, readCommandLine, UsageError, wholeNumber } from '../../shared/cli-args.js';
import { CLUSTER_OPTIONS, clusterOf } from './command-line.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { initHashing, xxHash32 } from '../../shared/hashing.js';
import { firstPartLength } from '../../shared/key-encoding.js';
import {
  BATCH_WRITE_ITEMS_MAX,
  IMPORT_INDEXED_ITEMS_MAX,
  IMPORT_PARALLEL_DEFAULT,
  IMPORT_PARALLEL_MAX,
  IMPORT_RETRIES_MAX,
  IMPORT_RETRY_DELAY_MS_MAX,
  IMPORT_RETRY_DELAY_MS_MIN,
  IMPORT_RETRY_MS_MAX,
  ITEM_BYTES_MAX,
} from '../../shared/limits.js';
import { itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, type Item } from '../../shared/values.js';
import { tableShape, type Table } from '../metadata/catalog.js';
import { KeysliceClient } from '../client/client.js';
import { count, Progress } from './cli-progress.js';
import { backoff, mayRetry } from './cli-retry.js';
import { BadRecord, formatOf, ItemParser, records, type RawRecord } from './item-file.js';
import { keyOfItem, type PrimaryKey } from '../router/primary-key.js';

export const IMPORT_ORDERS = ['as-is', 'by-sharding-key', 'by-sorting-key', 'shuffled'] as const;
export type ImportOrder = (typeof IMPORT_ORDERS)[number];

export const IMPORT_USAGE = `usage: keyslice import TABLE FILE [options]

Writes the items of FILE (JSON lines, or CSV with a header of attribute names) into TABLE
with BatchWrite, and says at the end how fast it went and how many slices it wrote at once.

  --order ORDER        as-is (the file's order, streamed; default), by-sharding-key (all items of
                       one sharding key together), by-sorting-key (by sorting key, then sharding key),
                       shuffled (a seeded random order); orders other than as-is read the file twice
  --parallel N         BatchWrite requests in flight (default ${IMPORT_PARALLEL_DEFAULT}, at most ${IMPORT_PARALLEL_MAX})
  --batch N            items per BatchWrite (default and most ${BATCH_WRITE_ITEMS_MAX})
  --on-error skip|stop a bad line (not an item, or not a key of TABLE) is reported with its line
                       number and skipped (default), or stops the import; with an order other than
                       as-is every line is checked before anything is written
  --format jsonl|csv   (default: by extension, .csv is CSV); CSV cells are strings, or numbers where
                       the text is a number's own (and in number key columns), base64 in binary ones
  --seed N             shuffled: the seed of the order (default 1)
  --json               the summary as JSON on stdout
  --url, --token       the cluster (env KEYSLICE_URL, KEYSLICE_TOKEN; default http://127.0.0.1:7100)

Throttled (ThroughputExceeded) writes, and unavailable ones the router did not already wait for (a slice of one
replica whose node is down), are sent again up to ${IMPORT_RETRIES_MAX} times within ${IMPORT_RETRY_MS_MAX / 1000} s, waiting
${IMPORT_RETRY_DELAY_MS_MIN} ms and twice as long each time (at most ${IMPORT_RETRY_DELAY_MS_MAX} ms); only acknowledged writes
count as imported. Progress goes to stderr. Exit code 0 when every good line was imported.`;

/** One item to write: its line, the item, its key. */
interface Entry {
  line: number;
  item: Item;
  pk: PrimaryKey;
}

export interface ImportSummary {
  table: string;
  file: string;
  order: ImportOrder;
  parallel: number;
  batch: number;
  /** Acknowledged writes. */
  imported: number;
  failed: number;
  firstFailures: { line: number; code: string; message: string }[];
  badLines: number;
  firstBadLines: { line: number; message: string }[];
  /** The import stopped at a bad line (--on-error stop). */
  stoppedAtLine: number | null;
  seconds: number;
  itemsPerSecond: number;
  /** Writes sent again after a retryable failure, and how many of those were ThroughputExceeded. */
  retries: number;
  throttled: number;
  /** Per-slice write concurrency: distinct slices with writes in flight, averaged over the
   * moments a request was sent, and writes in flight per such slice. */
  concurrency: { meanSlicesInFlight: number; maxSlicesInFlight: number; meanWritesPerSlice: number };
  /** Seconds spent indexing the file before the first write (orders other than as-is). */
  indexSeconds: number;
}

const REPORTED_MAX = 20;

function die(message: string, code = 1): never {
  console.error(`keyslice import: ${message}`);
  process.exit(code);
}

function parse(args: string[]) {
  const { values: v, positionals } = readCommandLine(args, {
    ...CLUSTER_OPTIONS,
    json: { type: 'boolean' },
    order: { type: 'string' },
    parallel: { type: 'string' },
    batch: { type: 'string' },
    'on-error': { type: 'string' },
    format: { type: 'string' },
    seed: { type: 'string' },
  }, IMPORT_USAGE, { positionals: true, throws: true });
  if (positionals.length !== 2) throw new UsageError(`import takes a table and a file: keyslice import TABLE FILE (got ${positionals.length} arguments)`);
  const order = (v.order ?? 'as-is') as ImportOrder;
  if (!IMPORT_ORDERS.includes(order)) throw new UsageError(`--order must be one of ${IMPORT_ORDERS.join(', ')}, got "${v.order}"`);
  const onError = v['on-error'] ?? 'skip';
  if (onError !== 'skip' && onError !== 'stop') throw new UsageError(`--on-error must be skip or stop, got "${onError}"`);
  let format;
  try {
    format = formatOf(positionals[1], v.format);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return {
    table: positionals[0],
    file: positionals[1],
    order,
    onError: onError as 'skip' | 'stop',
    parallel: wholeNumber('parallel', v.parallel, 1, IMPORT_PARALLEL_MAX, IMPORT_PARALLEL_DEFAULT),
    batch: wholeNumber('batch', v.batch, 1, BATCH_WRITE_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX),
    seed: wholeNumber('seed', v.seed, 0, 2 ** 31, 1),
    format,
    json: v.json === true,
    ...clusterOf(v),
  };
}
type Options = ReturnType<typeof parse>;

/** Sends batches with at most `parallel` in flight; a key already in flight waits for its
 * earlier write (a later line of the same key must land last); retries what may succeed later. */
class Writer {
  imported = 0;
  failed = 0;
  retries = 0;
  throttled = 0;
  readonly failures: ImportSummary['firstFailures'] = [];
  private batch: Entry[] = [];
  private batchNames = new Set<string>();
  private readonly namesInFlight = new Map<string, Promise<void>>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly all = new Set<Promise<void>>();
  private readonly slicesInFlight = new Map<number, number>();
  private writesInFlight = 0;
  private samples = 0;
  private sliceSum = 0;
  private perSliceSum = 0;
  private sliceMax = 0;

  constructor(
    private readonly client: KeysliceClient,
    private readonly table: string,
    private readonly parallel: number,
    private readonly batchSize: number,
  ) {}

  async put(e: Entry): Promise<void> {
    if (this.batchNames.has(e.pk.name)) await this.flush();
    const earlier = this.namesInFlight.get(e.pk.name);
    if (earlier !== undefined) await earlier;
    this.batch.push(e);
    this.batchNames.add(e.pk.name);
    if (this.batch.length >= this.batchSize) await this.flush();
  }

  /** Sends the current batch once fewer than `parallel` are in flight. */
  async flush(): Promise<void> {
    if (this.batch.length === 0) return;
    while (this.active >= this.parallel) await new Promise<void>((r) => this.waiting.push(r));
    const batch = this.batch;
    this.batch = [];
    this.batchNames = new Set();
    this.active++;
    const done = this.send(batch).finally(() => {
      this.active--;
      for (const e of batch) if (this.namesInFlight.get(e.pk.name) === done) this.namesInFlight.delete(e.pk.name);
      this.all.delete(done);
      this.waiting.shift()?.();
    });
    for (const e of batch) this.namesInFlight.set(e.pk.name, done);
    this.all.add(done);
  }

  async finish(): Promise<void> {
    await this.flush();
    while (this.all.size > 0) await Promise.all([...this.all]);
  }

  get inFlight(): number {
    return this.writesInFlight;
  }

  concurrency(): ImportSummary['concurrency'] {
    return {
      meanSlicesInFlight: this.samples === 0 ? 0 : this.sliceSum / this.samples,
      maxSlicesInFlight: this.sliceMax,
      meanWritesPerSlice: this.samples === 0 ? 0 : this.perSliceSum / this.samples,
    };
  }

  private mark(entries: Entry[], delta: 1 | -1): void {
    for (const e of entries) {
      const n = (this.slicesInFlight.get(e.pk.slice) ?? 0) + delta;
      if (n === 0) this.slicesInFlight.delete(e.pk.slice);
      else this.slicesInFlight.set(e.pk.slice, n);
    }
    this.writesInFlight += delta * entries.length;
    if (delta === 1) {
      const slices = this.slicesInFlight.size;
      this.samples++;
      this.sliceSum += slices;
      this.perSliceSum += this.writesInFlight / slices;
      this.sliceMax = Math.max(this.sliceMax, slices);
    }
  }

  private fail(e: Entry, code: string, message: string): void {
    this.failed++;
    if (this.failures.length < REPORTED_MAX) this.failures.push({ line: e.line, code, message });
  }

  private async send(batch: Entry[]): Promise<void> {
    let pending = batch;
    const started = performance.now(); // mayRetry's clock
    for (let attempt = 0; ; attempt++) {
      let failures: ItemFailure[];
      this.mark(pending, 1);
      try {
        failures = await this.client.batchWrite(this.table, { puts: pending.map((e) => e.item) });
      } catch (err) {
        const e = toKeysliceError(err);
        if (!mayRetry(e, attempt, started)) {
          for (const x of pending) this.fail(x, e.code, e.message);
          return;
        }
        this.retries += pending.length;
        if (e.code === 'ThroughputExceeded') this.throttled += pending.length;
        await backoff(attempt);
        continue;
      } finally {
        this.mark(pending, -1);
      }
      const again: Entry[] = [];
      for (const f of failures) {
        const e = pending[f.index];
        if (mayRetry(f, attempt, started)) {
          again.push(e);
          if (f.code === 'ThroughputExceeded') this.throttled++;
        } else this.fail(e, f.code, f.message);
      }
      this.imported += pending.length - failures.length;
      if (again.length === 0) return;
      this.retries += again.length;
      await backoff(attempt);
      pending = again;
    }
  }
}

/** Bad lines: reported on stderr by line number, kept for the summary; under --on-error stop, the first one ends the reading. */
class BadLines {
  count = 0;
  readonly first: ImportSummary['firstBadLines'] = [];
  stoppedAt: number | null = null;

  constructor(private readonly stop: boolean) {}

  /** Answers whether reading should go on. */
  report(line: number, message: string): boolean {
    this.count++;
    const text = message.startsWith(`line ${line}`) ? message : `line ${line}: ${message}`;
    if (this.first.length < REPORTED_MAX) this.first.push({ line, message: text });
    if (this.stop) {
      this.stoppedAt = line;
      process.stderr.write(`${process.stderr.isTTY ? '\n' : ''}keyslice import: ${text}; stopping (--on-error stop)\n`);
      return false;
    }
    if (this.count <= REPORTED_MAX) process.stderr.write(`${process.stderr.isTTY ? '\n' : ''}keyslice import: ${text} (skipped)\n`);
    return true;
  }
}

/** The entry of a record: the item and its key in this table, or the reason it is none. */
/** The file's records with their checked entries, in file order; a bad record is reported
 * (with its line) and skipped, or ends the walk when --on-error stop says so. */
async function* checkedEntries(file: string, parser: ItemParser, table: Table, sliceCount: number, bad: BadLines): AsyncGenerator<[RawRecord, Entry]> {
  for await (const r of records(file, parser.format)) {
    let e: Entry;
    try {
      if (parser.takeHeader(r)) continue;
      e = entryOf(parser, table, sliceCount, r);
    } catch (err) {
      if (!(err instanceof BadRecord)) throw err;
      if (!bad.report(err.line, err.message)) return;
      continue;
    }
    yield [r, e];
  }
}

function entryOf(parser: ItemParser, table: Table, sliceCount: number, r: RawRecord): Entry {
  const item = parser.item(r);
  let pk: PrimaryKey;
  try {
    pk = keyOfItem(table, item, sliceCount);
  } catch (err) {
    if (err instanceof KeysliceError) throw new BadRecord(r.line, `line ${r.line}: ${err.message}`);
    throw err;
  }
  // Counted as PutItem counts it: the item with its object name and modification time.
  const bytes = itemBytes(item) + Buffer.byteLength(NAME_ATTRIBUTE) + Buffer.byteLength(pk.name) + Buffer.byteLength(MTIME_ATTRIBUTE) + 8;
  if (bytes > ITEM_BYTES_MAX) throw new BadRecord(r.line, `line ${r.line}: the item is ${bytes} bytes; the limit is ${ITEM_BYTES_MAX}`);
  return { line: r.line, item, pk };
}

export async function importCommand(args: string[]): Promise<void> {
  let o: Options;
  try {
    o = parse(args);
  } catch (err) {
    if (err instanceof UsageError) die(`${err.message} (try keyslice import --help)`, EXIT_USAGE);
    throw err;
  }
  let fileBytes: number;
  try {
    fileBytes = statSync(o.file).size;
  } catch {
    die(`cannot read ${o.file}: no such file`);
  }
  await initHashing();
  let client: KeysliceClient;
  try {
    client = await KeysliceClient.connect(o.url, { token: o.token, requestTimeoutMs: 60_000 });
  } catch (err) {
    die(`${(err as KeysliceError).code ?? 'Unavailable'}: ${(err as Error).message}`);
  }
  let summary: ImportSummary;
  try {
    const described = await client.describeTable(o.table);
    const table = tableShape(described.name, described.shardingKey, described.sortingKey, described.evenDistribution);
    if (o.order === 'by-sorting-key' && table.sorting.length === 0) {
      die(`table "${o.table}" has no sorting key; --order by-sorting-key needs one`, EXIT_USAGE);
    }
    const sliceCount = (await client.describeSlices(o.table)).sliceCount;
    summary = await run(o, client, table, sliceCount, fileBytes);
  } catch (err) {
    if (err instanceof KeysliceError) die(`${err.code}: ${err.message}`);
    throw err;
  } finally {
    await client.close();
  }
  if (o.json) console.log(JSON.stringify(summary, null, 2));
  else console.log(describeSummary(summary));
  process.exitCode = summary.failed > 0 || summary.stoppedAtLine !== null ? 1 : 0;
}

async function run(o: Options, client: KeysliceClient, table: Table, sliceCount: number, fileBytes: number): Promise<ImportSummary> {
  const keyTypes = new Map([...table.sharding, ...table.sorting].map((c) => [c.name, c.type]));
  const parser = new ItemParser(o.format, keyTypes);
  const writer = new Writer(client, o.table, o.parallel, o.batch);
  const bad = new BadLines(o.onError === 'stop');
  let indexSeconds = 0;
  let total: number | null = null;
  /** as-is: the end of the last record handed to the writer, and how many were. */
  let bytesPut = 0;
  let put = 0;
  const progress = new Progress(`importing into ${o.table}`, () => ({
    items: writer.imported,
    fraction: total !== null ? (total === 0 ? 1 : writer.imported / total) : fileBytes === 0 ? 1 : Math.min(1, (bytesPut / fileBytes) * (put === 0 ? 0 : writer.imported / put)),
    extra: writer.throttled > 0 ? `${count(writer.throttled)} throttled, sent again` : undefined,
  }));
  const started = performance.now(); // durations only (the summary's seconds): the monotonic clock
  try {
    if (o.order === 'as-is') {
      for await (const [r, e] of checkedEntries(o.file, parser, table, sliceCount, bad)) {
        put++;
        bytesPut = r.end;
        await writer.put(e);
      }
    } else {
      const index = await indexFile(o, parser, table, sliceCount, bad);
      indexSeconds = (performance.now() - started) / 1000;
      if (bad.stoppedAt === null) {
        total = index.count;
        const fd = openSync(o.file, 'r');
        try {
          for (const i of index.order) {
            const r: RawRecord = { line: index.lines[i], start: index.starts[i], end: index.ends[i], text: readRangeSync(fd, index.starts[i], index.ends[i]) };
            // Checked in the first pass already; a line that fails now was changed since.
            await writer.put(entryOf(parser, table, sliceCount, r));
          }
        } finally {
          closeSync(fd);
        }
      }
    }
    await writer.finish();
  } finally {
    progress.stop();
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    table: o.table,
    file: o.file,
    order: o.order,
    parallel: o.parallel,
    batch: o.batch,
    imported: writer.imported,
    failed: writer.failed,
    firstFailures: writer.failures,
    badLines: bad.count,
    firstBadLines: bad.first,
    stoppedAtLine: bad.stoppedAt,
    seconds,
    itemsPerSecond: seconds > 0 ? writer.imported / seconds : 0,
    retries: writer.retries,
    throttled: writer.throttled,
    concurrency: writer.concurrency(),
    indexSeconds,
  };
}

interface FileIndex {
  count: number;
  lines: Int32Array;
  starts: Float64Array;
  ends: Float64Array;
  order: Int32Array;
}

/** The first pass of an ordered import: every record checked, and kept as its line,
 * byte range and sort key; then the order of the writes. */
async function indexFile(o: Options, parser: ItemParser, table: Table, sliceCount: number, bad: BadLines): Promise<FileIndex> {
  let cap = 1024;
  let lines = new Int32Array(cap);
  let starts = new Float64Array(cap);
  let ends = new Float64Array(cap);
  const keys: string[] = [];
  let n = 0;
  for await (const [r, e] of checkedEntries(o.file, parser, table, sliceCount, bad)) {
    if (n >= IMPORT_INDEXED_ITEMS_MAX) die(`--order ${o.order} indexes the file first and takes at most ${IMPORT_INDEXED_ITEMS_MAX} items; use --order as-is for larger files`);
    if (n === cap) {
      cap *= 2;
      const grow = <T extends Int32Array | Float64Array>(a: T, b: T) => (b.set(a), b);
      lines = grow(lines, new Int32Array(cap));
      starts = grow(starts, new Float64Array(cap));
      ends = grow(ends, new Float64Array(cap));
    }
    lines[n] = r.line;
    starts[n] = r.start;
    ends[n] = r.end;
    if (o.order === 'by-sharding-key') keys.push(e.pk.key);
    else if (o.order === 'by-sorting-key') {
      // Encoded parts are self-delimiting, so sorting parts then the sharding part sort as the tuple (sorting, sharding).
      const shardingLength = firstPartLength(e.pk.key);
      keys.push(e.pk.key.slice(shardingLength) + e.pk.key.slice(0, shardingLength));
    }
    n++;
  }
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  if (o.order === 'shuffled') {
    // A seeded hash of each position is its place in the order: the same seed, the same order.
    const rank = new Uint32Array(n);
    for (let i = 0; i < n; i++) rank[i] = xxHash32(`${o.seed}:${i}`);
    order.sort((a, b) => rank[a] - rank[b] || a - b);
  } else {
    // Stable: the lines of one key keep their file order, so the last line of a key is written last.
    order.sort((a, b) => (keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b));
  }
  return { count: n, lines, starts, ends, order };
}

function readRangeSync(fd: number, start: number, end: number): string {
  const buf = Buffer.allocUnsafe(end - start);
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, start + done);
    if (n === 0) throw new Error(`the file ended at byte ${start + done}, inside a record it had before (was it changed during the import?)`);
    done += n;
  }
  let text = buf.toString('utf8');
  if (text.endsWith('\r')) text = text.slice(0, -1);
  return text.replace(/\r\n/g, '\n');
}

export function describeSummary(s: ImportSummary): string {
  const c = s.concurrency;
  const lines = [
    `imported ${count(s.imported)} items into ${s.table} in ${s.seconds.toFixed(1)} s: ${count(s.itemsPerSecond)} items/s (order ${s.order}, up to ${s.parallel} BatchWrite requests of ${s.batch} in flight${
      s.indexSeconds > 0 ? `; indexing the file took ${s.indexSeconds.toFixed(1)} s of it` : ''
    })`,
    `per-slice write concurrency: writes in flight were on ${c.meanSlicesInFlight.toFixed(1)} slices at once on average (at most ${count(c.maxSlicesInFlight)}), ${c.meanWritesPerSlice.toFixed(1)} writes in flight per such slice`,
    `retries: ${count(s.retries)} writes sent again (${count(s.throttled)} of them throttled: ThroughputExceeded); ${count(s.failed)} failed`,
  ];
  for (const f of s.firstFailures) lines.push(`  failed: line ${f.line}: ${f.code}: ${f.message}`);
  if (s.badLines > 0) lines.push(`bad lines: ${count(s.badLines)} ${s.stoppedAtLine !== null ? 'found' : 'skipped'}${s.badLines > s.firstBadLines.length ? ` (the first ${s.firstBadLines.length} below)` : ''}`);
  for (const b of s.firstBadLines) lines.push(`  ${b.message}`);
  if (s.stoppedAtLine !== null) {
    lines.push(
      s.order === 'as-is'
        ? `stopped at line ${s.stoppedAtLine} (--on-error stop): the ${count(s.imported)} items above are those acknowledged before it; nothing after it was sent`
        : `stopped at line ${s.stoppedAtLine} (--on-error stop) while checking the file: nothing was written`,
    );
  }
  return lines.join('\n');
}

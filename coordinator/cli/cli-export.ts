// keyslice export TABLE: streams a table out as JSON lines (stdout or --out),
// read with a parallel scan: --parallel segments, each paged by its marker.
// The system attributes (__name, __mtime) are left out, so that the file is
// what keyslice import takes back. Writes wait for the output to drain, so
// memory holds at most a page per segment.
import { performance } from 'node:perf_hooks';
import { createWriteStream, type WriteStream } from 'node:fs';
import { EXIT_USAGE, readCommandLine, UsageError, wholeNumber } from '../../shared/cli-args.js';
import { KeysliceError } from '../../shared/errors.js';
import { EXPORT_PAGE_ITEMS, EXPORT_SEGMENTS_DEFAULT, SCAN_SEGMENTS_MAX } from '../../shared/limits.js';
import { MTIME_ATTRIBUTE, NAME_ATTRIBUTE, toJson, type Item } from '../../shared/values.js';
import { KeysliceClient } from '../client/client.js';
import { count, Progress } from './cli-progress.js';
import { withRetries } from './cli-retry.js';
import { CLUSTER_OPTIONS, clusterOf } from './command-line.js';

export const EXPORT_USAGE = `usage: keyslice export TABLE [--out FILE] [--parallel N]

Writes every item of TABLE as JSON lines (binary as {"$binary": "<base64>"}), without the
system attributes __name and __mtime, so that keyslice import takes the file back.

  --out FILE        write to FILE instead of stdout
  --parallel N      scan segments read at once (default ${EXPORT_SEGMENTS_DEFAULT}, at most ${SCAN_SEGMENTS_MAX})
  --url, --token    the cluster (env KEYSLICE_URL, KEYSLICE_TOKEN; default http://127.0.0.1:7100)

Items come in no particular order. Progress and the summary go to stderr.`;

/** Pages one segment may read: far more than any table has, so the loop is bounded. */
const PAGES_MAX = 100_000_000;

function die(message: string, code = 1): never {
  console.error(`keyslice export: ${message}`);
  process.exit(code);
}

export async function exportCommand(args: string[]): Promise<void> {
  let table: string;
  let out: string | undefined;
  let segments: number;
  let url: string;
  let token: string | undefined;
  try {
    const { values: v, positionals } = readCommandLine(args, { ...CLUSTER_OPTIONS, out: { type: 'string' }, parallel: { type: 'string' } }, EXPORT_USAGE, { positionals: true, throws: true });
    if (positionals.length !== 1) throw new UsageError(`export takes one table: keyslice export TABLE (got ${positionals.length} arguments)`);
    table = positionals[0];
    out = v.out;
    segments = wholeNumber('parallel', v.parallel, 1, SCAN_SEGMENTS_MAX, EXPORT_SEGMENTS_DEFAULT);
    ({ url, token } = clusterOf(v));
  } catch (err) {
    if (err instanceof UsageError) die(`${err.message} (try keyslice export --help)`, EXIT_USAGE);
    throw err;
  }

  let client: KeysliceClient;
  try {
    client = await KeysliceClient.connect(url, { token, requestTimeoutMs: 60_000 });
  } catch (err) {
    die(`${(err as KeysliceError).code ?? 'Unavailable'}: ${(err as Error).message}`);
  }
  const stream: WriteStream | NodeJS.WriteStream = out === undefined ? process.stdout : createWriteStream(out);
  stream.on('error', (err: NodeJS.ErrnoException) => {
    // A reader that stopped reading (| head) wants no more: not a failure of the export.
    if (err.code === 'EPIPE') process.exit(0);
    die(`cannot write ${out ?? 'to stdout'}: ${err.message}`);
  });
  let exported = 0;
  const started = performance.now(); // the summary's seconds, a duration
  const progress = new Progress(`exporting ${table}`, () => ({ items: exported, fraction: null }));
  try {
    await client.describeTable(table);
    const write = async (text: string) => {
      if (!stream.write(text)) await new Promise<void>((r) => stream.once('drain', () => r()));
    };
    const segment = async (s: number) => {
      let marker: string | undefined;
      for (let page = 0; page < PAGES_MAX; page++) {
        const res = await withRetries(() => client.getItems({ table, segment: s, totalSegments: segments, limit: EXPORT_PAGE_ITEMS, ...(marker === undefined ? {} : { marker }) }));
        let text = '';
        for (const item of res.items) text += JSON.stringify(toJson(withoutSystem(item))) + '\n';
        exported += res.items.length;
        if (text !== '') await write(text);
        if (res.marker === undefined) return;
        marker = res.marker;
      }
      throw new Error(`segment ${s} did not end after ${PAGES_MAX} pages`);
    };
    await Promise.all(Array.from({ length: segments }, (_, s) => segment(s)));
    if (out !== undefined) await new Promise<void>((resolve, reject) => (stream as WriteStream).end((err?: Error | null) => (err ? reject(err) : resolve())));
  } catch (err) {
    progress.stop();
    if (err instanceof KeysliceError) die(`${err.code}: ${err.message}`);
    throw err;
  } finally {
    await client.close();
  }
  progress.stop();
  const seconds = (performance.now() - started) / 1000;
  console.error(`exported ${count(exported)} items of ${table} in ${seconds.toFixed(1)} s: ${count(seconds > 0 ? exported / seconds : 0)} items/s (${segments} segments)${out === undefined ? '' : ` to ${out}`}`);
}

function withoutSystem(item: Item): Item {
  const { [NAME_ATTRIBUTE]: _name, [MTIME_ATTRIBUTE]: _mtime, ...rest } = item;
  return rest;
}

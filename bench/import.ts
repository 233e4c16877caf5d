// The import bench: how fast `keyslice import` loads a file in each --order.
// Writes a JSON-lines file of --items items of about --item-bytes bytes
// ({device, seq, payload}, --devices devices, in time order: seq by seq, every
// device in turn), starts a local cluster (2 slice nodes x 2 workers, fsync, as
// bench/load.js does), and for each order imports the file into a fresh table
// with the real command (a process of dist/coordinator/cli/cli.js), reads its
// --json summary, checks the count with a scan and drops the table. Prints a
// Markdown table.
//   npx tsc -p . && node dist/bench/import.js [--items 1000000] [--orders as-is,by-sharding-key,by-sorting-key,shuffled]
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ImportSummary } from '../coordinator/cli/cli-import.js';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { ITEM_BYTES_MAX } from '../shared/limits.js';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'coordinator', 'cli', 'cli.js');
const values = readCommandLine(
  process.argv.slice(2),
  { items: { type: 'string' }, orders: { type: 'string' }, parallel: { type: 'string' }, devices: { type: 'string' }, 'item-bytes': { type: 'string' }, capacity: { type: 'string' } },
  'usage: node dist/bench/import.js [--items 1000000] [--orders as-is,by-sharding-key,by-sorting-key,shuffled] [--parallel 8] [--devices 1000] [--item-bytes 200] [--capacity W]',
).values;
const items = intArg('items', values.items ?? '1000000', 1, 100_000_000);
const devices = intArg('devices', values.devices ?? '1000', 1, 10_000_000);
const itemBytes = intArg('item-bytes', values['item-bytes'] ?? '200', 1, ITEM_BYTES_MAX);
const parallel = values.parallel ?? '8';
const orders = (values.orders ?? 'as-is,by-sharding-key,by-sorting-key,shuffled').split(',');
/** --capacity W: each slice takes at most W writes per second (DynamoDB's partition: 1000), as load.js --capacity. */
const capacityW = values.capacity === undefined ? null : intArg('capacity', values.capacity, 1, 10_000_000);
const capacity = capacityW === null ? null : { writesPerSecond: capacityW, readsPerSecond: 3 * capacityW };
/** One import may take this long before the bench gives up on it. */
const IMPORT_TIMEOUT_MS = 30 * 60_000;

const dir = mkdtempSync(join(tmpdir(), 'keyslice-import-bench-'));
const file = join(dir, 'items.jsonl');

async function writeFile(): Promise<void> {
  const out = createWriteStream(file);
  // {"device":"dev-123","seq":456,"payload":"xxx"} padded so that the stored item (with __name and __mtime) is about itemBytes.
  const pad = 'x'.repeat(Math.max(0, itemBytes - 'device'.length - 8 - 'seq'.length - 8 - 'payload'.length - '__name'.length - 14 - '__mtime'.length - 8));
  let chunk = '';
  for (let i = 0; i < items; i++) {
    chunk += `{"device":"dev-${i % devices}","seq":${Math.floor(i / devices)},"payload":"${pad}"}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      chunk = '';
    }
  }
  await new Promise<void>((resolve, reject) => out.end(chunk, (err?: Error | null) => (err ? reject(err) : resolve())));
}

function runImport(url: string, table: string, order: string): Promise<ImportSummary> {
  const args = [cli, 'import', table, file, '--url', url, '--order', order, '--parallel', parallel, '--json'];
  process.stderr.write(`node ${args.join(' ')}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), IMPORT_TIMEOUT_MS);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.on('close', (code) => {
      clearTimeout(timer);
      // Exit code 1 with a summary: some writes failed (throttled past the retries); the summary counts them.
      if (code !== 0 && (code !== 1 || out === '')) return reject(new Error(`import exited ${code}`));
      resolve(JSON.parse(out) as ImportSummary);
    });
  });
}

process.stderr.write(`writing ${items.toLocaleString('en-US')} items to ${file}\n`);
await writeFile();
const cluster = await startLocalCluster({ dataDir: join(dir, 'cluster'), nodes: 2, workers: 2, ...(capacity ? { capacity } : {}) });
const rows: string[] = [];
try {
  const client = await KeysliceClient.connect(cluster.url);
  for (const order of orders) {
    const table = `import-${order}`;
    await client.createTable(table, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    const loadavg = (await import('node:os')).loadavg()[0].toFixed(1);
    const s = await runImport(cluster.url, table, order);
    // Count with a scan: every item acknowledged is there.
    // (forEachItemPage follows the markers, as a user's scan would.)
    let stored = 0;
    for (let seg = 0; seg < 4; seg++) stored += (await client.forEachItemPage({ table, segment: seg, totalSegments: 4, limit: 10_000, attributes: [] }, () => {})).items;
    if (stored !== s.imported) throw new Error(`${order}: ${s.imported} imported but ${stored} stored`);
    const c = s.concurrency;
    rows.push(
      `| ${order} | ${s.imported.toLocaleString('en-US')} | ${s.seconds.toFixed(1)}${s.indexSeconds > 0 ? ` (index ${s.indexSeconds.toFixed(1)})` : ''} | ${Math.round(s.itemsPerSecond).toLocaleString('en-US')} | ${c.meanSlicesInFlight.toFixed(1)} | ${c.meanWritesPerSlice.toFixed(1)} | ${s.retries} (${s.throttled} throttled), ${s.failed} failed | ${loadavg} |`,
    );
    await client.deleteTable(table);
  }
  await client.close();
} finally {
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`| --order | items | seconds | items/s | slices written at once (mean) | writes in flight per slice | retries | loadavg before |`);
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
console.log(`\n${new Date().toISOString()}, node ${process.version}, ${items.toLocaleString('en-US')} items of about ${itemBytes} B over ${devices} devices, --parallel ${parallel}, ${capacity ? `slice capacity ${capacity.writesPerSecond} writes/s` : 'no slice capacity'}`);

// keyslice import and export through real processes against a real cluster:
// every order writes every good line; bad lines are reported by number and
// skipped, or stop the import (before any write when the file is indexed);
// the last line of a key wins; CSV cells take the key columns' types; throttled
// writes are sent again until acknowledged; and export gives back what import took.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ImportSummary } from '../coordinator/cli/cli-import.js';
import { fromJson, toJson, type Item } from '../shared/values.js';
import { keyslice, stopRunning } from './cli-run.js';
import { useCluster } from './cluster-fixture.js';

// 200 writes per second and slice: spread imports never reach it; one hot key does.
const c = useCluster({ capacity: { writesPerSecond: 200, readsPerSecond: 10_000 } });
const dir = mkdtempSync(join(tmpdir(), 'keyslice-import-'));
afterAll(() => {
  stopRunning();
  rmSync(dir, { recursive: true, force: true });
});

const DEVICE_SEQ = [{ name: 'device', type: 'string' }, { name: 'seq', type: 'number' }] as const;

/** 60 devices x 10 items in time order, with a binary and a nested attribute; bad lines at 7 and 300. */
function sourceItems(): Item[] {
  const items: Item[] = [];
  for (let seq = 0; seq < 10; seq++) {
    for (let d = 0; d < 60; d++) items.push({ device: `dev-${d}`, seq, temp: 20 + d / 10, raw: new Uint8Array([d, seq, 0, 255]), meta: { tags: ['a', seq], ok: d % 2 === 0, none: null } });
  }
  return items;
}
function fileWithBadLines(): string {
  const lines = sourceItems().map((i) => JSON.stringify(toJson(i)));
  lines.splice(6, 0, '{"device": "dev-x", "seq": '); // line 7: not JSON
  lines.splice(299, 0, JSON.stringify({ device: 'dev.1', seq: 1 })); // line 300: a period in a sharding key
  const file = join(dir, 'items.jsonl');
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

const key = (i: Item) => `${i.device as string}/${i.seq as number}`;
const comparable = (i: Item) => JSON.stringify(toJson(Object.fromEntries(Object.entries(i).filter(([k]) => !k.startsWith('__')).sort(([a], [b]) => (a < b ? -1 : 1)))));

async function tableItems(table: string): Promise<Map<string, string>> {
  const items = await c.client.getAllItems({ table, limit: 1000 }, 100);
  return new Map(items.map((i) => [key(i), comparable(i)]));
}

async function importFile(table: string, file: string, ...flags: string[]) {
  const r = await keyslice(['import', table, file, '--url', c.cluster.url, '--json', ...flags]);
  return { ...r, summary: r.stdout === '' ? null : (JSON.parse(r.stdout) as ImportSummary) };
}

describe('keyslice import', () => {
  for (const order of ['as-is', 'by-sharding-key', 'by-sorting-key', 'shuffled']) {
    it(`--order ${order} writes every good line and reports the bad ones by line number`, async () => {
      const table = `imp-${order}`;
      await c.client.createTable(table, DEVICE_SEQ[0], DEVICE_SEQ[1]);
      const r = await importFile(table, fileWithBadLines(), '--order', order, '--parallel', '4');
      expect(r.code).toBe(0);
      expect(r.summary).toMatchObject({ order, imported: 600, failed: 0, badLines: 2, stoppedAtLine: null });
      expect(r.summary!.firstBadLines.map((b) => b.line)).toEqual([7, 300]);
      expect(r.stderr).toMatch(/line 7: not JSON.*\(skipped\)/);
      expect(r.stderr).toMatch(/line 300: sharding key "device" must not contain a period.*\(skipped\)/);
      expect(r.summary!.concurrency.maxSlicesInFlight).toBeGreaterThan(0);
      const stored = await tableItems(table);
      expect(stored).toEqual(new Map(sourceItems().map((i) => [key(i), comparable(i)])));
    });
  }

  it('writes of one sharding key go one slice at a time by sharding key, and spread otherwise', async () => {
    await c.client.createTable('imp-spread', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    const file = fileWithBadLines();
    const bySharding = (await importFile('imp-spread', file, '--order', 'by-sharding-key', '--parallel', '4')).summary!;
    const bySorting = (await importFile('imp-spread', file, '--order', 'by-sorting-key', '--parallel', '4')).summary!;
    // 25 writes of 2-3 devices per request by sharding key; by sorting key a request spans 25 devices.
    expect(bySharding.concurrency.meanWritesPerSlice).toBeGreaterThan(5);
    expect(bySorting.concurrency.meanWritesPerSlice).toBeLessThan(3);
    expect(bySorting.concurrency.meanSlicesInFlight).toBeGreaterThan(bySharding.concurrency.meanSlicesInFlight);
  });

  it('--on-error stop: as-is writes the lines before the bad one and nothing after; an indexed order writes nothing', async () => {
    await c.client.createTable('imp-stop', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    const file = fileWithBadLines();
    const asIs = await importFile('imp-stop', file, '--on-error', 'stop');
    expect(asIs.code).toBe(1);
    expect(asIs.summary).toMatchObject({ imported: 6, badLines: 1, stoppedAtLine: 7 });
    expect(asIs.stderr).toMatch(/line 7: not JSON.*stopping \(--on-error stop\)/);
    expect([...(await tableItems('imp-stop')).keys()].sort()).toEqual(['dev-0/0', 'dev-1/0', 'dev-2/0', 'dev-3/0', 'dev-4/0', 'dev-5/0']);

    await c.client.createTable('imp-stop2', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    const sorted = await importFile('imp-stop2', file, '--on-error', 'stop', '--order', 'by-sharding-key');
    expect(sorted.code).toBe(1);
    expect(sorted.summary).toMatchObject({ imported: 0, stoppedAtLine: 7 });
    expect((await tableItems('imp-stop2')).size).toBe(0);
  });

  it('the last line of a key is the one that stays, in the file order and by sharding key, also when writes are throttled and sent again', async () => {
    // One hot device (one slice, 200 writes/s) written 5 times over: earlier lines are
    // throttled and retried while later lines of the same keys wait for them.
    const lines: string[] = [];
    for (let round = 0; round < 5; round++) for (let s = 0; s < 80; s++) lines.push(JSON.stringify({ device: 'dup', seq: s, round }));
    const file = join(dir, 'dupes.jsonl');
    writeFileSync(file, lines.join('\n'));
    for (const order of ['as-is', 'by-sharding-key']) {
      const table = `imp-dupes-${order}`;
      await c.client.createTable(table, DEVICE_SEQ[0], DEVICE_SEQ[1]);
      const r = await importFile(table, file, '--order', order, '--batch', '7', '--parallel', '8');
      expect(r.summary).toMatchObject({ imported: 400, failed: 0 });
      if (order === 'as-is') expect(r.summary!.throttled).toBeGreaterThan(0);
      const items = await c.client.getAllItems({ table });
      expect(items.length).toBe(80);
      expect(items.filter((i) => i.round !== 4).map((i) => `${i.seq as number}:${i.round as number}`)).toEqual([]);
    }
  });

  it('CSV: a header, quoted cells with commas, quotes and a line break, key columns read as their types', async () => {
    await c.client.createTable('imp-csv', { name: 'sku', type: 'string' }, { name: 'n', type: 'number' });
    const file = join(dir, 'items.csv');
    writeFileSync(file, ['sku,n,name,price,code', '007,1,"Widget, large",9.5,0012', 'a1,2,"say ""hi""",10,x', 'a2,3,"two', 'lines",,y', 'a3,zz,bad,1,z', 'a4,4,short'].join('\r\n') + '\r\n');
    const r = await importFile('imp-csv', file);
    expect(r.summary).toMatchObject({ imported: 3, badLines: 2 });
    expect(r.summary!.firstBadLines.map((b) => b.message)).toEqual(['line 6: "n" must be a number, got "zz"', 'line 7: 3 cells; the header has 5']);
    const items = await c.client.getAllItems({ table: 'imp-csv', attributes: ['sku', 'n', 'name', 'price', 'code'] });
    const bySku = Object.fromEntries(items.map(({ __name, __mtime, ...i }) => [i.sku as string, i]));
    expect(bySku).toEqual({
      '007': { sku: '007', n: 1, name: 'Widget, large', price: 9.5, code: '0012' },
      a1: { sku: 'a1', n: 2, name: 'say "hi"', price: 10, code: 'x' },
      a2: { sku: 'a2', n: 3, name: 'two\nlines', code: 'y' },
    });
  });

  it('throttled writes are sent again until acknowledged', async () => {
    await c.client.createTable('imp-hot', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    const file = join(dir, 'hot.jsonl');
    writeFileSync(file, Array.from({ length: 500 }, (_, seq) => JSON.stringify({ device: 'hot', seq })).join('\n'));
    const r = await importFile('imp-hot', file, '--parallel', '8');
    expect(r.code).toBe(0);
    expect(r.summary!.imported).toBe(500);
    expect(r.summary!.failed).toBe(0);
    expect(r.summary!.throttled).toBeGreaterThan(0);
    expect((await c.client.getAllItems({ table: 'imp-hot' })).length).toBe(500);
  });

  it('refuses what it cannot do, with exit code 2 or 1', async () => {
    const file = fileWithBadLines();
    await c.client.createTable('imp-simple', { name: 'id', type: 'string' });
    expect((await importFile('imp-simple', file, '--order', 'by-sorting-key')).stderr).toMatch(/has no sorting key/);
    expect((await importFile('imp-simple', file, '--order', 'sideways')).code).toBe(2);
    const missing = await importFile('nope', file);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/TableNotFound/);
  });
});

describe('keyslice export', () => {
  it('streams a table out as JSON lines that equal the imported items, and import takes them back', async () => {
    await c.client.createTable('exp-src', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    await importFile('exp-src', fileWithBadLines(), '--order', 'shuffled');
    const out = join(dir, 'export.jsonl');
    const r = await keyslice(['export', 'exp-src', '--url', c.cluster.url, '--out', out, '--parallel', '3']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/exported 600 items of exp-src/);
    const exported = readFileSync(out, 'utf8').trim().split('\n').map((l) => fromJson(JSON.parse(l)) as Item);
    expect(exported.length).toBe(600);
    expect(exported.some((i) => '__name' in i || '__mtime' in i)).toBe(false);
    expect(new Map(exported.map((i) => [key(i), comparable(i)]))).toEqual(new Map(sourceItems().map((i) => [key(i), comparable(i)])));

    // To stdout, and back in through import.
    const toStdout = await keyslice(['export', 'exp-src', '--url', c.cluster.url]);
    expect(toStdout.stdout.trim().split('\n').length).toBe(600);
    await c.client.createTable('exp-back', DEVICE_SEQ[0], DEVICE_SEQ[1]);
    const back = await importFile('exp-back', out);
    expect(back.summary).toMatchObject({ imported: 600, badLines: 0 });
    expect(await tableItems('exp-back')).toEqual(await tableItems('exp-src'));
  });
});

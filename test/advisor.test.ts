// The key-design advisor through real processes: `keyslice advise` on generated
// samples names each of the four anti-patterns and ranks first a design that
// avoids it; healthy samples keep their design; an access log changes the
// ranking; and the cluster's Advise operation answers what the advisor computes
// over the cluster's own map.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { designFlags, SAMPLES, writeSample } from '../bench/advise-samples.js';
import { prng } from '../bench/keys.js';
import { initialOwners } from '../coordinator/metadata/cluster-map.js';
import { Advisor } from '../coordinator/studio/advisor.js';
import { givenDesign } from '../coordinator/studio/advisor-designs.js';
import type { AdviceReport } from '../shared/advice.js';
import { initHashing } from '../shared/hashing.js';
import { keyslice, stopRunning } from './cli-run.js';
import { useCluster } from './cluster-fixture.js';

const dir = mkdtempSync(join(tmpdir(), 'keyslice-advisor-'));
afterAll(() => {
  stopRunning();
  rmSync(dir, { recursive: true, force: true });
});

/** keyslice advise's report on a generated sample, run once per sample and arguments: the same command on the same
 * file gives the same report, and several tests read it, each its own part (the figures test reads the reports the
 * anti-pattern tests read; run again, those three runs cost the file about a fifth of its time). */
const reports = new Map<string, Promise<AdviceReport>>();
function adviseSample(name: string, extra: string[] = []): Promise<AdviceReport> {
  const key = JSON.stringify([name, extra]);
  let report = reports.get(key);
  if (report === undefined) reports.set(key, (report = runAdvise(name, extra)));
  return report;
}

async function runAdvise(name: string, extra: string[]): Promise<AdviceReport> {
  const file = join(dir, `${name}.jsonl`);
  await writeSample(name, file);
  const r = await keyslice(['advise', file, ...designFlags(SAMPLES[name]), '--json', ...extra]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as AdviceReport;
}

describe('keyslice advise on generated samples (no cluster: a new cluster of 2 nodes, 1024 slices)', () => {
  for (const name of ['hotkey', 'lowcard', 'timebucket', 'oversized']) {
    const spec = SAMPLES[name];
    it(`names ${spec.antiPattern} (${name}) and ranks first a design without it`, async () => {
      const report = await adviseSample(name);
      const given = report.designs.find((d) => d.id === 'given')!;
      expect(given.findings.map((f) => f.antiPattern)).toContain(spec.antiPattern);
      const best = report.designs[0];
      expect(best.rank).toBe(1);
      expect(best.id).not.toBe('given');
      expect(best.findings).toEqual([]);
      expect(best.invalidItems).toBe(0);
      expect(report.recommendation).toMatchObject({ id: best.id, keep: false, antiPattern: spec.antiPattern });
      expect(report.recommendation.reason).toContain(spec.antiPattern!);
      expect(report.recommendation.fix).toMatch(/even distribution/);
      // Ranks are 1..n in order.
      expect(report.designs.map((d) => d.rank)).toEqual(report.designs.map((_, i) => i + 1));
    });
  }

  it('the figures behind the names: hot-key share, cardinality, monotonicity, projected partition', async () => {
    const hot = await adviseSample('hotkey');
    const given = hot.designs.find((d) => d.id === 'given')!;
    expect(given.characteristics.mostCommon[0]).toMatchObject({ value: 'dev-hot', items: 18_000 });
    expect(given.placement.hottestKey).toEqual({ key: 'dev-hot', share: 0.9 });
    // 90% of the writes on one of 1024 slices: max/mean 0.9 x 1024 plus the cold writes that share its slice.
    expect(given.placement.maxOverMean.writes).toBeGreaterThan(900);
    const even16 = hot.designs.find((d) => d.id === 'even-16')!;
    expect(given.placement.maxOverMean.writes / even16.placement.maxOverMean.writes).toBeGreaterThan(5);
    expect(even16.reads).toMatchObject({ source: 'assumed', meanSlicesPerRead: 16 });

    const time = await adviseSample('timebucket');
    const day = time.designs.find((d) => d.id === 'given')!;
    expect(day.characteristics.monotonicity.type).toBe('monotonic');
    expect(day.characteristics.cardinality).toBe(300);
    expect(day.placement.momentConcentration).toBeGreaterThan(0.9);

    const big = await adviseSample('oversized');
    expect(big.sample.expectedItems).toBe(4_000_000_000);
    expect(big.designs.find((d) => d.id === 'given')!.placement.largestPartition!.projectedBytes).toBeGreaterThan(10 * 1024 ** 3);
  });

  for (const name of ['monotonic', 'usertime']) {
    it(`keeps a design that shows no anti-pattern (${name})`, async () => {
      const report = await adviseSample(name);
      expect(report.designs[0].id).toBe('given');
      expect(report.designs[0].findings).toEqual([]);
      expect(report.recommendation).toMatchObject({ id: 'given', keep: true, antiPattern: null });
    });
  }

  it('an access log of reads by day and device ranks the two-column sharding key first', async () => {
    const log = join(dir, 'timebucket-reads.jsonl');
    const random = prng(7);
    const lines: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const item = SAMPLES.timebucket.item(Math.floor(random() * SAMPLES.timebucket.items));
      lines.push(JSON.stringify({ op: 'read', key: { day: item.day, device: item.device } }));
    }
    writeFileSync(log, lines.join('\n') + '\n');
    const report = await adviseSample('timebucket', ['--access-log', log]);
    expect(report.sample.readsCounted).toBe(2000);
    expect(report.designs[0]).toMatchObject({ id: 'multi-column-device', label: 'day+device / ts', findings: [] });
    expect(report.designs[0].reads).toMatchObject({ source: 'access-log', count: 2000, singleSliceShare: 1, meanSlicesPerRead: 1 });
    // Even distribution asks every bucket of a day for a read that does not name ts.
    expect(report.designs.find((d) => d.id === 'even-16')!.reads.meanSlicesPerRead).toBeGreaterThan(10);
  });

  it('reports bad lines by number and refuses a call without a design', async () => {
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, ['{"device":"a","seq":1}', '{oops', '{"device":"b","seq":2}', '[1,2]', ''].join('\n'));
    const r = await keyslice(['advise', file, '--sharding', 'device:string', '--sorting', 'seq:number', '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/line 2: not JSON/);
    expect(r.stderr).toMatch(/line 4: an item must be a JSON object/);
    expect((JSON.parse(r.stdout) as AdviceReport).sample.items).toBe(2);

    const none = await keyslice(['advise', file]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--table T .* or the design: --sharding/);
  });
});

describe('the Advise operation on a running cluster', () => {
  const c = useCluster();
  beforeAll(() => initHashing());

  it('keyslice advise --table answers what the advisor computes over the cluster\'s map', async () => {
    await c.client.createTable('hot', { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    const file = join(dir, 'hotkey-cluster.jsonl');
    await writeSample('hotkey', file, 5000);
    const r = await keyslice(['advise', file, '--table', 'hot', '--url', c.cluster.url, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const viaCluster = JSON.parse(r.stdout) as AdviceReport;
    expect(viaCluster.cluster).toEqual({ sliceCount: 1024, nodes: c.cluster.nodes.map((n) => n.url), source: 'cluster' });
    expect(viaCluster.recommendation).toMatchObject({ id: 'even-16', antiPattern: 'hot-key' });

    // The same sample through the advisor here, over the layout a fresh cluster of these nodes has.
    const nodes = c.cluster.nodes.map((n) => n.url);
    const advisor = new Advisor(givenDesign({ name: 'device', type: 'string' }, { name: 'seq', type: 'number' }, null), {
      layout: { sliceCount: 1024, nodes, owners: initialOwners(1024, nodes.length), source: 'cluster' },
    });
    for (let i = 0; i < 5000; i++) advisor.addItem(SAMPLES.hotkey.item(i));
    expect(viaCluster).toEqual(JSON.parse(JSON.stringify(advisor.report())));
  });

  it('refuses a request without a design, or with more items than it takes', async () => {
    await expect(c.client.request('Advise', { items: [{ a: 1 }] })).rejects.toMatchObject({ code: 'ValidationError' });
    const items = Array.from({ length: 10_001 }, (_, i) => ({ device: 'd', seq: i }));
    await expect(c.client.request('Advise', { table: 'hot', items })).rejects.toMatchObject({ code: 'LimitExceeded' });
    await expect(c.client.request('Advise', { table: 'nope', items: [{ a: 1 }] })).rejects.toMatchObject({ code: 'TableNotFound' });
  });
});

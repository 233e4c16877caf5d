// Does the advisor's recommendation hold on a cluster? For each sample of
// bench/advise-samples.ts that has a load-generator workload of its shape, the
// advisor judges the sample (here, over the layout of the local cluster that
// bench/load.js starts: 2 nodes, 1024 slices), then load.js runs the workload
// with the given design and with the recommended one, and the slice max/mean
// of writes that DescribeSlices measured is compared. Prints a Markdown table.
//   npx tsc -p . && node dist/bench/advise-check.js [--duration S] [--samples hotkey,lowcard,timebucket]
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Advisor } from '../coordinator/studio/advisor.js';
import { givenDesign } from '../coordinator/studio/advisor-designs.js';
import { newClusterLayout } from '../coordinator/studio/advisor-simulation.js';
import type { AdviceReport, DesignReport } from '../shared/advice.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { initHashing } from '../shared/hashing.js';
import { SAMPLES } from './advise-samples.js';

const here = dirname(fileURLToPath(import.meta.url));
const values = readCommandLine(process.argv.slice(2), { duration: { type: 'string' }, samples: { type: 'string' } }, 'usage: node dist/bench/advise-check.js [--duration S] [--samples hotkey,lowcard,timebucket,monotonic,usertime]').values;
const duration = intArg('duration', values.duration ?? '10', 1, 3600);
const names = (values.samples ?? 'hotkey,lowcard,timebucket,monotonic,usertime').split(',');

interface LoadRun {
  opsPerSec: number;
  writesMaxOverMean: number;
  slicesWritten: number;
}

/** One load.js run of a workload, with even distribution over `even` buckets or without. */
function load(workload: string, even: number | null): Promise<LoadRun> {
  const args = [join(here, 'load.js'), '--workload', workload, '--duration', String(duration), '--ops', '1000000', '--json', ...(even === null ? [] : ['--even', String(even)])];
  process.stderr.write(`node ${args.join(' ')}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`load.js exited ${code}`));
      const r = (JSON.parse(out) as { results: { opsPerSec: number; slices: { maxOverMean: { writes: number }; slicesWritten: number } }[] }).results[0];
      resolve({ opsPerSec: r.opsPerSec, writesMaxOverMean: r.slices.maxOverMean.writes, slicesWritten: r.slices.slicesWritten });
    });
  });
}

function advise(name: string): AdviceReport {
  const spec = SAMPLES[name];
  const given = givenDesign(spec.design.sharding, spec.design.sorting.length === 0 ? null : spec.design.sorting, null);
  const advisor = new Advisor(given, { layout: newClusterLayout(1024, ['slice-node-1', 'slice-node-2']) });
  for (let i = 0; i < spec.items; i++) advisor.addItem(spec.item(i));
  return advisor.report();
}

await initHashing();
const rows: string[] = [];
const f = (n: number) => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));
for (const name of names) {
  const spec = SAMPLES[name];
  if (spec?.workload === null || spec === undefined) throw new Error(`sample "${name}" has no load.js workload`);
  const report = advise(name);
  const given = report.designs.find((d) => d.id === 'given')!;
  const best: DesignReport = report.designs[0];
  const named = given.findings.map((x) => x.antiPattern).join(', ') || 'none';
  const simulated = `${f(given.placement.maxOverMean.writes)} -> ${f(best.placement.maxOverMean.writes)}`;
  if (report.recommendation.keep) {
    const g = await load(spec.workload, null);
    rows.push(`| ${name} | ${named} | keep ${given.label} | ${f(given.placement.maxOverMean.writes)} | ${f(g.writesMaxOverMean)} (${g.slicesWritten} slices written) | - |`);
    continue;
  }
  if (best.origin !== 'even') {
    rows.push(`| ${name} | ${named} | ${best.label} | ${simulated} | (load.js cannot run this design) | - |`);
    continue;
  }
  const g = await load(spec.workload, null);
  const b = await load(spec.workload, best.evenDistribution!.buckets);
  rows.push(
    `| ${name} | ${named} | ${best.label} | ${simulated} | ${f(g.writesMaxOverMean)} -> ${f(b.writesMaxOverMean)} (${g.slicesWritten} -> ${b.slicesWritten} slices written) | ${(g.writesMaxOverMean / b.writesMaxOverMean).toFixed(1)}x |`,
  );
}
console.log('| sample | anti-pattern named (given design) | recommended | writes max/mean, advisor (given -> recommended) | writes max/mean, load.js on a cluster | cut |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
console.log(`\n${new Date().toISOString()}, node ${process.version}, load.js --duration ${duration}`);

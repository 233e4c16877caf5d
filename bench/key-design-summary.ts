// Medians of the key-design runs (bench/key-design.sh): reads every --json
// output of bench/load.js in the folders given, groups the runs by configuration
// (workload, even distribution, capacity) and prints a Markdown table. Each
// cell is the median over the runs of that configuration, computed per column,
// followed by [min–max].
//   node dist/bench/key-design-summary.js DIR [DIR...]
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import { median } from './median.js';

interface Run {
  file: string;
  date: string;
  node: string;
  config: { workloads: string[]; even: number | null; capacity: { writesPerSecond: number } | null; concurrency: number; connections: number; durationS: number };
  results: {
    workload: string;
    ops: number;
    ok: number;
    seconds: number;
    opsPerSec: number;
    errors: Record<string, number>;
    latencyMs: { p50: number; p99: number } | null;
    stoppedBy: string;
    slices: { maxOverMean: { items: number; writes: number }; slicesWritten: number; sliceCount: number; hotKeys: { key: string; opsPerSecond: number }[] } | null;
  }[];
  failure?: string;
}

const USAGE = 'usage: node dist/bench/key-design-summary.js DIR [DIR...] (folders of bench/load.js --json outputs)';
const dirs = readCommandLine(process.argv.slice(2), {}, USAGE, { positionals: true }).positionals;
if (dirs.length === 0) refuseCommandLine('no folder given', USAGE);

const runs: Run[] = [];
const skipped: string[] = [];
for (const f of dirs.flatMap((d) => readdirSync(d).filter((n) => n.endsWith('.json')).sort().map((n) => join(d, n)))) {
  const text = readFileSync(f, 'utf8');
  try {
    const run = JSON.parse(text) as Run;
    if (run.failure !== undefined || run.results.length !== 1) skipped.push(`${f}: ${run.failure ?? `${run.results.length} results`}`);
    else runs.push({ ...run, file: f });
  } catch {
    skipped.push(`${f}: not JSON (the run failed; see its .err file)`);
  }
}

const num = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ratio = (n: number) => (n >= 100 ? num(n) : num(n, 1));
const ms = (n: number) => (n < 10 ? n.toFixed(1) : n.toFixed(0));
const cell = (xs: number[], f: (n: number) => string) => (xs.length === 1 ? f(xs[0]) : `${f(median(xs))} [${f(Math.min(...xs))}–${f(Math.max(...xs))}]`);

const groups = new Map<string, Run[]>();
const keyOf = (r: Run) => `${r.config.workloads[0]}|${r.config.capacity?.writesPerSecond ?? 0}|${r.config.even ?? 0}`;
for (const r of runs) groups.set(keyOf(r), [...(groups.get(keyOf(r)) ?? []), r]);
const order = ['hotkey', 'lowcard', 'monotonic', 'usertime', 'timebucket'];
const keys = [...groups.keys()].sort((a, b) => {
  const [wa, ca, ea] = a.split('|');
  const [wb, cb, eb] = b.split('|');
  return Number(ca) - Number(cb) || order.indexOf(wa) - order.indexOf(wb) || Number(ea) - Number(eb);
});

const lines: string[] = [];
lines.push('| workload | slice capacity | even distribution | runs | ops/s | p99 ms | errors by code (per run) | slice max/mean writes | slice max/mean items |');
lines.push('|---|---|---|---|---|---|---|---|---|');
for (const k of keys) {
  const rs = groups.get(k)!;
  const [w, cap, even] = k.split('|');
  const res = rs.map((r) => r.results[0]);
  const codes = [...new Set(res.flatMap((r) => Object.keys(r.errors)))].sort();
  const errors = codes.length === 0 ? '0' : codes.map((c) => `${c} ${cell(res.map((r) => r.errors[c] ?? 0), (n) => num(n))}`).join('; ');
  const sl = res.map((r) => r.slices);
  const slicesOk = sl.every((s) => s !== null);
  lines.push(
    [
      w,
      cap === '0' ? 'none' : `${num(Number(cap))} writes/s`,
      even !== '0' ? `${even} buckets` : w === 'monotonic' ? 'n/a (no sorting key)' : 'off',
      String(rs.length),
      cell(res.map((r) => r.opsPerSec), (n) => num(n)),
      cell(res.filter((r) => r.latencyMs).map((r) => r.latencyMs!.p99), ms),
      errors,
      slicesOk ? cell(sl.map((s) => s!.maxOverMean.writes), ratio) : 'DescribeSlices failed',
      slicesOk ? cell(sl.map((s) => s!.maxOverMean.items), ratio) : 'DescribeSlices failed',
    ]
      .join(' | ')
      .replace(/^(.*)$/, '| $1 |'),
  );
}
console.log(lines.join('\n'));
console.log('');
const dates = runs.map((r) => r.date).sort();
console.log(`${runs.length} runs, ${dates[0] ?? '-'} to ${dates[dates.length - 1] ?? '-'}, node ${[...new Set(runs.map((r) => r.node))].join(', ')}`);
const stopped = runs.filter((r) => r.results[0].stoppedBy !== 'duration');
if (stopped.length > 0) console.log(`not stopped by duration: ${stopped.map((r) => `${r.file} (${r.results[0].stoppedBy})`).join(', ')}`);
for (const s of skipped) console.log(`skipped ${s}`);

// The advisor's report as text for a terminal: the sample, the key
// characteristics of each design, what the placement simulation shows, the
// anti-patterns found, and the recommendation with its reason.
import type { AdviceReport, DesignReport } from '../../shared/advice.js';
import { ratio, size } from './advisor.js';

const num = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (x: number) => (x > 0 && x < 0.0001 ? '<0.01%' : `${(100 * x).toFixed(x >= 0.1 || x === 0 ? 0 : x >= 0.01 ? 1 : 2)}%`);

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join('  ').trimEnd()).join('\n');
}

function clip(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 3)}...`;
}

function mostCommon(d: DesignReport): string {
  return d.characteristics.mostCommon
    .slice(0, 3)
    .map((v) => `${clip(v.value, 24)} ${pct(v.share)}`)
    .join(', ');
}

function monotonicity(d: DesignReport): string {
  const m = d.characteristics.monotonicity;
  return m.correlation === null ? m.type : `${m.correlation.toFixed(2)} ${m.type}`;
}

const keys = (n: number) => (n >= 10 ? num(n) : n.toFixed(1));
const items = (n: number) => `${num(n)} item${Math.round(n) === 1 ? '' : 's'}`;

function largestPartition(d: DesignReport, projected: boolean): string {
  const p = d.placement.largestPartition;
  if (p === null) return '-';
  return projected ? `${clip(p.key, 20)}: ${items(p.projectedItems)}, ${size(p.projectedBytes)}` : `${clip(p.key, 20)}: ${items(p.items)}, ${size(p.bytes)}`;
}

export function renderAdvice(r: AdviceReport, file: string): string {
  const s = r.sample;
  const given = r.designs.find((d) => d.id === 'given')!;
  const projected = s.expectedItems !== s.items;
  const lines: string[] = [];
  const notJudged = s.itemsNotJudged ? ` (the first ones; ${num(s.itemsNotJudged)} more not judged)` : '';
  lines.push(`sample: ${file}, ${num(s.items)} items${notJudged}, ${size(s.averageItemBytes)} on average`);
  lines.push(
    `writes: ${s.writes === 'access-log' ? `${num(s.writesCounted)} from the access log` : `one per item, in the sample's order`}; reads: ${
      s.readsCounted > 0 ? `${num(s.readsCounted)} from the access log` : `none logged, so a query by ${given.shardingKey.map((c) => c.name).join('+')} is assumed`
    }; a moment is ${num(s.momentWrites)} writes`,
  );
  const where = r.cluster.source === 'cluster' ? 'the cluster\'s map' : 'a new cluster\'s layout';
  lines.push(`placed over ${num(r.cluster.sliceCount)} slices on ${r.cluster.nodes.length} node${r.cluster.nodes.length === 1 ? '' : 's'} (${where})${projected ? `; partitions projected to ${num(s.expectedItems)} items` : ''}`);
  lines.push('');

  lines.push('key characteristics (as MongoDB\'s analyzeShardKey defines them):');
  const seen = new Set<string>();
  const chars = [['SHARDING KEY', 'DISTINCT', 'MOST COMMON', 'MONOTONICITY', 'AVG ITEM']];
  for (const d of [given, ...r.designs]) {
    const k = d.shardingKey.map((c) => `${c.name}:${c.type}`).join('+');
    if (seen.has(k)) continue;
    seen.add(k);
    chars.push([k, num(d.characteristics.cardinality) + (d.characteristics.isUnique ? ' (unique)' : ''), mostCommon(d), monotonicity(d), size(d.characteristics.averageItemBytes)]);
  }
  lines.push(table(chars));
  lines.push('');

  lines.push(`placement simulation (max/mean over all ${num(r.cluster.sliceCount)} slices, as DescribeSlices computes it):`);
  const rows = [['RANK', 'DESIGN', 'PARTITIONS', 'SLICES', 'ITEMS', 'BYTES', 'WRITES', ...(s.readsCounted > 0 ? ['READS'] : []), 'MOMENT', `LARGEST PARTITION${projected ? ' (PROJECTED)' : ''}`, 'SLICES/READ', 'FINDINGS']];
  for (const d of r.designs) {
    const m = d.placement.maxOverMean;
    rows.push([
      String(d.rank),
      d.label,
      num(d.placement.partitions),
      num(d.placement.slicesUsed),
      ratio(m.items),
      ratio(m.bytes),
      ratio(m.writes),
      ...(s.readsCounted > 0 ? [m.reads === null ? '-' : ratio(m.reads)] : []),
      d.placement.momentConcentration === null ? '-' : keys(1 / d.placement.momentConcentration),
      largestPartition(d, projected),
      d.reads.meanSlicesPerRead.toFixed(d.reads.meanSlicesPerRead % 1 === 0 ? 0 : 1),
      d.invalidItems > 0 ? `cannot store ${num(d.invalidItems)} items` : d.findings.map((f) => f.antiPattern).join(', ') || 'none',
    ]);
  }
  lines.push(table(rows));
  lines.push(`ITEMS, BYTES, WRITES, READS: the busiest slice over the mean; MOMENT: a moment's writes (${num(s.momentWrites)}) fall as on this many equally busy keys`);
  lines.push('');

  const flagged = r.designs.filter((d) => d.findings.length > 0 || d.invalidItems > 0);
  if (flagged.length > 0) {
    lines.push('findings:');
    for (const d of flagged) {
      if (d.invalidItems > 0) lines.push(`  ${d.label}: cannot store ${num(d.invalidItems)} items: ${d.firstInvalid}`);
      for (const f of d.findings) lines.push(`  ${d.label}: ${f.antiPattern}: ${f.evidence}`);
    }
    lines.push('');
  }

  const rec = r.recommendation;
  lines.push(`recommendation: ${rec.keep ? 'keep ' : ''}${rec.label}${rec.antiPattern ? ` (${rec.keep ? 'still shows' : 'avoids'} ${rec.antiPattern})` : ''}`);
  lines.push(`  ${rec.reason}`);
  if (rec.why !== null) lines.push(`  why it matters: ${rec.why}`);
  if (rec.fix !== null) lines.push(`  what helps: ${rec.fix}`);
  return lines.join('\n');
}

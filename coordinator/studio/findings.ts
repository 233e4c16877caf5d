// Live findings: a table's load (DescribeSlices data) judged against the four
// key-design anti-patterns of anti-patterns.ts, in plain words that name the key
// or slice at fault and the fix keyslice offers. A pure function of what the
// studio's feed sampled, so that it can be tested on figures and replayed.
import type { TableDescription, TableLoad } from '../../shared/api.js';
import { DYNAMODB_PARTITION_WRITES_PER_SECOND, EVEN_DISTRIBUTION_BUCKETS_MAX, HOT_KEYS_REPORTED } from '../../shared/limits.js';
import { ANTI_PATTERNS, type AntiPattern } from './anti-patterns.js';

// Judgement thresholds (not limits): chosen so that a healthy table of a few
// thousand random keys says nothing and the seed guidance's bad designs say so
// within seconds of load.
/** Below this many reads and writes per second a table is too quiet to judge its load. */
export const JUDGED_OPS_PER_SECOND_MIN = 5;
/** One sharding key with at least this share of a table's operations is a hot key. */
export const HOT_KEY_SHARE_MIN = 0.5;
/** A loaded table whose load comes from this many distinct sharding keys or fewer (but more than one) has too few. */
export const FEW_KEYS_MAX = 8;
/** A table with at least this many items on at most FEW_KEYS_MAX slices (of many) has too few sharding keys. */
export const FEW_KEYS_ITEMS_MIN = 1000;
/** Time order: the top key (with at least this share) changed to a greater value this many times in the trail. */
export const TIME_ORDER_SHARE_MIN = 0.2;
export const TIME_ORDER_STEPS_MIN = 3;
/** A slice is oversized past this many bytes, or past OVERSIZED_OVER_MEDIAN times the median slice (and 1 MiB). */
export const OVERSIZED_SLICE_BYTES = 256 * 1024 * 1024;
export const OVERSIZED_OVER_MEDIAN = 20;
export const OVERSIZED_RELATIVE_BYTES_MIN = 1024 * 1024;
/** Slices that must hold items before "times the median" means anything. */
export const OVERSIZED_SLICES_MIN = 8;

export interface Finding {
  pattern: AntiPattern;
  /** ANTI_PATTERNS' title. */
  title: string;
  /** What the load shows, with the key, slice and figures. */
  seen: string;
  /** ANTI_PATTERNS' reason. */
  why: string;
  /** ANTI_PATTERNS' fix. */
  fix: string;
  /** The fix for this table, concretely (a CreateTable option, a key schema, a node flag). */
  steps: string[];
  /** The sharding key at fault, as DescribeSlices names it, when one is. */
  key?: string;
  slice?: number;
}

/** The top key of one earlier sample of the same table, oldest first. */
export interface TopKeySample {
  at: number;
  key: string;
  share: number;
}

export interface JudgeInput {
  table: TableDescription;
  load: TableLoad;
  /** Worker threads in the cluster: the bucket count suggested spreads a key over all of them. */
  workerThreads: number;
  /** Earlier samples' top key, for time order (see TopKeySample). */
  trail: readonly TopKeySample[];
}

export function judgeTable(input: JudgeInput): Finding[] {
  const { table, load } = input;
  const findings: Finding[] = [];
  if (load.sliceCount < 2) return findings; // one slice: there is no skew to speak of
  const ops = load.slices.reduce((a, s) => a + s.readsPerSecond + s.writesPerSecond, 0);
  const top = load.hotKeys[0];
  const share = top === undefined || ops === 0 ? 0 : Math.min(1, top.opsPerSecond / ops);
  // Fewer keys than the tracker reports means it saw every key with load: their count is exact.
  const distinctKeys = load.hotKeys.length < HOT_KEYS_REPORTED ? load.hotKeys.length : Infinity;

  const timeOrder = ops >= JUDGED_OPS_PER_SECOND_MIN ? timeOrdered(table, input.trail, top?.key, share) : null;
  if (timeOrder !== null) findings.push(timeOrder);
  else if (ops >= JUDGED_OPS_PER_SECOND_MIN && distinctKeys >= 2 && distinctKeys <= FEW_KEYS_MAX) {
    const keys = load.hotKeys.map((k) => k.key);
    const busiest = load.hotKeys[0];
    findings.push(
      finding('low-cardinality', `All ${fmt(ops)} operations per second of the last ${load.windowSeconds} seconds went to ${distinctKeys} sharding keys (${list(keys)}), so at most ${distinctKeys} of ${load.sliceCount} slices did the work.`, [
        ...spreadSteps(table, input.workerThreads, busiest.opsPerSecond),
        `Or choose a sharding key with many distinct values; with several columns, add one: shardingKey: [${columnsOf(table.shardingKey).map((c) => `{name: "${c}"}`).join(', ')}, {name: "<another column>"}].`,
      ], { key: busiest.key, slice: busiest.slice }),
    );
  } else if (ops >= JUDGED_OPS_PER_SECOND_MIN && top !== undefined && share >= HOT_KEY_SHARE_MIN) {
    findings.push(
      finding('hot-key', `Sharding key "${top.key}" takes ${pct(share)} of the table's operations (${fmt(top.opsPerSecond)} of ${fmt(ops)} per second), all on slice ${top.slice}; the busiest slice carries ${fmt(Math.max(load.maxOverMean.reads, load.maxOverMean.writes))} times the mean.`, spreadSteps(table, input.workerThreads, top.opsPerSecond), { key: top.key, slice: top.slice }),
    );
  }

  const withItems = load.slices.filter((s) => s.items > 0);
  const items = withItems.reduce((a, s) => a + s.items, 0);
  if (!findings.some((f) => f.pattern === 'low-cardinality') && items >= FEW_KEYS_ITEMS_MIN && withItems.length <= FEW_KEYS_MAX && load.sliceCount >= 4 * FEW_KEYS_MAX) {
    findings.push(
      finding('low-cardinality', `The table's ${fmt(items)} items sit on ${withItems.length} of ${load.sliceCount} slices (${list(withItems.map((s) => String(s.slice)), false)}): its sharding key has at most ${withItems.length} distinct values with items.`, [
        ...spreadSteps(table, input.workerThreads, 0),
        'Or choose a sharding key with many distinct values (or add a column to a multi-column sharding key).',
      ], { slice: withItems[0].slice }),
    );
  }

  const oversized = oversizedSlice(load);
  if (oversized !== null) {
    const { slice, bytes, total, median } = oversized;
    const onIt = load.hotKeys.find((k) => k.slice === slice.slice);
    const who = onIt === undefined ? 'one of its sharding keys collects items' : `sharding key "${onIt.key}", busy on this slice, is likely collecting items`;
    findings.push(
      finding('oversized-partition', `Slice ${slice.slice} holds ${bytesText(bytes)} (${fmt(slice.items)} items, ${pct(bytes / total)} of the table's bytes${median > 0 ? `, ${fmt(bytes / median)} times the median slice` : ''}): ${who} without bound.`, [
        `Bound the partition: add a time bucket or another column to the sharding key, e.g. shardingKey: [${columnsOf(table.shardingKey).map((c) => `{name: "${c}"}`).join(', ')}, {name: "day", type: "string"}].`,
        ...spreadSteps(table, input.workerThreads, 0),
      ], onIt === undefined ? { slice: slice.slice } : { key: onIt.key, slice: slice.slice }),
    );
  }
  return findings;
}

/** A time-ordered key: the top key kept moving to greater values over the trail. */
function timeOrdered(table: TableDescription, trail: readonly TopKeySample[], current: string | undefined, share: number): Finding | null {
  const strip = (k: string) => (table.evenDistribution ? k.replace(/_\d+$/, '') : k);
  const seq: string[] = [];
  for (const s of trail) {
    if (s.share < TIME_ORDER_SHARE_MIN) continue;
    const k = strip(s.key);
    if (seq[seq.length - 1] !== k) seq.push(k);
  }
  if (current !== undefined && share >= TIME_ORDER_SHARE_MIN && seq[seq.length - 1] !== strip(current)) seq.push(strip(current));
  if (seq.length < TIME_ORDER_STEPS_MIN + 1) return null;
  const recent = seq.slice(-(TIME_ORDER_STEPS_MIN + 1));
  const numeric = recent.every((k) => k.trim() !== '' && Number.isFinite(Number(k)));
  for (let i = 1; i < recent.length; i++) {
    const rising = numeric ? Number(recent[i]) > Number(recent[i - 1]) : recent[i] > recent[i - 1];
    if (!rising) return null;
  }
  const columns = columnsOf(table.shardingKey);
  return finding('time-ordered-key', `The busiest sharding key keeps moving to newer values (${list(recent)}): each moment's writes pile onto the slice of the current value.`, [
    `Shard by an entity and sort by time: shardingKey: {name: "<entity>"}, sortingKey: {name: "${columns[columns.length - 1]}", type: "${numeric ? 'number' : 'string'}"}; a range scan by entity and time stays one read of one slice.`,
    'Or spread the current value with even distribution: evenDistribution: {buckets: N} (reads by the original key still return one sorted stream).',
  ], { key: current });
}

function oversizedSlice(load: TableLoad): { slice: TableLoad['slices'][number]; bytes: number; total: number; median: number } | null {
  const withItems = load.slices.filter((s) => s.items > 0);
  if (withItems.length === 0) return null;
  const largest = withItems.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const sorted = withItems.map((s) => s.bytes).sort((a, b) => a - b);
  const median = sorted[sorted.length >> 1];
  const total = sorted.reduce((a, b) => a + b, 0);
  const absolute = largest.bytes >= OVERSIZED_SLICE_BYTES;
  const relative = withItems.length >= OVERSIZED_SLICES_MIN && largest.bytes >= OVERSIZED_RELATIVE_BYTES_MIN && largest.bytes >= OVERSIZED_OVER_MEDIAN * median;
  return absolute || relative ? { slice: largest, bytes: largest.bytes, total, median } : null;
}

/** Even distribution with enough buckets for every worker thread, and slice capacity to see throttling before production does. */
function spreadSteps(table: TableDescription, workerThreads: number, hotOpsPerSecond: number): string[] {
  const n = suggestedBuckets(workerThreads, hotOpsPerSecond);
  const steps: string[] = [];
  if (table.evenDistribution) {
    const more = Math.min(EVEN_DISTRIBUTION_BUCKETS_MAX, Math.max(n, table.evenDistribution.buckets * 2));
    steps.push(`The table already spreads each key over ${table.evenDistribution.buckets} buckets; create it again with evenDistribution: {buckets: ${more}} and copy the items over.`);
  } else {
    steps.push(`Create the table with evenDistribution: {buckets: ${n}}: each sharding key is spread over ${n} slices, and GetItems by the original key still returns one sorted stream.`);
  }
  steps.push(`To see a hot slice fail as it would in DynamoDB, start the slice nodes with --slice-writes-per-second ${DYNAMODB_PARTITION_WRITES_PER_SECOND}: the slice answers ThroughputExceeded past that rate.`);
  return steps;
}

/** A power of two: at least 8, twice the worker threads (so that every thread gets some buckets),
 * and enough that no bucket passes DynamoDB's per-partition write rate. */
export function suggestedBuckets(workerThreads: number, hotOpsPerSecond: number): number {
  const need = Math.max(8, 2 * workerThreads, Math.ceil(hotOpsPerSecond / DYNAMODB_PARTITION_WRITES_PER_SECOND));
  let n = 1;
  while (n < need) n *= 2;
  return Math.min(n, EVEN_DISTRIBUTION_BUCKETS_MAX);
}

function finding(pattern: AntiPattern, seen: string, steps: string[], at: { key?: string; slice?: number }): Finding {
  const text = ANTI_PATTERNS[pattern];
  const f: Finding = { pattern, title: text.title, seen, why: text.why, fix: text.fix, steps };
  if (at.key !== undefined) f.key = at.key;
  if (at.slice !== undefined) f.slice = at.slice;
  return f;
}

function columnsOf(columns: TableDescription['shardingKey']): string[] {
  return (Array.isArray(columns) ? columns : [columns]).map((c) => c.name);
}

const fmt = (n: number) => (n >= 100 || Number.isInteger(n) ? Math.round(n).toLocaleString('en-US') : n.toFixed(1));
const pct = (f: number) => `${Math.round(f * 100)}%`;
const list = (xs: string[], quote = true) => {
  const q = (x: string) => (quote ? `"${x}"` : x);
  return xs.length <= 5 ? xs.map(q).join(', ') : `${xs.slice(0, 5).map(q).join(', ')} and ${xs.length - 5} more`;
};

export function bytesText(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

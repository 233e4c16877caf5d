// A strict parser of the Prometheus text exposition format (version 0.0.4), for
// tests of /metrics: it throws at the first line a scraper could misread. It
// checks the line grammar (names, label escapes, values), that each family's
// TYPE comes once and before its samples, that a family's samples are
// contiguous, that no series repeats, that counters are not negative, and that
// every histogram series has cumulative buckets ending in +Inf equal to _count.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parseExposition(text: string): Map<string, Family> {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const families = new Map<string, Family>();
  const closed = new Set<string>(); // families whose samples ended (another family's began)
  let current: string | null = null;
  const seen = new Set<string>();
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, i) => {
    const where = `line ${i + 1} (${JSON.stringify(line.slice(0, 120))})`;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (m === null) throw new Error(`${where}: a comment other than HELP or TYPE`);
      const [, kind, name, rest] = m;
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name`);
      if (closed.has(name) || (families.get(name)?.samples.length ?? 0) > 0) throw new Error(`${where}: ${kind} after the family's samples`);
      const f = families.get(name) ?? { name, type: 'untyped' as MetricType, help: null, samples: [] };
      if (kind === 'HELP') {
        if (f.help !== null) throw new Error(`${where}: a second HELP`);
        f.help = unescape(rest, false, where);
      } else {
        if (!TYPES.has(rest as MetricType)) throw new Error(`${where}: unknown type`);
        if (families.has(name) && f.type !== 'untyped') throw new Error(`${where}: a second TYPE`);
        f.type = rest as MetricType;
      }
      families.set(name, f);
      return;
    }
    if (line === '') return; // the format allows empty lines (prom-client puts one between families)
    const sample = parseSample(line, where);
    const family = familyOf(sample.name, families);
    if (current !== family) {
      if (current !== null) closed.add(current);
      if (closed.has(family)) throw new Error(`${where}: samples of ${family} are not contiguous`);
      current = family;
    }
    const f = families.get(family) ?? { name: family, type: 'untyped' as MetricType, help: null, samples: [] };
    families.set(family, f);
    const key = `${sample.name}${JSON.stringify(Object.entries(sample.labels).sort())}`;
    if (seen.has(key)) throw new Error(`${where}: the series repeats`);
    seen.add(key);
    if (f.type === 'counter' && !(sample.value >= 0)) throw new Error(`${where}: a negative counter`);
    f.samples.push(sample);
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

/** The family a sample belongs to: histogram and summary samples carry suffixes. */
function familyOf(name: string, families: Map<string, Family>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const t = families.get(base)?.type;
    if (t === 'histogram' || (t === 'summary' && suffix !== '_bucket')) return base;
  }
  return name;
}

function parseSample(line: string, where: string): Sample {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)( -?\d+)?$/.exec(line);
  if (m === null) throw new Error(`${where}: not a sample line`);
  const labels: Record<string, string> = {};
  if (m[2] !== undefined) {
    let rest = m[2].slice(1, -1);
    while (rest.length > 0) {
      const l = /^([^=]+)="((?:[^"\\]|\\.)*)"(,?)/.exec(rest);
      if (l === null) throw new Error(`${where}: bad label list`);
      if (!LABEL_NAME.test(l[1])) throw new Error(`${where}: bad label name ${l[1]}`);
      if (l[1] in labels) throw new Error(`${where}: label ${l[1]} twice`);
      labels[l[1]] = unescape(l[2], true, where);
      rest = rest.slice(l[0].length);
      if (l[3] === '' && rest.length > 0) throw new Error(`${where}: labels not separated by commas`);
    }
  }
  const v = m[3];
  // Values are what Go's strconv.ParseFloat reads (the format's rule): NaN and Inf in any case
  // (prom-client writes "Nan" for an event-loop lag with no sample since the last scrape).
  const value = /^\+?inf$/i.test(v) ? Infinity : /^-inf$/i.test(v) ? -Infinity : /^nan$/i.test(v) ? NaN : /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v) ? Number(v) : undefined;
  if (value === undefined) throw new Error(`${where}: bad value ${v}`);
  return { name: m[1], labels, value };
}

/** HELP text escapes \\ and \n; label values also \". */
function unescape(s: string, quotes: boolean, where: string): string {
  return s.replace(/\\(.)/g, (_, c: string) => {
    if (c === '\\') return '\\';
    if (c === 'n') return '\n';
    if (c === '"' && quotes) return '"';
    throw new Error(`${where}: bad escape \\${c}`);
  });
}

function checkHistogram(f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const h = series.get(key) ?? { buckets: [] };
    series.set(key, h);
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}: a bucket without le`);
      h.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name === `${f.name}_sum`) h.sum = s.value;
    else if (s.name === `${f.name}_count`) h.count = s.value;
    else throw new Error(`${f.name}: sample ${s.name} in a histogram`);
  }
  for (const [key, h] of series) {
    if (h.count === undefined || h.sum === undefined) throw new Error(`${f.name}${key}: no _count or _sum`);
    const sorted = [...h.buckets].sort((a, b) => a[0] - b[0]);
    if (sorted.at(-1)?.[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    for (let i = 1; i < sorted.length; i++) if (sorted[i][1] < sorted[i - 1][1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
    if (sorted.at(-1)![1] !== h.count) throw new Error(`${f.name}${key}: +Inf bucket ${sorted.at(-1)![1]} is not _count ${h.count}`);
  }
}

/** The sum of a sample's values over the series whose labels include `match`. */
export function total(families: Map<string, Family>, name: string, match: Record<string, string> = {}): number {
  const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''));
  let sum = 0;
  for (const s of family?.samples ?? []) {
    if (s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** The samples named `name` (with their labels). */
export function samples(families: Map<string, Family>, name: string): Sample[] {
  const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''));
  return (family?.samples ?? []).filter((s) => s.name === name);
}

// The key-design advisor: judges a design and its alternatives on a sample of
// items (and optionally an access log) before any data is loaded. Feed it items
// and accesses in order; report() names the anti-patterns each design shows
// (coordinator/studio/anti-patterns.ts), ranks the designs and recommends one.
// Pure: no I/O, no clock; the same input gives the same report, whether the CLI
// runs it on a file or the coordinator on an Advise request.
import type { AccessEntry, AdviceReport, DesignReport } from '../../shared/advice.js';
import { assert } from '../../shared/errors.js';
import {
  ADVISOR_CARDINALITY_SAMPLES_PER_VALUE,
  ADVISOR_HOT_KEY_OVER_MEAN,
  ADVISOR_HOT_KEY_SHARE,
  ADVISOR_LOW_CARDINALITY_SLICE_DIVISOR,
  ADVISOR_MOMENT_WRITES_DEFAULT,
  ADVISOR_MULTI_COLUMN_DESIGNS_SHOWN,
  MOVE_ITEMS_PER_SECOND_DEFAULT,
  MOVE_TIME_MS_MAX,
  PARTITION_BYTES_ADVISED_MAX,
  SLICE_MOVABLE_ITEMS_MAX,
} from '../../shared/limits.js';
import { itemBytes, type Item } from '../../shared/values.js';
import { ANTI_PATTERNS, type AntiPattern } from './anti-patterns.js';
import { fixedAlternatives, multiColumnCandidates, type Design } from './advisor-designs.js';
import { DesignSim, KeySpace, largest, maxOverMean, type Layout } from './advisor-simulation.js';

export interface AdvisorOptions {
  layout: Layout;
  /** The table size to plan for (partitions are projected to it); default: the sample's size. */
  expectedItems?: number | null;
  /** Writes per moment (default ADVISOR_MOMENT_WRITES_DEFAULT). */
  momentWrites?: number;
}

const MOST_COMMON_SHOWN = 5;
const ORIGIN_ORDER: Record<DesignReport['origin'], number> = { given: 0, even: 1, 'multi-column': 2, swapped: 3 };

export class Advisor {
  private readonly sims: DesignSim[] = [];
  private readonly spaces = new Map<string, KeySpace>();
  private started = false;
  private items = 0;
  private bytes = 0;
  private logReads = 0;
  private logWrites = 0;
  private notJudged: number | null = null;
  private readonly momentWrites: number;

  constructor(
    private readonly given: Design,
    private readonly options: AdvisorOptions,
  ) {
    this.momentWrites = options.momentWrites ?? ADVISOR_MOMENT_WRITES_DEFAULT;
    assert(Number.isInteger(this.momentWrites) && this.momentWrites > 0, 'a moment has at least one write');
  }

  /** The designs are fixed at the first item: its attributes suggest the extra sharding columns. */
  private start(first: Item | null): void {
    this.started = true;
    const designs = [this.given, ...fixedAlternatives(this.given), ...(first === null ? [] : multiColumnCandidates(this.given, first))];
    for (const d of designs) {
      const signature = JSON.stringify(d.table.sharding);
      let space = this.spaces.get(signature);
      const first = space === undefined;
      if (space === undefined) this.spaces.set(signature, (space = new KeySpace(d.table.sharding)));
      this.sims.push(new DesignSim(d, space, first, this.options.layout, this.momentWrites));
    }
  }

  /** One item of the sample (already checked as an item), in insertion order. */
  addItem(item: Item): void {
    if (!this.started) this.start(item);
    const order = this.items++;
    const base = itemBytes(item);
    this.bytes += base;
    for (const sim of this.sims) sim.addItem(item, order, base);
  }

  /** One access of the access log. */
  addAccess(entry: AccessEntry): void {
    if (!this.started) this.start(null);
    if (entry.op === 'write') {
      this.logWrites++;
      for (const sim of this.sims) sim.addLogWrite(entry.key);
    } else {
      this.logReads++;
      for (const sim of this.sims) sim.addLogRead(entry.key);
    }
  }

  /** Items of the sample beyond the cap, counted but not judged. */
  setItemsNotJudged(n: number): void {
    this.notJudged = n;
  }

  report(): AdviceReport {
    if (!this.started) this.start(null);
    const layout = this.options.layout;
    const expectedItems = this.options.expectedItems ?? this.items + (this.notJudged ?? 0);
    const fromLog = this.logWrites > 0;
    const reports = this.sims.map((sim) => this.describe(sim, fromLog, expectedItems));
    const given = reports[0];
    // A column is worth adding when it splits the given key's values (4x as many) without
    // making every item a partition of its own, which would end range reads by the key.
    const candidates = reports
      .filter((r) => r.origin === 'multi-column')
      .filter((r) => r.invalidItems === 0 && r.characteristics.cardinality >= 4 * given.characteristics.cardinality && r.characteristics.cardinality * 2 <= this.items)
      .sort(compareDesigns)
      .slice(0, ADVISOR_MULTI_COLUMN_DESIGNS_SHOWN);
    const ranked = [...reports.filter((r) => r.origin !== 'multi-column'), ...candidates].sort(compareDesigns);
    ranked.forEach((r, i) => (r.rank = i + 1));
    return {
      sample: {
        items: this.items,
        itemsNotJudged: this.notJudged,
        averageItemBytes: this.items === 0 ? 0 : given.characteristics.averageItemBytes,
        expectedItems,
        writes: fromLog ? 'access-log' : 'insertion-order',
        writesCounted: fromLog ? this.logWrites : this.items,
        readsCounted: this.logReads,
        momentWrites: this.momentWrites,
      },
      cluster: { sliceCount: layout.sliceCount, nodes: [...layout.nodes], source: layout.source },
      designs: ranked,
      recommendation: recommend(ranked, given),
    };
  }

  private describe(sim: DesignSim, fromLog: boolean, expectedItems: number): DesignReport {
    const { table } = sim.design;
    const S = sim.layout.sliceCount;
    const stream = fromLog ? sim.logWrites : sim.itemWrites;
    const space = sim.space;
    const hot = largest(stream.perPart);
    const bigPart = largest(sim.partBytes);
    const bigSlice = largest(Array.from(sim.sliceItems));
    const projection = this.items === 0 ? 0 : expectedItems / this.items;
    const r = sim.reads;
    const assumedSlices = sim.assumedQuerySlices(this.given.table.sharding);
    const nodes = sim.layout.nodes.map((node) => ({ node, items: 0, bytes: 0, writes: 0 }));
    const owning = new Set<number>();
    for (let s = 0; s < S; s++) {
      const n = nodes[sim.layout.owners[s]];
      if (n === undefined) continue;
      owning.add(sim.layout.owners[s]);
      n.items += sim.sliceItems[s];
      n.bytes += sim.sliceBytes[s];
      n.writes += stream.perSlice[s];
    }
    const report: DesignReport = {
      rank: 0,
      id: sim.design.id,
      label: sim.design.label,
      origin: sim.design.origin,
      shardingKey: table.sharding,
      sortingKey: table.sorting,
      evenDistribution: table.evenDistribution,
      invalidItems: sim.invalid,
      firstInvalid: sim.firstInvalid,
      characteristics: {
        cardinality: space.cardinality,
        isUnique: space.items > 0 && space.cardinality === space.items,
        mostCommon: space.mostCommon(MOST_COMMON_SHOWN).map(({ id, items }) => ({ value: space.text(id), items, share: items / space.items })),
        monotonicity: space.monotonicity(),
        averageItemBytes: sim.items === 0 ? 0 : sim.bytes / sim.items,
      },
      placement: {
        partitions: sim.partitions,
        slicesUsed: sim.sliceItems.reduce((n, v) => n + (v > 0 ? 1 : 0), 0),
        sliceCount: S,
        maxOverMean: {
          items: maxOverMean(sim.sliceItems, S),
          bytes: maxOverMean(sim.sliceBytes, S),
          writes: maxOverMean(stream.perSlice, S),
          reads: this.logReads > 0 ? maxOverMean(r.perSlice, S, r.scans) : null,
        },
        hottestKey: hot === null ? null : { key: sim.partText(hot.index), share: hot.value / stream.total },
        momentConcentration: stream.momentConcentration(),
        nodes: nodes.filter((_, i) => owning.has(i)),
        largestPartition:
          bigPart === null
            ? null
            : {
                key: sim.partText(bigPart.index),
                items: sim.partItems[bigPart.index],
                bytes: bigPart.value,
                projectedItems: Math.round(sim.partItems[bigPart.index] * projection),
                projectedBytes: Math.round(bigPart.value * projection),
              },
        largestSlice: bigSlice === null ? null : { slice: bigSlice.index, items: bigSlice.value, projectedItems: Math.round(bigSlice.value * projection) },
      },
      reads:
        this.logReads > 0
          ? {
              source: 'access-log',
              count: r.count,
              singleSliceShare: r.count === 0 ? 0 : r.singleSlice / r.count,
              meanSlicesPerRead: r.count === 0 ? 0 : r.slicesAsked / r.count,
              unplaceable: r.unplaceable,
            }
          : { source: 'assumed', count: 0, singleSliceShare: assumedSlices === 1 ? 1 : 0, meanSlicesPerRead: assumedSlices, unplaceable: 0 },
      findings: [],
    };
    report.findings = findings(sim, report, stream.perPart, this.logReads, this.momentWrites);
    return report;
  }
}

const pct = (x: number) => (x > 0 && x < 0.0001 ? '<0.01%' : `${(100 * x).toFixed(x >= 0.1 || x === 0 ? 0 : x >= 0.01 ? 1 : 2)}%`);
const num = (n: number) => Math.round(n).toLocaleString('en-US');
const keys = (n: number) => (n >= 10 ? num(n) : n.toFixed(1));
export const ratio = (n: number) => (n >= 100 ? num(n) : n.toFixed(1));
export function size(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

function findings(sim: DesignSim, d: DesignReport, writesPerPart: readonly (number | undefined)[], logReads: number, momentWrites: number): DesignReport['findings'] {
  const out: DesignReport['findings'] = [];
  const add = (antiPattern: AntiPattern, evidence: string) => out.push({ antiPattern, title: ANTI_PATTERNS[antiPattern].title, evidence });
  const p = d.placement;
  const partitionsWritten = writesPerPart.reduce<number>((n, v) => n + (v !== undefined && v > 0 ? 1 : 0), 0);
  const isHot = (share: number, partitions: number) => share >= ADVISOR_HOT_KEY_SHARE && share * partitions >= ADVISOR_HOT_KEY_OVER_MEAN;

  const hotWrites = p.hottestKey !== null && isHot(p.hottestKey.share, partitionsWritten);
  const hotRead = logReads > 0 && sim.reads.count > 0 ? largest(sim.reads.perPart) : null;
  const hotReadShare = hotRead === null ? 0 : hotRead.value / sim.reads.count;
  const hotReads = hotRead !== null && isHot(hotReadShare, Math.max(d.placement.partitions, 1));
  if (hotWrites || hotReads) {
    const parts: string[] = [];
    if (hotWrites) parts.push(`"${p.hottestKey!.key}" takes ${pct(p.hottestKey!.share)} of the writes (one of ${num(partitionsWritten)} sharding keys written)`);
    if (hotReads) parts.push(`${pct(hotReadShare)} of the reads ask "${sim.partText(hotRead!.index)}"`);
    add('hot-key', parts.join('; '));
  }

  const S = p.sliceCount;
  if (p.partitions > 0 && p.partitions < S / ADVISOR_LOW_CARDINALITY_SLICE_DIVISOR && sim.items >= ADVISOR_CARDINALITY_SAMPLES_PER_VALUE * p.partitions) {
    add('low-cardinality', `${num(p.partitions)} distinct ${d.evenDistribution ? 'stored sharding keys (keys x buckets)' : 'sharding keys'} in ${num(sim.items)} items: at most ${num(p.partitions)} of the ${num(S)} slices can hold items`);
  }

  const mono = d.characteristics.monotonicity;
  const moment = p.momentConcentration;
  if (!hotWrites && mono.type === 'monotonic' && moment !== null && p.hottestKey !== null && moment >= ADVISOR_HOT_KEY_SHARE && moment >= ADVISOR_HOT_KEY_OVER_MEAN * p.hottestKey.share) {
    add(
      'time-ordered-key',
      `the key follows insertion order (Spearman r = ${mono.correlation!.toFixed(2)}), so each moment's writes fall on the few current keys (as on ${(1 / moment).toFixed(1)} equally busy keys, median over moments of ${num(momentWrites)} writes), though the busiest key takes ${pct(p.hottestKey.share)} of all writes`,
    );
  }

  const lp = p.largestPartition;
  const tooLarge = lp !== null && lp.projectedBytes > PARTITION_BYTES_ADVISED_MAX;
  // A partition never splits over slices, so one larger than a move can copy pins its slice to its node.
  const unmovable = lp !== null && lp.projectedItems > SLICE_MOVABLE_ITEMS_MAX;
  if (tooLarge || unmovable) {
    const reasons: string[] = [];
    if (tooLarge) reasons.push(`past the ${size(PARTITION_BYTES_ADVISED_MAX)} a partition should stay under (DynamoDB's item-collection limit)`);
    if (unmovable) {
      reasons.push(`more items than a slice move copies in ${MOVE_TIME_MS_MAX / 60_000} minutes at ${num(MOVE_ITEMS_PER_SECOND_DEFAULT)} items/s (${num(SLICE_MOVABLE_ITEMS_MAX)}), so its slice could not be moved off its node`);
    }
    add('oversized-partition', `partition "${lp!.key}" would hold ${num(lp!.projectedItems)} items, ${size(lp!.projectedBytes)}: ${reasons.join('; ')}`);
  }
  return out;
}

/** Designs that store every item first, then fewer anti-patterns, then fewer slices
 * per read, then the given design (a design that is not broken stays), then the
 * flattest load, then the simpler change. */
function compareDesigns(a: DesignReport, b: DesignReport): number {
  const worst = (d: DesignReport) => {
    const m = d.placement.maxOverMean;
    return Math.round(10 * Math.max(m.items, m.bytes, m.writes, m.reads ?? 0));
  };
  const fan = (d: DesignReport) => Math.round(100 * d.reads.meanSlicesPerRead);
  const buckets = (d: DesignReport) => d.evenDistribution?.buckets ?? 0;
  return (
    Number(a.invalidItems > 0) - Number(b.invalidItems > 0) ||
    a.findings.length - b.findings.length ||
    fan(a) - fan(b) ||
    Number(b.origin === 'given') - Number(a.origin === 'given') ||
    worst(a) - worst(b) ||
    ORIGIN_ORDER[a.origin] - ORIGIN_ORDER[b.origin] ||
    buckets(a) - buckets(b)
  );
}

function readsText(d: DesignReport, given: DesignReport): string {
  const n = d.reads.meanSlicesPerRead;
  if (d.reads.source === 'assumed') {
    const by = given.shardingKey.map((c) => c.name).join('+');
    const what = n >= d.placement.sliceCount ? `every slice (${num(n)})` : `${num(n)} slice${n === 1 ? '' : 's'}`;
    return `a query by ${by} asks ${what}`;
  }
  return `reads ask ${n.toFixed(1)} slices on average, ${pct(d.reads.singleSliceShare)} of them answered by one slice`;
}

function recommend(ranked: DesignReport[], given: DesignReport): AdviceReport['recommendation'] {
  const best = ranked[0];
  const keep = best.id === 'given';
  const avoided = given.findings.find((f) => !best.findings.some((g) => g.antiPattern === f.antiPattern)) ?? null;
  const text = avoided === null ? null : ANTI_PATTERNS[avoided.antiPattern as AntiPattern];
  let reason: string;
  if (keep && given.findings.length === 0) {
    reason = `keep ${given.label}: none of the four anti-patterns shows in this sample; ${readsText(given, given)}`;
  } else if (keep) {
    reason = `keep ${given.label}: no alternative here avoids its ${given.findings.map((f) => f.antiPattern).join(', ')} without a worse problem`;
  } else {
    const parts = [`${best.label} instead of ${given.label}`];
    if (avoided !== null) parts.push(`it avoids ${avoided.antiPattern} ("${avoided.title}": ${avoided.evidence})`);
    if (best.invalidItems === 0 && given.invalidItems > 0) parts.push(`it stores every item (the given design cannot store ${num(given.invalidItems)}: ${given.firstInvalid})`);
    parts.push(`writes max/mean ${ratio(given.placement.maxOverMean.writes)} -> ${ratio(best.placement.maxOverMean.writes)}`);
    const [gm, bm] = [given.placement.momentConcentration, best.placement.momentConcentration];
    if (gm !== null && bm !== null) parts.push(`a moment's writes fall as on ${keys(1 / gm)} -> ${keys(1 / bm)} equally busy keys`);
    parts.push(`${readsText(best, given)} (given: ${given.reads.meanSlicesPerRead === best.reads.meanSlicesPerRead ? 'the same' : readsText(given, given).replace(/^a query by \S+ asks |^reads ask /, '')})`);
    reason = parts.join('; ');
  }
  return {
    id: best.id,
    label: best.label,
    keep,
    reason,
    antiPattern: keep ? (given.findings[0]?.antiPattern ?? null) : (avoided?.antiPattern ?? null),
    why: keep ? (given.findings[0] ? ANTI_PATTERNS[given.findings[0].antiPattern as AntiPattern].why : null) : (text?.why ?? null),
    fix: keep ? (given.findings[0] ? ANTI_PATTERNS[given.findings[0].antiPattern as AntiPattern].fix : null) : (text?.fix ?? null),
  };
}

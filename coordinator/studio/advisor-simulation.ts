// The advisor's placement simulation of one design: every sample item, log
// write and log read is placed with the cluster's own code (keyOfItem,
// placement: coordinator/primary-key.ts) over the cluster's slices and nodes,
// and counted per slice, node and partition (a stored sharding key). Memory
// grows with the distinct keys seen, not with the items: the caller bounds it
// by bounding the items it feeds.
import type { DesignReport } from '../../shared/advice.js';
import type { KeySchema } from '../../shared/api.js';
import { assert, KeysliceError } from '../../shared/errors.js';
import { decodeKey, encodeShardingPart, type KeyValue } from '../../shared/key-encoding.js';
import { ADVISOR_MONOTONIC_CORRELATION, ADVISOR_MONOTONICITY_SAMPLE_ITEMS, ITEM_BYTES_MAX } from '../../shared/limits.js';
import { MTIME_ATTRIBUTE, NAME_ATTRIBUTE, type Item } from '../../shared/values.js';
import { initialOwners } from '../metadata/cluster-map.js';
import { columnsText } from '../router/object-name.js';
import { bucketOfKey, checkColumn, describePart, keyOfItem, placement } from '../router/primary-key.js';
import type { Design } from './advisor-designs.js';

/** Where slices live: the cluster's map (owners[slice] = index into nodes, -1: none yet). */
export interface Layout {
  sliceCount: number;
  nodes: string[];
  owners: ArrayLike<number>;
  source: 'cluster' | 'layout';
}

/** The layout a new cluster of these nodes gets (coordinator/cluster-map.ts). */
export function newClusterLayout(sliceCount: number, nodes: string[]): Layout {
  return { sliceCount, nodes, owners: initialOwners(sliceCount, nodes.length), source: 'layout' };
}

/** The bytes the store counts for an item under a design: the item, its object name
 * and its modification time (as PutItem counts them: coordinator/operations.ts). */
const SYSTEM_BYTES = Buffer.byteLength(NAME_ATTRIBUTE) + Buffer.byteLength(MTIME_ATTRIBUTE) + 8;

/** The values of one set of sharding columns seen in the sample: an id per distinct
 * encoded value, items per value (sample items only), and an every-k-th sample of
 * (insertion order, value) for monotonicity. Designs with the same sharding columns share it. */
export class KeySpace {
  readonly ids = new Map<string, number>();
  readonly parts: string[] = [];
  readonly itemCounts: number[] = [];
  items = 0;
  private stride = 1;
  private sampleOrder: number[] = [];
  private sampleId: number[] = [];

  constructor(readonly columns: readonly KeySchema[]) {}

  idOf(part: string): number {
    let id = this.ids.get(part);
    if (id === undefined) {
      id = this.parts.length;
      this.ids.set(part, id);
      this.parts.push(part);
      this.itemCounts.push(0);
    }
    return id;
  }

  /** One sample item of value `id`, the `order`-th item of the sample. */
  countItem(id: number, order: number): void {
    this.itemCounts[id]++;
    this.items++;
    if (!kept(order, this.stride)) return;
    this.sampleOrder.push(order);
    this.sampleId.push(id);
    if (this.sampleOrder.length > ADVISOR_MONOTONICITY_SAMPLE_ITEMS) {
      // Keep about half: the sample stays about one item in k, for a k twice as large.
      this.stride *= 2;
      const keep = this.sampleOrder.map((o, i) => (kept(o, this.stride) ? i : -1)).filter((i) => i >= 0);
      this.sampleOrder = keep.map((i) => this.sampleOrder[i]);
      this.sampleId = keep.map((i) => this.sampleId[i]);
    }
  }

  get cardinality(): number {
    let n = 0;
    for (const c of this.itemCounts) if (c > 0) n++;
    return n;
  }

  text(id: number): string {
    const types = this.columns.map((c) => c.type);
    const values = (types.length === 1 ? decodeKey(this.parts[id], types) : decodeKey(this.parts[id], [types])[0]) as KeyValue[];
    return columnsText(this.columns, values, true);
  }

  values(id: number): KeyValue[] {
    const types = this.columns.map((c) => c.type);
    return (types.length === 1 ? decodeKey(this.parts[id], types) : decodeKey(this.parts[id], [types])[0]) as KeyValue[];
  }

  mostCommon(k: number): { id: number; items: number }[] {
    const top: { id: number; items: number }[] = [];
    this.itemCounts.forEach((items, id) => {
      if (items === 0 || (top.length === k && items <= top[k - 1].items)) return;
      top.push({ id, items });
      top.sort((a, b) => b.items - a.items);
      if (top.length > k) top.pop();
    });
    return top;
  }

  /** Spearman's rank correlation of the value order (encoded keys sort as the store
   * sorts them) with the insertion order, over the kept sample; ties share a rank.
   * (MongoDB correlates with record ids, i.e. insertion order, as well.) */
  monotonicity(): DesignReport['characteristics']['monotonicity'] {
    const m = this.sampleOrder.length;
    if (m < 3) return { correlation: null, type: 'unknown' };
    const byKey = Array.from({ length: m }, (_, i) => i).sort((a, b) => {
      const pa = this.parts[this.sampleId[a]];
      const pb = this.parts[this.sampleId[b]];
      return pa < pb ? -1 : pa > pb ? 1 : a - b;
    });
    const rank = new Float64Array(m);
    for (let i = 0; i < m; ) {
      let j = i;
      while (j + 1 < m && this.sampleId[byKey[j + 1]] === this.sampleId[byKey[i]]) j++;
      for (let t = i; t <= j; t++) rank[byKey[t]] = (i + j) / 2;
      i = j + 1;
    }
    // x: position in insertion order (the sample is kept in that order, no ties).
    const mean = (m - 1) / 2;
    let sxy = 0;
    let sxx = 0;
    let syy = 0;
    for (let i = 0; i < m; i++) {
      const dx = i - mean;
      const dy = rank[i] - mean;
      sxy += dx * dy;
      sxx += dx * dx;
      syy += dy * dy;
    }
    if (syy === 0) return { correlation: null, type: 'unknown' };
    const r = sxy / Math.sqrt(sxx * syy);
    return { correlation: r, type: Math.abs(r) >= ADVISOR_MONOTONIC_CORRELATION ? 'monotonic' : 'not monotonic' };
  }
}

/** Whether the `order`-th item is in a sample of about one in `stride` (a power of 2).
 * Chosen by a hash of the order, not every k-th item, so that a pattern that repeats
 * every few items (9 writes of one key, then another) is not sampled on one phase of
 * it; and a sample for 2k is part of the sample for k, so halving keeps it a sample. */
function kept(order: number, stride: number): boolean {
  let h = order >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  h = (h ^ (h >>> 16)) >>> 0;
  return h < 0x100000000 / stride;
}

/** One stream of writes: per slice, per partition, and per moment: how concentrated
 * each `momentWrites` consecutive writes are, as the sum of the squared shares of
 * the partitions they go to (the chance that two writes of the moment share a
 * partition): 1 when all go to one, 1/k when k take equal shares. Unlike the
 * busiest partition's share it is not inflated by chance when a moment is short. */
export class WriteStream {
  total = 0;
  readonly perSlice: Float64Array;
  readonly perPart: number[] = [];
  private moment = new Map<number, number>();
  private inMoment = 0;
  private readonly shares: number[] = [];

  constructor(sliceCount: number, private readonly momentWrites: number) {
    this.perSlice = new Float64Array(sliceCount);
  }

  add(slice: number, part: number): void {
    this.total++;
    this.perSlice[slice]++;
    this.perPart[part] = (this.perPart[part] ?? 0) + 1;
    this.moment.set(part, (this.moment.get(part) ?? 0) + 1);
    if (++this.inMoment === this.momentWrites) {
      let sum = 0;
      for (const n of this.moment.values()) sum += n * n;
      this.shares.push(sum / (this.inMoment * this.inMoment));
      this.moment.clear();
      this.inMoment = 0;
    }
  }

  /** The median over whole moments; null before the first one is complete. */
  momentConcentration(): number | null {
    if (this.shares.length === 0) return null;
    const s = [...this.shares].sort((a, b) => a - b);
    const h = Math.floor(s.length / 2);
    return s.length % 2 === 1 ? s[h] : (s[h - 1] + s[h]) / 2;
  }
}

export interface ReadCounts {
  count: number;
  singleSlice: number;
  slicesAsked: number;
  unplaceable: number;
  /** Reads that asked each slice (scans are counted apart: they ask every slice). */
  perSlice: Float64Array;
  scans: number;
  /** Reads that asked each partition (a query over buckets asks every bucket). */
  perPart: number[];
}

/** The simulation of one design over the sample and the access log. */
export class DesignSim {
  invalid = 0;
  firstInvalid: string | null = null;
  items = 0;
  bytes = 0;
  readonly sliceItems: Float64Array;
  readonly sliceBytes: Float64Array;
  readonly partItems: number[] = [];
  readonly partBytes: number[] = [];
  /** Even distribution: partition id of (value id, bucket), and back. */
  private readonly bucketParts = new Map<number, number>();
  private readonly partValue: number[] = [];
  private readonly partBucket: number[] = [];
  readonly itemWrites: WriteStream;
  readonly logWrites: WriteStream;
  logWritesUnplaceable = 0;
  readonly reads: ReadCounts;
  private readonly sliceCount: number;
  /** Slices of the N buckets of a sharding value (queries over buckets), by value id. */
  private readonly bucketSlices = new Map<number, number[]>();

  constructor(
    readonly design: Design,
    readonly space: KeySpace,
    /** This design counts the space's items (the first design of these sharding columns). */
    private readonly countsSpace: boolean,
    readonly layout: Layout,
    momentWrites: number,
  ) {
    const s = layout.sliceCount;
    this.sliceCount = s;
    this.sliceItems = new Float64Array(s);
    this.sliceBytes = new Float64Array(s);
    this.itemWrites = new WriteStream(s, momentWrites);
    this.logWrites = new WriteStream(s, momentWrites);
    this.reads = { count: 0, singleSlice: 0, slicesAsked: 0, unplaceable: 0, perSlice: new Float64Array(s), scans: 0, perPart: [] };
  }

  private get table() {
    return this.design.table;
  }

  private partOf(valueId: number, bucket: number | null): number {
    if (bucket === null) return valueId;
    const buckets = this.table.evenDistribution!.buckets;
    const k = valueId * buckets + bucket;
    let p = this.bucketParts.get(k);
    if (p === undefined) {
      p = this.partValue.length;
      this.bucketParts.set(k, p);
      this.partValue.push(valueId);
      this.partBucket.push(bucket);
    }
    return p;
  }

  /** A sample item, the `order`-th; `baseBytes` is itemBytes(item). */
  addItem(item: Item, order: number, baseBytes: number): void {
    let pk;
    try {
      pk = keyOfItem(this.table, item, this.sliceCount);
    } catch (err) {
      if (!(err instanceof KeysliceError)) throw err;
      this.refuse(err.message);
      return;
    }
    const bytes = baseBytes + SYSTEM_BYTES + Buffer.byteLength(pk.name);
    if (bytes > ITEM_BYTES_MAX) {
      this.refuse(`an item is ${bytes} bytes with its object name; the limit is ${ITEM_BYTES_MAX}`);
      return;
    }
    const value = this.space.idOf(encodeShardingPart(this.space.columns.map((c) => c.type), pk.sharding));
    if (this.countsSpace) this.space.countItem(value, order);
    const part = this.partOf(value, pk.bucket);
    this.items++;
    this.bytes += bytes;
    this.partItems[part] = (this.partItems[part] ?? 0) + 1;
    this.partBytes[part] = (this.partBytes[part] ?? 0) + bytes;
    this.sliceItems[pk.slice]++;
    this.sliceBytes[pk.slice] += bytes;
    this.itemWrites.add(pk.slice, part);
  }

  private refuse(message: string): void {
    this.invalid++;
    this.firstInvalid ??= message;
  }

  /** A write of the access log: its key must name every key column of this design. */
  addLogWrite(key: Item): void {
    let pk;
    try {
      pk = keyOfItem(this.table, key, this.sliceCount);
    } catch (err) {
      if (!(err instanceof KeysliceError)) throw err;
      this.logWritesUnplaceable++;
      return;
    }
    const value = this.space.idOf(encodeShardingPart(this.space.columns.map((c) => c.type), pk.sharding));
    this.logWrites.add(pk.slice, this.partOf(value, pk.bucket));
  }

  /** A read of the access log: a get or a query by the sharding key (one slice, or
   * the N buckets' slices with even distribution unless the whole key is named),
   * or, without every sharding column, a scan of every slice. */
  addLogRead(key: Item): void {
    const r = this.reads;
    const t = this.table;
    const sharding: KeyValue[] = [];
    try {
      for (let i = 0; i < t.sharding.length; i++) {
        const v = key[t.sharding[i].name];
        if (v === undefined) break;
        sharding.push(checkColumn(t, 'sharding', i, v));
      }
    } catch (err) {
      if (!(err instanceof KeysliceError)) throw err;
      r.unplaceable++;
      return;
    }
    r.count++;
    if (sharding.length < t.sharding.length) {
      r.scans++;
      r.slicesAsked += this.sliceCount;
      return;
    }
    const value = this.space.idOf(encodeShardingPart(this.space.columns.map((c) => c.type), sharding));
    const ask = (slice: number, part: number) => {
      r.perSlice[slice]++;
      r.perPart[part] = (r.perPart[part] ?? 0) + 1;
      r.slicesAsked++;
    };
    if (t.evenDistribution === null) {
      r.singleSlice++;
      return ask(placement(t, sharding, null, this.sliceCount).slice, value);
    }
    const sorting = this.sortingOf(key);
    if (sorting !== null) {
      r.singleSlice++;
      const bucket = bucketOfKey(t, sorting)!;
      return ask(placement(t, sharding, bucket, this.sliceCount).slice, this.partOf(value, bucket));
    }
    const slices = this.slicesOfBuckets(value, sharding);
    if (slices.length === 1) r.singleSlice++;
    // A query over buckets reads every bucket; buckets that share a slice are one ask of it each.
    for (let b = 0; b < t.evenDistribution.buckets; b++) {
      const part = this.partOf(value, b);
      r.perPart[part] = (r.perPart[part] ?? 0) + 1;
    }
    for (const s of slices) r.perSlice[s]++;
    r.slicesAsked += slices.length;
  }

  private sortingOf(key: Item): KeyValue[] | null {
    const out: KeyValue[] = [];
    for (let i = 0; i < this.table.sorting.length; i++) {
      const v = key[this.table.sorting[i].name];
      if (v === undefined) return null;
      try {
        out.push(checkColumn(this.table, 'sorting', i, v));
      } catch (err) {
        if (!(err instanceof KeysliceError)) throw err;
        return null;
      }
    }
    return out;
  }

  private slicesOfBuckets(value: number, sharding: KeyValue[]): number[] {
    let slices = this.bucketSlices.get(value);
    if (slices === undefined) {
      const set = new Set<number>();
      for (let b = 0; b < this.table.evenDistribution!.buckets; b++) set.add(placement(this.table, sharding, b, this.sliceCount).slice);
      slices = [...set];
      this.bucketSlices.set(value, slices);
    }
    return slices;
  }

  /** The slices a query by the given design's sharding key asks (the read assumed
   * when there is no access log): its own slice, its buckets', or every slice. */
  assumedQuerySlices(givenSharding: readonly KeySchema[]): number {
    const known = new Set(givenSharding.map((c) => c.name));
    if (!this.table.sharding.every((c) => known.has(c.name))) return this.sliceCount;
    return this.table.evenDistribution?.buckets ?? 1;
  }

  /** The stored sharding key of a partition, as DescribeSlices names it. */
  partText(part: number): string {
    if (this.table.evenDistribution === null) return this.space.text(part);
    const stored = placement(this.table, this.space.values(this.partValue[part]), this.partBucket[part], this.sliceCount).part;
    return describePart(this.table, stored, this.sliceCount).text;
  }

  get partitions(): number {
    let n = 0;
    for (const c of this.partItems) if (c !== undefined && c > 0) n++;
    return n;
  }
}

/** The busiest over the mean of all slices (DescribeSlices' figure); 0 when empty. */
export function maxOverMean(perSlice: ArrayLike<number>, sliceCount: number, extraEach = 0): number {
  let total = 0;
  let max = 0;
  for (let i = 0; i < perSlice.length; i++) {
    total += perSlice[i] + extraEach;
    max = Math.max(max, perSlice[i] + extraEach);
  }
  assert(perSlice.length === sliceCount, 'one count per slice');
  return total === 0 ? 0 : max / (total / sliceCount);
}

/** The largest entry of a sparse list of counts: its index and value. */
export function largest(counts: readonly (number | undefined)[]): { index: number; value: number } | null {
  let best: { index: number; value: number } | null = null;
  counts.forEach((v, index) => {
    if (v !== undefined && v > 0 && (best === null || v > best.value)) best = { index, value: v };
  });
  return best;
}

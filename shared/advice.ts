// What the key-design advisor answers (keyslice advise, the Advise operation):
// the design as given and its alternatives, each with the key's characteristics
// (as MongoDB's analyzeShardKey defines them) and what a placement simulation
// over the cluster's slices and nodes shows, ranked, with a recommendation.
// Plain values only, so that the report travels as JSON and msgpack alike.
import type { EvenDistribution, KeySchema } from './api.js';
import type { Item } from './values.js';

/** One access of the access log: a read or a write, and the key attributes it
 * names (a read may name only some: a query by its sharding key, say). */
export interface AccessEntry {
  op: 'read' | 'write';
  key: Item;
}

export type DesignOrigin = 'given' | 'swapped' | 'even' | 'multi-column';

export interface DesignReport {
  /** 1 is the recommendation. */
  rank: number;
  /** Stable within a report: "given", "swapped", "even-16", "multi-column-device". */
  id: string;
  /** "device / seq, even 16": sharding columns / sorting columns, even distribution. */
  label: string;
  origin: DesignOrigin;
  shardingKey: KeySchema[];
  sortingKey: KeySchema[];
  evenDistribution: EvenDistribution | null;
  /** Sample items this design cannot store (a key attribute missing or of the wrong type,
   * a period where the object name forbids one, a key or item too large), and the first reason. */
  invalidItems: number;
  firstInvalid: string | null;
  characteristics: {
    /** Distinct values of the sharding key in the sample. */
    cardinality: number;
    /** Every item has a sharding-key value of its own. */
    isUnique: boolean;
    /** The most common sharding-key values: items and share of the sample. */
    mostCommon: { value: string; items: number; share: number }[];
    /** Spearman correlation of the sharding key's order with the order of insertion,
     * and whether that makes it monotonic (|r| >= 0.7); null: too few items or values. */
    monotonicity: { correlation: number | null; type: 'monotonic' | 'not monotonic' | 'unknown' };
    averageItemBytes: number;
  };
  placement: {
    /** Distinct stored sharding keys (with even distribution: key and bucket): the partitions. */
    partitions: number;
    slicesUsed: number;
    sliceCount: number;
    /** The busiest slice over the mean of all slices, as DescribeSlices computes it. */
    maxOverMean: { items: number; bytes: number; writes: number; reads: number | null };
    /** The stored sharding key that takes the most writes, and its share of them. */
    hottestKey: { key: string; share: number } | null;
    /** How a moment's writes concentrate on stored keys: the sum of their squared shares
     * (1: all on one key; 1/k: k equally busy keys), median over moments; null: fewer
     * writes than one moment. */
    momentConcentration: number | null;
    /** Per node: items, bytes and writes of the sample. */
    nodes: { node: string; items: number; bytes: number; writes: number }[];
    /** The largest partition, in the sample and projected to the expected item count. */
    largestPartition: { key: string; items: number; bytes: number; projectedItems: number; projectedBytes: number } | null;
    /** The slice with the most items, projected likewise. */
    largestSlice: { slice: number; items: number; projectedItems: number } | null;
  };
  reads: {
    /** access-log: the log's reads; assumed: a query by the given design's sharding key. */
    source: 'access-log' | 'assumed';
    count: number;
    /** Share of reads that one slice answers (a get, or a query of a sharding key without buckets). */
    singleSliceShare: number;
    /** Slices a read asks on average (a query over N buckets: N; one without the sharding key: every slice). */
    meanSlicesPerRead: number;
    /** Log reads that name too little to be placed (a sharding column missing or of the wrong type). */
    unplaceable: number;
  };
  /** The anti-patterns this design shows in this sample, with the figures that show them. */
  findings: { antiPattern: string; title: string; evidence: string }[];
}

export interface AdviceReport {
  sample: {
    /** Items judged (the first ones of the sample, up to the cap). */
    items: number;
    /** Items the sample had beyond the cap, not judged; null when not counted. */
    itemsNotJudged: number | null;
    averageItemBytes: number;
    /** The table size to plan for: partitions are projected to it (default: the sample). */
    expectedItems: number;
    /** Where the writes come from: the access log's writes, or one write per item in the sample's order. */
    writes: 'access-log' | 'insertion-order';
    writesCounted: number;
    readsCounted: number;
    momentWrites: number;
  };
  cluster: { sliceCount: number; nodes: string[]; source: 'cluster' | 'layout' };
  /** Best first. */
  designs: DesignReport[];
  recommendation: {
    id: string;
    label: string;
    /** The given design is the best one. */
    keep: boolean;
    reason: string;
    /** The anti-pattern of the given design that the recommendation avoids (coordinator/studio/anti-patterns.ts), if any. */
    antiPattern: string | null;
    why: string | null;
    fix: string | null;
  };
}

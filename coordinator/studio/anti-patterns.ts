// The key-design anti-patterns that the seed guidance warns about, named once:
// the studio's live findings and the advisor's judgement of sample data both
// speak of them with these names, reasons and fixes.

export type AntiPattern = 'hot-key' | 'low-cardinality' | 'time-ordered-key' | 'oversized-partition';

export interface AntiPatternText {
  /** A short title for a finding. */
  title: string;
  /** Why it hurts, in one or two plain sentences. */
  why: string;
  /** What keyslice offers against it. */
  fix: string;
}

export const ANTI_PATTERNS: Record<AntiPattern, AntiPatternText> = {
  'hot-key': {
    title: 'One hot sharding key',
    why: 'Most reads or writes go to one sharding key, so one slice on one node serves them while the others idle; that slice hits its capacity first.',
    fix: 'Spread the key with even distribution (evenDistribution: {buckets: N}); reads by the original key still return one sorted stream.',
  },
  'low-cardinality': {
    title: 'Few distinct sharding keys',
    why: 'With only a few distinct sharding keys, the items can use at most that many slices, however many nodes the cluster has.',
    fix: 'Choose a sharding key with many distinct values (or add a column to a multi-column sharding key), or use even distribution.',
  },
  'time-ordered-key': {
    title: 'A time-ordered sharding key with a hot range',
    why: 'When new items always go to the newest sharding-key values (a timestamp, a sequence), the writes of each moment pile onto the few slices of the current values.',
    fix: 'Put an entity in front of time: shard by the entity and sort by time (a multi-column key), or spread the current values with even distribution.',
  },
  'oversized-partition': {
    title: 'An oversized partition',
    why: 'All items of one sharding key live on one slice; a sharding key that collects an unbounded number of items grows one slice without limit.',
    fix: 'Bound a partition: add a time bucket or another column to the sharding key, or use even distribution to split it over N slices.',
  },
};

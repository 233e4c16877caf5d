// Even distribution's read side. Items of one sharding key are stored under
// `<key>_<bucket>` (or the sharding tuple with the bucket added), bucket =
// hash(sorting key) % N, so a GetItems by the original key reads all N buckets
// in parallel and merges them by sorting key.
//
// A sorting key lives in exactly one bucket, so a page can be continued from
// the sorting key of its last item alone: every bucket resumes after it. Each
// bucket is read in chunks, refilled only when the merge has used up what it
// fetched, so a page reads about as far into each bucket as the page needs.
import { KeysliceError } from '../../shared/errors.js';
import { PAGE_BYTES_MAX } from '../../shared/limits.js';
import type { Condition } from '../../shared/expression-ast.js';
import { SliceOp, type Projection, type RangeResult, type RangeSpec, type SliceOpMessage } from '../../shared/protocol.js';
import { itemBytes, type Item } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { bucketMarker, continueAfterKey, fromBase64url, isEmptyRange, rangeSpec, type SortRange } from './key-range.js';
import type { ShardingPlacement } from './primary-key.js';

const MARKER_BUCKETS = /^b1\.([A-Za-z0-9_-]*)$/;

interface Cursor {
  slice: number;
  prefixBytes: number;
  spec: RangeSpec;
  keys: string[];
  items: Item[];
  pos: number;
  more: boolean;
  /** Sorting part of the last key this bucket examined: it has nothing unread up to here. */
  frontier: string | null;
}

export interface GatherRequest {
  table: Table;
  /** Where each bucket of the sharding key is stored, bucket 0 first. */
  buckets: ShardingPlacement[];
  range: SortRange | null;
  reverse: boolean;
  limit: number;
  marker: string | undefined;
  projection: Projection;
  filter: Condition | null;
  send: (slice: number, op: SliceOpMessage) => Promise<unknown>;
}

export async function gatherBuckets(r: GatherRequest): Promise<{ items: Item[]; examined: number; marker?: string }> {
  const buckets = r.buckets.length;
  // Enough per bucket for an even share of the page, with some slack.
  const chunk = Math.min(r.limit, Math.max(4, Math.ceil((r.limit * 1.25) / buckets) + 1));
  let after: string | null = null;
  if (r.marker !== undefined) {
    const m = MARKER_BUCKETS.exec(r.marker);
    if (m === null) throw new KeysliceError('InvalidMarker', 'this marker does not belong to this query');
    after = fromBase64url(m[1]);
  }
  const cursors: Cursor[] = [];
  let empty = false;
  for (const { part: prefix, slice } of r.buckets) {
    const spec = rangeSpec(r.table, prefix, r.range, r.reverse, chunk, r.projection, r.filter);
    spec.withKeys = true;
    if (after !== null) continueAfterKey(spec, prefix + after);
    empty ||= isEmptyRange(spec);
    cursors.push({ slice, prefixBytes: prefix.length, spec, keys: [], items: [], pos: 0, more: true, frontier: null });
  }
  if (empty) return { items: [], examined: 0 }; // bounds that contradict each other: no bucket holds anything

  let examined = 0;
  const fetch = async (c: Cursor) => {
    const [items, lastKey, more, keys, n] = (await r.send(c.slice, [SliceOp.Range, r.table.id, c.slice, c.spec])) as RangeResult;
    examined += n;
    c.items = items;
    c.keys = keys!.map((k) => k.slice(c.prefixBytes)); // the sorting part: comparable across buckets
    c.pos = 0;
    c.more = more;
    if (lastKey !== null) {
      continueAfterKey(c.spec, lastKey);
      c.frontier = lastKey.slice(c.prefixBytes);
    }
  };
  const before = (a: string, b: string) => (r.reverse ? a > b : a < b);

  const out: Item[] = [];
  let lastSort: string | null = null;
  let bytes = 0;
  // A filter can make fetches come back empty; after this many the page ends
  // early at the frontier that every bucket has read past.
  let fetchesLeft = buckets * 8 + Math.ceil(r.limit / chunk);
  for (;;) {
    const empty = cursors.filter((c) => c.pos === c.items.length && c.more);
    if (empty.length > 0 && fetchesLeft > 0) {
      fetchesLeft -= empty.length;
      await Promise.all(empty.map(fetch));
      continue;
    }
    // Without fetches left, only what sorts before every unfinished bucket's frontier may go out.
    let frontier: string | null = null;
    for (const c of empty) if (frontier === null || before(c.frontier!, frontier)) frontier = c.frontier;
    let best: Cursor | null = null;
    for (const c of cursors) {
      if (c.pos === c.items.length) continue;
      if (best === null || before(c.keys[c.pos], best.keys[best.pos])) best = c;
    }
    const mayEmit = best !== null && (frontier === null || !before(frontier, best.keys[best.pos]));
    if (!mayEmit) {
      if (frontier === null) return { items: out, examined }; // every bucket is read to its end
      return { items: out, examined, marker: bucketMarker(frontier) };
    }
    if (out.length >= r.limit || bytes >= PAGE_BYTES_MAX) return { items: out, examined, marker: bucketMarker(lastSort!) };
    const item = best!.items[best!.pos];
    lastSort = best!.keys[best!.pos];
    best!.pos++;
    out.push(item);
    bytes += itemBytes(item);
  }
}

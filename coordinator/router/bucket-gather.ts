// Even distribution's read side. Items of one sharding key are stored under
// `<key>_<bucket>` (or the sharding tuple with the bucket added), bucket =
// hash(sorting key) % N, so a GetItems by the original key reads all N buckets
// in parallel and merges them by sorting key.
//
// A sorting key lives in exactly one bucket, so a page can be continued from
// the sorting key of its last item alone: every bucket resumes after it. Each
// bucket is read in chunks, refilled only when the merge has used up what it
// fetched, so a page reads about as far into each bucket as the page needs.
import { PAGE_BYTES_MAX } from '../../shared/limits.js';
import { MalformedFrame, SliceOp, splitPackedList, type RangeResult, type RangeSpec } from '../../shared/protocol.js';
import { itemBytes, type Item } from '../../shared/values.js';
import { bucketMarker, continueAfterKey } from './key-range.js';
import type { RangeOp } from './item-requests.js';

/** One bucket's range: the slice of its stored sharding key, that key's encoded length (the
 * sorting part of a key follows it), and the range with the page's bounds and marker applied. */
export interface BucketRange {
  slice: number;
  prefixBytes: number;
  spec: RangeSpec;
}

interface Cursor extends BucketRange {
  keys: string[];
  /** Objects, or the items of a packed list each as its bytes (splitPackedList). */
  items: Item[] | Uint8Array[];
  pos: number;
  more: boolean;
  /** Sorting part of the last key this bucket examined: it has nothing unread up to here. */
  frontier: string | null;
}

export interface GatherRequest {
  tableId: number;
  /** Bucket 0 first; each range's limit is bucketChunk(limit, buckets). */
  buckets: BucketRange[];
  reverse: boolean;
  limit: number;
  send: (op: RangeOp) => Promise<RangeResult>;
}

/** Items fetched from a bucket at a time: enough for an even share of a page of `limit`, with some slack. */
export function bucketChunk(limit: number, buckets: number): number {
  return Math.min(limit, Math.max(4, Math.ceil((limit * 1.25) / buckets) + 1));
}

/** The page's items are as the buckets' ranges return them: objects, or (RangeSpec.packed) packed
 * items, each its own bytes, which the merge moves without reading (it orders by the keys). */
export async function gatherBuckets(r: GatherRequest): Promise<{ items: Item[] | Uint8Array[]; examined: number; marker?: string }> {
  const buckets = r.buckets.length;
  const chunk = bucketChunk(r.limit, buckets);
  const cursors = r.buckets.map(({ slice, prefixBytes, spec }): Cursor => ({ slice, prefixBytes, spec, keys: [], items: [], pos: 0, more: true, frontier: null }));

  let examined = 0;
  const fetch = async (c: Cursor) => {
    const [items, lastKey, more, keys, n] = await r.send([SliceOp.Range, r.tableId, c.slice, c.spec]);
    examined += n;
    // Packed, each item is checked as it is cut (splitPackedList), once: the merge passes the pieces on as they are.
    // The answer's form is the one asked for, and its keys are a list (checkSliceResult, where it was decoded).
    c.items = c.spec.packed ? splitPackedList(items as Uint8Array) : (items as Item[]);
    // The merge orders items by their keys, one per item: checked where the answer was decoded for items as objects;
    // packed, the count of items is known here, once the list is cut. (A bucket's range always asks for keys.)
    if (c.spec.packed && keys!.length !== c.items.length) throw new MalformedFrame(`a bucket's range answered ${c.items.length} items and ${keys!.length} keys for them`);
    c.keys = keys!.map((k) => k.slice(c.prefixBytes)); // the sorting part: comparable across buckets
    // A bucket with more to read goes on after its last examined key; without one it would be asked the same range
    // again until the fetches ran out, and the page would end without it and without a marker.
    if (more && lastKey === null) throw new MalformedFrame("a bucket's range answered that it has more but named no last key");
    c.pos = 0;
    c.more = more;
    if (lastKey !== null) {
      continueAfterKey(c.spec, lastKey);
      c.frontier = lastKey.slice(c.prefixBytes);
    }
  };
  const before = (a: string, b: string) => (r.reverse ? a > b : a < b);

  const out: (Item | Uint8Array)[] = [];
  // The page's byte budget counts a packed item's length, an object's itemBytes: both about its size.
  const sizeOf = (item: Item | Uint8Array) => (item instanceof Uint8Array ? item.byteLength : itemBytes(item));
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
      if (frontier === null) return { items: out as Item[] | Uint8Array[], examined }; // every bucket is read to its end
      return { items: out as Item[] | Uint8Array[], examined, marker: bucketMarker(frontier) };
    }
    if (out.length >= r.limit || bytes >= PAGE_BYTES_MAX) return { items: out as Item[] | Uint8Array[], examined, marker: bucketMarker(lastSort!) };
    const item = best!.items[best!.pos];
    lastSort = best!.keys[best!.pos];
    best!.pos++;
    out.push(item);
    bytes += sizeOf(item);
  }
}

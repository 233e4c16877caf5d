// The pure core of a worker thread: the slices it owns, each holding one
// sorted map per table keyed by encoded primary key. It takes slice ops and
// returns results; the clock is injected and there is no I/O here. A write's
// condition is evaluated here, against the stored item, in the same step as the
// write: one thread owns the slice, so nothing can come between the two.
import sortedBtree from 'sorted-btree';
import { assert, KeysliceError } from '../shared/errors.js';
import type { Condition } from '../shared/expression-ast.js';
import { applyUpdate, evaluate, projectItem } from '../shared/expression-eval.js';
import { ITEM_BYTES_MAX, PAGE_BYTES_MAX } from '../shared/limits.js';
import {
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  type RangeResult,
  type RangeSpec,
  type Projection,
  type ScanResult,
  type SliceOpMessage,
  type SliceOpResult,
  type StatsResult,
  type UpdateSpec,
  type WriteCheck,
} from '../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, type Item } from '../shared/values.js';

// sorted-btree is CommonJS with an ES-style default export: unwrap it once.
const BTree = sortedBtree.default;
type Stored = { item: Item; bytes: number };

/** One table's items in one slice, sorted by encoded key, with their byte total kept in step. */
class Partition {
  readonly tree = new BTree<string, Stored>();
  bytes = 0;

  set(key: string, stored: Stored): void {
    const old = this.tree.get(key);
    this.bytes += stored.bytes - (old?.bytes ?? 0);
    this.tree.set(key, stored);
  }

  delete(key: string): boolean {
    const old = this.tree.get(key);
    if (old === undefined) return false;
    this.bytes -= old.bytes;
    this.tree.delete(key);
    return true;
  }
}

export class SliceStore {
  private epoch = 0;
  private owned = new Set<number>();
  private ownedSorted: number[] = [];
  /** tableId -> slice -> partition. Created on first write. */
  private readonly tables = new Map<number, Map<number, Partition>>();

  constructor(
    readonly workerIndex: number,
    readonly workerCount: number,
    private readonly now: () => number = Date.now,
  ) {
    assert(workerIndex >= 0 && workerIndex < workerCount, 'worker index within worker count');
  }

  execute(op: SliceOpMessage): SliceOpResult {
    try {
      return [RESULT_OK, this.apply(op)];
    } catch (err) {
      if (err instanceof KeysliceError) return err.details === undefined ? [RESULT_ERROR, err.code, err.message] : [RESULT_ERROR, err.code, err.message, err.details];
      throw err; // a bug: let the worker fail loudly
    }
  }

  private apply(op: SliceOpMessage): unknown {
    switch (op[0]) {
      case SliceOp.Assign:
        return this.assign(op[1], op[2]);
      case SliceOp.Put: {
        const [, table, slice, key, item, bytes, check] = op;
        const partition = this.partition(table, slice, true)!;
        const old = check === null ? null : checkWrite(check, partition.tree.get(key)?.item ?? null);
        item[MTIME_ATTRIBUTE] = this.now();
        partition.set(key, { item, bytes });
        return check?.returnOld ? old : null;
      }
      case SliceOp.Get: {
        const [, table, slice, key, projection] = op;
        const stored = this.partition(table, slice, false)?.tree.get(key);
        return stored === undefined ? null : projectItem(stored.item, projection);
      }
      case SliceOp.Delete: {
        const [, table, slice, key, check] = op;
        const partition = this.partition(table, slice, false);
        if (check === null) return partition?.delete(key) ?? false;
        const old = checkWrite(check, partition?.tree.get(key)?.item ?? null);
        const deleted = partition?.delete(key) ?? false;
        return check.returnOld ? old : deleted;
      }
      case SliceOp.Update:
        return this.update(op[1], op[2], op[3], op[4]);
      case SliceOp.Range:
        return this.range(op[1], op[2], op[3]);
      case SliceOp.Scan:
        return this.scan(op[1], op[2], op[3], op[4], op[5], op[6]);
      case SliceOp.DropTable:
        return this.tables.delete(op[1]);
      case SliceOp.Stats:
        return this.stats(op[1]);
      default:
        throw new KeysliceError('Internal', `unknown slice op ${String((op as unknown[])[0])}`);
    }
  }

  private assign(epoch: number, slices: number[]): null {
    assert(epoch >= this.epoch, `an epoch only grows (had ${this.epoch}, got ${epoch})`);
    for (const s of slices) assert(s % this.workerCount === this.workerIndex, `slice ${s} belongs to worker ${s % this.workerCount}, not ${this.workerIndex}`);
    this.epoch = epoch;
    this.owned = new Set(slices);
    this.ownedSorted = [...slices].sort((a, b) => a - b);
    return null;
  }

  private partition(table: number, slice: number, create: boolean): Partition | undefined {
    if (!this.owned.has(slice)) {
      throw new KeysliceError('WrongOwner', `slice ${slice} is not owned by worker ${this.workerIndex} at epoch ${this.epoch}`);
    }
    let slices = this.tables.get(table);
    if (slices === undefined) {
      if (!create) return undefined;
      slices = new Map();
      this.tables.set(table, slices);
    }
    let partition = slices.get(slice);
    if (partition === undefined && create) {
      partition = new Partition();
      slices.set(slice, partition);
    }
    return partition;
  }

  /** The condition checked, the actions applied to a copy, the result checked, then
   * stored: all or nothing. A missing item is created from `spec.base` (upsert). */
  private update(table: number, slice: number, key: string, spec: UpdateSpec): Item | null {
    const partition = this.partition(table, slice, true)!;
    const old = partition.tree.get(key)?.item ?? null;
    if (spec.condition !== null) checkWrite({ condition: spec.condition, returnOld: false, oldOnFailure: spec.oldOnFailure }, old);
    const next = applyUpdate(old ?? spec.base, spec.actions);
    next[MTIME_ATTRIBUTE] = this.now();
    const bytes = itemBytes(next);
    if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `the updated item would be ${bytes} bytes, over ${ITEM_BYTES_MAX}`);
    partition.set(key, { item: next, bytes });
    if (spec.returnValues === 'old') return old;
    if (spec.returnValues === 'new') return next;
    return null;
  }

  private range(table: number, slice: number, spec: RangeSpec): RangeResult {
    const tree = this.partition(table, slice, false)?.tree;
    const items: Item[] = [];
    if (tree === undefined) return [items, null, false];
    const { low, lowInclusive, high, highInclusive, limit, projection, filter } = spec;
    let examined = 0;
    let bytes = 0;
    let lastKey: string | null = null;
    const iter = spec.reverse ? tree.entriesReversed(high) : tree.entries(low);
    for (const [key, stored] of iter) {
      if (spec.reverse) {
        if (key === high && !highInclusive) continue;
        if (key < low || (key === low && !lowInclusive)) break;
      } else {
        if (key === low && !lowInclusive) continue;
        if (key > high || (key === high && !highInclusive)) break;
      }
      // One item past the page tells whether a marker is needed. The limit and
      // the byte budget count examined items, filtered out or not.
      if (examined >= limit || bytes >= PAGE_BYTES_MAX) return [items, lastKey, true];
      examined++;
      bytes += stored.bytes;
      lastKey = key;
      if (filter === null || evaluate(filter, stored.item)) items.push(projectItem(stored.item, projection));
    }
    return [items, lastKey, false];
  }

  /** This worker's first `limit` examined items after (fromSlice, afterKey), in (slice, key)
   * order; the ones the filter leaves out come back as [slice, key, null, bytes], so that
   * the coordinator can cut the page at `limit` examined items across all workers. */
  private scan(table: number, fromSlice: number, afterKey: string | null, limit: number, projection: Projection, filter: Condition | null): ScanResult {
    const entries: ScanResult[0] = [];
    const slices = this.tables.get(table);
    if (slices === undefined) return [entries, true];
    let bytes = 0;
    for (const slice of this.ownedSorted) {
      if (slice < fromSlice) continue;
      const tree = slices.get(slice)?.tree;
      if (tree === undefined) continue;
      const after = slice === fromSlice ? afterKey : null;
      for (const [key, stored] of after === null ? tree.entries() : tree.entries(after)) {
        if (key === after) continue;
        if (entries.length >= limit || bytes >= PAGE_BYTES_MAX) return [entries, false];
        const match = filter === null || evaluate(filter, stored.item);
        entries.push([slice, key, match ? projectItem(stored.item, projection) : null, stored.bytes]);
        bytes += stored.bytes;
      }
    }
    return [entries, true];
  }

  /** Items and bytes of each non-empty slice of a table: [slice, items, bytes][]. */
  private stats(table: number): StatsResult {
    const out: StatsResult = [];
    const slices = this.tables.get(table);
    if (slices === undefined) return out;
    for (const slice of this.ownedSorted) {
      const p = slices.get(slice);
      if (p !== undefined && p.tree.size > 0) out.push([slice, p.tree.size, p.bytes]);
    }
    return out;
  }
}

/** Evaluates a write's condition against the stored item (`{}` when there is none);
 * answers the old item, or throws ConditionalCheckFailed and nothing is written. */
function checkWrite(check: WriteCheck, old: Item | null): Item | null {
  if (check.condition !== null && !evaluate(check.condition, old ?? {})) {
    throw new KeysliceError('ConditionalCheckFailed', 'the condition is false; nothing was changed', check.oldOnFailure ? { item: old } : undefined);
  }
  return old;
}

// The pure core of a worker thread: the slices it owns, each holding one
// sorted map per table keyed by encoded primary key. It takes slice ops and
// returns results; the clock is injected and there is no I/O here. A write's
// condition is evaluated here, against the stored item, in the same step as the
// write: one thread owns the slice, so nothing can come between the two.
import { createRequire } from 'node:module';
import { assert, KeysliceError } from '../shared/errors.js';
import { workerOf } from '../shared/hashing.js';
import type { Condition } from '../shared/expression-ast.js';
import { applyUpdate, evaluate, projectItem } from '../shared/expression-eval.js';
import {
  ITEM_BYTES_MAX,
  MOVE_CHANGES_BYTES_MAX,
  MOVE_EFFECTS_BYTES_MAX,
  PACKED_ITEM_CACHE_BYTES_MAX,
  PAGE_BYTES_MAX,
  packedItemsKeptBytesPerWorker,
  SNAPSHOT_CHUNK_ITEMS,
  SNAPSHOT_RECORD_BYTES_MAX,
} from '../shared/limits.js';
import {
  EFFECT_DELETE,
  EFFECT_DROP_SLICE,
  EFFECT_DROP_TABLE,
  EFFECT_SET,
  RESULT_ERROR,
  RESULT_OK,
  SliceOp,
  slicesIn,
  takeCheckedMove,
  type Effect,
  type MoveCursor,
  type MovedEffects,
  type MoveReadResult,
  KEPT_IN_LIST,
  PackedPage,
  packClientItem,
  packClientList,
  packedItemBounds,
  type RangeItems,
  type RangeResult,
  type RangeSpec,
  type Projection,
  type ResultOf,
  type ScanEntry,
  type ScanResult,
  type SliceOpMessage,
  type SliceOpResult,
  type StatsResult,
  type UpdateSpec,
  type WriteCheck,
} from '../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, type Item } from '../shared/values.js';
import type { SliceCapacity } from '../shared/limits.js';
import {
  decodeEffects,
  decodeItemText,
  decodeReplicated,
  encodeEffects,
  encodeReplicatedItems,
  isTextSet,
  ItemText,
  itemTextsOf,
  readPackedReplicated,
  SetEffectsText,
  type LoggedEffect,
} from './log-format.js';
import type { AppliedList } from './replication/applied-requests.js';
import { LoadTracker } from './slice-load.js';
import { ownAction, ownKey, ownStrings } from './owned-strings.js';

// sorted-btree is CommonJS (the class under .default), loaded with require, not import: by import Node 20 first
// runs its 74 kB through its CommonJS export lexer, about 50 ms of CPU on the start of every worker thread (each
// loads this module), against next to none by require (shared/ws.ts says the same of ws).
const BTree = (createRequire(import.meta.url)('sorted-btree') as typeof import('sorted-btree')).default;
/** A stored item and its size (itemBytes). `packed`: the item in the client's msgpack form, kept from the first
 * packed range page or Get that read it (packWhole), the first compaction of its slice (sliceEffectsText), the
 * record a follower applied it from (replay) or the move step it came in (moveApply), under the worker's budget
 * (mayKeep); null until then. An item is never changed in place (a write stores
 * a new Stored; an update edits a copy), so the bytes stay the item's for as long as the Stored lives; snapshot
 * views share Stored objects (a worker snapshot writes `packed` where set: snapshotView). The bytes are held as a
 * one-byte string (latin1, a char a byte): on V8's heap that costs its length and a small header, where a Uint8Array of its own costs an
 * ArrayBuffer and a backing store, about 200 bytes more, and took twice as long to make (measured). */
type Stored = { item: Item | null; bytes: number; packed: string | null };
/** A stored item: read through here, never `.item`, which is null while a follower's applied item or a moved one is
 * held as its packed bytes alone (SliceStore.setPacked) and is decoded here at its first read. A follower applies its leader's
 * records without building their items (most are never read there before a compaction writes their bytes as they
 * are): the decode was two fifths of its apply's CPU (bench/put-path.ts), and objects that outlived the young
 * generation. Decoded as the record's whole payload was (log-format.ts decodeItemText), so to the same item. */
const itemOf = (s: Stored): Item => {
  if (s.item !== null) return s.item;
  assert(s.packed !== null, 'an item held without its object is held as its bytes');
  return (s.item = decodeItemText(s.packed));
};
/** The item of `s`, or null where there is none. */
const itemOrNull = (s: Stored | undefined): Item | null => (s === undefined ? null : itemOf(s));
/** Packed pages between two sums of the kept bytes (SliceStore.mayKeep). */
const KEPT_RECOUNT_PAGES = 1024;
/** What kept bytes count against the worker's budget: the string and V8's header for it (about 16-24 bytes). */
const keptCost = (packed: string): number => packed.length + 24;
/** An item object entering the store (a leader's Put, a change replayed or applied as its object: setPacked; an
 * Update of an item that was held as its bytes), its strings made its own first (ownStrings). An Update otherwise
 * owns the request's values alone (SliceStore.update). */
const newStored = (item: Item, bytes: number): Stored => ({ item: ownStrings(item), bytes, packed: null });

export type SetEffect = Extract<Effect, [typeof EFFECT_SET, ...unknown[]]>;
/** Every item of a worker as of one moment: their count, and the items as snapshot records' payloads, one at a time. */
export interface SnapshotView {
  items: number;
  /** The next record's items (up to SNAPSHOT_CHUNK_ITEMS, or fewer once they reach SNAPSHOT_RECORD_BYTES_MAX) as
   * set-effects (encodeEffects' values, read back by decodeEffects), their count, and whether the view has no more;
   * a payload of no items is null. The payload may view an encoder's reused buffer: copy it (frameRecord does)
   * before the next call. */
  nextChunk(): { payload: Uint8Array | null; count: number; exhausted: boolean };
}

export { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_DROP_TABLE, EFFECT_SET, type Effect } from '../shared/protocol.js';

/** One table's items in one slice, sorted by encoded key, with their byte total
 * kept in step. Every change goes through set() or delete(), which report it. */
class Partition {
  readonly tree = new BTree<string, Stored>();
  bytes = 0;
  /** The cost (keptCost) of the packed bytes its items keep. */
  kept = 0;

  constructor(
    private readonly table: number,
    private readonly slice: number,
    private readonly record: (e: LoggedEffect) => void,
  ) {}

  /** `record`: false for a follower's applied item held as its packed bytes alone (SliceStore.replayPacked), whose
   * effect nothing takes (a replay's effects are dropped). The change names the item by its packed bytes where it has
   * them (`text`: its kept bytes, or bytes it came in and does not keep), so that neither recording nor logging it
   * builds or packs the item (a moved item: SliceStore.moveApply); otherwise by the item. `text` is given, never taken
   * from `stored.packed`: a leader's change must name its item (propose asserts no ItemText), so only the caller that
   * holds bytes (SliceStore.setPacked, a follower's or a move's) names them. */
  set(key: string, stored: Stored, record = true, text: string | null = null): void {
    // A new key takes one walk of the tree (a get and then a set took two; puts are mostly of new keys); a key
    // that is there takes two, as before: the insert that found it, and the edit that swaps its value for the old's.
    // Both may also move leaf entries: on a full leaf the insert may first shift one to a neighbouring leaf, and the
    // edit may merge half-full leaves (sorted-btree's set and editRange).
    let old: Stored | undefined;
    if (!this.tree.setIfNotPresent(ownKey(key), stored)) {
      this.tree.editRange(key, key, true, (_k, v) => {
        old = v;
        return { value: stored };
      });
      assert(old !== undefined, 'a key the tree refused to insert is in it');
      if (old.packed) this.kept -= keptCost(old.packed);
    }
    this.bytes += stored.bytes - (old?.bytes ?? 0);
    if (!record) return;
    if (text !== null) this.record([EFFECT_SET, this.table, this.slice, key, new ItemText(text), stored.bytes]);
    else this.record([EFFECT_SET, this.table, this.slice, key, itemOf(stored), stored.bytes]);
  }

  delete(key: string): boolean {
    const old = this.tree.get(key);
    if (old === undefined) return false;
    this.bytes -= old.bytes;
    if (old.packed) this.kept -= keptCost(old.packed);
    this.tree.delete(key);
    this.record([EFFECT_DELETE, this.table, this.slice, key]);
    return true;
  }
}

export class SliceStore {
  private epoch = 0;
  /** The kept packed bytes' budget (mayKeep): the last sum, what pages kept since, and pages since. */
  private keptCounted = 0;
  private keptSinceCount = 0;
  private pagesSinceCount = 0;
  private owned = new Set<number>();
  /** The slice that readReplica is reading now (-1: none): the one slice an op may read without owning it. */
  private replicaRead = -1;
  /** tableId -> slice -> partition. Created on first write. */
  private readonly tables = new Map<number, Map<number, Partition>>();
  /** Changes made since the last takeEffects(): what the write-ahead log must record. */
  private readonly effects: LoggedEffect[] = [];
  /** Slice moves. Source: the changes to a slice being copied away, since the last MoveRead. */
  private readonly outgoing = new Map<number, LoggedEffect[]>();
  /** Source: slices frozen for the switch (no longer owned, data kept until MoveDrop or MoveAbort). */
  private readonly frozen = new Set<number>();
  /** Target: slices being copied in (not owned yet; ops are refused). */
  private readonly incoming = new Set<number>();
  private readonly record = (e: LoggedEffect): void => {
    this.effects.push(e);
    if (this.outgoing.size === 0) return;
    if (e[0] === EFFECT_SET || e[0] === EFFECT_DELETE) this.outgoing.get(e[2])?.push(e);
    else if (e[0] === EFFECT_DROP_TABLE) for (const [slice, changes] of this.outgoing) changes.push([EFFECT_DROP_SLICE, slice, e[1]]);
  };

  private readonly load: LoadTracker;

  constructor(
    readonly workerIndex: number,
    readonly workerCount: number,
    private readonly now: () => number = Date.now,
    capacity: SliceCapacity = { readsPerSecond: 0, writesPerSecond: 0 },
    /** Kept packed bytes at most: the worker's share of the node's budget (PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX). */
    private readonly keptBytesMax = packedItemsKeptBytesPerWorker(workerCount),
  ) {
    assert(workerIndex >= 0 && workerIndex < workerCount, 'worker index within worker count');
    this.load = new LoadTracker(now, capacity);
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
        return answer(op, this.assign(op[1], op[2]));
      case SliceOp.Put: {
        const [, table, slice, key, item, bytes, check] = op;
        // Without a condition nothing after admit can refuse it: its bytes are counted there (one lookup of the
        // counters); with one, once it passed, as before.
        const countedAtAdmit = check === null ? bytes : 0;
        this.admit(table, slice, key, true, countedAtAdmit);
        const partition = this.partition(table, slice, true)!;
        const old = check === null ? null : checkWrite(check, itemOrNull(partition.tree.get(key)));
        item[MTIME_ATTRIBUTE] = this.now();
        partition.set(key, newStored(item, bytes));
        if (countedAtAdmit !== bytes) this.load.countBytes(table, slice, bytes - countedAtAdmit, true);
        return answer(op, check?.returnOld ? old : null);
      }
      // An eventually consistent read of a slice this worker owns is the read itself; a follower's goes
      // through readReplica (worker.ts decides whether its replica may answer).
      case SliceOp.Get:
      case SliceOp.ReplicaGet: {
        const [, table, slice, key, projection, packed] = op;
        this.admit(table, slice, key, false);
        const partition = this.partition(table, slice, false);
        const stored = partition?.tree.get(key);
        if (stored === undefined) return answer(op, null);
        this.load.countBytes(table, slice, stored.bytes, false);
        if (!packed) return answer(op, projectItem(itemOf(stored), projection));
        // For a transport that only forwards it: the item's bytes in the client's form, kept as a range page keeps them.
        return answer(op, projection === null ? this.packOne(stored, partition!) : packClientItem(projectItem(itemOf(stored), projection)));
      }
      case SliceOp.Delete: {
        const [, table, slice, key, check] = op;
        this.admit(table, slice, key, true);
        const partition = this.partition(table, slice, false);
        if (check === null) return answer(op, partition?.delete(key) ?? false);
        const old = checkWrite(check, itemOrNull(partition?.tree.get(key)));
        const deleted = partition?.delete(key) ?? false;
        return answer(op, check.returnOld ? old : deleted);
      }
      case SliceOp.Update:
        this.admit(op[1], op[2], op[3], true);
        return answer(op, this.update(op[1], op[2], op[3], op[4]));
      case SliceOp.Range:
      case SliceOp.ReplicaRange:
        this.admit(op[1], op[2], op[3].low, false);
        return answer(op, this.range(op[1], op[2], op[3]));
      case SliceOp.Scan:
        return answer(op, this.scan(op[1], op[2], op[3], op[4], op[5], op[6], slicesIn(op[7], op[2]), op[8]));
      case SliceOp.DropTable:
        this.record([EFFECT_DROP_TABLE, op[1]]);
        this.load.dropTable(op[1]);
        return answer(op, this.tables.delete(op[1]));
      case SliceOp.Stats:
        return answer(op, this.stats(op[1], slicesIn(op[2], 0)));
      case SliceOp.MoveStart:
        return answer(op, this.moveStart(op[1]));
      case SliceOp.MoveRead:
        return answer(op, this.moveRead(op[1], op[2], op[3]));
      case SliceOp.MoveFreeze:
        return answer(op, this.moveFreeze(op[1]));
      case SliceOp.MoveDrop:
        return answer(op, this.moveDrop(op[1]));
      case SliceOp.MoveBegin:
        return answer(op, this.moveBegin(op[1]));
      case SliceOp.MoveApply:
        return answer(op, this.moveApply(op[1], op[2], op[3]));
      case SliceOp.MoveAbort:
        return answer(op, this.moveAbort(op[1], op[2]));
      default:
        throw new KeysliceError('Internal', `unknown slice op ${String((op as unknown[])[0])}`);
    }
  }

  private assign(epoch: number, slices: number[]): null {
    assert(epoch >= this.epoch, `an epoch only grows (had ${this.epoch}, got ${epoch})`);
    for (const s of slices) assert(workerOf(s, this.workerCount) === this.workerIndex, `slice ${s} belongs to worker ${workerOf(s, this.workerCount)}, not ${this.workerIndex}`);
    this.epoch = epoch;
    this.owned = new Set(slices);
    // A (re)assignment ends every move this worker took part in; the coordinator has given them up.
    this.outgoing.clear();
    this.frozen.clear();
    this.incoming.clear();
    return null;
  }

  // ---- slice moves -----------------------------------------------------------
  //
  // Source: MoveStart begins recording the slice's changes; MoveRead returns the
  // changes since the last read and the next items after a cursor; MoveFreeze
  // stops owning the slice (later ops get WrongOwner) and returns the last
  // changes; MoveDrop deletes the slice once the coordinator has switched owners.
  // Target: MoveBegin drops whatever the worker held of the slice (an earlier,
  // failed move) and expects it; MoveApply applies changes and items, in order,
  // through the partitions, so they reach this worker's log before it answers;
  // with own=true it then owns the slice. Changes and items are whole values
  // (set, delete, drop), so applying the changes after a copied value, in order,
  // gives the source's state whatever the interleaving (coordinator/metadata/slice-mover.ts).

  private moveStart(slice: number): [items: number, bytes: number] {
    this.checkOwner(slice);
    if (this.outgoing.has(slice)) throw new KeysliceError('InvalidState', `slice ${slice} is already moving`);
    this.outgoing.set(slice, []);
    let items = 0;
    let bytes = 0;
    for (const slices of this.tables.values()) {
      const p = slices.get(slice);
      if (p !== undefined) {
        items += p.tree.size;
        bytes += p.bytes;
      }
    }
    return [items, bytes];
  }

  /** The changes recorded for an outgoing slice, checked against the byte bound. */
  private outgoingChanges(slice: number): LoggedEffect[] {
    const changes = this.outgoing.get(slice);
    if (changes === undefined || !this.owned.has(slice)) throw new KeysliceError('InvalidState', `slice ${slice} is not being moved from worker ${this.workerIndex}`);
    let bytes = 0;
    for (const e of changes) if (e[0] === EFFECT_SET) bytes += e[5];
    if (bytes > MOVE_CHANGES_BYTES_MAX) {
      this.outgoing.delete(slice);
      throw new KeysliceError('InvalidState', `slice ${slice} changed by ${bytes} bytes between two copy steps; writes outpace the move, which gives up`);
    }
    return changes;
  }

  /** The changes since the last read, then the next items after `cursor` (at most `limit`, or fewer once they reach
   * PAGE_BYTES_MAX), as one MovedEffects: each item's kept bytes where it has them (a follower's applied item, a moved
   * one, one a read kept), the others packed a table at a time (packedItems) and not kept (the slice is leaving). */
  private moveRead(slice: number, cursor: MoveCursor, limit: number): MoveReadResult {
    const changes = this.outgoingChanges(slice);
    this.outgoing.set(slice, []);
    const out = new SetEffectsText();
    out.addEffects(changes);
    if (limit === 0) return [changes.length, 0, this.moved(slice, out), null, true];
    const tableIds = [...this.tables.keys()].filter((t) => cursor === null || t >= cursor[0]).sort((a, b) => a - b);
    let items = 0;
    let bytes = 0;
    let last: MoveCursor = null;
    let next: MoveCursor = null;
    tables: for (const table of tableIds) {
      const tree = this.tables.get(table)!.get(slice)?.tree;
      if (tree === undefined) continue;
      const after = cursor !== null && cursor[0] === table ? cursor[1] : null;
      const keys: string[] = [];
      const list: Stored[] = [];
      for (const [key, stored] of after === null ? tree.entries() : tree.entries(after)) {
        if (key === after) continue;
        if (items >= limit || bytes >= PAGE_BYTES_MAX) {
          assert(last !== null, 'a read that stops has copied an item (its limit is at least 1)');
          next = last;
          break;
        }
        last = [table, key];
        keys.push(key);
        list.push(stored);
        items++;
        bytes += stored.bytes;
      }
      if (list.length > 0) {
        out.partition(table, slice);
        const parts = this.packedItems(list, null);
        for (let i = 0; i < list.length; i++) out.add(keys[i], parts[i], list[i].bytes);
      }
      if (next !== null) break tables;
    }
    return [changes.length, items, this.moved(slice, out), next, next === null];
  }

  /** A move's changes and items as MovedEffects, at most MOVE_EFFECTS_BYTES_MAX; over it the move gives up, as over
   * MOVE_CHANGES_BYTES_MAX (outgoingChanges). */
  private moved(slice: number, out: SetEffectsText): MovedEffects {
    const bytes = encodeReplicatedItems(out, null);
    if (bytes.byteLength > MOVE_EFFECTS_BYTES_MAX) {
      this.outgoing.delete(slice);
      throw new KeysliceError('InvalidState', `slice ${slice}'s move step is ${bytes.byteLength} bytes, over ${MOVE_EFFECTS_BYTES_MAX}; writes outpace the move, which gives up`);
    }
    return bytes;
  }

  private moveFreeze(slice: number): MovedEffects {
    const changes = this.outgoingChanges(slice);
    this.outgoing.delete(slice);
    this.owned.delete(slice);
    this.frozen.add(slice);
    const out = new SetEffectsText();
    out.addEffects(changes);
    return this.moved(slice, out);
  }

  private moveDrop(slice: number): null {
    // Owned again (the node restarted and was assigned the slice before the switch): keep it.
    if (this.owned.has(slice)) throw new KeysliceError('InvalidState', `worker ${this.workerIndex} owns slice ${slice}; not dropping it`);
    this.frozen.delete(slice);
    this.dropSlice(slice, null);
    return null;
  }

  private moveBegin(slice: number): null {
    if (this.owned.has(slice)) throw new KeysliceError('InvalidState', `worker ${this.workerIndex} already owns slice ${slice}`);
    this.dropSlice(slice, null);
    this.incoming.add(slice);
    return null;
  }

  /** Applies a move's changes and items (MovedEffects, checked whole: shared/protocol.ts checkMovedEffects), in order,
   * recorded for this worker's log. Set-effects of plain items (most steps) are read by their headers and each item
   * held as the bytes it came in (setPacked: kept under the worker's budget, decoded at its first read, logged as they
   * are), as a follower applies a record (applyRecord); anything else (a delete or a drop among the changes, an item
   * holding a map) is decoded whole, once, by its check (taken here: takeCheckedMove; decoded here only where the check
   * read the step by its headers and this worker is past its kept budget), and applied change by change as a record of
   * the log is (applyChange), each item then held as the bytes it came in all the same where it may keep them. */
  private moveApply(slice: number, effects: MovedEffects, own: boolean): null {
    if (!this.incoming.has(slice)) throw new KeysliceError('InvalidState', `slice ${slice} is not being moved to worker ${this.workerIndex}`);
    const mayKeep = this.mayKeep();
    const read = mayKeep ? readPackedReplicated(effects, slice, (table, key, size, text) => this.setPacked(table, slice, key, size, text, null, true)) : undefined;
    if (read === undefined) {
      // As its check decoded it (takeCheckedMove: a step not of plain set-effects is decoded there whole, once), else
      // decoded here. From a plain Uint8Array, as decodeItemText decodes an item held as bytes: a Buffer (an op's
      // bytes as a frame decoded them) would make the items' binary values Buffers where the path by headers gives
      // Uint8Arrays.
      const decoded = takeCheckedMove(effects) ?? decodeEffects(new Uint8Array(effects.buffer, effects.byteOffset, effects.byteLength));
      const texts = mayKeep ? itemTextsOf(effects, decoded) : null;
      for (let i = 0; i < decoded.length; i++) {
        const e = decoded[i];
        assert(
          e[0] === EFFECT_SET || e[0] === EFFECT_DELETE ? e[2] === slice : e[0] === EFFECT_DROP_SLICE && e[1] === slice,
          `a move carries set, delete and drop-slice changes of the moving slice only, got ${e[0]}`,
        );
        this.applyChange(e, texts?.[i] ?? null, true);
      }
    } else assert(read === null, 'a move carries no request ids');
    if (own) {
      this.incoming.delete(slice);
      this.owned.add(slice);
    }
    return null;
  }

  /** The source owns the slice again if it had frozen it; the target forgets what it got (and
   * ownership, if its last MoveApply was applied but its answer lost). Sent only before the switch. */
  private moveAbort(slice: number, role: 'source' | 'target'): null {
    if (role === 'source') {
      this.outgoing.delete(slice);
      if (this.frozen.delete(slice)) this.owned.add(slice);
      return null;
    }
    const wasOwned = this.owned.delete(slice);
    if (this.incoming.delete(slice) || wasOwned) this.dropSlice(slice, null);
    return null;
  }

  /** Deletes one slice's items (of one table, or of all), as one logged change. */
  private dropSlice(slice: number, table: number | null): void {
    let any = false;
    for (const [t, slices] of this.tables) {
      if (table !== null && t !== table) continue;
      if (slices.delete(slice)) any = true;
    }
    if (any) this.record([EFFECT_DROP_SLICE, slice, table]);
  }

  /** Checks ownership and counts the op's load (or refuses it at capacity) before it runs. */
  private admit(table: number, slice: number, key: string, write: boolean, bytes = 0): void {
    this.checkOwner(slice);
    this.load.count(table, slice, key, write, bytes);
  }

  private checkOwner(slice: number): void {
    if (!this.owned.has(slice) && this.replicaRead !== slice) {
      throw new KeysliceError('WrongOwner', `slice ${slice} is not owned by worker ${this.workerIndex} at epoch ${this.epoch}`);
    }
  }

  private partition(table: number, slice: number, create: boolean): Partition | undefined {
    this.checkOwner(slice);
    let slices = this.tables.get(table);
    if (slices === undefined) {
      if (!create) return undefined;
      slices = new Map();
      this.tables.set(table, slices);
    }
    let partition = slices.get(slice);
    if (partition === undefined && create) {
      partition = new Partition(table, slice, this.record);
      slices.set(slice, partition);
    }
    return partition;
  }

  /** The condition checked, the actions applied to a copy, the result checked, then
   * stored: all or nothing. A missing item is created from `spec.base` (upsert). */
  private update(table: number, slice: number, key: string, spec: UpdateSpec): Item | null {
    const partition = this.partition(table, slice, true)!;
    const stored = partition.tree.get(key);
    const old = itemOrNull(stored);
    if (spec.condition !== null) checkWrite({ condition: spec.condition, returnOld: false, oldOnFailure: spec.oldOnFailure }, old);
    // The strings the request brought made their own, not the whole new item's: the attributes it leaves as they
    // were are the old item's, owned already where it entered the store (newStored), unless it was decoded from
    // the bytes it was held as (itemOf: slices of that decode), whose new item is owned whole; an item with kept
    // bytes may be either (a Stored does not say), so it takes the whole copy too. Copying every long
    // string of the new item on each update cost a worker 18.1 against 13.7 us an update of an item of ten 40-char
    // strings (put-path.js --r 1 --op update, bench/README.md "Item values the store keeps").
    const whole = stored !== undefined && stored.packed !== null;
    if (!whole) {
      if (old === null) ownStrings(spec.base);
      for (const a of spec.actions) ownAction(a);
    }
    const next = applyUpdate(old ?? spec.base, spec.actions);
    next[MTIME_ATTRIBUTE] = this.now();
    const bytes = itemBytes(next);
    if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `the updated item would be ${bytes} bytes, over ${ITEM_BYTES_MAX}`);
    partition.set(key, whole ? newStored(next, bytes) : { item: next, bytes, packed: null });
    this.load.countBytes(table, slice, bytes, true);
    if (spec.returnValues === 'old') return old;
    if (spec.returnValues === 'new') return next;
    return null;
  }

  private range(table: number, slice: number, spec: RangeSpec): RangeResult {
    const items: Item[] = [];
    const keys: string[] | null = spec.withKeys ? [] : null;
    const { low, lowInclusive, high, highInclusive, limit, projection, filter } = spec;
    // Whole items for a transport that forwards them: packed once, then their kept bytes (packWhole).
    const whole: Stored[] | null = spec.packed && projection === null ? [] : null;
    const partition = this.partition(table, slice, false);
    const tree = partition?.tree;
    const keepIn = whole !== null && partition !== undefined && this.mayKeep() ? partition : null;
    const page = (): RangeItems => (whole !== null ? this.packWhole(whole, keepIn) : spec.packed ? packClientList(items) : items);
    if (tree === undefined) return [page(), null, false, keys, 0];
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
      if (examined >= limit || bytes >= PAGE_BYTES_MAX) {
        this.load.countBytes(table, slice, bytes, false);
        return [page(), lastKey, true, keys, examined];
      }
      examined++;
      bytes += stored.bytes;
      lastKey = key;
      if (filter === null || evaluate(filter, itemOf(stored))) {
        if (whole !== null) whole.push(stored);
        else items.push(projectItem(itemOf(stored), projection));
        keys?.push(key);
      }
    }
    this.load.countBytes(table, slice, bytes, false);
    return [page(), lastKey, false, keys, examined];
  }

  /** The first `limit` examined items of `slices` (ascending, from fromSlice on: the ones the router's map gives this
   * worker) after (fromSlice, afterKey), in (slice, key) order; refused (WrongOwner, nothing read) unless this worker
   * owns every one of them, so that a scan never leaves out a slice it was asked for. The ones the filter leaves out come back as
   * [slice, key, null, bytes], so that the coordinator can cut the page at `limit`
   * examined items across all workers. `packed`: the kept items come as one list in the
   * client's form (whole items: packWhole; projected ones: one pack call for the page), each
   * kept entry marked KEPT_IN_LIST. */
  private scan(table: number, fromSlice: number, afterKey: string | null, limit: number, projection: Projection, filter: Condition | null, asked: number[], packed: boolean): ScanResult {
    for (const slice of asked) this.checkOwner(slice);
    const entries: ScanEntry[] = [];
    const slices = this.tables.get(table);
    if (slices === undefined) return [entries, true, packed ? packClientList([]) : null];
    // Whole items packed: the bytes that range pages kept, the others packed (packWhole). A scan keeps none: a
    // full-table scan (an export) reads every item once, and keeping them would double the table's memory.
    const whole: Stored[] | null = packed && projection === null ? [] : null;
    let bytes = 0;
    let exhausted = true;
    scan: for (const slice of asked) {
      const tree = slices.get(slice)?.tree;
      if (tree === undefined) continue;
      const after = slice === fromSlice ? afterKey : null;
      for (const [key, stored] of after === null ? tree.entries() : tree.entries(after)) {
        if (key === after) continue;
        if (entries.length >= limit || bytes >= PAGE_BYTES_MAX) {
          exhausted = false;
          break scan;
        }
        const match = filter === null || evaluate(filter, itemOf(stored));
        if (match && whole !== null) whole.push(stored);
        entries.push([slice, key, !match ? null : whole !== null ? KEPT_IN_LIST : projectItem(itemOf(stored), projection), stored.bytes]);
        bytes += stored.bytes;
      }
    }
    // As bytes: the router cuts a scan's list with its entries (cutScanItems), and a scan's page is not the hot path.
    const page = whole !== null ? this.packWhole(whole, null) : null;
    return [entries, exhausted, page instanceof PackedPage ? page.bytes() : page !== null ? page : packed ? packScanItems(entries) : null];
  }

  /** Items, bytes and load of each slice of `asked` (ascending: the ones the asker's map gives this worker) that holds
   * items or saw load, refused (WrongOwner) unless this worker owns every one of them, so that a load report never
   * leaves out a slice or counts one twice; and the table's hot keys, counters and what the worker holds of it. */
  private stats(table: number, asked: number[]): StatsResult {
    for (const slice of asked) this.checkOwner(slice);
    const slices = this.tables.get(table);
    const withLoad = new Set(this.load.slicesWithLoad(table));
    let heldItems = 0;
    let heldBytes = 0;
    for (const p of slices?.values() ?? []) {
      heldItems += p.tree.size;
      heldBytes += p.bytes;
    }
    const out: StatsResult = [[], this.load.hotKeys(table), [...this.load.tableCounters(table)], [heldItems, heldBytes]];
    for (const slice of asked) {
      const p = slices?.get(slice);
      const items = p?.tree.size ?? 0;
      if (items === 0 && !withLoad.has(slice)) continue;
      const [reads, writes] = this.load.rates(table, slice);
      out[0].push([slice, items, p?.bytes ?? 0, reads, writes, [...this.load.counters(table, slice)]]);
    }
    return out;
  }

  /** A write to (table, slice) was answered from the request ids its replica remembers (SliceReplicas.execute). */
  countDuplicateWrite(table: number, slice: number): void {
    this.load.countDuplicateWrite(table, slice);
  }

  /** How many changes were made since the last takeEffects() (did an op change anything). */
  get effectCount(): number {
    return this.effects.length;
  }

  /** The changes since the last call, in order; the store forgets them. */
  takeEffects(): LoggedEffect[] {
    return this.effects.length === 0 ? [] : this.effects.splice(0);
  }

  /** Applies a logged change during recovery (slice ownership is not checked:
   * the log holds what this worker owned when it wrote it). `packed`: a set's item as the bytes its record carried
   * it in (a follower's record decoded whole: applyRecord), held as those bytes alone under the kept budget. */
  replay(effect: LoggedEffect, packed: string | null = null): void {
    this.applyChange(effect, packed, false);
  }

  /** The one apply of a change that comes from elsewhere: a record of this worker's log or snapshot (replay), a
   * follower's record (applyRecord), a move's step (moveApply); ownership is not checked. A set whose item comes as
   * its bytes (an ItemText, or `text` beside its object) goes through setPacked. Logged where `log` (a move's target);
   * otherwise what it records is dropped again (durable already), while what earlier ops of the task recorded stays (a
   * replica restored or started inside a task replays into the same store: worker.ts). */
  private applyChange(effect: LoggedEffect, text: string | null, log: boolean): void {
    if (isTextSet(effect)) return this.setPacked(effect[1], effect[2], effect[3], effect[5], effect[4].text, null, log);
    if (effect[0] === EFFECT_SET) return this.setPacked(effect[1], effect[2], effect[3], effect[5], text, effect[4], log);
    const pending = this.effects.length;
    switch (effect[0]) {
      case EFFECT_DELETE:
        this.partitionForReplay(effect[1], effect[2]).delete(effect[3]);
        break;
      case EFFECT_DROP_TABLE:
        this.tables.delete(effect[1]);
        break;
      case EFFECT_DROP_SLICE:
        this.dropSlice(effect[1], effect[2]);
        break;
    }
    if (!log) this.effects.length = pending;
  }

  /** Applies a committed record of a replica of `slice` (its payload: encodeReplicated's) and answers the request ids
   * applied with it (null: none), for the replica to remember (slice-replicas.ts). The items keep the bytes their
   * leader packed them in (under the budget), which the slice's next compaction writes as they are (SetEffectsText).
   * Most records (set-effects of plain items) are applied as those bytes alone, each item decoded at its first read
   * (replayPacked); any other is decoded whole and replayed. */
  applyRecord(slice: number, payload: Uint8Array): AppliedList | null {
    const mayKeep = this.mayKeep();
    const requests = mayKeep ? readPackedReplicated(payload, slice, (table, key, size, text) => this.replayPacked(table, slice, key, size, text)) : undefined;
    if (requests !== undefined) return requests;
    const { effects, requests: decoded } = decodeReplicated(payload);
    const packed = mayKeep ? itemTextsOf(payload, effects) : null;
    for (let i = 0; i < effects.length; i++) this.replay(effects[i], packed?.[i] ?? null);
    return decoded;
  }

  /** replay() of a set-effect whose item comes as its packed bytes (`text`, latin1: a follower's apply of a record,
   * applyRecord): setPacked, the change not logged (durable already). */
  replayPacked(table: number, slice: number, key: string, bytes: number, text: string): void {
    this.setPacked(table, slice, key, bytes, text, null, false);
  }

  /** Sets an item that comes as its packed bytes (`text`, latin1), its object (`item`), or both (a change decoded
   * whole, applyChange). With its bytes, under the kept budget and the size bound (as a range page keeps an item's
   * bytes, the budget looked at per item) it is held as those bytes alone and decoded at its first read (itemOf), the
   * object dropped where there is one (holding both took about 1.6x the heap of either: bench/README.md, "A move's copy
   * carries the items' bytes"); otherwise as its object (decoded now where there is none) and not kept. Its change
   * names those bytes where it has them (Partition.set), never a decode of them: logged where `log` (a moved item:
   * moveApply), recorded for a slice moving away (its changes since the copy began: record), else dropped. */
  private setPacked(table: number, slice: number, key: string, bytes: number, text: string | null, item: Item | null, log: boolean): void {
    assert(text !== null || item !== null, 'a set\'s item comes as its bytes or its object');
    const p = this.partitionForReplay(table, slice);
    const keep = text !== null && bytes <= PACKED_ITEM_CACHE_BYTES_MAX && this.underKeptBudget();
    const stored: Stored = keep ? { item: null, bytes, packed: null } : newStored(item ?? decodeItemText(text!), bytes);
    if (keep) this.keep(stored, text!, p);
    const pending = this.effects.length;
    p.set(key, stored, log || this.outgoing.has(slice), text);
    if (!log) this.effects.length = pending;
  }

  /** An eventually consistent read of a slice that this worker holds a follower's replica of and does not
   * own: the caller (worker.ts) checked that the replica may answer (SliceReplicas.readable). It reads what
   * the replica applied, so only committed records; its load counts on this worker like any read. */
  readReplica(op: Extract<SliceOpMessage, [typeof SliceOp.ReplicaGet | typeof SliceOp.ReplicaRange, ...unknown[]]>): SliceOpResult {
    assert(this.replicaRead === -1, 'one replica read at a time');
    this.replicaRead = op[2];
    try {
      return this.execute(op);
    } finally {
      this.replicaRead = -1;
    }
  }

  /** Forgets every item of a slice this worker does not own (a replica its node no longer holds: worker.ts),
   * as one change for the worker's log, recorded even when nothing is in memory, since a snapshot of the
   * worker may still hold the slice's items from when it had them. */
  forgetSlice(slice: number): void {
    assert(!this.owned.has(slice) && !this.frozen.has(slice) && !this.incoming.has(slice), `worker ${this.workerIndex} forgets only a slice it does not own or move (slice ${slice})`);
    for (const slices of this.tables.values()) slices.delete(slice);
    this.record([EFFECT_DROP_SLICE, slice, null]);
  }

  /** Whether this worker owns `slice` at its epoch (ops on it run here). */
  owns(slice: number): boolean {
    return this.owned.has(slice);
  }

  /** Whether this worker holds any item of `slice` (without reading one: an item held as its bytes stays so). */
  holdsItems(slice: number): boolean {
    for (const slices of this.tables.values()) if ((slices.get(slice)?.tree.size ?? 0) > 0) return true;
    return false;
  }

  /** Every stored item (of `slice` alone, where given) as a set-effect, decoded, table by table and slice by slice:
   * what tests compare a store with (snapshots write from snapshotView, replicas from sliceEffectsText). */
  *entries(slice: number | null = null): Generator<SetEffect> {
    for (const [table, slices] of this.tables) {
      for (const [s, p] of slices) {
        if (slice !== null && s !== slice) continue;
        for (const [key, stored] of p.tree.entries()) yield [EFFECT_SET, table, s, key, itemOf(stored), stored.bytes];
      }
    }
  }

  /** A point-in-time view of every stored item, for a snapshot written while writes go on. Each
   * partition's tree is cloned (copy-on-write: O(1) now, and a later write copies only the nodes it
   * changes) and frozen, so later writes, drops and moves leave the view as it was. Stored values
   * are shared, not copied: nothing changes a stored {item, bytes} in place (a write stores a new
   * one; an update edits a copy). Taken only between tasks, when every change is in the log, so
   * that the view is exactly the log up to its last record. */
  snapshotView(): SnapshotView {
    assert(this.effects.length === 0, 'a snapshot view is taken only when every change is in the log');
    const parts: { table: number; slice: number; tree: InstanceType<typeof BTree<string, Stored>> }[] = [];
    let items = 0;
    for (const [table, slices] of this.tables) {
      for (const [slice, p] of slices) {
        const tree = p.tree.clone();
        tree.freeze();
        items += tree.size;
        parts.push({ table, slice, tree });
      }
    }
    let part = 0;
    let walk = parts[0]?.tree.entries();
    // Written around each item's packed bytes (encodeReplicatedItems, an effects list without requests): an item a
    // follower applied is held as those bytes alone (replayPacked), and decoding it here to pack it again undid that
    // saving at every snapshot and kept both forms after (bench/README.md, "A worker snapshot writes the items' kept
    // bytes"). Items without kept bytes are packed a record at a time and not kept (the view's items may be gone
    // from their partitions, which count what is kept).
    const nextChunk = () => {
      const at: number[] = [];
      const keys: string[] = [];
      const list: Stored[] = [];
      let bytes = 0;
      let exhausted = false;
      while (list.length < SNAPSHOT_CHUNK_ITEMS && bytes < SNAPSHOT_RECORD_BYTES_MAX) {
        const next = walk?.next();
        if (next === undefined) {
          exhausted = true;
          break;
        }
        if (next.done === true) {
          walk = parts[++part]?.tree.entries();
          continue;
        }
        at.push(part);
        keys.push(next.value[0]);
        list.push(next.value[1]);
        bytes += next.value[1].bytes;
      }
      if (list.length === 0) return { payload: null, count: 0, exhausted };
      // None with kept bytes (a leader's items before a read or compaction kept them): packed whole, as before, the
      // same bytes (test/packed-snapshot.test.ts) for less CPU than packing the items and writing around them.
      if (list.every((s) => s.packed === null)) {
        const effects = list.map((s, i): SetEffect => [EFFECT_SET, parts[at[i]].table, parts[at[i]].slice, keys[i], itemOf(s), s.bytes]);
        return { payload: encodeEffects(effects), count: list.length, exhausted };
      }
      const texts = this.packedItems(list, null);
      const out = new SetEffectsText();
      for (let i = 0; i < list.length; i++) {
        if (i === 0 || at[i] !== at[i - 1]) out.partition(parts[at[i]].table, parts[at[i]].slice);
        out.add(keys[i], texts[i], list[i].bytes);
      }
      return { payload: encodeReplicatedItems(out, null), count: list.length, exhausted };
    };
    return { items, nextChunk };
  }

  /** Whole stored items as one list in the client's msgpack form (what packClientList of the items gives): each
   * item's kept bytes where it has them, the others packed (packedItems). A page none of whose items has kept bytes
   * (their first read) is the one list packed, as it is, its items' text kept from it (keepPieces): no copy of the
   * page into another buffer, nor a view of each item. Otherwise the items not yet joined (a PackedPage): the worker's
   * answer writes them once, into its own buffer (encodeOwnedResults). */
  private packWhole(list: readonly Stored[], keepIn: Partition | null): Uint8Array | PackedPage {
    if (list.every((s) => s.packed === null)) {
      const packed = packClientList(list.map((s) => itemOf(s)));
      if (keepIn !== null) this.keepPieces(list, packed, packedItemBounds(packed), keepIn);
      return packed;
    }
    return new PackedPage(this.packedItems(list, keepIn));
  }

  /** Each item of `list` in the client's msgpack form: its kept bytes where it has them; the others packed together
   * (one pack call: packing item by item costs more), cut into items by their headers, and kept in `keepIn` when
   * given (keepPieces). */
  private packedItems(list: readonly Stored[], keepIn: Partition | null): (string | Buffer)[] {
    // Read before keepPieces keeps the missing ones' text: null marks an item packed here.
    const parts: (string | Buffer | null)[] = list.map((s) => s.packed);
    const missing = list.filter((s) => s.packed === null);
    if (missing.length === 0) return parts as string[];
    const packed = packClientList(missing.map((s) => itemOf(s)));
    assert(Buffer.isBuffer(packed), 'msgpackr packs into a Buffer');
    const bounds = packedItemBounds(packed);
    const texts = keepIn !== null ? this.keepPieces(missing, packed, bounds, keepIn) : null;
    let k = 0;
    for (let i = 0; i < parts.length; i++) {
      if (parts[i] !== null) continue;
      // Not kept (over the budget or the size bound, or nowhere to keep it): a view of the packed list.
      parts[i] = texts?.[k] ?? packed.subarray(bounds[k], bounds[k + 1]);
      k++;
    }
    assert(k === missing.length, 'every packed item has its place in the page');
    return parts as (string | Buffer)[];
  }

  /** Keeps the text of each item of `list`, packed as one list `packed` (item k between bounds[k] and bounds[k + 1]),
   * in `keepIn` (its partition, which counts them: a dropped partition takes its count along) where the item is at
   * most PACKED_ITEM_CACHE_BYTES_MAX and the worker under its budget; gives the kept texts, undefined where not
   * kept. The budget is looked at per item, not only once per call (mayKeep): a compaction's call takes a whole
   * slice, of any size, which kept every item's bytes past the budget. Each text is read from its bounds (latin1):
   * a view of each item first (a Buffer apiece) cost about as much again. */
  private keepPieces(list: readonly Stored[], packed: Uint8Array, bounds: readonly number[], keepIn: Partition): (string | undefined)[] {
    assert(Buffer.isBuffer(packed) && bounds.length === list.length + 1, 'a packed Buffer with a bound on each side of each item');
    const texts: (string | undefined)[] = new Array(list.length);
    for (let k = 0; k < list.length; k++) {
      const s = list[k];
      if (s.bytes <= PACKED_ITEM_CACHE_BYTES_MAX && this.underKeptBudget()) texts[k] = this.keep(s, packed.toString('latin1', bounds[k], bounds[k + 1]), keepIn);
    }
    return texts;
  }

  /** The items of one slice as set-effects, written around each item's packed bytes (SetEffectsText: a replica's
   * snapshot state, encodeReplicatedItems). An item without kept bytes is packed (packedItems, a partition at a time)
   * and keeps them under the worker's budget as a range page's items do, so that the next compaction of the slice
   * writes it as it is: an item is packed once, at the first compaction after its write, where each compaction packed
   * every item of the slice again (bench/README.md, "A compaction writes the items' kept bytes"). */
  sliceEffectsText(slice: number): SetEffectsText {
    const out = new SetEffectsText();
    const mayKeep = this.mayKeep();
    for (const [table, slices] of this.tables) {
      const p = slices.get(slice);
      if (p === undefined || p.tree.size === 0) continue;
      out.partition(table, slice);
      const keys = p.tree.keysArray();
      const list = p.tree.valuesArray();
      const parts = this.packedItems(list, mayKeep ? p : null);
      for (let i = 0; i < list.length; i++) out.add(keys[i], parts[i], list[i].bytes);
    }
    return out;
  }

  /** One whole stored item in the client's msgpack form (what packClientItem gives): its kept bytes if it has them;
   * otherwise packed, and kept as packWhole keeps a page's items (under the same budget and size bound). */
  private packOne(s: Stored, partition: Partition): Uint8Array {
    if (s.packed !== null) return Buffer.from(s.packed, 'latin1');
    const bytes = packClientItem(itemOf(s));
    if (s.bytes <= PACKED_ITEM_CACHE_BYTES_MAX && this.mayKeep()) {
      assert(Buffer.isBuffer(bytes), 'msgpackr packs into a Buffer');
      this.keep(s, bytes.toString('latin1'), partition);
    }
    return bytes;
  }

  /** Keeps an item's packed bytes (as latin1 text) beside it, counted against the partition's (and the worker's)
   * budget; gives the kept text. */
  private keep(s: Stored, text: string, partition: Partition): string {
    assert(s.packed === null, 'an item\'s bytes are kept once (its Stored is never changed after)');
    s.packed = text;
    const cost = keptCost(s.packed);
    partition.kept += cost;
    this.keptSinceCount += cost;
    return s.packed;
  }

  /** What the items of this worker keep of packed bytes (keptCost), summed over its partitions. */
  get keptBytes(): number {
    let n = 0;
    for (const slices of this.tables.values()) for (const p of slices.values()) n += p.kept;
    return n;
  }

  /** Whether a packed page (or a compaction's slice, or a follower's applied record: applyRecord) may keep more
   * bytes: under the worker's share of PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX (`keptBytesMax`).
   * The sum (keptBytes) walks every partition, so it is taken again only every KEPT_RECOUNT_PAGES pages or once
   * pages kept a tenth of the budget since; in between, what items replaced, deleted or dropped since freed is not
   * seen yet, so the count only errs high (keeping less, never more than the budget and a tenth). */
  mayKeep(): boolean {
    if (++this.pagesSinceCount >= KEPT_RECOUNT_PAGES || this.keptSinceCount >= this.keptBytesMax / 10) {
      this.keptCounted = this.keptBytes;
      assert(this.keptCounted >= 0, 'kept bytes are counted up when kept and down when their item is replaced or deleted');
      this.keptSinceCount = 0;
      this.pagesSinceCount = 0;
    }
    return this.underKeptBudget();
  }

  /** Whether the kept bytes, as last summed and added to since (mayKeep), are under the worker's budget. */
  private underKeptBudget(): boolean {
    return this.keptCounted + this.keptSinceCount < this.keptBytesMax;
  }

  get itemCount(): number {
    let n = 0;
    for (const slices of this.tables.values()) for (const p of slices.values()) n += p.tree.size;
    return n;
  }

  private partitionForReplay(table: number, slice: number): Partition {
    let slices = this.tables.get(table);
    if (slices === undefined) this.tables.set(table, (slices = new Map()));
    let p = slices.get(slice);
    if (p === undefined) slices.set(slice, (p = new Partition(table, slice, this.record)));
    return p;
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

/** An op's result, checked at compile time against what its kind answers (SliceOpResults in
 * shared/protocol.ts), the type the router's channel gives its callers. */
function answer<O extends SliceOpMessage>(_op: O, result: ResultOf<O>): ResultOf<O> {
  return result;
}

/** The kept items of a scan's entries as one list in the client's form; each kept entry's
 * item becomes KEPT_IN_LIST (the router cuts the list into items: splitPackedList). */
function packScanItems(entries: ScanEntry[]): Uint8Array {
  const items: Item[] = [];
  for (const e of entries) {
    if (e[2] === null) continue;
    items.push(e[2] as Item);
    e[2] = KEPT_IN_LIST;
  }
  return packClientList(items);
}

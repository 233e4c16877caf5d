// Each item operation's payload, checked whole and parsed once into a typed
// request: the slice ops it sends, ready to go (the table looked up, keys encoded
// and placed on their slices, expressions bound, a sorting-key condition and a
// marker turned into key bounds), and what shapes the answer. Nothing here sends:
// operations.ts routes the request (router.ts) and builds the answer. All checks
// run before anything is sent, so a bad request changes nothing; they run in the
// order they always did, so a request with several faults gets the same error.
import { KeysliceError } from '../../shared/errors.js';
import type { Condition } from '../../shared/expression-ast.js';
import { BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX, ITEM_BYTES_MAX, PAGE_ITEMS_DEFAULT, PAGE_ITEMS_MAX, SCAN_SEGMENTS_MAX } from '../../shared/limits.js';
import { SliceOp, type Projection, type RangeSpec, type SliceOpMessage, type UpdateSpec, type WriteCheck } from '../../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, validateItem, type Item } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { bucketChunk, type BucketRange } from './bucket-gather.js';
import { bucketMarkerKey, continueAfter, continueAfterKey, isEmptyRange, rangeSpec, scanMarkerPosition, sortRangeOf } from './key-range.js';
import { keyOfItem, placement, resolveKey, shardingValues } from './primary-key.js';
import { RequestExpressions } from './request-expressions.js';
import type { ScanRequest } from './router.js';
import type { TableSource } from './routing.js';

type Payload = Record<string, unknown>;
type OpOf<Kind extends SliceOpMessage[0]> = Extract<SliceOpMessage, [Kind, ...unknown[]]>;
export type PutOp = OpOf<typeof SliceOp.Put>;
export type GetOp = OpOf<typeof SliceOp.Get>;
export type DeleteOp = OpOf<typeof SliceOp.Delete>;
export type UpdateOp = OpOf<typeof SliceOp.Update>;
export type RangeOp = OpOf<typeof SliceOp.Range>;

/** Where the item operations look tables up and how many slices the map has. */
export interface RequestContext {
  readonly tables: TableSource;
  readonly sliceCount: number;
}

export interface PutItemRequest {
  /** The item's object name (a failed condition names it). */
  name: string;
  op: PutOp;
  returnOld: boolean;
}

export interface GetItemRequest {
  op: GetOp;
  /** false: any replica of the slice may answer (Router.read); the native default is true. */
  consistent: boolean;
}

export interface UpdateItemRequest {
  name: string;
  op: UpdateOp;
  returnValues: UpdateSpec['returnValues'];
}

export interface DeleteItemRequest {
  name: string;
  op: DeleteOp;
  returnOld: boolean;
}

/** A GetItems: one range on the slice of one stored sharding key; the ranges of every
 * bucket of an even-distribution sharding key, merged by sorting key; a page of a
 * full-table scan (or of one segment); or nothing to read (bounds that contradict each other). */
export type GetItemsRequest =
  | { kind: 'range'; op: RangeOp; consistent: boolean }
  | { kind: 'buckets'; tableId: number; buckets: BucketRange[]; limit: number; reverse: boolean; consistent: boolean }
  | { kind: 'scan'; scan: ScanRequest }
  | { kind: 'nothing' };

export interface BatchWriteRequest {
  writes: { list: 'puts' | 'deletes'; index: number; name: string; op: PutOp | DeleteOp }[];
}

export interface BatchGetRequest {
  gets: { name: string; op: GetOp }[];
  consistent: boolean;
}

export function parsePutItem(c: RequestContext, p: Payload): PutItemRequest {
  const table = c.tables.get(p.table);
  const ex = new RequestExpressions(p);
  const condition = ex.condition('condition');
  ex.done();
  const returnOld = returnValuesOf(p.returnValues, ['none', 'old']) === 'old';
  const check = writeCheck(condition, returnOld, p);
  const { name, op } = putOp(c, table, p.item, 'item', check);
  return { name, op, returnOld };
}

/** `packed`: the item is only forwarded (the WebSocket API), so its worker packs it in the client's form (PackedItem). */
export function parseGetItem(c: RequestContext, p: Payload, packed: boolean): GetItemRequest {
  const table = c.tables.get(p.table);
  const ex = new RequestExpressions(p);
  const projection = ex.projection();
  ex.done();
  const pk = resolveKey(table, p.key, c.sliceCount);
  return { op: [SliceOp.Get, table.id, pk.slice, pk.key, projection, packed], consistent: consistentRead(p) };
}

export function parseUpdateItem(c: RequestContext, p: Payload): UpdateItemRequest {
  const table = c.tables.get(p.table);
  const pk = resolveKey(table, p.key, c.sliceCount);
  const ex = new RequestExpressions(p);
  const actions = ex.update(table);
  const condition = ex.condition('condition');
  ex.done();
  const returnValues = returnValuesOf(p.returnValues, ['none', 'old', 'new']);
  const base: Item = { [NAME_ATTRIBUTE]: pk.name };
  table.sharding.forEach((col, i) => (base[col.name] = pk.sharding[i]));
  table.sorting.forEach((col, i) => (base[col.name] = pk.sorting[i]));
  const spec: UpdateSpec = { base, actions, condition, oldOnFailure: writeCheck(condition, false, p)?.oldOnFailure ?? false, returnValues };
  // Each write's request id is null until Router.send gives it one.
  return { name: pk.name, op: [SliceOp.Update, table.id, pk.slice, pk.key, spec, null], returnValues };
}

export function parseDeleteItem(c: RequestContext, p: Payload): DeleteItemRequest {
  const table = c.tables.get(p.table);
  const pk = resolveKey(table, p.key, c.sliceCount);
  const ex = new RequestExpressions(p);
  const condition = ex.condition('condition');
  ex.done();
  const returnOld = returnValuesOf(p.returnValues, ['none', 'old']) === 'old';
  return { name: pk.name, op: [SliceOp.Delete, table.id, pk.slice, pk.key, writeCheck(condition, returnOld, p), null], returnOld };
}

/** `packed`: the items are only forwarded (the WebSocket API), so the workers pack them in the client's form (RangeSpec.packed). */
export function parseGetItems(c: RequestContext, p: Payload, packed: boolean): GetItemsRequest {
  const table = c.tables.get(p.table);
  const ex = new RequestExpressions(p);
  const projection = ex.projection();
  const filter = ex.condition('filter');
  const keyCondition = ex.keyCondition(table);
  ex.done();
  const shardingKey = keyCondition !== null ? keyCondition.shardingKey : p.shardingKey;
  const limit = optionalInt(p.limit, 'limit', 1, PAGE_ITEMS_MAX) ?? PAGE_ITEMS_DEFAULT;
  const reverse = optionalBool(p.reverse, 'reverse') ?? false;
  if (p.marker !== undefined && typeof p.marker !== 'string') throw new KeysliceError('InvalidMarker', '"marker" must be the string a previous page returned');
  const marker = p.marker as string | undefined;
  // A full-table scan reads from the leaders whatever it says (Router.scan).
  const consistent = consistentRead(p);
  if (shardingKey === undefined) {
    if (p.sortingKey !== undefined) throw new KeysliceError('ValidationError', 'a sorting-key condition needs a "shardingKey"');
    if (reverse) throw new KeysliceError('ValidationError', 'a full-table scan has no order to reverse; "reverse" needs a "shardingKey"');
    return scanRequest(table, c.sliceCount, p, limit, marker, projection, filter, packed);
  }
  if (p.segment !== undefined || p.totalSegments !== undefined) {
    throw new KeysliceError('ValidationError', '"segment" and "totalSegments" split a full-table scan; they do not apply with a "shardingKey"');
  }
  const sharding = shardingValues(table, shardingKey);
  const range = keyCondition !== null ? keyCondition.sortRange : p.sortingKey === undefined ? null : sortRangeOf(table, p.sortingKey);
  const even = table.evenDistribution;
  const bucket = optionalInt(p.bucket, 'bucket', 0, (even?.buckets ?? 1) - 1);
  if (bucket !== undefined && even === null) throw new KeysliceError('ValidationError', `table "${table.name}" has no even distribution; "bucket" does not apply`);
  if (even !== null && bucket === undefined) {
    // Every bucket reads the same sorting-key range inside its own stored sharding key: the
    // bounds are encoded once, without a prefix, and each bucket's part is put in front.
    // (Comparing two bounds, or a bound and a key, gives the same answer with or without a
    // common prefix, so the marker and the emptiness are checked once too.)
    const after = marker === undefined ? null : bucketMarkerKey(marker);
    const within = rangeSpec(table, '', range, reverse, bucketChunk(limit, even.buckets), projection, filter);
    within.withKeys = true;
    within.packed = packed;
    if (after !== null) continueAfterKey(within, after);
    if (isEmptyRange(within)) return { kind: 'nothing' }; // bounds that contradict each other: no bucket holds anything
    const buckets = Array.from({ length: even.buckets }, (_, b): BucketRange => {
      const { part, slice } = placement(table, sharding, b, c.sliceCount);
      return { slice, prefixBytes: part.length, spec: inside(part, within) };
    });
    return { kind: 'buckets', tableId: table.id, buckets, limit, reverse, consistent };
  }
  const where = placement(table, sharding, bucket ?? null, c.sliceCount);
  const spec = rangeSpec(table, where.part, range, reverse, limit, projection, filter);
  spec.packed = packed;
  if (marker !== undefined) continueAfter(spec, marker);
  if (isEmptyRange(spec)) return { kind: 'nothing' }; // bounds that contradict each other match nothing
  return { kind: 'range', op: [SliceOp.Range, table.id, where.slice, spec], consistent };
}

export function parseBatchWrite(c: RequestContext, p: Payload): BatchWriteRequest {
  const table = c.tables.get(p.table);
  const puts = optionalList(p.puts, 'puts');
  const deletes = optionalList(p.deletes, 'deletes');
  const count = puts.length + deletes.length;
  if (count === 0) throw new KeysliceError('ValidationError', 'BatchWrite needs at least one of "puts" or "deletes"');
  if (count > BATCH_WRITE_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchWrite takes at most ${BATCH_WRITE_ITEMS_MAX} writes; got ${count}`);
  // The whole request is checked before anything is sent; only run-time failures are per item.
  const writes: BatchWriteRequest['writes'] = puts.map((item, index) => {
    const { name, op } = putOp(c, table, item, `puts[${index}]`, null);
    return { list: 'puts', index, name, op };
  });
  deletes.forEach((ref, index) => {
    const pk = resolveKey(table, ref, c.sliceCount);
    writes.push({ list: 'deletes', index, name: pk.name, op: [SliceOp.Delete, table.id, pk.slice, pk.key, null, null] });
  });
  const seen = new Set<string>();
  for (const { name, op } of writes) {
    if (seen.has(op[3])) throw new KeysliceError('ValidationError', `BatchWrite names item "${name}" twice`);
    seen.add(op[3]);
  }
  return { writes };
}

/** `packed`: as parseGetItem's, for every item. */
export function parseBatchGet(c: RequestContext, p: Payload, packed: boolean): BatchGetRequest {
  const table = c.tables.get(p.table);
  const ex = new RequestExpressions(p);
  const projection = ex.projection();
  ex.done();
  const keys = optionalList(p.keys, 'keys');
  if (keys.length === 0) throw new KeysliceError('ValidationError', 'BatchGet needs "keys"');
  if (keys.length > BATCH_GET_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchGet takes at most ${BATCH_GET_ITEMS_MAX} keys; got ${keys.length}`);
  const gets: BatchGetRequest['gets'] = keys.map((ref) => {
    const pk = resolveKey(table, ref, c.sliceCount);
    return { name: pk.name, op: [SliceOp.Get, table.id, pk.slice, pk.key, projection, packed] };
  });
  return { gets, consistent: consistentRead(p) };
}

// ---- helpers -------------------------------------------------------------
// (Objects on this path are built field by field, not by spreading one into another: with
// spreads here and in bucket-gather.ts a 16-bucket GetItems took 5x the router CPU, measured.)

/** `spec`, a range built without a prefix, inside the stored sharding key `part`. */
function inside(part: string, spec: RangeSpec): RangeSpec {
  const { lowInclusive, highInclusive, reverse, limit, projection, filter, withKeys, packed } = spec;
  return { low: part + spec.low, lowInclusive, high: part + spec.high, highInclusive, reverse, limit, projection, filter, withKeys, packed };
}

function putOp(c: RequestContext, table: Table, item: unknown, where: string, check: WriteCheck | null): { name: string; op: PutOp } {
  validateItem(item, where);
  const pk = keyOfItem(table, item, c.sliceCount);
  // __mtime is counted now (the worker sets its value) so that a put and an update of one item measure alike.
  // Copied by Object.assign, then the two set: the literal { ...item, [NAME_ATTRIBUTE]: ..., [MTIME_ATTRIBUTE]: 0 }
  // (a spread with more properties after it, computed or not) took V8's slow path, 4-10 µs a put, 15-40x the
  // copy, and made an object slower to pack (bench/PROFILE.md, 2026-11-26). The same object:
  // validateItem refuses every name starting with "__", so no key of the item is __proto__ (which assign
  // would set as the prototype) or either attribute set here.
  const stored: Item = Object.assign({}, item);
  stored[NAME_ATTRIBUTE] = pk.name;
  stored[MTIME_ATTRIBUTE] = 0;
  const bytes = itemBytes(stored);
  if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `${where} is ${bytes} bytes; the limit is ${ITEM_BYTES_MAX}`);
  return { name: pk.name, op: [SliceOp.Put, table.id, pk.slice, pk.key, stored, bytes, check, null] };
}

/** A page of a full-table scan, or of one segment: segment s of T covers the slices
 * [floor(s * C / T), floor((s + 1) * C / T)); a marker resumes after its slice and key. */
function scanRequest(table: Table, sliceCount: number, p: Payload, limit: number, marker: string | undefined, projection: Projection, filter: Condition | null, packed: boolean): GetItemsRequest {
  let from = 0;
  let to = sliceCount;
  if (p.segment !== undefined || p.totalSegments !== undefined) {
    const total = optionalInt(p.totalSegments, 'totalSegments', 1, SCAN_SEGMENTS_MAX);
    if (total === undefined) throw new KeysliceError('ValidationError', '"segment" needs "totalSegments"');
    const s = optionalInt(p.segment, 'segment', 0, total - 1);
    if (s === undefined) throw new KeysliceError('ValidationError', '"totalSegments" needs "segment"');
    from = Math.floor((s * sliceCount) / total);
    to = Math.floor(((s + 1) * sliceCount) / total);
  }
  let fromSlice = from;
  let afterKey: string | null = null;
  if (marker !== undefined) {
    const at = scanMarkerPosition(marker);
    if (at === null || at.slice < from || at.slice >= to) throw new KeysliceError('InvalidMarker', 'this marker does not come from this scan');
    fromSlice = at.slice;
    afterKey = at.key;
  }
  if (fromSlice >= to) return { kind: 'nothing' };
  return { kind: 'scan', scan: { tableId: table.id, fromSlice, afterKey, limit, projection, filter, toSlice: to, packed } };
}

function returnValuesOf<T extends string>(v: unknown, allowed: readonly T[]): T {
  if (v === undefined) return allowed[0];
  if (!allowed.includes(v as T)) throw new KeysliceError('ValidationError', `"returnValues" must be ${allowed.map((a) => `"${a}"`).join(' or ')}`);
  return v as T;
}

/** The check a single-item write carries, or null when it needs none. */
function writeCheck(condition: Condition | null, returnOld: boolean, p: Payload): WriteCheck | null {
  const onFailure = p.returnValuesOnConditionCheckFailure ?? 'none';
  if (onFailure !== 'none' && onFailure !== 'old') throw new KeysliceError('ValidationError', '"returnValuesOnConditionCheckFailure" must be "none" or "old"');
  if (onFailure === 'old' && condition === null) throw new KeysliceError('ValidationError', '"returnValuesOnConditionCheckFailure" needs a "condition"');
  if (condition === null && !returnOld) return null;
  return { condition, returnOld, oldOnFailure: onFailure === 'old' };
}

function optionalList(v: unknown, field: string): unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new KeysliceError('ValidationError', `"${field}" must be a list`);
  return v;
}

function optionalInt(v: unknown, field: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) {
    throw new KeysliceError('ValidationError', `"${field}" must be a whole number from ${min} to ${max}`);
  }
  return v as number;
}

/** `consistentRead`: true (the native default) reads from the slice's leader; false lets any replica answer. */
function consistentRead(p: Payload): boolean {
  return optionalBool(p.consistentRead, 'consistentRead') ?? true;
}

function optionalBool(v: unknown, field: string): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new KeysliceError('ValidationError', `"${field}" must be true or false`);
  return v;
}

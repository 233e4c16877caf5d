// The operation set, behind both transports. Every request is checked whole
// before anything is sent to a slice node, so bad input changes nothing.
import type { ItemFailure, OperationName, SliceDescription, SortCondition } from '../shared/api.js';
import { assert, KeysliceError, toKeysliceError } from '../shared/errors.js';
import type { Condition } from '../shared/expression-ast.js';
import { sliceOf } from '../shared/hashing.js';
import { encodeKeyPart, encodeKeyPrefix, fromByteString, prefixEnd, toByteString } from '../shared/key-encoding.js';
import { BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX, ITEM_BYTES_MAX, PAGE_BYTES_MAX, PAGE_ITEMS_DEFAULT, PAGE_ITEMS_MAX } from '../shared/limits.js';
import {
  SliceOp,
  type Projection,
  type RangeResult,
  type RangeSpec,
  type ScanResult,
  type SliceOpMessage,
  type StatsResult,
  type UpdateSpec,
  type WriteCheck,
} from '../shared/protocol.js';
import { isPlainObject, itemBytes, NAME_ATTRIBUTE, validateItem, type Item } from '../shared/values.js';
import { describe, type Catalog, type Table } from './catalog.js';
import type { ClusterMap } from './cluster-map.js';
import type { NodeLink } from './node-link.js';
import { checkKeyValue, keyOfItem, resolveKey, type PrimaryKey } from './primary-key.js';
import { RequestExpressions } from './request-expressions.js';

type Payload = Record<string, unknown>;

/** The fields each operation accepts; anything else is refused, so a typo is an error, not a no-op. */
const FIELDS: Record<OperationName, readonly string[]> = {
  CreateTable: ['table', 'shardingKey', 'sortingKey'],
  DescribeTable: ['table'],
  ListTables: [],
  DeleteTable: ['table'],
  PutItem: ['table', 'item', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  GetItem: ['table', 'key', 'attributes', 'projection', 'names'],
  UpdateItem: ['table', 'key', 'update', 'set', 'remove', 'add', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  DeleteItem: ['table', 'key', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  GetItems: ['table', 'shardingKey', 'sortingKey', 'keyCondition', 'filter', 'reverse', 'limit', 'marker', 'attributes', 'projection', 'names', 'values'],
  BatchWrite: ['table', 'puts', 'deletes'],
  BatchGet: ['table', 'keys', 'attributes', 'projection', 'names'],
  DescribeSlices: ['table'],
};

const SORT_CONDITIONS = ['eq', 'lt', 'lte', 'gt', 'gte', 'between', 'beginsWith'] as const;
const MARKER_RANGE = /^r1\.([A-Za-z0-9_-]*)$/;
const MARKER_SCAN = /^s1\.(\d+)\.([A-Za-z0-9_-]*)$/;

export class Operations {
  constructor(
    private readonly catalog: Catalog,
    private readonly map: ClusterMap,
    private readonly links: readonly NodeLink[],
  ) {}

  execute(op: OperationName, payload: Payload): Promise<unknown> {
    for (const field of Object.keys(payload)) {
      if (!FIELDS[op].includes(field)) {
        return Promise.reject(new KeysliceError('ValidationError', `${op} does not take "${field}" (it takes ${FIELDS[op].join(', ') || 'nothing'})`));
      }
    }
    try {
      return this[op](payload);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async CreateTable(p: Payload) {
    return { table: describe(this.catalog.create(p.table, p.shardingKey, p.sortingKey)) };
  }

  private async DescribeTable(p: Payload) {
    return { table: describe(this.catalog.get(p.table)) };
  }

  private async ListTables() {
    return { tables: this.catalog.names() };
  }

  private async DeleteTable(p: Payload) {
    const table = this.catalog.delete(p.table);
    // The table id is never reused, so items left on a node that is down now are unreachable; drop them where we can.
    await Promise.allSettled(this.everyWorker((link, w) => link.sendToWorker(w, [SliceOp.DropTable, table.id])));
    return { table: describe(table) };
  }

  private async PutItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const ex = new RequestExpressions(p);
    const condition = ex.condition('condition');
    ex.done();
    const returnOld = returnValuesOf(p.returnValues, ['none', 'old']) === 'old';
    const check = writeCheck(condition, returnOld, p);
    const [pk, op] = this.putOp(table, p.item, 'item', check);
    const old = await this.write(pk, op);
    return returnOld ? { item: old } : {};
  }

  private async GetItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const ex = new RequestExpressions(p);
    const projection = ex.projection();
    ex.done();
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    return { item: await this.toSlice(pk.slice, [SliceOp.Get, table.id, pk.slice, pk.key, projection]) };
  }

  private async UpdateItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    const ex = new RequestExpressions(p);
    const actions = ex.update(table);
    const condition = ex.condition('condition');
    ex.done();
    const returnValues = returnValuesOf(p.returnValues, ['none', 'old', 'new']);
    const base: Item = { [table.shardingKey.name]: pk.sharding, [NAME_ATTRIBUTE]: pk.name };
    if (table.sortingKey !== null) base[table.sortingKey.name] = pk.sorting!;
    const spec: UpdateSpec = { base, actions, condition, oldOnFailure: writeCheck(condition, false, p)?.oldOnFailure ?? false, returnValues };
    const item = await this.write(pk, [SliceOp.Update, table.id, pk.slice, pk.key, spec]);
    return returnValues === 'none' ? {} : { item };
  }

  private async DeleteItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    const ex = new RequestExpressions(p);
    const condition = ex.condition('condition');
    ex.done();
    const returnOld = returnValuesOf(p.returnValues, ['none', 'old']) === 'old';
    const result = await this.write(pk, [SliceOp.Delete, table.id, pk.slice, pk.key, writeCheck(condition, returnOld, p)]);
    return returnOld ? { deleted: result !== null, item: result as Item | null } : { deleted: result as boolean };
  }

  private async GetItems(p: Payload) {
    const table = this.catalog.get(p.table);
    const ex = new RequestExpressions(p);
    const projection = ex.projection();
    const filter = ex.condition('filter');
    const keyCondition = ex.keyCondition(table);
    ex.done();
    const shardingKey = keyCondition !== null ? keyCondition.shardingKey : p.shardingKey;
    const sortingKey = keyCondition !== null ? keyCondition.sortingKey : p.sortingKey;
    const limit = optionalInt(p.limit, 'limit', 1, PAGE_ITEMS_MAX) ?? PAGE_ITEMS_DEFAULT;
    const reverse = optionalBool(p.reverse, 'reverse') ?? false;
    if (p.marker !== undefined && typeof p.marker !== 'string') throw new KeysliceError('InvalidMarker', '"marker" must be the string a previous page returned');
    if (shardingKey === undefined) {
      if (sortingKey !== undefined) throw new KeysliceError('ValidationError', 'a sorting-key condition needs a "shardingKey"');
      if (reverse) throw new KeysliceError('ValidationError', 'a full-table scan has no order to reverse; "reverse" needs a "shardingKey"');
      return this.scan(table, limit, p.marker as string | undefined, projection, filter);
    }
    const sharding = checkKeyValue(table.shardingKey, shardingKey, 'sharding', table.sortingKey !== null);
    const slice = sliceOf(table.shardingKey.type, sharding, this.map.sliceCount);
    const spec = rangeSpec(table, encodeKeyPart(table.shardingKey.type, sharding), sortingKey, reverse, limit, projection, filter);
    if (p.marker !== undefined) continueAfter(spec, p.marker as string);
    const [items, lastKey, more] = (await this.toSlice(slice, [SliceOp.Range, table.id, slice, spec])) as RangeResult;
    return more && lastKey !== null ? { items, marker: 'r1.' + base64url(lastKey) } : { items };
  }

  private async BatchWrite(p: Payload) {
    const table = this.catalog.get(p.table);
    const puts = optionalList(p.puts, 'puts');
    const deletes = optionalList(p.deletes, 'deletes');
    const count = puts.length + deletes.length;
    if (count === 0) throw new KeysliceError('ValidationError', 'BatchWrite needs at least one of "puts" or "deletes"');
    if (count > BATCH_WRITE_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchWrite takes at most ${BATCH_WRITE_ITEMS_MAX} writes; got ${count}`);
    // The whole request is checked before anything is sent; only run-time failures are per item.
    const ops: [PrimaryKey, SliceOpMessage, 'puts' | 'deletes', number][] = puts.map((item, i) => [...this.putOp(table, item, `puts[${i}]`, null), 'puts', i]);
    deletes.forEach((ref, i) => {
      const pk = resolveKey(table, ref, this.map.sliceCount);
      ops.push([pk, [SliceOp.Delete, table.id, pk.slice, pk.key, null], 'deletes', i]);
    });
    const seen = new Set<string>();
    for (const [pk] of ops) {
      if (seen.has(pk.key)) throw new KeysliceError('ValidationError', `BatchWrite names item "${pk.name}" twice`);
      seen.add(pk.key);
    }
    const results = await Promise.allSettled(ops.map(([pk, op]) => this.toSlice(pk.slice, op)));
    const failures: ItemFailure[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') failures.push(itemFailure(ops[i][2], ops[i][3], ops[i][0], r.reason));
    });
    return { failures };
  }

  private async BatchGet(p: Payload) {
    const table = this.catalog.get(p.table);
    const ex = new RequestExpressions(p);
    const projection = ex.projection();
    ex.done();
    const keys = optionalList(p.keys, 'keys');
    if (keys.length === 0) throw new KeysliceError('ValidationError', 'BatchGet needs "keys"');
    if (keys.length > BATCH_GET_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchGet takes at most ${BATCH_GET_ITEMS_MAX} keys; got ${keys.length}`);
    const pks = keys.map((ref) => resolveKey(table, ref, this.map.sliceCount));
    const results = await Promise.allSettled(pks.map((pk) => this.toSlice(pk.slice, [SliceOp.Get, table.id, pk.slice, pk.key, projection])));
    const failures: ItemFailure[] = [];
    const items = results.map((r, i) => {
      if (r.status === 'fulfilled') return r.value as Item | null;
      failures.push(itemFailure('keys', i, pks[i], r.reason));
      return null;
    });
    return { items, failures };
  }

  private async DescribeSlices(p: Payload) {
    const table = this.catalog.get(p.table);
    const perWorker = await Promise.all(
      this.everyWorker((link, w) =>
        link.sendToWorker(w, [SliceOp.Stats, table.id]).then((r) => (r as StatsResult).map(([slice, items, bytes]) => ({ slice, node: link.url, items, bytes }))),
      ),
    );
    const slices: SliceDescription[] = perWorker.flat().sort((a, b) => a.slice - b.slice);
    return { sliceCount: this.map.sliceCount, slices };
  }

  // ---- helpers -------------------------------------------------------------

  private putOp(table: Table, item: unknown, where: string, check: WriteCheck | null): [PrimaryKey, SliceOpMessage] {
    validateItem(item, where);
    const pk = keyOfItem(table, item, this.map.sliceCount);
    const stored: Item = { ...item, [NAME_ATTRIBUTE]: pk.name };
    const bytes = itemBytes(stored);
    if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `${where} is ${bytes} bytes; the limit is ${ITEM_BYTES_MAX}`);
    return [pk, [SliceOp.Put, table.id, pk.slice, pk.key, stored, bytes, check]];
  }

  private toSlice(slice: number, op: SliceOpMessage): Promise<unknown> {
    return this.links[this.map.ownerOf(slice)].send(slice, op);
  }

  /** A single-item write: a failed condition names the item. */
  private async write(pk: PrimaryKey, op: SliceOpMessage): Promise<unknown> {
    try {
      return await this.toSlice(pk.slice, op);
    } catch (err) {
      if (err instanceof KeysliceError && err.code === 'ConditionalCheckFailed') {
        throw new KeysliceError('ConditionalCheckFailed', `the condition is false for item "${pk.name}"; nothing was changed`, err.details);
      }
      throw err;
    }
  }

  private everyWorker<T>(fn: (link: NodeLink, worker: number) => Promise<T>): Promise<T>[] {
    const out: Promise<T>[] = [];
    for (const link of this.links) {
      if (link.state !== 'ready') {
        out.push(Promise.reject(new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)));
        continue;
      }
      for (let w = 0; w < link.workerCount; w++) out.push(fn(link, w));
    }
    return out;
  }

  /** A page of a full-table scan in (slice, key) order: each worker returns its
   * first `limit` items after the marker; the smallest `limit` of all are the page. */
  private async scan(table: Table, limit: number, marker: string | undefined, projection: Projection, filter: Condition | null) {
    let fromSlice = 0;
    let afterKey: string | null = null;
    if (marker !== undefined) {
      const m = MARKER_SCAN.exec(marker);
      if (m === null || Number(m[1]) >= this.map.sliceCount) throw new KeysliceError('InvalidMarker', 'this marker does not come from a full-table scan of this cluster');
      fromSlice = Number(m[1]);
      afterKey = fromBase64url(m[2]);
    }
    const results = (await Promise.all(
      this.everyWorker((link, w) => link.sendToWorker(w, [SliceOp.Scan, table.id, fromSlice, afterKey, limit, projection, filter])),
    )) as ScanResult[];
    const entries = results.flatMap((r) => r[0]);
    entries.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    // The page is the first `limit` examined entries (or about 1 MB of them) of all workers
    // merged; the filter's rejects (item null) count but are not returned.
    const items: Item[] = [];
    let bytes = 0;
    let i = 0;
    for (; i < entries.length && i < limit && bytes < PAGE_BYTES_MAX; i++) {
      const item = entries[i][2];
      if (item !== null) items.push(item);
      bytes += entries[i][3];
    }
    const more = i < entries.length || results.some((r) => !r[1]);
    if (!more || i === 0) return { items };
    const [slice, key] = entries[i - 1];
    return { items, marker: `s1.${slice}.${base64url(key)}` };
  }
}

function rangeSpec(table: Table, prefix: string, condition: unknown, reverse: boolean, limit: number, projection: Projection, filter: Condition | null): RangeSpec {
  const spec: RangeSpec = { low: prefix, lowInclusive: true, high: prefixEnd(prefix), highInclusive: false, reverse, limit, projection, filter };
  if (condition === undefined) return spec;
  const sortKey = table.sortingKey;
  if (sortKey === null) throw new KeysliceError('ValidationError', `table "${table.name}" has no sorting key; "sortingKey" does not apply`);
  if (!isPlainObject(condition) || Object.keys(condition).length !== 1 || !SORT_CONDITIONS.includes(Object.keys(condition)[0] as never)) {
    throw new KeysliceError('ValidationError', `"sortingKey" must be one condition: {${SORT_CONDITIONS.join(' | ')}: value}`);
  }
  const c = condition as SortCondition;
  const at = (v: unknown) => prefix + encodeKeyPart(sortKey.type, checkKeyValue(sortKey, v, 'sorting', true));
  if ('eq' in c) return { ...spec, low: at(c.eq), high: at(c.eq), highInclusive: true };
  if ('lt' in c) return { ...spec, high: at(c.lt) };
  if ('lte' in c) return { ...spec, high: at(c.lte), highInclusive: true };
  if ('gt' in c) return { ...spec, low: at(c.gt), lowInclusive: false };
  if ('gte' in c) return { ...spec, low: at(c.gte) };
  if ('between' in c) {
    if (!Array.isArray(c.between) || c.between.length !== 2) throw new KeysliceError('ValidationError', '"between" takes [low, high]');
    const [low, high] = [at(c.between[0]), at(c.between[1])];
    if (low > high) throw new KeysliceError('ValidationError', '"between" needs low <= high');
    return { ...spec, low, high, highInclusive: true };
  }
  assert('beginsWith' in c, 'conditions are exhaustive');
  if (sortKey.type === 'number') throw new KeysliceError('ValidationError', '"beginsWith" applies to string and binary sorting keys only');
  const v = checkKeyValue(sortKey, c.beginsWith, 'sorting', true) as string | Uint8Array;
  const start = prefix + encodeKeyPrefix(sortKey.type, v);
  return { ...spec, low: start, high: prefixEnd(start) };
}

/** Narrows a range to what follows the marker's key in the scan's direction. */
function continueAfter(spec: RangeSpec, marker: string): void {
  const m = MARKER_RANGE.exec(marker);
  const key = m === null ? null : fromBase64url(m[1]);
  if (key === null || key < spec.low || key > spec.high) throw new KeysliceError('InvalidMarker', 'this marker does not belong to this query');
  if (spec.reverse) {
    spec.high = key;
    spec.highInclusive = false;
  } else {
    spec.low = key;
    spec.lowInclusive = false;
  }
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

function itemFailure(list: ItemFailure['list'], index: number, pk: PrimaryKey, reason: unknown): ItemFailure {
  const err = toKeysliceError(reason);
  return { list, index, name: pk.name, code: err.code, message: err.message, retryable: err.retryable };
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

function optionalBool(v: unknown, field: string): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new KeysliceError('ValidationError', `"${field}" must be true or false`);
  return v;
}

function base64url(byteString: string): string {
  return Buffer.from(fromByteString(byteString)).toString('base64url');
}

function fromBase64url(text: string): string {
  return toByteString(Buffer.from(text, 'base64url'));
}

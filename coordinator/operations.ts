// The operation set, behind both transports. Every request is checked whole
// before anything is sent to a slice node, so bad input changes nothing.
import type { OperationName } from '../shared/api.js';
import { assert, KeysliceError } from '../shared/errors.js';
import { sliceOf } from '../shared/hashing.js';
import { encodeKeyPart, encodeKeyPrefix, fromByteString, prefixEnd, SHARDING_PREFIX_END, toByteString } from '../shared/key-encoding.js';
import { SCAN_SEGMENTS_MAX, BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX, ITEM_BYTES_MAX, PAGE_BYTES_MAX, PAGE_ITEMS_DEFAULT, PAGE_ITEMS_MAX } from '../shared/limits.js';
import { SliceOp, type RangeResult, type RangeSpec, type ScanResult, type SliceOpMessage, type StatsResult, type UpdateSpec } from '../shared/protocol.js';
import { isPlainObject, itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, validateAttributeName, validateItem, type Item } from '../shared/values.js';
import { describe, type Catalog, type Table } from './catalog.js';
import type { ClusterMap } from './cluster-map.js';
import type { NodeLink } from './node-link.js';
import { gatherBuckets } from './bucket-gather.js';
import { tableLoad } from './load-report.js';
import { base64url, continueAfter, fromBase64url, rangeMarker, rangeSpec } from './key-range.js';
import { checkKeyValue, keyOfItem, resolveKey, storedShardingKey, type PrimaryKey } from './primary-key.js';

type Payload = Record<string, unknown>;

/** The fields each operation accepts; anything else is refused, so a typo is an error, not a no-op. */
const FIELDS: Record<OperationName, readonly string[]> = {
  CreateTable: ['table', 'shardingKey', 'sortingKey', 'evenDistribution'],
  DescribeTable: ['table'],
  ListTables: [],
  DeleteTable: ['table'],
  PutItem: ['table', 'item'],
  GetItem: ['table', 'key', 'attributes'],
  UpdateItem: ['table', 'key', 'set', 'remove', 'add', 'returnValues'],
  DeleteItem: ['table', 'key'],
  GetItems: ['table', 'shardingKey', 'bucket', 'sortingKey', 'reverse', 'limit', 'marker', 'attributes', 'segment', 'totalSegments'],
  BatchWrite: ['table', 'puts', 'deletes'],
  BatchGet: ['table', 'keys', 'attributes'],
  DescribeSlices: ['table'],
};

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
    return { table: describe(this.catalog.create(p.table, p.shardingKey, p.sortingKey, p.evenDistribution)) };
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
    const [pk, op] = this.putOp(table, p.item, 'item');
    await this.toSlice(pk.slice, op);
    return {};
  }

  private async GetItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const attributes = attributeList(p.attributes);
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    return { item: await this.toSlice(pk.slice, [SliceOp.Get, table.id, pk.slice, pk.key, attributes]) };
  }

  private async UpdateItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    const spec = updateSpec(table, pk, p);
    const item = await this.toSlice(pk.slice, [SliceOp.Update, table.id, pk.slice, pk.key, spec]);
    return spec.returnValues === 'none' ? {} : { item };
  }

  private async DeleteItem(p: Payload) {
    const table = this.catalog.get(p.table);
    const pk = resolveKey(table, p.key, this.map.sliceCount);
    return { deleted: (await this.toSlice(pk.slice, [SliceOp.Delete, table.id, pk.slice, pk.key])) as boolean };
  }

  private async GetItems(p: Payload) {
    const table = this.catalog.get(p.table);
    const attributes = attributeList(p.attributes);
    const limit = optionalInt(p.limit, 'limit', 1, PAGE_ITEMS_MAX) ?? PAGE_ITEMS_DEFAULT;
    const reverse = optionalBool(p.reverse, 'reverse') ?? false;
    if (p.marker !== undefined && typeof p.marker !== 'string') throw new KeysliceError('InvalidMarker', '"marker" must be the string a previous page returned');
    if (p.shardingKey === undefined) {
      if (p.sortingKey !== undefined) throw new KeysliceError('ValidationError', 'a sorting-key condition needs a "shardingKey"');
      if (reverse) throw new KeysliceError('ValidationError', 'a full-table scan has no order to reverse; "reverse" needs a "shardingKey"');
      return this.scan(table, limit, p.marker as string | undefined, attributes, this.segmentSlices(p.segment, p.totalSegments));
    }
    if (p.segment !== undefined || p.totalSegments !== undefined) throw new KeysliceError('ValidationError', '"segment" and "totalSegments" split a full-table scan; they do not apply with a "shardingKey"');
    const sharding = checkKeyValue(table.shardingKey, p.shardingKey, 'sharding', table.sortingKey !== null);
    const marker = p.marker as string | undefined;
    const even = table.evenDistribution;
    const bucket = optionalInt(p.bucket, 'bucket', 0, (even?.buckets ?? 1) - 1);
    if (bucket !== undefined && even === null) throw new KeysliceError('ValidationError', `table "${table.name}" has no even distribution; "bucket" does not apply`);
    if (even !== null && bucket === undefined) {
      const send = (slice: number, op: SliceOpMessage) => this.toSlice(slice, op);
      return gatherBuckets({ table, sharding: sharding as string, condition: p.sortingKey, reverse, limit, marker, attributes, sliceCount: this.map.sliceCount, send });
    }
    const stored = bucket === undefined ? sharding : storedShardingKey(sharding, bucket);
    const slice = sliceOf(table.shardingKey.type, stored, this.map.sliceCount);
    const spec = rangeSpec(table, encodeKeyPart(table.shardingKey.type, stored), p.sortingKey, reverse, limit, attributes);
    if (marker !== undefined) continueAfter(spec, marker);
    const [items, lastKey, more] = (await this.toSlice(slice, [SliceOp.Range, table.id, slice, spec])) as RangeResult;
    return more && lastKey !== null ? { items, marker: rangeMarker(lastKey) } : { items };
  }

  private async BatchWrite(p: Payload) {
    const table = this.catalog.get(p.table);
    const puts = optionalList(p.puts, 'puts');
    const deletes = optionalList(p.deletes, 'deletes');
    const count = puts.length + deletes.length;
    if (count === 0) throw new KeysliceError('ValidationError', 'BatchWrite needs at least one of "puts" or "deletes"');
    if (count > BATCH_WRITE_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchWrite takes at most ${BATCH_WRITE_ITEMS_MAX} writes; got ${count}`);
    const ops: [PrimaryKey, SliceOpMessage][] = puts.map((item, i) => this.putOp(table, item, `puts[${i}]`));
    for (const ref of deletes) {
      const pk = resolveKey(table, ref, this.map.sliceCount);
      ops.push([pk, [SliceOp.Delete, table.id, pk.slice, pk.key]]);
    }
    const seen = new Set<string>();
    for (const [pk] of ops) {
      if (seen.has(pk.key)) throw new KeysliceError('ValidationError', `BatchWrite names item "${pk.name}" twice`);
      seen.add(pk.key);
    }
    await Promise.all(ops.map(([pk, op]) => this.toSlice(pk.slice, op)));
    return {};
  }

  private async BatchGet(p: Payload) {
    const table = this.catalog.get(p.table);
    const attributes = attributeList(p.attributes);
    const keys = optionalList(p.keys, 'keys');
    if (keys.length === 0) throw new KeysliceError('ValidationError', 'BatchGet needs "keys"');
    if (keys.length > BATCH_GET_ITEMS_MAX) throw new KeysliceError('BatchTooLarge', `BatchGet takes at most ${BATCH_GET_ITEMS_MAX} keys; got ${keys.length}`);
    const pks = keys.map((ref) => resolveKey(table, ref, this.map.sliceCount));
    const items = await Promise.all(pks.map((pk) => this.toSlice(pk.slice, [SliceOp.Get, table.id, pk.slice, pk.key, attributes])));
    return { items };
  }

  private async DescribeSlices(p: Payload) {
    return tableLoad(this.catalog.get(p.table), this.links, this.map.sliceCount);
  }

  // ---- helpers -------------------------------------------------------------

  private putOp(table: Table, item: unknown, where: string): [PrimaryKey, SliceOpMessage] {
    validateItem(item, where);
    const pk = keyOfItem(table, item, this.map.sliceCount);
    // __mtime is counted now (the worker sets its value) so that a put and an update of one item measure alike.
    const stored: Item = { ...item, [NAME_ATTRIBUTE]: pk.name, [MTIME_ATTRIBUTE]: 0 };
    const bytes = itemBytes(stored);
    if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `${where} is ${bytes} bytes; the limit is ${ITEM_BYTES_MAX}`);
    return [pk, [SliceOp.Put, table.id, pk.slice, pk.key, stored, bytes]];
  }

  private toSlice(slice: number, op: SliceOpMessage): Promise<unknown> {
    return this.links[this.map.ownerOf(slice)].send(slice, op);
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
  /** Segment s of T covers the slices [floor(s * C / T), floor((s + 1) * C / T)). */
  private segmentSlices(segment: unknown, totalSegments: unknown): [number, number] {
    if (segment === undefined && totalSegments === undefined) return [0, this.map.sliceCount];
    const total = optionalInt(totalSegments, 'totalSegments', 1, SCAN_SEGMENTS_MAX);
    if (total === undefined) throw new KeysliceError('ValidationError', '"segment" needs "totalSegments"');
    const s = optionalInt(segment, 'segment', 0, total - 1);
    if (s === undefined) throw new KeysliceError('ValidationError', '"totalSegments" needs "segment"');
    const c = this.map.sliceCount;
    return [Math.floor((s * c) / total), Math.floor(((s + 1) * c) / total)];
  }

  /** A page of a full-table scan (or of one segment) in (slice, key) order: each
   * worker returns its first `limit` items after the marker; the smallest `limit` of all are the page. */
  private async scan(table: Table, limit: number, marker: string | undefined, attributes: string[] | null, [from, to]: [number, number]) {
    let fromSlice = from;
    let afterKey: string | null = null;
    if (marker !== undefined) {
      const m = MARKER_SCAN.exec(marker);
      if (m === null || Number(m[1]) < from || Number(m[1]) >= to) throw new KeysliceError('InvalidMarker', 'this marker does not come from this scan');
      fromSlice = Number(m[1]);
      afterKey = fromBase64url(m[2]);
    }
    if (fromSlice >= to) return { items: [] };
    // Only the nodes that own a slice of the range are asked.
    const owners = new Set<number>();
    for (let s = fromSlice; s < to; s++) owners.add(this.map.ownerOf(s));
    const asked: Promise<unknown>[] = [];
    for (const o of owners) {
      const link = this.links[o];
      if (link.state !== 'ready') throw new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`);
      for (let w = 0; w < link.workerCount; w++) asked.push(link.sendToWorker(w, [SliceOp.Scan, table.id, fromSlice, afterKey, limit, attributes, to]));
    }
    const results = (await Promise.all(asked)) as ScanResult[];
    const entries = results.flatMap((r) => r[0]);
    entries.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    const items: Item[] = [];
    let bytes = 0;
    let i = 0;
    for (; i < entries.length && items.length < limit && bytes < PAGE_BYTES_MAX; i++) {
      items.push(entries[i][2]);
      bytes += itemBytes(entries[i][2]);
    }
    const more = i < entries.length || results.some((r) => !r[1]);
    if (!more || i === 0) return { items };
    const [slice, key] = entries[i - 1];
    return { items, marker: `s1.${slice}.${base64url(key)}` };
  }
}

function updateSpec(table: Table, pk: PrimaryKey, p: Payload): UpdateSpec {
  const keyNames = [table.shardingKey.name, table.sortingKey?.name];
  const touched = new Set<string>();
  const touch = (name: string, clause: string) => {
    validateAttributeName(name, clause);
    if (keyNames.includes(name)) throw new KeysliceError('ValidationError', `${clause}: "${name}" is a key attribute and cannot be updated`);
    if (touched.has(name)) throw new KeysliceError('ValidationError', `"${name}" appears in more than one update clause`);
    touched.add(name);
  };
  let set: Item | null = null;
  if (p.set !== undefined) {
    validateItem(p.set, 'set');
    for (const name of Object.keys(p.set)) touch(name, 'set');
    set = p.set;
  }
  let remove: string[] | null = null;
  if (p.remove !== undefined) {
    remove = optionalList(p.remove, 'remove') as string[];
    for (const name of remove) {
      if (typeof name !== 'string') throw new KeysliceError('ValidationError', '"remove" must be a list of attribute names');
      touch(name, 'remove');
    }
  }
  let add: Record<string, number> | null = null;
  if (p.add !== undefined) {
    if (!isPlainObject(p.add)) throw new KeysliceError('ValidationError', '"add" must map attribute names to numbers');
    for (const [name, n] of Object.entries(p.add)) {
      touch(name, 'add');
      if (typeof n !== 'number' || !Number.isFinite(n)) throw new KeysliceError('ValidationError', `add.${name} must be a finite number`);
    }
    add = p.add as Record<string, number>;
  }
  const returnValues = p.returnValues ?? 'none';
  if (returnValues !== 'none' && returnValues !== 'old' && returnValues !== 'new') {
    throw new KeysliceError('ValidationError', '"returnValues" must be "none", "old" or "new"');
  }
  const base: Item = { [table.shardingKey.name]: pk.sharding, [NAME_ATTRIBUTE]: pk.name };
  if (table.sortingKey !== null) base[table.sortingKey.name] = pk.sorting!;
  return { base, set, remove, add, returnValues };
}

function attributeList(v: unknown): string[] | null {
  if (v === undefined) return null;
  if (!Array.isArray(v) || v.some((a) => typeof a !== 'string')) throw new KeysliceError('ValidationError', '"attributes" must be a list of attribute names');
  return v as string[];
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

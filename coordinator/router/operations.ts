// The operation set, behind both transports. Every request is checked whole
// before anything is sent to a slice node, so bad input changes nothing.
import type { ItemFailure, OperationName } from '../../shared/api.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import type { Condition } from '../../shared/expression-ast.js';
import {
  BATCH_GET_ITEMS_MAX,
  BATCH_WRITE_ITEMS_MAX,
  ITEM_BYTES_MAX,
  PAGE_BYTES_MAX,
  PAGE_ITEMS_DEFAULT,
  PAGE_ITEMS_MAX,
  SCAN_SEGMENTS_MAX,
  FAILOVER_RETRIES_MAX,
  FAILOVER_RETRY_MS_MAX,
  WRONG_OWNER_RETRIES_MAX,
    WRONG_OWNER_RETRY_MS_MAX,
} from '../../shared/limits.js';
import { SliceOp, type Projection, type RangeResult, type ScanResult, type SliceOpMessage, type UpdateSpec, type WriteCheck } from '../../shared/protocol.js';
import { itemBytes, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, validateItem, type Item } from '../../shared/values.js';
import { gatherBuckets } from './bucket-gather.js';
import { describe, type Table } from '../metadata/catalog.js';
import { continueAfter, fromBase64url, isEmptyRange, rangeMarker, rangeSpec, scanMarker, sortRangeOf } from './key-range.js';
import { tableLoad } from '../metadata/load-report.js';
import { wasNotSent, type NodeLink } from '../metadata/node-link.js';
import { describePart, keyOfItem, placement, resolveKey, shardingValues, type PrimaryKey } from './primary-key.js';
import { RequestExpressions } from './request-expressions.js';
import { adviseRequest } from '../studio/advisor-request.js';
import type { ProcessMetrics } from './process-metrics.js';
import type { Routing, TableCatalog, TableSource } from './routing.js';

type Payload = Record<string, unknown>;

/** The fields each operation accepts; anything else is refused, so a typo is an error, not a no-op. */
const FIELDS: Record<OperationName, readonly string[]> = {
  CreateTable: ['table', 'shardingKey', 'sortingKey', 'evenDistribution'],
  DescribeTable: ['table'],
  ListTables: [],
  DeleteTable: ['table'],
  PutItem: ['table', 'item', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  GetItem: ['table', 'key', 'attributes', 'projection', 'names'],
  UpdateItem: ['table', 'key', 'update', 'set', 'remove', 'add', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  DeleteItem: ['table', 'key', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure'],
  GetItems: ['table', 'shardingKey', 'bucket', 'sortingKey', 'keyCondition', 'filter', 'reverse', 'limit', 'marker', 'attributes', 'projection', 'names', 'values', 'segment', 'totalSegments'],
  BatchWrite: ['table', 'puts', 'deletes'],
  BatchGet: ['table', 'keys', 'attributes', 'projection', 'names'],
  DescribeSlices: ['table'],
  Advise: ['table', 'shardingKey', 'sortingKey', 'evenDistribution', 'items', 'accessLog', 'expectedItems', 'momentWrites'],
};

const MARKER_SCAN = /^s1\.(\d+)\.([A-Za-z0-9_-]*)$/;

/** A router's operations forward these to the coordinator (router/forward.ts): table
 * changes are the coordinator's alone. */
export const TABLE_CHANGES: readonly OperationName[] = ['CreateTable', 'DeleteTable'];

export class Operations {
  /** `catalog`: a TableCatalog on the coordinator; a router's copy (a TableSource) refuses table changes. */
  constructor(
    /** Read by the DynamoDB endpoint too, to look a table up without a DescribeTable. */
    readonly catalog: TableSource | TableCatalog,
    private readonly cluster: Routing,
    /** A router's: sends a table change to the coordinator, answers once the router's copy has it. */
    private readonly forwardChange?: (op: OperationName, payload: Payload) => Promise<unknown>,
    /** Requests, errors and latency per operation (process-metrics.ts), whichever API asked. */
    private readonly metrics?: Pick<ProcessMetrics, 'start'>,
  ) {}

  private get map(): { sliceCount: number } {
    return this.cluster;
  }

  private changes(): TableCatalog {
    if (!('create' in this.catalog)) throw new KeysliceError('Internal', 'table changes are made by the coordinator; a router forwards them');
    return this.catalog;
  }

  execute(op: OperationName, payload: Payload): Promise<unknown> {
    if (this.metrics === undefined) return this.run(op, payload);
    const done = this.metrics.start(op);
    const result = this.run(op, payload);
    result.then(
      () => done(null),
      (err) => done(toKeysliceError(err).code),
    );
    return result;
  }

  private run(op: OperationName, payload: Payload): Promise<unknown> {
    for (const field of Object.keys(payload)) {
      if (!FIELDS[op].includes(field)) {
        return Promise.reject(new KeysliceError('ValidationError', `${op} does not take "${field}" (it takes ${FIELDS[op].join(', ') || 'nothing'})`));
      }
    }
    try {
      if (this.forwardChange !== undefined && TABLE_CHANGES.includes(op)) return this.forwardChange(op, payload);
      return this[op](payload);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async CreateTable(p: Payload) {
    return { table: describe(this.changes().create(p.table, p.shardingKey, p.sortingKey, p.evenDistribution)) };
  }

  private async DescribeTable(p: Payload) {
    return { table: describe(this.catalog.get(p.table)) };
  }

  private async ListTables() {
    return { tables: this.catalog.names() };
  }

  private async DeleteTable(p: Payload) {
    const table = this.changes().delete(p.table);
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
    // Unconditional and answering nothing: the same end state if it is applied twice.
    const old = await this.write(pk, op, check === null);
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
    const base: Item = { [NAME_ATTRIBUTE]: pk.name };
    table.sharding.forEach((c, i) => (base[c.name] = pk.sharding[i]));
    table.sorting.forEach((c, i) => (base[c.name] = pk.sorting[i]));
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
    const limit = optionalInt(p.limit, 'limit', 1, PAGE_ITEMS_MAX) ?? PAGE_ITEMS_DEFAULT;
    const reverse = optionalBool(p.reverse, 'reverse') ?? false;
    if (p.marker !== undefined && typeof p.marker !== 'string') throw new KeysliceError('InvalidMarker', '"marker" must be the string a previous page returned');
    const marker = p.marker as string | undefined;
    if (shardingKey === undefined) {
      if (p.sortingKey !== undefined) throw new KeysliceError('ValidationError', 'a sorting-key condition needs a "shardingKey"');
      if (reverse) throw new KeysliceError('ValidationError', 'a full-table scan has no order to reverse; "reverse" needs a "shardingKey"');
      return this.scan(table, limit, marker, projection, filter, this.segmentSlices(p.segment, p.totalSegments));
    }
    if (p.segment !== undefined || p.totalSegments !== undefined) {
      throw new KeysliceError('ValidationError', '"segment" and "totalSegments" split a full-table scan; they do not apply with a "shardingKey"');
    }
    const sharding = shardingValues(table, shardingKey);
    const range = keyCondition !== null ? keyCondition.sortRange : p.sortingKey === undefined ? null : sortRangeOf(table, p.sortingKey);
    const even = table.evenDistribution;
    const bucket = optionalInt(p.bucket, 'bucket', 0, (even?.buckets ?? 1) - 1);
    if (bucket !== undefined && even === null) throw new KeysliceError('ValidationError', `table "${table.name}" has no even distribution; "bucket" does not apply`);
    const sliceCount = this.map.sliceCount;
    if (even !== null && bucket === undefined) {
      const send = (slice: number, op: SliceOpMessage) => this.toSlice(slice, op);
      const buckets = Array.from({ length: even.buckets }, (_, b) => placement(table, sharding, b, sliceCount));
      return gatherBuckets({ table, buckets, range, reverse, limit, marker, projection, filter, send });
    }
    const where = placement(table, sharding, bucket ?? null, sliceCount);
    const spec = rangeSpec(table, where.part, range, reverse, limit, projection, filter);
    if (marker !== undefined) continueAfter(spec, marker);
    if (isEmptyRange(spec)) return { items: [], examined: 0 }; // bounds that contradict each other match nothing
    const [items, lastKey, more, , examined] = (await this.toSlice(where.slice, [SliceOp.Range, table.id, where.slice, spec])) as RangeResult;
    return more && lastKey !== null ? { items, examined, marker: rangeMarker(lastKey) } : { items, examined };
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
    // Unconditional puts and deletes whose results are not returned: each may be sent again after an unknown outcome.
    const results = await Promise.allSettled(ops.map(([pk, op]) => this.toSlice(pk.slice, op, true)));
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
    return tableLoad(this.catalog.get(p.table), this.cluster.presentLinks(), this.cluster.layout(), describePart);
  }

  /** Judged here, on the event loop: ADVISE_ITEMS_MAX keeps one request short. */
  private async Advise(p: Payload) {
    const { nodes, owners } = this.cluster.layout();
    return adviseRequest(p, (name) => this.catalog.get(name), { sliceCount: this.map.sliceCount, nodes, owners, source: 'cluster' });
  }

  // ---- helpers -------------------------------------------------------------

  private putOp(table: Table, item: unknown, where: string, check: WriteCheck | null): [PrimaryKey, SliceOpMessage] {
    validateItem(item, where);
    const pk = keyOfItem(table, item, this.map.sliceCount);
    // __mtime is counted now (the worker sets its value) so that a put and an update of one item measure alike.
    const stored: Item = { ...item, [NAME_ATTRIBUTE]: pk.name, [MTIME_ATTRIBUTE]: 0 };
    const bytes = itemBytes(stored);
    if (bytes > ITEM_BYTES_MAX) throw new KeysliceError('ItemTooLarge', `${where} is ${bytes} bytes; the limit is ${ITEM_BYTES_MAX}`);
    return [pk, [SliceOp.Put, table.id, pk.slice, pk.key, stored, bytes, check]];
  }

  /** Sends an op to the node that owns its slice. An op refused with WrongOwner was not
   * applied (the slice was switching owners): it is sent again with the map as it is
   * then, a bounded number of times; the client sees added latency, not the error.
   * On a replicated slice, an op whose node answered that the slice has no serving leader,
   * or that could not be sent because the owner's node is not connected, was not applied
   * either (a failover is under way): it is sent again, bounded, once the map names the
   * new leader, and so is one that was still queued for a node whose link was lost (never sent).
   * An answer of unknown outcome (a lost connection, a deposed leader) is sent again only for an
   * `idempotent` op, one whose end state and answer are the same if it is applied twice (an
   * unconditional put or delete whose result the caller does not return); never for a conditional
   * write or an update (ADD, counters), which may have been applied (docs/replication.md). */
  private async toSlice(slice: number, op: SliceOpMessage, idempotent = false): Promise<unknown> {
    const started = Date.now();
    let failoverTries = 0;
    for (let attempt = 0; ; attempt++) {
      const link = this.cluster.linkOf(slice);
      if (link === null) throw new KeysliceError('Unavailable', `slice ${slice} has no slice node yet (none has joined); retry later`);
      if (link.state !== 'ready') await this.cluster.linkReady(link);
      if (link.state !== 'ready' && link.state !== 'closed' && this.failoverRetry(started, failoverTries)) {
        await this.cluster.afterNoLeader(failoverTries++);
        continue;
      }
      try {
        return await link.send(slice, op);
      } catch (err) {
        if (err instanceof KeysliceError && mayResend(err, idempotent) && this.failoverRetry(started, failoverTries)) {
          await this.cluster.afterNoLeader(failoverTries++);
          continue;
        }
        if (!(err instanceof KeysliceError) || err.code !== 'WrongOwner') throw err;
        if (attempt + 1 - failoverTries >= WRONG_OWNER_RETRIES_MAX || Date.now() - started >= Math.max(WRONG_OWNER_RETRY_MS_MAX, this.cluster.replicationFactor > 1 ? FAILOVER_RETRY_MS_MAX : 0)) throw err;
        await this.cluster.afterWrongOwner(attempt);
      }
    }
  }

  /** Whether an op that met a failover (no serving leader) is tried again: only on replicated
   * slices, within FAILOVER_RETRIES_MAX tries and FAILOVER_RETRY_MS_MAX. */
  private failoverRetry(started: number, tries: number): boolean {
    return this.cluster.replicationFactor > 1 && tries < FAILOVER_RETRIES_MAX && Date.now() - started < FAILOVER_RETRY_MS_MAX;
  }

  /** A single-item write: a failed condition names the item. */
  private async write(pk: PrimaryKey, op: SliceOpMessage, idempotent = false): Promise<unknown> {
    try {
      return await this.toSlice(pk.slice, op, idempotent);
    } catch (err) {
      if (err instanceof KeysliceError && err.code === 'ConditionalCheckFailed') {
        throw new KeysliceError('ConditionalCheckFailed', `the condition is false for item "${pk.name}"; nothing was changed`, err.details);
      }
      throw err;
    }
  }

  private everyWorker<T>(fn: (link: NodeLink, worker: number) => Promise<T>): Promise<T>[] {
    const out: Promise<T>[] = [];
    for (const link of this.cluster.presentLinks()) {
      if (link.state !== 'ready') {
        out.push(Promise.reject(new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)));
        continue;
      }
      for (let w = 0; w < link.workerCount; w++) out.push(fn(link, w));
    }
    return out;
  }

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
   * worker returns its first `limit` examined items after the marker; the first
   * `limit` of all, merged, are the page. */
  private async scan(table: Table, limit: number, marker: string | undefined, projection: Projection, filter: Condition | null, [from, to]: [number, number]) {
    let fromSlice = from;
    let afterKey: string | null = null;
    if (marker !== undefined) {
      const m = MARKER_SCAN.exec(marker);
      if (m === null || Number(m[1]) < from || Number(m[1]) >= to) throw new KeysliceError('InvalidMarker', 'this marker does not come from this scan');
      fromSlice = Number(m[1]);
      afterKey = fromBase64url(m[2]);
    }
    if (fromSlice >= to) return { items: [], examined: 0 };
    const results = await this.scanWorkers(table, fromSlice, afterKey, limit, projection, filter, to);
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
    // What the workers read, though the page uses only the first `limit` of it.
    const examined = entries.length;
    if (!more || i === 0) return { items, examined };
    const [slice, key] = entries[i - 1];
    return { items, examined, marker: scanMarker(slice, key) };
  }

  /** Asks every worker that owns a slice of [fromSlice, to) for its part of a scan page. A
   * slice between freeze and switch is owned by no worker: scanLinks waits for its switch,
   * then names the owners of the map as it is; every ask is refused (WrongOwner) if its node
   * has moved on to another map, and then the whole page is asked again (a router's map can
   * lag the nodes'; the coordinator's never does). */
  private async scanWorkers(table: Table, fromSlice: number, afterKey: string | null, limit: number, projection: Projection, filter: Condition | null, to: number): Promise<ScanResult[]> {
    const started = Date.now();
    let failoverTries = 0;
    for (let attempt = 0; ; attempt++) {
      let links: NodeLink[];
      try {
        links = await this.cluster.scanLinks(fromSlice, to);
      } catch (err) {
        // A scan only reads: on replicated slices a node that is down is waited out (a failover names another).
        if (err instanceof KeysliceError && err.code === 'Unavailable' && this.failoverRetry(started, failoverTries)) {
          await this.cluster.afterNoLeader(failoverTries++);
          continue;
        }
        throw err;
      }
      // Only the workers that own a slice of the range are asked.
      const workers = new Set<string>();
      const asked: Promise<unknown>[] = [];
      for (let s = fromSlice; s < to; s++) {
        const link = links[s - fromSlice];
        const w = s % link.workerCount;
        if (workers.has(`${link.url} ${w}`)) continue;
        workers.add(`${link.url} ${w}`);
        asked.push(link.sendToWorker(w, [SliceOp.Scan, table.id, fromSlice, afterKey, limit, projection, filter, to]));
      }
      const settled = await Promise.allSettled(asked);
      const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed === undefined) return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value as ScanResult);
      const err = failed.reason;
      if (err instanceof KeysliceError && err.code === 'Unavailable' && this.failoverRetry(started, failoverTries)) {
        await this.cluster.afterNoLeader(failoverTries++);
        continue;
      }
      if (!(err instanceof KeysliceError) || err.code !== 'WrongOwner') throw err;
      if (attempt + 1 - failoverTries >= WRONG_OWNER_RETRIES_MAX || Date.now() - started >= WRONG_OWNER_RETRY_MS_MAX) throw err;
      await this.cluster.afterWrongOwner(attempt);
    }
  }
}

/** A node's answer that a replicated slice has no serving leader there (no election finished for it,
 * or it was deposed before the op ran): nothing was applied, so the op may be sent again. The node
 * says it in these words (slice-worker), and answers of unknown outcome never contain them. */
const NO_SERVING_LEADER = 'has no serving leader';
export function isNoServingLeader(err: KeysliceError): boolean {
  return err.code === 'Unavailable' && err.message.includes(NO_SERVING_LEADER);
}

/** Whether an op that failed with `err` during a failover may be sent again: it was not applied
 * (refused by a replica that does not serve, or never sent), or its outcome is unknown (any other
 * Unavailable: a lost connection, a deposed or silent leader) and applying it twice changes nothing. */
function mayResend(err: KeysliceError, idempotent: boolean): boolean {
  if (err.code !== 'Unavailable') return false;
  return idempotent || isNoServingLeader(err) || wasNotSent(err);
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

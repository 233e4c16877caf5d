// The operation set, behind both transports. An item operation's payload is parsed
// once into a typed request (item-requests.ts: every check runs before anything is
// sent, so bad input changes nothing); the request is routed to the slices by the
// Router (router.ts, which owns the retries) and the answer built from the results.
import type { ItemFailure, OperationName } from '../../shared/api.js';
import { assert, KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { APPLIED_REQUESTS_KEPT_MS, PAGE_BYTES_MAX, WRONG_OWNER_RETRIES_MAX } from '../../shared/limits.js';
import { cutScanItems, KEPT_IN_LIST, MalformedFrame, PACKED_NIL, PackedItem, PackedItems, SliceOp, type RangeItems, type ResultOf, type ScanEntry, type ScanResult } from '../../shared/protocol.js';
import type { Item } from '../../shared/values.js';
import { gatherBuckets } from './bucket-gather.js';
import { describe } from '../metadata/catalog.js';
import {
  parseBatchGet,
  parseBatchWrite,
  parseDeleteItem,
  parseGetItem,
  parseGetItems,
  parsePutItem,
  parseUpdateItem,
  type DeleteOp,
  type PutOp,
  type RequestContext,
  type UpdateOp,
} from './item-requests.js';
import { rangeMarker, scanMarker } from './key-range.js';
import { tableLoad } from '../metadata/load-report.js';
import { describePart } from './primary-key.js';
import { adviseRequest } from '../studio/advisor-request.js';
import type { ProcessMetrics } from './process-metrics.js';
import { idempotencyIdOf } from './request-ids.js';
import type { Router, ScanRequest } from './router.js';
import type { TableCatalog, TableSource } from './routing.js';

type Payload = Record<string, unknown>;

/** The fields each operation accepts; anything else is refused, so a typo is an error, not a no-op. */
const FIELDS: Record<OperationName, readonly string[]> = {
  CreateTable: ['table', 'shardingKey', 'sortingKey', 'evenDistribution'],
  DescribeTable: ['table'],
  ListTables: [],
  DeleteTable: ['table'],
  PutItem: ['table', 'item', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure', 'idempotencyId'],
  GetItem: ['table', 'key', 'attributes', 'projection', 'names', 'consistentRead'],
  UpdateItem: ['table', 'key', 'update', 'set', 'remove', 'add', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure', 'idempotencyId'],
  DeleteItem: ['table', 'key', 'condition', 'names', 'values', 'returnValues', 'returnValuesOnConditionCheckFailure', 'idempotencyId'],
  GetItems: ['table', 'shardingKey', 'bucket', 'sortingKey', 'keyCondition', 'filter', 'reverse', 'limit', 'marker', 'attributes', 'projection', 'names', 'values', 'segment', 'totalSegments', 'consistentRead'],
  BatchWrite: ['table', 'puts', 'deletes', 'idempotencyId'],
  BatchGet: ['table', 'keys', 'attributes', 'projection', 'names', 'consistentRead'],
  DescribeSlices: ['table'],
  Advise: ['table', 'shardingKey', 'sortingKey', 'evenDistribution', 'items', 'accessLog', 'expectedItems', 'momentWrites'],
};

/** A router's operations forward these to the coordinator (router/forward.ts): table
 * changes are the coordinator's alone. */
export const TABLE_CHANGES: readonly OperationName[] = ['CreateTable', 'DeleteTable'];

export class Operations {
  /** `catalog`: a TableCatalog on the coordinator; a router's copy (a TableSource) refuses table changes. */
  constructor(
    /** Read by the DynamoDB endpoint too, to look a table up without a DescribeTable. */
    readonly catalog: TableSource | TableCatalog,
    /** The way to the slices (router.ts): the map's channels, with the retry policy. */
    private readonly router: Router,
    /** A router's: sends a table change to the coordinator, answers once the router's copy has it. */
    private readonly forwardChange?: (op: OperationName, payload: Payload) => Promise<unknown>,
    /** Requests, errors and latency per operation (process-metrics.ts), whichever API asked. */
    private readonly metrics?: Pick<ProcessMetrics, 'start'>,
  ) {
    // The slice count is read when a request needs it (after its table is found), as the map has it then.
    this.context = { tables: catalog, get sliceCount() { return router.sliceCount; } };
  }

  /** What parsing a request needs: the tables and the map's slice count. */
  private readonly context: RequestContext;

  private changes(): TableCatalog {
    if (!('create' in this.catalog)) throw new KeysliceError('Internal', 'table changes are made by the coordinator; a router forwards them');
    return this.catalog;
  }

  /** `passThrough`: the answer goes out in a client msgpack frame (the WebSocket API), so the
   * items that GetItem, BatchGet and GetItems read may stay packed as the workers send them
   * (PackedItem, PackedItems); otherwise (JSON, the DynamoDB API) every item is an object. */
  execute(op: OperationName, payload: Payload, passThrough = false): Promise<unknown> {
    if (this.metrics === undefined) return this.run(op, payload, passThrough);
    const done = this.metrics.start(op);
    const result = this.run(op, payload, passThrough);
    result.then(
      () => done(null),
      (err) => done(toKeysliceError(err).code),
    );
    return result;
  }

  private run(op: OperationName, payload: Payload, passThrough: boolean): Promise<unknown> {
    for (const field of Object.keys(payload)) {
      if (!FIELDS[op].includes(field)) {
        return Promise.reject(new KeysliceError('ValidationError', `${op} does not take "${field}" (it takes ${FIELDS[op].join(', ') || 'nothing'})`));
      }
    }
    try {
      if (this.forwardChange !== undefined && TABLE_CHANGES.includes(op)) return this.forwardChange(op, payload);
      if (op === 'GetItem' || op === 'GetItems' || op === 'BatchGet') return this[op](payload, passThrough);
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
    await Promise.allSettled(this.router.everyWorker([SliceOp.DropTable, table.id]));
    return { table: describe(table) };
  }

  // PutItem and GetItem, the point ops under the heaviest load, chain their promise instead of awaiting it
  // in an async function (one promise and resume less per op). run() turns a parse error thrown here into
  // a rejection.
  private PutItem(p: Payload) {
    const r = parsePutItem(this.context, p);
    const id = idempotencyIdOf(p.idempotencyId);
    return this.router
      .send(r.op, id === undefined ? null : { text: id, part: '' })
      .then((old) => (r.returnOld ? { item: old } : {}), (err) => Promise.reject(writeFailureNamed(err, r.name, id)));
  }

  private GetItem(p: Payload, passThrough: boolean) {
    const r = parseGetItem(this.context, p, passThrough);
    return this.router.read(r.op, r.consistent).then((item) => ({ item: answerItem(item, passThrough) }));
  }

  private async UpdateItem(p: Payload) {
    const r = parseUpdateItem(this.context, p);
    const item = await this.write(r.name, r.op, idempotencyIdOf(p.idempotencyId));
    return r.returnValues === 'none' ? {} : { item };
  }

  private async DeleteItem(p: Payload) {
    const r = parseDeleteItem(this.context, p);
    const result = await this.write(r.name, r.op, idempotencyIdOf(p.idempotencyId));
    if (!r.returnOld) {
      assert(typeof result === 'boolean', 'a delete without returnOld answers whether it deleted');
      return { deleted: result };
    }
    assert(typeof result !== 'boolean', 'a delete with returnOld answers the old item or null');
    return { deleted: result !== null, item: result };
  }

  private async GetItems(p: Payload, passThrough: boolean) {
    const r = parseGetItems(this.context, p, passThrough);
    switch (r.kind) {
      case 'nothing':
        return { items: [], examined: 0 };
      case 'range': {
        const [items, lastKey, more, , examined] = await this.router.read(r.op, r.consistent);
        const list = answerItems(items, passThrough);
        return more && lastKey !== null ? { items: list, examined, marker: rangeMarker(lastKey) } : { items: list, examined };
      }
      case 'buckets': {
        const page = await gatherBuckets({ tableId: r.tableId, buckets: r.buckets, reverse: r.reverse, limit: r.limit, send: (op) => this.router.read(op, r.consistent) });
        const list = answerMerged(page.items, passThrough);
        return page.marker === undefined ? { items: list, examined: page.examined } : { items: list, examined: page.examined, marker: page.marker };
      }
      case 'scan':
        return this.scanPage(r.scan, passThrough);
    }
  }

  private async BatchWrite(p: Payload) {
    const { writes } = parseBatchWrite(this.context, p);
    const text = idempotencyIdOf(p.idempotencyId);
    // Each write has its own request id: one sent again after an unknown outcome is applied once (Router.send);
    // with the client's idempotency id, one made from it and the write's place (`puts.3`), the same in every copy.
    const results = await Promise.allSettled(writes.map((w) => this.router.send(w.op, text === undefined ? null : { text, part: `${w.list}.${w.index}` })));
    const failures: ItemFailure[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') failures.push(itemFailure(writes[i].list, writes[i].index, writes[i].name, r.reason));
    });
    return { failures };
  }

  private async BatchGet(p: Payload, passThrough: boolean) {
    const { gets, consistent } = parseBatchGet(this.context, p, passThrough);
    const results = await Promise.allSettled(gets.map((g) => this.router.read(g.op, consistent).then((item) => answerItem(item, passThrough))));
    const failures: ItemFailure[] = [];
    const items = results.map((r, i) => {
      if (r.status === 'fulfilled') return r.value;
      failures.push(itemFailure('keys', i, gets[i].name, r.reason));
      return null;
    });
    if (!passThrough) return { items: items as (Item | null)[], failures };
    // Packed, the items pass through as one list (PackedItems), a missing one as nil; the answer's fields are the same.
    return { items: PackedItems.ofItems(items.map((item) => (item === null ? PACKED_NIL : (item as PackedItem).bytes))), failures };
  }

  /** Each worker is asked for the slices the map gives it, and refuses unless it owns every one (load-report.ts
   * gatherTableLoad): asked again while slices change owners as often as a scan page is (in count and time, with the
   * Router's waits), else the refused nodes are named as unreported and the answer says that it is not complete. */
  private async DescribeSlices(p: Payload) {
    return tableLoad(this.catalog.get(p.table), this.router, describePart, WRONG_OWNER_RETRIES_MAX);
  }

  /** Judged here, on the event loop: ADVISE_ITEMS_MAX keeps one request short. */
  private async Advise(p: Payload) {
    const { nodes, owners } = this.router.layout();
    return adviseRequest(p, (name) => this.catalog.get(name), { sliceCount: this.router.sliceCount, nodes, owners, source: 'cluster' });
  }

  // ---- helpers -------------------------------------------------------------

  /** A single-item write: a failed condition names the item, a reused idempotency id names itself. */
  private async write<Op extends PutOp | UpdateOp | DeleteOp>(name: string, op: Op, idempotencyId: string | undefined): Promise<ResultOf<Op>> {
    try {
      return await this.router.send(op, idempotencyId === undefined ? null : { text: idempotencyId, part: '' });
    } catch (err) {
      throw writeFailureNamed(err, name, idempotencyId);
    }
  }

  /** A page of a full-table scan (or of one segment): the workers' parts, merged (scanPage). */
  private async scanPage(scan: ScanRequest, passThrough: boolean) {
    return scanPage(await this.router.scan(scan), scan.limit, passThrough);
  }
}

/** A page of a full-table scan (or of one segment) in (slice, key) order: each worker
 * returns its first `limit` examined items after the marker; the first `limit` of all,
 * merged, are the page. Packed (`passThrough`, ScanRequest's `packed`): the page's items move
 * as their bytes, cut from their workers' lists by their headers. */
export function scanPage(results: ScanResult[], limit: number, passThrough: boolean): { items: Item[] | PackedItems; examined: number; marker?: string } {
  // The page is the first `limit` examined entries (or about 1 MB of them) of all workers
  // merged; the filter's rejects (item null) count but are not returned. Each worker's
  // entries are in (slice, key) order, so the page is merged from the heads of the workers'
  // lists as far as it goes (sorting all of them took most of the router's time on a page).
  const heads = results.map(() => 0);
  const page: ScanEntry[] = [];
  let bytes = 0;
  while (page.length < limit && bytes < PAGE_BYTES_MAX) {
    let best = -1;
    for (let w = 0; w < results.length; w++) {
      const e = results[w][0][heads[w]];
      if (e === undefined) continue;
      const b = best < 0 ? undefined : results[best][0][heads[best]];
      if (b === undefined || e[0] < b[0] || (e[0] === b[0] && e[1] < b[1])) best = w;
    }
    if (best < 0) break;
    const e = results[best][0][heads[best]++];
    const prev = page[page.length - 1];
    // The nodes' order was refused, if wrong, where each answer was decoded (checkSliceResult: in (slice, key) order,
    // within the slices asked of that worker), and no slice is asked of two workers (Router.scanAsks): so the merge is
    // in order, each entry once.
    assert(prev === undefined || prev[0] < e[0] || (prev[0] === e[0] && prev[1] < e[1]), "a scan page's entries are in strict (slice, key) order");
    page.push(e);
    bytes += e[3];
  }
  const last = page.length === 0 ? null : page[page.length - 1];
  if (passThrough && last !== null) cutScanItems(results, last[0], last[1]);
  const items: (Item | Uint8Array)[] = [];
  for (const [, , item] of page) {
    // Packed, cutScanItems put a checked piece in place of every mark of the page, or refused the answer; asked for
    // objects, an answer with a mark was refused where it was decoded (checkSliceResult).
    assert(item !== KEPT_IN_LIST, 'every kept item of the page is cut from its list');
    if (item !== null) items.push(item);
  }
  // What the workers read, though the page uses only the first `limit` of it.
  const examined = results.reduce((n, r) => n + r[0].length, 0);
  const more = page.length < examined || results.some((r) => !r[1]);
  const list = answerMerged(items as Item[] | Uint8Array[], passThrough);
  if (!more) return { items: list, examined };
  // A worker with more to read answers at least one entry (a limit is at least 1): without one the page would have no
  // marker, and the scan would end there, short, as if it were done.
  if (last === null) throw new MalformedFrame('a scan worker answered that it has more but no entry');
  return { items: list, examined, marker: scanMarker(last[0], last[1]) };
}

/** A Get's item as the answer carries it: packed (the op's `packed`), checked and passed through (PackedItem);
 * an object as it is. The node link checked its form against the op (checkSliceResult). */
function answerItem(item: Item | Uint8Array | null, packed: boolean): Item | PackedItem | null {
  if (item === null) return null;
  return packed ? PackedItem.of(item as Uint8Array) : (item as Item);
}

/** A range's items (one node's answer to a GetItems by sharding key) as the answer carries them: packed, the node's
 * list passes through (PackedItems.ofList: checked as a Get's item is, item by item, in one walk); objects as they
 * are. Their form is the one the op asked for (checkSliceResult, where the answer was decoded); packed bytes that are
 * not items are refused as malformed: MalformedFrame, the request fails Internal and the other answers of its client
 * frame go on (never an assert: this is a node's input). */
export function answerItems(items: RangeItems, packed: boolean): Item[] | PackedItems {
  return packed ? PackedItems.ofList(items as Uint8Array) : (items as Item[]);
}

/** A merged page's items (buckets, a scan page) as the answer carries them. Packed, each is a piece that
 * splitPackedList cut from a node's list and checked as it cut it (gatherBuckets, cutScanItems): a page's bytes are
 * read once, not cut and then walked again here. Objects are what the nodes answered, checked to be objects where
 * their answers were decoded (checkSliceResult). */
export function answerMerged(items: Item[] | Uint8Array[], packed: boolean): Item[] | PackedItems {
  if (!packed) return items as Item[];
  return PackedItems.ofItems(items as Uint8Array[]);
}

/** A single-item write's failure: a failed condition names the item, a reused idempotency id names itself. */
function writeFailureNamed(err: unknown, name: string, idempotencyId: string | undefined): unknown {
  if (err instanceof KeysliceError && err.code === 'ConditionalCheckFailed') {
    return new KeysliceError('ConditionalCheckFailed', `the condition is false for item "${name}"; nothing was changed`, err.details);
  }
  if (err instanceof KeysliceError && err.code === 'IdempotentParameterMismatch') {
    return new KeysliceError('IdempotentParameterMismatch', `idempotency id ${JSON.stringify(idempotencyId)} was used for a different request, which the slice of item "${name}" still remembers (up to ${APPLIED_REQUESTS_KEPT_MS} ms after it was applied); nothing was changed`);
  }
  return err;
}

function itemFailure(list: ItemFailure['list'], index: number, name: string, reason: unknown): ItemFailure {
  const err = toKeysliceError(reason);
  const failure: ItemFailure = { list, index, name, code: err.code, message: err.message, retryable: err.retryable };
  if (err.routerRetried) failure.routerRetried = true;
  return failure;
}

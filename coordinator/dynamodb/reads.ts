// Query and Scan on the native GetItems (a range scan of one partition key, or
// a full or segmented scan). Pages are read without a native filter or
// projection, and filtered and projected here: DynamoDB's Limit, ScannedCount,
// LastEvaluatedKey and ConsumedCapacity are all about the items examined, so
// the endpoint needs each examined item (and its size), not only the matches.
// A page ends after Limit examined items (at most keyslice's page of 10,000)
// or about 1 MB of them, as native pages do. A page that needs none of that
// per item (passesThrough) is not decoded: its items are written as JSON from
// the workers' msgpack (item-json.ts).
import { isDecimal } from '../../shared/decimal.js';
import type { Condition, Path } from '../../shared/expression-ast.js';
import { assert } from '../../shared/errors.js';
import { evaluate, projectItem } from '../../shared/expression-eval.js';
import { DYNAMODB_TOTAL_SEGMENTS_MAX, PAGE_ITEMS_MAX, SCAN_SEGMENTS_MAX } from '../../shared/limits.js';
import { PackedItems } from '../../shared/protocol.js';
import type { Item } from '../../shared/values.js';
import { fromNativeItem, itemSize } from './attribute-values.js';
import { itemsJson, lastKey } from './item-json.js';
import { consumedCapacity, readUnits, type CapacityMode } from './capacity.js';
import type { Context, Handler } from './context.js';
import { DynamoDbError } from './errors.js';
import { bindConditionHere, bindProjectionHere, requestExpressions, type RequestExpressions } from './expressions.js';
import { capacityModeOf } from './items.js';
import { attributesOf, keyRange } from './key-condition.js';
import { keyAttributes, keyFromWire, keyOf, tableSchema, type TableSchema } from './key-schema.js';
import type { Params } from './params.js';
import { queryStartMarker, scanStartMarker } from './start-key.js';

const SELECT = ['ALL_ATTRIBUTES', 'ALL_PROJECTED_ATTRIBUTES', 'SPECIFIC_ATTRIBUTES', 'COUNT'] as const;
type Select = (typeof SELECT)[number];

interface ReadShape {
  select: Select;
  limit: number | undefined;
  consistent: boolean;
  capacity: CapacityMode;
}

/** The parameters Query and Scan share. */
function readShape(p: Params): ReadShape {
  const select = p.enumOf('Select', SELECT);
  const limit = p.int('Limit', 1, 2 ** 31 - 1);
  const consistent = p.bool('ConsistentRead') ?? false;
  const capacity = capacityModeOf(p);
  const index = p.string('IndexName');
  p.check();
  if (index !== undefined) throw DynamoDbError.validation(`The table does not have the specified index: ${index} (keyslice has no secondary indexes yet)`);
  return { select: select ?? 'ALL_ATTRIBUTES', limit, consistent, capacity };
}

/** Select against the projection, with DynamoDB's messages. */
function checkSelect(p: Params, shape: ReadShape, projection: Path[] | null): void {
  const given = p.has('AttributesToGet') ? 'AttributesToGet' : 'ProjectionExpression';
  if (!p.has('Select')) {
    if (projection !== null) shape.select = 'SPECIFIC_ATTRIBUTES';
    return;
  }
  switch (shape.select) {
    case 'ALL_PROJECTED_ATTRIBUTES':
      throw DynamoDbError.validation('ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName');
    case 'ALL_ATTRIBUTES':
      if (projection !== null) throw DynamoDbError.validation(`Cannot specify the ${given} when choosing to get ALL_ATTRIBUTES`);
      return;
    case 'COUNT':
      if (projection !== null) throw DynamoDbError.validation(`Cannot specify the ${given} when choosing to get only the Count`);
      return;
    case 'SPECIFIC_ATTRIBUTES':
      if (projection === null) throw DynamoDbError.validation('Must specify the AttributesToGet or ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES');
  }
}

/** One page as DynamoDB answers it, from the native page of examined items. */
function page(schema: TableSchema, shape: ReadShape, filter: Condition | null, projection: Path[] | null, items: Item[], more: boolean): Record<string, unknown> {
  const matched = filter === null ? items : items.filter((item) => evaluate(filter, item));
  const out: Record<string, unknown> = {};
  if (shape.select !== 'COUNT') out.Items = matched.map((item) => fromNativeItem(projectItem(item, projection)));
  out.Count = matched.length;
  out.ScannedCount = items.length;
  if (more) {
    // Pages are read without a native filter, so a page that may continue holds what it examined.
    assert(items.length > 0, 'a native page with a marker and no item');
    out.LastEvaluatedKey = fromNativeItem(keyOf(schema, items[items.length - 1]));
  }
  // Every item examined counts, matched or not.
  const cc = consumedCapacity(shape.capacity, schema.name, () => ({ read: readUnits(items.reduce((n, item) => n + itemSize(item), 0), shape.consistent) }));
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
}

/** Whether a page's items go into the answer whole, as the slice workers packed them (itemsJson, written from their
 * msgpack without objects): nothing to filter, project, leave out (COUNT) or measure (ConsumedCapacity). */
function passesThrough(shape: ReadShape, filter: Condition | null, projection: Path[] | null): boolean {
  return filter === null && projection === null && shape.select !== 'COUNT' && shape.capacity === 'NONE';
}

/** The native page's result: its items as objects, or packed when passesThrough asked for them so. */
type NativePage = { items: Item[] | PackedItems; marker?: string };

/** One page as DynamoDB answers it, from the native page (`page`, or when passesThrough, the packed page written
 * as JSON); every page Query and Scan answer comes here or to emptyPage, and is counted there once by which way it
 * was written. */
function answer(ctx: Context, schema: TableSchema, shape: ReadShape, filter: Condition | null, projection: Path[] | null, result: NativePage): Record<string, unknown> {
  const more = result.marker !== undefined;
  if (!(result.items instanceof PackedItems)) {
    ctx.metrics?.dynamodbPage('objects');
    return page(schema, shape, filter, projection, result.items, more);
  }
  ctx.metrics?.dynamodbPage('msgpack');
  const items = itemsJson(result.items);
  const out: Record<string, unknown> = { Items: items, Count: items.count, ScannedCount: items.count };
  if (more) {
    const last = lastKey(items, keyAttributes(schema).map((a) => a.name));
    assert(last !== null, 'a native page with a marker and no item');
    out.LastEvaluatedKey = fromNativeItem(keyOf(schema, last));
  }
  return out;
}

/** A page answered without a read of the nodes, so empty (an empty segment of a parallel Scan; a Query continued
 * past a hash-key-only table's one item): no item was written from either form, and it is counted as that
 * (keyslice_dynamodb_pages_total{written="none"}), not as decoded objects. */
function emptyPage(ctx: Context, schema: TableSchema, shape: ReadShape, filter: Condition | null, projection: Path[] | null): Record<string, unknown> {
  ctx.metrics?.dynamodbPage('none');
  return page(schema, shape, filter, projection, [], false);
}

function startKey(p: Params, schema: TableSchema): Item | undefined {
  if (!p.has('ExclusiveStartKey')) return undefined;
  try {
    return keyFromWire(schema, p.map('ExclusiveStartKey'), 'ExclusiveStartKey');
  } catch (err) {
    if (err instanceof DynamoDbError && err.exception === 'ValidationException') throw DynamoDbError.validation(`The provided starting key is invalid: ${err.message}`);
    throw err;
  }
}

function nativeLimit(shape: ReadShape): number {
  return Math.min(shape.limit ?? PAGE_ITEMS_MAX, PAGE_ITEMS_MAX);
}

function readExpressions(p: Params, legacy: 'QueryFilter' | 'ScanFilter'): RequestExpressions {
  const fields = legacy === 'QueryFilter' ? (['KeyConditionExpression', 'FilterExpression', 'ProjectionExpression'] as const) : (['FilterExpression', 'ProjectionExpression'] as const);
  const legacyFields = legacy === 'QueryFilter' ? (['KeyConditions', 'QueryFilter', 'AttributesToGet', 'ConditionalOperator'] as const) : (['ScanFilter', 'AttributesToGet', 'ConditionalOperator'] as const);
  return requestExpressions(p, fields, legacyFields, []);
}

export const Query: Handler = async (ctx, p) => {
  const name = p.tableName();
  const forward = p.bool('ScanIndexForward') ?? true;
  const shape = readShape(p);
  const schema = await tableSchema(ctx.ops, name);
  const ex = readExpressions(p, 'QueryFilter');
  if (ex.texts.KeyConditionExpression === undefined) throw DynamoDbError.validation('Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.');
  const range = keyRange(bindConditionHere(ex, 'KeyConditionExpression')!, schema);
  const filter = bindConditionHere(ex, 'FilterExpression');
  const projection = bindProjectionHere(ex);
  checkSelect(p, shape, projection);
  if (filter !== null) {
    for (const a of attributesOf(filter)) {
      if (a === schema.hash.name || a === schema.range?.name) throw DynamoDbError.validation(`Filter Expression can only contain non-primary key attributes: Primary key attribute: ${a}`);
    }
  }
  const start = startKey(p, schema);
  const request: Record<string, unknown> = { table: name, shardingKey: range.hash, reverse: !forward, limit: nativeLimit(shape), consistentRead: shape.consistent };
  if (range.sort !== undefined) request.sortingKey = range.sort;
  if (start !== undefined) {
    if (schema.range === null) {
      // One partition key names at most one item: a page after it is empty.
      return emptyPage(ctx, schema, shape, filter, projection);
    }
    if (!sameValue(start[schema.hash.name], range.hash)) throw DynamoDbError.validation('The provided starting key is invalid: The provided key element does not match the schema');
    request.marker = queryStartMarker(schema, start, ctx.sliceCount);
  }
  const result = (await ctx.ops.execute('GetItems', request, passesThrough(shape, filter, projection)).catch(startKeyOutOfRange)) as NativePage;
  return answer(ctx, schema, shape, filter, projection, result);
};

function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b) === 0;
  if (isDecimal(a) && isDecimal(b)) return a.$N === b.$N; // canonical texts: equal numbers, equal texts
  return a === b;
}

/** The native side refuses a marker outside the query's range: DynamoDB's words for it. */
function startKeyOutOfRange(err: unknown): never {
  if (err instanceof Error && (err as { code?: string }).code === 'InvalidMarker') {
    throw DynamoDbError.validation('The provided starting key does not match the range key predicate');
  }
  throw err;
}

/** Segment s of T as a native segment: the same slices, [floor(s*C/T), floor((s+1)*C/T)).
 * The native scan takes at most SCAN_SEGMENTS_MAX segments; past that, with no more
 * slices than that, each DynamoDB segment is one slice or none. */
function nativeSegment(ctx: Context, segment: number, total: number): { segment: number; totalSegments: number } | 'empty' {
  if (total <= SCAN_SEGMENTS_MAX) return { segment, totalSegments: total };
  const c = ctx.sliceCount;
  if (c > SCAN_SEGMENTS_MAX) throw DynamoDbError.validation(`keyslice splits a scan of this cluster (${c} slices) into at most ${SCAN_SEGMENTS_MAX} segments; TotalSegments is ${total}`);
  const from = Math.floor((segment * c) / total);
  const to = Math.floor(((segment + 1) * c) / total);
  return from === to ? 'empty' : { segment: from, totalSegments: c };
}

export const Scan: Handler = async (ctx, p) => {
  const name = p.tableName();
  const segment = p.int('Segment', 0, DYNAMODB_TOTAL_SEGMENTS_MAX - 1);
  const total = p.int('TotalSegments', 1, DYNAMODB_TOTAL_SEGMENTS_MAX);
  const shape = readShape(p);
  if (segment !== undefined && total === undefined) {
    throw DynamoDbError.validation('The TotalSegments parameter is required but was not present in the request when Segment parameter is present');
  }
  if (total !== undefined && segment === undefined) {
    throw DynamoDbError.validation('The Segment parameter is required but was not present in the request when parameter TotalSegments is present');
  }
  if (segment !== undefined && segment >= total!) {
    throw DynamoDbError.validation(`The Segment parameter is zero-based and must be less than parameter TotalSegments: Segment: ${segment} is not less than TotalSegments: ${total}`);
  }
  const schema = await tableSchema(ctx.ops, name);
  const ex = readExpressions(p, 'ScanFilter');
  const filter = bindConditionHere(ex, 'FilterExpression');
  const projection = bindProjectionHere(ex);
  checkSelect(p, shape, projection);
  const start = startKey(p, schema);
  const request: Record<string, unknown> = { table: name, limit: nativeLimit(shape) };
  if (segment !== undefined) {
    const s = nativeSegment(ctx, segment, total!);
    if (s === 'empty') return emptyPage(ctx, schema, shape, filter, projection);
    Object.assign(request, s);
  }
  if (start !== undefined) request.marker = scanStartMarker(schema, start, ctx.sliceCount);
  const result = (await ctx.ops.execute('GetItems', request, passesThrough(shape, filter, projection)).catch((err) => {
    if (err instanceof Error && (err as { code?: string }).code === 'InvalidMarker') {
      throw DynamoDbError.validation('The provided starting key is invalid: it does not belong to this segment of the scan');
    }
    throw err;
  })) as NativePage;
  return answer(ctx, schema, shape, filter, projection, result);
};

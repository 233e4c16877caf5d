// BatchGetItem and BatchWriteItem over several tables, on the native BatchGet
// and BatchWrite (one per table, run side by side). The whole request is
// checked first (DynamoDB's 100 keys / 25 writes, duplicates, key schema, item
// size); writes or reads that fail at run time (a slice node unavailable, a
// slice over its capacity) come back as UnprocessedItems / UnprocessedKeys for
// the client to retry, as DynamoDB's do. When every one of them failed, the
// error itself is answered (ProvisionedThroughputExceededException when that
// was why), as DynamoDB does.
import type { ItemFailure } from '../../shared/api.js';
import { projectItem } from '../../shared/expression-eval.js';
import { KeysliceError } from '../../shared/errors.js';
import { BATCH_GET_ITEMS_MAX, BATCH_WRITE_ITEMS_MAX, DYNAMODB_BATCH_GET_RESPONSE_BYTES_MAX, ITEM_BYTES_MAX } from '../../shared/limits.js';
import { isPlainObject, type Item } from '../../shared/values.js';
import { fromNativeItem, itemSize, jsonType, toNativeItem } from './attribute-values.js';
import { CapacityTally, readUnits, writeUnits } from './capacity.js';
import type { Handler } from './context.js';
import { DynamoDbError, sdkRetryMultipliesWait, THROUGHPUT_MESSAGE } from './errors.js';
import { bindProjectionHere, requestExpressions } from './expressions.js';
import { capacityModeOf, checkItemCollectionMetrics } from './items.js';
import { checkItemKey, keyFromWire, keyOf, keyText, tableSchema, type TableSchema } from './key-schema.js';
import { checkTableName, Params } from './params.js';

function requestItems(p: Params): [string, unknown][] {
  p.required('RequestItems');
  const items = p.map('RequestItems') ?? {};
  const tables = Object.entries(items);
  if (p.has('RequestItems') && tables.length === 0) p.violation('{}', 'requestItems', 'Member must have length greater than or equal to 1');
  for (const [name] of tables) checkTableName(name, 'requestItems.key', (v, m, c) => p.violation(v, m, c));
  return tables;
}

/** The error to answer when every item of a batch failed at run time (exported for its test: dynamodb-unavailable-status). */
export function allFailed(failures: ItemFailure[]): DynamoDbError {
  const throttled = failures.every((f) => f.code === 'ThroughputExceeded');
  if (throttled) return new DynamoDbError('ProvisionedThroughputExceededException', THROUGHPUT_MESSAGE);
  const first = failures[0];
  // Status 400 only if an SDK's retry would wait out the router's bound again for every item: one item that it would
  // not (not retried by the router, or a WrongOwner) makes it 503, which the SDK retries.
  return first.retryable ? DynamoDbError.unavailable(first.message, failures.every(sdkRetryMultipliesWait)) : new DynamoDbError('InternalServerError', first.message);
}

function tableNotFound(err: unknown): never {
  if (err instanceof KeysliceError && err.code === 'TableNotFound') throw DynamoDbError.noTable();
  throw err;
}

export const BatchGetItem: Handler = async (ctx, p) => {
  const tables = requestItems(p);
  const capacity = capacityModeOf(p);
  p.check();
  // The request's shape and size first, then the tables and keys.
  const shapes = tables.map(([name, request]) => {
    if (!isPlainObject(request)) throw DynamoDbError.serialization(`${jsonType(request)} cannot be converted to a KeysAndAttributes structure (RequestItems.${name})`);
    const tp = new Params(request);
    const keysIn = tp.list('Keys');
    if (keysIn === undefined) tp.violation(null, `requestItems.${name}.member.keys`, 'Member must not be null');
    else if (keysIn.length === 0) tp.violation('[]', `requestItems.${name}.member.keys`, 'Member must have length greater than or equal to 1');
    const consistent = tp.bool('ConsistentRead') ?? false;
    tp.check();
    return { name, request, tp, keysIn: keysIn!, consistent };
  });
  if (shapes.reduce((n, s) => n + s.keysIn.length, 0) > BATCH_GET_ITEMS_MAX) throw DynamoDbError.validation('Too many items requested for the BatchGetItem call');
  const count = shapes.reduce((n, s) => n + s.keysIn.length, 0);
  const plans = await Promise.all(
    shapes.map(async ({ name, request, tp, keysIn, consistent }) => {
      const schema = await tableSchema(ctx.ops, name);
      const keys = keysIn.map((k, i) => keyFromWire(schema, k, `RequestItems.${name}.Keys[${i}]`));
      const seen = new Set(keys.map((k) => keyText(schema, k)));
      if (seen.size !== keys.length) throw DynamoDbError.validation('Provided list of item keys contains duplicates');
      const projection = bindProjectionHere(requestExpressions(tp, ['ProjectionExpression'], ['AttributesToGet'], []));
      return { name, request, schema, keys, keysIn, consistent, projection };
    }),
  );

  const tally = new CapacityTally(capacity);
  const results = await Promise.all(
    plans.map((plan) => ctx.ops.execute('BatchGet', { table: plan.name, keys: plan.keys, consistentRead: plan.consistent }).catch(tableNotFound) as Promise<{ items: (Item | null)[]; failures: ItemFailure[] }>),
  );
  const failures = results.flatMap((r) => r.failures);
  if (failures.length === count) throw allFailed(failures);
  const responses: Record<string, unknown[]> = {};
  const unprocessed: Record<string, Record<string, unknown>> = {};
  let bytes = 0;
  plans.forEach((plan, t) => {
    const { items, failures: tableFailures } = results[t];
    const failed = new Set(tableFailures.map((f) => f.index));
    const found: unknown[] = [];
    const left: unknown[] = [];
    items.forEach((item, i) => {
      // Past DynamoDB's 16 MB answer, the rest is left for the client to ask again.
      if (failed.has(i) || bytes > DYNAMODB_BATCH_GET_RESPONSE_BYTES_MAX) {
        left.push(plan.keysIn[i]);
        return;
      }
      const size = item === null ? 0 : itemSize(item);
      tally.add(plan.name, 'read', readUnits(size, plan.consistent));
      if (item === null) return;
      bytes += size;
      found.push(fromNativeItem(projectItem(item, plan.projection)));
    });
    responses[plan.name] = found;
    if (left.length > 0) unprocessed[plan.name] = { ...(plan.request as Record<string, unknown>), Keys: left };
  });
  const out: Record<string, unknown> = { Responses: responses, UnprocessedKeys: unprocessed };
  const cc = tally.list();
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

interface WritePlan {
  name: string;
  schema: TableSchema;
  requests: unknown[];
  puts: Item[];
  deletes: Item[];
  /** Index in `requests` of each put and each delete. */
  putAt: number[];
  deleteAt: number[];
  putSizes: number[];
}

export const BatchWriteItem: Handler = async (ctx, p) => {
  const tables = requestItems(p);
  const capacity = capacityModeOf(p);
  checkItemCollectionMetrics(p);
  for (const [name, requests] of tables) {
    if (!Array.isArray(requests)) throw DynamoDbError.serialization(`${jsonType(requests)} cannot be converted to a List of WriteRequests (RequestItems.${name})`);
    if (requests.length === 0) p.violation('[]', `requestItems.${name}.member`, 'Member must have length greater than or equal to 1');
    if (requests.length > BATCH_WRITE_ITEMS_MAX) p.violation(`[${requests.length} requests]`, `requestItems.${name}.member`, `Member must have length less than or equal to ${BATCH_WRITE_ITEMS_MAX}`);
  }
  p.check();
  const count = tables.reduce((n, [, r]) => n + (r as unknown[]).length, 0);
  if (count > BATCH_WRITE_ITEMS_MAX) throw DynamoDbError.validation('Too many items requested for the BatchWriteItem call');
  const plans: WritePlan[] = await Promise.all(
    tables.map(async ([name, requests]) => {
      const schema = await tableSchema(ctx.ops, name);
      const plan: WritePlan = { name, schema, requests: requests as unknown[], puts: [], deletes: [], putAt: [], deleteAt: [], putSizes: [] };
      const seen = new Set<string>();
      plan.requests.forEach((r, i) => {
        const where = `RequestItems.${name}[${i}]`;
        if (!isPlainObject(r)) throw DynamoDbError.serialization(`${jsonType(r)} cannot be converted to a WriteRequest (${where})`);
        const put = r.PutRequest;
        const del = r.DeleteRequest;
        const has = (x: unknown) => x !== undefined && x !== null;
        if (has(put) === has(del)) throw DynamoDbError.validation('Supplied WriteRequest must contain exactly one of PutRequest or DeleteRequest');
        let key: Item;
        if (has(put)) {
          if (!isPlainObject(put)) throw DynamoDbError.serialization(`${where}.PutRequest must be {"Item": ...}`);
          const item = toNativeItem(put.Item, `${where}.PutRequest.Item`);
          checkItemKey(schema, item);
          const size = itemSize(item);
          if (size > ITEM_BYTES_MAX) throw DynamoDbError.validation('Item size has exceeded the maximum allowed size');
          plan.puts.push(item);
          plan.putAt.push(i);
          plan.putSizes.push(size);
          key = keyOf(schema, item);
        } else {
          if (!isPlainObject(del)) throw DynamoDbError.serialization(`${where}.DeleteRequest must be {"Key": ...}`);
          key = keyFromWire(schema, del.Key, `${where}.DeleteRequest.Key`);
          plan.deletes.push(key);
          plan.deleteAt.push(i);
        }
        const text = keyText(schema, key);
        if (seen.has(text)) throw DynamoDbError.validation('Provided list of item keys contains duplicates');
        seen.add(text);
      });
      return plan;
    }),
  );

  const results = await Promise.all(
    plans.map((plan) => ctx.ops.execute('BatchWrite', { table: plan.name, puts: plan.puts, deletes: plan.deletes }).catch(tableNotFound) as Promise<{ failures: ItemFailure[] }>),
  );
  const failures = results.flatMap((r) => r.failures);
  if (failures.length === count) throw allFailed(failures);
  const tally = new CapacityTally(capacity);
  const unprocessed: Record<string, unknown[]> = {};
  plans.forEach((plan, t) => {
    const failed = new Set(results[t].failures.map((f) => (f.list === 'puts' ? plan.putAt[f.index] : plan.deleteAt[f.index])));
    const left = plan.requests.filter((_, i) => failed.has(i));
    if (left.length > 0) unprocessed[plan.name] = left;
    // A put is counted by its own size, a delete as one unit: the native batch does not return the items it replaced or deleted.
    plan.putAt.forEach((at, k) => failed.has(at) || tally.add(plan.name, 'write', writeUnits(plan.putSizes[k])));
    plan.deleteAt.forEach((at) => failed.has(at) || tally.add(plan.name, 'write', writeUnits(0)));
    tally.touch(plan.name, 'write');
  });
  const out: Record<string, unknown> = { UnprocessedItems: unprocessed };
  const cc = tally.list();
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

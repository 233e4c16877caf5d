// Single-item operations: PutItem, GetItem, UpdateItem, DeleteItem, on the
// native operations of the same names. The endpoint checks the request as
// DynamoDB does (key schema, types, sizes, expressions), hands conditions and
// updates to the native side (the worker that owns the item evaluates them in
// the same step as the write), and shapes the answer: ReturnValues,
// ConsumedCapacity, the old item of a failed condition.
import type { Path, UpdateAction } from '../../shared/expression-ast.js';
import { applyUpdate, projectItem } from '../../shared/expression-eval.js';
import { KeysliceError } from '../../shared/errors.js';
import { ITEM_BYTES_MAX } from '../../shared/limits.js';
import type { Item } from '../../shared/values.js';
import { fromNativeItem, itemSize, toNativeItem, withoutSystemAttributes } from './attribute-values.js';
import { CAPACITY_MODES, consumedCapacity, readUnits, writeUnits, type CapacityMode } from './capacity.js';
import type { Context, Handler } from './context.js';
import { CONDITION_FAILED_MESSAGE, DynamoDbError } from './errors.js';
import { bindProjectionHere, bindUpdateHere, requestExpressions, type RequestExpressions } from './expressions.js';
import { checkItemKey, keyAttributes, keyFromWire, tableSchema, type TableSchema } from './key-schema.js';
import type { Params } from './params.js';

const RETURN_VALUES = ['NONE', 'ALL_OLD', 'UPDATED_OLD', 'ALL_NEW', 'UPDATED_NEW'] as const;
type ReturnValues = (typeof RETURN_VALUES)[number];

export function capacityModeOf(p: Params): CapacityMode {
  return p.enumOf('ReturnConsumedCapacity', CAPACITY_MODES) ?? 'NONE';
}

/** ReturnItemCollectionMetrics only reports on tables with local secondary indexes, which keyslice has none of: checked, then nothing to report. */
export function checkItemCollectionMetrics(p: Params): void {
  p.enumOf('ReturnItemCollectionMetrics', ['SIZE', 'NONE']);
}

function returnValuesOf(p: Params, allowed: readonly ReturnValues[]): ReturnValues {
  const v = p.enumOf('ReturnValues', RETURN_VALUES) ?? 'NONE';
  if (!allowed.includes(v)) throw DynamoDbError.validation(`ReturnValues can only be ${allowed.filter((a) => a !== 'NONE').join(' or ')} or NONE`);
  return v;
}

/** Runs a native write; a failed condition becomes DynamoDB's exception, with the old item when asked for.
 * `tooLarge`: DynamoDB's message when the native side finds the written item too large. */
async function write(run: () => Promise<unknown>, oldOnFailure: boolean, tooLarge = 'Item size has exceeded the maximum allowed size'): Promise<unknown> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof KeysliceError && err.code === 'ConditionalCheckFailed') {
      const old = err.item;
      throw new DynamoDbError('ConditionalCheckFailedException', CONDITION_FAILED_MESSAGE, oldOnFailure && old ? { Item: fromNativeItem(old) } : {});
    }
    if (err instanceof KeysliceError && err.code === 'ItemTooLarge') throw DynamoDbError.validation(tooLarge);
    throw err;
  }
}

function checkSize(item: Item): number {
  const size = itemSize(item);
  if (size > ITEM_BYTES_MAX) throw DynamoDbError.validation('Item size has exceeded the maximum allowed size');
  return size;
}

/** The native placeholders of the request, only those it has. */
function placeholders(ex: { names: unknown; values: unknown }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (ex.names !== undefined) out.names = ex.names;
  if (ex.values !== undefined) out.values = ex.values;
  return out;
}

/** What PutItem, UpdateItem and DeleteItem read first, in DynamoDB's order: the table, the
 * item or key (required), ReturnValues, ReturnValuesOnConditionCheckFailure, capacity. */
interface WriteRequest {
  name: string;
  schema: TableSchema;
  returnValues: ReturnValues;
  onFailure: 'ALL_OLD' | 'NONE';
  capacity: CapacityMode;
}

async function writeRequest(ctx: Context, p: Params, required: 'Item' | 'Key', allowed: readonly ReturnValues[]): Promise<WriteRequest> {
  const name = p.tableName();
  p.required(required);
  const returnValues = returnValuesOf(p, allowed);
  const onFailure = p.enumOf('ReturnValuesOnConditionCheckFailure', ['ALL_OLD', 'NONE']) ?? 'NONE';
  const capacity = capacityModeOf(p);
  checkItemCollectionMetrics(p);
  p.check();
  return { name, schema: await tableSchema(ctx.ops, name), returnValues, onFailure, capacity };
}

/** The native write's payload: `fields` (item or key, update), the old item when it is
 * needed, the placeholders, and the condition with what its failure returns. */
function writePayload(w: WriteRequest, ex: RequestExpressions, needOld: boolean, fields: Record<string, unknown>): Record<string, unknown> {
  const payload: Record<string, unknown> = { table: w.name, ...fields, returnValues: needOld ? 'old' : 'none', ...placeholders(ex) };
  if (ex.texts.ConditionExpression !== undefined) {
    payload.condition = ex.texts.ConditionExpression;
    if (w.onFailure === 'ALL_OLD') payload.returnValuesOnConditionCheckFailure = 'old';
  }
  return payload;
}

export const PutItem: Handler = async (ctx, p) => {
  const w = await writeRequest(ctx, p, 'Item', ['NONE', 'ALL_OLD']);
  const { name, schema, returnValues, onFailure, capacity } = w;
  const item = toNativeItem(p.body.Item, 'Item');
  checkItemKey(schema, item);
  const size = checkSize(item);
  const ex = requestExpressions(p, ['ConditionExpression'], ['Expected', 'ConditionalOperator'], []);
  const needOld = returnValues === 'ALL_OLD' || capacity !== 'NONE';
  const payload = writePayload(w, ex, needOld, { item });
  const result = (await write(() => ctx.ops.execute('PutItem', payload), onFailure === 'ALL_OLD')) as { item?: Item | null };
  const old = result.item ?? null;
  const out: Record<string, unknown> = {};
  if (returnValues === 'ALL_OLD' && old !== null) out.Attributes = fromNativeItem(old);
  const cc = consumedCapacity(capacity, name, () => ({ write: writeUnits(Math.max(size, old === null ? 0 : itemSize(old))) }));
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

export const GetItem: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.required('Key');
  const consistent = p.bool('ConsistentRead') ?? false;
  const capacity = capacityModeOf(p);
  p.check();
  const schema = await tableSchema(ctx.ops, name);
  const key = keyFromWire(schema, p.body.Key);
  const ex = requestExpressions(p, ['ProjectionExpression'], ['AttributesToGet'], []);
  const projection = bindProjectionHere(ex);
  // The whole item is read: ConsumedCapacity counts its whole size, whatever the projection keeps.
  // Absent ConsistentRead is false, as in DynamoDB: any replica of the item's slice may answer.
  const { item } = (await ctx.ops.execute('GetItem', { table: name, key, consistentRead: consistent })) as { item: Item | null };
  const out: Record<string, unknown> = {};
  if (item !== null) out.Item = fromNativeItem(projectItem(item, projection));
  const cc = consumedCapacity(capacity, name, () => ({ read: readUnits(item === null ? 0 : itemSize(item), consistent) }));
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

/** The paths an update touches, for UPDATED_OLD and UPDATED_NEW. */
function actionPaths(actions: readonly UpdateAction[]): Path[] {
  return actions.map((a) => a.path);
}

export const UpdateItem: Handler = async (ctx, p) => {
  const w = await writeRequest(ctx, p, 'Key', RETURN_VALUES);
  const { name, schema, returnValues, onFailure, capacity } = w;
  const key = keyFromWire(schema, p.body.Key);
  const keyNames = keyAttributes(schema).map((a) => a.name);
  const ex = requestExpressions(p, ['UpdateExpression', 'ConditionExpression'], ['AttributeUpdates', 'Expected', 'ConditionalOperator'], keyNames);
  // Bound here too: to refuse key attributes with DynamoDB's message, and to compute the new item for ReturnValues.
  const actions = bindUpdateHere(ex);
  for (const a of actions) {
    if (keyNames.includes(a.path[0] as string)) {
      throw DynamoDbError.validation(`One or more parameter values were invalid: Cannot update attribute ${a.path[0]}. This attribute is part of the key`);
    }
  }
  const needOld = returnValues !== 'NONE' || capacity !== 'NONE';
  const payload = writePayload(w, ex, needOld, ex.texts.UpdateExpression === undefined ? { key } : { key, update: ex.texts.UpdateExpression });
  const result = (await write(() => ctx.ops.execute('UpdateItem', payload), onFailure === 'ALL_OLD', 'Item size to update has exceeded the maximum allowed size')) as { item?: Item | null };
  const out: Record<string, unknown> = {};
  if (!needOld) return out;
  const old = result.item ? withoutSystemAttributes(result.item) : null;
  // The worker applied exactly these actions to exactly this item (applyUpdate is pure), so the new item is known here.
  const next = applyUpdate(old ?? key, actions);
  let attributes: Item | null = null;
  if (returnValues === 'ALL_OLD') attributes = old;
  else if (returnValues === 'ALL_NEW') attributes = next;
  else if (returnValues === 'UPDATED_OLD') attributes = old === null ? null : projectItem(old, actionPaths(actions));
  else if (returnValues === 'UPDATED_NEW') attributes = projectItem(next, actionPaths(actions));
  if (attributes !== null && Object.keys(attributes).length > 0) out.Attributes = fromNativeItem(attributes);
  const cc = consumedCapacity(capacity, name, () => ({ write: writeUnits(Math.max(old === null ? 0 : itemSize(old), itemSize(next))) }));
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

export const DeleteItem: Handler = async (ctx, p) => {
  const w = await writeRequest(ctx, p, 'Key', ['NONE', 'ALL_OLD']);
  const { name, schema, returnValues, onFailure, capacity } = w;
  const key = keyFromWire(schema, p.body.Key);
  const ex = requestExpressions(p, ['ConditionExpression'], ['Expected', 'ConditionalOperator'], []);
  const needOld = returnValues === 'ALL_OLD' || capacity !== 'NONE';
  const payload = writePayload(w, ex, needOld, { key });
  const result = (await write(() => ctx.ops.execute('DeleteItem', payload), onFailure === 'ALL_OLD')) as { item?: Item | null };
  const old = result.item ?? null;
  const out: Record<string, unknown> = {};
  if (returnValues === 'ALL_OLD' && old !== null) out.Attributes = fromNativeItem(old);
  const cc = consumedCapacity(capacity, name, () => ({ write: writeUnits(old === null ? 0 : itemSize(old)) }));
  if (cc !== undefined) out.ConsumedCapacity = cc;
  return out;
};

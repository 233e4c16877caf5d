// A Query's KeyConditionExpression (or the one its KeyConditions stand for) as
// the native range: the partition key's value, and at most one condition on
// the sort key (= < <= > >= BETWEEN begins_with), with DynamoDB's messages.
import type { SortCondition } from '../../shared/api.js';
import { conjuncts, type Condition, type Operand } from '../../shared/expression-ast.js';
import type { KeyValue } from '../../shared/key-encoding.js';
import type { Value } from '../../shared/values.js';
import { DynamoDbError } from './errors.js';
import { checkKeyValue, scalarTypeOf, type KeyAttribute, type TableSchema } from './key-schema.js';

export interface KeyRange {
  hash: KeyValue;
  sort: SortCondition | undefined;
}

const notSupported = () => DynamoDbError.validation('Query key condition not supported');

function attributeOf(o: Operand): string {
  if (o.k !== 'path' || o.path.length !== 1 || typeof o.path[0] !== 'string') throw notSupported();
  return o.path[0];
}

function valueOf(o: Operand, schema: TableSchema, attr: KeyAttribute): KeyValue {
  if (o.k !== 'value') throw notSupported();
  const v: Value = o.v;
  if (scalarTypeOf(v) !== attr.type) throw DynamoDbError.validation('One or more parameter values were invalid: Condition parameter type does not match schema type');
  checkKeyValue(schema, attr, v);
  return v as KeyValue;
}

export function keyRange(c: Condition, schema: TableSchema): KeyRange {
  const parts = conjuncts(c);
  if (parts.length > 2) throw DynamoDbError.validation('Conditions can be of length 1 or 2 only');
  let hash: KeyValue | undefined;
  let sort: SortCondition | undefined;
  for (const x of parts) {
    const attribute = x.k === 'cmp' || x.k === 'between' || x.k === 'beginsWith' ? attributeOf(x.a) : null;
    if (attribute === null) throw notSupported();
    if (attribute === schema.hash.name) {
      if (x.k !== 'cmp' || x.op !== '=') throw notSupported();
      if (hash !== undefined) throw DynamoDbError.validation(`KeyConditionExpressions must only contain one condition per key`);
      hash = valueOf(x.b, schema, schema.hash);
      continue;
    }
    const range = schema.range;
    if (range === null || attribute !== range.name) throw DynamoDbError.validation(`Query condition missed key schema element: ${schema.hash.name}`);
    if (sort !== undefined) throw DynamoDbError.validation('KeyConditionExpressions must only contain one condition per key');
    if (x.k === 'cmp') {
      const v = valueOf(x.b, schema, range);
      if (x.op === '<>') throw notSupported();
      sort = x.op === '=' ? { eq: v } : x.op === '<' ? { lt: v } : x.op === '<=' ? { lte: v } : x.op === '>' ? { gt: v } : { gte: v };
    } else if (x.k === 'between') {
      sort = { between: [valueOf(x.low, schema, range), valueOf(x.high, schema, range)] };
    } else {
      if (range.type === 'N') {
        throw DynamoDbError.validation('Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N');
      }
      sort = { beginsWith: valueOf((x as Condition & { k: 'beginsWith' }).b, schema, range) as string | Uint8Array };
    }
  }
  if (hash === undefined) throw DynamoDbError.validation(`Query condition missed key schema element: ${schema.hash.name}`);
  return { hash, sort };
}

/** The top-level attributes a condition reads (a Query's filter may not read key attributes). */
export function attributesOf(c: Condition, out = new Set<string>()): Set<string> {
  const operand = (o: Operand): void => {
    if (o.k === 'path') out.add(String(o.path[0]));
    else if (o.k === 'size') operand(o.a);
  };
  switch (c.k) {
    case 'and':
    case 'or':
      attributesOf(c.a, out);
      attributesOf(c.b, out);
      break;
    case 'not':
      attributesOf(c.a, out);
      break;
    case 'cmp':
    case 'beginsWith':
    case 'contains':
      operand(c.a);
      operand(c.b);
      break;
    case 'between':
      operand(c.a);
      operand(c.low);
      operand(c.high);
      break;
    case 'in':
      operand(c.a);
      c.list.forEach(operand);
      break;
    case 'exists':
    case 'notExists':
      out.add(String(c.path[0]));
      break;
    case 'type':
      operand(c.a);
      break;
  }
  return out;
}

// DynamoDB's legacy (pre-expression) parameters, rewritten as the expressions
// they are equivalent to, so that one code path serves both: Expected ->
// ConditionExpression, KeyConditions -> KeyConditionExpression, QueryFilter and
// ScanFilter -> FilterExpression, AttributesToGet -> ProjectionExpression,
// AttributeUpdates -> UpdateExpression, joined by ConditionalOperator. Every
// attribute name and value goes through a generated placeholder, so no name
// needs escaping. DynamoDB refuses a request that mixes the two styles
// (expressions.ts refuseMixing), so the generated placeholders are the only ones.
import { isPlainObject, setOwn, type Value } from '../../shared/values.js';
import { jsonType, toNativeValue } from './attribute-values.js';
import { DynamoDbError } from './errors.js';
import type { ExpressionField, RequestExpressions } from './expressions.js';
import type { Params } from './params.js';

export const LEGACY_PARAMETERS = ['Expected', 'KeyConditions', 'QueryFilter', 'ScanFilter', 'AttributesToGet', 'AttributeUpdates', 'ConditionalOperator'] as const;
export type LegacyParameter = (typeof LEGACY_PARAMETERS)[number];

const OPERATORS = ['EQ', 'NE', 'LE', 'LT', 'GE', 'GT', 'NOT_NULL', 'NULL', 'CONTAINS', 'NOT_CONTAINS', 'BEGINS_WITH', 'IN', 'BETWEEN'] as const;
type Operator = (typeof OPERATORS)[number];
const KEY_OPERATORS: readonly Operator[] = ['EQ', 'LE', 'LT', 'GE', 'GT', 'BEGINS_WITH', 'BETWEEN'];
const COMPARATORS: Partial<Record<Operator, string>> = { EQ: '=', NE: '<>', LE: '<=', LT: '<', GE: '>=', GT: '>' };

/** Generates placeholders for one request and collects what they stand for. */
class Placeholders {
  readonly names: Record<string, string> = {};
  readonly values: Record<string, Value> = {};
  private readonly nameOf = new Map<string, string>();
  private valueCount = 0;

  name(attribute: string): string {
    let p = this.nameOf.get(attribute);
    if (p === undefined) {
      p = `#legacy${this.nameOf.size}`;
      this.nameOf.set(attribute, p);
      setOwn(this.names, p, attribute);
    }
    return p;
  }

  value(v: Value): string {
    const p = `:legacy${this.valueCount++}`;
    this.values[p] = v;
    return p;
  }
}

function entries(v: unknown, field: string): [string, Record<string, unknown>][] {
  if (!isPlainObject(v)) throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to a Map (parameter ${field})`);
  return Object.entries(v).map(([k, x]) => {
    if (!isPlainObject(x)) throw DynamoDbError.serialization(`${jsonType(x)} cannot be converted to a structure (at ${field}.${k})`);
    return [k, x];
  });
}

function operatorOf(v: unknown, field: string, allowed: readonly Operator[]): Operator {
  if (typeof v !== 'string' || !(OPERATORS as readonly string[]).includes(v)) {
    throw DynamoDbError.validation(`1 validation error detected: Value '${String(v)}' at '${field}.comparisonOperator' failed to satisfy constraint: Member must satisfy enum value set: [${OPERATORS.join(', ')}]`);
  }
  if (!allowed.includes(v as Operator)) throw DynamoDbError.validation(`One or more parameter values were invalid: Unsupported operator on KeyCondition: ${v}`);
  return v as Operator;
}

/** One condition of the legacy form (attribute, operator, argument list) as an expression. */
function comparison(ph: Placeholders, attribute: string, op: Operator, args: unknown[], where: string): string {
  const count = args.length;
  const wants = op === 'NULL' || op === 'NOT_NULL' ? count === 0 : op === 'BETWEEN' ? count === 2 : op === 'IN' ? count >= 1 : count === 1;
  if (!wants) throw DynamoDbError.validation(`One or more parameter values were invalid: Invalid number of argument(s) for the ${op} ComparisonOperator`);
  const values = args.map((a, i) => toNativeValue(a, `${where}.AttributeValueList[${i}]`));
  const n = ph.name(attribute);
  const v = values.map((x) => ph.value(x));
  const comparator = COMPARATORS[op];
  if (comparator !== undefined) return `${n} ${comparator} ${v[0]}`;
  switch (op) {
    case 'NULL':
      return `attribute_not_exists(${n})`;
    case 'NOT_NULL':
      return `attribute_exists(${n})`;
    case 'CONTAINS':
      return `contains(${n}, ${v[0]})`;
    case 'NOT_CONTAINS':
      return `NOT contains(${n}, ${v[0]})`;
    case 'BEGINS_WITH':
      return `begins_with(${n}, ${v[0]})`;
    case 'IN':
      return `${n} IN (${v.join(', ')})`;
    default:
      return `${n} BETWEEN ${v[0]} AND ${v[1]}`;
  }
}

function argumentList(c: Record<string, unknown>, where: string): unknown[] {
  const list = c.AttributeValueList;
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw DynamoDbError.serialization(`${jsonType(list)} cannot be converted to a List (at ${where}.AttributeValueList)`);
  return list;
}

/** Expected: per attribute, Exists/Value or ComparisonOperator/AttributeValueList. */
function expected(ph: Placeholders, v: unknown): string[] {
  return entries(v, 'Expected').map(([attribute, c]) => {
    const where = `Expected.${attribute}`;
    const hasValue = c.Value !== undefined && c.Value !== null;
    if (c.ComparisonOperator !== undefined && c.ComparisonOperator !== null) {
      if (hasValue && c.AttributeValueList !== undefined) {
        throw DynamoDbError.validation(`One or more parameter values were invalid: Value and AttributeValueList cannot be used together for Attribute: ${attribute}`);
      }
      if (c.Exists !== undefined && c.Exists !== null) {
        throw DynamoDbError.validation(`One or more parameter values were invalid: Exists and ComparisonOperator cannot be used together for Attribute: ${attribute}`);
      }
      const op = operatorOf(c.ComparisonOperator, where, OPERATORS);
      return comparison(ph, attribute, op, hasValue ? [c.Value] : argumentList(c, where), where);
    }
    if (c.Exists === false) {
      if (hasValue) throw DynamoDbError.validation(`One or more parameter values were invalid: Value cannot be used when Exists is false for Attribute: ${attribute}`);
      return `attribute_not_exists(${ph.name(attribute)})`;
    }
    if (!hasValue) {
      throw DynamoDbError.validation(`One or more parameter values were invalid: Value must be provided when Exists is ${c.Exists === true ? 'true' : 'null'} for Attribute: ${attribute}`);
    }
    return `${ph.name(attribute)} = ${ph.value(toNativeValue(c.Value, `${where}.Value`))}`;
  });
}

/** QueryFilter, ScanFilter and KeyConditions: per attribute, ComparisonOperator and AttributeValueList. */
function conditions(ph: Placeholders, v: unknown, field: string, allowed: readonly Operator[]): string[] {
  return entries(v, field).map(([attribute, c]) => {
    const where = `${field}.${attribute}`;
    if (c.ComparisonOperator === undefined || c.ComparisonOperator === null) {
      throw DynamoDbError.validation(`1 validation error detected: Value null at '${field.charAt(0).toLowerCase() + field.slice(1)}.${attribute}.member.comparisonOperator' failed to satisfy constraint: Member must not be null`);
    }
    return comparison(ph, attribute, operatorOf(c.ComparisonOperator, where, allowed), argumentList(c, where), where);
  });
}

function joined(parts: string[], operator: string): string {
  return parts.length === 1 ? parts[0] : parts.map((x) => `(${x})`).join(` ${operator} `);
}

/** AttributeUpdates: per attribute, Action PUT (default), DELETE or ADD, and Value. */
function attributeUpdates(ph: Placeholders, v: unknown, keyNames: readonly string[]): string {
  const set: string[] = [];
  const remove: string[] = [];
  const add: string[] = [];
  const del: string[] = [];
  for (const [attribute, u] of entries(v, 'AttributeUpdates')) {
    if (keyNames.includes(attribute)) {
      throw DynamoDbError.validation(`One or more parameter values were invalid: Cannot update attribute ${attribute}. This attribute is part of the key`);
    }
    const action = u.Action ?? 'PUT';
    const hasValue = u.Value !== undefined && u.Value !== null;
    const value = () => ph.value(toNativeValue(u.Value, `AttributeUpdates.${attribute}.Value`));
    switch (action) {
      case 'PUT':
        if (!hasValue) throw DynamoDbError.validation(`One or more parameter values were invalid: Only DELETE action is allowed when no attribute value is specified: ${attribute}`);
        set.push(`${ph.name(attribute)} = ${value()}`);
        break;
      case 'DELETE':
        if (hasValue) del.push(`${ph.name(attribute)} ${value()}`);
        else remove.push(ph.name(attribute));
        break;
      case 'ADD':
        if (!hasValue) throw DynamoDbError.validation(`One or more parameter values were invalid: Only DELETE action is allowed when no attribute value is specified: ${attribute}`);
        add.push(`${ph.name(attribute)} ${value()}`);
        break;
      default:
        throw DynamoDbError.validation(
          `1 validation error detected: Value '${String(action)}' at 'attributeUpdates.${attribute}.member.action' failed to satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]`,
        );
    }
  }
  const clauses: string[] = [];
  if (set.length > 0) clauses.push(`SET ${set.join(', ')}`);
  if (remove.length > 0) clauses.push(`REMOVE ${remove.join(', ')}`);
  if (add.length > 0) clauses.push(`ADD ${add.join(', ')}`);
  if (del.length > 0) clauses.push(`DELETE ${del.join(', ')}`);
  return clauses.join(' ');
}

/** The legacy parameters among `allowed` (those the operation has) as expressions with their
 * placeholders; null when the request has none of them. */
export function legacyExpressions(p: Params, allowed: readonly LegacyParameter[], keyNames: readonly string[]): RequestExpressions | null {
  const has = (f: LegacyParameter) => allowed.includes(f) && p.has(f);
  if (!allowed.some(has)) return null;
  const operator = (allowed.includes('ConditionalOperator') ? p.enumOf('ConditionalOperator', ['AND', 'OR']) : undefined) ?? 'AND';
  p.check();
  if (has('ConditionalOperator') && !has('Expected') && !has('QueryFilter') && !has('ScanFilter')) {
    throw DynamoDbError.validation('One or more parameter values were invalid: ConditionalOperator can only be used when Filter or Expected has been specified');
  }
  const ph = new Placeholders();
  const texts: Partial<Record<ExpressionField, string>> = {};
  if (has('Expected')) texts.ConditionExpression = joined(expected(ph, p.body.Expected), operator);
  if (has('KeyConditions')) texts.KeyConditionExpression = joined(conditions(ph, p.body.KeyConditions, 'KeyConditions', KEY_OPERATORS), 'AND');
  for (const f of ['QueryFilter', 'ScanFilter'] as const) {
    if (has(f)) texts.FilterExpression = joined(conditions(ph, p.body[f], f, OPERATORS), operator);
  }
  if (has('AttributesToGet')) {
    const names = p.list('AttributesToGet')!;
    if (names.length === 0) {
      throw DynamoDbError.validation("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1");
    }
    if (names.some((n) => typeof n !== 'string')) throw DynamoDbError.serialization('AttributesToGet must be a list of strings');
    const duplicate = names.find((n, i) => names.indexOf(n) !== i);
    if (duplicate !== undefined) throw DynamoDbError.validation(`One or more parameter values were invalid: Duplicate value in attribute name: ${duplicate}`);
    texts.ProjectionExpression = (names as string[]).map((n) => ph.name(n)).join(', ');
  }
  if (has('AttributeUpdates')) {
    const text = attributeUpdates(ph, p.body.AttributeUpdates, keyNames);
    if (text !== '') texts.UpdateExpression = text;
  }
  const names = Object.keys(ph.names).length > 0 ? ph.names : undefined;
  const values = Object.keys(ph.values).length > 0 ? ph.values : undefined;
  return { texts, names, values };
}

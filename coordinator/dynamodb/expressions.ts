// The expressions of a DynamoDB request (ConditionExpression, UpdateExpression,
// FilterExpression, ProjectionExpression, KeyConditionExpression) and their
// placeholders (ExpressionAttributeNames, ExpressionAttributeValues), checked
// as DynamoDB checks them: not empty, used only with expressions, every
// placeholder defined and every one used, each expression at most 4 KB. The
// grammar is keyslice's (shared/expression-parser.ts, DynamoDB's grammar).
import type { Condition, Path, UpdateAction } from '../../shared/expression-ast.js';
import { bindCondition, bindProjection, bindUpdate, Placeholders } from '../../shared/expression-bind.js';
import { parseCondition, parseProjection, parseUpdate } from '../../shared/expression-parser.js';
import { EXPRESSION_BYTES_MAX } from '../../shared/limits.js';
import { setOwn, type Value } from '../../shared/values.js';
import { toNativeValue } from './attribute-values.js';
import { DynamoDbError } from './errors.js';
import { legacyExpressions, type LegacyParameter } from './legacy.js';
import type { Params } from './params.js';
import { firstReservedName } from './reserved-words.js';

export type ExpressionField = 'ConditionExpression' | 'UpdateExpression' | 'FilterExpression' | 'ProjectionExpression' | 'KeyConditionExpression';

export interface RequestExpressions {
  texts: Partial<Record<ExpressionField, string>>;
  /** Placeholders, as keyslice values (undefined when the request has none). */
  names: Record<string, string> | undefined;
  values: Record<string, Value> | undefined;
}

const PLACEHOLDER = /[#:][A-Za-z0-9_]+/g;

/** Refuses a request that mixes legacy parameters with expression parameters, in DynamoDB's words. */
export function refuseMixing(p: Params, legacy: readonly string[], expressions: readonly string[]): void {
  const l = legacy.filter((f) => p.has(f));
  const e = expressions.filter((f) => p.has(f));
  if (l.length > 0 && e.length > 0) {
    throw DynamoDbError.validation(
      `Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {${l.join(', ')}} Expression parameters: {${e.join(', ')}}`,
    );
  }
}

/** Reads and checks the request's expressions among `fields` and its placeholders. */
export function readExpressions(p: Params, fields: readonly ExpressionField[]): RequestExpressions {
  const texts: Partial<Record<ExpressionField, string>> = {};
  for (const f of fields) {
    const t = p.string(f);
    if (t === undefined) continue;
    if (t.trim() === '') throw DynamoDbError.validation(`Invalid ${f}: The expression can not be empty;`);
    const bytes = Buffer.byteLength(t);
    if (bytes > EXPRESSION_BYTES_MAX) throw DynamoDbError.validation(`Invalid ${f}: Expression size has exceeded the maximum allowed size; expression size: ${bytes}`);
    texts[f] = t;
  }
  const namesIn = p.map('ExpressionAttributeNames');
  const valuesIn = p.map('ExpressionAttributeValues');
  const any = Object.keys(texts).length > 0;
  if (namesIn !== undefined) {
    if (Object.keys(namesIn).length === 0) throw DynamoDbError.validation('ExpressionAttributeNames must not be empty');
    if (!any) throw DynamoDbError.validation('ExpressionAttributeNames can only be specified when using expressions');
  }
  if (valuesIn !== undefined) {
    if (Object.keys(valuesIn).length === 0) throw DynamoDbError.validation('ExpressionAttributeValues must not be empty');
    if (!any) throw DynamoDbError.validation('ExpressionAttributeValues can only be specified when using expressions');
  }
  let names: Record<string, string> | undefined;
  if (namesIn !== undefined) {
    names = {};
    for (const [k, v] of Object.entries(namesIn)) {
      if (typeof v !== 'string') throw DynamoDbError.serialization(`ExpressionAttributeNames.${k} must be a string`);
      if (v === '') throw DynamoDbError.validation(`ExpressionAttributeNames contains invalid value: Empty attribute name for key ${k}`);
      setOwn(names, k, v);
    }
  }
  let values: Record<string, Value> | undefined;
  if (valuesIn !== undefined) {
    values = {};
    for (const [k, v] of Object.entries(valuesIn)) setOwn(values, k, toNativeValue(v, `ExpressionAttributeValues.${k}`));
  }
  for (const f of fields) {
    const t = texts[f];
    if (t !== undefined) refuseReservedWords(f, t);
  }
  // DynamoDB's expressions have no literals, so a placeholder is used exactly when its text appears.
  const used = new Set<string>();
  for (const f of fields) {
    const t = texts[f];
    if (t === undefined) continue;
    for (const token of t.match(PLACEHOLDER) ?? []) {
      used.add(token);
      if (token.startsWith('#') && (names === undefined || !Object.hasOwn(names, token))) {
        throw DynamoDbError.validation(`Invalid ${f}: An expression attribute name used in the document path is not defined; attribute name: ${token}`);
      }
      if (token.startsWith(':') && (values === undefined || !Object.hasOwn(values, token))) {
        throw DynamoDbError.validation(`Invalid ${f}: An expression attribute value used in expression is not defined; attribute value: ${token}`);
      }
    }
  }
  const unusedNames = Object.keys(names ?? {}).filter((k) => !used.has(k));
  if (unusedNames.length > 0) throw DynamoDbError.validation(`Value provided in ExpressionAttributeNames unused in expressions: keys: {${unusedNames.join(', ')}}`);
  const unusedValues = Object.keys(values ?? {}).filter((k) => !used.has(k));
  if (unusedValues.length > 0) throw DynamoDbError.validation(`Value provided in ExpressionAttributeValues unused in expressions: keys: {${unusedValues.join(', ')}}`);
  return { texts, names, values };
}

/** DynamoDB refuses a reserved word written as an attribute name (reserved-words.ts). An expression that
 * does not parse is left alone here: it is refused where it is bound, with the parser's message. */
function refuseReservedWords(field: ExpressionField, text: string): void {
  let parsed: Parameters<typeof firstReservedName>[0];
  try {
    parsed = field === 'UpdateExpression' ? parseUpdate(text, field) : field === 'ProjectionExpression' ? parseProjection(text, field) : parseCondition(text, field);
  } catch {
    return;
  }
  const name = firstReservedName(parsed);
  if (name !== null) throw DynamoDbError.validation(`Invalid ${field}: Attribute name is a reserved keyword; reserved keyword: ${name}`);
}

/** The request's expressions: its own (`fields`) or those its legacy parameters (`legacy`)
 * stand for; `keyNames` are the table's key attributes (AttributeUpdates may not name them). */
export function requestExpressions(p: Params, fields: readonly ExpressionField[], legacy: readonly LegacyParameter[], keyNames: readonly string[]): RequestExpressions {
  refuseMixing(p, legacy, fields);
  const fromLegacy = legacyExpressions(p, legacy, keyNames);
  if (fromLegacy === null) return readExpressions(p, fields);
  for (const f of ['ExpressionAttributeNames', 'ExpressionAttributeValues']) {
    if (p.has(f)) throw DynamoDbError.validation(`${f} can only be specified when using expressions`);
  }
  return fromLegacy;
}

/** Placeholders for binding expressions here, at the endpoint (reads filter and project here). */
function placeholders(ex: RequestExpressions): Placeholders {
  return new Placeholders(ex.names, ex.values);
}

export function bindConditionHere(ex: RequestExpressions, field: ExpressionField): Condition | null {
  const text = ex.texts[field];
  return text === undefined ? null : bindCondition(parseCondition(text, field), placeholders(ex), field);
}

export function bindProjectionHere(ex: RequestExpressions): Path[] | null {
  const text = ex.texts.ProjectionExpression;
  return text === undefined ? null : bindProjection(parseProjection(text, 'ProjectionExpression'), placeholders(ex), 'ProjectionExpression');
}

/** The update's actions; key attributes are checked by the caller (DynamoDB's message names the attribute). */
export function bindUpdateHere(ex: RequestExpressions): UpdateAction[] {
  const text = ex.texts.UpdateExpression;
  return text === undefined ? [] : bindUpdate(parseUpdate(text, 'UpdateExpression'), placeholders(ex), 'UpdateExpression', []);
}

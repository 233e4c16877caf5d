// A table as DynamoDB sees it (HASH and RANGE key, types S, N, B) over the
// native table (sharding key, sorting key, types string, number, binary), and
// the checks DynamoDB makes on keys and on the key attributes of items, with
// its messages, before anything reaches the native operations.
import type { KeyColumns, KeySchema, TableDescription } from '../../shared/api.js';
import { isDecimal } from '../../shared/decimal.js';
import { KeysliceError } from '../../shared/errors.js';
import { SHARDING_KEY_BYTES_MAX, SORTING_KEY_BYTES_MAX } from '../../shared/limits.js';
import { typeNameOf } from '../../shared/expression-eval.js';
import { isPlainObject, setOwn, type Item, type Value } from '../../shared/values.js';
import { describe, type Table } from '../metadata/catalog.js';
import type { Operations } from '../router/operations.js';
import { toNativeValue } from './attribute-values.js';
import { DynamoDbError } from './errors.js';

export type ScalarType = 'S' | 'N' | 'B';

export interface KeyAttribute {
  name: string;
  type: ScalarType;
}

export interface TableSchema {
  name: string;
  hash: KeyAttribute;
  range: KeyAttribute | null;
  /** Even distribution: buckets per partition key (keyslice's option), or null. */
  buckets: number | null;
  /** ms since the epoch, from the native catalog. */
  createdAt: number;
}

const TO_SCALAR = { string: 'S', number: 'N', binary: 'B' } as const;
const FROM_SCALAR = { S: 'string', N: 'number', B: 'binary' } as const;

export function nativeKeySchema(k: KeyAttribute): KeySchema {
  return { name: k.name, type: FROM_SCALAR[k.type] };
}

/** A native key side as DynamoDB's single key attribute. A native table whose key has
 * several columns has no DynamoDB equivalent: the endpoint refuses it rather than guess. */
function singleColumn(table: string, side: string, k: KeyColumns): KeyAttribute {
  const columns = Array.isArray(k) ? k : [k];
  if (columns.length !== 1) {
    throw DynamoDbError.validation(`Table ${table} has a ${side} key of ${columns.length} columns, which the DynamoDB API cannot express; use keyslice's native API for it`);
  }
  return { name: columns[0].name, type: TO_SCALAR[columns[0].type] };
}

export function schemaOf(t: TableDescription): TableSchema {
  return {
    name: t.name,
    hash: singleColumn(t.name, 'sharding', t.shardingKey),
    range: t.sortingKey === null ? null : singleColumn(t.name, 'sorting', t.sortingKey),
    buckets: t.evenDistribution?.buckets ?? null,
    createdAt: t.createdAt,
  };
}

/** Schemas by catalog entry. The catalog makes a new entry for every table it creates,
 * so a table deleted and created again under its name (by either API) is a new key
 * here and is never answered with the old schema; a deleted table's entry goes with it. */
const schemas = new WeakMap<Table, TableSchema>();

/** The schema of a table, from the catalog (each DynamoDB operation asks for it once);
 * ResourceNotFoundException when there is none. */
export async function tableSchema(ops: Operations, name: string): Promise<TableSchema> {
  let table: Table;
  try {
    table = ops.catalog.get(name);
  } catch (err) {
    if (err instanceof KeysliceError && err.code === 'TableNotFound') throw DynamoDbError.noTable();
    throw err;
  }
  let schema = schemas.get(table);
  if (schema === undefined) {
    schema = schemaOf(describe(table));
    schemas.set(table, schema);
  }
  return schema;
}

export function keyAttributes(schema: TableSchema): KeyAttribute[] {
  return schema.range === null ? [schema.hash] : [schema.hash, schema.range];
}

export function scalarTypeOf(v: Value): ScalarType | 'other' {
  if (typeof v === 'string') return 'S';
  if (typeof v === 'number' || isDecimal(v)) return 'N';
  if (v instanceof Uint8Array) return 'B';
  return 'other';
}

/** A key attribute's value, checked for emptiness, size and keyslice's object-name rules. */
export function checkKeyValue(schema: TableSchema, attr: KeyAttribute, v: Value): void {
  const isHash = attr === schema.hash;
  if (typeof v === 'string' && v.length === 0) {
    throw DynamoDbError.validation(`One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: ${attr.name}`);
  }
  if (v instanceof Uint8Array && v.byteLength === 0) {
    throw DynamoDbError.validation(`One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: ${attr.name}`);
  }
  const bytes = typeof v === 'string' ? Buffer.byteLength(v) : v instanceof Uint8Array ? v.byteLength : 0;
  if (isHash && bytes > SHARDING_KEY_BYTES_MAX) {
    throw DynamoDbError.validation(`One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of${SHARDING_KEY_BYTES_MAX} bytes`);
  }
  if (!isHash && bytes > SORTING_KEY_BYTES_MAX) {
    throw DynamoDbError.validation(`One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of ${SORTING_KEY_BYTES_MAX} bytes`);
  }
  // keyslice names an item <hash>.<range>, split at the first period (docs/dynamodb.md, "Keys").
  if (isHash && schema.range !== null) {
    if (typeof v === 'string' && v.includes('.')) {
      throw DynamoDbError.validation(
        `keyslice does not accept a period in the partition key of a table with a sort key (the item's name <partition>.<sort> splits at the first period): ${attr.name} is ${JSON.stringify(v)}`,
      );
    }
    if ((typeof v === 'number' && !Number.isSafeInteger(v)) || (isDecimal(v) && v.$N.includes('.'))) {
      throw DynamoDbError.validation(
        `keyslice needs a whole number as the numeric partition key of a table with a sort key (a double up to 2^53, or any whole number of up to 38 digits), so that the item's name <partition>.<sort> has no other period: ${attr.name} is ${isDecimal(v) ? v.$N : v}`,
      );
    }
  }
}

/** A `Key` parameter: exactly the table's key attributes, of their types. */
export function keyFromWire(schema: TableSchema, key: unknown, where = 'Key'): Item {
  if (!isPlainObject(key)) throw DynamoDbError.serialization(`${where} must be a map of attribute names to AttributeValues`);
  const attrs = keyAttributes(schema);
  const names = Object.keys(key);
  if (names.length !== attrs.length || !attrs.every((a) => Object.hasOwn(key, a.name))) {
    throw DynamoDbError.validation('The provided key element does not match the schema');
  }
  const out: Item = {};
  for (const a of attrs) {
    const v = toNativeValue(key[a.name], `${where}.${a.name}`);
    if (scalarTypeOf(v) !== a.type) throw DynamoDbError.validation('The provided key element does not match the schema');
    checkKeyValue(schema, a, v);
    setOwn(out, a.name, v);
  }
  return out;
}

/** The key attributes of an item being written: present, of their types, within limits. */
export function checkItemKey(schema: TableSchema, item: Item): void {
  for (const a of keyAttributes(schema)) {
    if (!Object.hasOwn(item, a.name)) throw DynamoDbError.validation(`One or more parameter values were invalid: Missing the key ${a.name} in the item`);
    const actual = scalarTypeOf(item[a.name]);
    if (actual !== a.type) {
      throw DynamoDbError.validation(
        `One or more parameter values were invalid: Type mismatch for key ${a.name} expected: ${a.type} actual: ${actual === 'other' ? typeName(item[a.name]) : actual}`,
      );
    }
    checkKeyValue(schema, a, item[a.name]);
  }
}

function typeName(v: Value): string {
  return typeNameOf(v);
}

/** The key attributes of a stored item. */
export function keyOf(schema: TableSchema, item: Item): Item {
  const out: Item = {};
  for (const a of keyAttributes(schema)) setOwn(out, a.name, item[a.name]);
  return out;
}

/** A key as a string, to find duplicates in a batch. */
export function keyText(schema: TableSchema, key: Item): string {
  return keyAttributes(schema)
    .map((a) => {
      const v = key[a.name];
      // A decimal's text never equals a double's (a decimal is never what a double holds).
      return v instanceof Uint8Array ? Buffer.from(v).toString('base64') : isDecimal(v) ? v.$N : String(v);
    })
    .join('\u0000');
}

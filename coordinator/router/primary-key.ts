// From what a client sends (an item, key attributes, or an object name) to
// where the item lives: the typed key values, the encoded partition key, the
// slice, and the object name (coordinator/router/object-name.ts).
import type { KeySchema } from '../../shared/api.js';
import { KeysliceError } from '../../shared/errors.js';
import { columnsHash, sliceOf, sliceOfPart, xxHash32 } from '../../shared/hashing.js';
import { decimalValueProblem, isDecimal, isNumberValue } from '../../shared/decimal.js';
import { decodeKey, encodeKeyPart, encodeShardingPart, encodeSortingParts, fromByteString, keyValueBytes, type KeyType, type KeyValue } from '../../shared/key-encoding.js';
import { SHARDING_KEY_BYTES_MAX, SORTING_KEY_BYTES_MAX } from '../../shared/limits.js';
import { describeType, isPlainObject, type Item } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { columnsText, isV3ioForm, objectName, parseObjectName } from './object-name.js';

/** An item's primary key, as the router reads it (placement, the encoded key, the object name). Not a plain record:
 * `name` is a getter on the class, and `table` an own field, so a spread, structuredClone, msgpack or JSON of one would
 * drop the name and carry the whole table. None is made (read its fields; send what they hold). */
export class PrimaryKey {
  private named: string | null = null;
  constructor(
    private readonly table: Table,
    /** The values of the sharding columns, in order. */
    readonly sharding: KeyValue[],
    /** The values of the sorting columns, in order (none for a simple key). */
    readonly sorting: KeyValue[],
    /** Even distribution: the item's bucket (stored under the sharding key with the bucket added). */
    readonly bucket: number | null,
    /** The encoded partition key: sharding part, then the sorting parts. */
    readonly key: string,
    readonly slice: number,
  ) {}

  /** The item's object name, made the first time it is read: a write stores it and names the item in its errors, a
   * GetItem never reads it (made for every key, it was a string built per GetItem for nothing). */
  get name(): string {
    return (this.named ??= objectName(this.table, this.sharding, this.sorting));
  }
}

/** Where one stored sharding key lives: its encoded part (the start of all its keys) and its slice. */
export interface ShardingPlacement {
  part: string;
  slice: number;
}

type Role = 'sharding' | 'sorting';

/** What every key of a table needs from its columns, worked out once per table rather than per request (a few
 * arrays per op, on the router's busiest path: bench/PROFILE.md). Kept with the column lists it was made from:
 * a table whose lists are other objects gets it made again. */
interface KeyColumns {
  sharding: readonly KeySchema[];
  sorting: readonly KeySchema[];
  /** Every key attribute's name, sharding columns first. */
  names: readonly string[];
  shardingTypes: readonly KeyType[];
  sortingTypes: readonly KeyType[];
}
const keyColumnsOf = new WeakMap<Table, KeyColumns>();

function keyColumns(table: Table): KeyColumns {
  const known = keyColumnsOf.get(table);
  if (known !== undefined && known.sharding === table.sharding && known.sorting === table.sorting) return known;
  const made: KeyColumns = {
    sharding: table.sharding,
    sorting: table.sorting,
    names: [...table.sharding, ...table.sorting].map((c) => c.name),
    shardingTypes: table.sharding.map((c) => c.type),
    sortingTypes: table.sorting.map((c) => c.type),
  };
  keyColumnsOf.set(table, made);
  return made;
}

/** Checks one key value against its column. `periodFree`: the value is the sharding
 * value of a v3io-form name `<sharding>.<sorting>`, so it may not hold a period. */
export function checkKeyValue(column: KeySchema, value: unknown, role: Role, periodFree: boolean): KeyValue {
  const what = `${role} key "${column.name}"`;
  if (value === undefined) throw new KeysliceError('InvalidKey', `${what} is missing`);
  switch (column.type) {
    case 'string':
      if (typeof value !== 'string') throw new KeysliceError('InvalidKey', `${what} must be a string, got ${describeType(value)}`);
      if (value.length === 0) throw new KeysliceError('InvalidKey', `${what} must not be empty`);
      if (periodFree && value.includes('.')) {
        throw new KeysliceError('InvalidKey', `${what} must not contain a period: the object name <sharding>.<sorting> splits at the first one (got ${JSON.stringify(value)})`);
      }
      break;
    case 'number':
      if (!isNumberValue(value)) {
        const why = isDecimal(value) ? `: ${decimalValueProblem(value)}` : `, got ${describeType(value)}`;
        throw new KeysliceError('InvalidKey', `${what} must be a finite number or a decimal ({"$N": "..."})${why}`);
      }
      // A whole decimal beyond 2^53 has no period either.
      if (periodFree && (typeof value === 'number' ? !Number.isSafeInteger(value) : value.$N.includes('.'))) {
        throw new KeysliceError('InvalidKey', `${what} must be an integer in a table with a sorting key, so that its object name has no period (got ${isDecimal(value) ? value.$N : value})`);
      }
      break;
    case 'binary':
      if (!(value instanceof Uint8Array)) throw new KeysliceError('InvalidKey', `${what} must be binary, got ${describeType(value)}`);
      if (value.byteLength === 0) throw new KeysliceError('InvalidKey', `${what} must not be empty`);
      break;
  }
  const max = role === 'sharding' ? SHARDING_KEY_BYTES_MAX : SORTING_KEY_BYTES_MAX;
  const bytes = keyValueBytes(column.type, value as KeyValue);
  if (bytes > max) throw new KeysliceError('KeyTooLarge', `${what} is ${bytes} bytes; the limit is ${max}`);
  return value as KeyValue;
}

/** Checks the value of column `index` of one side of the table's key. */
export function checkColumn(table: Table, role: Role, index: number, value: unknown): KeyValue {
  const columns = role === 'sharding' ? table.sharding : table.sorting;
  const periodFree = role === 'sharding' && table.sorting.length > 0 && isV3ioForm(table);
  return checkKeyValue(columns[index], value, role, periodFree);
}

/** Checks every value of one side, and that side's size limit over all its columns. */
function checkColumns(table: Table, role: Role, values: readonly unknown[]): KeyValue[] {
  const columns = role === 'sharding' ? table.sharding : table.sorting;
  const out: KeyValue[] = new Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = checkColumn(table, role, i, values[i]);
  if (columns.length > 1) {
    const max = role === 'sharding' ? SHARDING_KEY_BYTES_MAX : SORTING_KEY_BYTES_MAX;
    const bytes = out.reduce<number>((sum, v, i) => sum + keyValueBytes(columns[i].type, v), 0);
    if (bytes > max) {
      throw new KeysliceError('KeyTooLarge', `${role} key (${columns.map((c) => c.name).join(', ')}) is ${bytes} bytes in all; the limit is ${max}`);
    }
  }
  return out;
}

/** The stored sharding key of (sharding values, bucket), and its slice. With even
 * distribution a sharding key of one string column is stored as the string
 * `<value>_<bucket>` (v3io's form); any other as a tuple with the bucket added
 * as a number column. */
export function placement(table: Table, sharding: readonly KeyValue[], bucket: number | null, sliceCount: number): ShardingPlacement {
  return placementOf(keyColumns(table), sharding, bucket, sliceCount);
}

/** placement, with the table's key columns looked up already (once per request: keyOfItem, resolveKey). */
function placementOf(columns: KeyColumns, sharding: readonly KeyValue[], bucket: number | null, sliceCount: number): ShardingPlacement {
  const types = columns.shardingTypes;
  if (bucket === null) {
    if (types.length === 1) return { part: encodeKeyPart(types[0], sharding[0]), slice: sliceOf(types[0], sharding[0], sliceCount) };
    const part = encodeShardingPart(types, sharding);
    return { part, slice: xxHash32(fromByteString(part)) % sliceCount };
  }
  if (types.length === 1 && types[0] === 'string') {
    const stored = `${sharding[0] as string}_${bucket}`;
    return { part: encodeKeyPart('string', stored), slice: sliceOf('string', stored, sliceCount) };
  }
  const part = encodeShardingPart([...types, 'number'], [...sharding, bucket]);
  return { part, slice: xxHash32(fromByteString(part)) % sliceCount };
}

/** The even-distribution bucket of a sorting key: its hash modulo the bucket count. */
export function bucketOfKey(table: Table, sorting: readonly KeyValue[], columns = keyColumns(table)): number | null {
  const even = table.evenDistribution;
  if (!even) return null;
  return columnsHash(columns.sortingTypes, sorting, 'sorting') % even.buckets;
}

/** A stored sharding part as text (hot-key reports), and its slice. */
export function describePart(table: Table, part: string, sliceCount: number): { text: string; slice: number } {
  const slice = sliceOfPart(part, sliceCount);
  const types = table.sharding.map((c) => c.type);
  const bucketColumn = table.evenDistribution && !(types.length === 1 && types[0] === 'string');
  if (!bucketColumn && types.length === 1) return { text: columnsText(table.sharding, decodeKey(part, types) as KeyValue[], true), slice };
  const values = decodeKey(part, [bucketColumn ? [...types, 'number'] : types])[0] as KeyValue[];
  const text = columnsText(table.sharding, values, true);
  return { text: bucketColumn ? `${text}_${values[values.length - 1]}` : text, slice };
}

function build(table: Table, columns: KeyColumns, sharding: KeyValue[], sorting: KeyValue[], sliceCount: number): PrimaryKey {
  const bucket = bucketOfKey(table, sorting, columns);
  const where = placementOf(columns, sharding, bucket, sliceCount);
  const key = where.part + encodeSortingParts(columns.sortingTypes, sorting);
  return new PrimaryKey(table, sharding, sorting, bucket, key, where.slice);
}

/** The primary key of an item being written (its key attributes must be present). */
export function keyOfItem(table: Table, item: Item, sliceCount: number, columns = keyColumns(table)): PrimaryKey {
  const sharding = checkColumns(table, 'sharding', table.sharding.map((c) => item[c.name]));
  const sorting = checkColumns(table, 'sorting', table.sorting.map((c) => item[c.name]));
  return build(table, columns, sharding, sorting, sliceCount);
}

/** The primary key named by a client: key attributes (exactly those) or an object name. */
export function resolveKey(table: Table, ref: unknown, sliceCount: number): PrimaryKey {
  const columns = keyColumns(table);
  if (typeof ref === 'string') {
    const parsed = parseObjectName(table, ref);
    return build(table, columns, checkColumns(table, 'sharding', parsed.sharding), checkColumns(table, 'sorting', parsed.sorting), sliceCount);
  }
  if (!isPlainObject(ref)) throw new KeysliceError('InvalidKey', '"key" must be the key attributes (an object) or the object name (a string)');
  const names = columns.names;
  for (const name of Object.keys(ref)) {
    if (!names.includes(name)) throw new KeysliceError('InvalidKey', `"${name}" is not a key attribute of table "${table.name}" (its key attributes: ${names.join(', ')})`);
  }
  return keyOfItem(table, ref as Item, sliceCount, columns);
}

/** The sharding key of a query: the value (one column), the values in column
 * order (a list), or an object naming every sharding column. */
export function shardingValues(table: Table, v: unknown): KeyValue[] {
  const columns = table.sharding;
  if (Array.isArray(v)) {
    if (v.length !== columns.length) {
      throw new KeysliceError('InvalidKey', `"shardingKey" as a list needs ${columns.length} values, one for each of ${columns.map((c) => c.name).join(', ')}; got ${v.length}`);
    }
    return checkColumns(table, 'sharding', v);
  }
  if (isPlainObject(v) && !isDecimal(v)) {
    for (const name of Object.keys(v)) {
      if (!columns.some((c) => c.name === name)) {
        throw new KeysliceError('InvalidKey', `"shardingKey" names "${name}", which is not a sharding column of table "${table.name}" (${columns.map((c) => c.name).join(', ')})`);
      }
    }
    return checkColumns(table, 'sharding', columns.map((c) => v[c.name]));
  }
  if (columns.length > 1) {
    throw new KeysliceError('InvalidKey', `table "${table.name}" has a sharding key of ${columns.length} columns: "shardingKey" must be a list of their values or an object naming ${columns.map((c) => c.name).join(', ')}`);
  }
  return checkColumns(table, 'sharding', [v]);
}

// From what a client sends (an item, key attributes, or an object name) to
// where the item lives: the typed key values, the encoded partition key, the
// slice, and the object name `<sharding>.<sorting>`.
import type { KeySchema } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { bucketOf, sliceOf } from '../shared/hashing.js';
import { encodeKeyPart, keyValueBytes, type KeyValue } from '../shared/key-encoding.js';
import { SHARDING_KEY_BYTES_MAX, SORTING_KEY_BYTES_MAX } from '../shared/limits.js';
import { describeType, isPlainObject, type Item } from '../shared/values.js';
import type { Table } from './catalog.js';

export interface PrimaryKey {
  sharding: KeyValue;
  sorting: KeyValue | null;
  /** Even distribution: the item's bucket (its stored sharding key is `<sharding>_<bucket>`). */
  bucket: number | null;
  /** The encoded partition key: sharding part, then sorting part. */
  key: string;
  slice: number;
  name: string;
}

const NUMBER_TEXT = /^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Checks one key value against its schema and the size limit. */
export function checkKeyValue(schema: KeySchema, value: unknown, role: 'sharding' | 'sorting', compound: boolean): KeyValue {
  const what = `${role} key "${schema.name}"`;
  if (value === undefined) throw new KeysliceError('InvalidKey', `${what} is missing`);
  switch (schema.type) {
    case 'string':
      if (typeof value !== 'string') throw new KeysliceError('InvalidKey', `${what} must be a string, got ${describeType(value)}`);
      if (value.length === 0) throw new KeysliceError('InvalidKey', `${what} must not be empty`);
      if (role === 'sharding' && compound && value.includes('.')) {
        throw new KeysliceError('InvalidKey', `${what} must not contain a period: the object name <sharding>.<sorting> splits at the first one (got ${JSON.stringify(value)})`);
      }
      break;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new KeysliceError('InvalidKey', `${what} must be a finite number, got ${describeType(value)}`);
      if (role === 'sharding' && compound && !Number.isSafeInteger(value)) {
        throw new KeysliceError('InvalidKey', `${what} must be an integer in a table with a sorting key, so that its object name has no period (got ${value})`);
      }
      break;
    case 'binary':
      if (!(value instanceof Uint8Array)) throw new KeysliceError('InvalidKey', `${what} must be binary, got ${describeType(value)}`);
      if (value.byteLength === 0) throw new KeysliceError('InvalidKey', `${what} must not be empty`);
      break;
  }
  const max = role === 'sharding' ? SHARDING_KEY_BYTES_MAX : SORTING_KEY_BYTES_MAX;
  const bytes = keyValueBytes(schema.type, value as KeyValue);
  if (bytes > max) throw new KeysliceError('KeyTooLarge', `${what} is ${bytes} bytes; the limit is ${max}`);
  return value as KeyValue;
}

export function keyValueText(schema: KeySchema, value: KeyValue): string {
  if (schema.type === 'binary') return Buffer.from(value as Uint8Array).toString('base64');
  return String(value);
}

function parseKeyText(schema: KeySchema, text: string, role: 'sharding' | 'sorting'): unknown {
  switch (schema.type) {
    case 'string':
      return text;
    case 'number':
      if (!NUMBER_TEXT.test(text)) throw new KeysliceError('InvalidKey', `the ${role} part of the object name must be a number, got ${JSON.stringify(text)}`);
      return Number(text);
    case 'binary':
      if (text.length === 0 || !BASE64.test(text)) throw new KeysliceError('InvalidKey', `the ${role} part of the object name must be base64, got ${JSON.stringify(text)}`);
      return new Uint8Array(Buffer.from(text, 'base64'));
  }
}

/** The sharding key as stored: with even distribution, `<sharding>_<bucket>`. */
export function storedShardingKey(sharding: KeyValue, bucket: number | null): KeyValue {
  return bucket === null ? sharding : `${sharding as string}_${bucket}`;
}

function build(table: Table, sharding: KeyValue, sorting: KeyValue | null, sliceCount: number): PrimaryKey {
  const even = table.evenDistribution;
  const bucket = even ? bucketOf(table.sortingKey!.type, sorting!, even.buckets) : null;
  const stored = storedShardingKey(sharding, bucket);
  let key = encodeKeyPart(table.shardingKey.type, stored);
  let name = keyValueText(table.shardingKey, sharding);
  if (table.sortingKey !== null) {
    key += encodeKeyPart(table.sortingKey.type, sorting!);
    name += '.' + keyValueText(table.sortingKey, sorting!);
  }
  return { sharding, sorting, bucket, key, slice: sliceOf(table.shardingKey.type, stored, sliceCount), name };
}

/** The primary key of an item being written (its key attributes must be present). */
export function keyOfItem(table: Table, item: Item, sliceCount: number): PrimaryKey {
  const compound = table.sortingKey !== null;
  const sharding = checkKeyValue(table.shardingKey, item[table.shardingKey.name], 'sharding', compound);
  const sorting = compound ? checkKeyValue(table.sortingKey!, item[table.sortingKey!.name], 'sorting', true) : null;
  return build(table, sharding, sorting, sliceCount);
}

/** The primary key named by a client: key attributes (exactly those) or an object name. */
export function resolveKey(table: Table, ref: unknown, sliceCount: number): PrimaryKey {
  const compound = table.sortingKey !== null;
  if (typeof ref === 'string') {
    let shardingText = ref;
    let sortingText: string | null = null;
    if (compound) {
      const dot = ref.indexOf('.');
      if (dot < 0) throw new KeysliceError('InvalidKey', `object name ${JSON.stringify(ref)} must be <sharding>.<sorting> in table "${table.name}"`);
      shardingText = ref.slice(0, dot);
      sortingText = ref.slice(dot + 1);
    }
    const sharding = checkKeyValue(table.shardingKey, parseKeyText(table.shardingKey, shardingText, 'sharding'), 'sharding', compound);
    const sorting = compound ? checkKeyValue(table.sortingKey!, parseKeyText(table.sortingKey!, sortingText!, 'sorting'), 'sorting', true) : null;
    return build(table, sharding, sorting, sliceCount);
  }
  if (!isPlainObject(ref)) throw new KeysliceError('InvalidKey', '"key" must be the key attributes (an object) or the object name (a string)');
  for (const name of Object.keys(ref)) {
    if (name !== table.shardingKey.name && name !== table.sortingKey?.name) {
      throw new KeysliceError('InvalidKey', `"${name}" is not a key attribute of table "${table.name}"`);
    }
  }
  return keyOfItem(table, ref as Item, sliceCount);
}

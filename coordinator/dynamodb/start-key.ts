// ExclusiveStartKey and LastEvaluatedKey against the native continuation
// markers. DynamoDB continues a Query or Scan from the primary key of the last
// item it examined; keyslice from an opaque marker that holds the same key in
// its order-preserving encoding. The endpoint reads pages without a native
// filter, so the last item of a page is the last one examined and its key is
// the LastEvaluatedKey; a client's ExclusiveStartKey (also one it made up from
// an item, as DynamoDB allows) is encoded back into the marker here.
//
// The three marker forms are the ones coordinator/router/key-range.ts (range: r1),
// coordinator/router/bucket-gather.ts (even distribution: b1) and
// coordinator/router/operations.ts (scan: s1) write; test/dynamodb-paging.test.ts
// pages through all three, so a change of form shows there.
import { bucketOf, sliceOf } from '../../shared/hashing.js';
import { encodeKeyPart, fromByteString, type KeyType, type KeyValue } from '../../shared/key-encoding.js';
import type { Item } from '../../shared/values.js';
import { nativeKeySchema, type KeyAttribute, type TableSchema } from './key-schema.js';

function base64url(byteString: string): string {
  return Buffer.from(fromByteString(byteString)).toString('base64url');
}

function part(attr: KeyAttribute, v: KeyValue): string {
  return encodeKeyPart(nativeKeySchema(attr).type, v);
}

function nativeType(attr: KeyAttribute): KeyType {
  return nativeKeySchema(attr).type;
}

/** The partition key as stored: with even distribution, `<key>_<bucket of the sort key>`. */
function storedHash(schema: TableSchema, key: Item): KeyValue {
  const hash = key[schema.hash.name] as KeyValue;
  if (schema.buckets === null) return hash;
  return `${hash as string}_${bucketOf(nativeType(schema.range!), key[schema.range!.name] as KeyValue, schema.buckets)}`;
}

/** A Query continuing after `key` (the table has a sort key). */
export function queryMarker(schema: TableSchema, key: Item): string {
  const sort = part(schema.range!, key[schema.range!.name] as KeyValue);
  // Even distribution: every bucket resumes after the sort key, so the marker holds only that.
  if (schema.buckets !== null) return 'b1.' + base64url(sort);
  return 'r1.' + base64url(part(schema.hash, key[schema.hash.name] as KeyValue) + sort);
}

/** A Scan continuing after `key`: the slice that holds it and its encoded key. */
export function scanMarker(schema: TableSchema, key: Item, sliceCount: number): string {
  const stored = storedHash(schema, key);
  let encoded = part(schema.hash, stored);
  if (schema.range !== null) encoded += part(schema.range, key[schema.range.name] as KeyValue);
  return `s1.${sliceOf(nativeType(schema.hash), stored, sliceCount)}.${base64url(encoded)}`;
}

// ExclusiveStartKey and LastEvaluatedKey against the native continuation
// markers. DynamoDB continues a Query or Scan from the primary key of the last
// item it examined; keyslice from an opaque marker that holds the same key in
// its order-preserving encoding. The endpoint reads pages without a native
// filter, so the last item of a page is the last one examined and its key is
// the LastEvaluatedKey; a client's ExclusiveStartKey (also one it made up from
// an item, as DynamoDB allows) is encoded back into the marker here.
//
// The key is placed by the router's own code (router/primary-key.ts: the
// stored sharding key, with even distribution's bucket in whichever form the
// table uses) and the markers are written by router/key-range.ts, so a
// DynamoDB page continues exactly as a native one would.
import { assert } from '../../shared/errors.js';
import type { Item } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { bucketMarker, rangeMarker, scanMarker } from '../router/key-range.js';
import { keyOfItem, placement, type PrimaryKey } from '../router/primary-key.js';
import { nativeKeySchema, type TableSchema } from './key-schema.js';

/** The native table's key columns, as the router's key code reads them. Not a
 * catalog entry: only its name, key columns and even distribution are read. */
function keyTable(schema: TableSchema): Table {
  const sharding = [nativeKeySchema(schema.hash)];
  const sorting = schema.range === null ? [] : [nativeKeySchema(schema.range)];
  return {
    id: -1,
    name: schema.name,
    shardingKey: sharding[0],
    sortingKey: sorting[0] ?? null,
    evenDistribution: schema.buckets === null ? null : { buckets: schema.buckets },
    createdAt: schema.createdAt,
    sharding,
    sorting,
  };
}

function primaryKey(schema: TableSchema, key: Item, sliceCount: number): { table: Table; pk: PrimaryKey } {
  const table = keyTable(schema);
  return { table, pk: keyOfItem(table, key, sliceCount) };
}

/** A Query continuing after `key` (the table has a sort key). */
export function queryStartMarker(schema: TableSchema, key: Item, sliceCount: number): string {
  const { table, pk } = primaryKey(schema, key, sliceCount);
  if (pk.bucket === null) return rangeMarker(pk.key);
  // Even distribution: every bucket resumes after the sort key, so the marker holds only its part.
  const prefix = placement(table, pk.sharding, pk.bucket, sliceCount).part;
  assert(pk.key.startsWith(prefix), 'a key starts with its stored sharding part');
  return bucketMarker(pk.key.slice(prefix.length));
}

/** A Scan continuing after `key`: the slice that holds it and its encoded key. */
export function scanStartMarker(schema: TableSchema, key: Item, sliceCount: number): string {
  const { pk } = primaryKey(schema, key, sliceCount);
  return scanMarker(pk.slice, pk.key);
}

// Placement: slice = xxHash32(sharding key bytes) % sliceCount, and
// bucket = xxHash32(sorting key bytes) % buckets for even distribution; on the
// node that holds a slice, the worker thread that owns it is workerOf(slice).
// For one column the bytes hashed are the UTF-8 of a string, the raw bytes of a
// binary value, and the 8-byte order-preserving encoding of a number (so 1 and
// 1.0 agree). For several columns they are the encoded key parts of all of them
// (docs/key-encoding.md), so every column counts and no two tuples share bytes.
import xxhash from 'xxhash-wasm';
import { assert } from './errors.js';
import { decodeKey, encodeShardingPart, encodeSortingParts, fromByteString, encodeKeyPart, TAG_NUMBER, TAG_STRING, TAG_TUPLE, type KeyType, type KeyValue } from './key-encoding.js';

type Hasher = Awaited<ReturnType<typeof xxhash>>;
let hasher: Hasher | null = null;

/** Loads the WebAssembly hasher; call once at start-up before slicing. */
export async function initHashing(): Promise<void> {
  hasher ??= await xxhash();
}

function h(): Hasher {
  if (hasher === null) throw new Error('invariant broken: initHashing() was not awaited before hashing');
  return hasher;
}

export function xxHash32(value: string | Uint8Array): number {
  return typeof value === 'string' ? h().h32(value, 0) : h().h32Raw(value, 0);
}

export function keyHash(type: KeyType, value: KeyValue): number {
  if (type === 'number') return xxHash32(fromByteString(encodeKeyPart('number', value).slice(1)));
  return xxHash32(value as string | Uint8Array);
}

/** The worker thread that owns `slice` on a node of `workerCount` workers, for the slice's whole
 * life there: the node hands it the slice's ops, the router and the coordinator address them to it.
 * The layout is written here alone; slicesOfWorker is its inverse. */
export function workerOf(slice: number, workerCount: number): number {
  return slice % workerCount;
}

/** The slices among the first `sliceCount` that worker `worker` of a node of `workerCount` workers owns, ascending
 * (workerOf's inverse: worker, worker + workerCount, ...; none where the node has more workers than slices and this
 * one runs none). Lazy, so that a caller after the first, or the first it likes, reads no more (the coordinator asks
 * per node and worker at each placement tick: membership.ts). */
export function* slicesOfWorker(worker: number, workerCount: number, sliceCount: number): Generator<number, void, undefined> {
  assert(Number.isSafeInteger(workerCount) && workerCount >= 1 && Number.isSafeInteger(worker) && worker >= 0 && worker < workerCount, `worker ${worker} is one of a node's ${workerCount} workers`);
  for (let slice = worker; slice < sliceCount; slice += workerCount) {
    // The relation, so that a change of one of the two that the other does not follow is caught where it is first used.
    assert(workerOf(slice, workerCount) === worker, 'workerOf runs each slice slicesOfWorker gives a worker on that worker');
    yield slice;
  }
}

export function sliceOf(type: KeyType, value: KeyValue, sliceCount: number): number {
  return keyHash(type, value) % sliceCount;
}

/** The even-distribution bucket of an item: its sorting key's hash modulo the bucket count. */
export function bucketOf(type: KeyType, sortingValue: KeyValue, buckets: number): number {
  return keyHash(type, sortingValue) % buckets;
}

/** The hash of a key of one or several columns: one column as keyHash, several
 * as the bytes of their encoded parts (the sharding tuple part, or the sorting parts). */
export function columnsHash(types: readonly KeyType[], values: readonly KeyValue[], role: 'sharding' | 'sorting'): number {
  if (types.length === 1) return keyHash(types[0], values[0]);
  const encoded = role === 'sharding' ? encodeShardingPart(types, values) : encodeSortingParts(types, values);
  return xxHash32(fromByteString(encoded));
}

/** The slice of an encoded sharding part, the same as sliceOf/columnsHash on its
 * values: a tool that holds only stored keys (the hot-key report) places them with it. */
export function sliceOfPart(part: string, sliceCount: number): number {
  const tag = part.charCodeAt(0);
  if (tag === TAG_TUPLE) return xxHash32(fromByteString(part)) % sliceCount;
  const type: KeyType = tag === TAG_NUMBER ? 'number' : tag === TAG_STRING ? 'string' : 'binary';
  return sliceOf(type, decodeKey(part, [type])[0] as KeyValue, sliceCount);
}

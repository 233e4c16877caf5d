// Placement hashing: slice = xxHash32(sharding key bytes) % sliceCount, and
// bucket = xxHash32(sorting key bytes) % buckets for even distribution.
// The bytes hashed are the UTF-8 of a string, the raw bytes of a binary value,
// and the 8-byte order-preserving encoding of a number (so 1 and 1.0 agree).
import xxhash from 'xxhash-wasm';
import { fromByteString, encodeKeyPart, type KeyType, type KeyValue } from './key-encoding.js';

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

export function sliceOf(type: KeyType, value: KeyValue, sliceCount: number): number {
  return keyHash(type, value) % sliceCount;
}

/** The even-distribution bucket of an item: its sorting key's hash modulo the bucket count. */
export function bucketOf(type: KeyType, sortingValue: KeyValue, buckets: number): number {
  return keyHash(type, sortingValue) % buckets;
}

// Strings of their own for what the slice worker keeps from decoded bytes. msgpackr's native extractor
// (msgpackr-extract) hands out strings of SLICED_STRING_CHARS_MIN chars or more as slices of one long string it read
// a whole run of a buffer's strings into: kept, such a string keeps that whole run alive (measured:
// bench/value-retention.ts, bench/key-retention.ts). The store's keys (ownKey) and item values (ownStrings), and a
// replica's remembered answers (replication/applied-requests.ts), are made strings of their own here.
import { assert } from '../shared/errors.js';
import { SHARDING_KEY_BYTES_MAX, SORTING_KEY_BYTES_MAX } from '../shared/limits.js';
import type { SetValue, UpdateAction } from '../shared/expression-ast.js';
import type { Item, Value } from '../shared/values.js';

/** Shorter strings V8 never makes a slice of another (SlicedString::kMinLength): a substring this long or longer may be
 * a view of its parent string, which it keeps alive. */
const SLICED_STRING_CHARS_MIN = 13;
/** A key as a string of its own, for the tree (Partition.set, the one place keys enter it). msgpackr decodes a
 * string of SLICED_STRING_CHARS_MIN chars or more as a slice of one string it read the whole buffer's strings into (a
 * batch of client ops, a follower's record, a snapshot's record, a move's step): kept in the tree, the key kept that
 * whole text alive, values and all, as long as the key lived, long after its item was overwritten (measured:
 * bench/README.md, "Keys the tree keeps"). A key is a byte string (key encoding; every frame's keys are checked so
 * where they arrive, shared/protocol.ts), which latin1 copies exactly: a copy that differs is a key that broke that,
 * asserted here, where it would enter the tree, rather than at its slice's next compaction (keyUtf8Bytes). */
export function ownKey(key: string): string {
  if (key.length < SLICED_STRING_CHARS_MIN) return key;
  // Through one scratch buffer, written and read by Buffer's latin1 calls: a Buffer made per key (Buffer.from) cost
  // about 150 ns and a Buffer's 120 bytes a key, this copy about 130 ns and no Buffer (bench/README.md, "Keys the
  // tree keeps").
  const copy = latin1Copy(key);
  assert(copy === key, 'a key entering the tree is a byte string (checked where it arrived)');
  return copy;
}
/** `s` written as latin1 into one scratch buffer and read back: a flat string of its own, equal to `s` where every
 * char of `s` is at most U+00FF (a char above it is cut to its low byte, so the copy differs). For ownKey and
 * ownValueString. */
function latin1Copy(s: string): string {
  return s.length <= copyScratch.length ? copyScratch.toString('latin1', 0, copyScratch.write(s, 0, 'latin1')) : Buffer.from(s, 'latin1').toString('latin1');
}
/** latin1Copy's scratch: room for any key the store makes (a sharding key and a sorting key, encoded) and for any value
 * ownValueString copies (SLICED_STRING_CHARS_MAX chars). */
const copyScratch = Buffer.alloc(2 * (SHARDING_KEY_BYTES_MAX + SORTING_KEY_BYTES_MAX));
/** The longest string msgpackr-extract may hand out as a slice: it reads runs of ASCII strings of under 256 bytes
 * (fixstr, str 8), each within 40 bytes of the last, into one string of up to about 6,000 chars and slices each of
 * them out of it; a longer string (str 16, str 32) or one not ASCII it makes a string of its own. */
const SLICED_STRING_CHARS_MAX = 255;
/** `item` with each string it holds, at any depth, that may be a slice of a decoded run (SLICED_STRING_CHARS_MIN to
 * SLICED_STRING_CHARS_MAX chars) replaced, in place, by an equal string of its own: kept in the tree, such a value kept
 * its whole run alive, its batch's, record's or step's other items' strings and all (up to about 6 KB a string, for an
 * item of any size), long after those items were overwritten or deleted (measured: bench/value-retention.ts,
 * bench/PROFILE.md, "an item's values keep the text they were decoded from"). In place: the item is the store's from
 * here (a Put's decoded op, a replayed change's, an update's request values or copy), and an equal string changes nothing any reader
 * sees. The copy is ownKey's latin1 round trip (latin1Copy, through one scratch buffer): a flat string of exactly
 * the value's chars, where `(' ' + s).slice(1)` (branch valueretain) kept a slice of a copy, 32 bytes of SlicedString
 * and a char more for every such string the store holds; their put costs were not told apart (bench/PROFILE.md). */
export function ownStrings<V extends Item | Value[]>(v: V): V {
  // Only a string is written back; a list or map is made its own where it is (a name is never assigned an object).
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const s = ownValue(v[i]);
      if (s !== null) v[i] = s;
    }
  } else {
    for (const name in v) {
      const s = ownValue((v as Item)[name]);
      if (s !== null) (v as Item)[name] = s;
    }
  }
  return v;
}
/** An update action's values from the request made their own (ownedValue), in place: what an update of an owned
 * item brings into the store (SliceStore.update). Its paths are not: names enter an item as property keys. */
export function ownAction(a: UpdateAction): void {
  if (a.k === 'set') ownSetValue(a.value);
  else if (a.k === 'add') a.n = ownedValue(a.n);
  else if (a.k === 'addSet') a.set = ownedValue(a.set);
}
function ownSetValue(v: SetValue): void {
  if (v.k === 'value') v.v = ownedValue(v.v);
  else if (v.k === '+' || v.k === '-' || v.k === 'listAppend') {
    ownSetValue(v.a);
    ownSetValue(v.b);
  } else if (v.k === 'ifNotExists') ownSetValue(v.b);
}
/** `x` with its strings made its own (ownStrings of one value): an equal string of its own, or `x` itself, any list or
 * map in it made its own in place. */
function ownedValue<V extends Value>(x: V): V {
  return (ownValue(x) ?? x) as V;
}
/** ownStrings of one value: a string of its own where `x` is a string that may be a slice, else null (a list or map
 * made its own in place). */
function ownValue(x: Value): string | null {
  if (typeof x === 'string') return x.length < SLICED_STRING_CHARS_MIN || x.length > SLICED_STRING_CHARS_MAX ? null : ownValueString(x);
  if (x !== null && typeof x === 'object' && !(x instanceof Uint8Array)) ownStrings(x);
  return null;
}
/** `s` (SLICED_STRING_CHARS_MIN to SLICED_STRING_CHARS_MAX chars) as a flat string of its own, or null where it holds
 * a char above U+00FF, which latin1 cannot copy: such a string was never a slice (msgpackr-extract's runs hold ASCII
 * strings alone; a string not ASCII it makes a string of its own). The comparison reads the chars once more, cheaper
 * than a scan for them first. */
function ownValueString(s: string): string | null {
  const copy = latin1Copy(s);
  return copy === s ? copy : null;
}

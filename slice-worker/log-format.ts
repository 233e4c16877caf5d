// What the records of the log and of snapshots carry: msgpack arrays of
// effects (partition.ts). Plain msgpack maps, not records mode, so that a file
// needs no structure definitions from elsewhere to be read back.
import { Packr, Unpackr } from 'msgpackr';
import { PACKED_ITEM_CACHE_BYTES_MAX, REPLICATED_SCRATCH_BYTES_INITIAL, REPLICATED_SCRATCH_KEPT_BYTES_MAX } from '../shared/limits.js';
import { assert } from '../shared/errors.js';
import { arrayHeaderBytes, putArrayHeader, putStrHeader, putUint, strHeaderBytes, uintBytes } from '../shared/msgpack-writer.js';
import { stringHeaderBytes } from '../shared/msgpack-headers.js';
import { checkSliceChanges, EFFECT_SET, listHeader, MalformedFrame, plainRequestsEnd, setEffectsEnd, skipValue, type SetEffectVisit } from '../shared/protocol.js';
import type { Effect } from './partition.js';
import type { Item } from '../shared/values.js';
import type { AppliedList } from './replication/applied-requests.js';
import { bufferView, utf8Slice } from '../shared/buffer-view.js';

export const RECORD_KIND = {
  /** Log: the changes of one batch. */
  Effects: 1,
  /** Snapshot: a chunk of stored items, as set-effects. */
  SnapshotItems: 2,
  /** Snapshot: the last record, {items, lsn}. */
  SnapshotEnd: 3,
  /** Replica log (replication/replica-log.ts): what the slices' replicas wrote in one flush, [[slice, op], ...]. */
  ReplicaOps: 4,
  /** Replica log: one slice's whole durable state, [slice, state]; replaces what came before it. */
  ReplicaCheckpoint: 5,
  /** Replica log: a slice whose replica the node no longer holds, [slice, promisedTerm]; forgets what came before
   * it but the term promised. */
  ReplicaDrop: 6,
} as const;

const packr = new Packr({ useRecords: false });
// Decoded binary values end up in partitions: copy them out of the file buffer.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true });

/** An item as its msgpack in latin1 text (a char a byte), where an effect names it: an item a worker holds as its
 * bytes alone (partition.ts Stored.packed, a follower's applied item or a moved one), whose change the worker logs or
 * a move carries without building the item: written as those bytes (encodeEffects, SetEffectsText). */
export class ItemText {
  constructor(readonly text: string) {}
}
/** A set-effect whose item is its ItemText. */
export type TextSetEffect = [typeof EFFECT_SET, table: number, slice: number, key: string, item: ItemText, bytes: number];
/** A change as a worker records it (SliceStore's list for its log, a moving slice's changes): an Effect, or a set whose
 * item is held as its bytes. Read back (decodeEffects) it is an Effect: the same values. */
export type LoggedEffect = Effect | TextSetEffect;
export const isTextSet = (e: LoggedEffect): e is TextSetEffect => e[0] === EFFECT_SET && e[4] instanceof ItemText;

/** The changes as one msgpack list (decodeEffects reads it back): packed whole by msgpackr where no item is held as
 * its bytes; otherwise written around those bytes (SetEffectsText.addEffects), in a buffer of its own. The packed
 * form may view the encoder's reused buffer: copy it before the next call. */
export function encodeEffects(effects: readonly LoggedEffect[]): Uint8Array {
  if (!effects.some(isTextSet)) return packr.pack(effects);
  const out = new SetEffectsText();
  out.addEffects(effects);
  return encodeReplicatedItems(out, null);
}

export function decodeEffects(bytes: Uint8Array): Effect[] {
  return unpackr.unpack(bytes) as Effect[];
}

/** What a replicated slice's record payload holds (the effects of one task on the slice, and the writes among
 * them that carried a request id, with their answers), and likewise its replica's snapshot state (its items as
 * set-effects, and the writes it remembers: applied-requests.ts). Without requests it is the effects list
 * alone, as before request ids, so a log written then reads back unchanged; with them, a list
 * [WITH_REQUESTS, effects, instances, counters, of, ats, answers] (AppliedList's parts by place, not a map: a record
 * holds a few writes, and its keys would be most of what a follower decodes beside them). An effects list never
 * starts with a number (each effect is a list), which tells the two apart.
 * A log of node protocol 12 or 13 held string ids in a map {effects, requests}: it is read back as its effects
 * alone, the ids dropped, on every replica alike: only a router of those protocols could send such an id again, and
 * its coordinator and a node of this protocol refuse each other at Hello (NODE_PROTOCOL_VERSION). */
export interface ReplicatedChanges {
  effects: Effect[];
  requests: AppliedList | null;
}

const WITH_REQUESTS = 0;
type WithRequests = [typeof WITH_REQUESTS, Effect[], number[], number[], number[] | null, number[] | number, AppliedList['answers']];

export function encodeReplicated(effects: Effect[], requests: AppliedList | null): Uint8Array {
  // In a buffer of its own: a replica keeps these bytes (its log, a snapshot's state), and packr.pack gives a view
  // into a buffer it reuses (32 KiB or more), which a view would keep alive and which a postMessage would copy whole.
  return new Uint8Array(packReplicated(effects, requests));
}

/** The bytes of one record's payload, viewing packr's reused buffer (copy them before the next pack). */
function packReplicated(effects: Effect[], requests: AppliedList | null): Uint8Array {
  if (requests === null || requests.counters.length === 0) return packr.pack(effects);
  const { instances, counters, of, ats, answers } = requests;
  return packr.pack([WITH_REQUESTS, effects, instances, counters, of, ats, answers] satisfies WithRequests);
}

/** Where encodeReplicatedEach gathers a task's payloads before they get their one buffer; kept between tasks while at
 * most REPLICATED_SCRATCH_KEPT_BYTES_MAX (a larger task's is dropped after it). */
let scratch = new Uint8Array(REPLICATED_SCRATCH_BYTES_INITIAL);

/** encodeReplicated of each of a task's records (one per slice it wrote: SliceReplicas.propose), the payloads views of
 * one buffer of their own, exactly as long as they are together. A buffer each (an ArrayBuffer and its backing store
 * per put under writes spread over many slices) cost the leader more than the copy into the scratch buffer
 * (bench/README.md, "A task's payloads in one buffer"). The buffer lives while any of its payloads does: each slice's
 * replica keeps its record until that slice compacts (Replica.compact, per slice), so a slice that cannot commit
 * (a majority of its replicas unreachable) keeps the whole task's buffer, not only its own record: every payload of
 * the task, at most the task's slices times its largest payload (the chunks a worker runs in one turn: worker.ts
 * runBatches). */
export function encodeReplicatedEach(parts: readonly (readonly [Effect[], AppliedList | null])[]): Uint8Array[] {
  let buf = scratch;
  let at = 0;
  const ends: number[] = new Array(parts.length);
  for (let i = 0; i < parts.length; i++) {
    const b = packReplicated(parts[i][0], parts[i][1]);
    if (at + b.byteLength > buf.byteLength) {
      const bigger = new Uint8Array(Math.max(2 * buf.byteLength, at + b.byteLength));
      bigger.set(buf.subarray(0, at));
      buf = bigger;
    }
    buf.set(b, at);
    at += b.byteLength;
    ends[i] = at;
  }
  if (buf.byteLength <= REPLICATED_SCRATCH_KEPT_BYTES_MAX) scratch = buf;
  const own = buf.slice(0, at);
  let from = 0;
  return ends.map((end) => own.subarray(from, (from = end)));
}

/** How many bytes of UTF-8 a key takes (a byte string: shared/key-encoding.ts, a char 0..255 each; one of 0x80 and
 * above takes two, as msgpackr writes a string). */
function keyUtf8Bytes(key: string): number {
  let n = key.length;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    assert(c <= 0xff, 'an encoded key is a byte string');
    if (c >= 0x80) n++;
  }
  return n;
}

/** A slice's items as set-effects ([EFFECT_SET, table, slice, key, item, bytes], as partition.ts records them),
 * gathered to be written by hand (encodeReplicatedItems) around each item's msgpack as it was packed before (latin1
 * text, a char a byte: an item kept packed, partition.ts Stored.packed, in the client's form, which is what this
 * module's packr writes for an item, both being msgpackr with plain maps), so that a replica's snapshot state does not
 * pack its items again at each compaction. Its bytes are not always packr's (a number's width may differ), its values
 * are, and decodeReplicated reads them back the same (test/replica-log.test.ts). It also holds changes of any kind
 * among them, packed by msgpackr (addEffects): a worker log's record or a move's step whose items are held as bytes. */
export class SetEffectsText {
  /** An item's key; null for a run of effects msgpackr packed already (addEffects), in `items` at its place. */
  readonly keys: (string | null)[] = [];
  /** latin1 text (kept bytes), or a view of a list msgpackr packed (an item packed for this gathering alone; a run). */
  readonly items: (string | Uint8Array)[] = [];
  /** An item's size (itemBytes); a run's count of effects. */
  readonly sizes: number[] = [];
  /** Per partition: its table and slice, and how many entries the list holds once its own are in. */
  readonly partitions: { table: number; slice: number; end: number }[] = [];
  private effects = 0;

  /** The effects the list holds. */
  get count(): number {
    return this.effects;
  }

  /** Changes of any kind, in order: a set whose item is held as its bytes (ItemText) as an item, the others packed by
   * msgpackr a run at a time (their list's header left out). */
  addEffects(effects: readonly LoggedEffect[]): void {
    let from = 0;
    const run = (to: number) => {
      if (to === from) return;
      if (this.partitions.length === 0) this.partition(0, 0);
      this.keys.push(null);
      this.items.push(packr.pack(effects.slice(from, to)).subarray(arrayHeaderBytes(to - from)));
      this.sizes.push(to - from);
      this.partitions[this.partitions.length - 1].end++;
      this.effects += to - from;
    };
    for (let i = 0; i < effects.length; i++) {
      const e = effects[i];
      if (!isTextSet(e)) continue;
      run(i);
      from = i + 1;
      const last = this.partitions.at(-1);
      if (last === undefined || last.table !== e[1] || last.slice !== e[2]) this.partition(e[1], e[2]);
      this.add(e[3], e[4].text, e[5]);
    }
    run(effects.length);
  }

  /** Items that follow are of `table`'s partition of `slice`. */
  partition(table: number, slice: number): void {
    this.partitions.push({ table, slice, end: this.keys.length });
  }

  /** One item: its key, its msgpack (latin1 text, or its bytes) and its size (itemBytes). */
  add(key: string, item: string | Uint8Array, bytes: number): void {
    this.keys.push(key);
    this.items.push(item);
    this.sizes.push(bytes);
    this.partitions[this.partitions.length - 1].end++;
    this.effects++;
  }
}

/** encodeReplicated's bytes (the same values), of a slice's items gathered as SetEffectsText, in a buffer of their
 * own: a replica's snapshot state. Written byte by byte, each item's text in one call: a pack of each item by
 * msgpackr took about 0.5 us (an item of 200 bytes), this about 0.1 (bench/README.md, "A compaction writes the items'
 * kept bytes"). */
export function encodeReplicatedItems(effects: SetEffectsText, requests: AppliedList | null): Uint8Array {
  const withRequests = requests !== null && requests.counters.length > 0;
  // [WITH_REQUESTS, effects, instances, counters, of, ats, answers]: the tail's five by packr, packed as one list of
  // five with its fixarray header dropped.
  const list = withRequests ? packr.pack([requests.instances, requests.counters, requests.of, requests.ats, requests.answers]) : null;
  assert(list === null || list[0] === 0x95, 'a list of five has a fixarray header');
  const tail = list?.subarray(1) ?? null;
  const { keys, items, sizes, partitions } = effects;
  let size = (withRequests ? 2 : 0) + arrayHeaderBytes(effects.count) + (tail?.byteLength ?? 0);
  const keyBytes: number[] = new Array(keys.length);
  let from = 0;
  for (const { table, slice, end } of partitions) {
    const head = 1 + uintBytes(EFFECT_SET) + uintBytes(table) + uintBytes(slice);
    for (let i = from; i < end; i++) {
      const key = keys[i];
      if (key === null) {
        size += items[i].length;
        continue;
      }
      keyBytes[i] = keyUtf8Bytes(key);
      size += head + strHeaderBytes(keyBytes[i]) + keyBytes[i] + items[i].length + uintBytes(sizes[i]);
    }
    from = end;
  }
  const out = Buffer.allocUnsafeSlow(size);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let at = 0;
  if (withRequests) {
    out[at++] = 0x97;
    out[at++] = WITH_REQUESTS;
  }
  at = putArrayHeader(out, at, effects.count);
  from = 0;
  for (const { table, slice, end } of partitions) {
    for (let i = from; i < end; i++) {
      const key = keys[i];
      if (key === null) {
        const run = items[i] as Uint8Array;
        out.set(run, at);
        at += run.byteLength;
        continue;
      }
      out[at++] = 0x96;
      at = putUint(out, view, at, EFFECT_SET);
      at = putUint(out, view, at, table);
      at = putUint(out, view, at, slice);
      const n = keyBytes[i];
      at = putStrHeader(out, at, n);
      if (n === key.length) for (let j = 0; j < key.length; j++) out[at++] = key.charCodeAt(j);
      else {
        for (let j = 0; j < key.length; j++) {
          const c = key.charCodeAt(j);
          if (c < 0x80) out[at++] = c;
          else {
            out[at++] = 0xc0 | (c >>> 6);
            out[at++] = 0x80 | (c & 0x3f);
          }
        }
      }
      const item = items[i];
      if (typeof item === 'string') at += out.write(item, at, 'latin1');
      else {
        out.set(item, at);
        at += item.byteLength;
      }
      at = putUint(out, view, at, sizes[i]);
    }
    from = end;
  }
  if (tail !== null) {
    out.set(tail, at);
    at += tail.byteLength;
  }
  assert(at === size, 'a slice\'s state is as long as counted');
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** Each item's msgpack in a record's payload (encodeReplicated's: the effects list, alone or second in [WITH_REQUESTS,
 * ...]) as latin1 text, by the effects' places (null for an effect that is not a set), found by reading the msgpack
 * headers alone: for a follower to keep the bytes its leader packed with the items it applies (SliceStore.replay),
 * so that its first compaction after does not pack them again (SetEffectsText). `effects`: the payload decoded; null
 * too for a set whose item is over PACKED_ITEM_CACHE_BYTES_MAX (its size, as it records it), whose bytes are never
 * kept (SliceStore.replay), so not copied. Null for a payload not laid out so (a list of the effects' count, each a
 * set's six values or another list), or whose items hold ext values (skipValue). */
export function itemTextsOf(bytes: Uint8Array, effects: readonly Effect[]): (string | null)[] | null {
  const buf = bufferView(bytes);
  try {
    const [n, first] = listHeader(buf, buf[0] === 0x97 && buf[1] === WITH_REQUESTS ? 2 : 0);
    let at = first;
    if (n !== effects.length) return null;
    const texts: (string | null)[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const e = effects[i];
      if (buf[at] !== 0x96 || buf[at + 1] !== EFFECT_SET || e[0] !== EFFECT_SET || e[5] > PACKED_ITEM_CACHE_BYTES_MAX) {
        texts[i] = null;
        at = skipValue(buf, at);
        continue;
      }
      const start = skipValue(buf, skipValue(buf, skipValue(buf, at + 2))); // past the table, the slice and the key
      const end = skipValue(buf, start);
      texts[i] = buf.toString('latin1', start, end);
      at = skipValue(buf, end); // the item's size
    }
    return texts;
  } catch (err) {
    if (err instanceof MalformedFrame) return null;
    throw err;
  }
}

export function decodeReplicated(bytes: Uint8Array): ReplicatedChanges {
  const v = unpackr.unpack(bytes) as Effect[] | WithRequests | { effects: Effect[] };
  if (!Array.isArray(v)) return { effects: v.effects, requests: null };
  if (v.length === 0 || typeof v[0] !== 'number') return { effects: v as Effect[], requests: null };
  return { effects: v[1] as Effect[], requests: requestsAt(v, 2) };
}

/** A record's request ids from their five parts in WithRequests' order (instances, counters, of, ats, answers),
 * from `at` in `parts`: the whole payload decoded (decodeReplicated, decodeReplicatedFromPeer: from 2), or the parts
 * after the effects alone (readPackedReplicated: from 0). The one reader of that order; packReplicated writes it. */
function requestsAt(parts: readonly unknown[], at: number): AppliedList {
  return {
    instances: parts[at] as AppliedList['instances'],
    counters: parts[at + 1] as AppliedList['counters'],
    of: parts[at + 2] as AppliedList['of'],
    ats: parts[at + 3] as AppliedList['ats'],
    answers: parts[at + 4] as AppliedList['answers'],
  };
}

/** An item from its msgpack as latin1 text (what itemTextsOf and readPackedReplicated give, and a store keeps):
 * decoded by the unpackr that decodes a record's whole payload (decodeReplicated), so to the same item. From a plain
 * Uint8Array, as a follower's payloads are (views of their Append's copy): msgpackr gives a bin value as the kind of
 * array it reads, and a Buffer would make the item's binary values Buffers where the whole payload's decode gave
 * Uint8Arrays. */
export function decodeItemText(text: string): Item {
  const b = Buffer.from(text, 'latin1');
  return unpackr.unpack(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)) as Item;
}

/** Each set-effect's place in the payload readPackedReplicated reads, five numbers apiece (setEffectsEnd's visit:
 * table, key, item, item's end, size): one list, reused. */
const setSpans: number[] = [];
let setCount = 0;
const keepSpan: SetEffectVisit = (table, keyAt, itemAt, itemEnd, size) => {
  const k = 5 * setCount++;
  setSpans[k] = table;
  setSpans[k + 1] = keyAt;
  setSpans[k + 2] = itemAt;
  setSpans[k + 3] = itemEnd;
  setSpans[k + 4] = size;
};

/** A record's payload (encodeReplicated's) applied without building its items: when it is set-effects of plain
 * items on `slice` alone (setEffectsEnd's common layout, what most records are), each is handed to `set` with its
 * key and its item's msgpack as latin1 text (the store keeps that and decodes the item at its first read:
 * SliceStore.replayPacked), in order, and the answer is the request ids (null: none), decoded as decodeReplicated
 * does. Anything else is not read here and nothing is handed to `set` (undefined): the caller decodes it whole
 * (decodeReplicated). The whole payload is read before the first set, so a payload is never half applied here. */
export function readPackedReplicated(
  bytes: Uint8Array,
  slice: number,
  set: (table: number, key: string, size: number, text: string) => void,
): AppliedList | null | undefined {
  const withRequests = bytes[0] === 0x97 && bytes[1] === WITH_REQUESTS;
  setCount = 0;
  const end = setEffectsEnd(bytes, withRequests ? 2 : 0, slice, keepSpan);
  if (end < 0) return undefined;
  let requests: AppliedList | null = null;
  if (withRequests) {
    // [instances, counters, of, ats, answers] after the effects, as decodeReplicated takes them from the whole list:
    // read by their headers when plain (every answer null: a put's), else by msgpackr.
    const plain: AppliedList = { instances: [], counters: [], of: null, ats: 0, answers: null };
    if (plainRequestsEnd(bytes, end, plain) === bytes.length) requests = plain;
    else {
      let parts: unknown[];
      try {
        parts = unpackr.unpackMultiple(bytes.subarray(end));
      } catch {
        return undefined;
      }
      if (parts.length !== 5) return undefined;
      requests = requestsAt(parts, 0);
    }
  } else if (end !== bytes.length) return undefined;
  const buf = bufferView(bytes);
  for (let i = 0; i < setCount; i++) {
    const k = 5 * i;
    const keyAt = setSpans[k + 1];
    const itemAt = setSpans[k + 2];
    set(setSpans[k], keyOf(buf, keyAt, itemAt), setSpans[k + 4], buf.toString('latin1', itemAt, setSpans[k + 3]));
  }
  return requests;
}

/** The string whose msgpack (header and body) lies between `at` and `end`, as decodeReplicated reads it: a key that
 * setEffectsEnd took, so a byte string's UTF-8 (each char past ASCII 0xc2 or 0xc3 then a continuation byte: its
 * encodedKeyEnd; what every key the store makes is, shared/key-encoding.ts), which Buffer's UTF-8 decoder reads as
 * msgpackr does (test/applied-requests.test.ts compares them over random keys); an ASCII one as latin1 (the same
 * text, without a UTF-8 decoder's pass). A key with a number part (a sort key's number, 0x80 and up) went to
 * msgpackr, an unpack per item on every follower (bench/PROFILE.md, "a follower's keys beyond ASCII"). */
function keyOf(buf: Buffer, at: number, end: number): string {
  const from = at + stringHeaderBytes(buf[at]);
  for (let i = from; i < end; i++) if (buf[i] >= 0x80) return utf8Slice.call(buf, from, end);
  return buf.toString('latin1', from, end);
}

/** decodeReplicated for what a peer sent (a record's payload, `snapshot`: a snapshot's state), checked whole
 * (checkSliceChanges: effects on `slice` alone, the request ids applied with them): what is not a slice's changes
 * in this protocol (the map of node protocol 12 and 13 included) throws MalformedFrame, saying what is wrong. */
export function decodeReplicatedFromPeer(bytes: Uint8Array, slice: number, snapshot: boolean): ReplicatedChanges {
  let v: unknown;
  try {
    v = unpackr.unpack(bytes);
  } catch (err) {
    throw new MalformedFrame(`not valid msgpack: ${(err as Error).message}`);
  }
  if (!Array.isArray(v)) throw new MalformedFrame('a slice\'s changes are a list');
  if (v.length === 0 || typeof v[0] !== 'number') {
    checkSliceChanges(v, null, slice, snapshot);
    return { effects: v as Effect[], requests: null };
  }
  if (!(v[0] === WITH_REQUESTS && v.length === 7)) throw new MalformedFrame(`changes with request ids are [${WITH_REQUESTS}, effects, instances, counters, of, ats, answers]`);
  const requests = requestsAt(v, 2);
  checkSliceChanges(v[1], requests, slice, snapshot);
  return { effects: v[1] as Effect[], requests };
}

/** Whether a peer's record payload is certainly changes of `slice` that decodeReplicatedFromPeer takes, read by its
 * msgpack headers without building a value (shared/protocol.ts setEffectsEnd, plainRequestsEnd: set-effects of plain
 * items, with or without request ids whose answers are null: most records); false when not sure, and the caller
 * decodes and checks it whole (decodeReplicatedFromPeer), which decides what is refused and says why. */
export function isPlainReplicated(bytes: Uint8Array, slice: number): boolean {
  if (!(bytes[0] === 0x97 && bytes[1] === WITH_REQUESTS)) return setEffectsEnd(bytes, 0, slice) === bytes.length;
  const end = setEffectsEnd(bytes, 2, slice);
  return end >= 0 && plainRequestsEnd(bytes, end) === bytes.length;
}

export interface SnapshotEnd {
  items: number;
  lsn: number;
}

export function encodeSnapshotEnd(end: SnapshotEnd): Uint8Array {
  return packr.pack(end);
}

export function decodeSnapshotEnd(bytes: Uint8Array): SnapshotEnd {
  return unpackr.unpack(bytes) as SnapshotEnd;
}

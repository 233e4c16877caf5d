// A page's items as DynamoDB's JSON, written straight from the msgpack that the slice workers
// packed them in (PackedItems, the WebSocket API's pass-through form), without decoding them into
// objects first: for a Query or Scan that returns its examined items whole (no filter, no
// projection, no ConsumedCapacity, not Select COUNT), decoding 100 items, converting them to
// AttributeValues and stringifying them was most of the DynamoDB layer's CPU per Query
// (bench/README.md, "A Query's items written from the nodes' msgpack").
//
// Only the common values are written here, byte by byte: the item's map, ASCII strings (escaped as
// JSON needs), whole numbers up to 32 bits, finite doubles, booleans and nil. Every other value (a
// string with a non-ASCII byte, a binary, a list, a map, a set or a decimal number, a float32) is
// decoded alone by msgpackr, checked as an attribute's value (unpackClientAttribute: validateValue's
// rules, at most VALUE_DEPTH_MAX levels deep, so that the recursive conversion cannot run out of
// stack; a 64-bit integer, which msgpackr reads as a BigInt and no worker packs, is refused) and
// converted by fromNativeValue, the conversion that answers them otherwise: its answer is the old
// one by construction, and those values are rare in pages this path is for. The bytes were checked
// as items when the router took them (PackedItems.ofList, splitPackedList: maps without ext values,
// lengths within the bytes); this walk checks again every length it reads, and that each top-level
// key is a string named once, so that a malformed page fails its request with MalformedFrame (an
// Internal error), never a crash or JSON that says something else.
import { mapHeaderAt, stringEnd, stringHeaderBytes } from '../../shared/msgpack-headers.js';
import { listHeader, MalformedFrame, PackedItems, skipValue, unpackClientAttribute, unpackClientValue } from '../../shared/protocol.js';
import { MTIME_ATTRIBUTE, NAME_ATTRIBUTE, setOwn, UNSTORABLE_MAP_KEY, type Item, type Value } from '../../shared/values.js';
import { fromNativeValue } from './attribute-values.js';
import { formatNumber } from './numbers.js';

/** A page's items as the JSON text of DynamoDB's `Items` list (UTF-8), for the endpoint to put
 * into its answer as it is (send in endpoint.ts). */
export class ItemsJson {
  constructor(
    readonly bytes: Buffer,
    readonly count: number,
    /** The last item's msgpack, for LastEvaluatedKey (lastKey); null for no items. */
    readonly last: Uint8Array | null,
  ) {}
}

const HEX = '0123456789abcdef';
/** 1 for the bytes a JSON string holds as they are: ASCII but control characters, '"' and '\\'. */
const PLAIN = Uint8Array.from({ length: 256 }, (_, c) => (c >= 0x20 && c < 0x80 && c !== 0x22 && c !== 0x5c ? 1 : 0));
const ascii = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const S_OPEN = ascii('{"S":');
const N_OPEN = ascii('{"N":"');
const BOOL_TRUE = ascii('{"BOOL":true}');
const BOOL_FALSE = ascii('{"BOOL":false}');
const NULL_TRUE = ascii('{"NULL":true}');
const SKIPPED = [NAME_ATTRIBUTE, MTIME_ATTRIBUTE, UNSTORABLE_MAP_KEY].map(ascii);

/** Keys of an item that Writer.once compares a key with, byte by byte; past them it looks keys up in a Set of their
 * texts: comparing each key with every one before it took 535-585 ms for an item of 20,000 attributes (270 KB, under
 * ITEM_BYTES_MAX), where decoding it and converting it took 20. */
const KEYS_COMPARED_MAX = 32;
/** Scratch for Writer.once, reused (calls never interleave). */
const KEY_STARTS = new Int32Array(KEYS_COMPARED_MAX);
const KEY_ENDS = new Int32Array(KEYS_COMPARED_MAX);

/** The one writer: its state lives for one call of itemsJson (synchronous, so calls never interleave). */
class Writer {
  out: Buffer;
  o = 0;
  b: Uint8Array;
  view: DataView;
  /** Where the string whose header strHeader read ends. */
  strEnd = 0;
  /** The page's bytes (`b`) as a Buffer, for a key's text (keyText), made when first needed: most items have fewer keys. */
  buf: Buffer | null = null;
  /** Starts and ends of the current item's first keys (keys of them, at most KEYS_COMPARED_MAX), to refuse a key
   * named twice; past those, the texts of all its keys (latin1: one char a byte, so equal texts are equal bytes). */
  keyStarts = KEY_STARTS;
  keyEnds = KEY_ENDS;
  keys = 0;
  keyTexts: Set<string> | null = null;

  constructor(capacity: number, first: Uint8Array) {
    this.out = Buffer.allocUnsafe(capacity);
    this.b = first;
    this.view = new DataView(first.buffer, first.byteOffset, first.byteLength);
  }

  ensure(n: number): void {
    if (this.o + n <= this.out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.o + n));
    this.out.copy(bigger, 0, 0, this.o);
    this.out = bigger;
  }

  bytes(a: Uint8Array): void {
    this.ensure(a.length);
    const out = this.out;
    let o = this.o;
    for (let k = 0; k < a.length; k++) out[o++] = a[k];
    this.o = o;
  }

  /** Text of ASCII characters only (a number's text, a count). */
  text(s: string): void {
    this.ensure(s.length);
    const out = this.out;
    let o = this.o;
    for (let k = 0; k < s.length; k++) out[o++] = s.charCodeAt(k);
    this.o = o;
  }

  /** Any JSON text, as UTF-8. */
  utf8(s: string): void {
    this.ensure(3 * s.length);
    this.o += this.out.write(s, this.o, 'utf8');
  }

  /** Fails unless `n` bytes from `at` lie within the page's bytes. */
  within(at: number, n: number): void {
    if (!(at + n <= this.b.length)) throw new MalformedFrame(`a packed item ends ${at + n - this.b.length} bytes past its page`);
  }

  /** Where the body of the string at `at` starts (its end in strEnd), or -1 if the value there is not a string; a
   * string whose header or length runs past the page's bytes is MalformedFrame (stringEnd's refusals). */
  strHeader(at: number): number {
    this.within(at, 1);
    const head = stringHeaderBytes(this.b[at]);
    if (head === 0) return -1;
    const end = stringEnd(this.b, at);
    if (end < 0) throw new MalformedFrame(`a packed string (0x${this.b[at].toString(16)}) runs past its page`);
    this.strEnd = end;
    return at + head;
  }

  /** The string from `from` to `to` as a JSON string, if it is all ASCII; false if not (and nothing written). One
   * pass that copies as it checks: a non-ASCII byte drops what it wrote. */
  asciiString(from: number, to: number): boolean {
    this.ensure(6 * (to - from) + 2);
    const b = this.b;
    const out = this.out;
    let o = this.o;
    out[o++] = 0x22;
    for (let i = from; i < to; i++) {
      const c = b[i];
      if (PLAIN[c] === 1) out[o++] = c;
      else if (c >= 0x80) return false;
      else if (c === 0x22 || c === 0x5c) {
        out[o++] = 0x5c;
        out[o++] = c;
      } else {
        // \u00XX: JSON's escape for a control character (JSON.stringify writes \n and the like, of the same meaning).
        out[o++] = 0x5c;
        out[o++] = 0x75;
        out[o++] = 0x30;
        out[o++] = 0x30;
        out[o++] = HEX.charCodeAt(c >> 4);
        out[o++] = HEX.charCodeAt(c & 0x0f);
      }
    }
    out[o++] = 0x22;
    this.o = o;
    return true;
  }

  /** Where the value at `at` ends, without reading it: no ext value, every length within the page's bytes. */
  skip(at: number): number {
    return skipValue(this.b, at); // MalformedFrame for an ext value or a length past the bytes
  }

  /** The key from `at` to `end` (a string with a non-ASCII byte, its bounds read and checked by strHeader), decoded
   * alone by msgpackr. */
  decodedKey(at: number, end: number): unknown {
    try {
      return unpackClientValue(this.b.subarray(at, end));
    } catch (err) {
      throw new MalformedFrame(`a packed value that msgpack cannot read: ${(err as Error).message}`);
    }
  }

  number(n: number): void {
    const s = formatNumber(n);
    this.ensure(s.length + 8);
    this.bytes(N_OPEN);
    this.text(s);
    this.out[this.o++] = 0x22;
    this.out[this.o++] = 0x7d;
  }

  /** The AttributeValue of the value at `at`; returns where the value ends. */
  value(at: number): number {
    const b = this.b;
    const s = this.strHeader(at);
    if (s >= 0) {
      const e = this.strEnd;
      const o = this.o;
      this.bytes(S_OPEN);
      if (this.asciiString(s, e)) {
        this.ensure(1);
        this.out[this.o++] = 0x7d;
        return e;
      }
      this.o = o;
    } else {
      const t = b[at];
      if (t <= 0x7f) return this.number(t), at + 1;
      if (t >= 0xe0) return this.number(t - 0x100), at + 1;
      switch (t) {
        case 0xc0:
          return this.bytes(NULL_TRUE), at + 1;
        case 0xc2:
          return this.bytes(BOOL_FALSE), at + 1;
        case 0xc3:
          return this.bytes(BOOL_TRUE), at + 1;
        case 0xcb: {
          this.within(at, 9);
          const x = this.view.getFloat64(at + 1);
          // No item holds NaN or an infinity (validateValue); formatNumber has no text for one.
          if (!Number.isFinite(x)) throw new MalformedFrame(`a packed item holds the number ${x}`);
          return this.number(x), at + 9;
        }
        case 0xcc: // uint 8, 16, 32 and int 8, 16, 32: a body of 2^(t & 3) bytes, big-endian, after the type byte
        case 0xcd:
        case 0xce:
        case 0xd0:
        case 0xd1:
        case 0xd2: {
          const width = 1 << (t & 3);
          this.within(at, 1 + width);
          return this.number(wholeNumber(b, at, t)), at + 1 + width;
        }
      }
    }
    const end = this.skip(at);
    this.utf8(JSON.stringify(fromNativeValue(unpackClientAttribute(this.b.subarray(at, end)))));
    return end;
  }

  /** Whether the key from `from` to `to` equals `name` (ASCII). */
  keyIs(from: number, to: number, name: Uint8Array): boolean {
    if (to - from !== name.length) return false;
    for (let i = 0; i < name.length; i++) if (this.b[from + i] !== name[i]) return false;
    return true;
  }

  /** Fails if the current item named the key from `from` to `to` before. */
  once(from: number, to: number): void {
    if (this.keyTexts !== null) return this.onceText(this.keyText(from, to));
    const b = this.b;
    const n = to - from;
    for (let k = 0; k < this.keys; k++) {
      const s = this.keyStarts[k];
      if (this.keyEnds[k] - s !== n) continue;
      let i = 0;
      while (i < n && b[s + i] === b[from + i]) i++;
      if (i === n) throw new MalformedFrame('a packed item names one attribute twice');
    }
    if (this.keys < KEYS_COMPARED_MAX) {
      this.keyStarts[this.keys] = from;
      this.keyEnds[this.keys++] = to;
      return;
    }
    this.keyTexts = new Set();
    for (let k = 0; k < this.keys; k++) this.keyTexts.add(this.keyText(this.keyStarts[k], this.keyEnds[k]));
    this.onceText(this.keyText(from, to));
  }

  keyText(from: number, to: number): string {
    this.buf ??= Buffer.from(this.b.buffer, this.b.byteOffset, this.b.byteLength);
    return this.buf.toString('latin1', from, to);
  }

  onceText(key: string): void {
    if (this.keyTexts!.has(key)) throw new MalformedFrame('a packed item names one attribute twice');
    this.keyTexts!.add(key);
  }

  /** The item (a msgpack map) at `at` as DynamoDB's JSON, keyslice's system attributes left out; returns its end. */
  item(at: number): number {
    const b = this.b;
    this.within(at, 1);
    const [pairs, keysAt] = mapHeaderAt(b, at);
    if (keysAt < 0) throw new MalformedFrame(`a packed item starts with no whole map header (0x${b[at].toString(16)}, ${b.length - at} bytes left)`);
    at = keysAt;
    this.keys = 0;
    this.keyTexts = null;
    this.ensure(1);
    this.out[this.o++] = 0x7b;
    let first = true;
    for (let i = 0; i < pairs; i++) {
      const keyAt = at;
      const s = this.strHeader(at);
      if (s < 0) throw new MalformedFrame(`a packed item has a key that is not a string (0x${b[at].toString(16)})`);
      const e = this.strEnd;
      this.once(s, e);
      at = e;
      if (b[s] === 0x5f && e - s > 1 && b[s + 1] === 0x5f) {
        if (this.keyIs(s, e, SKIPPED[0]) || this.keyIs(s, e, SKIPPED[1])) {
          at = this.skip(at);
          continue;
        }
        // No item holds it (checkItem refuses it); decoded, it would not be an own key.
        if (this.keyIs(s, e, SKIPPED[2])) throw new MalformedFrame('a packed item has the key "__proto__"');
      }
      this.ensure(1);
      if (!first) this.out[this.o++] = 0x2c;
      first = false;
      if (!this.asciiString(s, e)) this.utf8(JSON.stringify(this.decodedKey(keyAt, e)));
      this.ensure(1);
      this.out[this.o++] = 0x3a;
      at = this.value(at);
    }
    this.ensure(1);
    this.out[this.o++] = 0x7d;
    return at;
  }

  /** The items of `part` from `at` (count of them) as elements of the JSON list; returns where the last one ends and
   * where it starts. */
  items(part: Uint8Array, at: number, count: number, written: number): [end: number, lastStart: number] {
    if (part !== this.b) {
      this.b = part;
      this.view = new DataView(part.buffer, part.byteOffset, part.byteLength);
      this.buf = null;
    }
    let last = -1;
    for (let i = 0; i < count; i++) {
      if (written + i > 0) {
        this.ensure(1);
        this.out[this.o++] = 0x2c;
      }
      last = at;
      at = this.item(at);
    }
    return [at, last];
  }
}

/** The items of a page (a range's list, or a merged page's items one by one) as the JSON of DynamoDB's Items. */
export function itemsJson(page: PackedItems): ItemsJson {
  let size = 0;
  for (const p of page.parts) size += p.byteLength;
  // A page of plain items writes about as many bytes as it was packed in, and a fifth more for its types' names.
  const w = new Writer(Math.ceil(size * 1.25) + 64, page.parts[0] ?? new Uint8Array(0));
  w.out[w.o++] = 0x5b;
  let count = 0;
  let last: Uint8Array | null = null;
  if (page.header === null) {
    // The whole list, as a range answers it (PackedItems.ofList).
    for (const list of page.parts) {
      const [n, from] = listHeader(list);
      const [end, lastStart] = w.items(list, from, n, count);
      if (end !== list.byteLength) throw new MalformedFrame(`a packed list has ${list.byteLength - end} bytes after its items`);
      if (n > 0) last = list.subarray(lastStart, end);
      count += n;
    }
  } else {
    for (const item of page.parts) {
      const [end] = w.items(item, 0, 1, count);
      if (end !== item.byteLength) throw new MalformedFrame(`a packed item of ${item.byteLength} bytes holds one value of ${end}`);
      last = item;
      count++;
    }
  }
  w.ensure(1);
  w.out[w.o++] = 0x5d;
  return new ItemsJson(w.out.subarray(0, w.o), count, last);
}

/** The uint or int of 8, 16 or 32 bits whose type byte `t` is at `at` (0xcc-0xce, 0xd0-0xd2; its body within `b`, as
 * the caller checked): a body of 2^(t & 3) bytes, big-endian, after the type byte. */
function wholeNumber(b: Uint8Array, at: number, t: number): number {
  const width = 1 << (t & 3);
  let x = 0;
  for (let k = 1; k <= width; k++) x = x * 256 + b[at + k];
  // An int's body is two's complement: its top bit set, it is x - 2^(8 * width).
  if (t >= 0xd0 && x >= 2 ** (8 * width - 1)) x -= 2 ** (8 * width);
  return x;
}

/** The attributes `names` of a page's last item (for LastEvaluatedKey: its key attributes), each value decoded alone
 * and checked as an attribute's (unpackClientAttribute); null for no items. Only the headers of the item's other
 * attributes are read, on the way: decoding the whole item for its key built every attribute of it, to keep one or
 * two. An attribute the item does not name is left out, as the decoded item lacked it. The item's bytes were read
 * whole by itemsJson first, so what is malformed was refused there; each length is checked here again all the same. */
export function lastKey(json: ItemsJson, names: readonly string[]): Item | null {
  const b = json.last;
  if (b === null) return null;
  const key: Item = {};
  let [pairs, at] = mapHeaderAt(b, 0);
  if (at < 0) throw new MalformedFrame('a packed item starts with no whole map header');
  for (let found = 0; pairs > 0 && found < names.length; pairs--) {
    const keyEnd = stringEnd(b, at);
    if (keyEnd < 0) throw new MalformedFrame(`a packed item has a key that is not a whole string (0x${b[at]?.toString(16)})`);
    const from = at + stringHeaderBytes(b[at]);
    const end = skipValue(b, keyEnd); // MalformedFrame for an ext value or a length past the bytes
    for (let k = 0; k < names.length; k++) {
      if (!sameText(b, from, keyEnd, names[k])) continue;
      setOwn(key, names[k], keyValue(b, keyEnd, end));
      found++;
    }
    at = end;
  }
  return key;
}

/** The value from `at` to `end` (read whole by skipValue) of a last item's key attribute. A key's common forms, an
 * ASCII string or a whole number of up to 32 bits, are read here: a call of msgpackr apiece cost more than its decode
 * of a whole item of five attributes (about 800 ns against 640 per LastEvaluatedKey). Any other value is decoded
 * alone and checked (unpackClientAttribute). */
function keyValue(b: Uint8Array, at: number, end: number): Value {
  const t = b[at];
  if (t <= 0x7f) return t; // fixint
  if (t >= 0xe0) return t - 0x100;
  if ((t >= 0xcc && t <= 0xce) || (t >= 0xd0 && t <= 0xd2)) return wholeNumber(b, at, t);
  const head = stringHeaderBytes(t);
  if (head > 0) {
    let s = '';
    for (let i = at + head; i < end; i++) {
      if (b[i] >= 0x80) return unpackClientAttribute(b.subarray(at, end));
      s += String.fromCharCode(b[i]);
    }
    return s;
  }
  return unpackClientAttribute(b.subarray(at, end));
}

/** Whether the UTF-8 bytes of `b` from `from` to `to` are the text `name`: byte by byte for an ASCII name (as many
 * bytes as UTF-16 units), else decoded, where their lengths allow it (UTF-8 takes 1-3 bytes a UTF-16 unit). */
function sameText(b: Uint8Array, from: number, to: number, name: string): boolean {
  if (to - from < name.length || to - from > 3 * name.length) return false;
  if (to - from === name.length) {
    // As many bytes as UTF-16 units: the name is ASCII, or it is not this key.
    for (let i = 0; i < name.length; i++) if (b[from + i] >= 0x80 || b[from + i] !== name.charCodeAt(i)) return false;
    return true;
  }
  return Buffer.from(b.buffer, b.byteOffset + from, to - from).toString('utf8') === name;
}

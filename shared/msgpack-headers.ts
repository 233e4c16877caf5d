// msgpack headers read in place, without decoding the value: the reader's side of msgpack-writer.ts, for the paths that
// walk bytes by their headers (a follower's check of a record, setEffectsEnd; the DynamoDB endpoint's JSON written
// from packed items, coordinator/dynamodb/item-json.ts; u16 and u32 in a router's check of packed items too,
// protocol.ts skipValue). Each reader takes a header only whole, within the bytes: a header cut short or a length past
// the end is no header, the same wherever it is read. skipValue, the router's hot loop, steps over a string as over a
// bin and checks once, where its value ends, that it ends within the bytes: it refuses the same strings
// (test/msgpack-headers.test.ts) without a call or a check per string.

/** The 16-bit big-endian length after the type byte at `at`. */
export const u16 = (b: Uint8Array, at: number): number => (b[at + 1] << 8) | b[at + 2];
/** The 32-bit big-endian length after the type byte at `at`. */
export const u32 = (b: Uint8Array, at: number): number => ((b[at + 1] << 24) | (b[at + 2] << 16) | (b[at + 3] << 8) | b[at + 4]) >>> 0;

/** A list's count and where its first element is, or [0, -1] if no whole list header is at `at`. */
export function listHeaderAt(b: Uint8Array, at: number): [count: number, at: number] {
  const t = b[at];
  if (t >= 0x90 && t <= 0x9f) return [t & 0x0f, at + 1];
  if (t === 0xdc && at + 3 <= b.length) return [u16(b, at), at + 3];
  if (t === 0xdd && at + 5 <= b.length) return [u32(b, at), at + 5];
  return [0, -1];
}

/** A map's count of pairs and where its first key is, or [0, -1] if no whole map header is at `at`. */
export function mapHeaderAt(b: Uint8Array, at: number): [pairs: number, at: number] {
  const t = b[at];
  if (t >= 0x80 && t <= 0x8f) return [t & 0x0f, at + 1];
  if (t === 0xde && at + 3 <= b.length) return [u16(b, at), at + 3];
  if (t === 0xdf && at + 5 <= b.length) return [u32(b, at), at + 5];
  return [0, -1];
}

/** The bytes a string's header takes for its type byte `t` (fixstr 1, str 8 2, str 16 3, str 32 5), or 0 when `t`
 * is not a string's (undefined included: past the bytes). Where its body starts, once stringEnd took it whole. */
export function stringHeaderBytes(t: number | undefined): number {
  if (t === undefined) return 0;
  if (t >= 0xa0 && t <= 0xbf) return 1;
  return t === 0xd9 ? 2 : t === 0xda ? 3 : t === 0xdb ? 5 : 0;
}

/** Where the string at `at` ends (fixstr, str 8, 16 or 32: its header and body), or -1: no string's type byte there,
 * its header cut short by the end of `b`, or its length past the end. The one reader of a string's header where a
 * string's own end is wanted (skipValue checks only where a whole value ends, above). */
export function stringEnd(b: Uint8Array, at: number): number {
  const t = b[at];
  let end: number;
  if (t >= 0xa0 && t <= 0xbf) end = at + 1 + (t & 0x1f);
  else if (t === 0xd9) end = at + 2 > b.length ? -1 : at + 2 + b[at + 1];
  else if (t === 0xda) end = at + 3 > b.length ? -1 : at + 3 + u16(b, at);
  else if (t === 0xdb) end = at + 5 > b.length ? -1 : at + 5 + u32(b, at);
  else return -1;
  return end <= b.length ? end : -1;
}

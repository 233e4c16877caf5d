// A follower's check of a record's payload read by its msgpack headers alone (log-format.ts isPlainReplicated,
// shared/protocol.ts setEffectsEnd) never takes what the whole decode and check (decodeReplicatedFromPeer) refuses,
// over seeded random records, some written again in msgpack forms packr never writes (wide headers, 64-bit and
// float 32 numbers, a key twice), each damaged or not; and it does read the common records (set-effects of plain items,
// with or without request ids), so the follower's apply is not left with a payload it cannot decode. A failure
// replays from the seed.
import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_SET, MalformedFrame, type Effect } from '../shared/protocol.js';
import { decodeReplicatedFromPeer, encodeReplicated, isPlainReplicated } from '../slice-worker/log-format.js';
import type { AppliedList } from '../slice-worker/replication/applied-requests.js';
import { rng } from './cluster-fixture.js';
import { isByteString } from '../shared/key-encoding.js';

const SLICE = 37;
/** A payload as msgpackr decodes it, its ids' list and all (for the test to write it again in other forms). */
const decodeReplicatedRaw = (bytes: Uint8Array): unknown => unpack(bytes);

/** Whether the whole decode and check takes `bytes` as a record of SLICE. It refuses with MalformedFrame only: a
 * follower refuses that as MalformedContents, and throws on any other error as its own bug (a value that
 * validateValue refuses threw its KeysliceError, which failed the follower's worker). */
function wholeTakes(bytes: Uint8Array): boolean {
  try {
    decodeReplicatedFromPeer(bytes, SLICE, false);
    return true;
  } catch (err) {
    if (err instanceof MalformedFrame) return false;
    throw err;
  }
}

describe('a follower\'s check of a record read by its headers', () => {
  it('takes no record the whole decode refuses, over seeded random records damaged or not, and reads the common ones', () => {
    const seed = 20261127;
    const r = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
    const str = (max: number) => Array.from({ length: Math.floor(r() * max) }, () => String.fromCharCode(pick([0x61, 0x7a, 0x30, 0xe9, 0x4e2d, 0]))).join('');
    /** A key: an encoded key's chars (a byte string) mostly, else str's (0x4e2d among them: not an encoded key). */
    const key = (max: number) => (r() < 0.9 ? Array.from({ length: Math.floor(r() * max) }, () => String.fromCharCode(pick([0x61, 0x30, 0x80, 0xe9, 0xff, 0]))).join('') : str(max));
    /** A value; `plain` false may give one the header read leaves to the whole decode (or one it refuses). */
    const value = (depth: number, plain: boolean): unknown => {
      const kinds = plain ? ['str', 'int', 'float', 'bool', 'null', 'bin', 'list'] : ['str', 'int', 'float', 'bool', 'null', 'bin', 'list', 'map', 'set', 'decimal', 'nan', 'inf', 'big', 'deep'];
      switch (pick(kinds)) {
        case 'str':
          return str(r() < 0.1 ? 400 : 20);
        case 'int':
          return pick([0, 1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 31, 2 ** 32 - 1, -1, -33, -200, -40_000, -(2 ** 31)]);
        case 'float':
          return pick([1.5, -0.25, 1e300, Number.MIN_VALUE]);
        case 'bool':
          return r() < 0.5;
        case 'null':
          return null;
        case 'bin':
          return Uint8Array.from({ length: Math.floor(r() * 300) }, () => Math.floor(r() * 256));
        case 'list':
          return depth > 3 ? [] : Array.from({ length: Math.floor(r() * 4) }, () => value(depth + 1, plain));
        case 'map':
          return Object.fromEntries(Array.from({ length: Math.floor(r() * 3) }, () => [str(5), value(depth + 1, plain)]));
        case 'set':
          return { $SS: pick([['a', 'b'], ['a', 'a'], [], [1]]) };
        case 'decimal':
          return { $N: pick(['1.5', 'x', '1e999']) };
        case 'nan':
          return NaN;
        case 'inf':
          return -Infinity;
        case 'big':
          return pick([2 ** 40, -(2 ** 40), 2 ** 53 - 1]);
        default: {
          // Past VALUE_DEPTH_MAX (32) or not.
          let v: unknown = 'x';
          for (let i = 0, n = pick([31, 32, 33, 40]); i < n; i++) v = [v];
          return v;
        }
      }
    };
    const item = (plain: boolean) => Object.fromEntries(Array.from({ length: 1 + Math.floor(r() * 6) }, () => [str(8) || 'a', value(0, plain)]));
    /** A record's effects and request ids, and whether they are of the layout the header read must take. */
    const record = (): { effects: Effect[]; requests: AppliedList | null; common: boolean } => {
      const plain = r() < 0.6;
      let common = plain;
      const effects: Effect[] = Array.from({ length: 1 + Math.floor(r() * (r() < 0.1 ? 40 : 4)) }, () => {
        const kind = plain ? EFFECT_SET : pick([EFFECT_SET, EFFECT_SET, EFFECT_DELETE, EFFECT_DROP_SLICE]);
        const slice = plain || r() < 0.9 ? SLICE : SLICE + 1;
        const table = plain ? pick([1, 200, 70_000]) : pick([1, 200, 70_000, -3, -200]);
        if (kind === EFFECT_DELETE) return [EFFECT_DELETE, table, slice, key(10)] as Effect;
        if (kind === EFFECT_DROP_SLICE) return [EFFECT_DROP_SLICE, slice, r() < 0.5 ? null : table] as Effect;
        return [EFFECT_SET, table, slice, key(12), item(plain), pick([0, 200, 300_000])] as Effect;
      });
      // A key with a char past 0xff (str's 0x4e2d) is not an encoded key: the whole check refuses it, the header read leaves it.
      common &&= effects.every((e) => e[0] !== EFFECT_SET || isByteString(e[3]));
      let requests: AppliedList | null = null;
      if (r() < 0.5) {
        const n = r() < 0.9 ? 1 + Math.floor(r() * 3) : 0;
        // Mostly as a leader writes them; else one part of them wrong (or of a layout left to the whole decode).
        const wrong = r() < 0.5 ? null : pick(['counter', 'instance', 'of', 'at', 'answer', 'big', 'two', 'count']);
        // 'count': the list of `of` or of `ats` one longer or shorter than the counters.
        const ofCount = wrong === 'count' && r() < 0.5 ? n + 1 : n;
        const atsCount = wrong === 'count' && ofCount === n ? pick([n + 1, Math.max(0, n - 1)]) : n;
        common &&= wrong === null;
        const instances = r() < 0.3 || wrong === 'two' ? [1, 2 ** 20] : [pick([1, 2 ** 20, 2 ** 40])];
        common &&= n > 0 && instances[0] !== 2 ** 40;
        requests = {
          instances: wrong === 'instance' ? [pick([-1, 2 ** 53, 1.5])] : instances,
          counters: Array.from({ length: n }, (_, i) => (wrong === 'counter' ? pick([0, -1, 2.5, 2 ** 53]) : wrong === 'big' ? 2 ** 35 + i : i + 1)),
          of: wrong === 'two' || (instances.length === 1 && r() < 0.7) ? null : Array.from({ length: ofCount }, () => (wrong === 'of' ? pick([2, -1]) : Math.floor(r() * instances.length))),
          ats: r() < 0.7 ? pick([1_700_000_000_000, 0, 12.5, wrong === 'at' ? pick([-1, -12.5, Infinity]) : 3]) : Array.from({ length: atsCount }, () => pick([1_700_000_000_000, wrong === 'at' ? NaN : 0])),
          answers: wrong === 'answer' ? pick([[null], true as never, 0 as never, Array.from({ length: n }, () => pick([null, true, { a: 'old' }, { a: NaN }]))]) : null,
        };
        // An instance list of two with `of` null is refused by the whole decode: not a common record either.
        common &&= !(requests.of === null && instances.length > 1);
      }
      return { effects, requests, common };
    };
    const damage = (b: Uint8Array): Uint8Array => {
      const out = Uint8Array.from(b);
      switch (pick(['flip', 'cut', 'grow', 'byte'])) {
        case 'flip':
          out[Math.floor(r() * out.length)] ^= 1 << Math.floor(r() * 8);
          return out;
        case 'cut':
          return out.subarray(0, Math.floor(r() * out.length));
        case 'grow':
          return Uint8Array.from([...out, pick([0x00, 0xc0, 0x91])]);
        default:
          out[Math.floor(r() * out.length)] = pick([0xc1, 0xcb, 0xcf, 0xd3, 0xd4, 0x80, 0x96, 0xdc, 0xff]);
          return out;
      }
    };
    /** `v` as msgpack in a form picked at random of those that decode to it (a short string as a str 32, a small
     * number as a uint 16, an int 8, a float 32 or a uint 64, a list or map of few as a list or map 16 or 32, a map
     * whose key comes twice, the first time with another value): forms msgpackr decodes, which packr never writes. */
    /** The first (the smallest form) mostly, so that a record has a few wide forms among the usual ones. */
    const often = <T>(xs: readonly T[]): T => (r() < 0.9 ? xs[0] : pick(xs));
    const wide = (v: unknown, out: number[]): void => {
      const be = (n: number | bigint, bytes: number) => {
        for (let k = bytes - 1; k >= 0; k--) out.push(Number((BigInt(n) >> BigInt(8 * k)) & 0xffn));
      };
      const sized = (n: number, small: number | null, smallMax: number, t8: number | null, t16: number, t32: number) => {
        const forms = [...(small !== null && n <= smallMax ? ['small'] : []), ...(t8 !== null && n < 256 ? ['8'] : []), ...(n < 65_536 ? ['16'] : []), '32'];
        const form = often(forms);
        if (form === 'small') out.push(small! | n);
        else if (form === '8') out.push(t8!, n);
        else if (form === '16') (out.push(t16), be(n, 2));
        else (out.push(t32), be(n, 4));
      };
      const float = (n: number): void => {
        if ((Math.fround(n) === n || Number.isNaN(n)) && r() < 0.3) out.push(0xca, ...new Uint8Array(new Float32Array([n]).buffer).reverse());
        else out.push(0xcb, ...new Uint8Array(new Float64Array([n]).buffer).reverse());
      };
      if (v === null) out.push(0xc0);
      else if (typeof v === 'boolean') out.push(v ? 0xc3 : 0xc2);
      else if (typeof v === 'number') {
        if (!Number.isSafeInteger(v) || r() < 0.05) return float(v);
        const fits: Record<string, [tag: number, min: number, max: number, bytes: number]> = {
          fix: [0, 0, 127, 0], negfix: [0, -32, -1, 0], u8: [0xcc, 0, 255, 1], u16: [0xcd, 0, 65_535, 2], u32: [0xce, 0, 2 ** 32 - 1, 4], u64: [0xcf, 0, Infinity, 8],
          i8: [0xd0, -128, 127, 1], i16: [0xd1, -32_768, 32_767, 2], i32: [0xd2, -(2 ** 31), 2 ** 31 - 1, 4], i64: [0xd3, -Infinity, Infinity, 8],
        };
        const [tag, , , bytes] = fits[often(Object.keys(fits).filter((f) => v >= fits[f][1] && v <= fits[f][2]))];
        if (bytes === 0) out.push(v & 0xff);
        else (out.push(tag), be(BigInt.asUintN(8 * bytes, BigInt(v)), bytes));
      } else if (typeof v === 'string') {
        const utf8 = new TextEncoder().encode(v);
        sized(utf8.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
        out.push(...utf8);
      } else if (v instanceof Uint8Array) {
        sized(v.length, null, 0, 0xc4, 0xc5, 0xc6);
        out.push(...v);
      } else if (Array.isArray(v)) {
        sized(v.length, 0x90, 15, null, 0xdc, 0xdd);
        for (const e of v) wide(e, out);
      } else {
        const entries = Object.entries(v as Record<string, unknown>);
        const twice = entries.length > 0 && r() < 0.05 ? [entries[0][0], pick([1, 'x', null, NaN, [2 ** 40]])] as const : null;
        sized(entries.length + (twice === null ? 0 : 1), 0x80, 15, null, 0xde, 0xdf);
        if (twice !== null) (wide(twice[0], out), wide(twice[1], out));
        for (const [k, e] of entries) (wide(k, out), wide(e, out));
      }
    };
    let commonRead = 0;
    let read = 0;
    let refused = 0;
    let wideRead = 0;
    let wideRefused = 0;
    for (let i = 0; i < 4_000; i++) {
      const { effects, requests, common } = record();
      let bytes = encodeReplicated(effects, requests);
      let widened = false;
      if (r() < 0.3) {
        const out: number[] = [];
        wide(decodeReplicatedRaw(bytes), out);
        widened = !Buffer.from(out).equals(bytes);
        bytes = Uint8Array.from(out);
      }
      const damaged = r() < 0.5;
      for (let d = damaged ? 1 + Math.floor(r() * 3) : 0; d > 0; d--) bytes = damage(bytes);
      const quick = isPlainReplicated(bytes, SLICE);
      const whole = wholeTakes(bytes);
      if (quick) expect(whole, `record ${i} (seed ${seed}): the header read took what the whole decode refuses`).toBe(true);
      if (widened && quick) wideRead++;
      if (widened && !whole) wideRefused++;
      if (common && !damaged && !widened) {
        expect(quick, `record ${i} (seed ${seed}): a record of set-effects of plain items is read by its headers`).toBe(true);
        commonRead++;
      }
      if (quick) read++;
      if (!whole) refused++;
    }
    // Neither side vacuous: many records read by headers, many refused by the whole decode.
    expect(commonRead).toBeGreaterThan(400);
    expect(read).toBeGreaterThan(700);
    expect(refused).toBeGreaterThan(800);
    expect(wideRead).toBeGreaterThan(40);
    expect(wideRefused).toBeGreaterThan(100);
  });

  it('leaves to the whole decode, which refuses them, a non-finite number, a value nested too deep, another slice and bytes after the record', () => {
    const set = (it: Record<string, unknown>, slice = SLICE): Effect => [EFFECT_SET, 1, slice, 'k', it, 10] as Effect;
    let deep: unknown = 'x';
    for (let i = 0; i < 33; i++) deep = [deep];
    const f32 = (bits: number[]) => {
      // {a: <float 32>} as the item: its bytes put in by hand (packr writes a double's float 64).
      const b = encodeReplicated([set({ a: 1.5 })], null);
      const at = b.indexOf(0xcb);
      return Uint8Array.from([...b.subarray(0, at), 0xca, ...bits, ...b.subarray(at + 9)]);
    };
    const cases: [string, Uint8Array][] = [
      ['NaN', encodeReplicated([set({ a: NaN })], null)],
      ['Infinity', encodeReplicated([set({ a: [1, Infinity] })], null)],
      ['float 32 NaN', f32([0x7f, 0xc0, 0, 0])],
      ['float 32 -Infinity', f32([0xff, 0x80, 0, 0])],
      ['33 lists deep', encodeReplicated([set({ a: deep })], null)],
      ['another slice', encodeReplicated([set({ a: 1 }, SLICE + 1)], null)],
      ['a byte after it', Uint8Array.from([...encodeReplicated([set({ a: 1 })], null), 0xc0])],
      ['a request counter of 0', encodeReplicated([set({ a: 1 })], { instances: [1], counters: [0], of: null, ats: 1, answers: null })],
      ['two instances and no `of`', encodeReplicated([set({ a: 1 })], { instances: [1, 2], counters: [1], of: null, ats: 1, answers: null })],
      ['an `of` past the instances', encodeReplicated([set({ a: 1 })], { instances: [1, 2], counters: [1], of: [2], ats: 1, answers: null })],
      ['a time before 0', encodeReplicated([set({ a: 1 })], { instances: [1], counters: [1], of: null, ats: -12.5, answers: null })],
      ['a time NaN', encodeReplicated([set({ a: 1 })], { instances: [1], counters: [1, 2], of: null, ats: [1, NaN], answers: null })],
    ];
    for (const [what, bytes] of cases) {
      expect(isPlainReplicated(bytes, SLICE), what).toBe(false);
      expect(wholeTakes(bytes), what).toBe(false);
    }
    // And their neighbours that are fine, read by headers.
    expect(isPlainReplicated(f32([0x3f, 0xc0, 0, 0]), SLICE)).toBe(true);
    expect(isPlainReplicated(encodeReplicated([set({ a: 1 })], { instances: [1], counters: [1], of: null, ats: 1, answers: null }), SLICE)).toBe(true);
  });
});

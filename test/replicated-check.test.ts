// A follower's check of a record's payload read by its msgpack headers alone (log-format.ts isPlainReplicated,
// shared/protocol.ts setEffectsEnd) never takes what the whole decode and check (decodeReplicatedFromPeer) refuses,
// over seeded random records, each damaged or not; and it does read the common records (set-effects of plain items,
// with or without request ids), so the follower's apply is not left with a payload it cannot decode. A failure
// replays from the seed.
import { describe, expect, it } from 'vitest';
import { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_SET, MalformedFrame, type Effect } from '../shared/protocol.js';
import { decodeReplicatedFromPeer, encodeReplicated, isPlainReplicated } from '../slice-worker/log-format.js';
import type { AppliedList } from '../slice-worker/replication/applied-requests.js';
import { rng } from './cluster-fixture.js';

const SLICE = 37;

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
        const table = pick([1, 200, 70_000]);
        if (kind === EFFECT_DELETE) return [EFFECT_DELETE, table, slice, str(10)] as Effect;
        if (kind === EFFECT_DROP_SLICE) return [EFFECT_DROP_SLICE, slice, r() < 0.5 ? null : table] as Effect;
        return [EFFECT_SET, table, slice, str(12), item(plain), pick([0, 200, 300_000])] as Effect;
      });
      let requests: AppliedList | null = null;
      if (r() < 0.5) {
        const n = r() < 0.9 ? 1 + Math.floor(r() * 3) : 0;
        // Mostly as a leader writes them; else one part of them wrong (or of a layout left to the whole decode).
        const wrong = r() < 0.5 ? null : pick(['counter', 'instance', 'of', 'at', 'answer', 'big', 'two']);
        common &&= wrong === null;
        const instances = r() < 0.3 || wrong === 'two' ? [1, 2 ** 20] : [pick([1, 2 ** 20, 2 ** 40])];
        common &&= n > 0 && instances[0] !== 2 ** 40;
        requests = {
          instances: wrong === 'instance' ? [pick([-1, 2 ** 53, 1.5])] : instances,
          counters: Array.from({ length: n }, (_, i) => (wrong === 'counter' ? pick([0, -1, 2.5, 2 ** 53]) : wrong === 'big' ? 2 ** 35 + i : i + 1)),
          of: wrong === 'two' || (instances.length === 1 && r() < 0.7) ? null : Array.from({ length: n }, () => (wrong === 'of' ? pick([2, -1]) : Math.floor(r() * instances.length))),
          ats: r() < 0.7 ? pick([1_700_000_000_000, 0, 12.5, wrong === 'at' ? pick([-1, -12.5, Infinity]) : 3]) : Array.from({ length: n }, () => pick([1_700_000_000_000, wrong === 'at' ? NaN : 0])),
          answers: wrong === 'answer' ? pick([[null], Array.from({ length: n }, () => pick([null, true, { a: 'old' }, { a: NaN }]))]) : null,
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
    let commonRead = 0;
    let read = 0;
    let refused = 0;
    for (let i = 0; i < 4_000; i++) {
      const { effects, requests, common } = record();
      let bytes = encodeReplicated(effects, requests);
      const damaged = r() < 0.5;
      for (let d = damaged ? 1 + Math.floor(r() * 3) : 0; d > 0; d--) bytes = damage(bytes);
      const quick = isPlainReplicated(bytes, SLICE);
      const whole = wholeTakes(bytes);
      if (quick) expect(whole, `record ${i} (seed ${seed}): the header read took what the whole decode refuses`).toBe(true);
      if (common && !damaged) {
        expect(quick, `record ${i} (seed ${seed}): a record of set-effects of plain items is read by its headers`).toBe(true);
        commonRead++;
      }
      if (quick) read++;
      if (!whole) refused++;
    }
    // Neither side vacuous: many records read by headers, many refused by the whole decode.
    expect(commonRead).toBeGreaterThan(600);
    expect(read).toBeGreaterThan(1_200);
    expect(refused).toBeGreaterThan(800);
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

// The key encoding against its spec (docs/key-encoding.md): the doc's test
// vectors, read from the doc itself so the two cannot drift, and seeded
// property tests that compare encoded order with the logical order of values.
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { compareNumbers as decimalCompare, decimalOfNumber, numberValueOf, type NumberValue } from '../shared/decimal.js';
import { KeysliceError } from '../shared/errors.js';
import { columnsHash, initHashing, sliceOf, sliceOfPart } from '../shared/hashing.js';
import {
  decodeKey,
  encodeKeyPart,
  encodeKeyPrefix,
  encodeShardingPart,
  encodeSortingParts,
  firstPartLength,
  PARTS_END,
  prefixEnd,
  type KeyType,
  type KeyValue,
} from '../shared/key-encoding.js';

const SEED = 20_240_611; // fixed: a failure replays exactly
const RUNS = 3000;
const check = <T>(property: fc.IRawProperty<T>, numRuns = RUNS) => fc.assert(property, { seed: SEED, numRuns });

// ---- helpers ---------------------------------------------------------------

const hex = (byteString: string): string =>
  Array.from(byteString, (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join(' ');
const isByteString = (s: string): boolean => /^[\x00-\xff]*$/.test(s);
const sign = (n: number): number => (n < 0 ? -1 : n > 0 ? 1 : 0);
/** JS string order on byte strings: the order a partition keeps its keys in. */
const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Strings in Unicode code point order (what UTF-8 byte order gives). */
function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!);
  const y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** Unsigned lexicographic order of bytes. */
function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** Numeric order, computed apart from shared/decimal.ts: each number as an exact fraction of
 * BigInts from its text (a double's shortest text, a decimal's own), cross-multiplied. */
function exactOf(v: KeyValue): [bigint, bigint] {
  const text = typeof v === 'number' ? String(v) : (v as { $N: string }).$N;
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(text)!;
  const e = Number(m[4] ?? 0) - (m[3] ?? '').length;
  const n = BigInt(m[1] + m[2] + (m[3] ?? ''));
  return e >= 0 ? [n * 10n ** BigInt(e), 1n] : [n, 10n ** BigInt(-e)];
}
function compareNumbers(a: KeyValue, b: KeyValue): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0; // -0 equals 0
  const [x, p] = exactOf(a);
  const [y, q] = exactOf(b);
  return x * q < y * p ? -1 : x * q > y * p ? 1 : 0;
}

function startsWithBytes(s: Uint8Array, p: Uint8Array): boolean {
  return p.length <= s.length && p.every((b, i) => s[i] === b);
}

function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function errorCodeOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return err instanceof KeysliceError ? err.code : `not a KeysliceError: ${String(err)}`;
  }
  return 'no error';
}

// ---- arbitraries -------------------------------------------------------------

/** One code point, biased to the edges: NUL, the UTF-8 length steps, the
 * surrogate range's neighbours, U+FFFF and astral characters (surrogate pairs). */
const codePoint = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '\u0000', 'a', 'b', '\u007f', '\u0080', '\u00e9', '\u00ff', '\u07ff', '\u0800',
      '\ud7ff', '\ue000', '\uffff', '\u{10000}', '\u{1f600}', '\u{10ffff}',
    ),
  },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);
const keyString = fc.string({ unit: codePoint, maxLength: 8 });

/** Decimals no double holds, of every exponent in DynamoDB's range and up to 38 digits, and
 * decimals just above and below a double (its shortest digits, nudged, then more digits), where
 * the encoding's choice of the double below matters most. */
const digitString = (min: number, max: number) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: min, maxLength: max }).map((d) => d.join(''));
const decimalFrom = (negative: boolean, digits: string, point: number): KeyValue => {
  const trimmed = digits.replace(/^0+/, '').replace(/0+$/, '');
  const lead = digits.length - digits.replace(/^0+/, '').length;
  if (trimmed === '') return 0;
  return numberValueOf({ negative, digits: trimmed.slice(0, 38), point: Math.max(-129, Math.min(126, point - lead)) });
};
const keyDecimal = fc.oneof(
  fc.tuple(fc.boolean(), digitString(1, 38), fc.integer({ min: -129, max: 126 })).map(([n, d, p]) => decimalFrom(n, d, p)),
  fc
    .tuple(fc.double({ min: 1e-120, max: 1e120, noNaN: true }), fc.boolean(), fc.boolean(), digitString(1, 20))
    .map(([x, negative, below, extra]) => {
      const { digits, point } = decimalOfNumber(x);
      const base = below ? (BigInt(digits) - 1n).toString().padStart(digits.length, '0') : digits;
      return decimalFrom(negative, base + extra + '1', point);
    }),
);

const keyNumber = fc.oneof(
  keyDecimal,
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer({ min: -1000, max: 1000 }),
  fc.integer().map((n) => n / 1024),
  fc.constantFrom(
    0, -0, Number.MIN_VALUE, -Number.MIN_VALUE, Number.MAX_VALUE, -Number.MAX_VALUE, Number.EPSILON,
    2 ** 53, -(2 ** 53), 2 ** 53 + 2, 0.1, -0.1, 1e-300, -1e-300, 1e300, -1e300, 2 ** -1022, -(2 ** -1022),
  ),
);

const keyByte = fc.oneof(fc.constantFrom(0x00, 0xff, 0x01, 0xfe), fc.integer({ min: 0, max: 255 }));
const keyBinary = fc.array(keyByte, { maxLength: 8 }).map((a) => Uint8Array.from(a));

interface TypeCase {
  type: KeyType;
  arb: fc.Arbitrary<KeyValue>;
  compare(a: KeyValue, b: KeyValue): number;
}

const TYPE_CASES: TypeCase[] = [
  { type: 'string', arb: keyString, compare: (a, b) => compareCodePoints(a as string, b as string) },
  { type: 'number', arb: keyNumber, compare: compareNumbers },
  { type: 'binary', arb: keyBinary, compare: (a, b) => compareBytes(a as Uint8Array, b as Uint8Array) },
];

/** What decoding should give back: the value itself, except -0 which is 0. */
const canonical = (type: KeyType, v: KeyValue): KeyValue => (type === 'number' && v === 0 ? 0 : v);

// ---- test vectors, read from the doc -----------------------------------------

type Vector = { type: KeyType; text: string; value: KeyValue; hex: string };

function parseValue(type: KeyType, text: string): KeyValue {
  switch (type) {
    case 'string':
      return JSON.parse(text) as string;
    case 'number': {
      if (text.startsWith('{')) return JSON.parse(text) as KeyValue; // a decimal, {"$N": "..."}
      const n = Number(text);
      if (text.trim() === '' || !Number.isFinite(n)) throw new Error(`not a finite number: ${text}`);
      return n;
    }
    case 'binary': {
      const m = /^\[((?:[0-9a-f]{2})(?: [0-9a-f]{2})*)?\]$/.exec(text);
      if (m === null) throw new Error(`not a byte list like [00 ff]: ${text}`);
      return Uint8Array.from((m[1] ?? '').split(' ').filter(Boolean), (h) => parseInt(h, 16));
    }
  }
}

function readVectors(): Vector[] {
  const doc = readFileSync(new URL('../docs/key-encoding.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Test vectors$/m)[1];
  if (section === undefined) throw new Error('docs/key-encoding.md has no "## Test vectors" section');
  const body = section.split(/^## /m)[0];
  const vectors: Vector[] = [];
  for (const line of body.split('\n')) {
    const m = /^\|\s*(string|number|binary)\s*\|\s*`([^`]*)`\s*\|\s*`([0-9a-f ]*)`\s*\|\s*$/.exec(line);
    if (m === null) {
      if (/^\|\s*(string|number|binary)\b/.test(line)) throw new Error(`unreadable vector row: ${line}`);
      continue;
    }
    const type = m[1] as KeyType;
    vectors.push({ type, text: m[2], value: parseValue(type, m[2]), hex: m[3] });
  }
  return vectors;
}

const VECTORS = readVectors();

describe('test vectors (docs/key-encoding.md)', () => {
  it('the doc has vectors for every type', () => {
    for (const type of ['string', 'number', 'binary'] as const) {
      expect(VECTORS.filter((v) => v.type === type).length, type).toBeGreaterThanOrEqual(7);
    }
  });

  it.each(VECTORS)('$type $text -> $hex', ({ type, value, hex: expected }) => {
    expect(hex(encodeKeyPart(type, value))).toBe(expected);
  });

  it.each(VECTORS)('$type $text decodes back', ({ type, value }) => {
    expect(decodeKey(encodeKeyPart(type, value), [type])).toEqual([canonical(type, value)]);
  });

  it('rows of each type are in ascending value order, and so is their hex', () => {
    for (const { type, compare } of TYPE_CASES) {
      const rows = VECTORS.filter((v) => v.type === type);
      for (let i = 1; i < rows.length; i++) {
        const [a, b] = [rows[i - 1], rows[i]];
        expect(compare(a.value, b.value), `${a.text} before ${b.text}`).toBeLessThanOrEqual(0);
        expect(sign(compareKeys(encodeKeyPart(type, a.value), encodeKeyPart(type, b.value)))).toBe(sign(compare(a.value, b.value)));
      }
    }
  });
});

// ---- order of single parts ---------------------------------------------------

describe.each(TYPE_CASES)('$type parts', ({ type, arb, compare }) => {
  const enc = (v: KeyValue) => encodeKeyPart(type, v);

  it('comparing two encoded keys with < gives the logical order', () => {
    check(
      fc.property(arb, arb, (a, b) => {
        expect(sign(compareKeys(enc(a), enc(b)))).toBe(sign(compare(a, b)));
      }),
    );
  });

  it('sorting by encoded key gives the same sequence as sorting by value (sorted-array model)', () => {
    check(
      fc.property(fc.array(arb, { maxLength: 40 }), (values) => {
        const byValue = [...values].sort(compare).map(enc);
        const byKey = values.map(enc).sort(compareKeys);
        expect(byKey.map(hex)).toEqual(byValue.map(hex));
      }),
      RUNS / 3,
    );
  });

  it('is a byte string that decodeKey turns back into the value', () => {
    check(
      fc.property(arb, (v) => {
        const key = enc(v);
        expect(isByteString(key)).toBe(true);
        const [back] = decodeKey(key, [type]);
        expect(back).toEqual(canonical(type, v));
        if (typeof v === 'number') expect(Object.is(back, canonical(type, v))).toBe(true);
      }),
    );
  });
});

describe('numbers', () => {
  it('a decimal just above a double sorts after every key of that double, outside [part, part + PARTS_END)', () => {
    const justAbove = fc.tuple(fc.double({ min: -1e120, max: 1e120, noNaN: true }), digitString(1, 20), narrow.string);
    check(
      fc.property(justAbove, ([x, extra, next]) => {
        fc.pre(x !== 0 && Math.abs(x) >= 1e-120);
        const { negative, digits, point } = decimalOfNumber(x);
        // Above x: a positive x gains digits; a negative one loses 1 in its last digit first.
        const base = negative ? (BigInt(digits) - 1n).toString().padStart(digits.length, '0') : digits;
        const d = decimalFrom(negative, base + extra + '1', point);
        fc.pre(typeof d !== 'number' && compareNumbers(d, x) > 0);
        const low = encodeKeyPart('number', x);
        const withSorting = low + encodeKeyPart('string', next);
        const above = encodeKeyPart('number', d);
        expect(low < withSorting && withSorting < low + PARTS_END).toBe(true);
        expect(above >= low + PARTS_END).toBe(true);
        expect(firstPartLength(above + encodeKeyPart('string', next))).toBe(above.length);
      }),
    );
  });

  it('compareNumbers (conditions, filters) agrees with the oracle and with the encoded order', () => {
    check(
      fc.property(keyNumber, keyNumber, (a, b) => {
        const expected = sign(compareNumbers(a, b));
        expect(sign(decimalCompare(a as NumberValue, b as NumberValue))).toBe(expected);
        expect(sign(compareKeys(encodeKeyPart('number', a), encodeKeyPart('number', b)))).toBe(expected);
      }),
    );
  });

  it('-0 and 0 are one key, and -0 decodes as 0', () => {
    expect(encodeKeyPart('number', -0)).toBe(encodeKeyPart('number', 0));
    expect(Object.is(decodeKey(encodeKeyPart('number', -0), ['number'])[0], 0)).toBe(true);
  });
});

// ---- compound keys -------------------------------------------------------------

describe('compound keys (sharding part, then sorting part)', () => {
  for (const sh of TYPE_CASES) {
    for (const so of TYPE_CASES) {
      const enc = ([s, x]: [KeyValue, KeyValue]) => encodeKeyPart(sh.type, s) + encodeKeyPart(so.type, x);
      const compare = (a: [KeyValue, KeyValue], b: [KeyValue, KeyValue]) => sh.compare(a[0], b[0]) || so.compare(a[1], b[1]);

      it(`(${sh.type}, ${so.type}) tuples sort lexicographically and decode back`, () => {
        check(
          fc.property(fc.array(fc.tuple(sh.arb, so.arb), { maxLength: 30 }), (pairs) => {
            const byValue = [...pairs].sort(compare).map(enc);
            const byKey = pairs.map(enc).sort(compareKeys);
            expect(byKey.map(hex)).toEqual(byValue.map(hex));
            for (const pair of pairs) {
              expect(decodeKey(enc(pair), [sh.type, so.type])).toEqual([canonical(sh.type, pair[0]), canonical(so.type, pair[1])]);
            }
          }),
          RUNS / 6,
        );
      });
    }
  }

  it('the keys of one sharding key are exactly those in [part, part + PARTS_END)', () => {
    for (const sh of TYPE_CASES) {
      for (const so of [null, ...TYPE_CASES]) {
        check(
          fc.property(sh.arb, sh.arb, so?.arb ?? fc.constant(null), (s1, s2, x) => {
            const low = encodeKeyPart(sh.type, s1);
            const key = encodeKeyPart(sh.type, s2) + (so === null ? '' : encodeKeyPart(so.type, x!));
            expect(low <= key && key < low + PARTS_END).toBe(sh.compare(s1, s2) === 0);
          }),
          RUNS / 4,
        );
      }
    }
  });

  it('prefixEnd(part) is not that range: it also covers a longer value that continues with NUL', () => {
    const part = encodeKeyPart('string', 'a');
    const other = encodeKeyPart('string', 'a\u0000b') + encodeKeyPart('number', 1);
    expect(part < other && other < prefixEnd(part)).toBe(true);
    expect(other < part + PARTS_END).toBe(false);
  });
});

// ---- prefixes ------------------------------------------------------------------

describe('encodeKeyPrefix and prefixEnd', () => {
  const cases = [
    {
      type: 'string' as const,
      arb: keyString,
      concat: (a: KeyValue, b: KeyValue) => (a as string) + (b as string),
      begins: (s: KeyValue, p: KeyValue) => (s as string).startsWith(p as string),
    },
    {
      type: 'binary' as const,
      arb: keyBinary,
      concat: (a: KeyValue, b: KeyValue) => concatBytes(a as Uint8Array, b as Uint8Array),
      begins: (s: KeyValue, p: KeyValue) => startsWithBytes(s as Uint8Array, p as Uint8Array),
    },
  ];

  for (const { type, arb, concat, begins } of cases) {
    /** [s, p], where s begins with p about half of the time. */
    const valueAndPrefix = fc
      .tuple(arb, arb, fc.boolean())
      .map(([p, x, join]) => [join ? concat(p, x) : x, p] as [KeyValue, KeyValue]);

    it(`${type}: a part starts with encodeKeyPrefix(p) iff the value begins with p, and lies in [prefix, prefixEnd) iff so`, () => {
      check(
        fc.property(valueAndPrefix, ([s, p]) => {
          const part = encodeKeyPart(type, s);
          const prefix = encodeKeyPrefix(type, p as string & Uint8Array);
          const end = prefixEnd(prefix);
          const expected = begins(s, p);
          expect(part.startsWith(prefix)).toBe(expected);
          expect(prefix <= part && part < end).toBe(expected);
        }),
      );
    });

    it(`${type}: begins-with bounds under a sharding part select that sharding key and prefix only`, () => {
      check(
        fc.property(keyString, keyString, valueAndPrefix, (sh1, sh2, [s, p]) => {
          const low = encodeKeyPart('string', sh1) + encodeKeyPrefix(type, p as string & Uint8Array);
          const key = encodeKeyPart('string', sh2) + encodeKeyPart(type, s);
          expect(low <= key && key < prefixEnd(low)).toBe(sh1 === sh2 && begins(s, p));
        }),
      );
    });
  }

  it('prefixEnd(b) bounds exactly the byte strings that start with b', () => {
    const bytes = fc.array(fc.oneof(fc.constant(0xff), fc.constant(0x00), fc.integer({ min: 0, max: 255 })), { maxLength: 6 });
    const toStr = (a: number[]) => String.fromCharCode(...a);
    check(
      fc.property(fc.constantFrom(0x01, 0x02, 0x21), bytes, bytes, fc.boolean(), (tag, b, rest, join) => {
        const prefix = toStr([tag, ...b]);
        const s = join ? prefix + toStr(rest) : toStr([tag, ...rest]);
        const end = prefixEnd(prefix);
        expect(isByteString(end)).toBe(true);
        expect(prefix <= s && s < end).toBe(s.startsWith(prefix));
      }),
    );
  });

  it('examples from the doc', () => {
    expect(hex(encodeKeyPrefix('string', 'ab'))).toBe('02 61 62');
    expect(hex(prefixEnd(encodeKeyPrefix('string', 'ab')))).toBe('02 61 63');
    expect(hex(encodeKeyPrefix('string', 'a\u0000'))).toBe('02 61 00 ff');
    expect(hex(prefixEnd(encodeKeyPrefix('string', 'a\u0000')))).toBe('02 61 01');
    expect(hex(encodeKeyPart('string', 'ab') + encodeKeyPart('number', 7))).toBe('02 61 62 00 21 c0 1c 00 00 00 00 00 00');
  });
});

// ---- what is rejected --------------------------------------------------------------

describe('lone surrogates', () => {
  const high = fc.integer({ min: 0xd800, max: 0xdbff }).map((c) => String.fromCharCode(c));
  const low = fc.integer({ min: 0xdc00, max: 0xdfff }).map((c) => String.fromCharCode(c));
  /** A well-formed string with one unpaired surrogate put in. */
  const illFormed = fc.oneof(
    fc.tuple(keyString, high, keyString).map(([a, h, b]) => a + h + 'x' + b), // high, not followed by a low
    fc.tuple(keyString, high).map(([a, h]) => a + h), // high at the end
    fc.tuple(keyString, low, keyString).map(([a, l, b]) => a + l + b), // low after a non-high (a is well-formed)
  );

  it('throw KeysliceError InvalidKey from encodeKeyPart and encodeKeyPrefix', () => {
    check(
      fc.property(illFormed, (s) => {
        expect(errorCodeOf(() => encodeKeyPart('string', s))).toBe('InvalidKey');
        expect(errorCodeOf(() => encodeKeyPrefix('string', s))).toBe('InvalidKey');
      }),
    );
  });

  it('examples', () => {
    for (const s of ['\ud800', '\udc00', 'a\ud83d', '\ude00a', '\ude00\ud83d', 'é\ud800x']) {
      expect(errorCodeOf(() => encodeKeyPart('string', s)), JSON.stringify(s)).toBe('InvalidKey');
    }
    expect(errorCodeOf(() => encodeKeyPart('string', '\ud83d\ude00'))).toBe('no error');
  });
});

// ---- keys of several columns ---------------------------------------------------

/** One key shape: the types of the sharding columns (1 or more) and of the sorting columns (0 or more). */
type Shape = { sharding: KeyType[]; sorting: KeyType[] };
type Tuple = { sharding: KeyValue[]; sorting: KeyValue[] };

const caseOf = (type: KeyType) => TYPE_CASES.find((c) => c.type === type)!;
const encodeTuple = (shape: Shape, t: Tuple) => encodeShardingPart(shape.sharding, t.sharding) + encodeSortingParts(shape.sorting, t.sorting);
/** The comparator over typed values: sharding columns, then sorting columns, each by its type's order. */
function compareTuples(shape: Shape, a: Tuple, b: Tuple): number {
  const types = [...shape.sharding, ...shape.sorting];
  const x = [...a.sharding, ...a.sorting];
  const y = [...b.sharding, ...b.sorting];
  for (let i = 0; i < types.length; i++) {
    const c = caseOf(types[i]).compare(x[i], y[i]);
    if (c !== 0) return c;
  }
  return 0;
}
const decodeTypes = (shape: Shape) => [shape.sharding.length === 1 ? shape.sharding[0] : shape.sharding, ...shape.sorting];
const decoded = (shape: Shape, t: Tuple) => [
  shape.sharding.length === 1 ? canonical(shape.sharding[0], t.sharding[0]) : t.sharding.map((v, i) => canonical(shape.sharding[i], v)),
  ...t.sorting.map((v, i) => canonical(shape.sorting[i], v)),
];

const keyType = fc.constantFrom<KeyType>('string', 'number', 'binary');
const shapeArb: fc.Arbitrary<Shape> = fc.record({
  sharding: fc.array(keyType, { minLength: 1, maxLength: 3 }),
  sorting: fc.array(keyType, { maxLength: 3 }),
});
/** Values drawn from few choices per column, so that tuples often share leading columns. */
const narrow: Record<KeyType, fc.Arbitrary<KeyValue>> = {
  string: fc.oneof(fc.constantFrom('', 'a', 'a\u0000', 'a\u0000b', 'ab', 'b', '\u{1f600}', '\uffff'), keyString),
  number: fc.oneof(fc.constantFrom(-1, 0, 1, 9, 10, 100, 6777, 0.5, -0), keyNumber),
  binary: fc.oneof(fc.constantFrom(Uint8Array.of(), Uint8Array.of(0), Uint8Array.of(0, 0), Uint8Array.of(0xff), Uint8Array.of(0xff, 0)), keyBinary),
};
const tupleOf = (shape: Shape): fc.Arbitrary<Tuple> =>
  fc.record({ sharding: fc.tuple(...shape.sharding.map((t) => narrow[t])), sorting: fc.tuple(...shape.sorting.map((t) => narrow[t])) }) as fc.Arbitrary<Tuple>;
const shapeAndTuples = shapeArb.chain((shape) => fc.tuple(fc.constant(shape), fc.array(tupleOf(shape), { maxLength: 30 })));

function parseTypes(text: string): KeyType[] {
  if (text === '-') return [];
  return text.split(',').map((t) => {
    const type = t.trim();
    if (type !== 'string' && type !== 'number' && type !== 'binary') throw new Error(`not a key type: ${type}`);
    return type;
  });
}

/** `54, "a100" / 9, [00 ff]`: sharding values, then `/` and the sorting values. */
function parseTuple(text: string, shape: Shape): Tuple {
  const tokens: string[] = text.match(/"(?:[^"\\]|\\.)*"|\[[0-9a-f ]*\]|\/|[^\s,/]+/g) ?? [];
  const slash = tokens.indexOf('/');
  const [sh, so] = slash < 0 ? [tokens, []] : [tokens.slice(0, slash), tokens.slice(slash + 1)];
  if (sh.length !== shape.sharding.length || so.length !== shape.sorting.length) throw new Error(`values ${text} do not fit the key shape`);
  return { sharding: sh.map((t, i) => parseValue(shape.sharding[i], t)), sorting: so.map((t, i) => parseValue(shape.sorting[i], t)) };
}

/** The rows of the doc's table under `heading`: cells without their backticks. */
function docTable(heading: string, columns: number): string[][] {
  const doc = readFileSync(new URL('../docs/key-encoding.md', import.meta.url), 'utf8');
  const section = doc.split(new RegExp(`^#+ ${heading}$`, 'm'))[1];
  if (section === undefined) throw new Error(`docs/key-encoding.md has no "${heading}" section`);
  const rows: string[][] = [];
  for (const line of section.split(/^#+ /m)[0].split('\n')) {
    if (!line.startsWith('| `')) continue;
    const cells = line.split(/\s*\|\s*/).slice(1, -1);
    if (cells.length !== columns || cells.some((c) => !/^`[^`]*`$/.test(c))) throw new Error(`unreadable row: ${line}`);
    rows.push(cells.map((c) => c.slice(1, -1)));
  }
  return rows;
}

const KEY_VECTORS = docTable('Key vectors', 4).map(([sh, so, values, hexKey]) => {
  const shape = { sharding: parseTypes(sh), sorting: parseTypes(so) };
  return { shape, text: `${sh} / ${so}: ${values}`, tuple: parseTuple(values, shape), hex: hexKey };
});

describe('key vectors (docs/key-encoding.md)', () => {
  it('the doc has key vectors with tuple parts and with several sorting columns', () => {
    expect(KEY_VECTORS.filter((v) => v.shape.sharding.length > 1).length).toBeGreaterThanOrEqual(5);
    expect(KEY_VECTORS.filter((v) => v.shape.sorting.length > 1).length).toBeGreaterThanOrEqual(5);
  });

  it.each(KEY_VECTORS)('$text', ({ shape, tuple, hex: expected }) => {
    const key = encodeTuple(shape, tuple);
    expect(hex(key)).toBe(expected);
    expect(decodeKey(key, decodeTypes(shape))).toEqual(decoded(shape, tuple));
    expect(firstPartLength(key)).toBe(encodeShardingPart(shape.sharding, tuple.sharding).length);
  });

  it('rows of one key shape are in ascending value order, and so is their hex', () => {
    for (let i = 1; i < KEY_VECTORS.length; i++) {
      const [a, b] = [KEY_VECTORS[i - 1], KEY_VECTORS[i]];
      if (JSON.stringify(a.shape) !== JSON.stringify(b.shape)) continue;
      expect(compareTuples(a.shape, a.tuple, b.tuple), `${a.text} before ${b.text}`).toBeLessThan(0);
      expect(a.hex < b.hex, `${a.text} before ${b.text}`).toBe(true);
    }
  });

  it('the Tablestore rows need no padding and no connector: (a100, 9) < (a100, 10) < (a100, 100) < (a100, 6777) < (a1001, 6777)', () => {
    const shape: Shape = { sharding: ['number'], sorting: ['string', 'number', 'number'] };
    const rows: Tuple[] = [['a1001', 6777], ['a100', 100], ['a100', 9], ['a100', 6777], ['a100', 10]].map(([s, c]) => ({ sharding: [54], sorting: [s, c, 1] }));
    const sorted = rows.map((t) => [encodeTuple(shape, t), t] as const).sort((x, y) => compareKeys(x[0], y[0]));
    expect(sorted.map(([, t]) => `${t.sorting[0]},${t.sorting[1]}`)).toEqual(['a100,9', 'a100,10', 'a100,100', 'a100,6777', 'a1001,6777']);
    // The spliced string sorts them otherwise: by text, "10" < "100" < "6777" < "9".
    expect(rows.map((t) => `${t.sorting[0]},${t.sorting[1]}`).sort()).toEqual(['a100,10', 'a100,100', 'a100,6777', 'a100,9', 'a1001,6777']);
  });
});

describe('keys of several columns against a comparator over the typed values (seeded model)', () => {
  beforeAll(() => initHashing());

  it('sorting by encoded key gives the order of the tuples, for random shapes of mixed types', () => {
    check(
      fc.property(shapeAndTuples, ([shape, tuples]) => {
        const byValue = [...tuples].sort((a, b) => compareTuples(shape, a, b)).map((t) => hex(encodeTuple(shape, t)));
        const byKey = tuples.map((t) => encodeTuple(shape, t)).sort(compareKeys).map(hex);
        expect(byKey).toEqual(byValue);
      }),
      RUNS / 3,
    );
  });

  it('two keys compare as their tuples, equal exactly when the tuples are', () => {
    const pair = shapeArb.chain((shape) => fc.tuple(fc.constant(shape), tupleOf(shape), tupleOf(shape)));
    check(
      fc.property(pair, ([shape, a, b]) => {
        expect(sign(compareKeys(encodeTuple(shape, a), encodeTuple(shape, b)))).toBe(sign(compareTuples(shape, a, b)));
      }),
    );
  });

  it('decodes back, and the first part is the sharding part, found without the shape', () => {
    check(
      fc.property(shapeAndTuples, ([shape, tuples]) => {
        for (const t of tuples) {
          const key = encodeTuple(shape, t);
          expect(isByteString(key)).toBe(true);
          expect(decodeKey(key, decodeTypes(shape))).toEqual(decoded(shape, t));
          expect(key.slice(0, firstPartLength(key))).toBe(encodeShardingPart(shape.sharding, t.sharding));
        }
      }),
      RUNS / 3,
    );
  });

  it('the keys of one sharding tuple are exactly those in [part, part + ff), whatever follows', () => {
    const shardingPair = shapeArb.chain((shape) => fc.tuple(fc.constant(shape), tupleOf(shape), tupleOf(shape), fc.boolean()));
    check(
      fc.property(shardingPair, ([shape, a, b, same]) => {
        const other: Tuple = same ? { sharding: a.sharding, sorting: b.sorting } : b;
        const low = encodeShardingPart(shape.sharding, a.sharding);
        const key = encodeTuple(shape, other);
        const equal = shape.sharding.every((t, i) => caseOf(t).compare(a.sharding[i], other.sharding[i]) === 0);
        expect(low <= key && key < low + PARTS_END).toBe(equal);
      }),
    );
  });

  it('places a sharding part in the slice its values hash to (one column as before, several by the tuple part)', () => {
    check(
      fc.property(shapeAndTuples, ([shape, tuples]) => {
        for (const t of tuples) {
          const part = encodeShardingPart(shape.sharding, t.sharding);
          const expected = shape.sharding.length === 1 ? sliceOf(shape.sharding[0], t.sharding[0], 1024) : columnsHash(shape.sharding, t.sharding, 'sharding') % 1024;
          expect(sliceOfPart(part, 1024)).toBe(expected);
        }
      }),
      RUNS / 6,
    );
  });

  it('a single column hashes as it always did: tuple parts are only for several columns', () => {
    check(
      fc.property(keyType.chain((t) => fc.tuple(fc.constant(t), narrow[t])), ([type, v]) => {
        expect(encodeShardingPart([type], [v])).toBe(encodeKeyPart(type, v));
        expect(columnsHash([type], [v], 'sharding')).toBe(columnsHash([type], [v], 'sorting'));
      }),
    );
  });
});

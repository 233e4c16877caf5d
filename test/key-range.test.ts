// Key ranges and object names against plain models, without a cluster: for
// random key shapes of mixed types, the range a query's sorting condition
// becomes (coordinator/router/key-range.ts) holds exactly the keys a comparator over
// the typed values says it should, and every object name reads back as the
// values it was made from (coordinator/router/object-name.ts). Seeded, so a failure replays.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { KeySchema } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { encodeShardingPart, encodeSortingParts, type KeyType, type KeyValue } from '../shared/key-encoding.js';
import type { RangeSpec } from '../shared/protocol.js';
import type { Table } from '../coordinator/metadata/catalog.js';
import { isEmptyRange, rangeSpec, sortRangeOf, type SortRange } from '../coordinator/router/key-range.js';
import { objectName, parseObjectName } from '../coordinator/router/object-name.js';
import { rng } from './cluster-fixture.js';
import { beginsWith, compare } from './key-model.js';

const SEED = 20_261_123;

function tableOf(sharding: KeySchema[], sorting: KeySchema[]): Table {
  const describe = (c: KeySchema[]) => (c.length === 1 ? c[0] : c);
  return { id: 1, name: 't', shardingKey: describe(sharding), sortingKey: sorting.length === 0 ? null : describe(sorting), evenDistribution: null, createdAt: 0, sharding, sorting };
}

const TYPES: KeyType[] = ['string', 'number', 'binary'];
const STRINGS = ['a', 'a\u0000', 'a\u0000b', 'ab', 'b', 'a100', 'a1001', '\u{1f600}', 'x.y', '50%', '%2E'];
const NUMBERS = [-1.5, -1, 0, 1, 9, 10, 100, 6777, 2 ** 53];
const BINARIES = [[0], [0, 0], [1], [0xff], [0xff, 0], [0x61, 0x62]].map((b) => Uint8Array.from(b));

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)];
}
function valueOf(type: KeyType, r: () => number): KeyValue {
  return type === 'string' ? pick(r, STRINGS) : type === 'number' ? pick(r, NUMBERS) : pick(r, BINARIES);
}
const inSpec = (s: RangeSpec, key: string) => (s.lowInclusive ? key >= s.low : key > s.low) && (s.highInclusive ? key <= s.high : key < s.high);

describe('sorting conditions as key ranges (model)', () => {
  it('a range holds exactly the keys whose values match: fixed leading columns, then bounds, between or begins with on the next', () => {
    const r = rng(SEED);
    let nonEmpty = 0;
    let contradictions = 0;
    for (let round = 0; round < 400; round++) {
      const sortingTypes = Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(r, TYPES));
      const shardingType = pick(r, TYPES);
      const sorting = sortingTypes.map((type, i) => ({ name: `s${i}`, type }));
      const table = tableOf([{ name: 'p', type: shardingType }], sorting);
      // Two sharding keys, one of them sometimes the other's prefix ("a" and "a\u0000b").
      const [mine, other] = shardingType === 'string' ? ['a', 'a\u0000b'] : shardingType === 'number' ? [1, 2] : [Uint8Array.of(0), Uint8Array.of(0, 0)];
      const items = Array.from({ length: 30 }, () => ({ sharding: r() < 0.7 ? mine : other, sorting: sortingTypes.map((t) => valueOf(t, r)) }));
      const keyOf = (i: (typeof items)[number]) => encodeShardingPart([shardingType], [i.sharding]) + encodeSortingParts(sortingTypes, i.sorting);
      const prefix = encodeShardingPart([shardingType], [mine]);

      // A random condition: k fixed columns (values often from the items), then one on column k.
      const k = Math.floor(r() * sortingTypes.length);
      const model = items[Math.floor(r() * items.length)].sorting;
      const fixed = model.slice(0, k).map((v, i) => (r() < 0.8 ? v : valueOf(sortingTypes[i], r)));
      const type = sortingTypes[k];
      const v = () => (r() < 0.6 ? items[Math.floor(r() * items.length)].sorting[k] : valueOf(type, r));
      const kinds = ['none', 'eq', 'lower', 'upper', 'both', 'both', 'between', ...(type === 'number' ? [] : ['beginsWith'])];
      const kind = pick(r, kinds);
      const bound = () => ({ value: v(), inclusive: r() < 0.5 });
      let range: SortRange;
      let matches: (x: KeyValue) => boolean;
      if (kind === 'none') {
        range = { fixed, lower: null, upper: null, ordered: false };
        matches = () => true;
      } else if (kind === 'eq') {
        const e = v();
        range = { fixed: [...fixed, e], lower: null, upper: null, ordered: false };
        matches = (x) => compare(type, x, e) === 0;
      } else if (kind === 'beginsWith') {
        const full = v();
        const p = type === 'string' ? [...(full as string)].slice(0, 1 + Math.floor(r() * 2)).join('') : (full as Uint8Array).slice(0, 1 + Math.floor(r() * 2));
        range = { fixed, lower: null, upper: null, beginsWith: p, ordered: false };
        matches = (x) => beginsWith(type, x, p);
      } else {
        let lower = kind === 'upper' ? null : bound();
        let upper = kind === 'lower' ? null : bound();
        if (kind === 'between') {
          const [a, b] = [v(), v()].sort((x, y) => compare(type, x, y));
          [lower, upper] = [{ value: a, inclusive: true }, { value: b, inclusive: true }];
        }
        range = { fixed, lower, upper, ordered: kind === 'between' };
        matches = (x) =>
          (lower === null || (lower.inclusive ? compare(type, x, lower.value as KeyValue) >= 0 : compare(type, x, lower.value as KeyValue) > 0)) &&
          (upper === null || (upper.inclusive ? compare(type, x, upper.value as KeyValue) <= 0 : compare(type, x, upper.value as KeyValue) < 0));
        if (lower !== null && upper !== null) {
          const c = compare(type, lower.value as KeyValue, upper.value as KeyValue);
          const contradictory = c > 0 || (c === 0 && !(lower.inclusive && upper.inclusive));
          if (contradictory) contradictions++;
          expect(isEmptyRange(rangeSpec(table, prefix, range, false, 10, null, null)), JSON.stringify({ lower, upper })).toBe(contradictory);
        }
      }
      const spec = rangeSpec(table, prefix, range, false, 10, null, null);
      for (const item of items) {
        const want = item.sharding === mine && fixed.every((f, i) => compare(sortingTypes[i], item.sorting[i], f as KeyValue) === 0) && matches(item.sorting[k]);
        expect(inSpec(spec, keyOf(item)), JSON.stringify({ kind, fixed, item }, (_, x) => (x instanceof Uint8Array ? [...x] : x))).toBe(want);
        if (want) nonEmpty++;
      }
    }
    // The run exercised both matching and contradictory ranges.
    expect(nonEmpty).toBeGreaterThan(500);
    expect(contradictions).toBeGreaterThan(5);
  });

  it('between with low > high is refused; two contradicting bounds are an empty range', () => {
    const table = tableOf([{ name: 'car_id', type: 'string' }], [{ name: 'trip_id', type: 'number' }]);
    const prefix = encodeShardingPart(['string'], ['c']);
    expect(() => rangeSpec(table, prefix, sortRangeOf(table, { between: [50, 10] }), false, 10, null, null)).toThrow(KeysliceError);
    for (const c of [{ gt: 50, lte: 10 }, { gt: 10, lt: 10 }, { gte: 10, lt: 10 }, { gt: 10, lte: 10 }]) {
      expect(isEmptyRange(rangeSpec(table, prefix, sortRangeOf(table, c), false, 10, null, null)), JSON.stringify(c)).toBe(true);
    }
    expect(isEmptyRange(rangeSpec(table, prefix, sortRangeOf(table, { gte: 10, lte: 10 }), false, 10, null, null))).toBe(false);
  });

  it('the structured form of several sorting columns names them in order', () => {
    const table = tableOf([{ name: 'DeviceID', type: 'number' }], [
      { name: 'SellerID', type: 'string' },
      { name: 'CardID', type: 'number' },
      { name: 'OrderNumber', type: 'number' },
    ]);
    expect(sortRangeOf(table, { SellerID: 'a100', CardID: { gte: 10, lte: 100 } })).toEqual({
      fixed: ['a100'],
      lower: { value: 10, inclusive: true },
      upper: { value: 100, inclusive: true },
      ordered: false,
    });
    expect(sortRangeOf(table, { SellerID: { eq: 'a100' }, CardID: 9 })).toEqual({ fixed: ['a100', 9], lower: null, upper: null, ordered: false });
    const refused = (c: unknown) => {
      try {
        sortRangeOf(table, c);
      } catch (err) {
        return (err as KeysliceError).message;
      }
      return 'accepted';
    };
    expect(refused({ CardID: 9 })).toMatch(/names "CardID" but not "SellerID"/);
    expect(refused({ SellerID: { gt: 'a' }, CardID: 9 })).toMatch(/only the last column named/);
    expect(refused({ Seller: 'a' })).toMatch(/"Seller", which is not a sorting column/);
    expect(refused({ SellerID: 'a', CardID: { gt: 1, gte: 2 } })).toMatch(/one lower bound/);
    expect(refused({ SellerID: 'a', CardID: { from: 1 } })).toMatch(/does not take "from"/);
  });
});

// ---- object names -----------------------------------------------------------------

describe('object names', () => {
  const shapes: [KeyType[], KeyType[]][] = [
    [['string'], []],
    [['number'], ['string']],
    [['binary'], ['number']],
    [['number'], ['string', 'number', 'number']],
    [['number', 'string', 'number'], ['number']],
    [['string', 'binary'], []],
    [['string', 'string'], ['string', 'string']],
  ];

  it('read back as the values they were made from, for values with periods and percent signs', () => {
    const r = rng(SEED + 1);
    for (let round = 0; round < 2000; round++) {
      const [sh, so] = pick(r, shapes);
      const table = tableOf(
        sh.map((type, i) => ({ name: `k${i}`, type })),
        so.map((type, i) => ({ name: `s${i}`, type })),
      );
      const v3io = sh.length === 1 && so.length <= 1;
      // The v3io form refuses a period in the sharding value of a compound key (and so a fraction).
      const value = (type: KeyType, periodFree: boolean): KeyValue => {
        for (;;) {
          const x = valueOf(type, r);
          if (!periodFree || (typeof x === 'string' ? !x.includes('.') : typeof x === 'number' ? Number.isSafeInteger(x) : true)) return x;
        }
      };
      const sharding = sh.map((t) => value(t, v3io && so.length === 1));
      const sorting = so.map((t) => value(t, false));
      const name = objectName(table, sharding, sorting);
      const back = parseObjectName(table, name);
      const plain = (xs: unknown[]) => xs.map((x) => (x instanceof Uint8Array ? [...x] : x));
      expect(plain(back.sharding), name).toEqual(plain(sharding));
      expect(plain(back.sorting), name).toEqual(plain(sorting));
    }
  });

  const doc = readFileSync(new URL('../docs/key-encoding.md', import.meta.url), 'utf8');
  const section = doc.split(/^### Object names$/m)[1].split(/^#+ /m)[0];
  const rows = section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => l.split(/\s*\|\s*/).slice(1, -1).map((c) => c.slice(1, -1)));

  it('the doc has examples of both forms', () => {
    expect(rows.length).toBeGreaterThanOrEqual(4);
  });

  it.each(rows)('%s / %s: %s is %s', (sh, so, values, name) => {
    const types = (t: string) => (t === '-' ? [] : (t.split(', ') as KeyType[]));
    const table = tableOf(
      types(sh).map((type, i) => ({ name: `k${i}`, type })),
      types(so).map((type, i) => ({ name: `s${i}`, type })),
    );
    const parse = (type: KeyType, text: string): KeyValue =>
      type === 'binary' ? Uint8Array.from(text.slice(1, -1).split(' '), (h) => parseInt(h, 16)) : (JSON.parse(text) as KeyValue);
    const [shText, soText = ''] = values.split(' / ');
    const tokens = (text: string) => text.match(/"(?:[^"\\]|\\.)*"|\[[0-9a-f ]*\]|[^\s,]+/g) ?? [];
    const sharding = tokens(shText).map((t, i) => parse(table.sharding[i].type, t));
    const sorting = tokens(soText).map((t, i) => parse(table.sorting[i].type, t));
    expect(objectName(table, sharding, sorting)).toBe(name);
    const back = parseObjectName(table, name);
    expect(back.sharding).toEqual(sharding);
    expect(back.sorting).toEqual(sorting);
  });

  it('refuses a name with too few columns or a stray percent sign', () => {
    const table = tableOf([{ name: 'a', type: 'string' }, { name: 'b', type: 'string' }], [{ name: 'c', type: 'string' }]);
    expect(() => parseObjectName(table, 'x.y')).toThrow(/must be <a>.<b>.<c>/);
    expect(() => parseObjectName(table, 'x%.y.z')).toThrow(/%25/);
    expect(parseObjectName(table, 'x%2e.y%25.z.%')).toEqual({ sharding: ['x.', 'y%'], sorting: ['z.%'] });
  });
});

// Expressions through the real cluster: every operator and function as a filter
// (evaluated on the slice) and as a write condition (evaluated by the owning
// worker), every update clause, projections, key conditions, filters with
// limit and marker, and the ValidationErrors. Table-driven; both transports.
import { beforeAll, describe, expect, it } from 'vitest';
import { KeysliceError } from '../shared/errors.js';
import { EXPRESSION_BYTES_MAX } from '../shared/limits.js';
import type { Item, Value } from '../shared/values.js';
import { expectError, plain, useCluster, type Api } from './cluster-fixture.js';

const c = useCluster();
const T = 'expr';

const transports: [string, () => Api][] = [
  ['websocket', () => c.client],
  ['http', () => c.http],
];

/** The item every condition case is evaluated against. */
const ITEM: Item = {
  pk: 'e',
  sk: 1,
  s: 'hello',
  n: 5,
  f: -1.5,
  b: true,
  nul: null,
  bin: new Uint8Array([1, 2, 3]),
  l: [1, 'two', { x: 1 }],
  m: { a: { b: [10, 20, 30] }, s: 'x' },
  e: '',
  el: [],
  em: {},
  u: 'é',
  astral: '\u{1F600}',
  bmp: '\uFFFD',
  'odd name': 'spaces',
  ss: { $SS: ['a', 'b'] },
  ns: { $NS: [1, 2.5] },
};

/** Placeholders the cases draw from; each case sends only the ones its text uses. */
const V: Record<string, Value> = {
  ':zero': 0,
  ':one': 1,
  ':two': 2,
  ':three': 3,
  ':five': 5,
  ':six': 6,
  ':ten': 10,
  ':twenty': 20,
  ':s5': '5',
  ':hello': 'hello',
  ':he': 'he',
  ':lo': 'lo',
  ':ell': 'ell',
  ':hz': 'hz',
  ':a': 'a',
  ':z': 'z',
  ':s1': '1',
  ':s9': '9',
  ':nope': 'nope',
  ':twoStr': 'two',
  ':threeStr': 'three',
  ':bin4': new Uint8Array([1, 2, 4]),
  ':bin12': new Uint8Array([1, 2]),
  ':bin23': new Uint8Array([2, 3]),
  ':list': [1, 'two', { x: 1 }],
  ':mapx': { x: 1 },
  ':mapab': { b: [10, 20, 30] },
  ':S': 'S',
  ':N': 'N',
  ':B': 'B',
  ':BOOL': 'BOOL',
  ':NULL': 'NULL',
  ':L': 'L',
  ':M': 'M',
  ':t': true,
  ':more': [9],
  ':empty': [],
  ':x': 'x',
  ':pk': 'e',
  ':ssab': { $SS: ['b', 'a'] },
  ':ssa': { $SS: ['a'] },
  ':ssc': { $SS: ['c'] },
  ':nsx': { $NS: [3] },
  ':SS': 'SS',
  ':NS': 'NS',
};
const N: Record<string, string> = { '#l': 'l', '#name': '__name', '#odd': 'odd name', '#s': 's', '#m': 'm' };

function used<T>(text: string, all: Record<string, T>): Record<string, T> | undefined {
  const out = Object.fromEntries(Object.entries(all).filter(([k]) => new RegExp(`${k}(?![A-Za-z0-9_])`).test(text)));
  return Object.keys(out).length > 0 ? out : undefined;
}

function placeholders(...texts: string[]): { names?: Record<string, string>; values?: Record<string, Value> } {
  const text = texts.join(' ');
  const names = used(text, N);
  const values = used(text, V);
  return { ...(names ? { names } : {}), ...(values ? { values } : {}) };
}

const CONDITIONS: [string, boolean][] = [
  // sets: equal in any order, contains an element, size, type
  ['ss = :ssab', true],
  ['ss = :ssa', false],
  ['ss <> :ssab', false],
  ['contains(ss, :a)', true],
  ['contains(ss, :z)', false],
  ['contains(ns, :one)', true],
  ['size(ss) = :two', true],
  ['attribute_type(ss, :SS)', true],
  ['attribute_type(ns, :NS)', true],
  ['attribute_type(ss, :M)', false],
  ['ss IN (:ssa, :ssab)', true],
  // comparators, with type mismatches and missing attributes
  ['n = :five', true],
  ['n = :s5', false],
  ['n <> :five', false],
  ['n <> :six', true],
  ['n <> :s5', true],
  ['missing = :five', false],
  ['missing <> :five', true],
  ['n < :six', true],
  ['n <= :five', true],
  ['n > :five', false],
  ['n >= :five', true],
  ['f < :zero', true],
  ['s < :hz', true],
  ['s > :five', false],
  ['bin < :bin4', true],
  ['missing < :six', false],
  ['astral > bmp', true], // code point order, not UTF-16 order
  ['m.a.b[1] = :twenty', true],
  ['m.a.b[5] = :twenty', false],
  ['l[2].x = :one', true],
  ['#l[0] = :one', true],
  ['l = :list', true],
  ['m.a = :mapab', true],
  ['#odd = #s', false],
  ['(n) = (:five)', true],
  // BETWEEN and IN
  ['n BETWEEN :one AND :five', true],
  ['n BETWEEN :six AND :ten', false],
  ['s BETWEEN :a AND :z', true],
  ['n BETWEEN :s1 AND :s9', false],
  ['missing BETWEEN :one AND :five', false],
  ['n IN (:one, :five)', true],
  ['s IN (:one, :five)', false],
  ['missing IN (:one)', false],
  ['l[1] IN (:twoStr, :one)', true],
  ['m.a IN (:mapx, :mapab)', true],
  // AND, OR, NOT and their precedence
  ['n = :one OR n = :five AND s = :hello', true],
  ['(n = :one OR n = :five) AND s = :nope', false],
  ['n = :five OR n = :one AND s = :nope', true],
  ['NOT n = :one AND s = :hello', true],
  ['NOT (n = :five AND s = :nope)', true],
  ['NOT n = :five', false],
  ['n BETWEEN :one AND :five AND s = :nope', false],
  ['n BETWEEN :one AND :five OR s = :nope', true],
  ['n = :five and s = :hello', true],
  // functions
  ['attribute_exists(s)', true],
  ['attribute_exists(missing)', false],
  ['attribute_exists(m.a.b[2])', true],
  ['attribute_exists(m.a.b[3])', false],
  ['attribute_exists(nul)', true],
  ['attribute_exists(#name)', true],
  ['attribute_not_exists(missing)', true],
  ['attribute_not_exists(s)', false],
  ['attribute_not_exists(m.a.c)', true],
  ['attribute_type(s, :S)', true],
  ['attribute_type(n, :N)', true],
  ['attribute_type(bin, :B)', true],
  ['attribute_type(b, :BOOL)', true],
  ['attribute_type(nul, :NULL)', true],
  ['attribute_type(l, :L)', true],
  ['attribute_type(m, :M)', true],
  ['attribute_type(s, :N)', false],
  ['attribute_type(missing, :S)', false],
  ['begins_with(s, :he)', true],
  ['begins_with(s, :lo)', false],
  ['begins_with(bin, :bin12)', true],
  ['begins_with(n, :he)', false],
  ['begins_with(missing, :he)', false],
  ['contains(s, :ell)', true],
  ['contains(l, :twoStr)', true],
  ['contains(l, :mapx)', true],
  ['contains(l, :threeStr)', false],
  ['contains(bin, :bin23)', true],
  ['contains(m, :s5)', false],
  ['contains(n, :five)', false],
  ['size(s) = :five', true],
  ['size(u) = :two', true], // UTF-8 bytes
  ['size(l) = :three', true],
  ['size(m) = :two', true],
  ['size(bin) = :three', true],
  ['size(e) = :zero AND size(el) = :zero AND size(em) = :zero', true],
  ['size(n) >= :zero', false],
  ['size(missing) >= :zero', false],
  ['size(m.a.b) BETWEEN :two AND :three', true],
  // key and system attributes
  ['pk = :pk AND sk = :one', true],
  ['__mtime > :zero', true],
];

beforeAll(async () => {
  await c.client.createTable(T, { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
  await c.client.putItem(T, ITEM);
});

describe.each(transports)('conditions over %s', (transport, api) => {
  it.each(CONDITIONS)('filter %s is %s', async (condition, expected) => {
    const res = await api().request('GetItems', {
      table: T,
      keyCondition: 'pk = :kp AND sk = :ks',
      filter: condition,
      ...placeholders(condition),
      values: { ...placeholders(condition).values, ':kp': 'e', ':ks': 1 },
    });
    expect(res.items.length, condition).toBe(expected ? 1 : 0);
  });

  it.each(CONDITIONS)('write condition %s is %s', async (condition, expected) => {
    const p = placeholders(condition);
    const request = api().request('UpdateItem', {
      table: T,
      key: 'e.1',
      update: 'SET #probe = :probe',
      condition,
      names: { ...p.names, '#probe': `probe_${transport}` },
      values: { ...p.values, ':probe': condition },
    });
    if (expected) await request;
    else await expectError(request, 'ConditionalCheckFailed');
    const now = (await api().request('GetItem', { table: T, key: 'e.1' })).item!;
    expect(now[`probe_${transport}`] === condition, condition).toBe(expected);
  });
});

type UpdateCase = [expression: string, expected: Record<string, Value | undefined> | RegExp];
const START: Item = { s: 'hello', n: 5, l: [1, 'two', { x: 1 }], m: { a: { b: [10, 20, 30] }, s: 'x' }, ss: { $SS: ['a', 'b'] } };
const UPDATES: UpdateCase[] = [
  ['SET a = :one', { a: 1 }],
  ['SET n = n + :one', { n: 6 }],
  ['SET n = n - :one', { n: 4 }],
  ['SET n = :one + :two', { n: 3 }],
  ['SET n = (n + :one)', { n: 6 }],
  ['SET x = if_not_exists(missing, :zero)', { x: 0 }],
  ['SET n = if_not_exists(n, :zero)', { n: 5 }],
  ['SET c = if_not_exists(c, :zero) + :one', { c: 1 }],
  ['SET l = list_append(l, :more)', { l: [1, 'two', { x: 1 }, 9] }],
  ['SET l = list_append(:more, l)', { l: [9, 1, 'two', { x: 1 }] }],
  ['SET nl = list_append(if_not_exists(nl, :empty), :more)', { nl: [9] }],
  ['SET m.a.b[1] = :x', { m: { a: { b: [10, 'x', 30] }, s: 'x' } }],
  ['SET m.a.c = :x', { m: { a: { b: [10, 20, 30], c: 'x' }, s: 'x' } }],
  ['SET m.a.b[10] = :x', { m: { a: { b: [10, 20, 30, 'x'] }, s: 'x' } }],
  ['SET #m.#s = :one', { m: { a: { b: [10, 20, 30] }, s: 1 } }],
  ['SET s = n, n = s', { s: 5, n: 'hello' }],
  ['SET copy = m.a', { copy: { b: [10, 20, 30] } }],
  ['REMOVE s', { s: undefined }],
  ['REMOVE missing', {}],
  ['REMOVE m.a.b[0], m.a.b[2]', { m: { a: { b: [20] }, s: 'x' } }],
  ['REMOVE l[1]', { l: [1, { x: 1 }] }],
  ['REMOVE l[9], missing.deeper', {}],
  ['ADD n :one', { n: 6 }],
  ['ADD fresh :five', { fresh: 5 }],
  ['ADD m.a.b[0] :one', { m: { a: { b: [11, 20, 30] }, s: 'x' } }],
  ['SET a = :one REMOVE s ADD n :two', { a: 1, s: undefined, n: 7 }],
  ['remove s set a = :one', { a: 1, s: undefined }],
  // type mismatches and invalid paths: nothing changes
  ['SET s = s + :one', /\+ takes two numbers, got "s" \(a string\) and a number/],
  ['SET x = missing + :one', /"missing" does not exist in the item/],
  ['SET l = list_append(s, :more)', /list_append takes two lists/],
  ['SET missing.x = :one', /"missing" does not exist/],
  ['SET s.x = :one', /"s" is a string, not a map/],
  ['SET l[0].y = :one', /"l\[0\]" is a number, not a map/],
  ['SET m[0] = :one', /"m" is a map, not a list/],
  ['ADD s :one', /cannot ADD to "s": it holds a string, not a number/],
  ['SET n = :one, s = s + :one', /takes two numbers/],
  ['ADD n :hello', /ADD at position 5 takes a number or a set; :hello is a string/],
  ['ADD l :more', /ADD at position 5 takes a number or a set; :more is a list/],
  ['DELETE l :more', /DELETE at position 8 removes the elements of a set from a set; :more is a list/],
  // sets: ADD and DELETE of elements
  ['ADD ss :ssc', { ss: { $SS: ['a', 'b', 'c'] } }],
  ['ADD ss :ssab', {}],
  ['ADD fresh :ssc', { fresh: { $SS: ['c'] } }],
  ['DELETE ss :ssa', { ss: { $SS: ['b'] } }],
  ['DELETE ss :ssab', { ss: undefined }],
  ['DELETE missing :ssa', {}],
  ['ADD ss :nsx', /cannot ADD a NS set to "ss": it holds a SS set/],
  ['ADD n :ssa', /cannot ADD a SS set to "n": it holds a number/],
  ['DELETE l :ssa', /cannot DELETE a SS set from "l": it holds a list/],
  ['SET ss.x = :one', /"ss" is a SS set, not a map/],
  ['SET pk = :x', /"pk" \(position 5\) is a key attribute/],
  ['SET a = :one REMOVE a', /overlap/],
];

describe.each(transports)('update clauses over %s', (transport, api) => {
  it.each(UPDATES)('%s', async (update, expected) => {
    const key = { pk: `u_${transport}`, sk: UPDATES.findIndex((u) => u[0] === update) };
    await api().request('PutItem', { table: T, item: { ...key, ...START } });
    const request = api().request('UpdateItem', { table: T, key, update, ...placeholders(update), returnValues: 'new' });
    request.catch(() => {}); // awaited below; mark a rejection as handled until then
    const { __name, __mtime, ...before } = (await api().request('GetItem', { table: T, key })).item!;
    if (expected instanceof RegExp) {
      const err = await expectError(request, 'ValidationError');
      expect(err.message).toMatch(expected);
      const { __mtime: after, ...unchanged } = (await api().request('GetItem', { table: T, key })).item!;
      expect(plain(unchanged)).toEqual(plain({ ...before, __name }));
      expect(after).toBe(__mtime);
      return;
    }
    const want: Item = { ...key, ...START };
    for (const [k, v] of Object.entries(expected)) {
      if (v === undefined) delete want[k];
      else want[k] = v;
    }
    const { __name: name, __mtime: mtime, ...got } = (await request).item!;
    expect(plain(got)).toEqual(plain(want));
    expect(name).toBe(`${key.pk}.${key.sk}`);
    expect(mtime).toBeGreaterThanOrEqual(__mtime as number);
  });
});

describe('conditional writes', () => {
  it('PutItem: attribute_not_exists lets the first writer in; the second gets ConditionalCheckFailed and, if asked, the old item', async () => {
    const put = (writer: string, returnOld: boolean) =>
      c.client.putItem(T, { pk: 'cw', sk: 1, writer }, { condition: 'attribute_not_exists(pk)', ...(returnOld ? { returnValuesOnConditionCheckFailure: 'old' } : {}) });
    await put('first', false);
    const plainErr = await expectError(put('second', false), 'ConditionalCheckFailed');
    expect(plainErr.message).toBe('the condition is false for item "cw.1"; nothing was changed');
    expect(plainErr.item).toBeUndefined();
    const withOld = await expectError(put('second', true), 'ConditionalCheckFailed');
    expect(withOld.item).toMatchObject({ pk: 'cw', sk: 1, writer: 'first', __name: 'cw.1' });
    const overHttp = await expectError(
      c.http.request('PutItem', { table: T, item: { pk: 'cw', sk: 1 }, condition: 'attribute_not_exists(pk)', returnValuesOnConditionCheckFailure: 'old' }),
      'ConditionalCheckFailed',
    );
    expect((overHttp as KeysliceError & { httpStatus: number }).httpStatus).toBe(400);
    expect(overHttp.item).toMatchObject({ writer: 'first' });
    expect(await c.client.getItem(T, 'cw.1')).toMatchObject({ writer: 'first' });
    // returnValues: 'old' on a successful put.
    expect(await c.client.putItem(T, { pk: 'cw', sk: 1, writer: 'third' }, { condition: 'writer = :w', values: { ':w': 'first' }, returnValues: 'old' })).toMatchObject({
      writer: 'first',
    });
    expect(await c.client.putItem(T, { pk: 'cw', sk: 2 }, { returnValues: 'old' })).toBeNull();
  });

  it('UpdateItem: upserts unless the condition forbids, and a failed condition creates nothing', async () => {
    await expectError(c.client.updateItem(T, 'up.1', { update: 'SET v = :one', condition: 'attribute_exists(pk)', values: { ':one': 1 } }), 'ConditionalCheckFailed');
    expect(await c.client.getItem(T, 'up.1')).toBeNull();
    const failed = await expectError(
      c.client.updateItem(T, 'up.1', { update: 'SET v = :one', condition: 'attribute_exists(pk)', values: { ':one': 1 }, returnValuesOnConditionCheckFailure: 'old' }),
      'ConditionalCheckFailed',
    );
    expect(failed.item).toBeNull(); // asked for, and there was none
    expect(await c.client.updateItem(T, 'up.1', { update: 'SET v = :one', condition: 'attribute_not_exists(pk)', values: { ':one': 1 }, returnValues: 'new' })).toMatchObject({
      pk: 'up',
      sk: 1,
      v: 1,
    });
    expect(await c.client.updateItem(T, 'up.1', { update: 'SET v = v + :one', condition: 'v = :one', values: { ':one': 1 }, returnValues: 'old' })).toMatchObject({ v: 1 });
    expect(await c.client.updateItem(T, 'up.1', { add: { v: 1 }, condition: 'v = :two', values: { ':two': 2 }, returnValues: 'new' })).toMatchObject({ v: 3 });
    expect(await c.client.updateItem(T, 'up.2', {})).toBeUndefined(); // no actions: creates the bare item
    expect(await c.client.getItem(T, 'up.2')).toMatchObject({ pk: 'up', sk: 2, __name: 'up.2' });
  });

  it('DeleteItem: deletes only when the condition holds, and can return the old item', async () => {
    await c.client.putItem(T, { pk: 'del', sk: 1, n: 5 });
    await expectError(c.client.deleteItem(T, 'del.1', { condition: 'n = :six', values: { ':six': 6 } }), 'ConditionalCheckFailed');
    expect(await c.client.getItem(T, 'del.1')).toMatchObject({ n: 5 });
    expect(await c.client.request('DeleteItem', { table: T, key: 'del.1', condition: 'n = :five', values: { ':five': 5 }, returnValues: 'old' })).toMatchObject({
      deleted: true,
      item: { n: 5 },
    });
    expect(await c.client.request('DeleteItem', { table: T, key: 'del.1', returnValues: 'old' })).toEqual({ deleted: false, item: null });
    // On a missing item the condition sees no attributes.
    expect(await c.client.deleteItem(T, 'del.1', { condition: 'attribute_not_exists(n)' })).toBe(false);
  });
});

describe('projections', () => {
  it('nested paths on GetItem, BatchGet and GetItems; list elements come back in index order', async () => {
    const projection = 'm.a.b[2], l[2].x, l[0], #s, missing, m.nothing.here, bin';
    const expected = { m: { a: { b: [30] } }, l: [1, { x: 1 }], s: 'hello', bin: ITEM.bin, __name: 'e.1' };
    for (const api of [c.client, c.http] as Api[]) {
      const got = (await api.request('GetItem', { table: T, key: 'e.1', projection, names: { '#s': 's' } })).item!;
      expect(typeof got.__mtime).toBe('number');
      delete got.__mtime;
      expect(plain(got)).toEqual(plain(expected));
    }
    const batch = await c.client.batchGet(T, ['e.1', 'nobody.1'], { projection: 'l[1], m.s' });
    expect(batch.items[0]).toMatchObject({ l: ['two'], m: { s: 'x' } });
    expect(Object.keys(batch.items[0]!).sort()).toEqual(['__mtime', '__name', 'l', 'm']);
    expect(batch.items[1]).toBeNull();
    const page = await c.client.getItems({ table: T, keyCondition: 'pk = :p', values: { ':p': 'e' }, projection: 'n' });
    expect(page.items.map((i) => Object.keys(i).sort())).toEqual([['__mtime', '__name', 'n']]);
    await expectError(c.client.getItem(T, 'e.1', { projection: 'a', attributes: ['a'] }), 'ValidationError');
    await expectError(c.client.getItem(T, 'e.1', { projection: 'm.a, m.a.b' }), 'ValidationError');
  });
});

describe('key conditions', () => {
  const K = 'expr_keys';
  beforeAll(async () => {
    await c.client.createTable(K, { name: 'user', type: 'string' }, { name: 'title', type: 'string' });
    await c.client.batchWrite(K, { puts: ['apple', 'apricot', 'banana', 'blueberry', 'cherry'].flatMap((title) => [{ user: 'u1', title }, { user: 'u2', title }]) });
  });

  const titles = async (request: Record<string, unknown>) => (await c.client.getAllItems({ table: K, ...request })).map((i) => i.title);

  it.each([
    ['user = :u', {}, ['apple', 'apricot', 'banana', 'blueberry', 'cherry']],
    ['user = :u AND title = :t', { ':t': 'banana' }, ['banana']],
    ['user = :u AND title < :t', { ':t': 'b' }, ['apple', 'apricot']],
    ['user = :u AND title <= :t', { ':t': 'banana' }, ['apple', 'apricot', 'banana']],
    ['user = :u AND title > :t', { ':t': 'banana' }, ['blueberry', 'cherry']],
    ['user = :u AND title >= :t', { ':t': 'banana' }, ['banana', 'blueberry', 'cherry']],
    ['user = :u AND title BETWEEN :a AND :b', { ':a': 'apricot', ':b': 'blueberry' }, ['apricot', 'banana', 'blueberry']],
    ['user = :u AND begins_with(title, :p)', { ':p': 'ap' }, ['apple', 'apricot']],
    ['begins_with(title, :p) AND user = :u', { ':p': 'b' }, ['banana', 'blueberry']],
    ['(user = :u) AND (#t > :t)', { ':t': 'c' }, ['cherry']],
    ['user = :u AND title > :a AND title <= :b', { ':a': 'apple', ':b': 'blueberry' }, ['apricot', 'banana', 'blueberry']],
    ['title < :b AND user = :u AND title >= :a', { ':a': 'apricot', ':b': 'blueberry' }, ['apricot', 'banana']],
    ['user = :u AND title > :a AND title < :b', { ':a': 'cherry', ':b': 'apple' }, []],
  ])('%s', async (keyCondition, values, expected) => {
    const names = keyCondition.includes('#t') ? { names: { '#t': 'title' } } : {};
    expect(await titles({ keyCondition, values: { ':u': 'u1', ...values }, ...names })).toEqual(expected);
    expect(await titles({ keyCondition, values: { ':u': 'u1', ...values }, ...names, reverse: true, limit: 2 })).toEqual([...expected].reverse());
  });

  it('gives the same pages as the structured form', async () => {
    const structured = await c.client.getItems({ table: K, shardingKey: 'u2', sortingKey: { gt: 'apple' }, limit: 2 });
    const expression = await c.client.getItems({ table: K, keyCondition: 'user = :u AND title > :t', values: { ':u': 'u2', ':t': 'apple' }, limit: 2 });
    expect(expression).toEqual(structured);
    const next = await c.client.getItems({ table: K, keyCondition: 'user = :u AND title > :t', values: { ':u': 'u2', ':t': 'apple' }, limit: 2, marker: structured.marker });
    expect(next.items.map((i) => i.title)).toEqual(['blueberry', 'cherry']);
  });

  it.each([
    ['user = :u OR title = :t', /no OR, NOT, IN/],
    ['title = :t', /needs "user = :value"/],
    ['user < :u', /takes = only/],
    ['user = :u AND title <> :t', /does not take <>/],
    ['user = :u AND other = :t', /names "other"/],
    ['user = :u AND title = :t AND title = :t', /= goes alone/],
    ['user = :u AND title > :t AND title >= :t', /one lower bound/],
    ['user = :u AND title BETWEEN :t AND :t AND title < :t', /BETWEEN goes alone/],
    ['user = :u AND title = user', /with :values only/],
    ['user = :u AND contains(title, :t)', /no OR, NOT, IN or other functions/],
  ])('refuses %s', async (keyCondition, message) => {
    const values = { ':u': 'u1', ...(keyCondition.includes(':t') ? { ':t': 'a' } : {}) };
    const err = await expectError(c.client.getItems({ table: K, keyCondition, values }), 'ValidationError');
    expect(err.message).toMatch(message);
  });

  it('checks key values and refuses mixing with the structured form', async () => {
    await expectError(c.client.getItems({ table: K, keyCondition: 'user = :u', values: { ':u': 5 } }), 'InvalidKey');
    await expectError(c.client.getItems({ table: K, keyCondition: 'user = :u', values: { ':u': 'u1' }, shardingKey: 'u1' }), 'ValidationError');
  });
});

describe('filters with limit and marker', () => {
  const F = 'expr_filter';
  beforeAll(async () => {
    await c.client.createTable(F, { name: 'pk', type: 'string' }, { name: 'sk', type: 'number' });
    const puts: Item[] = [];
    for (let i = 0; i < 20; i++) puts.push({ pk: 'f', sk: i, v: i, even: i % 2 === 0 });
    for (let i = 0; i < 60; i++) puts.push({ pk: `scan${i % 13}`, sk: i, v: i });
    for (let i = 0; i < puts.length; i += 25) await c.client.batchWrite(F, { puts: puts.slice(i, i + 25) });
  });

  async function pages(request: Record<string, unknown>): Promise<Item[][]> {
    const out: Item[][] = [];
    let marker: string | undefined;
    do {
      const page = await c.client.getItems({ table: F, ...request, ...(marker ? { marker } : {}) });
      out.push(page.items);
      marker = page.marker;
    } while (marker !== undefined && out.length < 100);
    return out;
  }

  it('a range page examines `limit` items: pages can be empty, and the marker continues after the last examined item', async () => {
    const request = { keyCondition: 'pk = :p', filter: 'v >= :ten AND even = :t', values: { ':p': 'f', ':ten': 10, ':t': true }, limit: 5 };
    const got = await pages(request);
    expect(got.map((p) => p.map((i) => i.v))).toEqual([[], [], [10, 12, 14], [16, 18]]);
    const reversed = await pages({ ...request, reverse: true });
    expect(reversed.map((p) => p.map((i) => i.v))).toEqual([[18, 16], [14, 12, 10], [], []]);
    // The last examined item of a page filtered out, the next page starts right after it.
    const odd = await pages({ keyCondition: 'pk = :p', filter: 'even = :t', values: { ':p': 'f', ':t': true }, limit: 3 });
    expect(odd.flat().map((i) => i.v)).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    expect(odd).toHaveLength(7);
  });

  it('a full-table scan page examines `limit` items across all workers', async () => {
    const got = await pages({ filter: 'begins_with(pk, :s) AND v < :x', values: { ':s': 'scan', ':x': 30 }, limit: 7 });
    expect(got).toHaveLength(Math.ceil(80 / 7));
    expect(got.every((p) => p.length <= 7)).toBe(true);
    expect(got.some((p) => p.length === 0)).toBe(true);
    expect(got.flat().map((i) => i.v as number).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
  });
});

describe('validation errors, before anything is sent', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['syntax error with position and token', { condition: 'n = :v AND AND', values: { ':v': 1 } }, /condition: syntax error at position 12: "AND" is a keyword here/],
    ['syntax error at an unexpected token', { condition: 'n = :v )', values: { ':v': 1 } }, /condition: syntax error at position 8: unexpected token "\)"; expected AND, OR or the end of the expression/],
    ['unknown value placeholder', { condition: 'n = :w', values: { ':v': 1 } }, /condition: :w at position 5 is not defined in "values"/],
    ['unknown name placeholder', { condition: '#n = :v', values: { ':v': 1 } }, /condition: #n at position 1 is not defined in "names"/],
    ['unused value placeholder', { condition: 'n = :v', values: { ':v': 1, ':extra': 2 } }, /"values" has :extra, which no expression of this request uses/],
    ['unused name placeholder', { update: 'SET n = :v', names: { '#n': 'n' }, values: { ':v': 1 } }, /"names" has #n/],
    ['placeholders without expressions', { set: { n: 1 }, values: { ':v': 1 } }, /"values" has :v/],
    ['type mismatch in a literal', { update: 'SET n = n + :s', values: { ':s': 'x' } }, /\+ at position 11 takes numbers; :s is a string/],
    ['expression over its size limit', { condition: `n = :v${' '.repeat(EXPRESSION_BYTES_MAX)}`, values: { ':v': 1 } }, /condition: the expression is 4102 bytes; the limit is 4096/],
    ['both update forms', { update: 'SET n = :v', set: { n: 2 }, values: { ':v': 1 } }, /"update" \(an expression\) and "set", "remove" and "add" \(the structured form\)/],
    ['old item without a condition', { update: 'SET n = :v', values: { ':v': 1 }, returnValuesOnConditionCheckFailure: 'old' }, /needs a "condition"/],
    ['a condition that is not a string', { condition: 5 }, /"condition" must be an expression/],
  ])('%s', async (_, fields, message) => {
    for (const api of [c.client, c.http] as Api[]) {
      // `as never`: deliberately outside the typed request, to check that the server refuses it.
      const err = await expectError(api.request('UpdateItem', { table: T, key: 'e.1', ...fields } as never), 'ValidationError');
      expect(err.message).toMatch(message);
      if (api === c.http) expect((err as KeysliceError & { httpStatus: number }).httpStatus).toBe(400);
    }
    const { __mtime, ...now } = (await c.client.getItem(T, 'e.1'))!;
    expect(now.n).toBe(5);
  });
});

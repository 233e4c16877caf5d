// The expression parser and binder on their own (no cluster): precedence,
// error messages, the cache, and seeded fuzzing: whatever the text, parsing,
// binding and evaluating either succeed or throw a ValidationError.
import { describe, expect, it } from 'vitest';
import type { ParsedCondition } from '../shared/expression-ast.js';
import { bindCondition, bindProjection, bindUpdate, Placeholders } from '../shared/expression-bind.js';
import { applyUpdate, evaluate, projectItem } from '../shared/expression-eval.js';
import { expressionCacheSize, parseCondition, parseProjection, parseUpdate } from '../shared/expression-parser.js';
import { KeysliceError } from '../shared/errors.js';
import { EXPRESSION_BYTES_MAX, EXPRESSION_CACHE_ENTRIES, EXPRESSION_IN_OPERANDS_MAX, EXPRESSION_NESTING_MAX } from '../shared/limits.js';
import type { Item } from '../shared/values.js';
import { rng } from './cluster-fixture.js';

/** A condition's shape as a compact string: (a AND b), (NOT a), cmp(=), between, fn names. */
function shape(c: ParsedCondition): string {
  switch (c.k) {
    case 'and':
    case 'or':
      return `(${shape(c.a)} ${c.k.toUpperCase()} ${shape(c.b)})`;
    case 'not':
      return `(NOT ${shape(c.a)})`;
    case 'cmp':
      return `${operandText(c.a)}${c.op}${operandText(c.b)}`;
    case 'between':
      return `${operandText(c.a)}[${operandText(c.low)},${operandText(c.high)}]`;
    case 'in':
      return `${operandText(c.a)} in(${c.list.map(operandText).join(',')})`;
    case 'fn':
      return `${c.fn}(${c.args.map(operandText).join(',')})`;
  }
}
function operandText(o: ParsedCondition extends never ? never : Parameters<typeof shapeOperand>[0]): string {
  return shapeOperand(o);
}
function shapeOperand(o: { k: string; path?: (string | number)[]; name?: string; fn?: string; args?: unknown[] }): string {
  if (o.k === 'path') return o.path!.map((s) => (typeof s === 'number' ? `[${s}]` : s)).join('.').replace(/\.\[/g, '[');
  if (o.k === 'value') return o.name!;
  return `${o.fn}(${(o.args as (typeof o)[]).map(shapeOperand).join(',')})`;
}

function validationError(fn: () => unknown): KeysliceError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KeysliceError);
    expect((err as KeysliceError).code).toBe('ValidationError');
    return err as KeysliceError;
  }
  throw new Error('expected a ValidationError');
}

describe('precedence and grouping (DynamoDB: comparators, IN, BETWEEN, functions, parentheses, NOT, AND, OR)', () => {
  it.each([
    ['a = :v OR b = :v AND c = :v', '(a=:v OR (b=:v AND c=:v))'],
    ['a = :v AND b = :v OR c = :v', '((a=:v AND b=:v) OR c=:v)'],
    ['NOT a = :v AND b = :v', '((NOT a=:v) AND b=:v)'],
    ['NOT a = :v OR NOT b = :v', '((NOT a=:v) OR (NOT b=:v))'],
    ['NOT (a = :v OR b = :v)', '(NOT (a=:v OR b=:v))'],
    ['a BETWEEN :x AND :y AND b = :v', '(a[:x,:y] AND b=:v)'],
    ['a BETWEEN :x AND :y OR b BETWEEN :x AND :y', '(a[:x,:y] OR b[:x,:y])'],
    ['(a = :v OR b = :v) AND c = :v', '((a=:v OR b=:v) AND c=:v)'],
    ['a IN (:x, :y) AND attribute_exists(b)', '(a in(:x,:y) AND attribute_exists(b))'],
    ['size(a.b[2]) > :n', 'size(a.b[2])>:n'],
    ['(a) = (:v)', 'a=:v'],
    ['((a = :v))', 'a=:v'],
    ['a = :v and b = :v or not c = :v', '((a=:v AND b=:v) OR (NOT c=:v))'],
    ['NOT NOT a = :v', '(NOT (NOT a=:v))'],
    ['#n.#m[10].x <> :v', '#n.#m[10].x<>:v'],
    ['begins_with(a, :p) OR contains(b, :s)', '(begins_with(a,:p) OR contains(b,:s))'],
    ['a=:v AND b=:v AND c=:v', '((a=:v AND b=:v) AND c=:v)'],
    ['size = :v', 'size=:v'],
  ])('%s', (text, expected) => {
    expect(shape(parseCondition(text))).toBe(expected);
  });

  it('parses update clauses in any order, keywords in any case', () => {
    const u = parseUpdate('remove x, y[1] set a = b + :one, c = if_not_exists(c, :z), d = list_append(if_not_exists(d, :e), :l) ADD n :one DELETE s :s');
    expect(u.actions.map((a) => a.k)).toEqual(['remove', 'remove', 'set', 'set', 'set', 'add', 'delete']);
    expect(parseProjection('a, b.c[3], #n').paths.map((p) => p.path)).toEqual([['a'], ['b', 'c', 3], ['#n']]);
  });
});

describe('syntax errors name the position and the token', () => {
  it.each([
    ['a = ', 5, /unexpected end of the expression; expected an operand/],
    ['a == :v', 4, /unexpected token "="; expected an operand/],
    ['a = :v AND', 11, /unexpected end of the expression/],
    ['a BETWEEN :x OR :y', 14, /token "OR"; expected AND/],
    ['a IN ()', 7, /token "\)"/],
    ['(a = :v', 8, /expected "\)"/],
    ['a = :v)', 7, /token "\)"; expected AND, OR or the end/],
    ['attribute_exists(a', 19, /expected "," or "\)"/],
    ['a = $v', 5, /unexpected character "\$"/],
    ['a = : v', 5, /":" must be followed/],
    ['a[x] = :v', 3, /token "x"; expected a list index/],
    ['a.and = :v', 3, /"and" is a keyword here; write it as a #name/],
    ['Size(a) = :v', 1, /unknown function "Size"/],
    ['attribute_exists(a, b)', 1, /takes 1 operand, got 2/],
    ['attribute_exists(:v)', 18, /must be an attribute path/],
    ['a = begins_with(b, :p)', 5, /is a condition, not an operand/],
    ['size(a)', 8, /expected a comparator/],
    ['a', 2, /expected a comparator/],
  ])('condition %j', (text, at, message) => {
    const err = validationError(() => parseCondition(text));
    expect((err as KeysliceError & { at: number }).at).toBe(at);
    expect(err.message).toContain(`position ${at}`);
    expect(err.message).toMatch(message);
  });

  it.each([
    ['', 1, /expected SET, REMOVE, ADD or DELETE/],
    ['SET', 4, /expected an attribute name/],
    ['SET a = b + c + d', 15, /one \+ or - at most/],
    ['SET a = (b + c) - d', 17, /one \+ or - at most/],
    ['SET a = b, a = c SET d = e', 18, /SET clause appears a second time/],
    ['ADD a b', 7, /expected a :value/],
    ['SET a = list_append(:x + :y, :z)', 24, /cannot be used inside the operands/],
    ['SET a = if_not_exists(:x, :y)', 23, /must be an attribute path/],
    ['SET a = size(b)', 9, /unknown function "size"/],
    ['SET a = b AND c', 11, /expected SET, REMOVE, ADD or DELETE/],
  ])('update %j', (text, at, message) => {
    const err = validationError(() => parseUpdate(text));
    expect((err as KeysliceError & { at: number }).at).toBe(at);
    expect(err.message).toMatch(message);
  });

  it('limits: size, nesting, IN operands', () => {
    expect(validationError(() => parseCondition(`a = :v OR ${'b = :v OR '.repeat(500)}c = :v`)).message).toMatch(/bytes; the limit is 4096/);
    parseCondition('a = :' + 'v'.repeat(EXPRESSION_BYTES_MAX - 5)); // exactly at the limit
    const deep = (n: number) => '('.repeat(n) + 'a = :v' + ')'.repeat(n);
    parseCondition(deep(EXPRESSION_NESTING_MAX));
    expect(validationError(() => parseCondition(deep(EXPRESSION_NESTING_MAX + 1))).message).toMatch(/nested more than 100/);
    expect(validationError(() => parseCondition('NOT '.repeat(EXPRESSION_NESTING_MAX + 1) + 'a = :v')).message).toMatch(/nested/);
    const list = (n: number) => `a IN (${Array.from({ length: n }, () => ':v').join(', ')})`;
    parseCondition(list(EXPRESSION_IN_OPERANDS_MAX));
    expect(validationError(() => parseCondition(list(EXPRESSION_IN_OPERANDS_MAX + 1))).message).toMatch(/at most 100 operands/);
    expect(validationError(() => parseCondition(`a${'.b'.repeat(32)} = :v`)).message).toMatch(/at most 32 levels/);
    expect(validationError(() => parseUpdate('SET ' + Array.from({ length: 301 }, (_, i) => `a${i} = :v`).join(', '))).message).toMatch(/more than 300/);
    expect(validationError(() => parseCondition(42)).message).toMatch(/must be an expression/);
  });
});

describe('binding: placeholders, types, paths', () => {
  const bind = (text: string, names: unknown, values: unknown) => {
    const ph = new Placeholders(names, values);
    const c = bindCondition(parseCondition(text), ph, 'condition');
    ph.checkAllUsed();
    return c;
  };

  it('refuses unknown and unused placeholders', () => {
    expect(validationError(() => bind('#a = :v', {}, { ':v': 1 })).message).toBe('condition: #a at position 1 is not defined in "names"');
    expect(validationError(() => bind('a = :w', {}, { ':v': 1 })).message).toBe('condition: :w at position 5 is not defined in "values"');
    expect(validationError(() => bind('a = :v', { '#x': 'x' }, { ':v': 1 })).message).toMatch(/"names" has #x, which no expression/);
    expect(validationError(() => bind('a = :v', {}, { ':v': 1, ':u': 2 })).message).toMatch(/"values" has :u, which no expression/);
    expect(validationError(() => new Placeholders({ n: 'x' }, {})).message).toMatch(/not a placeholder of the form #name/);
    expect(validationError(() => new Placeholders({ '#n': '' }, {})).message).toMatch(/non-empty/);
    expect(validationError(() => new Placeholders({}, { ':v': Number.NaN })).message).toMatch(/finite/);
  });

  it('refuses literal type mismatches before touching an item', () => {
    expect(validationError(() => bind('a < :v', {}, { ':v': true })).message).toMatch(/< at position 5 orders strings, numbers or binary values; :v is a boolean/);
    expect(validationError(() => bind('a BETWEEN :x AND :y', {}, { ':x': 1, ':y': 'z' })).message).toMatch(/bounds of one type/);
    expect(validationError(() => bind('a BETWEEN :x AND :y', {}, { ':x': 5, ':y': 1 })).message).toMatch(/low <= high/);
    expect(validationError(() => bind('begins_with(a, :v)', {}, { ':v': 1 })).message).toMatch(/begins_with .* takes a string or binary/);
    expect(validationError(() => bind('size(:v) > :v', {}, { ':v': 1 })).message).toMatch(/size .* takes a string, binary, list, map or set/);
    expect(bind('attribute_type(a, :t)', {}, { ':t': 'SS' })).toEqual({ k: 'type', a: { k: 'path', path: ['a'] }, type: 'SS' });
    expect(validationError(() => bind('attribute_type(a, :t)', {}, { ':t': 'X' })).message).toMatch(/takes one of S, N, B, BOOL, NULL, L, M/);
    expect(validationError(() => bind('a = #a', { '#a': 'a' }, {})).message).toMatch(/same path/);
    const update = (text: string, values: unknown, names: unknown = {}) => bindUpdate(parseUpdate(text), new Placeholders(names, values), 'update', ['pk']);
    expect(validationError(() => update('SET a = a + :s', { ':s': 'x' })).message).toMatch(/\+ at position 11 takes numbers; :s is a string/);
    expect(validationError(() => update('SET a = list_append(a, :n)', { ':n': 1 })).message).toMatch(/list_append .* takes lists; :n is a number/);
    expect(validationError(() => update('ADD a :s', { ':s': 'x' })).message).toMatch(/ADD at position 5 takes a number or a set; :s is a string/);
    expect(validationError(() => update('ADD a :l', { ':l': [1] })).message).toMatch(/takes a number or a set; :l is a list. DynamoDB refuses ADD of a list too/);
    expect(update('ADD a :s DELETE b :s', { ':s': { $SS: ['x'] } })).toEqual([
      { k: 'addSet', path: ['a'], set: { $SS: ['x'] } },
      { k: 'deleteSet', path: ['b'], set: { $SS: ['x'] } },
    ]);
    expect(validationError(() => update('DELETE a :l', { ':l': [1] })).message).toMatch(/DELETE at position 8 removes the elements of a set from a set; :l is a list/);
    expect(validationError(() => update('SET #k = :v', { ':v': 1 }, { '#k': 'pk' })).message).toMatch(/"pk" .* is a key attribute/);
    expect(validationError(() => update('SET #k = :v', { ':v': 1 }, { '#k': '__mtime' })).message).toMatch(/reserved/);
    expect(validationError(() => update('SET a.b = :v REMOVE a', { ':v': 1 })).message).toMatch(/a.b and a overlap/);
    expect(validationError(() => update('SET a[0] = :v REMOVE a.b', { ':v': 1 })).message).toMatch(/conflict/);
    expect(validationError(() => bindProjection(parseProjection('a.b, a'), new Placeholders({}, {}), 'projection')).message).toMatch(/overlap/);
    update('SET a.b = :v, a.c = :v REMOVE a.d[1], a.d[2]', { ':v': 1 }); // siblings do not overlap
  });
});

describe('the compiled-expression cache', () => {
  it('parses a repeated expression once and stays bounded', () => {
    const text = 'attribute_not_exists(cache_probe) AND n < :max';
    const first = parseCondition(text);
    expect(parseCondition(text)).toBe(first);
    for (let i = 0; i <= EXPRESSION_CACHE_ENTRIES; i++) parseCondition(`cache_fill = :v${i}`);
    expect(expressionCacheSize()).toBe(EXPRESSION_CACHE_ENTRIES);
    expect(parseCondition(text)).not.toBe(first); // evicted, parsed again
    expect(parseCondition(text)).toEqual(first);
  });
});

describe('fuzzing: only ValidationErrors, never a crash', () => {
  const SEED = 3_2026;
  const WORDS = ['a', 'b', 'n', 'list', 'size', 'attribute_exists', 'attribute_not_exists', 'attribute_type', 'begins_with', 'contains', 'if_not_exists', 'list_append',
    'SET', 'REMOVE', 'ADD', 'DELETE', 'AND', 'OR', 'NOT', 'BETWEEN', 'IN', 'and', 'not', '#n', '#m', '#zz', ':v', ':s', ':l', ':m', ':b', ':zz', '__proto__', 'constructor'];
  const PUNCT = ['(', ')', '[', ']', ',', '.', '=', '<>', '<', '<=', '>', '>=', '+', '-', '0', '1', '3', '99999999999999999999', ' ', '  ', '\n'];
  const JUNK = ['$', 'é', '\u0000', '"', "'", '\u{1F600}', '#', ':', '!', '\\', '\uD800', '*', ';'];
  const VALID = [
    'a = :v AND (b < :v OR NOT attribute_exists(#n.list[1]))',
    'size(list) BETWEEN :v AND :v OR contains(a, :s) OR begins_with(#m, :s)',
    'attribute_type(a, :t) AND a IN (:v, :s, :l)',
    'SET a = a + :v, #n.list[3] = list_append(if_not_exists(#n.list, :l), :l) REMOVE b[1], b[0] ADD n :v',
    'a, #n.list[2], b.c',
  ];
  const names = { '#n': 'n', '#m': '__proto__', '#zz': 'constructor' };
  const values = { ':v': 1, ':s': 'x', ':l': [1, 'x'], ':m': { a: 1 }, ':b': new Uint8Array([1]), ':t': 'L', ':zz': null };
  const item: Item = { a: 1, b: [0, 1, 2], n: { list: [1, 2, [3]], x: 'y' }, s: 'text', list: [{ a: 1 }] };

  function randomText(r: () => number): string {
    const mode = r();
    if (mode < 0.4) {
      const parts: string[] = [];
      const len = Math.floor(r() * 24);
      for (let i = 0; i < len; i++) {
        const pool = r() < 0.5 ? WORDS : r() < 0.9 ? PUNCT : JUNK;
        parts.push(pool[Math.floor(r() * pool.length)]);
        if (r() < 0.6) parts.push(' ');
      }
      return parts.join('');
    }
    if (mode < 0.9) {
      // A valid expression, mutated: characters deleted, duplicated, replaced.
      const chars = [...VALID[Math.floor(r() * VALID.length)]];
      const edits = Math.floor(r() * 3);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(r() * (chars.length + 1));
        const what = r();
        if (what < 0.4) chars.splice(at, 1);
        else if (what < 0.7) chars.splice(at, 0, chars[Math.floor(r() * chars.length)] ?? '(');
        else chars.splice(at, 1, [...PUNCT, ...JUNK][Math.floor(r() * (PUNCT.length + JUNK.length))]);
      }
      return chars.join('');
    }
    const len = Math.floor(r() * 40);
    return Array.from({ length: len }, () => String.fromCharCode(Math.floor(r() * 0x2ff))).join('');
  }

  it('30,000 random expressions of every kind', () => {
    const r = rng(SEED);
    let parsed = 0;
    let failedWell = 0;
    for (let n = 0; n < 30_000; n++) {
      const text = randomText(r);
      const kind = n % 3;
      try {
        const ph = new Placeholders(names, values);
        if (kind === 0) {
          const c = bindCondition(parseCondition(text), ph, 'condition');
          evaluate(c, item);
          evaluate(c, {});
        } else if (kind === 1) {
          const actions = bindUpdate(parseUpdate(text), ph, 'update', ['pk']);
          applyUpdate(item, actions);
        } else {
          projectItem(item, bindProjection(parseProjection(text), ph, 'projection'));
        }
        parsed++;
      } catch (err) {
        if (!(err instanceof KeysliceError) || err.code !== 'ValidationError') {
          throw new Error(`case ${n} (seed ${SEED}, kind ${kind}) threw ${String(err)} for ${JSON.stringify(text)}`);
        }
        failedWell++;
      }
    }
    // Both outcomes must be common, or the generator tests nothing.
    expect(parsed).toBeGreaterThan(1000);
    expect(failedWell).toBeGreaterThan(1000);
    // The fuzzed item itself was never changed by an update.
    expect(item).toEqual({ a: 1, b: [0, 1, 2], n: { list: [1, 2, [3]], x: 'y' }, s: 'text', list: [{ a: 1 }] });
  });
});

describe('the evaluator on awkward names', () => {
  it('refuses to bind an update path through "__proto__" (msgpack would store the key renamed)', () => {
    for (const update of ['SET m.#p = :v', 'SET m.#p.x = :v', 'REMOVE m.#p', 'ADD m.#p :v']) {
      const ph = new Placeholders({ '#p': '__proto__' }, { ':v': 1 });
      expect(() => bindUpdate(parseUpdate(update), ph, 'update', []), update).toThrow('a map key may not be "__proto__"');
    }
  });

  it('reads, and (past the binder) writes and removes, a nested "__proto__" entry as plain data, no prototype set', () => {
    const source: Item = { m: {} };
    const next = applyUpdate(source, [{ k: 'set', path: ['m', '__proto__'], value: { k: 'value', v: { polluted: true } } }]);
    const m = next.m as Record<string, unknown>;
    expect(Object.getPrototypeOf(m)).toBe(Object.prototype);
    expect(Object.hasOwn(m, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(source).toEqual({ m: {} });
    const read = new Placeholders({ '#p': '__proto__' }, { ':v': { polluted: true } });
    expect(evaluate(bindCondition(parseCondition('m.#p = :v'), read, 'condition'), next)).toBe(true);
    expect(evaluate(bindCondition(parseCondition('attribute_exists(m.#p)'), new Placeholders({ '#p': '__proto__' }, {}), 'condition'), source)).toBe(false);
    const removed = applyUpdate(next, [{ k: 'remove', path: ['m', '__proto__'] }]);
    expect(Object.hasOwn(removed.m as object, '__proto__')).toBe(false);
  });
});

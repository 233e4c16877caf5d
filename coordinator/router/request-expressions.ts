// The expressions of one request, from its payload fields to the bound forms a
// slice op carries: `condition`, `filter`, `update`, `projection` and
// `keyCondition`, sharing the request's `names` and `values`, and the
// structured forms they stand beside (`set`/`remove`/`add`, `attributes`,
// `shardingKey`/`sortingKey`). A request may use either form of one thing, not
// both. Everything is checked here, before anything is sent: call done() last.
import { conjuncts, type Condition, type Operand, type Path, type UpdateAction } from '../../shared/expression-ast.js';
import { bindCondition, bindProjection, bindUpdate, Placeholders } from '../../shared/expression-bind.js';
import { parseCondition, parseProjection, parseUpdate } from '../../shared/expression-parser.js';
import { isNumberValue } from '../../shared/decimal.js';
import { KeysliceError } from '../../shared/errors.js';
import type { Projection } from '../../shared/protocol.js';
import { isPlainObject, validateAttributeName, validateItem, type Value } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import type { SortRange } from './key-range.js';

type Payload = Record<string, unknown>;

export class RequestExpressions {
  private readonly placeholders: Placeholders;

  constructor(private readonly p: Payload) {
    this.placeholders = new Placeholders(p.names, p.values);
  }

  /** `condition` or `filter`, or null when the request has none. */
  condition(field: 'condition' | 'filter'): Condition | null {
    if (this.p[field] === undefined) return null;
    return bindCondition(parseCondition(this.p[field], field), this.placeholders, field);
  }

  /** `projection` (an expression) or `attributes` (top-level names); null: the whole item. */
  projection(): Projection {
    const { attributes, projection } = this.p;
    if (projection !== undefined) {
      if (attributes !== undefined) throw mixed('"projection"', '"attributes"');
      return bindProjection(parseProjection(projection), this.placeholders, 'projection');
    }
    if (attributes === undefined) return null;
    if (!Array.isArray(attributes) || attributes.some((a) => typeof a !== 'string')) {
      throw new KeysliceError('ValidationError', '"attributes" must be a list of attribute names');
    }
    return (attributes as string[]).map((a) => [a]);
  }

  /** `update` (an expression) or `set`/`remove`/`add` (the structured form), as update actions. */
  update(table: Table): UpdateAction[] {
    const keyNames = [...table.sharding, ...table.sorting].map((k) => k.name);
    const { update, set, remove, add } = this.p;
    if (update !== undefined) {
      if (set !== undefined || remove !== undefined || add !== undefined) throw mixed('"update"', '"set", "remove" and "add"');
      return bindUpdate(parseUpdate(update), this.placeholders, 'update', keyNames);
    }
    return structuredUpdate(set, remove, add, keyNames);
  }

  /** `keyCondition` as the structured form: `col = :v` on every sharding column, then
   * optionally `=` on the first sorting columns and, on the next one, `=`, BETWEEN,
   * begins_with, or a bound on one side or both (`t > :a AND t <= :b`), joined by AND. */
  keyCondition(table: Table): { shardingKey: Record<string, Value>; sortRange: SortRange | null } | null {
    const { keyCondition, shardingKey, sortingKey } = this.p;
    if (keyCondition === undefined) return null;
    if (shardingKey !== undefined || sortingKey !== undefined) throw mixed('"keyCondition"', '"shardingKey" and "sortingKey"');
    const c = bindCondition(parseCondition(keyCondition, 'keyCondition'), this.placeholders, 'keyCondition');
    const parts = conjuncts(c);
    const keyNames = [...table.sharding, ...table.sorting].map((k) => `"${k.name}"`).join(', ');
    const byColumn = new Map<string, KeyPart[]>();
    for (const part of parts) {
      const kp = keyPart(part);
      if (!table.sharding.some((k) => k.name === kp.attribute) && !table.sorting.some((k) => k.name === kp.attribute)) {
        throw keyError(`names "${kp.attribute}"; it can only name the key attributes ${keyNames}`);
      }
      byColumn.set(kp.attribute, [...(byColumn.get(kp.attribute) ?? []), kp]);
    }
    const sharding: Record<string, Value> = {};
    for (const { name } of table.sharding) {
      const conds = byColumn.get(name);
      if (conds === undefined) throw keyError(`needs ${table.sharding.map((k) => `"${k.name} = :value"`).join(' AND ')}`);
      if (conds.length > 1) throw keyError(`names the sharding column "${name}" ${conds.length} times; it takes one "="`);
      if (conds[0].op !== '=') throw keyError(`the sharding column "${name}" takes = only`);
      sharding[name] = conds[0].values[0];
    }
    const sorting = table.sorting.map((k) => k.name);
    const named = sorting.filter((n) => byColumn.has(n)).length;
    if (named === 0) return { shardingKey: sharding, sortRange: null };
    const missing = sorting.findIndex((n) => !byColumn.has(n));
    if (missing >= 0 && missing < named) {
      throw keyError(`names "${sorting.find((n, i) => i > missing && byColumn.has(n))}" but not "${sorting[missing]}": the sorting columns take "=" in order (${sorting.join(', ')}), with a range only on the last one named`);
    }
    const fixed: Value[] = [];
    for (let i = 0; i < named - 1; i++) {
      const conds = byColumn.get(sorting[i])!;
      if (conds.length !== 1 || conds[0].op !== '=') {
        throw keyError(`"${sorting[i]}" must be one "=": only the last sorting column named (${sorting[named - 1]}) takes a range`);
      }
      fixed.push(conds[0].values[0]);
    }
    return { shardingKey: sharding, sortRange: lastColumnRange(sorting[named - 1], byColumn.get(sorting[named - 1])!, fixed) };
  }

  /** Every placeholder of `names` and `values` must have been used by some expression. */
  done(): void {
    this.placeholders.checkAllUsed();
  }
}

interface KeyPart {
  attribute: string;
  op: '=' | '<' | '<=' | '>' | '>=' | 'BETWEEN' | 'begins_with';
  values: Value[];
}

/** One conjunct of a key condition: the key attribute it names, the operator and its values. */
function keyPart(c: Condition): KeyPart {
  const attribute = (o: Operand): string => {
    if (o.k !== 'path' || o.path.length !== 1) throw keyError('needs a key attribute (a top-level name) on the left of each condition');
    return o.path[0] as string;
  };
  const value = (o: Operand): Value => {
    if (o.k !== 'value') throw keyError('compares key attributes with :values only');
    return o.v;
  };
  switch (c.k) {
    case 'cmp':
      if (c.op === '<>') throw keyError('does not take <>');
      return { attribute: attribute(c.a), op: c.op, values: [value(c.b)] };
    case 'between':
      return { attribute: attribute(c.a), op: 'BETWEEN', values: [value(c.low), value(c.high)] };
    case 'beginsWith':
      return { attribute: attribute(c.a), op: 'begins_with', values: [value(c.b)] };
    default:
      throw keyError('takes =, <, <=, >, >=, BETWEEN and begins_with joined by AND (no OR, NOT, IN or other functions)');
  }
}

/** The range on the last sorting column a key condition names: one "=", BETWEEN or
 * begins_with, or at most one lower bound (> >=) and one upper bound (< <=). */
function lastColumnRange(name: string, conds: KeyPart[], fixed: Value[]): SortRange {
  const alone = conds.find((k) => k.op === '=' || k.op === 'BETWEEN' || k.op === 'begins_with');
  if (alone !== undefined) {
    if (conds.length > 1) throw keyError(`"${name}": ${alone.op} goes alone, not with other conditions on "${name}"`);
    if (alone.op === '=') return { fixed: [...fixed, alone.values[0]], lower: null, upper: null, ordered: false };
    if (alone.op === 'begins_with') return { fixed, lower: null, upper: null, beginsWith: alone.values[0], ordered: false };
    return { fixed, lower: { value: alone.values[0], inclusive: true }, upper: { value: alone.values[1], inclusive: true }, ordered: true };
  }
  const lowers = conds.filter((k) => k.op === '>' || k.op === '>=');
  const uppers = conds.filter((k) => k.op === '<' || k.op === '<=');
  if (lowers.length > 1) throw keyError(`takes one lower bound (> or >=) on "${name}"; got ${lowers.length}`);
  if (uppers.length > 1) throw keyError(`takes one upper bound (< or <=) on "${name}"; got ${uppers.length}`);
  const bound = (k: KeyPart | undefined) => (k === undefined ? null : { value: k.values[0], inclusive: k.op === '>=' || k.op === '<=' });
  return { fixed, lower: bound(lowers[0]), upper: bound(uppers[0]), ordered: false };
}

function keyError(what: string): KeysliceError {
  return new KeysliceError('ValidationError', `keyCondition ${what}`);
}

function mixed(expression: string, structured: string): KeysliceError {
  return new KeysliceError('ValidationError', `${expression} (an expression) and ${structured} (the structured form) do the same thing; use one of them`);
}

/** The structured update: set (attributes to values), remove (names), add (names to numbers). */
function structuredUpdate(set: unknown, remove: unknown, add: unknown, keyNames: readonly string[]): UpdateAction[] {
  const actions: UpdateAction[] = [];
  const touched = new Set<string>();
  const touch = (name: string, clause: string) => {
    validateAttributeName(name, clause);
    if (keyNames.includes(name)) throw new KeysliceError('ValidationError', `${clause}: "${name}" is a key attribute and cannot be updated`);
    if (touched.has(name)) throw new KeysliceError('ValidationError', `"${name}" appears in more than one update clause`);
    touched.add(name);
  };
  const path = (name: string): Path => [name];
  if (set !== undefined) {
    validateItem(set, 'set');
    for (const name of Object.keys(set)) {
      touch(name, 'set');
      actions.push({ k: 'set', path: path(name), value: { k: 'value', v: set[name] } });
    }
  }
  if (remove !== undefined) {
    if (!Array.isArray(remove) || remove.some((n) => typeof n !== 'string')) throw new KeysliceError('ValidationError', '"remove" must be a list of attribute names');
    for (const name of remove as string[]) {
      touch(name, 'remove');
      actions.push({ k: 'remove', path: path(name) });
    }
  }
  if (add !== undefined) {
    if (!isPlainObject(add)) throw new KeysliceError('ValidationError', '"add" must map attribute names to numbers');
    for (const [name, n] of Object.entries(add)) {
      touch(name, 'add');
      if (!isNumberValue(n)) throw new KeysliceError('ValidationError', `add.${name} must be a finite number or a decimal ({"$N": "..."})`);
      actions.push({ k: 'add', path: path(name), n });
    }
  }
  return actions;
}

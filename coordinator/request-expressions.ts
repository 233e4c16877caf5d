// The expressions of one request, from its payload fields to the bound forms a
// slice op carries: `condition`, `filter`, `update`, `projection` and
// `keyCondition`, sharing the request's `names` and `values`, and the
// structured forms they stand beside (`set`/`remove`/`add`, `attributes`,
// `shardingKey`/`sortingKey`). A request may use either form of one thing, not
// both. Everything is checked here, before anything is sent: call done() last.
import type { SortCondition } from '../shared/api.js';
import type { Condition, Operand, Path, UpdateAction } from '../shared/expression-ast.js';
import { bindCondition, bindProjection, bindUpdate, Placeholders } from '../shared/expression-bind.js';
import { parseCondition, parseProjection, parseUpdate } from '../shared/expression-parser.js';
import { KeysliceError } from '../shared/errors.js';
import type { Projection } from '../shared/protocol.js';
import { isPlainObject, validateAttributeName, validateItem, type Value } from '../shared/values.js';
import type { Table } from './catalog.js';

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
    const keyNames = [table.shardingKey.name, ...(table.sortingKey ? [table.sortingKey.name] : [])];
    const { update, set, remove, add } = this.p;
    if (update !== undefined) {
      if (set !== undefined || remove !== undefined || add !== undefined) throw mixed('"update"', '"set", "remove" and "add"');
      return bindUpdate(parseUpdate(update), this.placeholders, 'update', keyNames);
    }
    return structuredUpdate(set, remove, add, keyNames);
  }

  /** `keyCondition` as the structured form: `sk = :v` on the sharding key, and
   * at most one of = < <= > >= BETWEEN begins_with on the sorting key, joined by AND. */
  keyCondition(table: Table): { shardingKey: unknown; sortingKey?: SortCondition } | null {
    const { keyCondition, shardingKey, sortingKey } = this.p;
    if (keyCondition === undefined) return null;
    if (shardingKey !== undefined || sortingKey !== undefined) throw mixed('"keyCondition"', '"shardingKey" and "sortingKey"');
    const c = bindCondition(parseCondition(keyCondition, 'keyCondition'), this.placeholders, 'keyCondition');
    const parts: Condition[] = [];
    const flatten = (x: Condition): void => {
      if (x.k === 'and') {
        flatten(x.a);
        flatten(x.b);
      } else parts.push(x);
    };
    flatten(c);
    const sharding = table.shardingKey.name;
    const sorting = table.sortingKey?.name;
    const names = sorting === undefined ? `"${sharding}"` : `"${sharding}" and "${sorting}"`;
    if (parts.length > 2) throw keyError(`takes at most two conditions joined by AND: one on ${names}`);
    let shardingValue: Value | undefined;
    let sort: SortCondition | undefined;
    for (const part of parts) {
      const [attribute, cond] = keyPart(part);
      if (attribute === sharding) {
        if (!('eq' in cond)) throw keyError(`the sharding key "${sharding}" takes = only`);
        if (shardingValue !== undefined) throw keyError(`names "${sharding}" twice`);
        shardingValue = cond.eq;
      } else if (attribute === sorting) {
        if (sort !== undefined) throw keyError(`takes one condition on the sorting key "${sorting}"`);
        sort = cond as SortCondition;
      } else throw keyError(`names "${attribute}"; it can only name the key attributes ${names}`);
    }
    if (shardingValue === undefined) throw keyError(`needs "${sharding} = :value"`);
    return sort === undefined ? { shardingKey: shardingValue } : { shardingKey: shardingValue, sortingKey: sort };
  }

  /** Every placeholder of `names` and `values` must have been used by some expression. */
  done(): void {
    this.placeholders.checkAllUsed();
  }
}

/** One conjunct of a key condition: the key attribute it names and its structured condition. */
function keyPart(c: Condition): [string, { eq: Value } | Exclude<SortCondition, { eq: unknown }>] {
  const attribute = (o: Operand): string => {
    if (o.k !== 'path' || o.path.length !== 1) throw keyError('needs a key attribute (a top-level name) on the left of each condition');
    return o.path[0] as string;
  };
  const value = (o: Operand): Value => {
    if (o.k !== 'value') throw keyError('compares key attributes with :values only');
    return o.v;
  };
  switch (c.k) {
    case 'cmp': {
      const a = attribute(c.a);
      const v = value(c.b);
      switch (c.op) {
        case '=':
          return [a, { eq: v }];
        case '<':
          return [a, { lt: v as never }];
        case '<=':
          return [a, { lte: v as never }];
        case '>':
          return [a, { gt: v as never }];
        case '>=':
          return [a, { gte: v as never }];
        default:
          throw keyError('does not take <>');
      }
    }
    case 'between':
      return [attribute(c.a), { between: [value(c.low), value(c.high)] as never }];
    case 'beginsWith':
      return [attribute(c.a), { beginsWith: value(c.b) as never }];
    default:
      throw keyError('takes =, <, <=, >, >=, BETWEEN and begins_with joined by AND (no OR, NOT, IN or other functions)');
  }
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
      if (typeof n !== 'number' || !Number.isFinite(n)) throw new KeysliceError('ValidationError', `add.${name} must be a finite number`);
      actions.push({ k: 'add', path: path(name), n });
    }
  }
  return actions;
}

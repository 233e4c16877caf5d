// Binding: from a parsed (cached, shared) expression to the form a worker runs,
// for one request. `#name` placeholders become attribute names and `:value`
// placeholders their values; what can be known before touching an item is
// checked here, so that a bad request fails at the coordinator with a
// ValidationError and nothing is sent: undefined and unused placeholders, type
// mismatches of literal values, overlapping paths, writes to key attributes.
import {
  pathText,
  TYPE_NAMES,
  type Condition,
  type Operand,
  type ParsedCondition,
  type ParsedOperand,
  type ParsedPath,
  type ParsedProjection,
  type ParsedUpdate,
  type Path,
  type SetValue,
  type TypeName,
  type UpdateAction,
} from './expression-ast.js';
import { isDecimal } from './decimal.js';
import { compareOrdered, typeNameOf } from './expression-eval.js';
import { KeysliceError } from './errors.js';
import { ATTRIBUTE_NAME_BYTES_MAX, EXPRESSION_PLACEHOLDERS_MAX } from './limits.js';
import { checkMapKey, checkText, describeType, isPlainObject, setTypeOf, validateAttributeName, validateValue, type Value } from './values.js';

const NAME_PLACEHOLDER = /^#[A-Za-z0-9_]+$/;
const VALUE_PLACEHOLDER = /^:[A-Za-z0-9_]+$/;

/** The `names` and `values` of one request, and which of them its expressions used. */
export class Placeholders {
  private readonly names: Record<string, string>;
  private readonly values: Record<string, Value>;
  /** Made at the first placeholder used: most requests (a plain PutItem or GetItem) have none, and each request
   * made two sets for them. */
  private usedNames: Set<string> | null = null;
  private usedValues: Set<string> | null = null;

  constructor(names: unknown, values: unknown) {
    this.names = checkMap(names, 'names', NAME_PLACEHOLDER, '#name', (v, where) => {
      if (typeof v !== 'string' || v.length === 0) throw new KeysliceError('ValidationError', `${where} must be a non-empty attribute name`);
      checkText(v, where); // a name an update sets is stored
      if (Buffer.byteLength(v) > ATTRIBUTE_NAME_BYTES_MAX) throw new KeysliceError('ValidationError', `${where} is longer than ${ATTRIBUTE_NAME_BYTES_MAX} bytes`);
    }) as Record<string, string>;
    this.values = checkMap(values, 'values', VALUE_PLACEHOLDER, ':value', (v, where) => validateValue(v, where)) as Record<string, Value>;
  }

  name(placeholder: string, at: number, field: string): string {
    if (!Object.hasOwn(this.names, placeholder)) {
      throw new KeysliceError('ValidationError', `${field}: ${placeholder} at position ${at} is not defined in "names"`);
    }
    (this.usedNames ??= new Set()).add(placeholder);
    return this.names[placeholder];
  }

  value(placeholder: string, at: number, field: string): Value {
    if (!Object.hasOwn(this.values, placeholder)) {
      throw new KeysliceError('ValidationError', `${field}: ${placeholder} at position ${at} is not defined in "values"`);
    }
    (this.usedValues ??= new Set()).add(placeholder);
    return this.values[placeholder];
  }

  /** Call once every expression of the request is bound: a placeholder no expression used is an error, as in DynamoDB. */
  checkAllUsed(): void {
    if (this.names === NONE && this.values === NONE) return;
    const names = Object.keys(this.names).filter((n) => this.usedNames?.has(n) !== true);
    const values = Object.keys(this.values).filter((v) => this.usedValues?.has(v) !== true);
    if (names.length > 0) throw new KeysliceError('ValidationError', `"names" has ${names.join(', ')}, which no expression of this request uses`);
    if (values.length > 0) throw new KeysliceError('ValidationError', `"values" has ${values.join(', ')}, which no expression of this request uses`);
  }
}

/** The names or values of a request that gave none: one empty map for all of them (never written to). */
const NONE: Record<string, never> = Object.freeze({});

function checkMap(v: unknown, field: string, key: RegExp, form: string, check: (v: unknown, where: string) => void): Record<string, unknown> {
  if (v === undefined) return NONE;
  if (!isPlainObject(v)) throw new KeysliceError('ValidationError', `"${field}" must map ${form} placeholders to ${field === 'names' ? 'attribute names' : 'values'}`);
  const keys = Object.keys(v);
  if (keys.length > EXPRESSION_PLACEHOLDERS_MAX) throw new KeysliceError('ValidationError', `"${field}" has ${keys.length} entries; the limit is ${EXPRESSION_PLACEHOLDERS_MAX}`);
  for (const k of keys) {
    if (!key.test(k)) throw new KeysliceError('ValidationError', `"${field}": ${JSON.stringify(k)} is not a placeholder of the form ${form} (letters, digits and "_")`);
    check(v[k], `${field}.${k}`);
  }
  return v;
}

// ---- paths ----------------------------------------------------------------------

function bindPath(path: ParsedPath, ph: Placeholders, at: number, field: string): Path {
  return path.map((seg) => (typeof seg === 'string' && seg.startsWith('#') ? ph.name(seg, at, field) : seg));
}

/** DynamoDB refuses two paths of one update or projection where one is a prefix of
 * the other (overlap) or where they part at a name on one side and an index on the other (conflict). */
function checkNoOverlap(paths: readonly Path[], field: string): void {
  for (let i = 0; i < paths.length; i++) {
    for (let j = 0; j < i; j++) {
      const [a, b] = [paths[j], paths[i]];
      const n = Math.min(a.length, b.length);
      let k = 0;
      while (k < n && a[k] === b[k]) k++;
      if (k < n) {
        if (typeof a[k] !== typeof b[k]) {
          throw new KeysliceError('ValidationError', `${field}: the paths ${pathText(a)} and ${pathText(b)} conflict (one indexes a list where the other names a map entry)`);
        }
        continue;
      }
      throw new KeysliceError('ValidationError', `${field}: the paths ${pathText(a)} and ${pathText(b)} overlap; name each attribute once`);
    }
  }
}

function samePath(a: Path, b: Path): boolean {
  return a.length === b.length && a.every((seg, i) => seg === b[i]);
}

// ---- conditions -----------------------------------------------------------------

const ORDERED = new Set(['S', 'N', 'B']);

export function bindCondition(c: ParsedCondition, ph: Placeholders, field: string): Condition {
  switch (c.k) {
    case 'and':
    case 'or':
      return { k: c.k, a: bindCondition(c.a, ph, field), b: bindCondition(c.b, ph, field) };
    case 'not':
      return { k: 'not', a: bindCondition(c.a, ph, field) };
    case 'cmp': {
      const a = bindOperand(c.a, ph, field);
      const b = bindOperand(c.b, ph, field);
      distinct(a, b, c.op, c.at, field);
      if (c.op !== '=' && c.op !== '<>') {
        ordered(c.a, a, c.op, field);
        ordered(c.b, b, c.op, field);
      }
      return { k: 'cmp', op: c.op, a, b };
    }
    case 'between': {
      const [a, low, high] = [bindOperand(c.a, ph, field), bindOperand(c.low, ph, field), bindOperand(c.high, ph, field)];
      ordered(c.a, a, 'BETWEEN', field);
      ordered(c.low, low, 'BETWEEN', field);
      ordered(c.high, high, 'BETWEEN', field);
      if (low.k === 'value' && high.k === 'value') {
        const order = compareOrdered(low.v, high.v);
        if (order === null) {
          throw new KeysliceError('ValidationError', `${field}: BETWEEN at position ${c.at} needs bounds of one type; got a ${describeType(low.v)} and a ${describeType(high.v)}`);
        }
        if (order > 0) throw new KeysliceError('ValidationError', `${field}: BETWEEN at position ${c.at} needs low <= high`);
      }
      return { k: 'between', a, low, high };
    }
    case 'in':
      return { k: 'in', a: bindOperand(c.a, ph, field), list: c.list.map((o) => bindOperand(o, ph, field)) };
    case 'fn': {
      const args = c.args.map((o) => bindOperand(o, ph, field));
      switch (c.fn) {
        case 'attribute_exists':
        case 'attribute_not_exists':
          return { k: c.fn === 'attribute_exists' ? 'exists' : 'notExists', path: (args[0] as Operand & { k: 'path' }).path };
        case 'attribute_type':
          return { k: 'type', a: args[0], type: typeName(args[1], c.args[1], field) };
        case 'begins_with':
          distinct(args[0], args[1], c.fn, c.at, field);
          for (let i = 0; i < 2; i++) {
            const o = args[i];
            if (o.k === 'value' && typeof o.v !== 'string' && !(o.v instanceof Uint8Array)) {
              throw new KeysliceError('ValidationError', `${field}: begins_with at position ${c.at} takes a string or binary; ${nameOf(c.args[i])} is a ${describeType(o.v)}`);
            }
          }
          return { k: 'beginsWith', a: args[0], b: args[1] };
        case 'contains':
          distinct(args[0], args[1], c.fn, c.at, field);
          return { k: 'contains', a: args[0], b: args[1] };
      }
    }
  }
}

function bindOperand(o: ParsedOperand, ph: Placeholders, field: string): Operand {
  switch (o.k) {
    case 'path':
      return { k: 'path', path: bindPath(o.path, ph, o.at, field) };
    case 'value':
      return { k: 'value', v: ph.value(o.name, o.at, field) };
    case 'call': {
      // The parser lets only size() through as a condition operand.
      const a = bindOperand(o.args[0], ph, field);
      if (a.k === 'value' && !['S', 'B', 'L', 'M', 'SS', 'NS', 'BS'].includes(typeNameOf(a.v))) {
        throw new KeysliceError('ValidationError', `${field}: size at position ${o.at} takes a string, binary, list, map or set; ${nameOf(o.args[0])} is a ${describeType(a.v)}`);
      }
      return { k: 'size', a };
    }
    case 'arith':
      throw new KeysliceError('ValidationError', `${field}: + and - belong to SET actions of update expressions (position ${o.at})`);
  }
}

/** `a = a` and `begins_with(a, a)` are refused, as in DynamoDB. */
function distinct(a: Operand, b: Operand, op: string, at: number, field: string): void {
  if (a.k === 'path' && b.k === 'path' && samePath(a.path, b.path)) {
    throw new KeysliceError('ValidationError', `${field}: the operands of ${op} at position ${at} are the same path, ${pathText(a.path)}`);
  }
}

/** Ordering comparisons take strings, numbers and binary values: a literal of another type is an error. */
function ordered(parsed: ParsedOperand, o: Operand, op: string, field: string): void {
  if (o.k === 'value' && !ORDERED.has(typeNameOf(o.v))) {
    throw new KeysliceError('ValidationError', `${field}: ${op} at position ${parsed.at} orders strings, numbers or binary values; ${nameOf(parsed)} is a ${describeType(o.v)}`);
  }
}

function typeName(o: Operand, parsed: ParsedOperand, field: string): TypeName {
  if (o.k !== 'value' || typeof o.v !== 'string') {
    throw new KeysliceError('ValidationError', `${field}: the second operand of attribute_type (position ${parsed.at}) must be a :value holding a type name (${TYPE_NAMES.join(', ')})`);
  }
  if (!TYPE_NAMES.includes(o.v as TypeName)) {
    throw new KeysliceError('ValidationError', `${field}: attribute_type (position ${parsed.at}) takes one of ${TYPE_NAMES.join(', ')}; got ${JSON.stringify(o.v)}`);
  }
  return o.v as TypeName;
}

function nameOf(o: ParsedOperand): string {
  switch (o.k) {
    case 'value':
      return o.name;
    case 'path':
      return pathText(o.path);
    case 'call':
      return `${o.fn}(...)`;
    case 'arith':
      return `(... ${o.op} ...)`;
  }
}

// ---- updates ----------------------------------------------------------------------

/** `keyNames`: attributes an update may not touch (the table's key). */
export function bindUpdate(u: ParsedUpdate, ph: Placeholders, field: string, keyNames: readonly string[]): UpdateAction[] {
  const actions: UpdateAction[] = [];
  const paths: Path[] = [];
  for (const a of u.actions) {
    const path = bindPath(a.path, ph, a.at, field);
    const top = path[0] as string;
    validateAttributeName(top, `${field} (position ${a.at})`);
    // An update writes (or removes) each name of its path as a map key: one that cannot be stored is refused here.
    for (const seg of path) if (typeof seg === 'string') checkMapKey(seg, `${field} (position ${a.at})`);
    if (keyNames.includes(top)) {
      throw new KeysliceError('ValidationError', `${field}: "${top}" (position ${a.at}) is a key attribute and cannot be updated`);
    }
    paths.push(path);
    switch (a.k) {
      case 'set':
        actions.push({ k: 'set', path, value: bindSetValue(a.value, ph, field) });
        break;
      case 'remove':
        actions.push({ k: 'remove', path });
        break;
      case 'add': {
        const v = ph.value(a.value.name, a.value.at, field);
        if (typeof v === 'number' || isDecimal(v)) actions.push({ k: 'add', path, n: v });
        else if (setTypeOf(v) !== null) actions.push({ k: 'addSet', path, set: v });
        else {
          const list = Array.isArray(v) ? ' DynamoDB refuses ADD of a list too: use SET a = list_append(a, :list), or a set ({"$SS": [...]}).' : '';
          throw new KeysliceError('ValidationError', `${field}: ADD at position ${a.at} takes a number or a set; ${a.value.name} is a ${describeType(v)}.${list}`);
        }
        break;
      }
      case 'delete': {
        const v = ph.value(a.value.name, a.value.at, field);
        if (setTypeOf(v) === null) {
          throw new KeysliceError(
            'ValidationError',
            `${field}: DELETE at position ${a.at} removes the elements of a set from a set; ${a.value.name} is a ${describeType(v)} (use REMOVE ${pathText(path)}[i] to remove list elements)`,
          );
        }
        actions.push({ k: 'deleteSet', path, set: v });
        break;
      }
    }
  }
  checkNoOverlap(paths, field);
  return actions;
}

function bindSetValue(o: ParsedOperand, ph: Placeholders, field: string): SetValue {
  switch (o.k) {
    case 'path':
      return { k: 'path', path: bindPath(o.path, ph, o.at, field) };
    case 'value':
      return { k: 'value', v: ph.value(o.name, o.at, field) };
    case 'arith': {
      const a = bindSetValue(o.a, ph, field);
      const b = bindSetValue(o.b, ph, field);
      for (const [parsed, bound] of [[o.a, a], [o.b, b]] as const) {
        if (bound.k === 'value' && typeof bound.v !== 'number' && !isDecimal(bound.v)) {
          throw new KeysliceError('ValidationError', `${field}: ${o.op} at position ${o.at} takes numbers; ${nameOf(parsed)} is a ${describeType(bound.v)}`);
        }
        if (bound.k === 'listAppend') throw new KeysliceError('ValidationError', `${field}: ${o.op} at position ${o.at} takes numbers; list_append gives a list`);
      }
      return { k: o.op, a, b };
    }
    case 'call': {
      const args = o.args.map((x) => bindSetValue(x, ph, field));
      if (o.fn === 'if_not_exists') return { k: 'ifNotExists', path: (args[0] as SetValue & { k: 'path' }).path, b: args[1] };
      for (let i = 0; i < 2; i++) {
        const x = args[i];
        if (x.k === 'value' && !Array.isArray(x.v)) {
          throw new KeysliceError('ValidationError', `${field}: list_append at position ${o.at} takes lists; ${nameOf(o.args[i])} is a ${describeType(x.v)}`);
        }
      }
      return { k: 'listAppend', a: args[0], b: args[1] };
    }
  }
}

// ---- projections ------------------------------------------------------------------

export function bindProjection(p: ParsedProjection, ph: Placeholders, field: string): Path[] {
  const paths = p.paths.map(({ path, at }) => bindPath(path, ph, at, field));
  checkNoOverlap(paths, field);
  return paths;
}

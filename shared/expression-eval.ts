// Evaluation of bound expressions against items: conditions (and filters),
// update actions and projections. Pure functions of plain values, used inside
// the worker thread that owns the slice, so that a condition and the write it
// guards happen in one step. The semantics are DynamoDB's, mapped onto
// keyslice's plain values (docs/expressions.md).
import type { Condition, Operand, Path, SetValue, TypeName, UpdateAction } from './expression-ast.js';
import { pathText } from './expression-ast.js';
import { compareNumbers, isDecimal, numberText, type NumberValue } from './decimal.js';
import { decimalSum } from './decimal-sum.js';
import { KeysliceError } from './errors.js';
import { VALUE_DEPTH_MAX } from './limits.js';
import { describeType, isPlainObject, makeSet, MTIME_ATTRIBUTE, NAME_ATTRIBUTE, setElementKey, setElements, setOwn, setTypeOf, type Item, type Value } from './values.js';
import { bufferView } from './buffer-view.js';

type MapValue = { [name: string]: Value };

// ---- values -------------------------------------------------------------------

/** DynamoDB's name for the type of a value. */
export function typeNameOf(v: Value): TypeName {
  switch (typeof v) {
    case 'string':
      return 'S';
    case 'number':
      return 'N';
    case 'boolean':
      return 'BOOL';
  }
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return 'B';
  return Array.isArray(v) ? 'L' : isDecimal(v) ? 'N' : (setTypeOf(v) ?? 'M');
}

/** The value at a document path, or undefined when the path leads nowhere. */
export function valueAt(item: Item, path: Path): Value | undefined {
  let cur: Value | undefined = item;
  for (const seg of path) {
    if (typeof seg === 'number') {
      if (!Array.isArray(cur) || seg >= cur.length) return undefined;
      cur = cur[seg];
    } else {
      // A set or a decimal is a map only in its representation: a path cannot lead into it.
      if (!isMap(cur) || !Object.hasOwn(cur, seg) || setTypeOf(cur) !== null || isDecimal(cur)) return undefined;
      cur = cur[seg];
    }
  }
  return cur;
}

function isMap(v: Value | undefined): v is MapValue {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && isPlainObject(v);
}

/** Deep equality: same type and same content (lists in order, maps by key, sets in any order). */
export function valuesEqual(a: Value, b: Value): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (a instanceof Uint8Array || b instanceof Uint8Array) return a instanceof Uint8Array && b instanceof Uint8Array && compareBytes(a, b) === 0;
  const setA = setTypeOf(a);
  const setB = setTypeOf(b);
  if (setA !== null || setB !== null) {
    if (setA !== setB) return false;
    const ea = setElements(a);
    const eb = setElements(b);
    if (ea.length !== eb.length) return false;
    const keys = new Set(eb.map(setElementKey));
    return ea.every((e) => keys.has(setElementKey(e)));
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!valuesEqual(a[i], b[i])) return false;
    return true;
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !valuesEqual(a[k], b[k])) return false;
  return true;
}

/** Order of two strings, numbers or binary values of the same type; null when they
 * are not both of one of these types. Strings compare by code point (UTF-8 byte
 * order), binary by unsigned bytes, as in DynamoDB. */
export function compareOrdered(a: Value | undefined, b: Value | undefined): number | null {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') return compareCodePoints(a, b);
  if (isNumeric(a) && isNumeric(b)) return compareNumbers(a, b); // a decimal, numerically with doubles
  if (a instanceof Uint8Array && b instanceof Uint8Array) return compareBytes(a, b);
  return null;
}

function isNumeric(v: Value | undefined): v is NumberValue {
  return typeof v === 'number' || isDecimal(v);
}

function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // UTF-16 order differs from code point order only between surrogates and U+E000..U+FFFF.
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length < 0 ? -1 : a.length > b.length ? 1 : 0;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(bufferView(a), bufferView(b));
}


/** size(): UTF-8 bytes of a string, bytes of a binary, elements of a list or map;
 * undefined (so every comparison is false) for anything else or a missing value. */
export function sizeOf(v: Value | undefined): number | undefined {
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8');
  if (v !== undefined && setTypeOf(v) !== null) return setElements(v).length;
  if (isDecimal(v)) return undefined;
  if (v instanceof Uint8Array) return v.byteLength;
  if (Array.isArray(v)) return v.length;
  if (isMap(v)) return Object.keys(v).length;
  return undefined;
}

// ---- conditions ---------------------------------------------------------------

/** True when the condition holds for the item (a missing item is `{}`). */
export function evaluate(c: Condition, item: Item): boolean {
  switch (c.k) {
    case 'and':
      return evaluate(c.a, item) && evaluate(c.b, item);
    case 'or':
      return evaluate(c.a, item) || evaluate(c.b, item);
    case 'not':
      return !evaluate(c.a, item);
    case 'cmp': {
      const a = operand(c.a, item);
      const b = operand(c.b, item);
      if (c.op === '=') return a !== undefined && b !== undefined && valuesEqual(a, b);
      // A missing attribute equals nothing, so it is <> anything.
      if (c.op === '<>') return a === undefined || b === undefined || !valuesEqual(a, b);
      const order = compareOrdered(a, b);
      if (order === null) return false;
      return c.op === '<' ? order < 0 : c.op === '<=' ? order <= 0 : c.op === '>' ? order > 0 : order >= 0;
    }
    case 'between': {
      const a = operand(c.a, item);
      const low = compareOrdered(a, operand(c.low, item));
      const high = compareOrdered(a, operand(c.high, item));
      return low !== null && high !== null && low >= 0 && high <= 0;
    }
    case 'in': {
      const a = operand(c.a, item);
      if (a === undefined) return false;
      for (const o of c.list) {
        const v = operand(o, item);
        if (v !== undefined && valuesEqual(a, v)) return true;
      }
      return false;
    }
    case 'exists':
      return valueAt(item, c.path) !== undefined;
    case 'notExists':
      return valueAt(item, c.path) === undefined;
    case 'type': {
      const v = operand(c.a, item);
      return v !== undefined && typeNameOf(v) === c.type;
    }
    case 'beginsWith': {
      const a = operand(c.a, item);
      const b = operand(c.b, item);
      if (typeof a === 'string' && typeof b === 'string') return a.startsWith(b);
      if (a instanceof Uint8Array && b instanceof Uint8Array) return b.byteLength <= a.byteLength && compareBytes(a.subarray(0, b.byteLength), b) === 0;
      return false;
    }
    case 'contains': {
      const a = operand(c.a, item);
      const b = operand(c.b, item);
      if (b === undefined) return false;
      if (typeof a === 'string') return typeof b === 'string' && a.includes(b);
      if (a instanceof Uint8Array) return b instanceof Uint8Array && bufferView(a).indexOf(bufferView(b)) >= 0;
      if (Array.isArray(a)) return a.some((e) => valuesEqual(e, b));
      if (a !== undefined && setTypeOf(a) !== null) return setElements(a).some((e) => valuesEqual(e, b));
      return false;
    }
  }
}

function operand(o: Operand, item: Item): Value | undefined {
  switch (o.k) {
    case 'path':
      return valueAt(item, o.path);
    case 'value':
      return o.v;
    case 'size':
      return sizeOf(operand(o.a, item));
  }
}

// ---- updates ------------------------------------------------------------------

/** The item after the actions: every right-hand side is read from `source` (the
 * item as it was), then SETs are applied (in path order), then ADDs, then DELETEs
 * (of set elements), then REMOVEs (in reverse path order, so that removing list
 * elements by index means the indexes of the list as it was). `source` is never
 * modified; containers on a changed path are copied. Throws ValidationError when
 * an action cannot apply. */
export function applyUpdate(source: Item, actions: readonly UpdateAction[]): Item {
  const sets: [Path, Value][] = [];
  const adds: [Path, NumberValue][] = [];
  const setAdds: [Path, Value][] = [];
  const setDeletes: [Path, Value][] = [];
  const removes: Path[] = [];
  for (const a of actions) {
    if (a.k === 'set') sets.push([a.path, setValue(a.value, source)]);
    else if (a.k === 'add') adds.push([a.path, a.n]);
    else if (a.k === 'addSet') setAdds.push([a.path, a.set]);
    else if (a.k === 'deleteSet') setDeletes.push([a.path, a.set]);
    else removes.push(a.path);
  }
  const fresh = new Set<object>();
  let next = copyOf(source, fresh) as Item;
  sets.sort((x, y) => comparePaths(x[0], y[0]));
  for (const [path, v] of sets) {
    if (path.length - 1 + depthOf(v) > VALUE_DEPTH_MAX) {
      throw new KeysliceError('ValidationError', `update: SET ${pathText(path)} would nest values deeper than ${VALUE_DEPTH_MAX} levels`);
    }
    next = edit(next, path, 0, () => v, fresh, 'SET') as Item;
  }
  for (const [path, n] of adds) next = edit(next, path, 0, (old) => addNumber(old, n, path), fresh, 'ADD') as Item;
  for (const [path, set] of setAdds) next = edit(next, path, 0, (old) => setUnion(old, set, path), fresh, 'ADD') as Item;
  for (const [path, set] of setDeletes) {
    const old = valueAt(next, path);
    if (old === undefined) continue; // DELETE from a missing attribute changes nothing, as in DynamoDB
    const left = setDifference(old, set, path);
    if (left === null) removes.push(path);
    else next = edit(next, path, 0, () => left, fresh, 'DELETE') as Item;
  }
  removes.sort((x, y) => comparePaths(y, x));
  for (const path of removes) {
    if (valueAt(next, path) !== undefined) next = removeAt(next, path, 0, fresh) as Item;
  }
  return next;
}

function setValue(v: SetValue, item: Item): Value {
  switch (v.k) {
    case 'value':
      return v.v;
    case 'path': {
      const x = valueAt(item, v.path);
      if (x === undefined) {
        throw new KeysliceError('ValidationError', `update: the attribute "${pathText(v.path)}" does not exist in the item (if_not_exists(${pathText(v.path)}, :default) gives a default)`);
      }
      return x;
    }
    case '+':
    case '-': {
      const a = setValue(v.a, item);
      const b = setValue(v.b, item);
      if (!isNumeric(a) || !isNumeric(b)) {
        throw new KeysliceError('ValidationError', `update: ${v.k} takes two numbers, got ${operandType(v.a, a)} and ${operandType(v.b, b)}`);
      }
      const r = decimalSum(a, b, v.k === '-');
      if (typeof r === 'number' && !Number.isFinite(r)) throw new KeysliceError('ValidationError', `update: ${numberText(a)} ${v.k} ${numberText(b)} is not a finite number`);
      return r;
    }
    case 'ifNotExists': {
      const x = valueAt(item, v.path);
      return x !== undefined ? x : setValue(v.b, item);
    }
    case 'listAppend': {
      const a = setValue(v.a, item);
      const b = setValue(v.b, item);
      if (!Array.isArray(a) || !Array.isArray(b)) {
        throw new KeysliceError('ValidationError', `update: list_append takes two lists, got ${operandType(v.a, a)} and ${operandType(v.b, b)}`);
      }
      return [...a, ...b];
    }
  }
}

function operandType(o: SetValue, v: Value): string {
  return o.k === 'path' ? `"${pathText(o.path)}" (a ${describeType(v)})` : `a ${describeType(v)}`;
}

function addNumber(old: Value | undefined, n: NumberValue, path: Path): Value {
  if (old === undefined) return n;
  if (!isNumeric(old)) {
    throw new KeysliceError('ValidationError', `update: cannot ADD to "${pathText(path)}": it holds a ${describeType(old)}, not a number`);
  }
  const sum = decimalSum(old, n);
  if (typeof sum === 'number' && !Number.isFinite(sum)) throw new KeysliceError('ValidationError', `update: adding ${numberText(n)} to "${pathText(path)}" gives ${sum}`);
  return sum;
}

function sameSetType(old: Value, set: Value, path: Path, verb: string): void {
  const type = setTypeOf(old);
  if (type !== setTypeOf(set)) {
    throw new KeysliceError('ValidationError', `update: cannot ${verb} a ${setTypeOf(set)} set ${verb === 'ADD' ? 'to' : 'from'} "${pathText(path)}": it holds a ${describeType(old)}`);
  }
}

/** ADD of a set: the elements of `set` not yet in `old` are appended (a missing attribute starts empty). */
function setUnion(old: Value | undefined, set: Value, path: Path): Value {
  if (old === undefined) return set;
  sameSetType(old, set, path, 'ADD');
  const have = new Set(setElements(old).map(setElementKey));
  const added = setElements(set).filter((e) => !have.has(setElementKey(e)));
  return added.length === 0 ? old : makeSet(setTypeOf(old)!, [...setElements(old), ...added]);
}

/** DELETE of a set: `old` without the elements of `set`; null when none is left (the attribute goes). */
function setDifference(old: Value, set: Value, path: Path): Value | null {
  sameSetType(old, set, path, 'DELETE');
  const gone = new Set(setElements(set).map(setElementKey));
  const left = setElements(old).filter((e) => !gone.has(setElementKey(e)));
  return left.length === 0 ? null : makeSet(setTypeOf(old)!, left);
}

/** Replaces the value at path[i..] inside `node` with fn(old), copying each container on the way once. */
function edit(node: Value, path: Path, i: number, fn: (old: Value | undefined) => Value, fresh: Set<object>, verb: string): Value {
  const seg = path[i];
  const last = i === path.length - 1;
  if (typeof seg === 'string') {
    if (!isMap(node) || setTypeOf(node) !== null || isDecimal(node)) throw invalidPath(verb, path, i, node);
    const target = copyOf(node, fresh) as MapValue;
    const old = Object.hasOwn(target, seg) ? target[seg] : undefined;
    if (last) setOwn(target, seg, fn(old));
    else {
      if (old === undefined) throw invalidPath(verb, path, i + 1, undefined);
      setOwn(target, seg, edit(old, path, i + 1, fn, fresh, verb));
    }
    return target;
  }
  if (!Array.isArray(node)) throw invalidPath(verb, path, i, node);
  const target = copyOf(node, fresh) as Value[];
  if (last) {
    // An index past the end appends, as in DynamoDB.
    if (seg < target.length) target[seg] = fn(target[seg]);
    else target.push(fn(undefined));
  } else {
    if (seg >= target.length) throw invalidPath(verb, path, i + 1, undefined);
    target[seg] = edit(target[seg], path, i + 1, fn, fresh, verb);
  }
  return target;
}

/** Removes the value at path[i..], which exists. */
function removeAt(node: Value, path: Path, i: number, fresh: Set<object>): Value {
  const seg = path[i];
  const last = i === path.length - 1;
  const target = copyOf(node as MapValue | Value[], fresh);
  if (Array.isArray(target)) {
    const index = seg as number;
    if (last) target.splice(index, 1);
    else target[index] = removeAt(target[index], path, i + 1, fresh);
  } else {
    const name = seg as string;
    if (last) delete target[name];
    else setOwn(target, name, removeAt(target[name], path, i + 1, fresh));
  }
  return target;
}

function copyOf(node: MapValue | Value[], fresh: Set<object>): MapValue | Value[] {
  if (fresh.has(node)) return node;
  const copy = Array.isArray(node) ? node.slice() : { ...node };
  fresh.add(copy);
  return copy;
}

function invalidPath(verb: string, path: Path, i: number, found: Value | undefined): KeysliceError {
  const at = pathText(path.slice(0, i));
  const what = found === undefined ? 'does not exist' : `is a ${describeType(found)}, not a ${typeof path[i] === 'number' ? 'list' : 'map'}`;
  return new KeysliceError('ValidationError', `update: ${verb} ${pathText(path)} is invalid for this item: "${at}" ${what}`);
}

function comparePaths(a: Path, b: Path): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] === b[i]) continue;
    if (typeof a[i] === 'number' && typeof b[i] === 'number') return (a[i] as number) - (b[i] as number);
    return String(a[i]) < String(b[i]) ? -1 : 1;
  }
  return a.length - b.length;
}

function depthOf(v: Value): number {
  if (typeof v !== 'object' || v === null || v instanceof Uint8Array) return 0;
  let max = 0;
  for (const child of Array.isArray(v) ? v : Object.values(v)) max = Math.max(max, depthOf(child));
  return max + 1;
}

// ---- projections --------------------------------------------------------------

/** A projection as a tree: a leaf (null) takes the whole value; children pick parts. */
type Pick = Map<string | number, Pick | null>;

/** A copy of `item` with only the projected paths (and the system attributes);
 * list elements picked by index come back in index order, without gaps, as in
 * DynamoDB. A null projection returns the item itself. */
export function projectItem(item: Item, projection: readonly Path[] | null): Item {
  if (projection === null) return item;
  const root: Pick = new Map();
  for (const path of projection) {
    let node = root;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i];
      if (i === path.length - 1) {
        node.set(seg, null);
        break;
      }
      const child = node.get(seg);
      if (child === null) break; // the whole value is already taken
      if (child === undefined) {
        const created: Pick = new Map();
        node.set(seg, created);
        node = created;
      } else node = child;
    }
  }
  const out = (pick(item, root) ?? {}) as Item;
  if (Object.hasOwn(item, NAME_ATTRIBUTE)) out[NAME_ATTRIBUTE] = item[NAME_ATTRIBUTE];
  if (Object.hasOwn(item, MTIME_ATTRIBUTE)) out[MTIME_ATTRIBUTE] = item[MTIME_ATTRIBUTE];
  return out;
}

function pick(v: Value, node: Pick): Value | undefined {
  if (Array.isArray(v)) {
    const indexes = [...node.keys()].filter((k): k is number => typeof k === 'number').sort((a, b) => a - b);
    const out: Value[] = [];
    for (const i of indexes) {
      if (i >= v.length) continue;
      const child = node.get(i)!;
      const picked = child === null ? v[i] : pick(v[i], child);
      if (picked !== undefined) out.push(picked);
    }
    return out.length > 0 ? out : undefined;
  }
  if (isMap(v) && setTypeOf(v) === null && !isDecimal(v)) {
    const out: MapValue = {};
    let any = false;
    for (const [k, child] of node) {
      if (typeof k !== 'string' || !Object.hasOwn(v, k)) continue;
      const picked = child === null ? v[k] : pick(v[k], child);
      if (picked === undefined) continue;
      setOwn(out, k, picked);
      any = true;
    }
    return any ? out : undefined;
  }
  return undefined;
}

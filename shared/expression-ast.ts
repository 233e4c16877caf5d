// The compiled forms of expressions: plain data (objects, arrays, strings,
// numbers and item values), so that they travel through msgpack to the worker
// that evaluates them. Two stages:
//
//   parsed  (expression-parser.ts): what the text says, placeholders unresolved,
//           each node with its position (`at`, 1-based) for error messages. Cached
//           by expression text, so never mutated.
//   bound   (expression-bind.ts): `#name`s replaced by attribute names and
//           `:value`s by their values, statically checked. This is what a
//           slice op carries and what expression-eval.ts runs.
import type { NumberValue } from './decimal.js';
import type { Value } from './values.js';

// ---- parsed -----------------------------------------------------------------

/** A document path as written: attribute names, `#name` placeholders (strings
 * starting with '#') and list indexes (numbers). The first element is a name. */
export type ParsedPath = (string | number)[];

export type Comparator = '=' | '<>' | '<' | '<=' | '>' | '>=';

export type ParsedOperand =
  | { k: 'path'; path: ParsedPath; at: number }
  | { k: 'value'; name: string; at: number }
  /** A function call: `size` in conditions; `if_not_exists`, `list_append` in updates. */
  | { k: 'call'; fn: string; args: ParsedOperand[]; at: number }
  /** `+` or `-` in a SET action (at most one per action). */
  | { k: 'arith'; op: '+' | '-'; a: ParsedOperand; b: ParsedOperand; at: number };

export type ParsedCondition =
  | { k: 'cmp'; op: Comparator; a: ParsedOperand; b: ParsedOperand; at: number }
  | { k: 'between'; a: ParsedOperand; low: ParsedOperand; high: ParsedOperand; at: number }
  | { k: 'in'; a: ParsedOperand; list: ParsedOperand[]; at: number }
  | { k: 'and' | 'or'; a: ParsedCondition; b: ParsedCondition; at: number }
  | { k: 'not'; a: ParsedCondition; at: number }
  /** attribute_exists, attribute_not_exists, attribute_type, begins_with, contains. */
  | { k: 'fn'; fn: ConditionFunction; args: ParsedOperand[]; at: number };

export type ConditionFunction = 'attribute_exists' | 'attribute_not_exists' | 'attribute_type' | 'begins_with' | 'contains';

export type ParsedUpdateAction =
  | { k: 'set'; path: ParsedPath; value: ParsedOperand; at: number }
  | { k: 'remove'; path: ParsedPath; at: number }
  | { k: 'add' | 'delete'; path: ParsedPath; value: { name: string; at: number }; at: number };

export type ParsedUpdate = { actions: ParsedUpdateAction[] };
export type ParsedProjection = { paths: { path: ParsedPath; at: number }[] };

// ---- bound: what the worker evaluates ----------------------------------------

/** Attribute names and list indexes; the first element is a top-level attribute name. */
export type Path = (string | number)[];

export type Operand =
  | { k: 'path'; path: Path }
  | { k: 'value'; v: Value }
  | { k: 'size'; a: Operand };

/** DynamoDB's type names, all of which exist in keyslice's value model (sets: shared/values.ts). */
export type TypeName = 'S' | 'N' | 'B' | 'BOOL' | 'NULL' | 'L' | 'M' | 'SS' | 'NS' | 'BS';
export const TYPE_NAMES: readonly TypeName[] = ['S', 'N', 'B', 'BOOL', 'NULL', 'L', 'M', 'SS', 'NS', 'BS'];

export type Condition =
  | { k: 'cmp'; op: Comparator; a: Operand; b: Operand }
  | { k: 'between'; a: Operand; low: Operand; high: Operand }
  | { k: 'in'; a: Operand; list: Operand[] }
  | { k: 'and' | 'or'; a: Condition; b: Condition }
  | { k: 'not'; a: Condition }
  | { k: 'exists' | 'notExists'; path: Path }
  | { k: 'type'; a: Operand; type: TypeName }
  | { k: 'beginsWith' | 'contains'; a: Operand; b: Operand };

/** The right-hand side of a SET action. */
export type SetValue =
  | { k: 'path'; path: Path }
  | { k: 'value'; v: Value }
  | { k: '+' | '-'; a: SetValue; b: SetValue }
  | { k: 'ifNotExists'; path: Path; b: SetValue }
  | { k: 'listAppend'; a: SetValue; b: SetValue };

/** ADD of a number adds it; ADD of a set adds its elements (addSet); DELETE of a set
 * removes its elements (deleteSet), and the attribute when none is left. */
export type UpdateAction =
  | { k: 'set'; path: Path; value: SetValue }
  | { k: 'remove'; path: Path }
  | { k: 'add'; path: Path; n: NumberValue }
  | { k: 'addSet' | 'deleteSet'; path: Path; set: Value };

/** A path as text for messages: `a.b[2].c`. */
export function pathText(path: readonly (string | number)[]): string {
  let out = '';
  for (const seg of path) out += typeof seg === 'number' ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  return out;
}

/** The conditions a condition ANDs together, in order (`a AND (b AND c)` is [a, b, c]); a condition that is no AND is its own one. */
export function conjuncts(c: Condition): Condition[] {
  const out: Condition[] = [];
  const walk = (x: Condition): void => {
    if (x.k === 'and') {
      walk(x.a);
      walk(x.b);
    } else out.push(x);
  };
  walk(c);
  return out;
}

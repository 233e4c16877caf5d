// One parser for DynamoDB's expression grammar: conditions (also used for
// filters and key conditions), update expressions and projections. A
// hand-written recursive-descent parser over a small tokenizer: the grammar is
// tiny, errors name the position and the token, the recursion depth is bounded,
// and there is no generated code or dependency. Results are cached by text in a
// bounded LRU, so a repeated expression is parsed once; placeholders stay
// unresolved here (expression-bind.ts resolves them per request).
//
// Every failure is a KeysliceError with code ValidationError.
import type { ConditionFunction, ParsedCondition, ParsedOperand, ParsedPath, ParsedProjection, ParsedUpdate, ParsedUpdateAction } from './expression-ast.js';
import { KeysliceError } from './errors.js';
import {
  EXPRESSION_BYTES_MAX,
  EXPRESSION_CACHE_ENTRIES,
  EXPRESSION_IN_OPERANDS_MAX,
  EXPRESSION_NESTING_MAX,
  EXPRESSION_PATH_DEPTH_MAX,
  EXPRESSION_UPDATE_OPERATORS_MAX,
} from './limits.js';

export type ExpressionKind = 'condition' | 'update' | 'projection';

/** A syntax error: a ValidationError that also knows where (1-based character position). */
export class ExpressionSyntaxError extends KeysliceError {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super('ValidationError', message);
  }
}

// ---- public entry points ------------------------------------------------------

/** A condition (also a filter or a key condition). `field` names the request field in errors. */
export function parseCondition(text: unknown, field = 'condition'): ParsedCondition {
  return compile('condition', text, field) as ParsedCondition;
}

export function parseUpdate(text: unknown, field = 'update'): ParsedUpdate {
  return compile('update', text, field) as ParsedUpdate;
}

export function parseProjection(text: unknown, field = 'projection'): ParsedProjection {
  return compile('projection', text, field) as ParsedProjection;
}

type Parsed = ParsedCondition | ParsedUpdate | ParsedProjection;

/** Compiled expressions by kind and text, least recently used first. */
const cache = new Map<string, Parsed>();

function compile(kind: ExpressionKind, text: unknown, field: string): Parsed {
  if (typeof text !== 'string') throw new KeysliceError('ValidationError', `"${field}" must be an expression (a string)`);
  const bytes = Buffer.byteLength(text);
  if (bytes > EXPRESSION_BYTES_MAX) {
    throw new KeysliceError('ValidationError', `${field}: the expression is ${bytes} bytes; the limit is ${EXPRESSION_BYTES_MAX}`);
  }
  const key = kind + '\u0000' + text;
  const hit = cache.get(key);
  if (hit !== undefined) {
    cache.delete(key); // refresh: most recently used last
    cache.set(key, hit);
    return hit;
  }
  const p = new Parser(tokenize(text, field), field, kind === 'update' ? UPDATE_KEYWORDS : kind === 'condition' ? CONDITION_KEYWORDS : NO_KEYWORDS);
  const parsed = kind === 'condition' ? p.condition() : kind === 'update' ? p.update() : p.projection();
  cache.set(key, parsed);
  if (cache.size > EXPRESSION_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return parsed;
}

/** Entries in the compiled-expression cache (for tests and stats). */
export function expressionCacheSize(): number {
  return cache.size;
}

// ---- tokens -------------------------------------------------------------------

type TokenType = 'name' | 'hash' | 'colon' | 'number' | 'punct' | 'end';
interface Token {
  t: TokenType;
  s: string;
  /** 1-based character position of the token's first character. */
  at: number;
}

const PUNCT2 = new Set(['<>', '<=', '>=']);
const PUNCT1 = new Set(['(', ')', '[', ']', ',', '.', '=', '<', '>', '+', '-']);

function isWordChar(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}
function isWordStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function tokenize(text: string, field: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13) {
      i++;
      continue;
    }
    const at = i + 1;
    if (isWordStart(c)) {
      let j = i + 1;
      while (j < text.length && isWordChar(text.charCodeAt(j))) j++;
      out.push({ t: 'name', s: text.slice(i, j), at });
      i = j;
    } else if (c >= 48 && c <= 57) {
      let j = i + 1;
      while (j < text.length && text.charCodeAt(j) >= 48 && text.charCodeAt(j) <= 57) j++;
      out.push({ t: 'number', s: text.slice(i, j), at });
      i = j;
    } else if (c === 35 || c === 58) {
      // '#name' or ':value'
      let j = i + 1;
      while (j < text.length && isWordChar(text.charCodeAt(j))) j++;
      if (j === i + 1) {
        const what = c === 35 ? 'an attribute name placeholder (#name)' : 'a value placeholder (:value)';
        throw new ExpressionSyntaxError(at, `${field}: syntax error at position ${at}: "${text[i]}" must be followed by letters, digits or "_" to make ${what}`);
      }
      out.push({ t: c === 35 ? 'hash' : 'colon', s: text.slice(i, j), at });
      i = j;
    } else if (PUNCT2.has(text.slice(i, i + 2))) {
      out.push({ t: 'punct', s: text.slice(i, i + 2), at });
      i += 2;
    } else if (PUNCT1.has(text[i])) {
      out.push({ t: 'punct', s: text[i], at });
      i++;
    } else {
      const ch = String.fromCodePoint(text.codePointAt(i)!);
      throw new ExpressionSyntaxError(at, `${field}: syntax error at position ${at}: unexpected character ${JSON.stringify(ch)}`);
    }
  }
  out.push({ t: 'end', s: '', at: text.length + 1 });
  return out;
}

// ---- grammar ------------------------------------------------------------------

const CONDITION_KEYWORDS = new Set(['AND', 'OR', 'NOT', 'BETWEEN', 'IN']);
const UPDATE_KEYWORDS = new Set(['SET', 'REMOVE', 'ADD', 'DELETE']);
const NO_KEYWORDS = new Set<string>();
const COMPARATORS = new Set(['=', '<>', '<', '<=', '>', '>=']);

/** Function names are case-sensitive, as in DynamoDB; each takes a fixed number of operands. */
const CONDITION_FUNCTIONS: Record<ConditionFunction, number> = {
  attribute_exists: 1,
  attribute_not_exists: 1,
  attribute_type: 2,
  begins_with: 2,
  contains: 2,
};
const OPERAND_FUNCTIONS: Record<string, number> = { size: 1 };
const UPDATE_FUNCTIONS: Record<string, number> = { if_not_exists: 2, list_append: 2 };
/** Functions whose first operand must be a document path. */
const PATH_FIRST = new Set(['attribute_exists', 'attribute_not_exists', 'if_not_exists']);

const EXPECT_OPERAND = 'an operand (an attribute path, a :value or size(path))';
const EXPECT_COMPARISON = 'a comparator (= <> < <= > >=), BETWEEN or IN';

class Parser {
  private i = 0;
  private depth = 0;
  private operators = 0;

  constructor(
    private readonly toks: Token[],
    private readonly field: string,
    private readonly keywords: ReadonlySet<string>,
  ) {}

  // ---- conditions ----

  condition(): ParsedCondition {
    const c = this.or();
    this.expectEnd('AND, OR or the end of the expression');
    return c;
  }

  private or(): ParsedCondition {
    let left = this.and();
    while (this.isKeyword(this.peek(), 'OR')) {
      const at = this.next().at;
      left = { k: 'or', a: left, b: this.and(), at };
    }
    return left;
  }

  private and(): ParsedCondition {
    let left = this.not();
    while (this.isKeyword(this.peek(), 'AND')) {
      const at = this.next().at;
      left = { k: 'and', a: left, b: this.not(), at };
    }
    return left;
  }

  private not(): ParsedCondition {
    const tok = this.peek();
    if (!this.isKeyword(tok, 'NOT')) return this.primary();
    this.next();
    this.enter(tok);
    const a = this.not();
    this.depth--;
    return { k: 'not', a, at: tok.at };
  }

  /** A comparison, a function, or a parenthesized condition. A '(' may also open
   * a parenthesized operand (`(a) = :v`): try that first, then the condition. */
  private primary(): ParsedCondition {
    const tok = this.peek();
    if (this.isPunct(tok, '(')) {
      const [start, depth] = [this.i, this.depth];
      let operandError: ExpressionSyntaxError | null = null;
      try {
        const operand = this.operand();
        if (this.startsComparison()) return this.comparison(operand);
      } catch (err) {
        if (!(err instanceof ExpressionSyntaxError)) throw err;
        operandError = err;
      }
      [this.i, this.depth] = [start, depth];
      try {
        this.next();
        this.enter(tok);
        const c = this.or();
        this.expectPunct(')', '")"');
        this.depth--;
        return c;
      } catch (err) {
        // Report whichever reading got further: that is where the text goes wrong.
        if (err instanceof ExpressionSyntaxError && operandError !== null && operandError.at > err.at) throw operandError;
        throw err;
      }
    }
    if (tok.t === 'name' && this.isPunct(this.peek(1), '(')) {
      if (Object.hasOwn(CONDITION_FUNCTIONS, tok.s)) {
        const call = this.call(CONDITION_FUNCTIONS, () => this.operand());
        return { k: 'fn', fn: call.fn as ConditionFunction, args: call.args, at: call.at };
      }
      if (!Object.hasOwn(OPERAND_FUNCTIONS, tok.s)) this.unknownFunction(tok);
    }
    return this.comparison(this.operand());
  }

  private startsComparison(): boolean {
    const tok = this.peek();
    return (tok.t === 'punct' && COMPARATORS.has(tok.s)) || this.isKeyword(tok, 'BETWEEN') || this.isKeyword(tok, 'IN');
  }

  private comparison(a: ParsedOperand): ParsedCondition {
    const tok = this.peek();
    if (tok.t === 'punct' && COMPARATORS.has(tok.s)) {
      this.next();
      return { k: 'cmp', op: tok.s as '=', a, b: this.operand(), at: tok.at };
    }
    if (this.isKeyword(tok, 'BETWEEN')) {
      this.next();
      const low = this.operand();
      if (!this.isKeyword(this.peek(), 'AND')) this.syntaxError(this.peek(), 'AND (BETWEEN low AND high)');
      this.next();
      return { k: 'between', a, low, high: this.operand(), at: tok.at };
    }
    if (this.isKeyword(tok, 'IN')) {
      this.next();
      this.expectPunct('(', '"(" after IN');
      const list = [this.operand()];
      while (this.isPunct(this.peek(), ',')) {
        this.next();
        list.push(this.operand());
        if (list.length > EXPRESSION_IN_OPERANDS_MAX) {
          throw new ExpressionSyntaxError(tok.at, `${this.field}: IN at position ${tok.at} takes at most ${EXPRESSION_IN_OPERANDS_MAX} operands`);
        }
      }
      this.expectPunct(')', '"," or ")"');
      return { k: 'in', a, list, at: tok.at };
    }
    return this.syntaxError(tok, EXPECT_COMPARISON);
  }

  /** A path, a :value, size(path), or one of these in parentheses. */
  private operand(): ParsedOperand {
    const tok = this.peek();
    if (this.isPunct(tok, '(')) {
      this.next();
      this.enter(tok);
      const o = this.operand();
      this.expectPunct(')', '")"');
      this.depth--;
      return o;
    }
    if (tok.t === 'colon') {
      this.next();
      return { k: 'value', name: tok.s, at: tok.at };
    }
    if (tok.t === 'name' && this.isPunct(this.peek(1), '(')) {
      if (Object.hasOwn(OPERAND_FUNCTIONS, tok.s)) return this.call(OPERAND_FUNCTIONS, () => this.operand());
      if (Object.hasOwn(CONDITION_FUNCTIONS, tok.s)) {
        throw new ExpressionSyntaxError(tok.at, `${this.field}: ${tok.s} at position ${tok.at} is a condition, not an operand; only size() can be compared`);
      }
      this.unknownFunction(tok);
    }
    if (tok.t === 'name' || tok.t === 'hash') return { k: 'path', path: this.path(), at: tok.at };
    return this.syntaxError(tok, EXPECT_OPERAND);
  }

  // ---- update expressions ----

  update(): ParsedUpdate {
    const actions: ParsedUpdateAction[] = [];
    const clauses = new Set<string>();
    do {
      const tok = this.peek();
      const clause = tok.t === 'name' ? tok.s.toUpperCase() : '';
      if (!UPDATE_KEYWORDS.has(clause)) this.syntaxError(tok, 'SET, REMOVE, ADD or DELETE');
      if (clauses.has(clause)) {
        throw new ExpressionSyntaxError(
          tok.at,
          `${this.field}: the ${clause} clause appears a second time at position ${tok.at}; put all its actions after one ${clause}, separated by commas`,
        );
      }
      clauses.add(clause);
      this.next();
      do {
        actions.push(this.updateAction(clause));
        this.countOperator(tok);
      } while (this.isPunct(this.peek(), ',') && this.next());
    } while (this.peek().t !== 'end');
    return { actions };
  }

  private updateAction(clause: string): ParsedUpdateAction {
    const at = this.peek().at;
    const path = this.path();
    switch (clause) {
      case 'SET': {
        this.expectPunct('=', '"=" (SET path = value)');
        return { k: 'set', path, value: this.setValue(), at };
      }
      case 'REMOVE':
        return { k: 'remove', path, at };
      default: {
        const tok = this.peek();
        if (tok.t !== 'colon') this.syntaxError(tok, `a :value (${clause} path :value)`);
        this.next();
        return { k: clause === 'ADD' ? 'add' : 'delete', path, value: { name: tok.s, at: tok.at }, at };
      }
    }
  }

  /** operand, or operand + operand, or operand - operand: one + or - at most. */
  private setValue(): ParsedOperand {
    const a = this.setTerm();
    const tok = this.peek();
    if (!this.isPunct(tok, '+') && !this.isPunct(tok, '-')) return a;
    this.next();
    this.countOperator(tok);
    const b = this.setTerm();
    const again = this.peek();
    if (a.k === 'arith' || b.k === 'arith' || this.isPunct(again, '+') || this.isPunct(again, '-')) {
      const at = a.k === 'arith' || b.k === 'arith' ? tok.at : again.at;
      throw new ExpressionSyntaxError(at, `${this.field}: a SET action takes one + or - at most (position ${at})`);
    }
    return { k: 'arith', op: tok.s as '+', a, b, at: tok.at };
  }

  private setTerm(): ParsedOperand {
    const tok = this.peek();
    if (this.isPunct(tok, '(')) {
      this.next();
      this.enter(tok);
      const v = this.setValue();
      this.expectPunct(')', '")"');
      this.depth--;
      return v;
    }
    if (tok.t === 'colon') {
      this.next();
      return { k: 'value', name: tok.s, at: tok.at };
    }
    if (tok.t === 'name' && this.isPunct(this.peek(1), '(')) {
      if (!Object.hasOwn(UPDATE_FUNCTIONS, tok.s)) this.unknownFunction(tok);
      this.countOperator(tok);
      this.enter(tok);
      const call = this.call(UPDATE_FUNCTIONS, () => {
        const arg = this.setTerm();
        const after = this.peek();
        const at = arg.k === 'arith' ? arg.at : this.isPunct(after, '+') || this.isPunct(after, '-') ? after.at : 0;
        if (at > 0) throw new ExpressionSyntaxError(at, `${this.field}: + and - cannot be used inside the operands of ${tok.s} (position ${at})`);
        return arg;
      });
      this.depth--;
      return call;
    }
    if (tok.t === 'name' || tok.t === 'hash') return { k: 'path', path: this.path(), at: tok.at };
    return this.syntaxError(tok, 'a value (an attribute path, a :value, if_not_exists(...) or list_append(...))');
  }

  private countOperator(tok: Token): void {
    if (++this.operators > EXPRESSION_UPDATE_OPERATORS_MAX) {
      throw new ExpressionSyntaxError(tok.at, `${this.field}: more than ${EXPRESSION_UPDATE_OPERATORS_MAX} actions, operators and functions (at position ${tok.at})`);
    }
  }

  // ---- projections ----

  projection(): ParsedProjection {
    const paths = [{ at: this.peek().at, path: this.path() }];
    while (this.isPunct(this.peek(), ',')) {
      this.next();
      paths.push({ at: this.peek().at, path: this.path() });
    }
    this.expectEnd('"," or the end of the expression');
    return { paths };
  }

  // ---- shared pieces ----

  /** name(args): the name is known to be in `table`; checks the operand count and path-first rules. */
  private call(table: Record<string, number>, arg: () => ParsedOperand): ParsedOperand & { k: 'call' } {
    const name = this.next();
    this.next(); // '('
    const args = [arg()];
    while (this.isPunct(this.peek(), ',')) {
      this.next();
      args.push(arg());
    }
    this.expectPunct(')', '"," or ")"');
    const want = table[name.s];
    if (args.length !== want) {
      throw new ExpressionSyntaxError(name.at, `${this.field}: ${name.s} at position ${name.at} takes ${want} operand${want === 1 ? '' : 's'}, got ${args.length}`);
    }
    if (PATH_FIRST.has(name.s) && args[0].k !== 'path') {
      throw new ExpressionSyntaxError(args[0].at, `${this.field}: the first operand of ${name.s} (position ${args[0].at}) must be an attribute path`);
    }
    return { k: 'call', fn: name.s, args, at: name.at };
  }

  /** A document path: name or #name, then `.name`, `.#name` or `[index]`, 32 levels at most. */
  private path(): ParsedPath {
    const path: ParsedPath = [this.pathName()];
    for (;;) {
      const tok = this.peek();
      if (this.isPunct(tok, '.')) {
        this.next();
        path.push(this.pathName());
      } else if (this.isPunct(tok, '[')) {
        this.next();
        const n = this.peek();
        if (n.t !== 'number') this.syntaxError(n, 'a list index (digits)');
        const index = Number(n.s);
        if (!Number.isSafeInteger(index)) throw new ExpressionSyntaxError(n.at, `${this.field}: list index ${n.s} at position ${n.at} is too large`);
        this.next();
        this.expectPunct(']', '"]"');
        path.push(index);
      } else break;
      if (path.length > EXPRESSION_PATH_DEPTH_MAX) {
        throw new ExpressionSyntaxError(tok.at, `${this.field}: a document path is at most ${EXPRESSION_PATH_DEPTH_MAX} levels deep (position ${tok.at})`);
      }
    }
    return path;
  }

  private pathName(): string {
    const tok = this.peek();
    if (tok.t === 'hash' || (tok.t === 'name' && !this.keywords.has(tok.s.toUpperCase()))) {
      this.next();
      return tok.s;
    }
    if (tok.t === 'name') {
      throw new ExpressionSyntaxError(tok.at, `${this.field}: syntax error at position ${tok.at}: "${tok.s}" is a keyword here; write it as a #name placeholder to use it as an attribute name`);
    }
    return this.syntaxError(tok, 'an attribute name or a #name placeholder');
  }

  private unknownFunction(tok: Token): never {
    throw new ExpressionSyntaxError(tok.at, `${this.field}: unknown function "${tok.s}" at position ${tok.at} (function names are case-sensitive)`);
  }

  private enter(tok: Token): void {
    if (++this.depth > EXPRESSION_NESTING_MAX) {
      throw new ExpressionSyntaxError(tok.at, `${this.field}: nested more than ${EXPRESSION_NESTING_MAX} levels deep at position ${tok.at}`);
    }
  }

  private peek(ahead = 0): Token {
    return this.toks[Math.min(this.i + ahead, this.toks.length - 1)];
  }

  private next(): Token {
    const tok = this.toks[this.i];
    if (this.i < this.toks.length - 1) this.i++;
    return tok;
  }

  private isPunct(tok: Token, s: string): boolean {
    return tok.t === 'punct' && tok.s === s;
  }

  private isKeyword(tok: Token, kw: string): boolean {
    return tok.t === 'name' && tok.s.length === kw.length && tok.s.toUpperCase() === kw && this.keywords.has(kw);
  }

  private expectPunct(s: string, what: string): void {
    if (!this.isPunct(this.peek(), s)) this.syntaxError(this.peek(), what);
    this.next();
  }

  private expectEnd(what: string): void {
    if (this.peek().t !== 'end') this.syntaxError(this.peek(), what);
  }

  private syntaxError(tok: Token, expected: string): never {
    const found = tok.t === 'end' ? 'end of the expression' : `token "${tok.s}"`;
    throw new ExpressionSyntaxError(tok.at, `${this.field}: syntax error at position ${tok.at}: unexpected ${found}; expected ${expected}`);
  }
}

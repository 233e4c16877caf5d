// Decimal numbers as DynamoDB keeps them: up to 38 significant digits, magnitude
// from 1E-130 to below 1E+126, beside the 64-bit doubles that most numbers are.
//
// A number has exactly one native form. If a double holds it (the double's
// shortest text, String(x), is that very decimal: 0.1, 2^53, 1e21), it is a JS
// number, as it always was, and the fast paths stay as they were. Otherwise it
// is a tagged value, a map of the one key "$N" holding the decimal's canonical
// text: {"$N": "9007199254740993"}. Plain data, like the sets, so it travels
// through msgpack, the write-ahead log, snapshots and JSON unchanged. Because
// the form is unique, two equal numbers are equal values (structural equality
// holds), and a decimal is never equal to a double.
//
// A double x stands for the decimal its shortest text shows, everywhere:
// 0.1 is the decimal 0.1, not 0.1000000000000000055511151231257827 (the
// double's binary value), so comparisons, sums and keys agree with what people
// and DynamoDB read.

import {
  DYNAMODB_NUMBER_DIGITS_MAX as DECIMAL_DIGITS_MAX,
  DYNAMODB_NUMBER_EXPONENT_MAX as DECIMAL_EXPONENT_MAX,
  DYNAMODB_NUMBER_EXPONENT_MIN as DECIMAL_EXPONENT_MIN,
} from './limits.js';

export { DECIMAL_EXPONENT_MAX, DECIMAL_EXPONENT_MIN };

export const DECIMAL_TAG = '$N';
/** A number that no double holds exactly, as its canonical text (`decimalText`). */
export type DecimalValue = { $N: string };
export type NumberValue = number | DecimalValue;

/** DynamoDB's messages for a number out of its limits, on the wire and in arithmetic alike. */
export const NUMBER_DIGITS_MESSAGE = `Attempting to store more than ${DECIMAL_DIGITS_MAX} significant digits in a Number`;
export const NUMBER_OVERFLOW_MESSAGE = 'Number overflow. Attempting to store a number with magnitude larger than supported range';
export const NUMBER_UNDERFLOW_MESSAGE = 'Number underflow. Attempting to store a number with magnitude smaller than supported range';
export const NUMBER_LIMIT_MESSAGES: readonly string[] = [NUMBER_DIGITS_MESSAGE, NUMBER_OVERFLOW_MESSAGE, NUMBER_UNDERFLOW_MESSAGE];

/** A decimal as sign, significant digits (no leading or trailing zeros; '' for zero, which
 * is never negative) and the exponent of the point: value = ±0.<digits> x 10^point. */
export interface Decimal {
  negative: boolean;
  digits: string;
  point: number;
}

const ZERO: Decimal = { negative: false, digits: '', point: 0 };
const NUMBER_TEXT = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;
/** Past this many exponent digits a number is out of every range; keeps the arithmetic exact. */
const EXPONENT_DIGITS_MAX = 9;

/** A decimal from text (an optional sign, digits with an optional point, an optional exponent), or null. */
export function parseDecimal(text: string): Decimal | null {
  const m = NUMBER_TEXT.exec(text);
  if (m === null) return null;
  const [, sign, intPart, fracPart = '', expPart] = m;
  if (intPart === '' && fracPart === '') return null;
  const zero = /^0*$/.test(intPart + fracPart);
  if (expPart !== undefined && expPart.replace(/^[+-]/, '').length > EXPONENT_DIGITS_MAX) {
    return zero ? ZERO : { negative: sign === '-', digits: '1', point: expPart.startsWith('-') ? -1e9 : 1e9 };
  }
  if (zero) return ZERO;
  let digits = intPart + fracPart;
  let point = intPart.length + (expPart === undefined ? 0 : Number(expPart));
  const lead = digits.length - digits.replace(/^0+/, '').length;
  digits = digits.slice(lead).replace(/0+$/, '');
  point -= lead;
  return { negative: sign === '-', digits, point };
}

/** The decimal a double stands for: the one its shortest text shows. */
export function decimalOfNumber(x: number): Decimal {
  return parseDecimal(String(x))!;
}

export function decimalOf(v: NumberValue): Decimal {
  return typeof v === 'number' ? decimalOfNumber(v) : parseDecimal(v.$N)!;
}

/** DynamoDB's canonical text: plain notation (no exponent), no leading zeros, no trailing
 * zeros after the point, no point for a whole number, "0" for zero. */
export function decimalText(d: Decimal): string {
  if (d.digits === '') return '0';
  const sign = d.negative ? '-' : '';
  if (d.point <= 0) return `${sign}0.${'0'.repeat(-d.point)}${d.digits}`;
  if (d.point >= d.digits.length) return sign + d.digits + '0'.repeat(d.point - d.digits.length);
  return `${sign}${d.digits.slice(0, d.point)}.${d.digits.slice(d.point)}`;
}

/** The canonical text of a number value (a double in plain notation: 1e21 is "1000000000000000000000"). */
export function numberText(v: NumberValue): string {
  if (typeof v !== 'number') return v.$N;
  return Number.isSafeInteger(v) ? String(v) : decimalText(decimalOfNumber(v)); // String(-0) is "0"
}

function equalDecimals(a: Decimal, b: Decimal): boolean {
  return a.negative === b.negative && a.digits === b.digits && a.point === b.point;
}

/** The double nearest to d (may be ±Infinity or ±0 far out of range). */
function nearestDouble(d: Decimal): number {
  return d.digits === '' ? 0 : Number(`${d.negative ? '-' : ''}0.${d.digits}e${d.point}`);
}

/** The one native form of d: the double that holds it, else {"$N": its canonical text}. */
export function numberValueOf(d: Decimal): NumberValue {
  const x = nearestDouble(d);
  if (Number.isFinite(x) && equalDecimals(decimalOfNumber(x), d)) return x;
  return { $N: decimalText(d) };
}

/** DynamoDB's message for a decimal out of its limits, or null within them. DynamoDB checks
 * the digits of a number it is sent first, and the range of a sum first (9.99..E+125 + 1E+125
 * is an overflow, though it has 39 digits too): `rangeFirst` for sums. */
export function decimalLimitError(d: Decimal, rangeFirst = false): string | null {
  if (d.digits === '') return null;
  const digits = d.digits.length > DECIMAL_DIGITS_MAX ? NUMBER_DIGITS_MESSAGE : null;
  const range = d.point - 1 > DECIMAL_EXPONENT_MAX ? NUMBER_OVERFLOW_MESSAGE : d.point - 1 < DECIMAL_EXPONENT_MIN ? NUMBER_UNDERFLOW_MESSAGE : null;
  return rangeFirst ? (range ?? digits) : (digits ?? range);
}

/** A map of the one key "$N" holding a string: the shape of a decimal (not yet checked to be canonical). */
export function isDecimal(v: unknown): v is DecimalValue {
  if (typeof v !== 'object' || v === null || typeof (v as { $N?: unknown }).$N !== 'string') return false;
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  let keys = 0;
  for (const k in v) if (++keys > 1 || k !== DECIMAL_TAG) return false;
  return keys === 1;
}

/** Why `v` ({"$N": text}) is not a valid decimal value, or null: its text must be canonical,
 * within DynamoDB's limits, and not a number a double holds (that one is a plain number). */
export function decimalValueProblem(v: DecimalValue): string | null {
  const d = parseDecimal(v.$N);
  if (d === null) return `"${v.$N.slice(0, 60)}" is not a decimal number`;
  const limit = decimalLimitError(d);
  if (limit !== null) return limit;
  const canonical = numberValueOf(d);
  if (typeof canonical === 'number') return `${v.$N} is held exactly by a double: write it as the plain number ${String(canonical)}`;
  if (canonical.$N !== v.$N) return `"${v.$N}" is not in canonical form (write "${canonical.$N}")`;
  return null;
}

/** A number value or a valid decimal value. */
export function isNumberValue(v: unknown): v is NumberValue {
  return typeof v === 'number' ? Number.isFinite(v) : isDecimal(v) && decimalValueProblem(v) === null;
}

/** Order of two decimals: negative, zero or positive. */
export function compareDecimals(a: Decimal, b: Decimal): number {
  const sa = a.digits === '' ? 0 : a.negative ? -1 : 1;
  const sb = b.digits === '' ? 0 : b.negative ? -1 : 1;
  if (sa !== sb || sa === 0) return sa - sb;
  let m: number;
  if (a.point !== b.point) m = a.point < b.point ? -1 : 1;
  else m = a.digits < b.digits ? -1 : a.digits > b.digits ? 1 : 0; // 0.<digits>: a prefix is smaller
  return sa * m;
}

/** Numeric order of two numbers, doubles by their shortest text. */
export function compareNumbers(a: NumberValue, b: NumberValue): number {
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  return compareDecimals(decimalOf(a), decimalOf(b));
}

/** mantissa x 10^exponent, exactly. */
function scaled(d: Decimal): [bigint, number] {
  if (d.digits === '') return [0n, 0];
  const m = BigInt(d.digits);
  return [d.negative ? -m : m, d.point - d.digits.length];
}

function fromScaled(m: bigint, e: number): Decimal {
  if (m === 0n) return ZERO;
  const negative = m < 0n;
  const text = (negative ? -m : m).toString();
  const digits = text.replace(/0+$/, '');
  return { negative, digits, point: text.length + e };
}

/** a + b, exactly. */
export function addDecimals(a: Decimal, b: Decimal): Decimal {
  const [ma, ea] = scaled(a);
  const [mb, eb] = scaled(b);
  const e = Math.min(ea, eb);
  return fromScaled(ma * 10n ** BigInt(ea - e) + mb * 10n ** BigInt(eb - e), e);
}

export function negateDecimal(d: Decimal): Decimal {
  return d.digits === '' ? d : { ...d, negative: !d.negative };
}

/** The largest double whose decimal (shortest text) is below d, for a d that no double holds
 * (so the decimal lies strictly between that double and the next one up). */
export function doubleBelow(d: Decimal): number {
  const x = nearestDouble(d);
  assertFinite(x, d);
  return compareDecimals(decimalOfNumber(x), d) < 0 ? x : nextDown(x);
}

function assertFinite(x: number, d: Decimal): void {
  if (!Number.isFinite(x)) throw new Error(`invariant broken: the decimal ${decimalText(d).slice(0, 40)}... is beyond every double`);
}

const f64 = new Float64Array(1);
const u64 = new BigUint64Array(f64.buffer);

/** The next double toward -Infinity. */
export function nextDown(x: number): number {
  if (x === 0) return -Number.MIN_VALUE;
  f64[0] = x;
  u64[0] = x > 0 ? u64[0] - 1n : u64[0] + 1n;
  return f64[0];
}

/** A number from its decimal text, in its one native form: `decimal("0.1")` is 0.1,
 * `decimal("9007199254740993")` is {"$N": "9007199254740993"}. For clients, which send
 * numbers no double holds this way. Throws on text that is not a number or is beyond
 * DynamoDB's limits. */
export function decimal(text: string): NumberValue {
  const d = parseDecimal(text);
  if (d === null) throw new RangeError(`not a decimal number: ${JSON.stringify(text.slice(0, 60))}`);
  const problem = decimalLimitError(d);
  if (problem !== null) throw new RangeError(problem);
  return numberValueOf(d);
}

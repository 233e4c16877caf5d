// DynamoDB numbers (the N type) against keyslice's numbers (64-bit doubles).
//
// DynamoDB sends numbers as decimal text with up to 38 significant digits and
// a magnitude from 1E-130 to 9.99...E+125. keyslice stores a double, so a
// number is accepted only when the double reads back as the very number that
// was sent (after DynamoDB's own normalization: "1.50" and "1.5" are one
// number). "0.1" passes (its shortest double text is "0.1"); "9007199254740993"
// does not (it would read back as ...992): it is refused, never rounded.
import { DYNAMODB_NUMBER_DIGITS_MAX, DYNAMODB_NUMBER_EXPONENT_MAX, DYNAMODB_NUMBER_EXPONENT_MIN } from '../../shared/limits.js';
import { DynamoDbError } from './errors.js';

/** A decimal as sign, significant digits (no leading or trailing zeros; '' for zero) and the
 * exponent of the first digit: value = 0.<digits> x 10^(point). */
interface Decimal {
  negative: boolean;
  digits: string;
  point: number;
}

const NUMBER_TEXT = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;


function parseDecimal(text: string): Decimal | null {
  const m = NUMBER_TEXT.exec(text);
  if (m === null) return null;
  const [, sign, intPart, fracPart = '', expPart] = m;
  if (intPart === '' && fracPart === '') return null;
  if (expPart !== undefined && expPart.replace(/^[+-]/, '').length > 9) {
    // An exponent this long is out of range whatever the digits; keep the arithmetic below exact.
    const zero = /^0*$/.test(intPart + fracPart);
    return zero ? { negative: false, digits: '', point: 0 } : { negative: sign === '-', digits: '1', point: expPart.startsWith('-') ? -1e9 : 1e9 };
  }
  let digits = intPart + fracPart;
  let point = intPart.length + (expPart === undefined ? 0 : Number(expPart));
  const lead = digits.length - digits.replace(/^0+/, '').length;
  digits = digits.slice(lead).replace(/0+$/, '');
  point -= lead;
  if (digits === '') return { negative: false, digits: '', point: 0 };
  return { negative: sign === '-', digits, point };
}

/** A number from DynamoDB's wire text, or a DynamoDbError: malformed, out of DynamoDB's
 * range or precision, or not exactly representable as a double. */
export function parseNumber(text: string): number {
  const d = parseDecimal(text);
  if (d === null) throw DynamoDbError.validation('A value provided cannot be converted into a number');
  if (d.digits === '') return 0;
  if (d.digits.length > DYNAMODB_NUMBER_DIGITS_MAX) throw DynamoDbError.validation(`Attempting to store more than ${DYNAMODB_NUMBER_DIGITS_MAX} significant digits in a Number`);
  const exponent = d.point - 1;
  if (exponent > DYNAMODB_NUMBER_EXPONENT_MAX) throw DynamoDbError.validation('Number overflow. Attempting to store a number with magnitude larger than supported range');
  if (exponent < DYNAMODB_NUMBER_EXPONENT_MIN) throw DynamoDbError.validation('Number underflow. Attempting to store a number with magnitude smaller than supported range');
  const value = Number(`${d.negative ? '-' : ''}0.${d.digits}e${d.point}`);
  const back = parseDecimal(String(value))!;
  if (back.digits !== d.digits || back.point !== d.point || back.negative !== d.negative) {
    throw DynamoDbError.validation(
      `keyslice stores numbers as 64-bit floating point, and the number ${text} cannot be stored exactly (it would read back as ${formatNumber(value)}); ` +
        'use at most 15 to 17 significant digits, or store the value as a string (S)',
    );
  }
  return value;
}

/** DynamoDB's text for a stored number: plain decimal notation, no exponent, no
 * trailing zeros (the shortest text that reads back as the same double). */
export function formatNumber(value: number): string {
  const d = parseDecimal(String(value));
  if (d === null || d.digits === '') return '0';
  const sign = d.negative ? '-' : '';
  if (d.point <= 0) return `${sign}0.${'0'.repeat(-d.point)}${d.digits}`;
  if (d.point >= d.digits.length) return sign + d.digits + '0'.repeat(d.point - d.digits.length);
  return `${sign}${d.digits.slice(0, d.point)}.${d.digits.slice(d.point)}`;
}

/** Significant digits of a stored number, for DynamoDB's size rule (1 byte per two digits, plus 1). */
export function significantDigits(value: number): number {
  return parseDecimal(String(value))?.digits.length ?? 0;
}

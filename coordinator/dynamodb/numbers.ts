// DynamoDB numbers (the N type) against keyslice's numbers.
//
// DynamoDB sends numbers as decimal text with up to 38 significant digits and
// a magnitude from 1E-130 to 9.99...E+125. Every such number is kept exactly:
// one that a double holds (its shortest text is the number: "0.1", "1.50",
// "1e21") becomes that double; any other becomes a decimal value,
// {"$N": "<canonical text>"} (shared/decimal.ts), so "9007199254740993" and
// 38-digit numbers read back digit for digit. Out going, a number is written as
// DynamoDB writes it: plain notation, no exponent, no leading or trailing zeros.
import { decimalLimitError, decimalOf, numberText, numberValueOf, parseDecimal, type NumberValue } from '../../shared/decimal.js';
import { DynamoDbError } from './errors.js';

const SMALL_INTEGER = /^-?(?:0|[1-9]\d{0,14})$/;

/** A number from DynamoDB's wire text, or a DynamoDbError: malformed, or beyond DynamoDB's
 * precision or range (with DynamoDB's messages). */
export function parseNumber(text: string): NumberValue {
  // The common case, a whole number of up to 15 digits, is a double as it is written.
  if (SMALL_INTEGER.test(text)) return Number(text) || 0; // || 0: "-0" is 0
  const d = parseDecimal(text);
  if (d === null) throw DynamoDbError.validation('A value provided cannot be converted into a number');
  const problem = decimalLimitError(d);
  if (problem !== null) throw DynamoDbError.validation(problem);
  return numberValueOf(d);
}

/** DynamoDB's text for a stored number: plain decimal notation, no exponent, no trailing zeros. */
export function formatNumber(value: NumberValue): string {
  return numberText(value);
}

/** Significant digits of a stored number, for DynamoDB's size rule (1 byte per two digits, plus 1). */
export function significantDigits(value: NumberValue): number {
  return decimalOf(value).digits.length;
}

// Sums of numbers as people (and DynamoDB) read them: a double is the decimal
// its shortest text shows ("0.1", not 0.1000000000000000055...), a tagged
// decimal ({"$N": "..."}, shared/decimal.ts) is its text, and the sum of two is
// computed exactly in decimal. So 0.1 + 0.2 is 0.3, as in DynamoDB, where
// binary floating point gives 0.30000000000000004, and 2^53 + 1 is
// {"$N": "9007199254740993"}, not rounded. The result must fit DynamoDB's
// limits (38 significant digits, magnitude 1E-130 to below 1E+126), else it is
// refused with DynamoDB's message. Only a double outside DynamoDB's range
// (the native API accepts any finite double, 1e300 say) adds as before: the
// exact sum rounded once to the nearest double.
import { KeysliceError } from './errors.js';
import { addDecimals, decimalLimitError, decimalOf, decimalText, negateDecimal, numberValueOf, type NumberValue } from './decimal.js';

/** Doubles within DynamoDB's range: zero, or a magnitude from 1E-130 to below 1E+126. */
function inDynamoDbRange(v: NumberValue): boolean {
  if (typeof v !== 'number') return true; // a decimal value is checked against the limits when it is made
  const m = Math.abs(v);
  return m === 0 || (m >= 1e-130 && m < 1e126);
}

/** a + b (or a - b), exact; throws ValidationError with DynamoDB's message when the
 * result is beyond its limits. A result beyond every double (only from doubles out of
 * DynamoDB's range) is ±Infinity, for the caller to refuse. */
export function decimalSum(a: NumberValue, b: NumberValue, subtract = false): NumberValue {
  if (typeof a === 'number' && typeof b === 'number') {
    const sum = subtract ? a - b : a + b;
    // Whole numbers whose sum a double holds exactly need no decimal arithmetic.
    if (Number.isSafeInteger(a) && Number.isSafeInteger(b) && Number.isSafeInteger(sum)) return sum;
  }
  const db = decimalOf(b);
  const exact = addDecimals(decimalOf(a), subtract ? negateDecimal(db) : db);
  if (!inDynamoDbRange(a) || !inDynamoDbRange(b)) return Number(decimalText(exact));
  const problem = decimalLimitError(exact, true);
  if (problem !== null) throw new KeysliceError('ValidationError', problem);
  return numberValueOf(exact);
}

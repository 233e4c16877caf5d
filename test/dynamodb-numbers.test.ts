// DynamoDB numbers on keyslice's doubles (coordinator/dynamodb/numbers.ts):
// what is accepted reads back as the same number, what is not is refused, and
// DynamoDB's own limits (38 digits, 1E-130 .. 9.99..E+125) hold. Checked
// against vectors and, for random doubles, against the round trip itself.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DynamoDbError } from '../coordinator/dynamodb/errors.js';
import { formatNumber, parseNumber, significantDigits } from '../coordinator/dynamodb/numbers.js';
import { valueSize } from '../coordinator/dynamodb/attribute-values.js';
import { decimalSum } from '../shared/decimal-sum.js';

function refusal(text: string): string {
  try {
    parseNumber(text);
  } catch (err) {
    expect(err).toBeInstanceOf(DynamoDbError);
    return (err as DynamoDbError).message;
  }
  throw new Error(`${text} was accepted`);
}

describe('DynamoDB numbers', () => {
  it('accepts every form DynamoDB accepts and normalizes as DynamoDB does', () => {
    const vectors: [string, string][] = [
      ['0', '0'],
      ['-0', '0'],
      ['0.000', '0'],
      ['1.50', '1.5'],
      ['+7', '7'],
      ['.5', '0.5'],
      ['5.', '5'],
      ['1e3', '1000'],
      ['1E+21', '1000000000000000000000'],
      ['-2.5e-3', '-0.0025'],
      ['0.1', '0.1'],
      ['123456789012345', '123456789012345'],
      ['9007199254740991', '9007199254740991'],
      ['-9007199254740992', '-9007199254740992'],
      ['1E-130', '0.' + '0'.repeat(129) + '1'],
      ['9.99E+125', '999' + '0'.repeat(123)],
      ['00012.3400', '12.34'],
    ];
    for (const [text, back] of vectors) expect(formatNumber(parseNumber(text)), text).toBe(back);
  });

  it('refuses what DynamoDB refuses, with its messages', () => {
    for (const bad of ['', '-', '.', 'abc', '1e', '1.2.3', '0x10', 'NaN', 'Infinity', '1 ', ' 1', '1,5']) {
      expect(refusal(bad), JSON.stringify(bad)).toBe('A value provided cannot be converted into a number');
    }
    expect(refusal('1' + '0'.repeat(37) + '1')).toBe('Attempting to store more than 38 significant digits in a Number');
    expect(refusal('1E+126')).toBe('Number overflow. Attempting to store a number with magnitude larger than supported range');
    expect(refusal('-1E+126')).toBe('Number overflow. Attempting to store a number with magnitude larger than supported range');
    expect(refusal('9.9E-131')).toBe('Number underflow. Attempting to store a number with magnitude smaller than supported range');
    expect(refusal('1e999999999999')).toMatch(/^Number overflow/);
    expect(refusal('1e-999999999999')).toMatch(/^Number underflow/);
    expect(parseNumber('0e999999999999')).toBe(0);
  });

  it('refuses a number a double cannot hold exactly, and says what it would have become', () => {
    expect(refusal('9007199254740993')).toMatch(/cannot be stored exactly \(it would read back as 9007199254740992\)/);
    expect(refusal('0.30000000000000000001')).toMatch(/it would read back as 0\.3\)/);
    expect(refusal('12345678901234567890')).toMatch(/cannot be stored exactly/);
  });

  it('every double within DynamoDB\'s range round-trips through its text', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        const exponent = x === 0 ? 0 : Math.floor(Math.log10(Math.abs(x)));
        fc.pre(x === 0 || (exponent >= -129 && exponent <= 124));
        const text = formatNumber(x);
        expect(text).toMatch(/^-?\d+(\.\d+)?$/);
        expect(parseNumber(text)).toBe(x === 0 ? 0 : x);
      }),
      { numRuns: 2000, seed: 11 },
    );
  });

  it('sizes by DynamoDB\'s rule: one byte per two significant digits, plus one', () => {
    expect(significantDigits(12300)).toBe(3);
    expect(significantDigits(0.0012)).toBe(2);
    expect(valueSize(12300)).toBe(3);
    expect(valueSize(1)).toBe(2);
    expect(valueSize(0)).toBe(1);
    expect(valueSize(123456789)).toBe(6);
  });

  it('arithmetic adds the decimals the numbers show, then rounds once: 0.1 + 0.2 is 0.3', () => {
    expect(decimalSum(0.1, 0.2)).toBe(0.3);
    expect(decimalSum(0.3, -0.1)).toBe(0.2);
    expect(decimalSum(1.1, 2.2)).toBe(3.3);
    expect(decimalSum(2 ** 53, 1)).toBe(2 ** 53); // beyond a double: rounded, as documented
    expect(decimalSum(1e308, 1e308)).toBe(Infinity); // the caller refuses a non-finite result
    // Against an independent oracle: k-digit decimals summed as integers, then scaled.
    fc.assert(
      fc.property(fc.integer({ min: -1e9, max: 1e9 }), fc.integer({ min: -1e9, max: 1e9 }), fc.integer({ min: 0, max: 9 }), (x, y, scale) => {
        const a = Number(`${x}e-${scale}`);
        const b = Number(`${y}e-${scale}`);
        expect(decimalSum(a, b)).toBe(Number(`${x + y}e-${scale}`));
      }),
      { numRuns: 3000, seed: 5 },
    );
  });
});

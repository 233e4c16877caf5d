// DynamoDB numbers on keyslice's doubles and decimals (coordinator/dynamodb/numbers.ts,
// shared/decimal.ts): every number within DynamoDB's limits (38 digits,
// 1E-130 .. 9.99..E+125) reads back as the same number, a double where one holds
// it and a decimal value where none does; beyond the limits it is refused with
// DynamoDB's messages. Checked against vectors and, for random doubles and
// random decimals, against the round trip itself.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DynamoDbError } from '../coordinator/dynamodb/errors.js';
import { formatNumber, parseNumber, significantDigits } from '../coordinator/dynamodb/numbers.js';
import { valueSize } from '../coordinator/dynamodb/attribute-values.js';
import { decimalSum } from '../shared/decimal-sum.js';
import { fromJson, validateValue } from '../shared/values.js';

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

  it('keeps a number a double cannot hold exactly as a decimal value, digit for digit', () => {
    expect(parseNumber('9007199254740993')).toEqual({ $N: '9007199254740993' });
    expect(parseNumber('0.30000000000000000001')).toEqual({ $N: '0.30000000000000000001' });
    expect(parseNumber('-1234567890123456789012345678901234567.8')).toEqual({ $N: '-1234567890123456789012345678901234567.8' });
    expect(parseNumber('1.2345678901234567890123456789012345678E+125')).toEqual({ $N: '12345678901234567890123456789012345678' + '0'.repeat(88) });
    expect(parseNumber('12345678901234567890.000')).toEqual({ $N: '12345678901234567890' });
    expect(formatNumber(parseNumber('00012345678901234567890.100'))).toBe('12345678901234567890.1');
    expect(parseNumber('9007199254740992')).toBe(2 ** 53); // a double holds it: a plain number
  });

  it('every decimal within DynamoDB\'s limits round-trips through its text, in canonical form', () => {
    const digits = fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 38 }).map((d) => d.join(''));
    fc.assert(
      fc.property(fc.boolean(), digits, fc.integer({ min: -130, max: 125 }), (negative, ds, exponent) => {
        const significant = ds.replace(/^0+/, '').replace(/0+$/, '');
        fc.pre(significant !== '');
        const text = `${negative ? '-' : ''}${significant[0]}.${significant.slice(1)}E${exponent}`;
        const v = parseNumber(text);
        const back = formatNumber(v);
        expect(back).toMatch(/^-?(0|[1-9]\d*)(\.\d*[1-9])?$/);
        expect(parseNumber(back)).toEqual(v);
        expect(significantDigits(v)).toBe(significant.length);
        // Exactly the same number: compare as BigInt-scaled integers.
        const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(back)!;
        const scaledBack = BigInt(m[1] + m[2] + (m[3] ?? '')) * 10n ** BigInt(200 - (m[3] ?? '').length);
        const scaledIn = BigInt((negative ? '-' : '') + significant) * 10n ** BigInt(200 + exponent - (significant.length - 1));
        expect(scaledBack).toBe(scaledIn);
      }),
      { numRuns: 2000, seed: 38 },
    );
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

  it('arithmetic adds the decimals the numbers show, exactly: 0.1 + 0.2 is 0.3, 2^53 + 1 is not rounded', () => {
    expect(decimalSum(0.1, 0.2)).toBe(0.3);
    expect(decimalSum(0.3, -0.1)).toBe(0.2);
    expect(decimalSum(0.3, 0.1, true)).toBe(0.2);
    expect(decimalSum(1.1, 2.2)).toBe(3.3);
    expect(decimalSum(2 ** 53, 1)).toEqual({ $N: '9007199254740993' });
    expect(decimalSum({ $N: '9007199254740993' }, 1)).toBe(2 ** 53 + 2);
    expect(decimalSum({ $N: '9007199254740993' }, { $N: '9007199254740993' }, true)).toBe(0);
    expect(decimalSum(1e20, 0.5)).toEqual({ $N: '100000000000000000000.5' });
    expect(decimalSum({ $N: '99999999999999999999999999999999999999' }, 1)).toBe(1e38);
    // DynamoDB's limits hold for sums: its messages, as a ValidationError.
    const sumError = (a: Parameters<typeof decimalSum>[0], b: Parameters<typeof decimalSum>[1]) => {
      try {
        decimalSum(a, b);
      } catch (err) {
        return (err as Error).message;
      }
      return 'no error';
    };
    expect(sumError({ $N: '9' + '9'.repeat(37) + '0'.repeat(88) }, 1e125)).toMatch(/^Number overflow\./);
    expect(sumError(1e20, 1e-20)).toBe('Attempting to store more than 38 significant digits in a Number');
    expect(sumError(1e-130, { $N: '-0.' + '0'.repeat(129) + '10000000000000000000000000000000000001' })).toMatch(/^Number underflow\./);
    // Doubles beyond DynamoDB's range (the native API takes any finite double) add as doubles, as before.
    expect(decimalSum(1e300, 1)).toBe(1e300);
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

describe('the native value model: numbers no double holds are {"$N": "<canonical text>"}', () => {
  const problem = (v: unknown): string => {
    try {
      validateValue(v, 'v');
    } catch (err) {
      return (err as Error).message;
    }
    return 'valid';
  };

  it('JSON in gives each number its one form; anything else stays for validation to refuse', () => {
    expect(fromJson({ $N: '1.50' })).toBe(1.5);
    expect(fromJson({ $N: '-0' })).toBe(0);
    expect(fromJson({ $N: '9007199254740993.0' })).toEqual({ $N: '9007199254740993' });
    expect(fromJson([{ $N: '1E+37' }, { $N: '1.0000000000000000000000000000000000001E+37' }])).toEqual([1e37, { $N: '10000000000000000000000000000000000001' }]);
    expect(fromJson({ $N: 'abc' })).toEqual({ $N: 'abc' });
    expect(fromJson({ $N: '1E+126' })).toEqual({ $N: '1E+126' });
  });

  it('validation takes canonical decimals only, and says what to write instead', () => {
    expect(problem({ $N: '9007199254740993' })).toBe('valid');
    expect(problem({ $NS: [{ $N: '9007199254740993' }, 9007199254740992] })).toBe('valid');
    expect(problem({ $N: '0.1' })).toMatch(/held exactly by a double: write it as the plain number 0\.1/);
    expect(problem({ $N: '9007199254740993.0' })).toMatch(/not in canonical form \(write "9007199254740993"\)/);
    expect(problem({ $N: 'abc' })).toMatch(/not a decimal number/);
    expect(problem({ $N: 5 })).toMatch(/must hold the decimal as a string/);
    expect(problem({ $N: '1' + '0'.repeat(126) })).toMatch(/Number overflow/);
    expect(problem({ $NS: [{ $N: '9007199254740993' }, { $N: '9007199254740993' }] })).toMatch(/twice/);
  });
});


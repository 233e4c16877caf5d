// Sums of numbers as people (and DynamoDB) read them: a number is the decimal
// its shortest text shows ("0.1", not 0.1000000000000000055...), the sum of two
// is computed exactly in decimal and rounded once to the nearest double. So
// 0.1 + 0.2 is 0.3, as in DynamoDB, where binary floating point gives
// 0.30000000000000004. Never worse than floating point: the result is the
// double nearest to the exact sum of what the operands show; only a sum that
// needs more significant digits than a double holds (2^53 + 1) is rounded.

const SHORTEST = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/;

/** x as mantissa x 10^exponent, from its shortest round-trip text. */
function decimalOf(x: number): [bigint, number] {
  const m = SHORTEST.exec(String(x))!;
  const fraction = m[3] ?? '';
  const mantissa = BigInt(m[1] + m[2] + fraction);
  return [mantissa, Number(m[4] ?? 0) - fraction.length];
}

export function decimalSum(a: number, b: number): number {
  const sum = a + b;
  // Whole numbers whose sum a double holds exactly need no decimal arithmetic.
  if (Number.isSafeInteger(a) && Number.isSafeInteger(b) && Number.isSafeInteger(sum)) return sum;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return sum;
  const [ma, ea] = decimalOf(a);
  const [mb, eb] = decimalOf(b);
  const e = Math.min(ea, eb);
  const m = ma * 10n ** BigInt(ea - e) + mb * 10n ** BigInt(eb - e);
  return Number(`${m}e${e}`);
}

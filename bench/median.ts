// The median of a bench's rounds: the middle value, or the mean of the two middle values of an even count; NaN for
// none (a row with no readings prints as such rather than as a number). A NaN reading (a round that measured nothing)
// is left out: it has no place in the order.
export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

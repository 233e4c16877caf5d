// A plain model of sorting-key order and conditions, and seeded random
// values and conditions, shared by the range-scan tests.
import type { SortCondition } from '../shared/api.js';
import type { KeyType, KeyValue } from '../shared/key-encoding.js';

/** The logical order of sorting-key values: code points for strings, numeric, unsigned bytes. */
export function compare(type: KeyType, a: KeyValue, b: KeyValue): number {
  if (type === 'number') return (a as number) - (b as number);
  const ba = type === 'string' ? Buffer.from(a as string, 'utf8') : Buffer.from(a as Uint8Array);
  const bb = type === 'string' ? Buffer.from(b as string, 'utf8') : Buffer.from(b as Uint8Array);
  return Buffer.compare(ba, bb);
}

export function beginsWith(type: KeyType, v: KeyValue, p: KeyValue): boolean {
  if (type === 'string') return (v as string).startsWith(p as string);
  const bv = v as Uint8Array;
  const bp = p as Uint8Array;
  return bp.length <= bv.length && Buffer.compare(Buffer.from(bv.subarray(0, bp.length)), Buffer.from(bp)) === 0;
}

export function matches(type: KeyType, v: KeyValue, cond: SortCondition | undefined): boolean {
  if (cond === undefined) return true;
  if ('eq' in cond) return compare(type, v, cond.eq) === 0;
  if ('between' in cond) return compare(type, v, cond.between[0]) >= 0 && compare(type, v, cond.between[1]) <= 0;
  if ('beginsWith' in cond) return beginsWith(type, v, cond.beginsWith);
  // Bounds: each one present must hold (two of them make a two-sided range).
  const c = cond as { lt?: KeyValue; lte?: KeyValue; gt?: KeyValue; gte?: KeyValue };
  if (c.lt !== undefined && !(compare(type, v, c.lt) < 0)) return false;
  if (c.lte !== undefined && !(compare(type, v, c.lte) <= 0)) return false;
  if (c.gt !== undefined && !(compare(type, v, c.gt) > 0)) return false;
  if (c.gte !== undefined && !(compare(type, v, c.gte) >= 0)) return false;
  return true;
}

const ALPHABET = ['a', 'b', 'ab', 'é', 'z', '0', '\u{1F600}', '~', 'A'];
export function randomValue(type: KeyType, r: () => number): KeyValue {
  if (type === 'number') {
    const kind = Math.floor(r() * 4);
    if (kind === 0) return Math.floor(r() * 200) - 100;
    if (kind === 1) return (r() - 0.5) * 1e6;
    if (kind === 2) return (r() - 0.5) * 1e-6;
    return (r() < 0.5 ? -1 : 1) * 2 ** Math.floor(r() * 100);
  }
  const len = 1 + Math.floor(r() * 4);
  if (type === 'string') return Array.from({ length: len }, () => ALPHABET[Math.floor(r() * ALPHABET.length)]).join('');
  return new Uint8Array(Array.from({ length: len }, () => [0, 1, 127, 128, 254, 255][Math.floor(r() * 6)]));
}

export function randomCondition(type: KeyType, values: KeyValue[], r: () => number): SortCondition | undefined {
  const pick = () => (r() < 0.7 ? values[Math.floor(r() * values.length)] : randomValue(type, r));
  const kinds = ['none', 'eq', 'lt', 'lte', 'gt', 'gte', 'between', 'twoSided', 'twoSided', ...(type === 'number' ? [] : ['beginsWith'])];
  const kind = kinds[Math.floor(r() * kinds.length)];
  switch (kind) {
    case 'none':
      return undefined;
    case 'twoSided': {
      // Any mix of gt/gte and lt/lte; the bounds are in either order, so some contradict each other and match nothing.
      const [a, b] = [pick(), pick()];
      const [low, high] = r() < 0.8 ? [a, b].sort((x, y) => compare(type, x, y)) : [a, b];
      return { [r() < 0.5 ? 'gt' : 'gte']: low, [r() < 0.5 ? 'lt' : 'lte']: high } as SortCondition;
    }
    case 'between': {
      const [a, b] = [pick(), pick()].sort((x, y) => compare(type, x, y));
      return { between: [a, b] };
    }
    case 'beginsWith': {
      const v = pick();
      const prefixLen = 1 + Math.floor(r() * 2);
      return { beginsWith: type === 'string' ? [...(v as string)].slice(0, prefixLen).join('') : (v as Uint8Array).slice(0, prefixLen) };
    }
    default:
      return { [kind]: pick() } as SortCondition;
  }
}


// What the node-protocol fuzz sends: seeded random msgpack values, garbage bytes,
// and near-valid frames and slice ops (a valid one with exactly one thing broken:
// one field of the wrong type or out of range, null, a huge number, one element
// too many or too few, an unknown code). Every near-valid op is one that a worker
// must refuse with MalformedRequest; no generator here makes a valid op, so that
// the fuzz cannot change data by chance. Used by test/node-frames.test.ts (the
// checks alone, fast) and test/node-protocol-fuzz.test.ts (a real slice node).
import { Packr } from 'msgpackr';
import { BOUND_EXPRESSION_DEPTH_MAX, REQUEST_ID_INSTANCE_MAX, SLICE_COUNT_MAX } from '../shared/limits.js';
import { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_DROP_TABLE, EFFECT_SET, NodeFrame, SliceOp, sliceSetOf } from '../shared/protocol.js';

export type Rng = () => number;

/** Encoders as the coordinator uses (records) and as another client might (plain maps). */
export const recordPackr = new Packr({ useRecords: true, mapsAsObjects: true });
export const plainPackr = new Packr({ useRecords: false });

export const pick = <T>(r: Rng, list: readonly T[]): T => list[Math.floor(r() * list.length)];
export const int = (r: Rng, n: number): number => Math.floor(r() * n);

export function randomBytes(r: Rng, max = 64): Buffer {
  const b = Buffer.alloc(int(r, max + 1));
  for (let i = 0; i < b.length; i++) b[i] = int(r, 256);
  return b;
}

const NUMBERS = [0, 1, 2, 3, 7, -1, -0.5, 1.5, 2 ** 31, 2 ** 32, 2 ** 52, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e300, -1e300, Number.MAX_VALUE, NaN, Infinity, -Infinity];

/** Any msgpack value, nested up to `depth`. */
export function randomValue(r: Rng, depth = 3): unknown {
  switch (int(r, depth > 0 ? 9 : 6)) {
    case 0:
      return pick(r, NUMBERS);
    case 1:
      return pick(r, ['', 'zzz', 'source', 'target', '\u0000', 'x'.repeat(int(r, 300)), '__proto__']);
    case 2:
      return pick(r, [null, true, false, undefined]);
    case 3:
      return randomBytes(r, 16);
    case 4:
      return int(r, 20) - 2;
    case 5:
      return new Date(int(r, 2 ** 40));
    case 6:
    case 7:
      return Array.from({ length: int(r, 6) }, () => randomValue(r, depth - 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = int(r, 5); i > 0; i--) o[pick(r, ['k', 'a', 'op', 'v', 'path', 'list', 'condition', 'x'])] = randomValue(r, depth - 1);
      return o;
    }
  }
}

// ---- near-valid slice ops ------------------------------------------------------

/** The table, slice and key the templates use (valid shapes; the fuzz never sends them unbroken). */
const T = 1;
const S = 3;
const K = '\u0002k\u0000';
const P = { k: 'path', path: ['a'] };
const V = { k: 'value', v: 1 };

const deep = (n: number): unknown => (n === 0 ? 1 : [deep(n - 1)]);
const notChain = (n: number): unknown => {
  let c: unknown = { k: 'exists', path: ['a'] };
  for (let i = 0; i < n; i++) c = { k: 'not', a: c };
  return c;
};

/** Values that are wrong for each kind of field (none of them fits the field). */
/** A move's effects as the source writes them (MovedEffects: a plain msgpack list), in bytes of their own. */
const movedBytes = (effects: unknown[]): Uint8Array => Uint8Array.from(plainPackr.pack(effects));
const VALID_EFFECT = [EFFECT_SET, T, S, K, { id: 'x' }, 5];
/** Moved changes the target would assert on or misread, each alone in its list. */
const WRONG_EFFECTS: unknown[][] = [[5], [[EFFECT_DROP_TABLE, T]], [[EFFECT_SET, T, S + 1, K, {}, 1]], [[EFFECT_SET, T, S, 5, {}, 1]], [[EFFECT_SET, T, S, K, null, 1]], [[EFFECT_SET, T, S, K, { a: NaN }, 1]], [[EFFECT_DELETE, T, S]], [[EFFECT_DELETE, T, S + 1, K]], [[EFFECT_DROP_SLICE, S + 1, null]], [[9]], [[]]];

const WRONG = {
  uint: [-1, 1.5, 2 ** 53 + 2, 1e300, -1e300, NaN, Infinity, 'x', '1', null, true, [], {}, Buffer.from([1])],
  slice: [-1, 1.5, 2 ** 53 + 2, SLICE_COUNT_MAX, 2 ** 40, NaN, '3', null, false, [3], {}],
  key: [null, 5, true, [], {}, Buffer.from('k')],
  nullableKey: [5, true, [], {}, Buffer.from('k')],
  bool: [0, 1, 'true', null, [], {}],
  item: [null, 5, 'x', [], Buffer.from([1]), { a: NaN }, { a: Infinity }, { a: deep(40) }, { a: undefined }, { a: new Date(0) }, { a: { b: [1, -Infinity] } }],
  check: [5, 'x', [], {}, { condition: null, returnOld: 'yes', oldOnFailure: false }, { condition: { k: 'zzz' }, returnOld: true, oldOnFailure: false }, { condition: null, returnOld: true }],
  projection: [5, 'x', {}, [5], [[]], [[5]], [['a', -1]], [['a', 1.5]], [['a', null]], [Array(40).fill('a')]],
  condition: [
    5,
    'x',
    [],
    {},
    { k: 'cmp', op: '~', a: P, b: V },
    { k: 'cmp', op: '=', a: P },
    { k: 'cmp', op: '=', a: P, b: { k: 'value', v: NaN } },
    { k: 'cmp', op: '=', a: P, b: { k: 'size' } },
    { k: 'between', a: P, low: V, high: null },
    { k: 'in', a: P, list: [] },
    { k: 'in', a: P, list: Array(101).fill(V) },
    { k: 'and', a: null, b: { k: 'exists', path: ['a'] } },
    { k: 'type', a: P, type: 'X' },
    { k: 'exists', path: [] },
    { k: 'exists', path: [1] },
    { k: 'beginsWith', a: 5, b: V },
    notChain(BOUND_EXPRESSION_DEPTH_MAX + 1),
  ],
  updateActions: [5, [5], [{ k: 'set', path: ['a'] }], [{ k: 'add', path: ['a'], n: 'x' }], [{ k: 'add', path: ['a'], n: Infinity }], [{ k: 'zz', path: ['a'] }], [{ k: 'remove', path: null }], [{ k: 'set', path: ['a'], value: { k: '*', a: V, b: V } }], [{ k: 'set', path: ['a'], value: { k: 'ifNotExists', path: ['b'] } }]],
  returnValues: ['all', 5, null],
  // Bytes only, and no slice from SLICE_COUNT_MAX on (the Scan's first slice is 0 here).
  sliceSet: [16, null, 'x', [1, 2], {}, new Uint8Array(SLICE_COUNT_MAX / 8 + 1)],
  cursor: [5, 'x', [], [1], [1, 2], ['a', 'b'], [1, 'a', 3], [-1, 'a']],
  // A move's effects are bytes (MovedEffects): a list of effects as objects (node protocol 27's form) is refused, and so
  // are bytes of each wrong list, of a right one cut short or with a byte after it, and of no msgpack at all.
  effects: [5, 'x', null, [5], [[EFFECT_SET, T, S, K, { id: 'x' }, 5]], ...WRONG_EFFECTS.map(movedBytes), movedBytes([VALID_EFFECT]).subarray(0, 12), Uint8Array.of(...movedBytes([VALID_EFFECT]), 0xc0), Uint8Array.of(0x91, 0xc1), Uint8Array.of(0xdd, 0xff, 0xff, 0xff, 0xff)],
  role: ['other', 5, null, true],
  requestId: [5, 'feedc0de.1', [], [1], [1, 0], [-1, 1], [REQUEST_ID_INSTANCE_MAX + 1, 1], [1, 1.5], [1, 2, 3], {}],
};
type FieldKind = keyof typeof WRONG | 'updateSpec' | 'rangeSpec';

const updateSpec = () => ({ base: { id: 'x' }, actions: [{ k: 'set', path: ['v'], value: V }], condition: null, oldOnFailure: false, returnValues: 'none' });
const rangeSpec = () => ({ low: K, lowInclusive: true, high: K + '\u00ff', highInclusive: false, reverse: false, limit: 10, projection: null, filter: null, withKeys: false, packed: false });
const UPDATE_FIELDS: Record<string, keyof typeof WRONG> = { base: 'item', actions: 'updateActions', condition: 'condition', oldOnFailure: 'bool', returnValues: 'returnValues' };
const RANGE_FIELDS: Record<string, keyof typeof WRONG> = { low: 'key', high: 'key', lowInclusive: 'bool', highInclusive: 'bool', reverse: 'bool', withKeys: 'bool', packed: 'bool', limit: 'uint', projection: 'projection', filter: 'condition' };

/** Each op's arguments, valid, with the kind of each. */
const TEMPLATES: [code: number, args: () => unknown[], kinds: FieldKind[]][] = [
  [SliceOp.Put, () => [T, S, K, { id: 'x', v: 1 }, 10, null, [0xfeedc0de, 1]], ['uint', 'slice', 'key', 'item', 'uint', 'check', 'requestId']],
  [SliceOp.Get, () => [T, S, K, null, true], ['uint', 'slice', 'key', 'projection', 'bool']],
  [SliceOp.Delete, () => [T, S, K, null, null], ['uint', 'slice', 'key', 'check', 'requestId']],
  [SliceOp.Update, () => [T, S, K, updateSpec(), [0xfeedc0de, 2]], ['uint', 'slice', 'key', 'updateSpec', 'requestId']],
  [SliceOp.Range, () => [T, S, rangeSpec()], ['uint', 'slice', 'rangeSpec']],
  [SliceOp.Scan, () => [T, 0, null, 10, null, null, sliceSetOf(0, [0, 3, 15]), false], ['uint', 'slice', 'nullableKey', 'uint', 'projection', 'condition', 'sliceSet', 'bool']],
  [SliceOp.DropTable, () => [T], ['uint']],
  [SliceOp.Stats, () => [T, sliceSetOf(0, [1, 2])], ['uint', 'sliceSet']],
  [SliceOp.MoveStart, () => [S], ['slice']],
  [SliceOp.MoveRead, () => [S, null, 10], ['slice', 'cursor', 'uint']],
  [SliceOp.MoveFreeze, () => [S], ['slice']],
  [SliceOp.MoveDrop, () => [S], ['slice']],
  [SliceOp.MoveBegin, () => [S], ['slice']],
  [SliceOp.MoveApply, () => [S, movedBytes([VALID_EFFECT]), false], ['slice', 'effects', 'bool']],
  [SliceOp.MoveAbort, () => [S, 'source'], ['slice', 'role']],
  [SliceOp.ReplicaGet, () => [T, S, K, null, false], ['uint', 'slice', 'key', 'projection', 'bool']],
  [SliceOp.ReplicaRange, () => [T, S, rangeSpec()], ['uint', 'slice', 'rangeSpec']],
];

/** Every template op, unbroken (what brokenOp starts from): all of them are valid. */
export function validOps(): unknown[] {
  return TEMPLATES.map(([code, args]) => [code, ...args()]);
}

/** A slice op with exactly one thing wrong; a worker must refuse it with MalformedRequest. */
export function brokenOp(r: Rng): unknown {
  const [code, args, kinds] = pick(r, TEMPLATES);
  const op: unknown[] = [code, ...args()];
  const how = int(r, 20);
  if (how === 0) return [pick(r, [0, 19, 99, -1, 1.5, 'x', null, 2 ** 53 + 2]), ...op.slice(1)];
  if (how === 1) return op.slice(0, -1);
  if (how === 2) return [...op, pick(r, [null, 0, 'x'])];
  if (how === 3) return pick(r, [5, null, 'op', {}, [], Buffer.from([code])]);
  // Only the node itself may assign slices: a valid Assign op in a batch is refused.
  if (how === 4) return [SliceOp.Assign, int(r, 1000), [S]];
  const i = int(r, kinds.length);
  const kind = kinds[i];
  if (kind === 'updateSpec' || kind === 'rangeSpec') {
    const spec = op[i + 1] as Record<string, unknown>;
    const fields = kind === 'updateSpec' ? UPDATE_FIELDS : RANGE_FIELDS;
    const name = int(r, 8) === 0 ? null : pick(r, Object.keys(fields));
    if (name === null) op[i + 1] = pick(r, [null, 5, [], 'x']);
    else if (int(r, 6) === 0) delete spec[name];
    else spec[name] = pick(r, WRONG[fields[name]]);
  } else op[i + 1] = pick(r, WRONG[kind]);
  return op;
}

/** Bytes for one worker's part of a batch: garbage, msgpack that is not a list of ops, or broken ops.
 * `ops`: how many results a reply must hold (null: the part must be refused whole or answered with errors only). */
export function brokenPart(r: Rng): { bytes: Uint8Array; ops: number | null } {
  switch (int(r, 6)) {
    case 0:
      return { bytes: randomBytes(r), ops: null };
    case 1:
      // Not a list, or a list of scalars and maps: no element can be an op.
      return { bytes: plainPackr.pack(int(r, 2) === 0 ? randomValue(r, 0) : Array.from({ length: int(r, 5) }, () => randomValue(r, 0))), ops: null };
    case 2:
      return { bytes: recordPackr.pack(Array.from({ length: 513 }, () => 0)), ops: null };
    default: {
      const ops = Array.from({ length: 1 + int(r, 4) }, () => brokenOp(r));
      return { bytes: pick(r, [recordPackr, plainPackr]).pack(ops), ops: ops.length };
    }
  }
}

// ---- near-valid frames -----------------------------------------------------------

export interface FuzzFrame {
  bytes: Uint8Array;
  what: string;
  /** close: the node must close the connection; stay: it must not; any: either. */
  expect: 'close' | 'stay' | 'any';
  /** A Batch at the node's epoch with valid workers: its parts must come back as errors only. */
  batch?: { id: number; parts: Map<number, number | null> };
}

const ID_HEX = () => 'ab'.repeat(16);

/** One frame for the node: `epoch` is the node's, `workers` its worker count, `nextId` a fresh batch id. */
export function fuzzFrame(r: Rng, epoch: number, workers: number, nextId: () => number): FuzzFrame {
  const packr = pick(r, [recordPackr, plainPackr]);
  const kind = int(r, 12);
  if (kind === 0) return { bytes: randomBytes(r, 100), what: 'garbage bytes', expect: 'any' };
  if (kind === 1) {
    const rest = randomValue(r, 2);
    const v = int(r, 2) === 0 ? randomValue(r) : [int(r, 10), ...(Array.isArray(rest) ? rest : [rest])];
    return { bytes: packr.pack(v), what: 'random msgpack', expect: 'any' };
  }
  if (kind === 2) {
    // A kind only the coordinator receives, or no kind at all.
    const k = pick(r, [NodeFrame.Hello, NodeFrame.Assigned, NodeFrame.BatchReply, NodeFrame.BatchError, 0, 9, -1, 'x', null]);
    return { bytes: packr.pack([k, epoch, 1, 'x', null]), what: `frame kind ${String(k)}`, expect: 'close' };
  }
  if (kind === 3) {
    // Epoch frames: from a connection that did not assign the node, every one is refused.
    const e = pick(r, ['zzz', 2 ** 52, epoch + 1, epoch, 0, -1, 1.5, null, 2 ** 53 + 2, NaN, [epoch]]);
    return { bytes: packr.pack([NodeFrame.Epoch, e]), what: `Epoch ${String(e)}`, expect: 'close' };
  }
  if (kind === 4) {
    // Assign frames: broken, or well formed for another cluster or an older epoch; all refused.
    const frame: unknown[] = [NodeFrame.Assign, epoch + 1 + int(r, 10), 16, [0, 1], ID_HEX(), null];
    const i = 1 + int(r, 5);
    if (int(r, 4) > 0) frame[i] = pick(r, [null, 'x', -1, 1.5, 2 ** 53 + 2, [], {}, [[0]], [0, 0], [16], [-1], 0, 2 ** 52, Array(17).fill(0).map((_, j) => j)]);
    if (int(r, 5) === 0) frame.push(null);
    if (int(r, 5) === 0) frame[1] = 0;
    return { bytes: packr.pack(frame), what: `Assign ${JSON.stringify(frame.slice(1, 4)).slice(0, 60)}`, expect: 'close' };
  }
  // Batch frames, most of them at the node's epoch so that their ops reach the workers.
  const id = nextId();
  const atEpoch = int(r, 5) > 0;
  const batchEpoch = atEpoch ? epoch : pick(r, [epoch + 1, 0, 2 ** 52, epoch - 1]);
  const parts: [unknown, Uint8Array][] = [];
  const expectParts = new Map<number, number | null>();
  const usedWorkers = new Set<number>();
  for (let n = 1 + int(r, workers); n > 0; n--) {
    const w = int(r, workers);
    if (usedWorkers.has(w)) continue;
    usedWorkers.add(w);
    const part = brokenPart(r);
    parts.push([w, part.bytes]);
    expectParts.set(w, part.ops);
  }
  const frame: unknown[] = [NodeFrame.Batch, id, batchEpoch, parts];
  const breakFrame = int(r, 4) === 0;
  if (breakFrame) {
    const how = int(r, 6);
    if (how === 0) frame[1] = pick(r, [null, -1, 1.5, 'x', 2 ** 53 + 2]);
    else if (how === 1) frame[2] = pick(r, [null, -1, 1.5, 'zzz', 2 ** 53 + 2, NaN]);
    else if (how === 2) frame[3] = pick(r, [null, 5, 'x', {}, [[0]], [[0, 'ops']], [[-1, Buffer.from([0x90])]], [[1.5, Buffer.from([0x90])]], [[0, Buffer.from([0x90])], [0, Buffer.from([0x90])]]]);
    else if (how === 3) frame.pop();
    else if (how === 4) frame.push(0);
    else frame[3] = [[pick(r, [workers, 63, 64, 2 ** 40]), Buffer.from([0x90])]];
    // A worker index past this node's but within the protocol's range is answered with BatchError.
    const stays = how === 5 && (frame[3] as [number][])[0][0] < 64;
    return { bytes: packr.pack(frame), what: 'broken Batch', expect: stays ? 'stay' : 'close' };
  }
  return { bytes: packr.pack(frame), what: `Batch at epoch ${batchEpoch}`, expect: 'stay', batch: atEpoch && parts.length > 0 ? { id, parts: expectParts } : undefined };
}

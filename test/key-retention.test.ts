// Keys the sorted tree keeps do not keep the text they were decoded from alive. msgpackr decodes a string of 13 chars
// or more as a slice of one string holding every string of the buffer it reads (a batch of ops, a record, a move's
// step); a key kept as such a slice kept that whole text, values and all, for as long as the key lived, long after
// its item was overwritten (slice-worker/owned-strings.ts ownKey). Measured here as the heap left after every item is overwritten by a
// small one made in this process: each way a key enters the tree from decoded bytes.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { decodeSliceOps, EFFECT_DELETE, EFFECT_SET, encodeSliceOps, RESULT_OK, SliceOp, type Effect, type SliceOpMessage } from '../shared/protocol.js';
import { itemBytes, type Item } from '../shared/values.js';
import { decodeEffects, encodeEffects, encodeReplicated } from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const SLICE = 3;
const TABLE = 1;
const N = 20_000;
/** Per item: a value of this many chars, which a key slicing its decoded text would keep after the item is gone (the
 * extractor reads a long string apart from the short ones around it, so the values are short ones too). */
const VALUE_CHARS = 200;
const PER_BATCH = 50;
const key = (i: number) => `user-key-${String(i).padStart(12, '0')}`; // 21 chars: sliced by msgpackr
const item = (i: number): Item => ({ id: key(i), body: `${'v'.repeat(VALUE_CHARS)}${i}` });
const set = (i: number): Effect => { const it = item(i); return [EFFECT_SET, TABLE, SLICE, key(i), it, itemBytes(it)]; };
const batches = (make: (from: number, to: number) => void) => {
  for (let i = 0; i < N; i += PER_BATCH) make(i, i + PER_BATCH);
};

function ok(s: SliceStore, op: SliceOpMessage): unknown {
  const r = s.execute(op);
  expect(r[0]).toBe(RESULT_OK);
  return r[1];
}

/** Heap growth, after a full collection, from a store's N items entered by `enter` and then each overwritten by a
 * small item made here (so that only the keys still refer to what was decoded). */
function retainedBy(enter: (s: SliceStore) => void): number {
  const s = new SliceStore(0, 1, () => 7);
  ok(s, [SliceOp.Assign, 1, [SLICE]]);
  gc();
  const before = process.memoryUsage().heapUsed;
  enter(s);
  s.takeEffects();
  for (let i = 0; i < N; i++) {
    const small = { n: i };
    // The key made here, a string of its own: the tree keeps the key it first got.
    ok(s, [SliceOp.Put, TABLE, SLICE, `${key(i)}`, small, itemBytes(small), null, null]);
  }
  s.takeEffects();
  gc();
  gc();
  const after = process.memoryUsage().heapUsed;
  expect(s.itemCount).toBe(N); // after the measure: the store is alive through it
  return after - before;
}

/** The same N items put as ops made here (no decode): what the store holds after the overwrite (keys, small items,
 * the tree). The values, were the keys to keep them, add N * VALUE_CHARS bytes (4 MB) or more; allowed: half that. */
function bound(): number {
  const made = retainedBy((s) => {
    for (let i = 0; i < N; i++) {
      const it = item(i);
      ok(s, [SliceOp.Put, TABLE, SLICE, key(i), it, itemBytes(it), null, null]);
    }
  });
  return made + (N * VALUE_CHARS) / 2;
}

describe('keys the tree keeps', () => {
  it('from a batch of puts as a node decodes it keep none of the batch', () => {
    const retained = retainedBy((s) =>
      batches((from, to) => {
        const ops: SliceOpMessage[] = [];
        for (let i = from; i < to; i++) {
          const it = item(i);
          ops.push([SliceOp.Put, TABLE, SLICE, key(i), it, itemBytes(it), null, null]);
        }
        for (const op of decodeSliceOps(encodeSliceOps(ops))) ok(s, op as SliceOpMessage);
      }),
    );
    expect(retained).toBeLessThan(bound());
  });

  it('from a log or snapshot record replayed keep none of the record', () => {
    const retained = retainedBy((s) =>
      batches((from, to) => {
        const effects: Effect[] = [];
        for (let i = from; i < to; i++) effects.push(set(i));
        for (const e of decodeEffects(new Uint8Array(encodeEffects(effects)))) s.replay(e);
      }),
    );
    expect(retained).toBeLessThan(bound());
  });

  it('from a follower\'s record decoded whole (a delete among its changes) keep none of the record', () => {
    const retained = retainedBy((s) =>
      batches((from, to) => {
        const effects: Effect[] = [[EFFECT_DELETE, TABLE, SLICE, 'gone']];
        for (let i = from; i < to; i++) effects.push(set(i));
        s.applyRecord(SLICE, encodeReplicated(effects, null));
      }),
    );
    expect(retained).toBeLessThan(bound());
  });

  it('from a move\'s step decoded whole (a delete among its changes) keep none of the step', () => {
    const retained = retainedBy((s) => {
      ok(s, [SliceOp.Assign, 2, []]);
      ok(s, [SliceOp.MoveBegin, SLICE]);
      batches((from, to) => {
        const effects: Effect[] = [[EFFECT_DELETE, TABLE, SLICE, 'gone']];
        for (let i = from; i < to; i++) effects.push(set(i));
        ok(s, [SliceOp.MoveApply, SLICE, new Uint8Array(encodeEffects(effects)), to >= N]);
      });
    });
    expect(retained).toBeLessThan(bound());
  });

  it('asserts a key that is not a byte string where it would enter the tree, short or long, copied or not', () => {
    // Keys are checked byte strings where they arrive (node-frames.test.ts); one that got past would be copied wrong by
    // latin1 and fail its slice's next compaction: the copy asserts it, before the tree holds it.
    const s = new SliceStore(0, 1, () => 7);
    ok(s, [SliceOp.Assign, 1, [SLICE]]);
    const small = { n: 1 };
    ok(s, [SliceOp.Put, TABLE, SLICE, `${key(1)}\u00ff`, small, itemBytes(small), null, null]);
    for (const bad of [`${key(2)}\u0100`, `${'k'.repeat(7000)}\ud800`]) {
      expect(() => s.execute([SliceOp.Put, TABLE, SLICE, bad, small, itemBytes(small), null, null])).toThrow(/byte string/);
    }
  });
});

// A slice move between two SliceStores (slice-worker/partition.ts), the way the
// coordinator drives it (coordinator/metadata/slice-mover.ts), with seeded random writes
// to the moving slice between every step: the target ends with exactly the
// source's items as of the freeze, its logged changes replay to the same state,
// only one of the two owns the slice at any time, and a rollback leaves the
// source as it was.
import { describe, expect, it } from 'vitest';
import {
  checkSliceOp,
  checkSliceResult,
  decodeSliceOps,
  decodeSliceResults,
  EFFECT_SET,
  encodeOwnedResults,
  encodeSliceOps,
  RESULT_OK,
  SliceOp,
  type MovedEffects,
  type MoveCursor,
  type MoveReadResult,
  type SliceOpMessage,
} from '../shared/protocol.js';
import { decodeEffects, encodeEffects } from '../slice-worker/log-format.js';
import { SliceStore } from '../slice-worker/partition.js';
import { rng } from './cluster-fixture.js';

const MOVING = 3;
const OTHER = 5;
const TABLES = [1, 2];

/** `op` run on `store` as a node runs it: through the frames' encoders and decoders and both sides' checks
 * (checkSliceOp before it runs, checkSliceResult on its answer, as the coordinator's node link checks it). */
function ok(store: SliceStore, op: SliceOpMessage): unknown {
  const [decoded] = decodeSliceOps(encodeSliceOps([op]));
  expect(checkSliceOp(decoded, true)).toBeNull();
  const [r] = decodeSliceResults(encodeOwnedResults([store.execute(decoded as SliceOpMessage)]));
  expect(r[0], JSON.stringify(r)).toBe(RESULT_OK);
  checkSliceResult(op, r[1]);
  return r[1];
}

/** Items of one slice as sorted [table, key, item-json] rows. */
function contents(store: SliceStore, slice: number): string[] {
  const rows: string[] = [];
  for (const e of store.entries()) if (e[0] === EFFECT_SET && e[2] === slice) rows.push(JSON.stringify([e[1], e[3], e[4]]));
  return rows.sort();
}

function randomWrite(r: () => number, slice: number): SliceOpMessage {
  const table = TABLES[Math.floor(r() * TABLES.length)];
  const key = `k${Math.floor(r() * 300)}`;
  if (r() < 0.25) return [SliceOp.Delete, table, slice, key, null, null];
  const item = { __name: key, v: Math.floor(r() * 1e6) };
  return [SliceOp.Put, table, slice, key, item, 40, null, null];
}

function setup(seed: number) {
  const r = rng(seed);
  let clock = 1;
  const source = new SliceStore(0, 1, () => clock++);
  const target = new SliceStore(0, 1, () => clock++);
  ok(source, [SliceOp.Assign, 1, [MOVING, OTHER]]);
  ok(target, [SliceOp.Assign, 1, []]);
  for (let i = 0; i < 500; i++) ok(source, randomWrite(r, r() < 0.7 ? MOVING : OTHER));
  source.takeEffects();
  const writes = (n: number) => {
    for (let i = 0; i < n; i++) ok(source, randomWrite(r, r() < 0.8 ? MOVING : OTHER));
  };
  return { r, source, target, writes };
}

describe('a slice move between two workers', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`copies, catches up and switches with writes between every step (seed ${seed})`, () => {
      const { r, source, target, writes } = setup(seed);
      ok(target, [SliceOp.MoveBegin, MOVING]);
      ok(source, [SliceOp.MoveStart, MOVING]);
      let cursor: MoveCursor = null;
      let done = false;
      for (let reads = 0; !done && reads < 1000; reads++) {
        writes(Math.floor(r() * 20));
        const [, , effects, next, last] = ok(source, [SliceOp.MoveRead, MOVING, cursor, 1 + Math.floor(r() * 40)]) as MoveReadResult;
        writes(Math.floor(r() * 5));
        ok(target, [SliceOp.MoveApply, MOVING, effects, false]);
        // Not owned yet: the target refuses ops on the slice.
        expect(target.execute([SliceOp.Get, 1, MOVING, 'k1', null, false])[0]).not.toBe(RESULT_OK);
        cursor = next;
        done = last;
      }
      expect(done).toBe(true);
      writes(30);
      const [, , catchUp] = ok(source, [SliceOp.MoveRead, MOVING, null, 0]) as MoveReadResult;
      ok(target, [SliceOp.MoveApply, MOVING, catchUp, false]);
      writes(10);
      const expected = contents(source, MOVING);
      const last = ok(source, [SliceOp.MoveFreeze, MOVING]) as MovedEffects;
      // Frozen: neither owns it until the target applies the last changes.
      expect(source.execute(randomWrite(r, MOVING))[1]).toBe('WrongOwner');
      ok(target, [SliceOp.MoveApply, MOVING, last, true]);
      expect(contents(target, MOVING)).toEqual(expected);
      // The target's log (its effects) replays to the same items.
      const replayed = new SliceStore(0, 1);
      for (const e of decodeEffects(encodeEffects(target.takeEffects()))) replayed.replay(e);
      expect(contents(replayed, MOVING)).toEqual(expected);
      // The target serves the slice; the source drops it and keeps the other.
      ok(target, randomWrite(r, MOVING));
      const other = contents(source, OTHER);
      ok(source, [SliceOp.MoveDrop, MOVING]);
      expect(contents(source, MOVING)).toEqual([]);
      expect(contents(source, OTHER)).toEqual(other);
    });
  }

  it('rolls back: the source owns the slice again with every item, the target drops its copy', () => {
    const { source, target, writes } = setup(11);
    ok(target, [SliceOp.MoveBegin, MOVING]);
    ok(source, [SliceOp.MoveStart, MOVING]);
    const [, , effects] = ok(source, [SliceOp.MoveRead, MOVING, null, 50]) as MoveReadResult;
    ok(target, [SliceOp.MoveApply, MOVING, effects, false]);
    writes(20);
    const expected = contents(source, MOVING);
    ok(source, [SliceOp.MoveFreeze, MOVING]);
    ok(source, [SliceOp.MoveAbort, MOVING, 'source']);
    ok(target, [SliceOp.MoveAbort, MOVING, 'target']);
    expect(contents(source, MOVING)).toEqual(expected);
    expect(source.execute([SliceOp.Get, 1, MOVING, 'k1', null, false])[0]).toBe(RESULT_OK);
    expect(contents(target, MOVING)).toEqual([]);
    // A source-side abort reaching a worker that simply owns the slice changes nothing.
    ok(source, [SliceOp.MoveAbort, MOVING, 'source']);
    expect(contents(source, MOVING)).toEqual(expected);
    // MoveDrop refuses to drop a slice the worker owns.
    expect(source.execute([SliceOp.MoveDrop, MOVING])[1]).toBe('InvalidState');
  });

  it('an Assign ends the move: one that still lists a frozen slice makes the source own it again', () => {
    // This is how a move the coordinator gave up ends on a node it could not send MoveAbort to
    // (reconnect, coordinator restart). So the coordinator must not switch a move whose source was
    // sent an Assign meanwhile (slice-mover.ts; test/slice-move-reassign.test.ts): these writes
    // would not be on the target.
    const { r, source, target } = setup(13);
    ok(target, [SliceOp.MoveBegin, MOVING]);
    ok(source, [SliceOp.MoveStart, MOVING]);
    ok(source, [SliceOp.MoveFreeze, MOVING]);
    expect(source.execute(randomWrite(r, MOVING))[1]).toBe('WrongOwner');
    ok(source, [SliceOp.Assign, 2, [MOVING, OTHER]]);
    ok(source, [SliceOp.Put, 1, MOVING, 'after-assign', { __name: 'after-assign', v: 1 }, 40, null, null]);
    // The move is over there: MoveDrop refuses, MoveAbort changes nothing.
    expect(source.execute([SliceOp.MoveDrop, MOVING])[1]).toBe('InvalidState');
    ok(source, [SliceOp.MoveAbort, MOVING, 'source']);
    expect(contents(source, MOVING).some((row) => row.includes('after-assign'))).toBe(true);
  });

  it('a dropped table reaches the target as a drop of that table in the slice', () => {
    const { source, target } = setup(12);
    ok(target, [SliceOp.MoveBegin, MOVING]);
    ok(source, [SliceOp.MoveStart, MOVING]);
    const [, , effects] = ok(source, [SliceOp.MoveRead, MOVING, null, 10_000]) as MoveReadResult;
    ok(target, [SliceOp.MoveApply, MOVING, effects, false]);
    ok(source, [SliceOp.DropTable, 1]);
    const last = ok(source, [SliceOp.MoveFreeze, MOVING]) as MovedEffects;
    ok(target, [SliceOp.MoveApply, MOVING, last, true]);
    expect(contents(target, MOVING)).toEqual(contents(source, MOVING));
    expect(contents(target, MOVING).every((row) => JSON.parse(row)[0] === 2)).toBe(true);
  });
});

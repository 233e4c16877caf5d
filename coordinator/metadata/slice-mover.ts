// One slice move, online: the source worker keeps serving while its items are
// copied to the target, the writes made meanwhile follow, and ownership switches
// at an epoch bump after a short freeze of that one slice.
//
//   target  MoveBegin            drop any leftover of the slice, expect it
//   source  MoveStart            start recording the slice's changes
//   loop    source MoveRead      changes since the last read + the next chunk of items
//           target MoveApply     apply them in that order; logged before it answers
//   catch up: MoveRead without items until few changes come back
//   freeze  (the coordinator holds scans of the slice)
//           source MoveFreeze    stop owning the slice: later ops get WrongOwner; last changes
//           target MoveApply own apply them and own the slice
//   switch  map.setOwner         new owner, epoch + 1, persisted; Epoch frame to every node
//   source  MoveDrop             delete the slice's items there
//
// Why the result equals the source: every change is a whole value (set item,
// delete key, drop), reads and changes leave the source worker in the order it
// made them, and the target applies them in that order. A copied item is the
// value as of its read; every change after that read comes in a later
// MoveRead's changes and is applied after it.
//
// The changes and items travel as bytes (MovedEffects: one msgpack list of effects, each item in the msgpack the
// source held it in or packed it in), which this process passes from the source's answer to the target's op as they
// are: it reads only their counts, and the target checks them whole before it applies any and keeps the items'
// bytes (slice-worker/partition.ts moveRead, moveApply).
//
// Safety: at no time do two workers own the slice (the source stops before the
// target starts), and nothing the source acknowledged is lost: the target has
// it in its log before the map names it. A move that fails before the switch
// rolls back (source owns again, target drops its copy); the map is unchanged.
// A move gives up if either node reconnected meanwhile, or was sent its assignment
// again (NodeLink.reassign: a leader change or a removal elsewhere sends it to every
// node), because an Assign sets the node's slices from the map afresh and ends its
// moves: before the switch the map still names the source, so a source that takes an
// Assign after MoveFreeze owns the slice again and acknowledges writes that the
// target, holding the slice as of the freeze, would not have after the switch. The
// check right before the switch sees every Assign sent since the move began.
import { performance } from 'node:perf_hooks';
import { assert, KeysliceError, toKeysliceError } from '../../shared/errors.js';
import {
  MOVE_CATCH_UP_ROUNDS_MAX,
  MOVE_CHANGES_MAX,
  MOVE_CHUNK_ITEMS,
  MOVE_FREEZE_CHANGES_MAX,
  MOVE_TIME_MS_MAX,
  PAGE_BYTES_MAX,
} from '../../shared/limits.js';
import { MalformedFrame, SliceOp, type MoveCursor, type MoveReadResult, type SliceOpMessage } from '../../shared/protocol.js';
import { MapSaveError, type ClusterMap } from './cluster-map.js';
import type { NodeLink } from './node-link.js';

export type MovePhase = 'copy' | 'catch-up' | 'freeze' | 'switch';

export interface MoveProgress {
  slice: number;
  from: string;
  to: string;
  phase: MovePhase;
  items: number;
  bytes: number;
  copied: number;
  /** When the move began, on the wall clock (Date.now()): status sends it and `keyslice status` shows the move's age
   * from it. Not the clock of the move's time bound (move: a wall clock stepped forward would end a move at once). */
  startedAt: number;
}

/** Items per second, shared by every move: each copy step waits for its share. On the monotonic clock: on Date.now()'s
 * a wall clock stepped back (an NTP step, a VM resumed) left nextAt the step ahead, and the next copy step waited that
 * long. */
export class Throttle {
  private nextAt = 0;
  constructor(private readonly itemsPerSecond: number) {}

  async take(items: number): Promise<void> {
    if (this.itemsPerSecond <= 0) return;
    const now = performance.now();
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + (items * 1000) / this.itemsPerSecond;
    if (at > now) await new Promise((r) => setTimeout(r, at - now));
  }
}

export class SliceMover {
  /** Moves in flight, by slice. */
  readonly moving = new Map<number, MoveProgress>();
  /** Slices between freeze and switch: scans of them wait. */
  private readonly frozen = new Map<number, (() => void)[]>();
  completed = 0;
  failed = 0;
  itemsMoved = 0;
  lastError = '';
  /** Called when a slice freezes or thaws (routers are told: metadata/feed.ts). */
  onFrozenChange: () => void = () => {};

  constructor(
    private readonly map: ClusterMap,
    private readonly links: readonly NodeLink[],
    private readonly throttle: Throttle,
    private readonly log: (line: string) => void,
  ) {}

  /** Resolves when no slice in [from, to) is frozen (at once, usually). Bounded by the freeze itself. */
  async unfrozen(from: number, to: number): Promise<void> {
    for (const [slice] of this.frozen) {
      if (slice >= from && slice < to) await new Promise<void>((r) => this.frozen.get(slice)?.push(r) ?? r());
    }
  }

  /** Slices between freeze and switch now. */
  frozenSlices(): number[] {
    return [...this.frozen.keys()];
  }

  /** Moves `slice` to node `to`. Resolves true when it moved, false when it rolled back. */
  async move(slice: number, to: number): Promise<boolean> {
    const from = this.map.ownerOf(slice);
    assert(from >= 0 && from !== to, 'a move goes from one node to another');
    assert(!this.moving.has(slice), 'one move per slice at a time');
    const source = this.links[from];
    const target = this.links[to];
    const generations = [source.generation, target.generation];
    const reassigns = [source.reassignsSent, target.reassignsSent];
    const progress: MoveProgress = { slice, from: source.url, to: target.url, phase: 'copy', items: 0, bytes: 0, copied: 0, startedAt: Date.now() };
    // The bound's own clock, monotonic: on startedAt's a wall clock stepped forward an hour rolled back every move in
    // flight at its next step ("took longer than 600 s"), and stepped back let one run the step past the bound.
    const began = performance.now();
    this.moving.set(slice, progress);
    const onSource = <Op extends SliceOpMessage>(op: Op) => source.send(slice, op);
    const onTarget = <Op extends SliceOpMessage>(op: Op) => target.send(slice, op);
    const checkNodes = () => {
      if (performance.now() - began > MOVE_TIME_MS_MAX) throw new KeysliceError('Unavailable', `the move took longer than ${MOVE_TIME_MS_MAX / 1000} s`);
      if (source.state !== 'ready' || target.state !== 'ready' || source.generation !== generations[0] || target.generation !== generations[1]) {
        throw new KeysliceError('Unavailable', 'a node of the move disconnected or reconnected');
      }
      // An Assign in flight when the move began may reach the node at any step; one sent since then too.
      if (source.reassignInFlight || target.reassignInFlight || source.reassignsSent !== reassigns[0] || target.reassignsSent !== reassigns[1]) {
        throw new KeysliceError('Unavailable', 'a node of the move was sent its assignment again meanwhile, which ends the move there');
      }
    };
    let switched = false;
    try {
      checkNodes();
      await onTarget([SliceOp.MoveBegin, slice]);
      const [items, bytes] = await onSource([SliceOp.MoveStart, slice]);
      progress.items = items;
      progress.bytes = bytes;
      let cursor: MoveCursor = null;
      // Each read moves the cursor forward by a chunk of items or a page of bytes, whichever
      // ends first, so the copy ends after about that many reads; items written meanwhile
      // can add some, so the bound has room.
      const readsMax = Math.ceil((items * 2) / MOVE_CHUNK_ITEMS) + Math.ceil((bytes * 2) / PAGE_BYTES_MAX) + 10;
      // An empty slice has nothing to copy: whatever is written meanwhile comes with the freeze.
      let done = items === 0;
      for (let reads = 0; !done; reads++) {
        if (reads >= readsMax) throw new KeysliceError('Unavailable', `the copy did not finish within ${readsMax} reads`);
        checkNodes();
        const [changes, chunk, effects, next, last]: MoveReadResult = await onSource([SliceOp.MoveRead, slice, cursor, MOVE_CHUNK_ITEMS]);
        this.checkChanges(changes);
        await onTarget([SliceOp.MoveApply, slice, effects, false]);
        progress.copied += chunk;
        cursor = next;
        done = last;
        await this.throttle.take(chunk + changes);
      }
      progress.phase = 'catch-up';
      for (let round = 0; round < MOVE_CATCH_UP_ROUNDS_MAX && items > 0; round++) {
        checkNodes();
        const [changes, , effects] = await onSource([SliceOp.MoveRead, slice, null, 0]);
        this.checkChanges(changes);
        if (changes > 0) await onTarget([SliceOp.MoveApply, slice, effects, false]);
        if (changes < MOVE_FREEZE_CHANGES_MAX) break;
      }
      progress.phase = 'freeze';
      checkNodes();
      this.frozen.set(slice, []);
      // Routers scan by the map of their feed, not by this process's frozen set: a new epoch
      // whose view names the slice frozen, sent to the nodes before the freeze, so that a
      // batch of a router that does not know of the freeze yet is refused WrongOwner (the
      // router then waits for the view with the freeze) instead of scanning a slice that no
      // worker owns. Scans already let in ran before the freeze, on the owner.
      this.map.bumpEpoch();
      for (const l of this.links) l.sendEpoch(this.map.epoch);
      this.onFrozenChange();
      const last = await onSource([SliceOp.MoveFreeze, slice]);
      await onTarget([SliceOp.MoveApply, slice, last, true]);
      progress.phase = 'switch';
      checkNodes(); // synchronous from here to the switch: no reconnect nor Assign can come between
      // The switch is the slice's one replica-set change ({from} -> {to}), which the map starts only once the one before
      // settled (ClusterMap.save asserts it): a slice whose set changed meanwhile, or has not settled, rolls back here
      // as an expected failure, so that the assertion is left to catch a bug.
      const set = this.map.replicasOf(slice);
      if (set.length !== 1 || set[0] !== from || !this.map.isSettled(slice)) {
        throw new KeysliceError('Unavailable', `the slice's replica set changed during the move (now ${set.join(',')}) or its last change has not settled`);
      }
      this.map.setOwner(slice, to);
      switched = true;
      for (const l of this.links) l.sendEpoch(this.map.epoch);
      this.unfreeze(slice);
      onSource([SliceOp.MoveDrop, slice]).catch((err) => this.log(`slice ${slice}: the old copy on ${source.url} stays until it is moved there again (${toKeysliceError(err).message})`));
      this.completed++;
      this.itemsMoved += progress.copied;
      return true;
    } catch (err) {
      if (switched) throw err; // a bug after the switch: let it show
      // Expected failures roll the move back: a node's typed error or malformed answer, a map that cannot be written.
      // Anything else (a broken invariant, setOwner's included) is a bug: let it show.
      if (!(err instanceof KeysliceError || err instanceof MapSaveError || err instanceof MalformedFrame)) throw err;
      this.failed++;
      this.lastError = `slice ${slice} ${source.url} -> ${target.url}: ${toKeysliceError(err).message}`;
      this.log(`move rolled back: ${this.lastError}`);
      // Roll back. If a node is down, its reassignment on reconnect does the same.
      await Promise.allSettled([onSource([SliceOp.MoveAbort, slice, 'source']), onTarget([SliceOp.MoveAbort, slice, 'target'])]);
      this.unfreeze(slice);
      return false;
    } finally {
      this.moving.delete(slice);
    }
  }

  private checkChanges(changes: number): void {
    if (changes > MOVE_CHANGES_MAX) throw new KeysliceError('Unavailable', `the slice changed ${changes} times between two copy steps; writes outpace the move`);
  }

  private unfreeze(slice: number): void {
    const waiters = this.frozen.get(slice);
    if (!this.frozen.delete(slice)) return;
    this.onFrozenChange();
    for (const w of waiters ?? []) w();
  }
}

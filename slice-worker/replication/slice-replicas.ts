// The replicas of a worker's slices, on the worker's store: the bridge between the
// replication core (replica.ts, one Replica per slice) and the worker's
// partitions (partition.ts). worker.ts creates one per worker (docs/replication.md).
//
// - A record's payload is the effects of one task on one slice (log-format.ts),
//   so a follower applies a committed record with store.replay(), the path WAL
//   recovery uses; a table drop becomes a drop of that table's part of each slice.
// - The leader executes writes against its store before they are committed (as
//   the worker does now) and proposes their effects; records of its own term are
//   therefore already applied when they commit and are skipped. It executes only
//   while its replica serves (its barrier is committed, so every older record it
//   holds is applied first). A deposed leader's store is rebuilt from its
//   snapshot and committed records (replayCommitted), dropping what it executed
//   that was never committed.
// - The disk is the worker's replica log (replica-log.ts).
import { performance } from 'node:perf_hooks';
import { decodeEffects, encodeEffectsOwned } from '../log-format.js';
import { EFFECT_DELETE, EFFECT_DROP_SLICE, EFFECT_DROP_TABLE, EFFECT_SET, type Effect, type SliceStore } from '../partition.js';
import type { ReplicaLog } from './replica-log.js';
import { Replica, type ReplicaId, type ReplicationMessage } from './replica.js';

export interface SliceReplicaEvents {
  /** The leader of `slice` committed up to `index`: answers waiting on it may go. */
  committed?(slice: number, index: number): void;
  /** This worker stopped leading `slice`: answers still waiting have an unknown outcome. */
  deposed?(slice: number, term: number): void;
}

export class SliceReplicas {
  private readonly replicas = new Map<number, Replica>();

  constructor(
    private readonly self: ReplicaId,
    private readonly store: SliceStore,
    /** The worker's replica log (or, in the simulation, its seeded disk). */
    private readonly log: Pick<ReplicaLog, 'diskFor' | 'durable' | 'sliceIds'>,
    private readonly send: (slice: number, to: ReplicaId, message: ReplicationMessage) => void,
    private readonly events: SliceReplicaEvents = {},
    /** A monotonic clock in ms (Replica's host.now): the simulation passes its own. */
    private readonly now: () => number = () => performance.now(),
  ) {
    // At start, every slice the log holds comes back: its committed records are applied to the store.
    for (const slice of log.sliceIds) this.of(slice);
  }

  /** The replica of `slice`, started from the log on first use. */
  of(slice: number): Replica {
    let r = this.replicas.get(slice);
    if (r === undefined) {
      r = this.start(slice);
      this.replicas.set(slice, r);
    }
    return r;
  }

  receive(slice: number, from: ReplicaId, message: ReplicationMessage): void {
    this.of(slice).receive(from, message);
  }

  /** This worker's node is no longer a replica of `slice` (its replica set changed): its replica stops leading. */
  resign(slice: number): void {
    this.replicas.get(slice)?.resign();
  }

  /** The slices this worker holds a replica of (started from the log, or since). */
  held(): number[] {
    return [...this.replicas.keys()];
  }

  /** Forgets the replica of `slice` (its node no longer holds one: worker.ts drops its state too); a later
   * of(slice) starts one anew from the log, which the caller has emptied of it. */
  drop(slice: number): void {
    this.replicas.delete(slice);
  }

  /** Whether this worker may execute writes of `slice` now. */
  serving(slice: number): boolean {
    return this.of(slice).serving;
  }

  /** Whether this worker's follower replica of `slice` may answer an eventually consistent read from its
   * store (Replica.readable: it heard from its leader lately and has applied what it last said is committed). */
  readable(slice: number): boolean {
    return this.replicas.get(slice)?.readable ?? false;
  }

  /** Proposes the effects of one task, one record per slice; answers [slice, index] for each.
   * Every slice touched must be served here (the caller checked before executing). */
  propose(effects: Effect[]): [number, number][] {
    const bySlice = new Map<number, Effect[]>();
    const add = (slice: number, e: Effect) => {
      if (!bySlice.has(slice)) bySlice.set(slice, []);
      bySlice.get(slice)!.push(e);
    };
    for (const e of effects) {
      if (e[0] === EFFECT_SET || e[0] === EFFECT_DELETE) add(e[2], e);
      else if (e[0] === EFFECT_DROP_SLICE) add(e[1], e);
      else if (e[0] === EFFECT_DROP_TABLE) for (const [slice, r] of this.replicas) if (r.isLeader) add(slice, [EFFECT_DROP_SLICE, slice, e[1]]);
    }
    const out: [number, number][] = [];
    for (const [slice, list] of bySlice) {
      const index = this.of(slice).propose(encodeEffectsOwned(list));
      if (index === null) throw new Error(`invariant broken: effects of slice ${slice} were made while this worker does not lead it`);
      out.push([slice, index]);
    }
    return out;
  }

  /** The leaders' heartbeat to their followers (resends what was not acknowledged, and the commit index) and
   * their keep-alives (Replica.tick). */
  tick(): void {
    for (const r of this.replicas.values()) if (r.isLeader) r.tick();
  }

  /** How many replicas lead, and how many of those serve (their barrier is committed), for a trace. */
  leadership(): { leading: number; serving: number } {
    let leading = 0;
    let serving = 0;
    for (const r of this.replicas.values()) {
      if (r.isLeader) leading++;
      if (r.serving) serving++;
    }
    return { leading, serving };
  }

  /** Compacts every replica's log into a snapshot of its applied state (a leader holding uncommitted
   * records waits for the next time); the caller then checkpoints the replica log. */
  compact(): void {
    for (const r of this.replicas.values()) r.compact();
  }

  private start(slice: number): Replica {
    const disk = this.log.diskFor(slice);
    let found = this.log.durable(slice);
    if (found.promisedTerm === 0 && found.snapshot === null && found.records.length === 0 && this.store.owns(slice) && this.store.sliceEntries(slice).next().done !== true) {
      // The slice had one replica (R=1), this worker's, and it is replicated from now on (a node joined): its
      // items are in the worker log alone. They become the replica's first state, a snapshot at index 1 of
      // term 1 (no election uses term 1), so that an election (largest last record) chooses this replica and
      // the others get them as a snapshot. Without it the replica started empty and the items were dropped.
      const state = encodeEffectsOwned([...this.store.sliceEntries(slice)]);
      disk.write({ kind: 'snapshot', index: 1, term: 1, state });
      found = { promisedTerm: 0, snapshot: { index: 1, term: 1, state }, records: [], commitIndex: 1 };
    }
    // Set once constructed: the constructor already applies what the log holds as committed.
    let replica: Replica | undefined;
    replica = new Replica(
      this.self,
      {
        send: (to, m) => this.send(slice, to, m),
        disk,
        apply: (record) => {
          // A leader's own records were executed here before they were proposed.
          if (replica?.isLeader === true && record.term === replica.term) return;
          if (record.payload.length === 0) return;
          for (const e of decodeEffects(record.payload)) this.store.replay(e);
        },
        restore: (state) => {
          this.store.replay([EFFECT_DROP_SLICE, slice, null]);
          if (state !== null) for (const e of decodeEffects(state)) this.store.replay(e);
        },
        snapshotState: () => encodeEffectsOwned([...this.store.sliceEntries(slice)]),
        committed: (index) => this.events.committed?.(slice, index),
        now: this.now,
        deposed: (term) => {
          // The store ran ahead of the commit point: put it back to exactly what is committed.
          replica!.replayCommitted();
          this.events.deposed?.(slice, term);
        },
      },
      found,
    );
    return replica;
  }
}

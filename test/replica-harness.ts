// One slice's replicas on workers' real stores and replica logs, with their messages passed by hand
// (test/slice-replicas.test.ts): a queue of what each worker sends, links that can be cut, a pump that
// delivers round by round (the logs flush between rounds), and an election as the coordinator holds one.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { expect } from 'vitest';
import { REPLICA_RESEND_MS_MAX } from '../shared/limits.js';
import { SliceStore } from '../slice-worker/partition.js';
import { ReplicaLog } from '../slice-worker/replication/replica-log.js';
import { COORDINATOR, type ReplicationMessage } from '../slice-worker/replication/replica.js';
import { SliceReplicas, type SliceReplicaEvents } from '../slice-worker/replication/slice-replicas.js';

export interface ReplicaWorker {
  store: SliceStore;
  replicas: SliceReplicas;
  log: ReplicaLog;
}

export interface Sent {
  from: number;
  to: number;
  m: ReplicationMessage;
}

export interface HarnessOptions {
  /** Each worker's events (commits, depositions). */
  events?: (i: number) => SliceReplicaEvents;
  /** Each worker's wall clock (request-id times). */
  wallNow?: (i: number) => () => number;
  /** Sees every message before it is delivered or dropped on a cut link. */
  onMessage?: (s: Sent) => void;
}

export class ReplicaHarness {
  queue: Sent[] = [];
  /** Links that drop what is sent on them: "a-b" (either way). */
  readonly cut = new Set<string>();
  readonly workers: ReplicaWorker[] = [];
  /** Added to the workers' monotonic clock (later()). */
  private skew = 0;

  constructor(
    private readonly dir: string,
    private readonly slice: number,
    count: number,
    private readonly options: HarnessOptions = {},
  ) {
    for (let i = 0; i < count; i++) this.start(i);
  }

  /** Starts worker `i` (again: a restart) from its replica log. */
  start(i: number): ReplicaWorker {
    const store = new SliceStore(0, 1);
    const { log } = ReplicaLog.open(join(this.dir, `worker-${i}`), 'fsync');
    const replicas = new SliceReplicas(i, store, log, (_slice, to, m) => this.queue.push({ from: i, to, m }), this.options.events?.(i) ?? {}, () => performance.now() + this.skew, this.options.wallNow?.(i));
    return (this.workers[i] = { store, replicas, log });
  }

  /** Moves the workers' clock past the longest a leader waits for a follower's answer before it resends (a tick
   * that comes after resends what was not answered). */
  later(): void {
    this.skew += REPLICA_RESEND_MS_MAX;
  }

  /** Delivers messages round by round until none is left; past 50 rounds it throws, unless `bounded` (then it stops). */
  async pump(bounded = false): Promise<void> {
    for (let round = 0; round < 50; round++) {
      await new Promise((r) => setImmediate(r));
      const now = this.queue;
      this.queue = [];
      if (now.length === 0) return;
      for (const s of now) {
        this.options.onMessage?.(s);
        if (s.to === COORDINATOR || this.cut.has(`${s.from}-${s.to}`) || this.cut.has(`${s.to}-${s.from}`)) continue;
        this.workers[s.to].replicas.receive(this.slice, s.from, s.m);
      }
    }
    if (!bounded) throw new Error('messages still flowing after 50 rounds');
  }

  /** Prepare(term) to `voters`, then Lead to `leader` with every other worker as a follower; it must then serve. */
  async elect(leader: number, term: number, voters: number[], bounded = false): Promise<void> {
    for (const v of voters) this.workers[v].replicas.receive(this.slice, COORDINATOR, { type: 'Prepare', term });
    await this.pump(bounded);
    const followers = this.workers.map((_, i) => i).filter((i) => i !== leader);
    this.workers[leader].replicas.receive(this.slice, COORDINATOR, { type: 'Lead', term, followers, sets: [] });
    await this.pump(bounded);
    expect(this.workers[leader].replicas.serving(this.slice)).toBe(true);
  }
}

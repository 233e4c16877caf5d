// The failover run of bench/failover.ts and test/failover-process.test.ts: a real
// local cluster (3 slice nodes, the chosen durability and replication factor),
// writers putting unique keys with known values, and a chaos loop that SIGKILLs
// (and restarts) or SIGSTOPs (and SIGCONTs) one slice node at a time, in turn.
// Every attempt is recorded (acknowledged, refused with its code, or of unknown
// outcome: timed out or its connection lost); at the end the cluster is let
// settle and every item is read back: no acknowledged write may be lost, no item
// may be there that no writer attempted, and every value must be the one written.
// Every loop is bounded in count and time; every process is stopped by its PID,
// also when the run fails or is aborted.
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster, startSliceNode, stopProcess, type LocalCluster, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import { KeysliceError } from '../shared/errors.js';
import { initHashing, sliceOf } from '../shared/hashing.js';
import type { DurabilityMode } from '../shared/limits.js';
import { benchTempDir, removeBenchDir } from './stop-all.js';

export type ChaosMode = 'kill' | 'stop';

export interface FailoverOptions {
  mode: ChaosMode;
  /** Coordinator --replication-factor. */
  replicationFactor: number;
  writers: number;
  /** Time from one chaos event to the next (a stop lasts stopMs, so a stop cycle lasts at least that). */
  periodMs: number;
  cycles: number;
  /** mode stop: how long a node stays frozen. */
  stopMs: number;
  workers: number;
  durability: DurabilityMode;
  /** A write with no answer after this long counts as timed out (outcome unknown). */
  requestTimeoutMs: number;
  /** A writer waits this long after a refused or timed-out write (as a client backs off). */
  errorPauseMs: number;
  /** Client WebSocket connections the writers share. */
  connections: number;
  /** How long the cluster may take to serve every slice again after the chaos. */
  settleMs: number;
  /** Progress lines (stderr in the bench). */
  progress?: (line: string) => void;
  /** Every line of the cluster's processes. */
  log?: (line: string) => void;
}

export const FAILOVER_DEFAULTS: FailoverOptions = {
  mode: 'kill',
  replicationFactor: 3,
  writers: 24,
  periodMs: 3000,
  cycles: 100,
  stopMs: 4000,
  workers: 2,
  durability: 'fsync',
  requestTimeoutMs: 10_000,
  errorPauseMs: 100,
  connections: 4,
  settleMs: 60_000,
};

const NODES = 3;
const TABLE = 'failover';
const DESCRIBE_TIMEOUT_MS = 5_000;
const SCAN_PAGE_ITEMS = 5_000;
const SCAN_TRIES_MAX = 5;
/** What a value holds besides its key, so that items are of a realistic size (about 100 bytes). */
const PAD = 'x'.repeat(64);

/** One chaos event: which node, when, and the slices it led just before. */
export interface ChaosEvent {
  node: string;
  signalAt: number;
  /** mode stop: when it was continued. */
  resumedAt: number | null;
  slices: number;
  /** From the signal to the first acknowledged write, sent after the signal, on a slice the node led (null: none seen). */
  failoverMs: number | null;
}

export interface FailoverResult {
  options: Omit<FailoverOptions, 'progress' | 'log'>;
  /** From the first write to the last answer, ms. */
  durationMs: number;
  attempts: number;
  acknowledged: number;
  /** Refused writes by error code. */
  refused: Record<string, number>;
  /** No answer within requestTimeoutMs. */
  timedOut: number;
  /** The connection to the cluster closed with the write in flight. */
  connectionLost: number;
  /** Latency of every attempt and of the acknowledged ones, ms. */
  latencyMs: { p50: number; p99: number; max: number };
  ackLatencyMs: { p50: number; p99: number; max: number };
  events: ChaosEvent[];
  /** unobserved: events on a node that led slices holding items, with no acknowledged write on one of them seen after
   * it (an event on a node that led none has no failover: see `events`, `slices` 0). */
  failoverMs: { p50: number | null; p99: number | null; max: number | null; unobserved: number };
  settledMs: number;
  /** The read-back. */
  stored: number;
  lost: string[];
  phantoms: string[];
  wrongValues: string[];
  duplicates: number;
  /** Writes refused or of unknown outcome that were found stored (allowed: their outcome was not known). */
  unacknowledgedStored: number;
  /** mode stop: writes on a frozen node's slices acknowledged after it was continued, and how many of them were lost. */
  ackedAfterWake: number;
  ackedAfterWakeLost: number;
}

/** A run in progress: `abort` ends the chaos and the writers early (the checks still run);
 * `killNow` SIGKILLs (after SIGCONT) every process of the cluster at once, for a second Ctrl-C. */
export interface FailoverRun {
  result: Promise<FailoverResult>;
  abort(): void;
  killNow(): void;
}

interface Attempt {
  slice: number;
  sentAt: number;
  /** 'ack', an error code, 'timeout' or 'lost'. */
  outcome: string;
  latencyMs: number;
  afterWake: boolean;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function summary(values: number[]): { p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.length === 0 ? 0 : sorted[sorted.length - 1] };
}

export function valueOf(nonce: string, key: string): string {
  return `${nonce}:${key}:${PAD}`;
}

function outcomeOf(err: unknown): string {
  if (!(err instanceof KeysliceError)) return 'ClientError';
  if (err.code === 'Unavailable' && /got no answer within/.test(err.message)) return 'timeout';
  if (err.code === 'Unavailable' && /^connection to .* closed/.test(err.message)) return 'lost';
  return err.code;
}

export function startFailover(opts: FailoverOptions): FailoverRun {
  const abort = new AbortController();
  const progress = opts.progress ?? (() => {});
  const children = new Set<ChildProcess>();
  /** Exits we caused (SIGKILL of the chaos, the stop at the end); any other exit fails the run. */
  const expectedExits = new Set<ChildProcess>();
  let unexpectedExit: string | null = null;
  const watch = (p: ManagedProcess) => {
    children.add(p.child);
    p.child.once('exit', (code, signal) => {
      children.delete(p.child);
      if (!expectedExits.has(p.child) && unexpectedExit === null) {
        unexpectedExit = `${p.name} (pid ${p.child.pid}) exited by itself (${signal ?? code})`;
        abort.abort();
      }
    });
  };
  const killNow = () => {
    for (const c of children) {
      expectedExits.add(c);
      c.kill('SIGCONT');
      c.kill('SIGKILL');
    }
  };

  const run = async (): Promise<FailoverResult> => {
    await initHashing();
    const dataDir = benchTempDir('keyslice-failover-');
    let cluster: LocalCluster | null = null;
    let client: KeysliceClient | null = null;
    try {
      cluster = await startLocalCluster({ dataDir, nodes: NODES, workers: opts.workers, durability: opts.durability, replicationFactor: opts.replicationFactor, log: opts.log });
      for (const p of [cluster.coordinator, ...cluster.nodes]) watch(p);
      client = await KeysliceClient.connect(cluster.url, { requestTimeoutMs: opts.requestTimeoutMs, connections: opts.connections });
      await client.createTable(TABLE, { name: 'id', type: 'string' });
      const sliceCount = (await client.describeSlices(TABLE)).sliceCount;
      const nonce = `${process.pid}-${Date.now()}`;
      const attempts: Attempt[] = [];
      /** The key of each attempt, by its index in attempts. */
      const keys: string[] = [];
      const sent = new Array<number>(opts.writers).fill(0);
      const events: ChaosEvent[] = [];
      const eventSlices: Set<number>[] = [];
      /** Events whose failover time is not known yet. */
      let open: number[] = [];
      let stopWriters = false;
      const start = performance.now();
      // Bounded: the chaos's own length, twice, plus the stops and the request timeout.
      const writersDeadline = start + 2 * opts.cycles * (Math.max(opts.periodMs, opts.mode === 'stop' ? opts.stopMs : 0) + 30_000) + opts.requestTimeoutMs;

      const writer = async (w: number) => {
        const c = client!;
        while (!stopWriters && performance.now() < writersDeadline) {
          const key = `w${w}-${sent[w]++}`;
          const a: Attempt = { slice: sliceOf('string', key, sliceCount), sentAt: performance.now(), outcome: 'ack', latencyMs: 0, afterWake: false };
          attempts.push(a);
          keys.push(key);
          try {
            await c.putItem(TABLE, { id: key, v: valueOf(nonce, key) });
          } catch (err) {
            a.outcome = outcomeOf(err);
          }
          const now = performance.now();
          a.latencyMs = now - a.sentAt;
          if (a.outcome === 'ack') {
            if (open.length > 0) {
              for (const i of open) {
                if (a.sentAt < events[i].signalAt || !eventSlices[i].has(a.slice)) continue;
                events[i].failoverMs = now - events[i].signalAt;
                opts.log?.(`[bench] event ${i + 1} (${events[i].node}): failover ${Math.round(now - events[i].signalAt)} ms (slice ${a.slice})`);
              }
              open = open.filter((i) => events[i].failoverMs === null);
            }
            // A frozen node's write, answered once it was continued: the check below must find it.
            for (let i = events.length - 1; i >= 0 && i >= events.length - 2; i--) {
              const e = events[i];
              if (e.resumedAt !== null && a.sentAt < e.resumedAt && now >= e.resumedAt && eventSlices[i].has(a.slice)) a.afterWake = true;
            }
          } else if (!stopWriters) {
            await sleep(opts.errorPauseMs);
          }
        }
      };
      const writing = Promise.all(Array.from({ length: opts.writers }, (_, w) => writer(w)));

      /** The slices `url` leads now, by the cluster's own account (null: it did not answer). */
      const ledBy = async (url: string): Promise<Set<number> | null> => {
        const t = await Promise.race([client!.describeSlices(TABLE).catch(() => null), sleep(DESCRIBE_TIMEOUT_MS).then(() => null)]);
        if (t === null) return null;
        const slices = new Set(t.slices.filter((s) => s.node === url).map((s) => s.slice));
        for (const u of t.unreported) if (u.node === url) for (const s of u.slices) slices.add(s);
        return slices;
      };

      let lastLed: Set<number>[] = cluster.nodes.map(() => new Set());
      const cycleMs = Math.max(opts.periodMs, opts.mode === 'stop' ? opts.stopMs : 0);
      for (let cycle = 0; cycle < opts.cycles && !abort.signal.aborted; cycle++) {
        const due = start + (cycle + 1) * cycleMs;
        await sleep(Math.max(0, due - performance.now()), undefined, { signal: abort.signal }).catch(() => {});
        if (abort.signal.aborted) break;
        const i = cycle % NODES;
        const node = cluster.nodes[i];
        const led = (await ledBy(node.url)) ?? lastLed[i];
        lastLed[i] = led;
        const event: ChaosEvent = { node: node.name, signalAt: performance.now(), resumedAt: null, slices: led.size, failoverMs: null };
        events.push(event);
        eventSlices.push(led);
        // A node that led no slice holding items (early in a short run) has no failover to see: not waited for below.
        if (led.size > 0) open.push(events.length - 1);
        if (opts.mode === 'kill') {
          expectedExits.add(node.child);
          await stopProcess(node.child, 'SIGKILL');
          const again = await startSliceNode({
            name: node.name,
            dataDir: join(dataDir, node.name),
            port: Number(new URL(node.url).port),
            workers: opts.workers,
            durability: opts.durability,
            clusterSecret: cluster.clusterSecret,
            log: opts.log,
          });
          node.child = again.child;
          watch(node);
          opts.log?.(`[bench] ${node.name} restarted (ready ${Math.round(performance.now() - event.signalAt)} ms after the SIGKILL)`);
        } else {
          node.child.kill('SIGSTOP');
          await sleep(opts.stopMs, undefined, { signal: abort.signal }).catch(() => {});
          node.child.kill('SIGCONT');
          event.resumedAt = performance.now();
        }
        progress(`${opts.mode} ${cycle + 1}/${opts.cycles}: ${node.name} (${led.size} slices led); ${attempts.length} writes so far`);
      }
      // Let the last event's slices serve again before the writers stop, so that its failover is seen (bounded).
      const lastWait = performance.now() + Math.min(opts.settleMs, 15_000);
      while (open.length > 0 && !abort.signal.aborted && performance.now() < lastWait) await sleep(50);
      stopWriters = true;
      await writing;
      const durationMs = performance.now() - start;
      if (unexpectedExit !== null) throw new Error(unexpectedExit);

      // Settle: every slice answers again (bounded).
      const settleStart = performance.now();
      let settled = false;
      while (!settled && performance.now() - settleStart < opts.settleMs) {
        const t = await client.describeSlices(TABLE).catch(() => null);
        settled = t !== null && t.complete;
        if (!settled) await sleep(200);
      }
      if (!settled) throw new Error(`the cluster did not serve every slice within ${opts.settleMs} ms after the chaos`);
      const settledMs = performance.now() - settleStart;

      // Read every item back (a scan of the whole table; retried, bounded, if a page fails).
      let items: Awaited<ReturnType<KeysliceClient['getAllItems']>> | null = null;
      for (let tries = 0; items === null; tries++) {
        try {
          items = await client.getAllItems({ table: TABLE, limit: SCAN_PAGE_ITEMS });
        } catch (err) {
          if (tries + 1 >= SCAN_TRIES_MAX) throw err;
          await sleep(500);
        }
      }
      const stored = new Map<string, unknown>();
      let duplicates = 0;
      for (const item of items) {
        const id = String(item.id);
        if (stored.has(id)) duplicates++;
        stored.set(id, item.v);
      }
      const phantoms: string[] = [];
      const wrongValues: string[] = [];
      for (const [id, v] of stored) {
        const m = /^w(\d+)-(\d+)$/.exec(id);
        if (m === null || Number(m[1]) >= opts.writers || Number(m[2]) >= sent[Number(m[1])]) phantoms.push(id);
        else if (v !== valueOf(nonce, id)) wrongValues.push(id);
      }
      const lost: string[] = [];
      let unacknowledgedStored = 0;
      let ackedAfterWake = 0;
      let ackedAfterWakeLost = 0;
      const refused: Record<string, number> = {};
      let acknowledged = 0;
      let timedOut = 0;
      let connectionLost = 0;
      attempts.forEach((a, n) => {
        const key = keys[n];
        const there = stored.has(key);
        if (a.outcome === 'ack') {
          acknowledged++;
          if (!there) lost.push(key);
          if (a.afterWake) {
            ackedAfterWake++;
            if (!there) ackedAfterWakeLost++;
          }
        } else {
          if (there) unacknowledgedStored++;
          if (a.outcome === 'timeout') timedOut++;
          else if (a.outcome === 'lost') connectionLost++;
          else refused[a.outcome] = (refused[a.outcome] ?? 0) + 1;
        }
      });
      const failovers = events.map((e) => e.failoverMs).filter((m): m is number => m !== null);
      const f = summary(failovers);
      const { progress: _p, log: _l, ...options } = opts;
      return {
        options,
        durationMs,
        attempts: attempts.length,
        acknowledged,
        refused,
        timedOut,
        connectionLost,
        latencyMs: summary(attempts.map((a) => a.latencyMs)),
        ackLatencyMs: summary(attempts.filter((a) => a.outcome === 'ack').map((a) => a.latencyMs)),
        events,
        failoverMs: { p50: failovers.length ? f.p50 : null, p99: failovers.length ? f.p99 : null, max: failovers.length ? f.max : null, unobserved: events.filter((e) => e.slices > 0).length - failovers.length },
        settledMs,
        stored: stored.size,
        lost,
        phantoms,
        wrongValues,
        duplicates,
        unacknowledgedStored,
        ackedAfterWake,
        ackedAfterWakeLost,
      };
    } finally {
      await client?.close();
      if (cluster !== null) {
        for (const p of [cluster.coordinator, ...cluster.nodes]) {
          expectedExits.add(p.child);
          p.child.kill('SIGCONT'); // a frozen process would not see the SIGTERM
        }
        await cluster.stop();
      }
      killNow(); // anything left (a node started while the run was failing)
      removeBenchDir(dataDir);
    }
  };
  return { result: run(), abort: () => abort.abort(), killNow };
}

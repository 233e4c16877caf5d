// Test fixture for an elastic cluster: a coordinator started without nodes and
// slice nodes that register themselves (or, asked, that the coordinator is given
// by address); a write load whose every acknowledged
// write can be checked afterwards; and polling of /cluster/status.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startCoordinator, startSliceNode, stopProcess, type ManagedProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { KeysliceError } from '../shared/errors.js';
import { led, testLog } from './cluster-fixture.js';
import { thawProcesses } from './freeze.js';

export const SECRET = 'test-cluster-secret';

export interface Elastic {
  dataDir: string;
  coordinator: ManagedProcess;
  nodes: ManagedProcess[];
  client: KeysliceClient;
  addNode(workers?: number, port?: number, name?: string): Promise<ManagedProcess>;
  /** SIGKILLs the coordinator and starts it again on its address and folder; reconnects the client. */
  restartCoordinator(): Promise<void>;
  status(): Promise<ClusterStatus>;
  /** What status() last answered (undefined: none yet), for a wait that timed out to say what it saw (seen). */
  lastStatus?: ClusterStatus;
  post(action: 'add' | 'drain' | 'remove', node: string): Promise<{ status: number; body: unknown }>;
  stop(): Promise<void>;
}

/** A coordinator with `slices` slices and `nodes` registered slice nodes (started together once it listens, each
 * waited for; `oneByOne`: each once the one before is up; a story that adds a node later still adds it: addNode). `heartbeat: false`: the
 * nodes do not register, the coordinator is started with their addresses (--nodes; one added later is posted to
 * /cluster/add, as `keyslice add`), so a node is up while its link is open and something came from it within
 * NODE_HEARTBEAT_TIMEOUT_MS (the coordinator pings each link each turn): a frozen one keeps its link open (no heartbeat
 * stops, so isUp stays true for remove and handovers) but counts down for placement, status and a drain step 5 s after
 * its last pong (Membership.countsUp). */
export async function startElastic(opts: { nodes: number; slices: number; moveItemsPerSecond?: number; workers?: number; replicationFactor?: number | 'auto'; coordinatorArgs?: string[]; heartbeat?: boolean; oneByOne?: boolean; log?: (line: string) => void }): Promise<Elastic> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-elastic-'));
  // Replication factor 1 unless asked: the stories written before replication move one copy of each slice.
  const extra = ['--cluster-secret', SECRET, '--replication-factor', String(opts.replicationFactor ?? 1), ...(opts.coordinatorArgs ?? [])];
  if (opts.moveItemsPerSecond !== undefined) extra.push('--move-items-per-second', String(opts.moveItemsPerSecond));
  // Every process's output lines, to the test's own log (opts.log: a story that reads what the coordinator said) and KEYSLICE_TEST_LOG's.
  const log = opts.log === undefined ? testLog : (line: string) => (opts.log!(line), testLog?.(line));
  // Nodes known by address: their processes start together, and the coordinator starts with their addresses (--nodes,
  // as `keyslice coordinator --nodes` is), so that it places every slice's replicas over all of them at once. Added one
  // by one after it started (keyslice add), the first took every slice and the others got theirs by replica moves, which
  // each story then waited out before it began (untilSpread: 4-5 s of each frozen story at load 20). A story that adds
  // a node later still adds it (addNode).
  const byAddress = opts.heartbeat === false;
  const together = byAddress ? await startNodesTogether(dataDir, opts.nodes, opts.workers ?? 2, log) : [];
  let coordinator: ManagedProcess;
  try {
    coordinator = await startCoordinator(join(dataDir, 'coordinator'), 0, together.map((n) => n.url), opts.slices, log, extra);
  } catch (err) {
    await Promise.all(together.map((n) => stopProcess(n.child)));
    throw err;
  }
  const e: Elastic = {
    dataDir,
    coordinator,
    nodes: together,
    client: undefined as unknown as KeysliceClient,
    async addNode(workers = opts.workers ?? 2, port = 0, name = `slice-node-${e.nodes.length + 1}`) {
      const registers = opts.heartbeat ?? true;
      const node = await startSliceNode({ name, dataDir: join(dataDir, name), port, workers, coordinator: registers ? e.coordinator.url : undefined, clusterSecret: SECRET, log });
      const existing = e.nodes.findIndex((n) => n.name === name);
      if (existing >= 0) e.nodes[existing] = node;
      else e.nodes.push(node);
      if (!registers) {
        const added = await e.post('add', node.url);
        if (added.status !== 200) throw new Error(`adding ${name} at ${node.url}: ${added.status} ${JSON.stringify(added.body)}`);
      }
      await waitFor(async () => (await e.status()).nodes.some((n) => n.node === node.url && n.up), `${name} to join`, 30_000, seen(e));
      return node;
    },
    async restartCoordinator() {
      await e.client.close();
      await stopProcess(e.coordinator.child, 'SIGKILL');
      e.coordinator = await startCoordinator(join(dataDir, 'coordinator'), Number(new URL(coordinator.url).port), [], opts.slices, log, extra);
      e.client = await KeysliceClient.connect(e.coordinator.url);
    },
    async status() {
      const res = await fetch(`${e.coordinator.url}/cluster/status`, { signal: AbortSignal.timeout(10_000) });
      return (e.lastStatus = (await res.json()) as ClusterStatus);
    },
    async post(action, node) {
      const res = await fetch(`${e.coordinator.url}/cluster/${action}`, { method: 'POST', body: JSON.stringify({ node }), signal: AbortSignal.timeout(10_000) });
      return { status: res.status, body: await res.json() };
    },
    async stop() {
      await e.client?.close();
      await Promise.all([e.coordinator, ...e.nodes].map((p) => stopProcess(p.child)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    // Nodes that register: their processes start together too, once the coordinator listens, and each joins when it is
    // ready (the first to join takes every slice, the others theirs by moves, as when each start waited for the one
    // before). A cluster of 4 at R=3 took 24.4 s to start that way against 18.1 s together (medians of 6 swapped pairs,
    // lower in 5, load 24-52); on a quiet machine the difference is about a node's start per node after the first.
    // `oneByOne`: each node registering is started once the one before is up (addNode), as all were before; the 5-node
    // drain stories of replica-drain-down.test.ts failed 3 of 8 runs with their nodes started together (load 22-43: status
    // never said a slice with a dead replica waited for it before --drain-replace-down-ms, as if the drain reached them
    // only after it) and none of 5 one by one (load 16-45); why is not known.
    if (!byAddress && opts.oneByOne === true) for (let i = 0; i < opts.nodes; i++) await e.addNode();
    else if (!byAddress) e.nodes.push(...(await startNodesTogether(dataDir, opts.nodes, opts.workers ?? 2, log, coordinator.url)));
    await waitFor(
      async () => {
        const st = await e.status();
        return e.nodes.every((node) => st.nodes.some((n) => n.node === node.url && n.up));
      },
      `${opts.nodes} slice nodes to be up`,
      30_000,
      seen(e),
    );
    // e.nodes in the cluster map's order (status lists nodes by their index in it), as when each joined after the one
    // before: stories read e.nodes[i] as the map's node i (readd-draining compares status's list to e.nodes).
    const order = (await e.status()).nodes.map((n) => n.node);
    e.nodes.sort((a, b) => order.indexOf(a.url) - order.indexOf(b.url));
    e.client = await KeysliceClient.connect(e.coordinator.url);
  } catch (err) {
    await e.stop();
    throw err;
  }
  return e;
}

/** Starts `count` slice nodes (slice-node-1 on), all at once; answers them in name order. With `coordinator` they
 * register with it, without it they do not. */
function startNodesTogether(dataDir: string, count: number, workers: number, log: ((line: string) => void) | undefined, coordinator?: string): Promise<ManagedProcess[]> {
  return allStarted(Array.from({ length: count }, (_, i) => startSliceNode({ name: `slice-node-${i + 1}`, dataDir: join(dataDir, `slice-node-${i + 1}`), port: 0, workers, coordinator, clusterSecret: SECRET, log })));
}

/** The processes of `starts` (begun together), in their order, once every one has started or failed. Where one failed,
 * those that started are stopped and the first failure is thrown: none is left running for a story that never got
 * them (stopping one a caller also stops later is harmless: stopProcess of a process gone resolves at once). */
export async function allStarted(starts: Promise<ManagedProcess>[]): Promise<ManagedProcess[]> {
  const settled = await Promise.allSettled(starts);
  const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed !== undefined) {
    await Promise.all(started.map((p) => stopProcess(p.child)));
    throw failed.reason;
  }
  return started;
}

/** How many writes the coordinator's request path sent again after an unknown outcome (keyslice_writes_resent_total,
 * over its processes): each is a write whose leader was deposed, lost or silent with it in flight. */
export async function writesResent(e: Elastic): Promise<number> {
  const text = await scrape(e);
  let n = 0;
  for (const m of text.matchAll(/^keyslice_writes_resent_total(?:\{[^}]*\})? (\d+)$/gm)) n += Number(m[1]);
  return n;
}

/** The coordinator's leader elections by why they started (keyslice_elections_total, docs/metrics.md). */
export async function electionsByReason(e: Elastic): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await scrape(e)).matchAll(/^keyslice_elections_total\{[^}]*reason="([a-z_]+)"[^}]*\} (\d+)$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

async function scrape(e: Elastic): Promise<string> {
  const res = await fetch(`${e.coordinator.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  return res.text();
}

// (led is the cluster fixture's, named here too for the elastic tests that wait on it.)
export { led };

/** A drain of `node` is over: every slice led, none of its replicas left on it, no change unsettled, none waiting. */
export const drainedOff = (node: string) => (st: ClusterStatus): boolean =>
  led(st) && st.nodes.find((x) => x.node === node)!.replicas === 0 && st.replication.leaders.unsettled === 0 && st.moves.waitingSlices === 0;

/** A change that took `node` out of an R=3 cluster is over: every slice led, no change unsettled, and every replica set
 * of the map on disk (replicaSets) at 3 replicas, none of them `node`; and the status read. The map is read first: a
 * set seen on disk is in the coordinator's map by the time status is read, its change counted unsettled until it
 * settled, where the other order could pair an older status's "nothing unsettled" with a newer set not settled yet. */
export async function ledWithout(e: Elastic, node: string): Promise<{ ok: boolean; st: ClusterStatus }> {
  const sets = replicaSets(e);
  const st = await e.status();
  return { ok: led(st) && st.replication.leaders.unsettled === 0 && sets.every((set) => set.length === 3 && !set.includes(node)), st };
}

/** Waits until status says every replicated slice has an elected leader; answers that status. */
export async function untilLed(e: Elastic, timeoutMs = 30_000): Promise<ClusterStatus> {
  let st: ClusterStatus | undefined;
  await waitFor(async () => led((st = await e.status())), 'every slice to have a leader', timeoutMs, seen(e));
  return st!;
}

/** The coordinator's persisted map, the fields the tests read. */
export interface PersistedMap {
  nodes: string[];
  owners: number[];
  followers: number[][];
  /** Per slice, the replica leaving its set (a node index), or -1. */
  leaving: number[];
  termsUsed: number[];
  lastLead: ([term: number, node: number] | null)[];
}

/** The coordinator's persisted map as it is now (a read sees one whole map: it is written apart and renamed into
 * place, shared/state-file.ts). */
export function persistedMap(e: Elastic): PersistedMap {
  const m = JSON.parse(readFileSync(join(e.dataDir, 'coordinator', 'cluster-map.json'), 'utf8')) as Omit<PersistedMap, 'leaving'> & { leaving?: number[] };
  return { ...m, leaving: m.leaving ?? m.owners.map(() => -1) };
}

/** Every slice's replica set as node indexes (the owner first). */
export const replicaIndexes = (m: PersistedMap): number[][] => m.owners.map((o, s) => [o, ...m.followers[s]]);

/** Every slice's replica set as node URLs (the owner first), from the coordinator's persisted map (`m`, else read now). */
export function replicaSets(e: Elastic, m = persistedMap(e)): string[][] {
  return replicaIndexes(m).map((set) => set.map((n) => m.nodes[n]));
}

/** What drainFirstHandover found: the node drained (A, leading the most slices), the map and replica sets before the
 * drain, and the drain's first handover of a slice A led to a replica of that slice's set before the drain. */
export interface FirstHandover {
  victim: ClusterStatus['nodes'][number];
  before: PersistedMap;
  a: number;
  setsBefore: number[][];
  ledByA: number[];
  /** The slice handed over, and the node index its map names as leader now (G). */
  slice: number;
  to: number;
  givenBackBefore: number;
  givenUpBefore: number;
}

/** Drains the node leading the most slices and returns the drain's first handover: a slice A led, still holding A's
 * replica, whose map names another leader that was a replica before the drain (not the drain's new replica). The map
 * is polled every few ms: the target's election starts no sooner than a failover tick (100 ms) after the handover. */
export async function drainFirstHandover(e: Elastic): Promise<FirstHandover> {
  const st = await e.status();
  const victim = st.nodes.reduce((x, y) => (y.slices > x.slices ? y : x));
  const before = persistedMap(e);
  const a = before.nodes.indexOf(victim.node);
  const setsBefore = replicaIndexes(before);
  const ledByA = setsBefore.flatMap((set, s) => (set[0] === a ? [s] : []));
  expect(ledByA.length, 'the drained node leads slices').toBeGreaterThan(0);
  const { handoversGivenBack: givenBackBefore, handoversGivenUp: givenUpBefore } = st.replication.leaders;
  const res = await e.post('drain', victim.node);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  let slice = -1;
  let to = -1;
  const startedAt = performance.now();
  for (let i = 0; i < 10_000 && slice < 0 && performance.now() - startedAt < 30_000; i++) {
    const m = persistedMap(e);
    const sets = replicaIndexes(m);
    slice = ledByA.find((s) => m.owners[s] !== a && sets[s].includes(a) && setsBefore[s].includes(m.owners[s])) ?? -1;
    if (slice >= 0) to = m.owners[slice];
    else await new Promise((r) => setTimeout(r, 3));
  }
  expect(slice, "a handover of a slice A leads to one of that slice's replicas before the drain").toBeGreaterThanOrEqual(0);
  return { victim, before, a, setsBefore, ledByA, slice, to, givenBackBefore, givenUpBefore };
}

/** Every slice led, no move or replica-set change under way, and each node within one replica of every other. */
export function replicasSpread(st: ClusterStatus): boolean {
  const replicas = st.nodes.map((n) => n.replicas);
  const { moving, unsettled } = st.replication.leaders;
  return led(st) && st.moves.pending === 0 && moving === 0 && unsettled === 0 && Math.max(...replicas) - Math.min(...replicas) <= 1;
}

/** Each node leads within one slice of every other. */
export function leadershipsSpread(st: ClusterStatus): boolean {
  const slices = st.nodes.map((n) => n.slices);
  return Math.max(...slices) - Math.min(...slices) <= 1;
}

/** Waits until replicas and leaderships are spread over the nodes (so that no rebalancing runs while a story does) and
 * answers the status that said so. */
export async function untilSpread(e: Elastic, timeoutMs = 60_000): Promise<ClusterStatus> {
  let st: ClusterStatus | undefined;
  await waitFor(
    async () => {
      st = await e.status();
      return replicasSpread(st) && leadershipsSpread(st);
    },
    'replicas and leaderships spread over the nodes, every slice led, every change settled',
    timeoutMs,
    seen(e),
  );
  if (st === undefined) throw new Error('untilSpread: no status read');
  return st;
}

/** Polls `check` every `pollMs` until it is true; fails after `timeoutMs`, with what `describe` says of the state the
 * checks last saw (so that a CI failure tells what was stuck) and the last error a check threw. */
export async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 30_000, describe?: () => string, pollMs = 100): Promise<void> {
  const until = Date.now() + timeoutMs;
  let failed: unknown;
  while (Date.now() < until) {
    const ok = await Promise.resolve()
      .then(check)
      .catch((err: unknown) => {
        failed = err;
        return false;
      });
    if (ok) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  let seen = '';
  try {
    seen = describe?.() ?? '';
  } catch (err) {
    seen = `(cannot describe: ${(err as Error).message})`;
  }
  const threw = failed === undefined ? '' : `; a check threw: ${(failed as Error).message ?? String(failed)}`;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen === '' ? '' : `; last seen: ${seen}`}${threw}`);
}

/** For waitFor's describe: the cluster status `e` last answered, in one line (leaders, changes, moves, nodes). */
export const seen = (e: Elastic) => (): string => describeStatus(e.lastStatus);

export function describeStatus(st: ClusterStatus | undefined): string {
  if (st === undefined) return 'no status answered';
  const l = st.replication.leaders;
  const nodes = st.nodes.map((n) => `${n.node.replace(/^ws:\/\/127\.0\.0\.1:/, ':')} ${n.up ? 'up' : 'down'} ${n.status} leads ${n.slices} holds ${n.replicas}${n.unsettledChanges > 0 ? ` counted by ${n.unsettledChanges} unsettled` : ''}`);
  const waiting = st.moves.waiting.slice(0, 3).map((w) => `slice ${w.slice} (${w.node}): ${w.why}`);
  return (
    `epoch ${st.epoch}; leaders: led ${l.led} of ${l.replicated} replicated, unsettledLed ${l.unsettledLed}, unsettled ${l.unsettled}, moving ${l.moving}, ` +
    `elections ${l.elections}, terms ${l.termMin}..${l.termMax}; moves: ${st.moves.inFlight.length} in flight, ${st.moves.pending} pending, ${st.moves.waitingSlices} waiting` +
    `${waiting.length > 0 ? ` (${waiting.join('; ')})` : ''}; nodes: ${nodes.join(', ')}; note: ${st.replication.note}`
  );
}

/** Waits until no move runs or is pending and every active node has its share (±1). */
export async function waitBalanced(e: Elastic, timeoutMs = 30_000): Promise<ClusterStatus> {
  let last: ClusterStatus | undefined;
  await waitFor(
    async () => {
      last = await e.status();
      const active = last.nodes.filter((n) => n.status === 'active');
      const counts = active.map((n) => n.slices);
      const drained = last.nodes.every((n) => n.status !== 'draining' || n.slices === 0);
      return last.moves.inFlight.length === 0 && drained && Math.max(...counts) - Math.min(...counts) <= 1;
    },
    'the slices to be balanced',
    timeoutMs,
    seen(e),
  );
  return last!;
}

/**
 * A write load: `writers` loops, each owning its keys, each write an UpdateItem
 * that sets `v` to a fresh version and adds 1 to `n`. Afterwards, for every key,
 * `v` must be the last acknowledged version (or a later unacknowledged one) and
 * `n` the number of acknowledged updates (plus at most the unacknowledged ones):
 * a lost write shows as a smaller n or an old v, a duplicated one as a larger n.
 */
export class WriteLoad {
  private stopped = false;
  private readonly loops: Promise<void>[] = [];
  readonly acked = new Map<string, { v: number; n: number }>();
  readonly unsure = new Map<string, { versions: Set<number>; n: number }>();
  acks = 0;
  errors: KeysliceError[] = [];
  private version = 0;

  constructor(
    public client: KeysliceClient,
    private readonly table: string,
    writers: number,
    keysPerWriter: number,
    private readonly prefix = 'w',
  ) {
    for (let w = 0; w < writers; w++) this.loops.push(this.loop(w, keysPerWriter));
  }

  private async loop(w: number, keys: number): Promise<void> {
    for (let i = 0; i < 1_000_000 && !this.stopped; i++) {
      const id = `${this.prefix}${w}-${i % keys}`;
      const v = ++this.version;
      try {
        await this.client.updateItem(this.table, id, { set: { v }, add: { n: 1 } });
        const a = this.acked.get(id) ?? { v: 0, n: 0 };
        this.acked.set(id, { v, n: a.n + 1 });
        this.acks++;
      } catch (err) {
        if (!(err instanceof KeysliceError) || !err.retryable) throw err;
        this.errors.push(err);
        const u = this.unsure.get(id) ?? { versions: new Set<number>(), n: 0 };
        u.versions.add(v);
        u.n++;
        this.unsure.set(id, u);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  /** For waitFor's describe: how far the load got. */
  describe(): string {
    const last = this.errors.at(-1);
    return `${this.acks} updates acknowledged, ${this.errors.length} failed${last === undefined ? '' : ` (last: ${last.code} ${last.message.slice(0, 200)})`}`;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** The end of a story: lets the load run `ms` more, stops it, expects updates acknowledged in those `ms` (the
   * cluster takes writes once the story is over), then verify(bulk). Returns the item count. */
  async finish(ms: number, bulk: number): Promise<number> {
    const acksBefore = this.acks;
    await new Promise((r) => setTimeout(r, ms));
    await this.stop();
    expect(this.acks, `updates acknowledged in the load's last ${ms} ms`).toBeGreaterThan(acksBefore);
    return this.verify(bulk);
  }

  /** Reads the whole table and checks every key (see the class comment) and that the
   * `bulk` items written before the load are all there. Returns the item count. */
  async verify(bulk: number): Promise<number> {
    const items = await this.client.getAllItems({ table: this.table });
    const names = items.map((i) => i.__name as string);
    expect(new Set(names).size, 'no item appears twice in a scan').toBe(names.length);
    const byId = new Map(items.map((i) => [i.id as string, i]));
    for (const [id, a] of this.acked) {
      const item = byId.get(id);
      expect(item, `${id} was acknowledged but is missing`).toBeDefined();
      const u = this.unsure.get(id);
      const v = item!.v as number;
      expect(v === a.v || (v > a.v && (u?.versions.has(v) ?? false)), `${id}: acknowledged v=${a.v}, read v=${v}`).toBe(true);
      const n = item!.n as number;
      expect(n >= a.n && n <= a.n + (u?.n ?? 0), `${id}: ${a.n} acknowledged updates (${u?.n ?? 0} unsure), read n=${n}`).toBe(true);
    }
    for (const id of byId.keys()) {
      if (/^\D+\d+-\d+$/.test(id) && id.startsWith(this.prefix)) expect(this.acked.has(id) || this.unsure.has(id), `${id} was never written`).toBe(true);
    }
    expect(names.filter((n) => n.startsWith('bulk')).length, 'every bulk item is there').toBe(bulk);
    return items.length;
  }
}

/** For a test file: a function that starts an elastic cluster with the table
 * "elastic"; every cluster it started is stopped after each test. */
export function elasticClusters(): (opts: Parameters<typeof startElastic>[0]) => Promise<Elastic> {
  const running: Elastic[] = [];
  afterEach(async () => {
    for (const e of running.splice(0)) await e.stop();
  });
  return async (opts) => {
    const e = await startElastic(opts);
    running.push(e);
    await e.client.createTable('elastic', { name: 'id', type: 'string' });
    return e;
  };
}

/** A cluster of 3 nodes at R=3 (12 slices), every slice led, `count` items written and held by each node. */
export async function threeReplicasHolding(cluster: (opts: { nodes: number; slices: number; replicationFactor: number }) => Promise<Elastic>, count: number): Promise<Elastic> {
  const e = await cluster({ nodes: 3, slices: 12, replicationFactor: 3 });
  await untilLed(e);
  await bulk(e, count);
  // Every node holding every item is not enough: the third replica of a slice comes at the coordinator's tick after
  // the second's change settled (one change per slice at a time), and until its own change settles an election needs
  // both replicas of the set before it, so a story that kills a node at once could find slices that cannot elect.
  await waitFor(
    async () => {
      const st = await e.status();
      return st.nodes.every((n) => n.heldItems === count) && led(st) && st.replication.leaders.unsettled === 0;
    },
    'each of the 3 nodes to hold every item, with every replica-set change settled',
    30_000,
    seen(e),
  );
  return e;
}

/** Items that give the moves something to copy. */
export async function bulk(e: Elastic, count: number): Promise<void> {
  const pad = 'x'.repeat(100);
  const writes: Promise<unknown>[] = [];
  for (let i = 0; i < count; i += 25) {
    writes.push(e.client.batchWrite('elastic', { puts: Array.from({ length: Math.min(25, count - i) }, (_, j) => ({ id: `bulk-${i + j}`, pad })) }));
  }
  const failures = (await Promise.all(writes)).flat();
  expect(failures).toEqual([]);
}

/** What frozenStory hands its story: the cluster, the coordinator's log lines, the write load, and the PIDs the story
 * froze (it pushes each one it freezes; frozenStory thaws them whatever happens). */
export interface FrozenStory {
  e: Elastic;
  lines: string[];
  load: WriteLoad;
  frozen: number[];
}

/** A story of slice nodes frozen (SIGSTOP) under a small write load, as the drain and handover tests tell it: `nodes`
 * slice nodes at R=3 over 12 slices (known by address unless `heartbeat`; `coordinatorArgs` for the coordinator),
 * replicas and leaderships spread (so that no rebalancing runs meanwhile), 100 items, 4 writers. After the story, every
 * acknowledged write must read back (WriteLoad.finish); the PIDs in `frozen` are thawed and the load stopped however it
 * ends (a frozen process takes no SIGTERM, and the fixture stops every process by its PID). */
export async function frozenStory(
  cluster: (opts: Parameters<typeof startElastic>[0]) => Promise<Elastic>,
  opts: { nodes: number; heartbeat?: boolean; coordinatorArgs?: string[] },
  story: (s: FrozenStory) => Promise<void>,
): Promise<void> {
  const lines: string[] = [];
  const e = await cluster({ nodes: opts.nodes, slices: 12, replicationFactor: 3, heartbeat: opts.heartbeat ?? false, coordinatorArgs: opts.coordinatorArgs, log: (l) => lines.push(l) });
  await untilSpread(e);
  await bulk(e, 100);
  const load = new WriteLoad(e.client, 'elastic', 4, 4);
  const frozen: number[] = [];
  try {
    await new Promise((r) => setTimeout(r, 500));
    await story({ e, lines, load, frozen });
    await load.finish(1_000, 100);
  } finally {
    thawProcesses(frozen);
    await load.stop();
  }
}

/** Until the drain of `node` has ended (status says so) with every slice led by the nodes left. */
export async function untilDrainEnds(e: Elastic, node: string, what = 'the drain to end, every slice led by the nodes left'): Promise<void> {
  await waitFor(async () => (await ledWithout(e, node)).ok && drainedOff(node)(await e.status()), what, 60_000, seen(e));
}

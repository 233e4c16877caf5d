// A put's cost on the slice workers, in one thread and without the network: batches of `--batch` PutItems (200-byte
// items, as the router builds them, one slice each of `--slices`) packed as the router packs them (encodeSliceOps),
// then what each worker does with them, with the real code and real logs in a temp folder ('os' durability):
// - R=1: the worker decodes and checks the ops, executes them, logs their effects (one record a batch), packs the
//   answers;
// - R=3: the leader does the same but proposes the effects as one record per slice, flushes its replica log and
//   encodes its Appends; each follower decodes an Append, checks and logs its records, and applies those the
//   leader's last commit index covers (a put is applied one batch after it was sent, as in a cluster).
// Prints CPU ns per put: at R=3 first the total over the three replicas (the figure to compare: they share one heap,
// so a collection lands on whichever side runs when it is due), then the leader's (its Appends' encoding included)
// and each follower's; at R=1 the worker's. And KB the V8 heap allocated per put, by the same sides (the heap's growth
// over each side's calls plus what collections freed meanwhile; a compaction's not counted, nor ArrayBuffers' contents,
// which are outside the heap: an Append's bytes, a payload's copy). At R=3 it fails if a replica reported anything malformed or a follower
// does not hold the leader's items but those of each slice's last record (so a build whose followers refuse records
// cannot pass for a fast one). `--compact 1` (R=3): each replica's worker also compacts and checkpoints its replica log
// whenever it is due (ReplicaLog.checkpointDue, as worker.ts maybeCompact, at the worker's default threshold), all at
// once after a step rather than in steps between tasks, on that replica's account. `--ids 1`: each put carries a request
// id, as a router's do (its record then carries the ids, and every replica remembers them: each follower's compared
// with the leader's at the end of a run shorter than APPLIED_REQUESTS_KEPT_MS). `--dist DIR` runs another build's dist (e.g. a copy of main's), so two builds compare side by side on a
// busy machine: alternate them.
//
// `--op update` (R=1): UpdateItems instead, of 10,000 keys in turn, each key's first update setting its --attrs strings
// of 40 chars and every one a number (the figure is then per update).
//
//   npm run build && node dist/bench/put-path.js [--dist DIR] [--r 3] [--slices 512] [--batch 32] [--puts 100000] [--compact 1] [--ids 1] [--op update --attrs 10]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { GCProfiler, getHeapStatistics } from 'node:v8';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { intArg, readCommandLine } from '../shared/cli-args.js';

const args = readCommandLine(
  process.argv.slice(2),
  {
    dist: { default: '', help: "a build's dist folder (default: this one)" },
    r: { default: '3', help: 'replicas: 1 (the worker log) or 3 (a leader and two followers)' },
    slices: { default: '512', help: 'slices the puts spread over, one after another' },
    batch: { default: '32', help: 'puts per batch (one worker task)' },
    puts: { default: '100000', help: 'puts measured (after a quarter as many unmeasured)' },
    compact: { default: '0', help: 'R=3: 1 to compact and checkpoint each replica log when due, as a worker does' },
    ids: { default: '0', help: '1: each put carries a request id, as a router sends it ([instance, counter]; remembered by every replica)' },
    op: { default: 'put', help: 'put, or update (R=1): UpdateItems of 10,000 keys, each key\'s first setting --attrs strings of 40 chars, the others a number' },
    attrs: { default: '10', help: '--op update: the items\' strings of 40 chars' },
  },
  'usage: node dist/bench/put-path.js [options]',
).values;
const R = intArg('r', args.r, 1, 3);
if (R === 2) throw new Error('--r is 1 or 3');
const SLICES = intArg('slices', args.slices, 1, 1024);
const BATCH = intArg('batch', args.batch, 1, 256);
const PUTS = intArg('puts', args.puts, 1000, 100_000_000);
const COMPACT = intArg('compact', args.compact, 0, 1) === 1;
const IDS = intArg('ids', args.ids, 0, 1) === 1;
/** The router instance that --ids 1 names (any whole number; one router sends every put). */
const ROUTER_INSTANCE = 4242;
if (COMPACT && R !== 3) throw new Error('--compact is for --r 3');
const UPDATE = args.op === 'update';
if (!UPDATE && args.op !== 'put') throw new Error('--op is put or update');
if (UPDATE && R !== 1) throw new Error('--op update is for --r 1');
const ATTRS = intArg('attrs', args.attrs, 0, 100);
/** --op update: the keys updated, in turn (the unmeasured quarter of the run sets each one's strings first). */
const UPDATE_KEYS = 10_000;
const dist = args.dist === '' ? resolve(import.meta.dirname, '..') : resolve(args.dist);
const load = async <T>(path: string) => (await import(pathToFileURL(`${dist}/${path}`).href)) as T;
const P = await load<typeof import('../shared/protocol.js')>('shared/protocol.js');
const { SliceStore } = await load<typeof import('../slice-worker/partition.js')>('slice-worker/partition.js');
const { ReplicaLog } = await load<typeof import('../slice-worker/replication/replica-log.js')>('slice-worker/replication/replica-log.js');
const { SliceReplicas } = await load<typeof import('../slice-worker/replication/slice-replicas.js')>('slice-worker/replication/slice-replicas.js');
const { WriteAheadLog } = await load<typeof import('../slice-worker/wal.js')>('slice-worker/wal.js');
const { APPLIED_REQUESTS_KEPT_MS, APPLIED_REQUESTS_PER_SLICE_MAX, REPLICA_CHECKPOINT_AFTER_BYTES } = await load<typeof import('../shared/limits.js')>('shared/limits.js');
// Each put's key as a router makes it for a table of a string sharding key and a number sorting key (put-shape's):
// a byte string whose number part is past ASCII, as most stored keys are.
const { encodeKeyPart } = await load<typeof import('../shared/key-encoding.js')>('shared/key-encoding.js');
const { encodeEffects, RECORD_KIND } = await load<typeof import('../slice-worker/log-format.js')>('slice-worker/log-format.js');
type ReplicationMessage = import('../shared/replication-protocol.js').ReplicationMessage;
type SliceOpMessage = import('../shared/protocol.js').SliceOpMessage;
type UpdateAction = import('../shared/expression-ast.js').UpdateAction;
const COORDINATOR = -1;
const TABLE = 1;
const PAD = 'x'.repeat(160);

const root = mkdtempSync(join(tmpdir(), 'ks-put-path-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));
const slices = Array.from({ length: SLICES }, (_, i) => i);

let n = 0;
let batchNo = 0;
/** Per slice, the last batch that wrote it and how many of its puts: the slice's last record at R=3. */
const lastWrite = new Map<number, { batch: number; puts: number }>();
/** A batch of puts as the router sends it to one worker (item-requests.ts putOp: __name and __mtime added). */
function batchBytes(): Uint8Array {
  const ops: SliceOpMessage[] = [];
  batchNo++;
  for (let i = 0; i < BATCH; i++, n++) {
    const last = lastWrite.get(n % SLICES);
    if (last?.batch === batchNo) last.puts++;
    else lastWrite.set(n % SLICES, { batch: batchNo, puts: 1 });
    const device = `p${n % 10_000}`;
    if (UPDATE) {
      // A key's first update sets its strings (upsert from the base, its key attributes); the others one number.
      const k = n % UPDATE_KEYS;
      const base = { device, seq: k, __name: `${device}|${k}` };
      const actions: UpdateAction[] = n < UPDATE_KEYS ? Array.from({ length: ATTRS }, (_, a) => ({ k: 'set' as const, path: [`s${a}`], value: { k: 'value' as const, v: `${'s'.repeat(30)}${String(n * 100 + a).padStart(10, '0')}` } })) : [];
      actions.push({ k: 'set', path: ['count'], value: { k: 'value', v: n } });
      ops.push([P.SliceOp.Update, TABLE, k % SLICES, encodeKeyPart('string', device) + encodeKeyPart('number', k), { base, actions, condition: null, oldOnFailure: false, returnValues: 'none' }, IDS ? [ROUTER_INSTANCE, n + 1] : null]);
      continue;
    }
    const item = { device, seq: Math.floor(n / 10_000), payload: PAD, __name: `${device}|${n}`, __mtime: 0 };
    ops.push([P.SliceOp.Put, TABLE, n % SLICES, encodeKeyPart('string', device) + encodeKeyPart('number', n), item, 200, null, IDS ? [ROUTER_INSTANCE, n + 1] : null]);
  }
  return P.encodeSliceOps(ops);
}

/** What the worker does with a chunk's ops before the log (worker.ts runBatches): decode, check, execute. */
function execute(bytes: Uint8Array, run: (op: SliceOpMessage) => unknown): unknown[] {
  const ops = P.decodeSliceOps(bytes);
  const results: unknown[] = new Array(ops.length);
  for (let i = 0; i < ops.length; i++) {
    const problem = P.checkSliceOp(ops[i], false);
    if (problem !== null) throw new Error(problem);
    results[i] = run(ops[i] as SliceOpMessage);
  }
  return results;
}

let leaderNs = 0n;
let followerNs = 0n;
/** Bytes the V8 heap allocated on each side (the leader's, or the R=1 worker's; the followers', both), counted as the
 * CPU is (time): what a put allocates sets how often the young generation is collected (bench/README.md, "Allocation
 * per replicated put"). */
let leaderBytes = 0;
let followerBytes = 0;
const usedHeap = () => getHeapStatistics().used_heap_size;
/** CPU time (user and system, of this process: one thread, and V8's helpers) that `f` took, in ns: wall time would
 * count the time other processes on a busy machine took the core. `allocated` is set to the bytes it allocated: the
 * heap's growth over the call plus what the collections during it freed (v8.GCProfiler: their heap before and after),
 * measured outside the CPU's window. Not exact: a scavenge set off by the second sample's own object (after its read,
 * before the profiler stops) counts what it freed, young garbage of every side, in this call (seen once in 200,000
 * such windows of a loop, branch allocrev: about 1 MB counted there; in a run of 40,000 puts a whole young generation
 * would be a few tenths of a KB per put on one side). */
let allocated = 0;
const time = (f: () => void): bigint => {
  const gcs = new GCProfiler();
  gcs.start();
  const used0 = usedHeap();
  const t0 = process.cpuUsage();
  f();
  const t = process.cpuUsage(t0);
  const used1 = usedHeap();
  let freed = 0;
  for (const s of gcs.stop().statistics) freed += s.beforeGC.heapStatistics.usedHeapSize - s.afterGC.heapStatistics.usedHeapSize;
  allocated = used1 - used0 + freed;
  return BigInt(t.user + t.system) * 1000n;
};

let step: () => void | Promise<void>;
/** Compactions and checkpoints run (--compact), and their CPU (in the replicas' figures too). */
let compactions = 0;
let compactNs = 0n;
/** Throws unless the run did what it measured (R=3: no replica refused anything, the followers applied it). */
let check = () => {};
const malformed: string[] = [];
if (R === 1) {
  const store = new SliceStore(0, 1);
  store.execute([P.SliceOp.Assign, 1, slices]);
  mkdirSync(join(root, 'r1'));
  const { log } = WriteAheadLog.open(join(root, 'r1'), 'os', 0, () => {});
  step = () => {
    const bytes = batchBytes();
    leaderNs += time(() => {
      const results = execute(bytes, (op) => store.execute(op));
      log.append(RECORD_KIND.Effects, encodeEffects(store.takeEffects()));
      P.encodeOwnedResults(results as import('../shared/protocol.js').SliceOpResult[]);
    });
    leaderBytes += allocated;
  };
} else {
  const queue: { from: number; to: number; slice: number; m: ReplicationMessage }[] = [];
  const workers = [0, 1, 2].map((i) => {
    const store = new SliceStore(0, 1);
    const { log } = ReplicaLog.open(join(root, `worker-${i}`), 'os');
    const events = { malformed: (slice: number, from: number | null, why: string) => malformed.push(`replica ${i}, slice ${slice}, from ${from}: ${why}`) };
    const replicas = new SliceReplicas(i, store, log, (slice, to, m) => queue.push({ from: i, to, slice, m }), events);
    return { store, log, replicas };
  });
  /** `ns` of CPU (and time()'s `allocated` bytes, but for a compaction's) on worker `worker`'s account. */
  const account = (worker: number, ns: bigint, bytes = allocated) => {
    if (worker === 0) leaderNs += ns;
    else followerNs += ns;
    if (worker === 0) leaderBytes += bytes;
    else followerBytes += bytes;
  };
  /** Delivers what `from` sent (-1: everyone): each Append encoded on its sender's account (as the sender's turn
   * writes it to its peer), then decoded as between two workers (AppendOks unfolded already), as one turn of each
   * receiver: its log flushed once, after all of it. */
  const deliver = (from: number) => {
    const now = queue.filter((x) => x.from === from || from < 0);
    const rest = queue.filter((x) => !(x.from === from || from < 0));
    queue.length = 0;
    queue.push(...rest);
    const bytes: (Uint8Array | null)[] = new Array(now.length).fill(null);
    for (const sender of [0, 1, 2]) {
      account(
        sender,
        time(() => {
          now.forEach((s, i) => {
            if (s.from === sender && s.m.type === 'Append') bytes[i] = P.encodeReplicationMessage(s.m).slice(); // a copy: the encoder reuses its buffer
          });
        }),
      );
    }
    for (const to of [0, 1, 2]) {
      const mine = now.flatMap((s, i) => (s.to === to ? [i] : []));
      if (mine.length === 0) continue;
      const w = workers[to];
      account(
        to,
        time(() => {
          for (const i of mine) {
            const s = now[i];
            w.replicas.receive(s.slice, s.from, bytes[i] !== null ? P.decodeReplicationMessage(bytes[i]!, s.from, 'node', s.slice) : s.m);
          }
          w.log.flush();
        }),
      );
    }
  };
  const settle = () => {
    for (let k = 0; k < 20 && queue.length > 0; k++) {
      deliver(-1);
      for (const w of workers) w.log.flush();
    }
  };
  for (const s of slices) for (const w of workers) w.replicas.receive(s, COORDINATOR, { type: 'Prepare', term: 1 });
  for (const w of workers) w.log.flush();
  settle();
  for (const s of slices) workers[0].replicas.receive(s, COORDINATOR, { type: 'Lead', term: 1, followers: [1, 2], sets: [] });
  workers[0].log.flush();
  settle();
  workers[0].store.execute([P.SliceOp.Assign, 1, slices]);
  for (const s of slices) if (!workers[0].replicas.serving(s)) throw new Error(`slice ${s} is not served after its election`);
  const leader = workers[0];
  check = () => {
    if (malformed.length > 0) throw new Error(`${malformed.length} malformed, first: ${malformed[0]}`);
    // A follower applies a slice's record once a later Append for the slice brings the commit point that covers it
    // (no ticks here): it holds every item the leader holds but those of each slice's last record (one batch's at
    // --slices 1). Every put is of a new item.
    const unapplied = [...lastWrite.values()].reduce((a, w) => a + w.puts, 0);
    for (const i of [1, 2]) {
      const held = workers[i].store.itemCount;
      if (held !== leader.store.itemCount - unapplied) throw new Error(`follower ${i} holds ${held} items, the leader ${leader.store.itemCount}: not all but the ${unapplied} of each slice's last record`);
      // --ids 1: each follower remembers the ids of the puts it applied, so a build that drops them cannot pass for a
      // fast one (while no slice took more puts than a replica remembers, and the run was shorter than
      // APPLIED_REQUESTS_KEPT_MS: none forgotten. A longer one's oldest are forgotten by the leader a batch before its
      // followers, which then remember more: main's build too, a run of 135 s at load 8.)
      const remembered = (w: (typeof workers)[number]) => slices.reduce((a, s) => a + w.replicas.rememberedRequests(s), 0);
      if (!IDS || n / SLICES >= APPLIED_REQUESTS_PER_SLICE_MAX) continue;
      if (Date.now() - startedAt >= APPLIED_REQUESTS_KEPT_MS) {
        idsNote = `; ids not compared: the run outlasted APPLIED_REQUESTS_KEPT_MS (${APPLIED_REQUESTS_KEPT_MS / 1000} s)`;
        continue;
      }
      if (remembered(workers[i]) !== remembered(leader) - unapplied) throw new Error(`follower ${i} remembers ${remembered(workers[i])} request ids, the leader ${remembered(leader)}`);
    }
  };
  step = () => {
    const bytes = batchBytes();
    leaderNs += time(() => {
      const results = execute(bytes, (op) => leader.replicas.execute(op as import('../shared/protocol.js').WriteOp));
      leader.replicas.propose(leader.store.takeEffects());
      leader.log.flush();
      P.encodeOwnedResults(results as import('../shared/protocol.js').SliceOpResult[]);
    });
    leaderBytes += allocated;
    // The leader's Appends to the followers, their AppendOks back (the leader commits), as a turn of each.
    deliver(0);
    deliver(1);
    deliver(2);
    if (COMPACT) return compactDue();
  };
  /** What worker.ts maybeCompact does for a worker whose replica log is due (the threshold of a worker whose own
   * snapshots are at least as far apart), all at once: the leader's state is committed here, so it writes it at once. */
  const compactDue = async () => {
    for (const i of [0, 1, 2]) {
      const w = workers[i];
      if (!w.log.checkpointDue(REPLICA_CHECKPOINT_AFTER_BYTES)) continue;
      compactions++;
      // CPU of this process while the checkpoint's writes and syncs run (node's threads included).
      const t0 = process.cpuUsage();
      w.replicas.prepareCompaction();
      if (w.replicas.compactionPending()) throw new Error('a leader\'s state is committed after a step');
      w.replicas.compact();
      await w.log.checkpoint();
      const t = process.cpuUsage(t0);
      account(i, BigInt(t.user + t.system) * 1000n, 0); // its allocation not counted: it runs over turns (awaits)
      compactNs += BigInt(t.user + t.system) * 1000n;
    }
  };
}

const batches = Math.ceil(PUTS / BATCH);
/** When the first put was made: a remembered id is forgotten once one came APPLIED_REQUESTS_KEPT_MS after it (check). */
const startedAt = Date.now();
/** What check() could not compare, said on the result's line. */
let idsNote = '';
for (let b = 0; b < Math.ceil(batches / 4); b++) await step();
leaderNs = 0n;
followerNs = 0n;
leaderBytes = 0;
followerBytes = 0;
compactions = 0;
compactNs = 0n;
for (let b = 0; b < batches; b++) await step();
check();
const puts = batches * BATCH;
const per = (ns: bigint) => (Number(ns) / puts).toFixed(0);
const kb = (bytes: number) => (bytes / puts / 1024).toFixed(2);
console.log(
  R === 1
    ? `${dist}: R=1 worker ${per(leaderNs)} ns, ${kb(leaderBytes)} KB allocated per put (${SLICES} slices, batches of ${BATCH}, ${puts} puts)`
    : `${dist}: R=3 total ${per(leaderNs + followerNs)} ns per put (leader ${per(leaderNs)}, each follower ${per(followerNs / 2n)}); KB allocated per put ${kb(leaderBytes + followerBytes)} (leader ${kb(leaderBytes)}, each follower ${kb(followerBytes / 2)}${COMPACT ? ', compactions not counted' : ''}; ${SLICES} slices, batches of ${BATCH}, ${puts} puts${IDS ? ', request ids' : ''}${COMPACT ? `, ${compactions} compactions: ${per(compactNs)} ns per put of the total` : ''}${idsNote})`,
);

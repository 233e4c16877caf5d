// A worker thread (its task function; worker-thread.ts wires it to the node). Each thread owns the slices with
// workerOf(slice, workerCount) === workerIndex (shared/hashing.ts) for its whole life: one writer, no locks.
//
// Tasks: 'open' recovers the worker's state from its folder (snapshot, then
// log); 'batch' runs one or more packed op batches, appends their changes to
// the log as one record (group commit) and only then returns the results, so
// nothing is acknowledged before it is as durable as the mode promises.
//
// Snapshots run between tasks, in steps, while batches go on (snapshot() below).
//
// Replication (docs/replication.md): a slice whose replica set has more than one
// node is replicated. Its ops run only while this worker's replica of it serves
// (leads, barrier committed); otherwise they answer Unavailable. The effects of a
// task on such a slice are proposed as one record (SliceReplicas.propose) and kept
// out of the worker's own log; a chunk that touched one is answered only once the
// slice's commit index reaches the slice's last index as of that task (a write:
// its own record; a read: what it saw, and only while the leader holds its lease,
// else after REPLICA_LEASE_WAIT_MS it answers Unavailable, not applied; neither longer than REPLICA_COMMIT_WAIT_MS:
// then a write answers Unavailable, outcome unknown, a read Unavailable, not applied), later, on the batch port it
// came on or through the node's MessagePort ({held: ticket} now, [ticket, bytes] then), so that the next tasks run
// meanwhile. What the replicas send in one turn goes out at the end of the turn: to each peer node's workers
// straight from this thread (peer-links.ts: a frame per worker there), and, with the answers released, to the
// node's main thread as one message for what goes to the coordinator. Peers' workers send this worker's replicas
// their messages on its batch port (onPeerFrame), never through the node's main thread. Deposed first: those ops
// answer Unavailable, outcome unknown (a router sends them again: a write's request id
// makes a second copy answer, not apply, docs/replication.md). Slices of one replica (R=1) take exactly
// the path they took before. An eventually consistent read (ReplicaGet, ReplicaRange)
// on a slice this worker follows is answered from its store at once when its replica
// may answer (Replica.readable), else refused ReplicaNotReady (replicaRead below).
// A replica the node no longer holds (its assignment stopped listing the slice, which it does only once the
// change that took it out settled) is dropped with its items: from the store, the worker's log and the replica
// log (dropLeftReplicas below), so that memory and disk are freed and a restart does not bring it back.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { workerData, type MessagePort } from 'node:worker_threads';
import { assert } from '../shared/errors.js';
import { REPLICA_COMPACTION_WAIT_MS, REPLICA_READ_STALENESS_MS, REPLICA_TICK_MS, SLICE_COUNT_MAX, SNAPSHOT_STEP_MS, type DurabilityMode, type SliceCapacity } from '../shared/limits.js';
import {
  checkSliceOp,
  decodeReplicationMessage,
  decodeSliceOps,
  EFFECT_DROP_SLICE,
  EFFECT_DROP_TABLE,
  encodeOwnedResults,
  encodeReplicationMessage,
  isWriteOp,
  MalformedFrame,
  requestIdOf,
  RESULT_ERROR,
  SliceOp,
  sliceSetHas,
  type SliceSet,
  type DecodedReplicateEntry,
  type SliceOpMessage,
  type SliceOpResult,
} from '../shared/protocol.js';
import { COORDINATOR, foldedWidth, isFoldable, isFoldedMessage, PING_NUMBERS, PONG_NUMBERS, pongInto, unfoldAt, unfoldPing, type ReplicationMessage } from '../shared/replication-protocol.js';
import { readStateFile, writeStateFile } from '../shared/state-file.js';
import { decodeEffects, encodeEffects, RECORD_KIND, type LoggedEffect } from './log-format.js';
import { SliceStore } from './partition.js';
import { HeldAnswers, notServing } from './replication/held-answers.js';
import { ReplicaLog } from './replication/replica-log.js';
import type { Replica } from './replication/replica.js';
import { SliceReplicas } from './replication/slice-replicas.js';

import { loadSnapshot, writeSnapshot } from './snapshot.js';
import { describeCuts, WriteAheadLog } from './wal.js';
import { openBatchPort } from './batch-port.js';
import { PeerLinks, type PeerEntry } from './peer-links.js';
import { workerOf } from '../shared/hashing.js';
import { IN_RANGE } from './worker-channel.js';
import { sparseLog } from '../shared/sparse-log.js';
import { startTurnTrace, TRACE_TURNS, turns } from './turn-trace.js';
import { startStallTrace } from '../shared/stall-trace.js';

export interface WorkerConfig {
  workerIndex: number;
  workerCount: number;
  dataDir: string;
  durability: DurabilityMode;
  snapshotAfterBytes: number;
  capacity: SliceCapacity;
  /** The node's host and cluster secret: the worker's batch port listens there and asks for it (batch-port.ts). */
  host: string;
  clusterSecret: string;
  /** One cell: the epoch the node serves, written by the node's main thread (publishEpoch in main.ts). */
  epoch: BigInt64Array;
}

/** What the node tells a worker with its assignment: this node's index in the map, the worker's
 * slices whose replica set has more than one node (null: R=1, none), and the other nodes of those sets with the
 * URL to dial each at (Assign's peers): this worker's links go to them, and it takes frames from them only.
 * Self -1: the node holds no replica (and has held none since it started): nothing to open, and replicas read
 * back from disk are dropped. */
export interface ReplicaControl {
  self: number;
  replicated: number[];
  peers: [node: number, url: string][];
}

/** `trusted[i]`: chunk i comes from the node itself (its assignment), not from a Batch frame;
 * `controls[i]`: replication settings taken just before chunk i runs. `port`: the node's end of
 * the replication channel (messages both ways, held answers to the node). */
export type WorkerTask =
  | { kind: 'open'; port: MessagePort }
  | { kind: 'batch'; chunks: Uint8Array[]; trusted: boolean[]; controls: (ReplicaControl | null)[] };
/** One chunk's packed results, or why the chunk was refused whole (its bytes are not a list of ops). */
export type ChunkOutcome = Uint8Array | string;
/** A task's answer for a chunk: its outcome, or a ticket whose answer comes on the port once committed. */
export type ChunkAnswer = ChunkOutcome | { held: number };
/** Worker -> node on the port, once per callback that sent something (a task, a frame or port message, a tick): what the replicas sent the coordinator, each message encoded (bytes
 * start..end of `bytes`, which is transferred: the node frames them without decoding them; where, in `ranges`,
 * OUT_RANGE numbers a message: [slice, to, start, end, ...]); held answers now committed (their bytes transferred);
 * and the connections whose messages failed their check, with why (the node closes them, as it closes one whose
 * frame fails its check). */
export type WorkerPortMessage = [
  ranges: number[],
  bytes: Uint8Array | null,
  answers: [ticket: number, results: Uint8Array][],
  refused: [via: number, why: string][],
];
/** Node -> worker on the port: the coordinator's messages for this worker's replicas, each as bytes start..end of
 * `bytes` (not checked yet; `via` names the connection it came on; in `ranges`, IN_RANGE numbers a message: [slice,
 * from, via, start, end, ...]). Peers' messages come on the batch port. */
export type NodePortMessage = [ranges: number[], bytes: Uint8Array];

export interface OpenSummary {
  /** The worker's batch port (batch-port.ts). */
  batchPort: number;
  items: number;
  snapshotItems: number;
  replayedRecords: number;
  /** What opening the worker log and (if the worker holds replicas) the replica log cut (wal.ts describeCuts), '' if nothing. */
  logCuts: string;
  replicaLogCuts: string;
  ms: number;
}

const config = workerData as WorkerConfig;
const store = new SliceStore(config.workerIndex, config.workerCount, Date.now, config.capacity);
let log: WriteAheadLog | null = null;

// ---- replication state: null / empty until the node is given replicated slices ----
let port: MessagePort | null = null;
let replicaLog: ReplicaLog | null = null;
let replicas: SliceReplicas | null = null;
/** This worker's slices whose replica set has more than one node. */
let replicated = new Set<number>();
/** This worker's links to the workers of its replicas' peer nodes, and those nodes (the ones whose frames it takes). */
let links: PeerLinks | null = null;
let peerNodes = new Set<number>();
const replicaDir = join(config.dataDir, 'replicas');
/** Holds this node's index in the map once it was given replicated slices: the replica log is opened at start then. */
const selfFile = join(replicaDir, 'self.json');
let outbox: [number, number, ReplicationMessage][] = [];
let answers: [number, Uint8Array][] = [];
/** Connections whose messages failed their check this turn: the node closes them. */
let refused: [number, string][] = [];
let portFlushQueued = false;
/** The chunks whose answers wait for commits or leases (held-answers.ts), answered through the batch port they came
 * on or the node's MessagePort (answerHeld). */
const held = new HeldAnswers((slice) => replicas!.of(slice), () => performance.now(), answerHeld);
/** The ops a leader answers from its store: consistent reads, answered only under its lease (docs/replication.md, "Leases"). */
const READ_OPS: ReadonlySet<number> = new Set([SliceOp.Get, SliceOp.Range, SliceOp.Scan, SliceOp.ReplicaGet, SliceOp.ReplicaRange]);
let compacting = false;

let replicaSelf = -1;
/** An assignment changed the replicated slices (or is the first since start): look for replicas to drop once its
 * chunk ran (the ops of that chunk say which slices this worker owns now). */
let dropCheck = false;

/** Answers what opening the replica log cut (describeCuts). */
function openReplicas(self: number): string {
  replicaSelf = self;
  const opened = ReplicaLog.open(replicaDir, config.durability);
  replicaLog = opened.log;
  links = new PeerLinks(config.clusterSecret, self, (line) => console.error(`keyslice slice node: worker ${config.workerIndex}: ${line}`), config.workerCount);
  replicas = new SliceReplicas(self, store, replicaLog, (slice, to, message) => {
    outbox.push([slice, to, message]);
    queuePortFlush();
  }, { committed: (slice, index) => held.committed(slice, index), deposed: (slice, term) => held.deposed(slice, term), malformed: onMalformed, leased: (slice) => held.leased(slice) });
  setInterval(() => {
    replicas!.tick();
    held.tick();
    maybeCompact();
    if (TRACE_REPLICAS) traceReplicas();
  }, REPLICA_TICK_MS).unref();
  return describeCuts(opened.recovery);
}

// What peers sent that a replica refused or dropped as malformed is logged at most once a second (with a count of
// the others), as the node logs the frames it refuses: a peer that sends garbage cannot flood the log.
const logMalformed = sparseLog('such');
function onMalformed(slice: number, from: number | null, why: string): void {
  logMalformed(`keyslice slice node: worker ${config.workerIndex}: slice ${slice}: ${from === null ? 'found' : `refused what node ${from} sent`}: ${why}`);
}

/** KEYSLICE_TRACE_REPLICAS=1: a line whenever the count of slices this worker leads, or serves, changed (a timeline for bench/FAILOVER.md). */
const TRACE_REPLICAS = process.env.KEYSLICE_TRACE_REPLICAS === '1';
let traced = '';
function traceReplicas(): void {
  const { leading, serving } = replicas!.leadership();
  const line = `worker ${config.workerIndex}: leads ${leading} slices, ${serving} serving`;
  if (line !== traced) console.log(`keyslice slice node: ${line}`);
  traced = line;
}

// Flushed once the callback that queued it returns (a microtask), not at the loop's check phase (setImmediate): there
// a follower's AppendOk waited for every other callback of the poll phase and for the tasks queued before it, which
// at load is most of a worker's turn. Still one message per callback: a port message or a frame carries a turn's
// worth of entries. On 16 cores (8 clients, 4 routers, 4 nodes x 2 workers, R=3) 1.16-1.17x the puts/s of flushing at
// the check phase, at 32 and at 256 requests in flight per client, measured on node protocol 24 (replication through
// the nodes' main threads then), one round each on a 16-core machine, 2026-11-26.
function queuePortFlush(): void {
  if (portFlushQueued) return;
  portFlushQueued = true;
  queueMicrotask(flushPort);
}

/** What the replicas sent in one callback (a task, a frame or port message, a tick) goes out once it returns: a peer node's part on this worker's link to it (one frame
 * per worker there), the coordinator's part and the answers it released to the node in one message (it frames
 * the coordinator's). */
function flushPort(): void {
  portFlushQueued = false;
  const out = outbox;
  const released = answers;
  const refusals = refused;
  outbox = [];
  answers = [];
  refused = [];
  if (out.length === 0 && released.length === 0 && refusals.length === 0) return;
  if (TRACE_TURNS) {
    turns.flushes++;
    for (const [, , m] of out) {
      if (m.type === 'Append') {
        turns.appendsOut++;
        turns.recordsOut += m.records.length;
      } else if (m.type === 'AppendOk') turns.appendOksOut++;
      else if (m.type === 'KeepAlive') turns.keepAlivesOut++;
      else if (m.type === 'KeepAliveOk') turns.keepAliveOksOut++;
    }
  }
  // Each message encoded here: a peer's framed on its link, the coordinator's into one buffer for the turn, so that
  // the node's main thread only frames them.
  const encoded: Uint8Array[] = [];
  const where: number[] = [];
  let toPeers: Map<number, PeerEntry[]> | null = null;
  let size = 0;
  const toCoordinator = (slice: number, m: ReplicationMessage) => {
    // (Each view of msgpackr's buffer stays whole until copied below: it packs on past it, or into a new buffer.)
    const b = encodeReplicationMessage(m);
    where.push(slice, COORDINATOR, size, size + b.byteLength);
    encoded.push(b);
    size += b.byteLength;
  };
  // The turn's Pongs go as one Pongs (node protocol 27), after the rest: each answers a Ping of the coordinator's
  // Pings, and says what its replica holds now, as it would a moment later.
  let pongs: number[] | null = null;
  let pongsFrom = -1;
  for (const [slice, to, m] of out) {
    if (to !== COORDINATOR) {
      toPeers ??= new Map();
      let list = toPeers.get(to);
      if (list === undefined) toPeers.set(to, (list = []));
      // KeepAlives and AppendOks as they are: the link folds them for the peer's worker that takes them (peer-links.ts).
      list.push([slice, isFoldable(m) ? m : encodeReplicationMessage(m)]);
    } else if (m.type === 'Pong') {
      if (pongs === null || pongs.length >= PONG_NUMBERS * SLICE_COUNT_MAX) {
        if (pongs !== null) toCoordinator(pongsFrom, { type: 'Pongs', slices: pongs });
        pongs = [];
        pongsFrom = slice;
      }
      pongInto(pongs, slice, m);
    } else {
      assert(!isFoldable(m), 'KeepAlives and AppendOks go to followers and leaders, never to the coordinator');
      toCoordinator(slice, m);
    }
  }
  if (pongs !== null) toCoordinator(pongsFrom, { type: 'Pongs', slices: pongs });
  let bytes: Uint8Array | null = null;
  const transfer = released.map(([, b]) => b.buffer as ArrayBuffer);
  if (size > 0) {
    bytes = new Uint8Array(size);
    let at = 0;
    for (const b of encoded) {
      bytes.set(b, at);
      at += b.byteLength;
    }
    transfer.push(bytes.buffer as ArrayBuffer);
  }
  // Each link frames (copies) them at once, or copies each that waits while the link is dialed out of the buffer it
  // views (peer-links.ts): no view outlives this call (but encodeReplicationMessage's cache of the last Append's
  // bytes, in a buffer never written again), and none is written over before it ends
  // (encodeReplicationMessage packs past them, or into a new buffer).
  for (const [to, entries] of toPeers ?? []) links!.send(to, entries);
  if (where.length > 0 || released.length > 0 || refusals.length > 0) {
    if (TRACE_TURNS) turns.portMessages++;
    port?.postMessage([where, bytes, released, refusals] satisfies WorkerPortMessage, transfer);
  }
}

/** A Replicate frame from a peer's worker on this worker's batch port, decoded and checked whole (decodeNodeFrame):
 * taken only from a peer of this worker's replicas and only if every slice it names is this worker's (a frame
 * meant for another worker breaks the protocol: why, and the batch port closes its connection); messages for a
 * slice not replicated here (any more, or not yet: this worker has not taken the assignment that lists it) are
 * dropped, and the sender sends them again after its wait if they still matter. */
function onPeerFrame(from: number, entries: DecodedReplicateEntry[]): string | null {
  if (replicas === null) return null; // not given replicated slices yet: nothing here answers
  if (from === replicaSelf) return `a Replicate frame that says it comes from this node (${from})`;
  // A node not among the peers of the latest assignment: its messages wait for the coordinator's word (dropped now).
  if (!peerNodes.has(from)) return null;
  if (TRACE_TURNS) {
    turns.peerFramesIn++;
    for (const [, m] of entries) {
      if (m.type === 'Append') turns.appendsIn++;
      else if (m.type === 'AppendOks') turns.appendOkSlicesIn += m.slices.length / foldedWidth(m.type);
    }
  }
  for (const [slice, m] of entries) {
    if (isFoldedMessage(m)) {
      const width = foldedWidth(m.type);
      for (let i = 0; i < m.slices.length; i += width) if (!isMine(m.slices[i])) return `a Replicate frame names slice ${m.slices[i]}, which is not worker ${config.workerIndex}'s`;
    } else if (!isMine(slice)) return `a Replicate frame names slice ${slice}, which is not worker ${config.workerIndex}'s`;
  }
  for (const [slice, m] of entries) receive(slice, from, m);
  return null;
}

const isMine = (slice: number) => workerOf(slice, config.workerCount) === config.workerIndex;

/** Hands one checked message to the replica of its slice (KeepAlives and AppendOks to each of theirs). */
function receive(slice: number, from: number, message: ReplicationMessage): void {
  if (isFoldedMessage(message)) {
    const s = message.slices;
    const width = foldedWidth(message.type);
    for (let i = 0; i < s.length; i += width) if (replicated.has(s[i])) replicas!.receive(s[i], from, unfoldAt(message, i));
  } else if (replicated.has(slice)) replicas!.receive(slice, from, message);
}

function onPortMessage([ranges, bytes]: NodePortMessage): void {
  if (replicas === null) return; // not given replicated slices yet: nothing here answers
  for (let i = 0; i < ranges.length; i += IN_RANGE) {
    const slice = ranges[i];
    const from = ranges[i + 1];
    // Checked here, before it is used (the node's main thread passed it on as it came): a message that is not a
    // whole one of those its hop carries is dropped, and the node closes the connection it came on (and logs why,
    // as for a frame that fails its check). Decoded before the slice is looked at: a Pings's entry is under its
    // first slice only, which need not be replicated here when the others are.
    let message: ReplicationMessage;
    try {
      message = decodeReplicationMessage(bytes.subarray(ranges[i + 3], ranges[i + 4]), from, 'node', slice);
    } catch (err) {
      if (!(err instanceof MalformedFrame)) throw err;
      refused.push([ranges[i + 2], err.message]);
      queuePortFlush();
      continue;
    }
    if (message.type !== 'Pings') {
      // Not a replica here (any more, or not yet): dropped; the coordinator repeats if it matters.
      if (replicated.has(slice)) replicas.receive(slice, from, message);
      continue;
    }
    // The coordinator's Pings of a turn to this worker (node protocol 27), its entry under the first of its slices.
    // Its slices are those of the coordinator's latest assignment to this node, which can differ from what this
    // worker took last (an Assign sent by another sync() between the turn's Pings and its flush): the first may not
    // be replicated here when others are. So each slice is looked at alone, as a peer's folded messages are
    // (onPeerFrame): each is checked to be this worker's before any is answered, and each not replicated here is
    // dropped, as its own Ping was.
    const stray = message.slices.find((s, k) => k % PING_NUMBERS === 0 && !isMine(s));
    if (stray !== undefined) {
      refused.push([ranges[i + 2], `Replicate: slice ${slice}: Pings names slice ${stray}, which is not worker ${config.workerIndex}'s`]);
      queuePortFlush();
      continue;
    }
    for (let k = 0; k < message.slices.length; k += PING_NUMBERS) if (replicated.has(message.slices[k])) replicas.receive(message.slices[k], from, unfoldPing(message, k));
  }
}

/** Takes the node's replication settings; answers the slices whose replicas it made resign. */
function takeControl(c: ReplicaControl): number[] {
  if (replicas === null) {
    if (c.self < 0) return []; // no replica here, none on disk
    writeStateFile(selfFile, { self: c.self });
    // Made now, so its log is new: it cuts something only if an earlier one was left without its self file.
    const cuts = openReplicas(c.self);
    if (cuts !== '') console.log(`keyslice slice node: worker ${config.workerIndex}: replica log: ${cuts}`);
  }
  assert(c.self < 0 ? c.replicated.length === 0 && c.peers.length === 0 : replicaSelf === c.self, `a node's index in the map does not change (was ${replicaSelf}, now ${c.self})`);
  const before = replicated;
  replicated = new Set(c.replicated);
  peerNodes = new Set(c.peers.map(([node]) => node));
  links!.setPeers(c.peers);
  dropCheck = true;
  // A slice no longer replicated here: its replica stops leading (it hears nothing for the slice any more), and
  // what waited on it gets no commit from this worker.
  const resigned: number[] = [];
  for (const s of before) {
    if (replicated.has(s)) continue;
    replicas!.resign(s);
    held.unknown(s, `slice ${s} is no longer replicated on this node: outcome unknown`);
    resigned.push(s);
  }
  return resigned;
}

/** Settings taken between two chunks of a task made the replicas of `resigned` resign: what the task's earlier
 * chunks did on them was never proposed, and their stores went back to what is committed (SliceReplicas'
 * deposed). Those ops answer Unavailable, outcome unknown (a router sends a write again, to the new leader),
 * and wait on no commit of these slices; their effects, still in the store's list, are dropped (written to the
 * worker log instead, they came back at the next start). Answered OK, an update that no replica holds was
 * acknowledged; held, it waited on a slice whose replica is dropped at the end of the task. */
function forgetResigned(resigned: number[], touched: { results: SliceOpResult[]; opSlices: (number[] | null)[] }[] | null, carried: LoggedEffect[]): void {
  const gone = new Set(resigned);
  for (const t of touched ?? []) {
    t.opSlices.forEach((slices, i) => {
      if (slices === null || !slices.some((s) => gone.has(s))) return;
      t.results[i] = [RESULT_ERROR, 'Unavailable', `slice ${slices.find((s) => gone.has(s))} is no longer replicated on this node: outcome unknown`];
      const rest = slices.filter((s) => !gone.has(s));
      t.opSlices[i] = rest.length > 0 ? rest : null;
    });
  }
  for (const e of store.takeEffects()) {
    const slice = e[0] === EFFECT_DROP_TABLE ? -1 : e[0] === EFFECT_DROP_SLICE ? e[1] : e[2];
    if (!gone.has(slice)) carried.push(e);
  }
}

function answerHeld(ticket: number, results: SliceOpResult[]): void {
  // In a buffer of its own (msgpackr packs into a buffer it reuses: DESIGN.md's trap), with the headroom for the
  // node's BatchReply head (encodeOwnedResults).
  const bytes = encodeOwnedResults(results);
  const send = heldOnBatchPort.get(ticket);
  if (send !== undefined) {
    heldOnBatchPort.delete(ticket);
    return send(bytes);
  }
  answers.push([ticket, bytes]);
  queuePortFlush();
}

/** Held chunks that came on the batch port: ticket -> what sends their answer there (not through the node). */
const heldOnBatchPort = new Map<number, (results: Uint8Array) => void>();

/** The replicated slices an op reads or writes (null: none). */
function replicatedSlicesOf(op: SliceOpMessage): number[] | null {
  let slices: number[] | null = null;
  switch (op[0]) {
    case SliceOp.Put:
    case SliceOp.Get:
    case SliceOp.Delete:
    case SliceOp.Update:
    case SliceOp.Range:
    case SliceOp.ReplicaGet:
    case SliceOp.ReplicaRange:
      if (replicated.has(op[2]) && store.owns(op[2])) slices = [op[2]];
      break;
    case SliceOp.Scan:
      // The partition decodes the set for the scan itself; here only a test per replicated slice, no list.
      for (const s of replicated) if (sliceSetHas(op[7], op[2], s) && store.owns(s)) (slices ??= []).push(s);
      break;
    case SliceOp.DropTable:
      for (const s of replicated) if (store.owns(s)) (slices ??= []).push(s);
      break;
    default:
      return null;
  }
  return slices;
}

/** Unavailable (not applied) for a write with a request id on a slice that this worker owns and runs with one replica
 * (R=1), else null. A router gives a write its id only while its map replicates the slice, and sends a write again
 * after an unknown outcome only if it has an id (router.ts): so every copy that may have been applied was applied
 * where its id is remembered. A router's map may be ahead of this node's assignment (replica sets change without an
 * epoch bump): run here, on the worker log's path, which keeps no ids, the copy would be forgotten, and its resend
 * applied again once the slice is replicated here. */
function unreplicatedWrite(op: SliceOpMessage): SliceOpResult | null {
  if (!isWriteOp(op) || requestIdOf(op) === null || replicated.has(op[2]) || !store.owns(op[2])) return null;
  return [RESULT_ERROR, 'Unavailable', `slice ${op[2]} is not replicated on this node yet (a write with a request id runs where its id is remembered); retry`, { notApplied: true }];
}

/** Unavailable when one of `slices` has no serving leader on this worker, else null. */
function refusalFor(slices: number[]): SliceOpResult | null {
  for (const s of slices) {
    // A slice this worker does not own is the store's to refuse (WrongOwner), as before.
    if (store.owns(s) && !replicas!.serving(s)) {
      return notServing(s, replicas!.of(s).term);
    }
  }
  return null;
}

/** A load report's Stats counts what this worker's stores hold: of a replicated slice, only once its leader here serves
 * (its store then holds every committed record). Before that (after a restart, during an election) it counted fewer
 * items and the report said it was complete: refused now (Unavailable, not applied), so the report names this node
 * among the unreported ones and says it is not complete. The slices are asked from 0 (load-report.ts). */
function statsRefusal(asked: SliceSet): SliceOpResult | null {
  return refusalFor([...replicated].filter((s) => sliceSetHas(asked, 0, s)));
}

/** An eventually consistent read on a replicated slice that this worker's replica follows: answered from the
 * store (which holds exactly the committed records it applied) when the replica may answer, else refused with
 * ReplicaNotReady (nothing read; the router reads from the leader). The leader's replica takes the consistent
 * path instead: its store runs ahead of the commit point, so its reads are held until committed and its lease holds. */
function replicaRead(op: Extract<SliceOpMessage, [typeof SliceOp.ReplicaGet | typeof SliceOp.ReplicaRange, ...unknown[]]>, r: Replica): SliceOpResult {
  if (!r.readable) {
    return [RESULT_ERROR, 'ReplicaNotReady', `slice ${op[2]}'s replica on this node has not applied what its leader committed, or has not heard from it for ${REPLICA_READ_STALENESS_MS} ms (applied ${r.appliedIndex}, term ${r.term}); read from the leader`];
  }
  return store.readReplica(op);
}

/** After a task: replicated effects proposed (one record per slice), the rest for the worker log. */
function proposeReplicated(effects: LoggedEffect[]): LoggedEffect[] {
  const own: LoggedEffect[] = [];
  const proposed: LoggedEffect[] = [];
  for (const e of effects) {
    const slice = e[0] === EFFECT_DROP_TABLE ? -1 : e[0] === EFFECT_DROP_SLICE ? e[1] : e[2];
    if (e[0] === EFFECT_DROP_TABLE) {
      own.push(e); // the unreplicated slices' part; propose() makes it a drop of each slice it leads
      proposed.push(e);
    } else if (replicated.has(slice)) proposed.push(e);
    else own.push(e);
  }
  if (proposed.length > 0) replicas!.propose(proposed);
  return own;
}

function maybeCompact(): void {
  if (compacting || replicaLog === null || !replicaLog.checkpointDue(config.snapshotAfterBytes)) return;
  compacting = true;
  // In steps between tasks (SliceCompaction): each encodes a slice's state or a few, for about SNAPSHOT_STEP_MS, so
  // the worker's slices go on committing meanwhile. Leaders take their state first; the compaction writes it once
  // committed (SliceReplicas.prepareCompaction); every snapshot stays out of the log, durable with the checkpoint
  // that follows the last step (ReplicaLog.compacted): until then the log holds the records they cover.
  const job = replicas!.compaction();
  /** When the leaders had all taken their state: the bounded wait for their records to commit runs from then. */
  let waitFrom = -1;
  const step = () => {
    if (waitFrom >= 0) {
      if (replicas!.compactionPending() && performance.now() - waitFrom < REPLICA_COMPACTION_WAIT_MS) return void setTimeout(step, 1);
      waitFrom = -1;
    }
    const next = job.step(performance.now() + SNAPSHOT_STEP_MS);
    if (next === 'prepared') waitFrom = performance.now();
    if (next !== 'done') return void setImmediate(step);
    replicaLog!.checkpoint().then(
      () => {
        compacting = false;
      },
      (err) => process.nextTick(() => {
        throw err;
      }),
    );
  };
  setImmediate(step);
}

async function open(task: { port: MessagePort }): Promise<OpenSummary> {
  const started = performance.now();
  mkdirSync(config.dataDir, { recursive: true });
  port = task.port;
  startTurnTrace(config.workerIndex);
  startStallTrace(`w${config.workerIndex}`);
  port.on('message', onPortMessage);
  const snapshot = loadSnapshot(config.dataDir, (e) => store.replay(e));
  const opened = WriteAheadLog.open(config.dataDir, config.durability, snapshot.lsn, (r) => {
    if (r.kind === RECORD_KIND.Effects) for (const e of decodeEffects(r.payload)) store.replay(e);
  });
  log = opened.log;
  // After the worker log: a replicated slice's state is the replica log's (its snapshot and committed records).
  const self = readStateFile<{ self: number }>(selfFile);
  const replicaLogCuts = self === null ? '' : openReplicas(self.self);
  // Once recovered: a batch that comes on it runs on what the log holds.
  const batchPort = await openBatchPort({
    host: config.host,
    clusterSecret: config.clusterSecret,
    workerIndex: config.workerIndex,
    epochNow: () => Number(Atomics.load(config.epoch, 0)),
    run: (chunks) => runBatches(chunks, chunks.map(() => false), chunks.map(() => null)),
    replicate: onPeerFrame,
    held: (ticket, send) => {
      // Released only by a commit, a lease, a deposition or a slice leaving the node (HeldAnswers.unknown) or the tick
      // (HeldAnswers.tick), which come in later turns than the task that held it.
      assert(!heldOnBatchPort.has(ticket) && !answers.some(([t]) => t === ticket), `ticket ${ticket} is held once, and is still held`);
      heldOnBatchPort.set(ticket, send);
    },
  });
  return {
    batchPort,
    items: store.itemCount,
    snapshotItems: snapshot.items,
    replayedRecords: opened.recovery.replayed,
    logCuts: describeCuts(opened.recovery),
    replicaLogCuts,
    ms: Math.round(performance.now() - started),
  };
}

function runBatches(chunks: Uint8Array[], trusted: boolean[], controls: (ReplicaControl | null)[]): ChunkAnswer[] {
  if (log === null) throw new Error('invariant broken: a batch reached the worker before it was opened');
  const out: ChunkAnswer[] = [];
  if (TRACE_TURNS) {
    turns.tasks++;
    turns.chunks += chunks.length;
  }
  let touched: { c: number; results: SliceOpResult[]; opSlices: (number[] | null)[]; reads: boolean[] }[] | null = null;
  /** The task's effects taken from the store at a control that made replicas resign (forgetResigned). */
  const carried: LoggedEffect[] = [];
  for (let c = 0; c < chunks.length; c++) {
    if (controls[c] !== null) {
      const resigned = takeControl(controls[c]!);
      if (resigned.length > 0 && c > 0) forgetResigned(resigned, touched, carried);
    }
    let ops: unknown[];
    try {
      ops = decodeSliceOps(chunks[c]);
    } catch (err) {
      if (!(err instanceof MalformedFrame)) throw err;
      out.push(err.message);
      continue;
    }
    // Each op is checked whole before it runs: a bad one gets its error, the others run.
    const results: SliceOpResult[] = new Array(ops.length);
    if (replicated.size === 0) {
      for (let i = 0; i < ops.length; i++) {
        const problem = checkSliceOp(ops[i], trusted[c]);
        results[i] = problem !== null ? [RESULT_ERROR, 'MalformedRequest', problem] : (unreplicatedWrite(ops[i] as SliceOpMessage) ?? store.execute(ops[i] as SliceOpMessage));
      }
      out.push(encodeOwnedResults(results));
      continue;
    }
    const opSlices: (number[] | null)[] = new Array(ops.length).fill(null);
    const reads: boolean[] = new Array(ops.length).fill(false);
    let any = false;
    for (let i = 0; i < ops.length; i++) {
      const problem = checkSliceOp(ops[i], trusted[c]);
      if (problem !== null) {
        results[i] = [RESULT_ERROR, 'MalformedRequest', problem];
        continue;
      }
      const op = ops[i] as SliceOpMessage;
      if (op[0] >= SliceOp.MoveStart && op[0] <= SliceOp.MoveAbort && replicated.has(op[1] as number)) {
        // A move writes around the replication core (its effects would reach no follower): not for these slices yet.
        results[i] = [RESULT_ERROR, 'InvalidState', `slice ${op[1]} is replicated; moving a replicated slice is not supported yet`];
        continue;
      }
      if ((op[0] === SliceOp.ReplicaGet || op[0] === SliceOp.ReplicaRange) && replicated.has(op[2])) {
        const r = replicas!.of(op[2]);
        if (!r.isLeader) {
          results[i] = replicaRead(op, r);
          continue;
        }
      }
      if (op[0] === SliceOp.Stats) {
        results[i] = statsRefusal(op[2]) ?? store.execute(op);
        continue;
      }
      const slices = replicatedSlicesOf(op);
      const refusal = slices === null ? unreplicatedWrite(op) : refusalFor(slices);
      if (refusal !== null) {
        results[i] = refusal;
        continue;
      }
      // A write of a replicated slice runs once per request id (SliceReplicas.execute: a router's resend is answered).
      results[i] = slices !== null && isWriteOp(op) ? replicas!.execute(op) : store.execute(op);
      if (TRACE_TURNS && slices !== null && isWriteOp(op)) turns.replPuts++;
      if (slices !== null) {
        opSlices[i] = slices;
        reads[i] = READ_OPS.has(op[0]);
        any = true;
      }
    }
    if (!any) out.push(encodeOwnedResults(results));
    else {
      out.push(''); // replaced below, once the task's records are proposed
      (touched ??= []).push({ c, results, opSlices, reads });
    }
  }
  let effects = carried.length === 0 ? store.takeEffects() : carried.concat(store.takeEffects());
  if (replicated.size > 0 && effects.length > 0) effects = proposeReplicated(effects);
  if (touched !== null) for (const t of touched) out[t.c] = holdUntilCommitted(t.results, t.opSlices, t.reads);
  if (effects.length > 0) log.append(RECORD_KIND.Effects, encodeEffects(effects));
  if (dropCheck) dropLeftReplicas(log);
  if (log.bytesSinceSnapshot >= config.snapshotAfterBytes && !snapshotting) {
    snapshotting = true;
    setImmediate(startSnapshot, log); // after this task has answered, not inside it
  }
  if (replicaLog !== null) maybeCompact();
  return out;
}

/** Drops every replica this worker holds of a slice that its node's assignment no longer lists as replicated here
 * and that the worker does not own (at R=1 an owner's items stay: the replica log is then where they are kept,
 * docs/replication.md). The node's assignment lists a slice until the change that took this node out of its set
 * settled (replica-leaders.ts assignReplication), so no majority counts this replica any more: a replica of the
 * slice given to this node later starts empty but for the term promised (replica-log.ts). Also at the first assignment
 * after a restart, for a slice that left while the node was down. The worker log's record comes first: a crash
 * between the two leaves the slice in the replica log, dropped again at the next assignment; the other order
 * could leave its items in the worker's snapshot with nothing to drop them. */
function dropLeftReplicas(wal: WriteAheadLog): void {
  dropCheck = false;
  if (replicas === null) return;
  const gone = replicas.held().filter((s) => !replicated.has(s) && !store.owns(s));
  if (gone.length === 0) return;
  // What the replicas wrote goes to disk now, and its syncs' answers run now, not after the drop.
  replicaLog!.flush();
  for (const s of gone) {
    assert(!held.waitsOn(s), `nothing waits on slice ${s} once its replica resigned`);
    replicas.drop(s);
    store.forgetSlice(s);
  }
  wal.append(RECORD_KIND.Effects, encodeEffects(store.takeEffects()));
  for (const s of gone) replicaLog!.drop(s);
}

/** A chunk that touched replicated slices: answered now, or held until what it wrote or saw is committed
 * (HeldAnswers.hold). */
function holdUntilCommitted(results: SliceOpResult[], opSlices: (number[] | null)[], reads: boolean[]): ChunkAnswer {
  const ticket = held.hold(results, opSlices, reads);
  if (ticket === null) return encodeOwnedResults(results);
  if (TRACE_TURNS && reads.includes(true)) turns.heldReads++;
  return { held: ticket };
}

/** One snapshot at a time; a log that grows past the threshold meanwhile waits for the next one. */
let snapshotting = false;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function startSnapshot(wal: WriteAheadLog): void {
  snapshot(wal).then(
    () => {
      snapshotting = false;
    },
    (err) => {
      // Like a failed append: the disk is in trouble, so the worker fails and the node stops. Whatever
      // step failed, the files recover: the older snapshot and every segment since it, or the new
      // snapshot and the segments it does not cover.
      process.nextTick(() => {
        throw err;
      });
    },
  );
}

/** Starts a new log segment and takes a point-in-time view of the items, both between two tasks (so
 * the view is exactly the log up to the new segment); writes the view in steps, letting the tasks
 * that arrive run between them; only once the snapshot is durable drops the older segments. A crash
 * before that leaves the older snapshot and every segment since it, which recover as before. */
async function snapshot(wal: WriteAheadLog): Promise<void> {
  await wal.flush();
  const lsn = wal.nextLsn - 1;
  const segmentOnDisk = wal.startSegment();
  segmentOnDisk.catch(() => {}); // awaited below, before the older segments go: a failure stops the worker there
  assert(wal.currentSegmentFirstLsn === lsn + 1, 'the segment after a snapshot point starts right after it');
  const view = store.snapshotView();
  await writeSnapshot(config.dataDir, lsn, view, { stepMs: SNAPSHOT_STEP_MS, between: nextTurn });
  await segmentOnDisk;
  await wal.dropSegmentsBefore(lsn + 1);
}

export default function run(task: WorkerTask): Promise<OpenSummary> | ChunkAnswer[] {
  return task.kind === 'open' ? open(task) : runBatches(task.chunks, task.trusted, task.controls);
}

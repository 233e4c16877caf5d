// The messages of slice replication (docs/replication.md): between the coordinator
// and a slice's replicas (Prepare, Lead, Ping and their answers) and between a
// slice's leader and its followers (Append, Snapshot, KeepAlive, AppendOk, Refused). The
// replication core (slice-worker/replication/replica.ts) and the coordinator's
// failover (coordinator/metadata/failover.ts) speak them; checkReplicationMessage
// checks one whole, as a frame from the wire is checked before it is used. On the
// wire each is bytes of its own (shared/protocol.ts, encodeReplicationMessage), which
// a slice node's main thread passes between the coordinator and its workers undecoded;
// the worker that takes one decodes and checks it (decodeReplicationMessage; a peer's,
// which comes to the worker's batch port, with its frame). KeepAlives and AppendOks (the
// KeepAlive or AppendOk messages one frame carries from a worker to a worker of a peer node, folded
// into numbers) alone travel as a message: the sending worker's link folds them per worker there.
import { REPLICATION_APPEND_RECORDS_MAX, SLICE_COUNT_MAX } from './limits.js';

/** One record of a slice's replicated log (slice-worker/replication/replica-record.ts makes and checks them). */
export interface ReplicaRecord {
  term: number;
  index: number;
  payload: Uint8Array;
  checksum: number;
}

/** A replica is named by the index of its node in the cluster map. */
export type ReplicaId = number;
export const COORDINATOR = -1;

/** Why a replica refused an Append, a Snapshot, a Prepare, a Lead or a LeadOn. */
export type RefusalCode =
  /** The sender's term is older than the one this replica promised: a deposed leader. */
  | 'StaleTerm'
  /** The records start after this replica's last index: a gap. */
  | 'LogGap'
  /** A record's checksum does not hold: damaged or mixed up on the way. */
  | 'ChecksumMismatch'
  /** The record before them (prevIndex) is of another term here: this replica's tail diverged. */
  | 'LogMismatch'
  /** The records do not follow one another, or are of a term newer than the sender's, or would replace a record this
   * replica holds committed. */
  | 'MalformedAppend'
  /** A record's payload or a snapshot's state is not a slice's changes (slice-worker/log-format.ts: effects on this
   * slice and the request ids applied with them), or a snapshot names a term newer than its sender's: checked as
   * it arrives, before anything of it is written, so that every record a replica holds applies whole. */
  | 'MalformedContents';

export type ReplicationMessage =
  | { type: 'Prepare'; term: number }
  /** leaseWaitMs: how long, by the replica's clock, until LEASE_MS has passed since it last answered a leader of an
   * older term (a leader that may still hold a lease it counted on this answer: docs/replication.md, "Leases"); the
   * coordinator names no new leader before. ledTerm: the term this replica led when the Prepare came (0: none); a
   * leader that promised a newer term holds no lease any more. */
  | { type: 'Prepared'; term: number; lastTerm: number; lastIndex: number; leaseWaitMs: number; ledTerm: number }
  /** sets: while a replica-set change is unsettled, the sets (the new one first) each of whose majorities every
   * commit of this leader needs (joint majorities, docs/replication.md); empty: a majority of itself and its followers. */
  | { type: 'Lead'; term: number; followers: ReplicaId[]; sets: ReplicaId[][] }
  /** To the leader of term `from`, when its slice's replica set changed and it stays in it: lead on at `term` (newer,
   * taken by the coordinator like an election's) with these followers and sets, keeping its records and its
   * writes not yet committed, without a Prepare (docs/replication.md, "Leading on across a replica-set change").
   * A replica that does not lead `from` refuses it (StaleTerm), and the coordinator elects instead. */
  | { type: 'LeadOn'; term: number; from: number; followers: ReplicaId[]; sets: ReplicaId[][] }
  | { type: 'Ping'; seq: number }
  /** commitTerm: the term of the record at the replica's commit point, which it holds durably; at least the
   * leader's term once it holds the leader's barrier (its first record) committed (docs/replication.md).
   * lastIndex: the index of its last record (a leadership handover waits until the new leader's reaches the old's). */
  | { type: 'Pong'; seq: number; term: number; leading: boolean; commitTerm: number; lastIndex: number }
  /** sentAt: the leader's monotonic clock when it sent this (whole ms, rounded down), echoed in the answer, from
   * which the leader's lease runs. leased: the leader held a lease when it sent this, so no other leader can have
   * been elected yet; a follower counts itself fresh for eventual reads only from such a message. */
  | { type: 'Append'; term: number; prevIndex: number; prevTerm: number; records: ReplicaRecord[]; commitIndex: number; sentAt: number; leased: boolean }
  | { type: 'Snapshot'; term: number; index: number; lastTerm: number; state: Uint8Array; commitIndex: number; sentAt: number; leased: boolean }
  /** The leader of `term` still leads it: sent every REPLICA_KEEPALIVE_MS to followers that said they hold every
   * record and the commit point (they get no heartbeat), so that they stay readable, at a tick to one that holds every
   * record but not the commit point (to carry it), and to every follower when the leader needs its lease renewed.
   * Answered with KeepAliveOk; or, by a follower whose log is known to be this leader's past its own commit point
   * (Replica.leaderMatch), with AppendOk once it wrote the commit point durably. sentAt and leased as in Append. */
  | { type: 'KeepAlive'; term: number; commitIndex: number; sentAt: number; leased: boolean }
  /** A follower of `term` had the KeepAlive sent at sentAt (the leader's clock): it renews the leader's lease. */
  | { type: 'KeepAliveOk'; term: number; sentAt: number }
  /** The KeepAlives from one worker to one worker of a peer node in one frame, as numbers (`[slice, term,
   * commitIndex, sentAt, leased (0 or 1), ...]`) in one entry whose slice is the first of them: one turn's, or
   * several turns' sent while the link was dialed (at most SLICE_COUNT_MAX slices an entry; more go in another).
   * The sending worker's link folds them, one entry per worker there (peer-links.ts byWorker), and the receiving
   * worker unfolds them, so a replica never sees this one. An idle cluster's replication traffic is mostly
   * keep-alives, and a message per slice costs a copy at each thread hop, an encoding and a check. */
  | { type: 'KeepAlives'; slices: number[] }
  /** The AppendOks from one worker to one worker of a peer node in one frame, as numbers (`[slice, term, matchIndex,
   * commitIndex, sentAt, ...]`) in one entry whose slice is the first of them, folded and unfolded as KeepAlives
   * are, so a replica never sees this one either. Under writes spread over many slices a follower answers about one
   * record per slice per turn: a message each cost an encoding, a frame entry, a decoding and a check per slice on
   * both nodes. */
  | { type: 'AppendOks'; slices: number[] }
  /** The coordinator's Pings of one turn to one worker of a node, as numbers (`[slice, seq, ...]`) in one entry whose
   * slice is the first of them (node protocol 27; checked by decodeReplicationMessage: the entry's slice picks the
   * worker it goes to, which takes each slice of it that it replicates). The coordinator's flush folds them (replica-leaders.ts) and the
   * worker unfolds them, each slice's Ping to its replica, which answers it as ever, so neither failover.ts nor a
   * replica sees this one. Unlike KeepAlives it travels as bytes, as every message between the coordinator and a
   * worker does (the node's main thread does not decode them). A leader is asked every ping interval whatever the
   * load: 1,024 slices made 2,048 Pings and as many Pongs a second, each an encoding, a frame entry, a thread hop,
   * a decoding and a check (bench/README.md, "Idle cluster"). */
  | { type: 'Pings'; slices: number[] }
  /** A worker's Pongs of one turn, as numbers (`[slice, seq, term, leading (0 or 1), commitTerm, lastIndex, ...]`)
   * in one entry whose slice is the first of them (checked as a Pings's), folded by the worker (worker.ts flushPort) and unfolded by the
   * coordinator into one Pong per slice (replica-leaders.ts receive), for the same reason as Pings. */
  | { type: 'Pongs'; slices: number[] }
  /** commitIndex: the commit point the follower holds durably (its leader stops heartbeats once it has it all). */
  /** sentAt: the Append's or Snapshot's that it answers (its leader's lease runs from it). */
  | { type: 'AppendOk'; term: number; matchIndex: number; commitIndex: number; sentAt: number }
  | { type: 'Refused'; term: number; code: RefusalCode; message: string; lastIndex: number; commitIndex: number };


export const REFUSAL_CODES: readonly RefusalCode[] = ['StaleTerm', 'LogGap', 'ChecksumMismatch', 'LogMismatch', 'MalformedAppend', 'MalformedContents'];

/** The messages each hop carries (a Replicate frame with another is refused whole, as a frame of a kind its receiver
 * does not take is): the coordinator runs elections and probes; a slice's replicas replicate among themselves and
 * answer the coordinator. */
export const MESSAGES_FROM_COORDINATOR: ReadonlySet<string> = new Set(['Prepare', 'Lead', 'LeadOn', 'Ping', 'Pings']);
export const MESSAGES_TO_COORDINATOR: ReadonlySet<string> = new Set(['Prepared', 'Pong', 'Pongs', 'Refused']);
export const MESSAGES_BETWEEN_REPLICAS: ReadonlySet<string> = new Set(['Append', 'Snapshot', 'KeepAlive', 'KeepAlives', 'AppendOk', 'AppendOks', 'KeepAliveOk', 'Refused']);
/** The messages that fold a turn's messages of one kind to one node into numbers (a slice node's transport). */
export const FOLDED_MESSAGES: ReadonlySet<string> = new Set(['KeepAlives', 'AppendOks']);

const FIELDS: Record<ReplicationMessage['type'], readonly string[]> = {
  Prepare: ['term'],
  Prepared: ['term', 'lastTerm', 'lastIndex', 'leaseWaitMs', 'ledTerm'],
  Lead: ['term', 'followers', 'sets'],
  LeadOn: ['term', 'from', 'followers', 'sets'],
  Ping: ['seq'],
  Pong: ['seq', 'term', 'leading', 'commitTerm', 'lastIndex'],
  Append: ['term', 'prevIndex', 'prevTerm', 'records', 'commitIndex', 'sentAt', 'leased'],
  Snapshot: ['term', 'index', 'lastTerm', 'state', 'commitIndex', 'sentAt', 'leased'],
  KeepAlive: ['term', 'commitIndex', 'sentAt', 'leased'],
  KeepAliveOk: ['term', 'sentAt'],
  KeepAlives: ['slices'],
  AppendOks: ['slices'],
  Pings: ['slices'],
  Pongs: ['slices'],
  AppendOk: ['term', 'matchIndex', 'commitIndex', 'sentAt'],
  Refused: ['term', 'code', 'message', 'lastIndex', 'commitIndex'],
};
const COUNTS = new Set(['term', 'from', 'commitTerm', 'lastTerm', 'lastIndex', 'seq', 'prevIndex', 'prevTerm', 'commitIndex', 'index', 'matchIndex', 'sentAt', 'leaseWaitMs', 'ledTerm']);
/** The width of one slice's entry in KeepAlives.slices: slice, term, commitIndex, sentAt, leased. */
export const KEEPALIVE_NUMBERS = 5;
/** The width of one slice's entry in AppendOks.slices: slice, term, matchIndex, commitIndex, sentAt. */
export const APPEND_OK_NUMBERS = 5;

/** The messages that travel as a map (FOLDED_MESSAGES): a frame's keep-alives or acknowledgements to one worker of a
 * peer node, as numbers. */
export type FoldedMessage = Extract<ReplicationMessage, { type: 'KeepAlives' | 'AppendOks' }>;
export const isFoldedMessage = (m: ReplicationMessage): m is FoldedMessage => FOLDED_MESSAGES.has(m.type);
/** The width of one slice's entry in a folded message's numbers. */
export const foldedWidth = (type: FoldedMessage['type']): number => (type === 'KeepAlives' ? KEEPALIVE_NUMBERS : APPEND_OK_NUMBERS);

/** The messages that are folded into numbers on the way (a KeepAlives or AppendOks entry), one slice's each. */
export type FoldableMessage = Extract<ReplicationMessage, { type: 'KeepAlive' | 'AppendOk' }>;
export const isFoldable = (m: ReplicationMessage): m is FoldableMessage => m.type === 'KeepAlive' || m.type === 'AppendOk';
/** The folded message that carries `m`'s kind. */
export const foldedType = (m: FoldableMessage): FoldedMessage['type'] => (m.type === 'KeepAlive' ? 'KeepAlives' : 'AppendOks');

// The order of each slice's numbers in KeepAlives and AppendOks, written here once: foldInto writes it, unfoldAt
// reads it back (and checkReplicationMessage checks the widths and KeepAlives' leased above).

/** Appends slice `slice`'s `m` to the numbers of its folded message (foldedType). */
export function foldInto(numbers: number[], slice: number, m: FoldableMessage): void {
  if (m.type === 'KeepAlive') numbers.push(slice, m.term, m.commitIndex, m.sentAt, m.leased ? 1 : 0);
  else numbers.push(slice, m.term, m.matchIndex, m.commitIndex, m.sentAt);
}

/** The message of the slice whose numbers start at `i` in a folded message (its slice is `m.slices[i]`). */
export function unfoldAt(m: FoldedMessage, i: number): FoldableMessage {
  const s = m.slices;
  return m.type === 'KeepAlives'
    ? { type: 'KeepAlive', term: s[i + 1], commitIndex: s[i + 2], sentAt: s[i + 3], leased: s[i + 4] === 1 }
    : { type: 'AppendOk', term: s[i + 1], matchIndex: s[i + 2], commitIndex: s[i + 3], sentAt: s[i + 4] };
}
const isCount = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/** The width of one slice's entry in Pings.slices (slice, seq) and in Pongs.slices (slice, seq, term, leading,
 * commitTerm, lastIndex). The order of each slice's numbers is written here once: pingsOf and pongsOf write it,
 * unfoldPing and unfoldPong read it back (and checkReplicationMessage checks the widths and Pongs' leading). */
export const PING_NUMBERS = 2;
export const PONG_NUMBERS = 6;

/** One turn's Pings to one worker, `[slice, message]` each, folded into one (the caller splits more than
 * SLICE_COUNT_MAX). */
export function pingsOf(pings: readonly (readonly [number, Extract<ReplicationMessage, { type: 'Ping' }>])[]): Extract<ReplicationMessage, { type: 'Pings' }> {
  const slices: number[] = [];
  for (const [slice, m] of pings) slices.push(slice, m.seq);
  return { type: 'Pings', slices };
}
/** Appends slice `slice`'s Pong to the numbers of a Pongs. */
export function pongInto(numbers: number[], slice: number, m: Extract<ReplicationMessage, { type: 'Pong' }>): void {
  numbers.push(slice, m.seq, m.term, m.leading ? 1 : 0, m.commitTerm, m.lastIndex);
}
/** The Ping of the slice whose numbers start at `i` in a Pings (its slice is `m.slices[i]`). */
export const unfoldPing = (m: Extract<ReplicationMessage, { type: 'Pings' }>, i: number): Extract<ReplicationMessage, { type: 'Ping' }> => ({ type: 'Ping', seq: m.slices[i + 1] });
/** The Pong of the slice whose numbers start at `i` in a Pongs (its slice is `m.slices[i]`). */
export function unfoldPong(m: Extract<ReplicationMessage, { type: 'Pongs' }>, i: number): Extract<ReplicationMessage, { type: 'Pong' }> {
  const s = m.slices;
  return { type: 'Pong', seq: s[i + 1], term: s[i + 2], leading: s[i + 3] === 1, commitTerm: s[i + 4], lastIndex: s[i + 5] };
}

/** Whether `s` is the numbers of a message that folds one turn's messages of a kind (KeepAlives, AppendOks, Pings,
 * Pongs): `n` per slice, for 1 to SLICE_COUNT_MAX slices, whole numbers >= 0, each slice's number at `flag` (a
 * boolean's place, or null: none) 0 or 1. One check for every such message, in one pass. */
function isFoldedNumbers(s: unknown, n: number, flag: number | null): boolean {
  return Array.isArray(s) && s.length > 0 && s.length % n === 0 && s.length <= n * SLICE_COUNT_MAX && s.every((v, i) => isCount(v) && (i % n !== flag || v <= 1));
}

/** Why `m` is not a whole replication message, or null. Records are checked for shape here and
 * for their checksum by the replica that takes them. */
export function checkReplicationMessage(m: unknown): string | null {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return 'a replication message is a map';
  const msg = m as Record<string, unknown>;
  // A type that is not a string is named by its kind only: JSON.stringify throws on a BigInt (msgpack's 64-bit
  // integers), and a map with a toString key throws as a property name; this check must answer, not throw (a
  // slice node's worker runs it, where a throw stops the node: worker.ts onPortMessage).
  if (typeof msg.type !== 'string') return `a replication message's type is a string, not ${msg.type === null ? 'null' : `a ${typeof msg.type}`}`;
  const fields = FIELDS[msg.type as ReplicationMessage['type']];
  if (fields === undefined || !Object.prototype.hasOwnProperty.call(FIELDS, msg.type)) return `unknown replication message ${JSON.stringify(msg.type)}`;
  for (const k of Object.keys(msg)) if (k !== 'type' && !fields.includes(k)) return `${msg.type} has no field "${k}"`;
  for (const f of fields) {
    const v = msg[f];
    if (COUNTS.has(f) ? !isCount(v) : v === undefined) return `${msg.type}.${f} is missing or not a whole number >= 0`;
  }
  if ('leased' in msg && typeof msg.leased !== 'boolean') return `${msg.type}.leased must be true or false`;
  switch (msg.type) {
    case 'Lead':
    case 'LeadOn':
      if (!Array.isArray(msg.followers) || !msg.followers.every(isCount)) return `${msg.type}.followers must be a list of node indexes`;
      if (msg.type === 'LeadOn' && !((msg.from as number) < (msg.term as number))) return 'LeadOn.from must be older than LeadOn.term';
      // Each replica once in a set: a leader counts a set's majority over its entries (Replica.jointMajorityReach), so
      // one listed twice would make fewer replicas than a majority commit a write.
      return Array.isArray(msg.sets) && msg.sets.every((set) => Array.isArray(set) && set.length > 0 && set.every(isCount) && new Set(set).size === set.length) ? null : `${msg.type}.sets must be a list of lists of distinct node indexes`;
    case 'Pong':
      return typeof msg.leading === 'boolean' ? null : 'Pong.leading must be true or false';
    case 'Snapshot':
      return msg.state instanceof Uint8Array ? null : 'Snapshot.state must be bytes';
    case 'Refused':
      if (!REFUSAL_CODES.includes(msg.code as RefusalCode)) return `Refused.code must be one of ${REFUSAL_CODES.join(', ')}`;
      return typeof msg.message === 'string' ? null : 'Refused.message must be a string';
    case 'KeepAlives':
      return isFoldedNumbers(msg.slices, KEEPALIVE_NUMBERS, KEEPALIVE_NUMBERS - 1)
        ? null
        : `KeepAlives.slices must be [slice, term, commitIndex, sentAt, leased (0 or 1), ...]: at most ${SLICE_COUNT_MAX} of them, whole numbers >= 0`;
    case 'AppendOks':
      return isFoldedNumbers(msg.slices, APPEND_OK_NUMBERS, null)
        ? null
        : `AppendOks.slices must be [slice, term, matchIndex, commitIndex, sentAt, ...]: at most ${SLICE_COUNT_MAX} of them, whole numbers >= 0`;
    case 'Pings':
      return isFoldedNumbers(msg.slices, PING_NUMBERS, null) ? null : `Pings.slices must be [slice, seq, ...]: at most ${SLICE_COUNT_MAX} of them, whole numbers >= 0`;
    case 'Pongs':
      return isFoldedNumbers(msg.slices, PONG_NUMBERS, 3)
        ? null
        : `Pongs.slices must be [slice, seq, term, leading (0 or 1), commitTerm, lastIndex, ...]: at most ${SLICE_COUNT_MAX} of them, whole numbers >= 0`;
    case 'Append': {
      if (!Array.isArray(msg.records)) return 'Append.records must be a list';
      // A leader sends at most this many (replica.ts appendRound): more is not a leader's, and a follower would write them all.
      if (msg.records.length > REPLICATION_APPEND_RECORDS_MAX) return `Append.records must hold at most ${REPLICATION_APPEND_RECORDS_MAX} records`;
      for (const r of msg.records as unknown[]) {
        const rec = r as Record<string, unknown>;
        if (typeof r !== 'object' || r === null || !isCount(rec.term) || !isCount(rec.index) || !isCount(rec.checksum) || !(rec.payload instanceof Uint8Array)) {
          return 'an Append record is {term, index, payload, checksum}';
        }
      }
      return null;
    }
    default:
      return null;
  }
}

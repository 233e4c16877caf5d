// The wire protocol, declared once and used by both ends of each hop.
//
// Client <-> coordinator (WebSocket, subprotocol CLIENT_SUBPROTOCOL), msgpack:
//   request  [id, operation, payload]
//   response [id, RESULT_OK, result] | [id, RESULT_ERROR, code, message, details?]
// id is the client's request id (an unsigned integer), echoed so that many
// requests can be in flight on one connection. An error about a frame whose id
// cannot be read carries id -1. Either side may put several requests (or
// responses) in one frame as a list of them, [[id, ...], [id, ...]]: both
// coalesce what is ready in one turn of the event loop, one frame per turn.
// Coordinator <-> slice node (WebSocket), msgpack with records:
//   node  -> coord  [NodeFrame.Hello, NODE_PROTOCOL_VERSION, workerCount, nodeId, clusterId | null, batchPorts, incarnation]
//   coord -> node   [NodeFrame.Assign, epoch, sliceCount, slices, clusterId, replication | null]
//   node  -> coord  [NodeFrame.Assigned, epoch]
//   coord -> node   [NodeFrame.Batch, batchId, epoch, [[worker, opsBytes], ...]]
//   node  -> coord  [NodeFrame.BatchReply, batchId, worker, resultsBytes]
//                   [NodeFrame.BatchError, batchId, code, message, nodeEpoch | null]
//   coord -> node   [NodeFrame.Epoch, epoch]   the map moved on (a slice moved elsewhere)
//   any   -> any    [NodeFrame.Replicate, from, [[slice, messageBytes | KeepAlives | AppendOks], ...]]
// Replication (docs/replication.md): Assign's replication names this node's index in the
// map, its peers' URLs and the replica set of every slice it holds a replica of (null: R=1,
// no slice has followers). Replicate carries replication messages: coordinator <-> node
// (Prepare, Lead, Ping and a turn's Pings folded per worker; Prepared, Pong, a turn's Pongs folded, Refused) on
// the coordinator's connection, and
// node -> node (Append, Snapshot, KeepAlive, AppendOk, KeepAliveOk, Refused) from worker thread to
// worker thread (25): a worker dials each peer node of its replicas (the URL of Assign's peers;
// its Hello names the peer's workers and their batch ports) and then the batch port of each of
// that node's workers, with the cluster secret, and sends only Replicate frames there; the
// worker of a slice on the peer takes them with no hop through either node's main thread.
// `from` is the sender's node index, or COORDINATOR (-1). A sender puts every message for one
// destination (the coordinator, or one worker of a peer) produced in one callback (a task, a frame, a tick) into one frame.
// Each message travels as bytes of its own (encodeReplicationMessage), so that a slice node's
// main thread passes the coordinator's between the wire and its workers without decoding
// them; the worker that takes one decodes and checks it (decodeReplicationMessage) before it
// is used; on a batch port the whole frame is (decodeNodeFrame, receiver 'worker').
// KeepAlives and AppendOks alone travel as a message (one entry per peer worker of a frame's
// keep-alives or acknowledgements, as numbers: a turn's, or several turns' sent while the link
// was dialed; replication-protocol.ts).
// Batch ports (20): each worker thread listens on a port of its own (Hello's batchPorts,
// one per worker, on the node's host) where a router sends that worker's Batch frames
// (one part, naming that worker) and gets their BatchReply / BatchError back, with no
// hop through the node's main thread. The node's main thread tells its workers the
// epoch it serves; a worker refuses a batch of another epoch (WrongOwner) as the node
// does. A batch refused for its epoch (WrongOwner) names the epoch the node is at in a field
// of its own (nodeEpoch, 26; null in every other BatchError), which the router waits for
// (shared/wrong-owner.ts wrongOwnerWait): its map or the node lags, and by how much. The handshake shows the cluster secret and NODE_PROTOCOL_HEADER; only Batch
// frames (from routers) and Replicate frames (from peers' workers, 25) are taken there
// (receiver 'worker').
// The coordinator opens the connection and shows the cluster secret in the
// handshake (header CLUSTER_SECRET_HEADER); a node refuses a connection without it.
// Identity: nodeId names the node's data folder (random, made on its first start,
// kept in the folder); clusterId names the cluster (made with the coordinator's
// map, sent in every Assign, kept by the node from its first Assign; null in Hello
// until then). The coordinator gives slices only to a node whose folder is the one
// its map knows for that address (docs/operations.md, "Node identity"). incarnation
// names the node's process (random, made at its start, never saved): a Hello of another
// incarnation than the last one says the node restarted, the same one that its link
// only went down and came back (the coordinator logs a restart: NodeLink.incarnation).
// Every frame is checked whole (decodeNodeFrame: kinds for this side, types,
// ranges) before any of it is used; a bad frame closes the connection. The node
// takes an epoch only from the connection of its latest valid Assign (the
// coordinator's), and an epoch never goes down. Each slice op is checked by the
// worker before it runs (checkSliceOp); a bad op gets a MalformedRequest result,
// a part whose bytes do not decode a BatchError. SliceOp.Assign comes only from
// the node itself, never in a Batch.
// opsBytes is a packed array of slice ops for one worker thread. The node
// hands it to that worker untouched (one message per batch) and relays the
// worker's packed results the same way; only the outer frame is decoded. The
// worker writes its results with room in front (encodeOwnedResults), where the
// node writes the BatchReply's head (encodeBatchReply): the same bytes as
// encodeNodeFrame's, without copying the results.
// A Range whose spec says `packed` answers its items as one list already in the
// client's msgpack form (a bin in the results); the router copies it into its
// client frame without decoding it (PackedItems), or, to merge buckets or a scan
// page, cuts it into items by their headers (splitPackedList); either way each item
// is checked in that one walk (a map without ext values). A Get that says `packed` answers
// its item the same way, as the bytes of one map (PackedItem).
import { Packr, Unpackr } from 'msgpackr';
import { isOperationName, type OperationName } from './api.js';
import { DECIMAL_TAG, isNumberValue } from './decimal.js';
import { assert, KeysliceError, isErrorCode, type ErrorCode, type ErrorDetails } from './errors.js';
import { listHeaderAt, mapHeaderAt, stringEnd, stringHeaderBytes, u16, u32 } from './msgpack-headers.js';
import { LEFT_TO_MSGPACKR, readMsgpack } from './msgpack-reader.js';
import { arrayHeader, arrayHeaderBytes, binHeader, binHeaderBytes, fixstr, putArrayHeader, putBinHeader, putUint, uintBytes } from './msgpack-writer.js';
import {
  checkReplicationMessage,
  COORDINATOR,
  FOLDED_MESSAGES,
  isFoldedMessage,
  MESSAGES_BETWEEN_REPLICAS,
  MESSAGES_FROM_COORDINATOR,
  MESSAGES_TO_COORDINATOR,
  type FoldedMessage,
  type ReplicaRecord,
  type ReplicationMessage,
} from './replication-protocol.js';
import { TYPE_NAMES, type Condition, type Path, type UpdateAction } from './expression-ast.js';
import {
  BOUND_EXPRESSION_DEPTH_MAX,
  CLIENT_FRAME_REQUESTS_MAX,
  CLUSTER_NODE_INDEX_MAX,
  EXPRESSION_IN_OPERANDS_MAX,
  EXPRESSION_PATH_DEPTH_MAX,
  INTERNAL_FRAME_BYTES_MAX,
  MOVE_EFFECTS_BYTES_MAX,
  NODE_BATCH_OPS_MAX,
  NODE_URL_CHARS_MAX,
  REPLICAS_LISTED_MAX,
  REQUEST_ID_INSTANCE_MAX,
  REPLICATION_APPEND_RECORDS_MAX,
  REPLICATION_FRAME_ENTRIES_MAX,
  REQUEST_BYTES_MAX,
  SLICE_COUNT_MAX,
  VALUE_DEPTH_MAX,
  WORKERS_PER_NODE_MAX,
} from './limits.js';
import { isByteString } from './key-encoding.js';
import { describeType, isPlainObject, SET_TAGS, setTypeOf, UNSTORABLE_MAP_KEY, UNSTORABLE_MAP_KEY_REFUSED, validateValue, type Item, type Value } from './values.js';

/** The client protocol. 2: a frame may carry a list of requests or responses. */
export const PROTOCOL_VERSION = 2;
export const CLIENT_SUBPROTOCOL = `keyslice.v${PROTOCOL_VERSION}`;
/** Coordinator <-> slice node. 2: slice ops carry bound expressions (conditions, filters, updates, projections).
 * 3: slice moves (Move* ops) and the Epoch frame. 4: node and cluster ids in Hello and Assign.
 * 5: replication (the Replicate frame, Assign's replica sets). 6: AppendOk carries the follower's durable commit index;
 * Pong says the term of the replica's commit point and its last index.
 * 7: Lead names the sets whose majorities each commit needs while a replica-set change is unsettled (Lead.sets).
 * 8: eventually consistent reads (SliceOp.ReplicaGet, SliceOp.ReplicaRange), answered by any replica.
 * 9: a Range spec says whether its items come back packed in the client's form (RangeSpec.packed).
 * 10: Stats also answers what the worker holds of the table over every slice in its store (StatsResult.held).
 * 11: a leader's KeepAlive to the followers that hold everything (a bound on how stale an eventual read may be).
 * 12: Put, Delete and Update carry a request id (RequestId), so that a replicated slice applies a write sent twice once.
 * 13: a Scan says whether its items come back packed in the client's form too (its last argument, `packed`), and a
 * packed scan's answer carries them as one list (ScanResult).
 * 14: a request id is two numbers, [router instance, counter], not a string (RequestId).
 * 15: LeadOn: a leader that stays in its slice's new replica set leads on at a new term, without an election.
 * 16: a replica refuses a peer's record or snapshot whose contents are not a slice's changes (Refused code
 * MalformedContents); each hop's Replicate frames carry its own messages only; a Stats result's counters carry the
 * writes answered from a remembered request id (SliceCounts' sixth); a write with a request id runs only where its
 * slice is replicated (elsewhere Unavailable, not applied), and a router gives one only while its map replicates the slice.
 * 17: leader leases (docs/replication.md, "Leases"): Append, Snapshot and KeepAlive carry the leader's send time and
 * whether it held a lease, AppendOk echoes the time, followers answer KeepAlive (KeepAliveOk), and Prepared says how
 * long the lease of the leader it last answered may still run and which term it led.
 * 18: a write's request id may be a client's idempotency id, [instance, counter, true] (ClientRequestId).
 * 19: each replication message of a Replicate frame is bytes of its own, [slice, bytes] (KeepAlives alone a
 * message), so that a slice node's main thread routes them without decoding them; the worker checks them.
 * 20: batch ports: Hello names a port per worker thread, where routers send that worker's batches directly.
 * 21: fewer replication messages per write (docs/replication.md, "Heartbeats"): a follower answers a KeepAlive whose
 * commit index it can apply with AppendOk once that is durable, and an AppendOk's commitIndex counts the commit index
 * of the Append it answers. No message changed shape; a leader of 20 would take these answers, but one of 21 with a
 * follower of 20 would wait out a round trip per commit point, so the two do not link.
 * 22: a Get (and ReplicaGet) says whether its item comes back packed in the client's form (its last argument,
 * `packed`): a bin the router splices into its client frame (PackedItem) without decoding it.
 * 23: a Scan names the slices it asks the worker for (its `slices`, in place of a range's end), and so does Stats;
 * the worker refuses either (WrongOwner) unless it owns every one: a worker scanned, or reported, the slices it owned
 * then, so one that had lost a slice left it out of a scan page or a load report without saying so.
 * 24: a worker's AppendOks of one turn to one node travel as one AppendOks entry of numbers ([slice, term, matchIndex,
 * commitIndex, sentAt, ...]), folded and split as KeepAlives are (replication-protocol.ts): a node of 23 would refuse
 * the entry (a map that is not KeepAlives) and close the link.
 * 25: replication between slice nodes goes from worker thread to worker thread: a worker's replicas send to the
 * worker of the slice on the peer node, on that worker's batch port (a Replicate frame there, from a node index, never
 * from the coordinator; every entry's slice that worker's), not through either node's main thread; a node's main
 * port takes Replicate frames from the coordinator only.
 * 26: a BatchError names the epoch the node was at when it refused a batch for its epoch (WrongOwner) in a field of
 * its own (nodeEpoch; null in every other BatchError), which the router's retry waits for (wrongOwnerWait), not its
 * message alone: a router that guessed "a newer map than mine" asked the coordinator for a map when the node lagged
 * (it had nothing newer), and went again at a map still older than the node's.
 * 27: the coordinator's Pings of one turn to one worker of a node travel as one Pings ([slice, seq, ...]), and a
 * worker's Pongs of one turn as one Pongs ([slice, seq, term, leading, commitTerm, lastIndex, ...]), each as bytes
 * (replication-protocol.ts): a node of 26 would refuse Pings as a message the coordinator does not send.
 * 28: a slice move carries its changes and items as bytes (MoveRead's and MoveFreeze's answers, MoveApply's effects:
 * one msgpack list of effects, each item in the msgpack its source held or packed it in), which the coordinator passes
 * on as they are and the target keeps as its items' packed bytes; a node of 27 sent and took them as objects.
 * 29: Hello names the node's incarnation (its last field: 32 hex digits made at random when its process starts), so
 * that the coordinator tells a node that restarted (fresh workers: what it kept of the last process's workers is
 * dropped) from one whose link flapped (the same process: a stuck worker stays stuck); before, it could not, and a
 * restarted node's workers waited out the retry of a worker that had been stuck, up to STUCK_WORKER_RETRY_MS_MAX.
 * Since, the coordinator drops that record at every link-up, a flap's too (every worker took its Assign before the
 * node answers Assigned: OpenQuestions.forget), and the incarnation serves its line that a node restarted. */
export const NODE_PROTOCOL_VERSION = 29;
/** Header that carries the cluster secret (coordinator -> node handshake, node -> coordinator join). */
export const CLUSTER_SECRET_HEADER = 'x-keyslice-cluster-secret';
/** Header in which a slice node that dials a peer (a replication link) names its NODE_PROTOCOL_VERSION: the peer
 * refuses the link when it differs (a Replicate frame's records mean different things in different versions, and
 * the dialer sends no Hello). A link without it (the coordinator's, a router's) is checked by the Hello instead. */
export const NODE_PROTOCOL_HEADER = 'x-keyslice-node-protocol';
/** Membership and operator endpoints on the coordinator's HTTP port. */
export const CLUSTER_API_PREFIX = '/cluster/';
export const CLIENT_WS_PATH = '/ws';
export const HTTP_API_PREFIX = '/api/';

export const RESULT_OK = 0;
export const RESULT_ERROR = 1;

// ---- client frames -------------------------------------------------------

const clientPackr = new Packr({ useRecords: false });
/** structuredClone false: msgpackr's id and pointer extensions (0x69, 0x70), which no client writes, are refused: a
 * frame could use them to hold one list many times over or itself, so that a walk of what it decoded (validateValue,
 * holdsMapKey) would run far past what its bytes bound, or for ever. */
const clientUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, structuredClone: false });
/** Decodes maps as Maps, whose keys msgpackr keeps as they are (clientUnpackr renames a key "__proto__"). */
const clientMapUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: false, structuredClone: false });
/** What msgpackr reads a record's key "__proto__" as, maps as Maps or not (a record decodes as an object). */
const RENAMED_MAP_KEY = '__proto_';
const UNSTORABLE_KEY_BYTES = Buffer.from(UNSTORABLE_MAP_KEY);

export type ClientRequestFrame = [id: number, op: OperationName, payload: Record<string, unknown>];
export type ClientResponseFrame =
  | [id: number, ok: typeof RESULT_OK, result: unknown]
  | [id: number, err: typeof RESULT_ERROR, code: ErrorCode, message: string]
  | [id: number, err: typeof RESULT_ERROR, code: ErrorCode, message: string, details: ErrorDetails];

/** Items that only pass through the router (a range read answered over the WebSocket API):
 * the worker packed them in the client's msgpack form (packClientList), and the client frame
 * takes those bytes as they are (encodeClientFrame), so the router neither decodes nor encodes
 * them. The client reads them as any list of items. `header` then `parts`, concatenated, are
 * the msgpack of the list. */
export class PackedItems {
  private constructor(
    readonly header: Uint8Array | null,
    readonly parts: readonly Uint8Array[],
  ) {}

  /** A whole packed list, as a worker's range returns it, checked as PackedItem.of checks one item (a list header,
   * then that many maps without ext values, read to the list's end; MalformedFrame if not): bytes that were more or
   * less than that would shift every later answer of the client frame. One walk over the headers, no copy. */
  static ofList(list: Uint8Array): PackedItems {
    let [n, at] = listHeader(list);
    for (; n > 0; n--) at = skipPackedItem(list, at);
    if (at !== list.byteLength) throw new MalformedFrame(`a packed list has ${list.byteLength - at} bytes after its items`);
    return new PackedItems(null, [list]);
  }

  /** Items packed one by one, in this order: each checked already (PackedItem.of, or cut by splitPackedList) or PACKED_NIL.
   * The list is kept, not copied. */
  static ofItems(items: readonly Uint8Array[]): PackedItems {
    return new PackedItems(arrayHeader(items.length), items);
  }
}


/** One item that only passes through the router (GetItem, and each item of BatchGet, answered over the WebSocket
 * API): the worker packed it in the client's msgpack form (packClientItem, a Get that says `packed`), and the
 * client frame takes its bytes as they are (encodeClientFrame). */
export class PackedItem {
  private constructor(readonly bytes: Uint8Array) {}

  /** A worker's packed item, checked as far as the router must trust it: the bytes are exactly one msgpack map,
   * headers and lengths read to the end (skipValue). That much guards the other answers of the same client frame:
   * bytes that were more or less than one value would shift every response after it. What is inside the map is
   * not read: the router does not look at it, and the client decodes it as it decodes any answer. It was packed
   * by msgpackr, in the worker of a node that showed the cluster secret and speaks this NODE_PROTOCOL_VERSION,
   * from an item checked when it was written (checkItem), as an object answer would have been. A malformed one
   * throws MalformedFrame: that request fails, the frame's others go on. An ext value is refused too: no item
   * holds one (packClientItem packs none), and the client's decoder (msgpackr) reads some of them (a set, an
   * error, a regexp, a record definition, a string bundle) together with the values after them, past the map's
   * end and into the next answers of the frame, where skipValue counts them as a header and their data. */
  static of(bytes: Uint8Array): PackedItem {
    const end = skipPackedItem(bytes, 0);
    if (end !== bytes.byteLength) throw new MalformedFrame(`a packed item of ${bytes.byteLength} bytes holds one value of ${end}`);
    return new PackedItem(bytes);
  }
}

/** Where the packed item at `at` ends: a msgpack map without ext values (PackedItem.of says why), within `b`. The
 * one check of packed items in the router: PackedItem.of, PackedItems.ofList and splitPackedList (a merged page's
 * pieces) each read an item's bytes once, here. */
function skipPackedItem(b: Uint8Array, at: number): number {
  const t = b[at];
  if (!((t >= 0x80 && t <= 0x8f) || t === 0xde || t === 0xdf)) throw new MalformedFrame(`a packed item starts with a map header, not 0x${t?.toString(16)}`);
  return skipValue(b, at); // within b: skipValue refuses a value that runs past its bytes
}

/** A msgpack list's item count and where its first item starts, its header at `from` (MalformedFrame if none). */
export function listHeader(list: Uint8Array, from = 0): [count: number, at: number] {
  const header = listHeaderAt(list, from);
  if (header[1] < 0) throw new MalformedFrame(`a packed list starts with a whole list header, not 0x${list[from]?.toString(16)}`);
  return header;
}

/** msgpack nil: a BatchGet's missing item among packed ones (PackedItems.ofItems). */
export const PACKED_NIL: Uint8Array = Uint8Array.of(0xc0);

/** A result that carries PackedItems (GetItems' answer: a range, buckets or a scan page; BatchGet's items) or one
 * PackedItem (GetItem's answer). */
export type PassThroughResult = { items: PackedItems; examined?: number; marker?: string; failures?: unknown[] } | { item: PackedItem };

/** One item in the client's msgpack form: what packClientList of [item] holds after its list header. */
export function packClientItem(item: Item): Uint8Array {
  return clientPackr.pack(item);
}

/** Items in the client's msgpack form: one list, as a client frame holds it. */
export function packClientList(items: Item[]): Uint8Array {
  return clientPackr.pack(items);
}
/** Items packed in the client's form (pieces of packed lists: splitPackedList; a string holds bytes as latin1, a
 * char a byte) as one list of them, not yet written anywhere: a worker's range page. The worker's answer writes its
 * bytes once, straight into the answer's own buffer (encodeOwnedResults): joined into a buffer of their own first,
 * they were copied twice (bench/PROFILE.md, "a range page written once into its answer"). Its bytes are byte for
 * byte packClientList of the items. The items are read when it is written, which may be after a commit (a held
 * answer): they are kept texts (strings, which nothing changes) or views of a list msgpackr packed, which nothing
 * writes again (msgpackr's next pack goes on past it in its buffer, or into a new one; nothing here resets or
 * transfers a Packr's buffer). */
export class PackedPage {
  /** The list's bytes: its header and its items. */
  readonly byteLength: number;
  private readonly header: Uint8Array;
  constructor(private readonly items: readonly (Uint8Array | string)[]) {
    this.header = arrayHeader(items.length);
    let size = this.header.byteLength;
    for (const b of items) size += b.length;
    this.byteLength = size;
  }
  /** Writes the list into `out` from `at`; gives where it ends. Each run of strings is joined and written in one
   * call: a write per item cost about half as much again (its checks and its call into C++ per item;
   * bench/PROFILE.md, "range pages with fewer copies"). */
  writeInto(out: Buffer, at: number): number {
    const start = at;
    out.set(this.header, at);
    at += this.header.byteLength;
    let run: string[] = [];
    const writeRun = () => {
      if (run.length === 0) return;
      at += out.write(run.length === 1 ? run[0] : run.join(''), at, 'latin1');
      run = [];
    };
    for (const b of this.items) {
      if (typeof b === 'string') run.push(b);
      else {
        writeRun();
        out.set(b, at);
        at += b.byteLength;
      }
    }
    writeRun();
    assert(at - start === this.byteLength, 'a packed page is its header and its items');
    return at;
  }
  /** The list in a buffer of its own (for whoever reads the page's bytes rather than sending them). */
  bytes(): Uint8Array {
    const out = Buffer.allocUnsafe(this.byteLength);
    this.writeInto(out, 0);
    return out;
  }
}

/** One value of a packed item, decoded alone as the client decodes it (the DynamoDB endpoint's writer of packed
 * items, coordinator/dynamodb/item-json.ts, leaves the values it does not write itself to this). */
export function unpackClientValue(bytes: Uint8Array): unknown {
  return clientUnpackr.unpack(bytes);
}
/** One attribute's value of a packed item, decoded alone (unpackClientValue) and checked as a value (isValue:
 * validateValue's rules, nested at most VALUE_DEPTH_MAX levels), else MalformedFrame: no stored item holds one
 * that is not, and the conversion that follows (fromNativeValue) recurses once per level, so a node's list nested
 * a few thousand deep would end it in a RangeError rather than this. */
export function unpackClientAttribute(bytes: Uint8Array): Value {
  let v: unknown;
  try {
    v = clientUnpackr.unpack(bytes);
  } catch (err) {
    throw new MalformedFrame(`a packed value that msgpack cannot read: ${(err as Error).message}`);
  }
  if (!isValue(v, 0)) throw new MalformedFrame(`a packed ${describeType(v)} that is not an attribute's value (validateValue's rules; at most ${VALUE_DEPTH_MAX} levels deep)`);
  return v as Value;
}
export function unpackClientList(bytes: Uint8Array): Item[] {
  const items = clientUnpackr.unpack(bytes) as unknown;
  assert(Array.isArray(items), 'a packed list is a list');
  return items as Item[];
}

/** The items of a packed list (packClientList), each as its own bytes (views, not copies),
 * found by reading only the msgpack headers: for a merge that reorders items it does not read
 * (a bucketed page, a scan page). Each item is checked as it is cut, as PackedItem.of checks
 * one (a map without ext values, within the list; MalformedFrame if not), so the pieces go into
 * a client frame as they are (PackedItems.ofItems): the page's bytes are read once, not cut and
 * then checked. `count`: only the first `count` items (a list that holds fewer is malformed). */
export function splitPackedList(list: Uint8Array, count?: number): Uint8Array[] {
  const bounds = packedItemBounds(list, count);
  const items: Uint8Array[] = new Array(bounds.length - 1);
  for (let i = 0; i < items.length; i++) items[i] = list.subarray(bounds[i], bounds[i + 1]);
  return items;
}

/** Where each item of a packed list starts, and where its last ends (one more bound than items), checked as
 * splitPackedList checks them (`count`: the same). For a worker that keeps its page's items as text (latin1 of
 * each item's bounds, partition.ts): a view of each first (a Buffer apiece) cost more than the text itself. */
export function packedItemBounds(list: Uint8Array, count?: number): number[] {
  let [n, at] = listHeader(list);
  if (count !== undefined && count < n) n = count;
  else if (count !== undefined && count > n) throw new MalformedFrame(`a packed list of ${n} items has no item ${count}`);
  const bounds: number[] = new Array(n + 1);
  bounds[0] = at;
  for (let i = 1; i <= n; i++) bounds[i] = at = skipPackedItem(list, at);
  if (count === undefined && at !== list.byteLength) throw new MalformedFrame(`a packed list has ${list.byteLength - at} bytes after its items`);
  return bounds;
}

/** Where the msgpack value at `at` ends. One loop over a count of the values still to skip
 * (a list or map adds its elements to it), no call per value: this cut is most of the
 * router's work on a merged page (bench/PROFILE.md). Every value takes at least one byte,
 * so a count that a header inflates runs into the end of the bytes and throws. A string's or
 * a bin's length is stepped over as it says, and checked once, after the loop: a header cut
 * short (NaN) or a length past the bytes leaves `at` past them, where the next value's type
 * byte is undefined (thrown) or the loop ends (thrown after it). So it refuses what
 * stringEnd refuses (test/msgpack-headers.test.ts), without a check per string in the
 * loop: stringEnd called for each str 8-32 and a check per fixstr cost 1.03-1.18x this
 * (bench/README.md, "One reader of a string's header"). An ext value is refused
 * (MalformedFrame; PackedItem.of says why): every value skipped here is inside a packed item. */
export function skipValue(b: Uint8Array, at: number): number {
  let left = 1;
  while (left > 0) {
    left--;
    const t = b[at];
    if (t === undefined) throw new MalformedFrame('a packed list ends inside a value');
    if (t <= 0x7f || t >= 0xe0) at += 1; // fixint
    else if (t <= 0x8f) {
      left += (t & 0x0f) * 2; // fixmap
      at += 1;
    } else if (t <= 0x9f) {
      left += t & 0x0f; // fixarray
      at += 1;
    }
    else if (t <= 0xbf) at += 1 + (t & 0x1f); // fixstr
    else {
      switch (t) {
        case 0xc0: // nil, false, true
        case 0xc2:
        case 0xc3:
          at += 1;
          break;
        case 0xc4: // bin 8, 16, 32 and str 8, 16, 32
        case 0xd9:
          at += 2 + b[at + 1];
          break;
        case 0xc5:
        case 0xda:
          at += 3 + u16(b, at);
          break;
        case 0xc6:
        case 0xdb:
          at += 5 + u32(b, at);
          break;
        case 0xc7: // ext 8, 16, 32 and fixext 1, 2, 4, 8, 16: no item holds one
        case 0xc8:
        case 0xc9:
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
          throw new MalformedFrame(`an ext value (0x${t.toString(16)}) in a packed item`);
        case 0xca: // float 32, 64
          at += 5;
          break;
        case 0xcb:
          at += 9;
          break;
        case 0xcc: // uint, int 8, 16, 32, 64
        case 0xd0:
          at += 2;
          break;
        case 0xcd:
        case 0xd1:
          at += 3;
          break;
        case 0xce:
        case 0xd2:
          at += 5;
          break;
        case 0xcf:
        case 0xd3:
          at += 9;
          break;
        case 0xdc: // array 16, 32
          left += u16(b, at);
          at += 3;
          break;
        case 0xdd:
          left += u32(b, at);
          at += 5;
          break;
        case 0xde: // map 16, 32
          left += u16(b, at) * 2;
          at += 3;
          break;
        case 0xdf:
          left += u32(b, at) * 2;
          at += 5;
          break;
        default:
          throw new MalformedFrame(`0x${t.toString(16)} is no msgpack type`);
      }
    }
  }
  // NaN where a length byte lay past the bytes (b[at + 1] undefined).
  if (!(at <= b.length)) throw new MalformedFrame(`a packed value ends ${Number.isNaN(at) ? 'with a length' : `${at - b.length} bytes`} past its bytes`);
  return at;
}

type AnyClientFrame = ClientRequestFrame | ClientResponseFrame;

/** One request or response, or several in one frame. A response whose result carries
 * PackedItems or a PackedItem has those bytes copied in whole (writePassThrough); each run of
 * the others between them is packed in one call, as a list whose header is then left out.
 * `join`: asked only for such a frame, with its size: the buffer (at least that long) its pieces are joined in (a view
 * of its start is returned), in place of a buffer of their own; the router's reuses one from frame to frame
 * (coordinator/router/ws-api.ts, FrameSlab), which a frame msgpackr packs whole never needs. */
export function encodeClientFrame(frame: AnyClientFrame | ClientRequestFrame[] | ClientResponseFrame[], join: ((size: number) => Buffer) | null = null): Buffer {
  if (Array.isArray(frame[0])) {
    const list = frame as AnyClientFrame[];
    if (!list.some(passesThrough)) return clientPackr.pack(list);
    const parts: Uint8Array[] = [arrayHeader(list.length)];
    let from = 0;
    for (let i = 0; i <= list.length; i++) {
      const r = list[i];
      if (i < list.length && !passesThrough(r)) continue;
      if (i > from) parts.push(clientPackr.pack(list.slice(from, i)).subarray(arrayHeaderBytes(i - from)));
      if (i < list.length) writePassThrough(r as [number, typeof RESULT_OK, PassThroughResult], parts);
      from = i + 1;
    }
    return joinParts(parts, join);
  }
  const one = frame as AnyClientFrame;
  if (!passesThrough(one)) return clientPackr.pack(one);
  const parts: Uint8Array[] = [];
  writePassThrough(one, parts);
  return joinParts(parts, join);
}

/** `parts` one after another: in what `join` gives for their size (a view of its start), else in a buffer of their own. */
function joinParts(parts: readonly Uint8Array[], join: ((size: number) => Buffer) | null): Buffer {
  let size = 0;
  for (const b of parts) size += b.byteLength;
  if (join === null) return Buffer.concat(parts, size);
  const out = join(size);
  assert(out.byteLength >= size, 'a frame is joined in a buffer that holds it');
  let at = 0;
  for (const b of parts) {
    out.set(b, at);
    at += b.byteLength;
  }
  return out.subarray(0, size);
}

function passesThrough(r: AnyClientFrame): r is [number, typeof RESULT_OK, PassThroughResult] {
  if (r[1] !== RESULT_OK || typeof r[2] !== 'object' || r[2] === null) return false;
  const result = r[2] as { items?: unknown; item?: unknown };
  return result.items instanceof PackedItems || result.item instanceof PackedItem;
}

/** The head of a GetItem's answer, [id, RESULT_OK, {item: ...}] up to the item, as msgpackr packs it (the id as
 * putUint writes it, which is msgpackr's bytes for every safe whole number: a double past 32 bits). Written by hand:
 * through msgpackr it was a pack call per answer. The id goes through a scratch buffer whose DataView is made once,
 * and the rest is written byte by byte: a DataView per answer, or copying the tail from a constant array, made
 * encodeClientFrame of a GetItem answer 1.1x to 1.5x slower than the id written by hand; this way it is 0.85x to
 * 1.01x of it (medians of 41 rounds of 300,000 frames alternated, four runs, load average about 9). */
function itemAnswerHead(id: number): Uint8Array {
  assert(Number.isSafeInteger(id) && id >= 0, 'a request id is a safe whole number (decodeClientRequests checked it)');
  let at = putUint(idScratch, idScratchView, 1, id);
  const head = Buffer.allocUnsafe(at + 9);
  for (let i = 0; i < at; i++) head[i] = idScratch[i];
  head[at++] = RESULT_OK;
  // A map of one, item: msgpackr writes an object's size as 16 bits (0xde), not in the type byte.
  head[at++] = 0xde;
  head[at++] = 0;
  head[at++] = 1;
  head[at++] = 0xa4; // "item", a string of 4 bytes
  head[at++] = 0x69;
  head[at++] = 0x74;
  head[at++] = 0x65;
  head[at++] = 0x6d;
  assert(at === head.byteLength, 'the head is the bytes written');
  return head;
}

/** itemAnswerHead's array header of three (0x93) and its id (at most 9 bytes: uintBytes). */
const idScratch = Uint8Array.from([0x93, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
const idScratchView = new DataView(idScratch.buffer);

/** The response packed with the passing value (the items' list, or the item) replaced by nil and put last, so that
 * the nil is the response's last byte (0xc0); that byte is replaced by the value's bytes. A GetItem's answer (the
 * item alone) has its head written by hand (itemAnswerHead). */
function writePassThrough([id, ok, result]: [number, typeof RESULT_OK, PassThroughResult], parts: Uint8Array[]): void {
  const passing = 'item' in result ? 'item' : 'items';
  if (passing === 'item' && Object.keys(result).length === 1) parts.push(itemAnswerHead(id));
  else {
    // The other fields copied one by one, in their order, then the passing one: `{ ...rest, items: [] }` (a spread
    // with a property after it) took V8's slow path, about 5 µs a range answer (0.18x of it this way:
    // bench/PROFILE.md), and `{ ...result, item: null }` left item where it was, not last.
    const shown: Record<string, unknown> = {};
    for (const k in result) if (k !== passing) shown[k] = (result as Record<string, unknown>)[k];
    shown[passing] = null;
    const packed = clientPackr.pack([id, ok, shown]);
    assert(packed[packed.length - 1] === 0xc0, 'nil packs as 0xc0, the last byte of the response');
    parts.push(packed.subarray(0, packed.length - 1));
  }
  if ('item' in result) {
    parts.push(result.item.bytes);
    return;
  }
  if (result.items.header !== null) parts.push(result.items.header);
  for (const b of result.items.parts) parts.push(b);
}

/** Checks size, decodes, and checks the shape of each request of one client
 * frame (one request or a list). A bad request becomes a FrameError with its id
 * (or -1) and does not stop the others; a frame that cannot be read at all throws. */
export function decodeClientRequests(bytes: Uint8Array): (ClientRequestFrame | FrameError)[] {
  if (bytes.byteLength > REQUEST_BYTES_MAX) {
    throw new FrameError(-1, 'RequestTooLarge', `frame of ${bytes.byteLength} bytes exceeds ${REQUEST_BYTES_MAX}`);
  }
  let frame: unknown;
  try {
    frame = clientUnpackr.unpack(bytes);
  } catch (err) {
    throw new FrameError(-1, 'MalformedRequest', `frame is not valid msgpack: ${(err as Error).message}`);
  }
  if (!Array.isArray(frame)) throw new FrameError(-1, 'MalformedRequest', 'a request frame is an array [id, operation, payload], or a list of them');
  const single = !Array.isArray(frame[0]);
  if (!single && frame.length > CLIENT_FRAME_REQUESTS_MAX) throw new FrameError(-1, 'RequestTooLarge', `a frame holds at most ${CLIENT_FRAME_REQUESTS_MAX} requests; got ${frame.length}`);
  const requests = single ? [checkRequest(frame)] : frame.map(checkRequest);
  // The decode above read a map key "__proto__" as "__proto_": a request that named one would be stored changed.
  // Only a frame whose bytes hold the text at all (rare) is decoded again, with its map keys as they are.
  if (Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).includes(UNSTORABLE_KEY_BYTES)) {
    const again = clientMapUnpackr.unpack(bytes) as unknown[];
    requests.forEach((r, i) => {
      if (!(r instanceof FrameError) && holdsMapKey(single ? again : again[i], UNSTORABLE_MAP_KEY)) {
        requests[i] = new FrameError(r[0], 'ValidationError', `${r[1]}: ${UNSTORABLE_MAP_KEY_REFUSED}`);
      }
    });
  }
  return requests;
}

/** Whether a value decoded by clientMapUnpackr has a map, at any depth, with the key `key`. A walk with its own
 * stack, not recursion: the frame (at most REQUEST_BYTES_MAX) bounds it, however deep it nests, as it decodes to a
 * tree (no id or pointer extension: structuredClone false). A msgpackr record (ext 0x72, which no client writes)
 * decodes as an object even here, its key "__proto__" already renamed: one holding that name counts too (so a
 * record's own "__proto_" is refused as well, in a frame that holds the text "__proto__"). */
function holdsMapKey(v: unknown, key: string): boolean {
  const todo: unknown[] = [v];
  while (todo.length > 0) {
    const x = todo.pop();
    if (x instanceof Map) {
      if (x.has(key)) return true;
      for (const e of x.values()) todo.push(e);
    } else if (Array.isArray(x)) {
      for (const e of x) todo.push(e);
    } else if (isPlainObject(x)) {
      if (Object.hasOwn(x, RENAMED_MAP_KEY)) return true;
      for (const e of Object.values(x)) todo.push(e);
    }
  }
  return false;
}

function checkRequest(frame: unknown): ClientRequestFrame | FrameError {
  if (!Array.isArray(frame) || frame.length !== 3) return new FrameError(-1, 'MalformedRequest', 'a request is an array [id, operation, payload]');
  const [id, op, payload] = frame;
  if (!Number.isSafeInteger(id) || id < 0) return new FrameError(-1, 'MalformedRequest', 'request id must be an unsigned integer');
  if (!isOperationName(op)) return new FrameError(id, 'UnknownOperation', `unknown operation ${JSON.stringify(op)}`);
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return new FrameError(id, 'MalformedRequest', 'request payload must be a map');
  return [id, op, payload as Record<string, unknown>];
}

/** The responses of one frame (one, or a list): read by readMsgpack (faster on a page of items), or by clientUnpackr
 * where it leaves the frame to it (a type it does not read, or bytes that are not well-formed msgpack): the same
 * values either way. */
export function decodeClientResponses(bytes: Uint8Array): ClientResponseFrame[] {
  const read = readMsgpack(bytes);
  const frame = read === LEFT_TO_MSGPACKR ? (clientUnpackr.unpack(bytes) as unknown) : read;
  if (!Array.isArray(frame)) throw new Error('malformed response frame from server');
  const list = (Array.isArray(frame[0]) ? frame : [frame]) as ClientResponseFrame[];
  for (const r of list) if (!Array.isArray(r) || typeof r[0] !== 'number') throw new Error('malformed response frame from server');
  return list;
}

export class FrameError extends KeysliceError {
  constructor(
    readonly id: number,
    code: ErrorCode,
    message: string,
  ) {
    super(code, message);
  }
}

// ---- coordinator <-> slice node frames -----------------------------------

export const NodeFrame = {
  Hello: 1,
  Assign: 2,
  Assigned: 3,
  Batch: 4,
  BatchReply: 5,
  BatchError: 6,
  Epoch: 7,
  Replicate: 8,
} as const;

/** Assign's sixth field: this node's place in the replica sets of the slices it holds a replica of. */
export interface AssignReplication {
  /** This node's index in the cluster map. */
  self: number;
  /** Every other node named in `replicas`, with the URL to dial it at. */
  peers: [node: number, url: string][];
  /** Every slice of which this node holds a replica, with its replica set [leader, ...followers]. */
  replicas: [slice: number, nodes: number[]][];
}

/** One Replicate frame's entries: messages of many slices, for one destination. To encodeNodeFrame a message may
 * be given as an object (it is encoded) or as the bytes encodeReplicationMessage made; decodeNodeFrame gives the
 * coordinator objects, checked. */
export type ReplicateEntry = [slice: number, message: ReplicationMessage | Uint8Array];
/** What the coordinator gets from decodeNodeFrame: every message decoded and checked. */
export type DecodedReplicateEntry = [slice: number, message: ReplicationMessage];
/** What a slice node gets from decodeNodeFrame: each message as its bytes, unchecked (its worker checks them:
 * decodeReplicationMessage), except KeepAlives and AppendOks, checked whole. */
export type WireReplicateEntry = [slice: number, message: Uint8Array | FoldedMessage];

export type NodeFrameKind = (typeof NodeFrame)[keyof typeof NodeFrame];

export type NodeFrameMessage =
  | [typeof NodeFrame.Hello, version: number, workerCount: number, nodeId: string, clusterId: string | null, batchPorts: number[], incarnation: string]
  | [typeof NodeFrame.Assign, epoch: number, sliceCount: number, slices: number[], clusterId: string, replication: AssignReplication | null]
  | [typeof NodeFrame.Assigned, epoch: number]
  | [typeof NodeFrame.Batch, batchId: number, epoch: number, parts: [worker: number, ops: Uint8Array][]]
  | [typeof NodeFrame.BatchReply, batchId: number, worker: number, results: Uint8Array]
  | BatchErrorFrame
  | [typeof NodeFrame.Epoch, epoch: number]
  | [typeof NodeFrame.Replicate, from: number, entries: ReplicateEntry[]];
/** A node's refusal of a batch (or of one worker's chunk of it), nothing of which was applied: for its epoch
 * (WrongOwner), naming the epoch the node is at (staleBatchError), or for any other reason, naming none (batchError). */
export type BatchErrorFrame =
  | [typeof NodeFrame.BatchError, batchId: number, code: 'WrongOwner', message: string, nodeEpoch: number]
  | [typeof NodeFrame.BatchError, batchId: number, code: Exclude<ErrorCode, 'WrongOwner'>, message: string, nodeEpoch: null];
/** A frame as the coordinator decodes it (Replicate's messages decoded and checked). */
export type CoordinatorNodeFrame = Exclude<NodeFrameMessage, [typeof NodeFrame.Replicate, ...unknown[]]> | [typeof NodeFrame.Replicate, from: number, entries: DecodedReplicateEntry[]];
/** A frame as a slice node decodes it (Replicate's messages as bytes). */
export type NodeSideFrame = Exclude<NodeFrameMessage, [typeof NodeFrame.Replicate, ...unknown[]]> | [typeof NodeFrame.Replicate, from: number, entries: WireReplicateEntry[]];
/** A frame as a worker's batch port decodes it: a router's Batch, or a peer's Replicate with every message decoded and checked. */
export type WorkerSideFrame = Extract<NodeFrameMessage, [typeof NodeFrame.Batch, ...unknown[]]> | [typeof NodeFrame.Replicate, from: number, entries: DecodedReplicateEntry[]];

/** Who receives a node frame: a node's main thread, a worker thread on its batch port, or a coordinator or router. */
export type NodeFrameReceiver = 'node' | 'worker' | 'coordinator';

/** The frame kinds each side receives. */
const FRAMES_TO: Record<NodeFrameReceiver, ReadonlySet<number>> = {
  node: new Set([NodeFrame.Assign, NodeFrame.Batch, NodeFrame.Epoch, NodeFrame.Replicate]),
  worker: new Set([NodeFrame.Batch, NodeFrame.Replicate]),
  coordinator: new Set([NodeFrame.Hello, NodeFrame.Assigned, NodeFrame.BatchReply, NodeFrame.BatchError, NodeFrame.Replicate]),
};

/** A node id, a cluster id or a node's incarnation: 128 random bits as 32 lowercase hex digits. */
const IDENTITY = /^[0-9a-f]{32}$/;
/** A slice node's address: ws://host:port (or wss://), at most NODE_URL_CHARS_MAX characters. The one rule for every
 * place one comes in (--nodes, keyslice add, a node that joins, an Assign's peers), so that no address the cluster map
 * file check refuses (coordinator/metadata/cluster-map-file.ts) is ever admitted and written to it. */
export function isNodeUrl(v: unknown): v is string {
  return typeof v === 'string' && v.length <= NODE_URL_CHARS_MAX && /^wss?:\/\/[^/\s]+$/.test(v);
}

export function isIdentity(v: unknown): v is string {
  return typeof v === 'string' && IDENTITY.test(v);
}

// Records mode: objects of one shape in a frame share one structure definition.
const internalPackr = new Packr({ useRecords: true, mapsAsObjects: true });
const internalUnpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });
// Workers keep decoded binary values in their partitions: copy them out of the frame.
const workerUnpackr = new Unpackr({ useRecords: true, mapsAsObjects: true, copyBuffers: true });

export function encodeNodeFrame(frame: NodeFrameMessage): Buffer {
  if (frame[0] === NodeFrame.Replicate) {
    const entries = frame[2].map(([slice, m]): WireReplicateEntry => [slice, m instanceof Uint8Array || isFoldedMessage(m) ? m : encodeReplicationMessage(m)]);
    return internalPackr.pack([NodeFrame.Replicate, frame[1], entries]);
  }
  return internalPackr.pack(frame);
}

/** Bytes a worker thread leaves free in front of each chunk's packed results (withReplyHeadroom), where the node
 * writes the BatchReply frame's head (at most 1 + 1 + 5 + 1 + 5 bytes: list, kind, batch id, worker, bin header). */
export const BATCH_REPLY_HEADROOM = 16;

/** `parts` one after another, copied into a buffer of their own with BATCH_REPLY_HEADROOM free bytes in front: what
 * a worker thread answers its node (the whole buffer then belongs to the node, which puts the frame's head there:
 * encodeBatchReply). */
export function withReplyHeadroom(parts: readonly (Uint8Array | PackedPage)[]): Uint8Array {
  let size = 0;
  for (const b of parts) size += b.byteLength;
  const own = Buffer.allocUnsafeSlow(BATCH_REPLY_HEADROOM + size);
  let at = BATCH_REPLY_HEADROOM;
  for (const b of parts) {
    if (b instanceof PackedPage) at = b.writeInto(own, at);
    else {
      own.set(b, at);
      at += b.byteLength;
    }
  }
  assert(at === own.byteLength, 'an answer is its headroom and its parts');
  return new Uint8Array(own.buffer, BATCH_REPLY_HEADROOM, size);
}

/** Whether `results` are what withReplyHeadroom makes: the whole of their buffer but BATCH_REPLY_HEADROOM bytes in
 * front of them. */
export function hasReplyHeadroom(results: Uint8Array): boolean {
  return results.byteOffset === BATCH_REPLY_HEADROOM && results.buffer.byteLength === BATCH_REPLY_HEADROOM + results.byteLength;
}

/** [NodeFrame.BatchReply, batchId, worker, results], the msgpack that encodeNodeFrame makes of it (decodeNodeFrame
 * reads both alike). `results` as a worker thread answered them (withReplyHeadroom: the node owns their whole
 * buffer): the head is written into the headroom in front, so the results, a range page's items most of their
 * bytes, are not copied again on their way to the router. Any other bytes are packed as a new frame. */
export function encodeBatchReply(batchId: number, worker: number, results: Uint8Array): Uint8Array {
  const n = results.byteLength;
  // Records mode reads 0x40-0x7f as a record's id: a whole number from 64 up is written with a type byte, as msgpackr does.
  const idBytes = batchId < 0x40 ? 1 : batchId < 0x100 ? 2 : batchId < 0x10000 ? 3 : 5;
  const binBytes = binHeaderBytes(n);
  const head = 2 + idBytes + 1 + binBytes;
  if (!hasReplyHeadroom(results) || !(isUint(batchId) && batchId <= 0xffffffff) || !(isUint(worker) && worker < 0x40)) {
    return encodeNodeFrame([NodeFrame.BatchReply, batchId, worker, results]);
  }
  assert(head <= BATCH_REPLY_HEADROOM, 'the head of a BatchReply fits in the headroom');
  const out = new Uint8Array(results.buffer, results.byteOffset - head, head + n);
  let at = 0;
  /** `v` big-endian in `bytes` bytes. */
  const put = (v: number, bytes: number) => {
    for (let i = bytes - 1; i >= 0; i--) out[at++] = Math.floor(v / 2 ** (8 * i)) & 0xff;
  };
  out[at++] = 0x94;
  out[at++] = NodeFrame.BatchReply;
  if (idBytes > 1) out[at++] = idBytes === 2 ? 0xcc : idBytes === 3 ? 0xcd : 0xce;
  put(batchId, idBytes === 1 ? 1 : idBytes - 1);
  out[at++] = worker;
  at = putBinHeader(out, at, n);
  assert(at === head, 'a BatchReply head is as long as counted');
  return out;
}

// One replication message's own bytes (plain msgpack maps: no record structures shared with the frame around it).
const replicationPackr = new Packr({ useRecords: false });
// Payloads and snapshot states are kept by the replica: copied out of the bytes they came in.
const replicationUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, copyBuffers: true });

/** A message's bytes for a Replicate entry. They may view a reused buffer (msgpackr's, or writeAppend's arena): copy
 * them before the next call. An Append (a leader sends one per slice and follower at each turn that wrote the slice:
 * with writes spread over many slices, about two per put at R=3, one object for both when they share `next`) is
 * written here field by field (writeAppend), once per object; any other by msgpackr. */
export function encodeReplicationMessage(m: ReplicationMessage): Uint8Array {
  if (m.type !== 'Append') return replicationPackr.pack(m);
  // A leader sends one Append object to its followers at the same `next` within one call (AppendRound in replica.ts),
  // so the worker's outbox holds it several times in a row: its bytes are written once and given again. Safe: the
  // arena they view is never written again, and a message is not changed once sent (the object is compared, not its
  // fields). It keeps one Append (at most REPLICATION_APPEND_RECORDS_MAX records) alive until the next is written.
  if (m !== lastAppend) {
    lastAppendBytes = writeAppend(m);
    lastAppend = m;
  }
  return lastAppendBytes;
}
/** The last Append encodeReplicationMessage wrote, and its bytes. A message is not changed once sent. */
let lastAppend: ReplicationMessage | null = null;
let lastAppendBytes: Uint8Array = new Uint8Array(0);

// The msgpack of an Append, as the receiver's decoder reads it (decodeReplicationMessage: a map of its fields, each
// record a map of term, index, payload and checksum), written without msgpackr's walk over each object's keys and
// its checks of each value's type; test/node-frames.test.ts checks that it decodes to the message it was made of.
const APPEND_HEAD = Uint8Array.from([0x88, ...fixstr('type'), ...fixstr('Append'), ...fixstr('term')]);
const K_PREV_INDEX = fixstr('prevIndex');
const K_PREV_TERM = fixstr('prevTerm');
const K_RECORDS = fixstr('records');
const K_COMMIT_INDEX = fixstr('commitIndex');
const K_SENT_AT = fixstr('sentAt');
const K_LEASED = fixstr('leased');
const RECORD_HEAD = Uint8Array.from([0x84, ...fixstr('term')]);
const K_INDEX = fixstr('index');
const K_PAYLOAD = fixstr('payload');
const K_CHECKSUM = fixstr('checksum');

/** Where writeAppend writes, as msgpackr writes into a buffer it reuses: each message takes the bytes after the
 * last one's, and a full arena is replaced, never written again, so a view handed out stays whole until its holder
 * copies it. An ArrayBuffer of its own per message (a few hundred bytes, two per put at R=3) cost more in garbage
 * collection than writing it field by field saved. */
let arena = new Uint8Array(0);
let arenaAt = 0;
const ARENA_BYTES = 256 * 1024;
function arenaBytes(n: number): Uint8Array {
  if (arenaAt + n > arena.byteLength) {
    arena = new Uint8Array(Math.max(ARENA_BYTES, n));
    arenaAt = 0;
  }
  arenaAt += n;
  return arena.subarray(arenaAt - n, arenaAt);
}

/** Bytes of `records` as a msgpack list of {term, index, payload, checksum} maps (what putRecordList writes). A
 * replica makes each record of whole numbers and bytes (a leader's own, or one that checkReplicationMessage checked),
 * so there is no other shape to leave to msgpackr: one would be a bug. */
export function recordListBytes(records: readonly ReplicaRecord[]): number {
  let size = arrayHeaderBytes(records.length);
  for (const r of records) {
    assert(isUint(r.term) && isUint(r.index) && isUint(r.checksum) && r.payload instanceof Uint8Array, 'a replica record is whole numbers >= 0 and bytes');
    size += RECORD_HEAD.length + uintBytes(r.term) + K_INDEX.length + uintBytes(r.index) + K_PAYLOAD.length + binHeaderBytes(r.payload.byteLength) + r.payload.byteLength + K_CHECKSUM.length + uintBytes(r.checksum);
  }
  return size;
}

/** Writes `records` (recordListBytes said how long) into `out` at `at`; answers where they end. */
export function putRecordList(out: Uint8Array, view: DataView, at: number, records: readonly ReplicaRecord[]): number {
  at = putArrayHeader(out, at, records.length);
  for (const r of records) {
    out.set(RECORD_HEAD, at);
    at = putUint(out, view, at + RECORD_HEAD.length, r.term);
    out.set(K_INDEX, at);
    at = putUint(out, view, at + K_INDEX.length, r.index);
    out.set(K_PAYLOAD, at);
    at = putBinHeader(out, at + K_PAYLOAD.length, r.payload.byteLength);
    out.set(r.payload, at);
    at += r.payload.byteLength;
    out.set(K_CHECKSUM, at);
    at = putUint(out, view, at + K_CHECKSUM.length, r.checksum);
  }
  return at;
}

/** The Append's bytes (viewing writeAppend's arena). A leader makes every field a whole number >= 0 (sentAt rounded
 * down to the ms) and leased a boolean: any other would be a bug, asserted, not left to msgpackr. */
export function writeAppend(m: Extract<ReplicationMessage, { type: 'Append' }>): Uint8Array {
  assert(
    isUint(m.term) && isUint(m.prevIndex) && isUint(m.prevTerm) && isUint(m.commitIndex) && isUint(m.sentAt) && typeof m.leased === 'boolean',
    "an Append's numbers are whole numbers >= 0 and leased a boolean",
  );
  const recordBytes = recordListBytes(m.records);
  const size =
    APPEND_HEAD.length + uintBytes(m.term) + K_PREV_INDEX.length + uintBytes(m.prevIndex) + K_PREV_TERM.length + uintBytes(m.prevTerm) + K_RECORDS.length + recordBytes +
    K_COMMIT_INDEX.length + uintBytes(m.commitIndex) + K_SENT_AT.length + uintBytes(m.sentAt) + K_LEASED.length + 1;
  const out = arenaBytes(size);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  let at = 0;
  const key = (k: Uint8Array) => {
    out.set(k, at);
    at += k.length;
  };
  key(APPEND_HEAD);
  at = putUint(out, view, at, m.term);
  key(K_PREV_INDEX);
  at = putUint(out, view, at, m.prevIndex);
  key(K_PREV_TERM);
  at = putUint(out, view, at, m.prevTerm);
  key(K_RECORDS);
  at = putRecordList(out, view, at, m.records);
  key(K_COMMIT_INDEX);
  at = putUint(out, view, at, m.commitIndex);
  key(K_SENT_AT);
  at = putUint(out, view, at, m.sentAt);
  key(K_LEASED);
  out[at++] = m.leased ? 0xc3 : 0xc2;
  assert(at === size, 'an Append is as long as counted');
  return out;
}

/** A record's payload in readAppend until the layout is known good (then a view of its one copy). Never handed out. */
const NO_PAYLOAD = new Uint8Array(0);

/** The Append in `bytes` if they are laid out exactly as writeAppend writes one (its keys in its order, each number in
 * one of msgpack's whole-number forms, a double only if it holds a whole number), else null: the caller decodes them
 * with msgpackr then, and checks what that gives (decodeReplicationMessage), so what this takes is what that path
 * would take, and what it does not, that path decodes, refuses or takes as it always did. What it answers is a whole
 * message (checkReplicationMessage's Append: whole numbers >= 0 a double holds exactly, leased a boolean, records of
 * {term, index, payload, checksum}) by construction. The payloads view one copy of `bytes`, made here: a follower
 * keeps them (its log, its records until it compacts), and `bytes` view the frame they came in; msgpackr's
 * copyBuffers made an ArrayBuffer per payload, and its walk built every map key by key (a follower takes an Append
 * per put and slice: bench/README.md, "A follower's Append read by hand"). */
export function readAppend(bytes: Uint8Array): Extract<ReplicationMessage, { type: 'Append' }> | null {
  const c = appendCursor;
  // One read at a time: a read begun inside another (nothing in it calls out today) would move the other's place and
  // write over its payloads' spans, so that the other could return an Append whose payloads are other bytes. A read
  // that threw left no frame (finally below), so this holds after one.
  assert(c.bytes === NO_PAYLOAD, 'readAppend is not entered again while it reads');
  c.bytes = bytes;
  c.at = 0;
  try {
    return readAppendAt(c);
  } finally {
    c.bytes = NO_PAYLOAD; // it keeps no frame alive
  }
}

/** readAppend's place in the bytes it reads, and the payloads' spans: one of each, reused (readAppend runs to its end
 * without yielding), not four closures over its locals and a list per Append: about two fifths of what it allocated
 * per Append (bench/README.md, "Allocation per replicated put"). */
class AppendCursor {
  bytes: Uint8Array = NO_PAYLOAD;
  at = 0;
  /** Each record's payload's start and end in `bytes`, at 2i and 2i + 1, until the layout is known good. */
  readonly spans: number[] = [];

  /** Whether `k`'s bytes come next (and then steps past them). */
  key(k: Uint8Array): boolean {
    const b = this.bytes;
    const at = this.at;
    if (at + k.length > b.byteLength) return false;
    for (let i = 0; i < k.length; i++) if (b[at + i] !== k[i]) return false;
    this.at = at + k.length;
    return true;
  }

  /** The whole number >= 0 at `at`, stepping past it (-1: not one, or not in a form writeAppend writes): plainNumber,
   * the reader setEffectsEnd uses. */
  uint(): number {
    const v = plainNumber(this.bytes, this.at);
    if (!(Number.isSafeInteger(v) && v >= 0)) return -1;
    this.at = numberEnd(this.bytes, this.at);
    return v;
  }

  /** The count of the list whose header is at `at` (listHeaderAt), stepping past it (-1: none). */
  listLength(): number {
    const [count, next] = listHeaderAt(this.bytes, this.at);
    if (next < 0) return -1;
    this.at = next;
    return count;
  }

  /** The length of the bin (0xc4, 0xc5, 0xc6) whose header is at `at`, stepping past it (-1: none, or cut). */
  binLength(): number {
    const b = this.bytes;
    const at = this.at;
    const t = b[at];
    const width = t === 0xc4 ? 1 : t === 0xc5 ? 2 : t === 0xc6 ? 4 : 0;
    if (width === 0 || at + 1 + width > b.byteLength) return -1;
    const v = width === 1 ? b[at + 1] : width === 2 ? u16(b, at) : u32(b, at);
    this.at = at + 1 + width;
    return v;
  }
}
const appendCursor = new AppendCursor();

function readAppendAt(c: AppendCursor): Extract<ReplicationMessage, { type: 'Append' }> | null {
  const bytes = c.bytes;
  const n = bytes.byteLength;
  if (!c.key(APPEND_HEAD)) return null;
  const term = c.uint();
  if (term < 0 || !c.key(K_PREV_INDEX)) return null;
  const prevIndex = c.uint();
  if (prevIndex < 0 || !c.key(K_PREV_TERM)) return null;
  const prevTerm = c.uint();
  if (prevTerm < 0 || !c.key(K_RECORDS)) return null;
  const count = c.listLength();
  // Each record takes more than RECORD_HEAD's bytes: a count past what the bytes can hold is not an Append's. Nor is
  // one past what a leader sends: left to msgpackr, whose check refuses it (checkReplicationMessage).
  if (count < 0 || count > REPLICATION_APPEND_RECORDS_MAX || count * RECORD_HEAD.length > n - c.at) return null;
  // The layout first, each payload's place kept (its start and end in `spans`), copied only once the whole of it is
  // known good: damaged bytes (a multi-MB Append among them) cost no copy here before msgpackr's.
  const records: ReplicaRecord[] = new Array(count);
  const spans = c.spans;
  for (let i = 0; i < count; i++) {
    if (!c.key(RECORD_HEAD)) return null;
    const rTerm = c.uint();
    if (rTerm < 0 || !c.key(K_INDEX)) return null;
    const index = c.uint();
    if (index < 0 || !c.key(K_PAYLOAD)) return null;
    const size = c.binLength();
    if (size < 0 || c.at + size > n) return null;
    spans[2 * i] = c.at;
    c.at += size;
    spans[2 * i + 1] = c.at;
    if (!c.key(K_CHECKSUM)) return null;
    const checksum = c.uint();
    if (checksum < 0) return null;
    records[i] = { term: rTerm, index, payload: NO_PAYLOAD, checksum };
  }
  if (!c.key(K_COMMIT_INDEX)) return null;
  const commitIndex = c.uint();
  if (commitIndex < 0 || !c.key(K_SENT_AT)) return null;
  const sentAt = c.uint();
  if (sentAt < 0 || !c.key(K_LEASED) || c.at !== n - 1 || !(bytes[c.at] === 0xc2 || bytes[c.at] === 0xc3)) return null;
  const own = new Uint8Array(n);
  own.set(bytes);
  for (let i = 0; i < count; i++) records[i].payload = own.subarray(spans[2 * i], spans[2 * i + 1]);
  return { type: 'Append', term, prevIndex, prevTerm, records, commitIndex, sentAt, leased: bytes[c.at] === 0xc3 };
}

/** Decodes and checks one replication message for `slice` that `receiver` got from `from` (COORDINATOR or a node
 * index): a whole message (checkReplicationMessage) of those that hop carries, other than KeepAlives and AppendOks (a
 * map in the frame, never bytes). Throws MalformedFrame. An Append as writeAppend wrote it is read by hand
 * (readAppend: a whole message by construction), any other message by msgpackr and checked. */
export function decodeReplicationMessage(bytes: Uint8Array, from: number, receiver: 'node' | 'coordinator', slice: number): ReplicationMessage {
  const append = readAppend(bytes);
  if (append !== null) {
    checkHop(append.type, from, receiver, slice);
    return append;
  }
  let m: unknown;
  try {
    m = replicationUnpackr.unpack(bytes);
  } catch (err) {
    fail(`Replicate: slice ${slice}: a replication message is not valid msgpack: ${(err as Error).message}`);
  }
  checkHopMessage(m, from, receiver, slice);
  // KeepAlives and AppendOks travel as a map, which the sender folds per worker and the worker unfolds into one
  // message per slice before a replica sees it: as bytes they would reach a replica whole, which asserts that none does (a
  // peer's frame would stop the node).
  const type = (m as ReplicationMessage).type;
  if (FOLDED_MESSAGES.has(type)) fail(`Replicate: slice ${slice}: ${type} travel as a map, not as a message's bytes`);
  // A Pings or Pongs is under its first slice (replication-protocol.ts), which picks the worker it goes to: one
  // under another slice would reach a worker its slices are not (a Pings) or name a slice it does not answer for.
  if ((type === 'Pings' || type === 'Pongs') && (m as { slices: number[] }).slices[0] !== slice) {
    fail(`Replicate: slice ${slice}: a ${type}'s entry is under its first slice, ${(m as { slices: number[] }).slices[0]}`);
  }
  return m as ReplicationMessage;
}

function checkHopMessage(m: unknown, from: number, receiver: 'node' | 'coordinator', slice: number): void {
  const problem = checkReplicationMessage(m);
  if (problem !== null) fail(`Replicate: slice ${slice}: ${problem}`);
  checkHop((m as ReplicationMessage).type, from, receiver, slice);
}

/** The messages of this hop only (a peer runs no election, the coordinator sends no records): a replica takes what
 * reaches it without asking who may send it. */
function checkHop(type: ReplicationMessage['type'], from: number, receiver: 'node' | 'coordinator', slice: number): void {
  const hop = receiver === 'coordinator' ? MESSAGES_TO_COORDINATOR : from === COORDINATOR ? MESSAGES_FROM_COORDINATOR : MESSAGES_BETWEEN_REPLICAS;
  if (!hop.has(type)) fail(`Replicate: slice ${slice}: ${type} is not sent ${receiver === 'coordinator' ? 'to the coordinator' : from === COORDINATOR ? 'by the coordinator' : 'from one replica to another'}`);
}

/** A WebSocket close reason holds at most 123 bytes of UTF-8 (ws throws past that): `text`
 * cut at a character boundary to fit. */
export function closeReason(text: string): string {
  let out = '';
  let bytes = 0;
  for (const ch of text) {
    bytes += Buffer.byteLength(ch);
    if (bytes > 123) break;
    out += ch;
  }
  return out;
}

/** Something another process sent that does not have the shape the protocol gives it. */
export class MalformedFrame extends Error {}

/** Checks read `if (!ok) fail(message)`, so that a message is built only for what fails: they run for every op. */
function fail(what: string): never {
  throw new MalformedFrame(what);
}
/** Counts, ids, epochs, indexes: whole numbers a double holds exactly. */
const isUint = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isSlice = (v: unknown): v is number => isUint(v) && v < SLICE_COUNT_MAX;
const show = (v: unknown): string => (typeof v === 'number' || typeof v === 'boolean' ? String(v) : typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : describeType(v));

const isNodeIndex = (v: unknown): v is number => isUint(v) && v < CLUSTER_NODE_INDEX_MAX;

/** Assign's replication field, whole: a map of exactly self, peers and replicas; every slice once,
 * below the slice count, with a replica set of distinct nodes that includes this node; every other
 * node of those sets among the peers, each peer once, with a ws:// URL. */
function checkAssignReplication(r: unknown, sliceCount: number): void {
  if (!isPlainObject(r)) fail('Assign: replication is null or {self, peers, replicas}');
  for (const k of Object.keys(r)) if (!(k === 'self' || k === 'peers' || k === 'replicas')) fail(`Assign: replication has no field "${k.slice(0, 40)}"`);
  const { self, peers, replicas } = r;
  if (!isNodeIndex(self)) fail(`Assign: replication.self ${show(self)} is not a node index`);
  if (!Array.isArray(peers)) fail('Assign: replication.peers is a list of [node, url]');
  const peerSet = new Set<number>();
  for (const p of peers as unknown[]) {
    if (!(Array.isArray(p) && p.length === 2 && isNodeIndex(p[0]))) fail('Assign: a peer is [node index, url]');
    if (p[0] === self || peerSet.has(p[0])) fail(`Assign: peer ${p[0]} is this node or named twice`);
    if (!isNodeUrl(p[1])) fail(`Assign: peer ${p[0]}'s URL ${show(p[1])} is not ws://host:port`);
    peerSet.add(p[0]);
  }
  if (!(Array.isArray(replicas) && replicas.length <= sliceCount)) fail('Assign: replication.replicas is a list of at most slice count [slice, nodes]');
  const seen = new Set<number>();
  for (const e of replicas as unknown[]) {
    if (!(Array.isArray(e) && e.length === 2 && isUint(e[0]) && e[0] < sliceCount && !seen.has(e[0]))) fail('Assign: a replica set is [slice, nodes], each slice once, below the slice count');
    seen.add(e[0]);
    const nodes = e[1];
    // Not R at most: until a change settles, every replica of each of its sets is listed (REPLICAS_LISTED_MAX).
    if (!(Array.isArray(nodes) && nodes.length >= 1 && nodes.length <= REPLICAS_LISTED_MAX)) fail(`Assign: slice ${e[0]}'s replica set is a list of 1 to ${REPLICAS_LISTED_MAX} nodes`);
    if (new Set(nodes).size !== nodes.length) fail(`Assign: slice ${e[0]}'s replica set names a node twice`);
    if (!nodes.includes(self)) fail(`Assign: slice ${e[0]}'s replica set does not include this node (${self})`);
    for (const n of nodes as unknown[]) if (!(n === self || peerSet.has(n as number))) fail(`Assign: slice ${e[0]}'s replica ${show(n)} is not among the peers`);
  }
}

/** Checks size, decodes, and checks the whole shape of one frame that `receiver` may
 * get (kind, arity, every field's type and range). Throws MalformedFrame. */
export function decodeNodeFrame(bytes: Uint8Array, receiver: 'node'): NodeSideFrame;
export function decodeNodeFrame(bytes: Uint8Array, receiver: 'worker'): WorkerSideFrame;
export function decodeNodeFrame(bytes: Uint8Array, receiver: 'coordinator'): CoordinatorNodeFrame;
export function decodeNodeFrame(bytes: Uint8Array, receiver: NodeFrameReceiver): NodeSideFrame | WorkerSideFrame | CoordinatorNodeFrame;
export function decodeNodeFrame(bytes: Uint8Array, receiver: NodeFrameReceiver): NodeSideFrame | WorkerSideFrame | CoordinatorNodeFrame {
  if (bytes.byteLength > INTERNAL_FRAME_BYTES_MAX) fail(`node frame of ${bytes.byteLength} bytes is over the limit`);
  let frame: unknown;
  try {
    frame = internalUnpackr.unpack(bytes);
  } catch (err) {
    throw new MalformedFrame(`frame is not valid msgpack: ${(err as Error).message}`);
  }
  if (!(Array.isArray(frame) && frame.length > 0)) fail('a node frame is an array [kind, ...]');
  const f = frame as unknown[];
  if (!(FRAMES_TO[receiver].has(f[0] as number))) fail(`frame kind ${show(f[0])} is not one a ${receiver === 'node' ? 'slice node' : receiver === 'worker' ? "worker's batch port" : 'coordinator'} receives`);
  const arity = (n: number) => {
    if (f.length !== n) fail(`frame kind ${f[0]} has ${n - 1} fields, got ${f.length - 1}`);
  };
  switch (f[0]) {
    case NodeFrame.Hello:
      // The version first, so that a node of another version is told so rather than "malformed".
      if (!isUint(f[1])) fail('Hello: the protocol version is a whole number');
      if (f[1] !== NODE_PROTOCOL_VERSION) fail(`the slice node speaks node protocol ${f[1]}, this coordinator ${NODE_PROTOCOL_VERSION}`);
      arity(7);
      if (!(isUint(f[2]) && f[2] >= 1 && f[2] <= WORKERS_PER_NODE_MAX)) fail(`Hello: worker count ${show(f[2])} is not 1 to ${WORKERS_PER_NODE_MAX}`);
      if (!isIdentity(f[3])) fail('Hello: the node id is 32 hex digits');
      if (!(f[4] === null || isIdentity(f[4]))) fail('Hello: the cluster id is 32 hex digits or null');
      if (!(Array.isArray(f[5]) && f[5].length === f[2] && f[5].every((p) => isUint(p) && p >= 1 && p <= 65535))) fail('Hello: the batch ports are one port (1 to 65535) per worker');
      if (!isIdentity(f[6])) fail(`Hello: the incarnation (the node process's id, made at its start) is 32 hex digits, not ${show(f[6])}`);
      break;
    case NodeFrame.Assign: {
      arity(6);
      const [, epoch, sliceCount, slices, clusterId, replication] = f;
      if (!isUint(epoch)) fail(`Assign: epoch ${show(epoch)} is not a whole number`);
      if (!(isUint(sliceCount) && sliceCount >= 1 && sliceCount <= SLICE_COUNT_MAX)) fail(`Assign: slice count ${show(sliceCount)} is not 1 to ${SLICE_COUNT_MAX}`);
      if (!(Array.isArray(slices) && slices.length <= sliceCount)) fail('Assign: slices is a list of at most slice count slices');
      const seen = new Set<number>();
      for (const s of slices as unknown[]) {
        if (!(isUint(s) && s < sliceCount && !seen.has(s))) fail(`Assign: slice ${show(s)} is not a distinct slice below ${sliceCount}`);
        seen.add(s);
      }
      if (!isIdentity(clusterId)) fail('Assign: the cluster id is 32 hex digits');
      if (replication !== null) checkAssignReplication(replication, sliceCount);
      break;
    }
    case NodeFrame.Replicate: {
      arity(3);
      const [, from, entries] = f;
      if (!(from === COORDINATOR || isNodeIndex(from))) fail(`Replicate: the sender ${show(from)} is not a node index or ${COORDINATOR} (the coordinator)`);
      // The coordinator's messages go through the node's main thread (its connection): a batch port takes peers' only,
      // and a node's own port the coordinator's only (node protocol 25: a peer's worker sends to the batch ports that
      // the node's Hello names). Refused here, with the frame, so that the main thread never holds a peer's entries.
      if (receiver === 'worker' && from === COORDINATOR) fail("Replicate: a worker's batch port takes replication from peers only, not from the coordinator");
      if (receiver === 'node' && from !== COORDINATOR) fail(`Replicate: a node's own port takes replication from the coordinator only, not from node ${from as number} (peers send to its workers' batch ports since node protocol 25)`);
      if (!(Array.isArray(entries) && entries.length <= REPLICATION_FRAME_ENTRIES_MAX)) fail(`Replicate: entries is a list of at most ${REPLICATION_FRAME_ENTRIES_MAX} [slice, message]`);
      for (const e of entries as unknown[]) {
        if (!(Array.isArray(e) && e.length === 2 && isSlice(e[0]))) fail('Replicate: an entry is [slice, message]');
        const m = e[1];
        // A message's bytes: decoded and checked here for the coordinator and a worker's batch port (the whole frame
        // before any of it is used); the node's main thread hands the coordinator's to its worker, which does it.
        if (m instanceof Uint8Array) {
          if (receiver !== 'node') e[1] = decodeReplicationMessage(m, from as number, receiver === 'worker' ? 'node' : receiver, e[0]);
          continue;
        }
        // Only KeepAlives and AppendOks travel as a message: the sender's link folds them per worker of the receiver.
        if (!(isPlainObject(m) && FOLDED_MESSAGES.has(m.type as string))) fail(`Replicate: slice ${e[0]}: a message is its bytes (KeepAlives and AppendOks alone a map)`);
        checkHopMessage(m, from as number, receiver === 'worker' ? 'node' : receiver, e[0]);
      }
      break;
    }
    case NodeFrame.Assigned:
    case NodeFrame.Epoch:
      arity(2);
      if (!isUint(f[1])) fail(`epoch ${show(f[1])} is not a whole number`);
      break;
    case NodeFrame.Batch: {
      arity(4);
      const [, batchId, epoch, parts] = f;
      if (!isUint(batchId)) fail('Batch: the batch id is a whole number');
      if (!isUint(epoch)) fail(`Batch: epoch ${show(epoch)} is not a whole number`);
      if (!(Array.isArray(parts) && parts.length <= WORKERS_PER_NODE_MAX)) fail(`Batch: parts is a list of at most ${WORKERS_PER_NODE_MAX} [worker, ops]`);
      const workers = new Set<number>();
      for (const p of parts as unknown[]) {
        if (!(Array.isArray(p) && p.length === 2 && isUint(p[0]) && p[0] < WORKERS_PER_NODE_MAX && p[1] instanceof Uint8Array)) fail('Batch: a part is [worker, ops bytes]');
        if (workers.has(p[0])) fail(`Batch: worker ${p[0]} has two parts`);
        workers.add(p[0]);
      }
      break;
    }
    case NodeFrame.BatchReply:
      arity(4);
      if (!(isUint(f[1]) && isUint(f[2]) && f[2] < WORKERS_PER_NODE_MAX && f[3] instanceof Uint8Array)) fail('BatchReply is [kind, batchId, worker, results bytes]');
      break;
    case NodeFrame.BatchError:
      arity(5);
      if (!(isUint(f[1]) && isErrorCode(f[2]) && typeof f[3] === 'string')) fail('BatchError is [kind, batchId, error code, message, node epoch or null]');
      // A WrongOwner refuses the batch for its epoch and names the node's; no other refusal names one (node protocol 26).
      if (f[2] === 'WrongOwner' && !isUint(f[4])) fail(`BatchError WrongOwner: the node's epoch ${show(f[4])} is not a whole number`);
      if (f[2] !== 'WrongOwner' && f[4] !== null) fail(`BatchError ${f[2] as string}: names epoch ${show(f[4])}, which only a WrongOwner does (null)`);
      break;
  }
  return f as NodeSideFrame | WorkerSideFrame | CoordinatorNodeFrame;
}

/** A node's refusal of batch `batchId`, sent at `batchEpoch`, for its epoch: the node is at `nodeEpoch` (the node's
 * main thread, or a worker's batch port, which serves the epoch the main thread told it). */
export function staleBatchError(batchId: number, batchEpoch: number, nodeEpoch: number): BatchErrorFrame {
  assert(batchEpoch !== nodeEpoch, 'a batch is refused for its epoch only at another one');
  return [NodeFrame.BatchError, batchId, 'WrongOwner', `batch for epoch ${batchEpoch}, node is at epoch ${nodeEpoch}`, nodeEpoch];
}

/** A node's refusal of batch `batchId` (or of a worker's chunk of it) for any reason but its epoch. */
export function batchError(batchId: number, code: Exclude<ErrorCode, 'WrongOwner'>, message: string): BatchErrorFrame {
  return [NodeFrame.BatchError, batchId, code, message, null];
}

/** What the ops of a refused batch fail with: the refusal's code and message, and the node's epoch where it refused
 * the batch for its epoch (details.nodeEpoch: the Router's retry waits for it, Routing.afterWrongOwner). */
export function errorOfBatchError(frame: BatchErrorFrame): KeysliceError {
  const [, , code, message, nodeEpoch] = frame;
  return new KeysliceError(code, message, nodeEpoch === null ? undefined : { nodeEpoch });
}

// ---- slice ops: what a worker thread executes ------------------------------

export const SliceOp = {
  Assign: 1,
  Put: 2,
  Get: 3,
  Delete: 4,
  Update: 5,
  Range: 6,
  Scan: 7,
  DropTable: 8,
  Stats: 9,
  // Slice moves (coordinator/metadata/slice-mover.ts). On the source worker:
  MoveStart: 10,
  MoveRead: 11,
  MoveFreeze: 12,
  MoveDrop: 13,
  // On the target worker:
  MoveBegin: 14,
  MoveApply: 15,
  // Either side: forget the move (the source owns the slice again, the target drops what it got).
  MoveAbort: 16,
  // Eventually consistent reads (docs/replication.md, "Eventually consistent reads"): a Get or a Range that any
  // replica of the slice may answer from what it applied, a follower included; one that cannot answers
  // ReplicaNotReady and the router reads from the leader. On a slice of one replica they are Get and Range.
  ReplicaGet: 17,
  ReplicaRange: 18,
} as const;

/** A change to durable state, as the write-ahead log records it, replay applies it,
 * and a slice move carries it from the source to the target. */
export const EFFECT_SET = 1;
export const EFFECT_DELETE = 2;
export const EFFECT_DROP_TABLE = 3;
/** Every item of one slice (of one table, or of all tables when table is null). */
export const EFFECT_DROP_SLICE = 4;
export type Effect =
  | [typeof EFFECT_SET, table: number, slice: number, key: string, item: Item, bytes: number]
  | [typeof EFFECT_DELETE, table: number, slice: number, key: string]
  | [typeof EFFECT_DROP_TABLE, table: number]
  | [typeof EFFECT_DROP_SLICE, slice: number, table: number | null];

/** Where a move's copy stands: after this (table, key) of the slice; null before the first. */
export type MoveCursor = [table: number, key: string] | null;
/** MoveRead result: how many changes the slice had since the last read and how many items come after them, those
 * changes and then the next items after the cursor as set-effects, as MovedEffects, and the cursor after them (null:
 * the copy is complete). */
export type MoveReadResult = [changes: number, items: number, effects: MovedEffects, next: MoveCursor, done: boolean];
/** A move's effects as bytes: one msgpack list (plain maps, no records) of effects of the moving slice (set, delete,
 * drop-slice), each set's item in the msgpack its source held it in (SliceStore's kept bytes) or packed it in, so
 * that neither the source nor the coordinator builds it and the target keeps those bytes (slice-worker/partition.ts
 * moveApply). At most MOVE_EFFECTS_BYTES_MAX; checked whole by checkMovedEffects wherever they arrive. */
export type MovedEffects = Uint8Array;
/** MovedEffects of no effect: an empty msgpack list (a target told to own what it has: membership's forget-data). A
 * fresh array each call, not a shared constant: a Uint8Array cannot be frozen, and one a caller changed (or a send
 * transferred) would be every later caller's; its callers are not on a hot path (one per slice forgotten). */
export const noMovedEffects = (): MovedEffects => Uint8Array.of(0x90);

/** A write's condition, checked against the item as it is (`{}` when there is none)
 * in the same step as the write; when it is false nothing changes and the op
 * fails with ConditionalCheckFailed, carrying the old item if `oldOnFailure`. */
export type WriteCheck = {
  condition: Condition | null;
  /** Put and Delete: answer the old item (or null) instead of null/true/false. */
  returnOld: boolean;
  oldOnFailure: boolean;
};

export type UpdateSpec = {
  /** The item to start from when none exists (key attributes and __name). */
  base: Item;
  actions: UpdateAction[];
  condition: Condition | null;
  oldOnFailure: boolean;
  returnValues: 'none' | 'old' | 'new';
};

/** Which parts of an item to return: document paths, null for all of it. The system attributes always come back. */
export type Projection = Path[] | null;

/** A key range inside one slice and table; bounds are encoded keys. `limit`
 * counts examined items, so a filter can leave a page short or empty. */
export type RangeSpec = {
  low: string;
  lowInclusive: boolean;
  high: string;
  highInclusive: boolean;
  reverse: boolean;
  limit: number;
  projection: Projection;
  filter: Condition | null;
  /** Return each item's encoded key too (to merge ranges of several slices). */
  withKeys: boolean;
  /** Return the items packed in the client's msgpack form, one list (packClientList), not as
   * objects: for a transport that only forwards them (the WebSocket API, PackedItems). */
  packed: boolean;
};

/** A write's request id: unique in the cluster for longer than any replica remembers it (APPLIED_REQUESTS_KEPT_MS).
 * A router gives each write it sends one (coordinator/router/request-ids.ts) and sends the same id each time it
 * sends that write again; the leader of a replicated slice that already applied a write of that id answers what
 * it answered then and applies nothing (slice-worker/replication/applied-requests.ts). null: no id (tools and
 * tests that send ops by hand; such a write is applied each time it arrives).
 * Two numbers, not a string: the router's instance (random, at most REQUEST_ID_INSTANCE_MAX) and its count of
 * writes (at least 1, a safe integer), so that a replica finds, remembers and replicates an id without building,
 * hashing or comparing a string per write. */
export type RequestId = [instance: number, counter: number] | ClientRequestId;
/** A client's idempotency id, as its router sends it (coordinator/router/request-ids.ts, clientRequestId): the
 * instance is a hash of the id's text, the counter a hash of the write (its op without the id), and `true` says so:
 * a slice that remembers a write of that instance with another counter refuses this one
 * (IdempotentParameterMismatch: the same id with a different request). Replicas remember it as [instance, counter]
 * like a router's: an instance of a client's id has one counter, a router's many. */
export type ClientRequestId = [instance: number, counter: number, client: true];
export const isClientRequestId = (id: RequestId): id is ClientRequestId => id.length === 3;
/** Where each write op carries its request id: the one place that names the field. */
export const REQUEST_ID_AT = { [SliceOp.Put]: 7, [SliceOp.Delete]: 5, [SliceOp.Update]: 5 } as const;
export type WriteOp = Extract<SliceOpMessage, [typeof SliceOp.Put | typeof SliceOp.Delete | typeof SliceOp.Update, ...unknown[]]>;
export const isWriteOp = (op: SliceOpMessage): op is WriteOp => op[0] === SliceOp.Put || op[0] === SliceOp.Delete || op[0] === SliceOp.Update;
export function requestIdOf(op: WriteOp): RequestId | null {
  return op[REQUEST_ID_AT[op[0]]] as RequestId | null;
}
/** Gives `op` its request id (once: a write sent again keeps its first id). */
export function setRequestId(op: WriteOp, id: RequestId): void {
  assert(requestIdOf(op) === null, 'a write keeps the request id it was first sent with');
  (op as unknown[])[REQUEST_ID_AT[op[0]]] = id;
}
const isRequestId = (v: unknown): v is RequestId =>
  Array.isArray(v) && (v.length === 2 || (v.length === 3 && v[2] === true)) && isUint(v[0]) && (v[0] as number) <= REQUEST_ID_INSTANCE_MAX && isUint(v[1]) && (v[1] as number) > 0;

export type SliceOpMessage =
  | [typeof SliceOp.Assign, epoch: number, slices: number[]]
  | [typeof SliceOp.Put, tableId: number, slice: number, key: string, item: Item, itemBytes: number, check: WriteCheck | null, requestId: RequestId | null]
  | [typeof SliceOp.Get, tableId: number, slice: number, key: string, projection: Projection, packed: boolean]
  | [typeof SliceOp.Delete, tableId: number, slice: number, key: string, check: WriteCheck | null, requestId: RequestId | null]
  | [typeof SliceOp.Update, tableId: number, slice: number, key: string, spec: UpdateSpec, requestId: RequestId | null]
  | [typeof SliceOp.Range, tableId: number, slice: number, spec: RangeSpec]
  | [typeof SliceOp.ReplicaGet, tableId: number, slice: number, key: string, projection: Projection, packed: boolean]
  | [typeof SliceOp.ReplicaRange, tableId: number, slice: number, spec: RangeSpec]
  | [typeof SliceOp.Scan, tableId: number, fromSlice: number, afterKey: string | null, limit: number, projection: Projection, filter: Condition | null, slices: SliceSet, packed: boolean]
  | [typeof SliceOp.DropTable, tableId: number]
  | [typeof SliceOp.Stats, tableId: number, slices: SliceSet]
  | [typeof SliceOp.MoveStart, slice: number]
  | [typeof SliceOp.MoveRead, slice: number, cursor: MoveCursor, limit: number]
  | [typeof SliceOp.MoveFreeze, slice: number]
  | [typeof SliceOp.MoveDrop, slice: number]
  | [typeof SliceOp.MoveBegin, slice: number]
  | [typeof SliceOp.MoveApply, slice: number, effects: MovedEffects, own: boolean]
  | [typeof SliceOp.MoveAbort, slice: number, role: 'source' | 'target'];

/** A range's items: objects, or (RangeSpec.packed) one list packed in the client's form (packClientList): on the
 * wire its bytes; in the worker that answers, a PackedPage, whose bytes are written once, into the answer
 * (encodeOwnedResults, encodeSliceResults). */
export type RangeItems = Item[] | Uint8Array | PackedPage;
/** Range result: items in order, the encoded key of the last examined one, whether
 * more remain, (if asked for) every returned item's encoded key, and how many
 * items the range examined (the filter's rejects included). */
export type RangeResult = [items: RangeItems, lastKey: string | null, more: boolean, keys: string[] | null, examined: number];
/** Scan result: every examined entry [slice, key, item, storedBytes] in (slice, key) order,
 * with item null where the filter left it out; whether this worker has nothing more; and, for a
 * packed scan, the kept items packed in the client's form as one list (packClientList), in the
 * entries' order, each kept entry's item then being KEPT_IN_LIST (the router puts the item's
 * bytes in its place: cutScanItems). */
export type ScanResult = [entries: ScanEntry[], exhausted: boolean, packed: Uint8Array | null];

/** The slices a Scan or Stats asks a worker for (those the asker's map gives it), from a first slice on (a Scan's
 * fromSlice, else 0): bit i (of byte i >> 3, bit i & 7) stands for slice first + i. A bitmap, not a list of
 * numbers: a page of a whole table of 1,024 slices names them all, which as numbers took the router 7-10 µs to
 * encode and the worker 5-8 µs to decode and check per worker, a bitmap a fraction of one. */
export type SliceSet = Uint8Array;

/** The SliceSet of `slices` (each at least `first`). */
export function sliceSetOf(first: number, slices: readonly number[]): SliceSet {
  let last = first - 1;
  for (const s of slices) if (s > last) last = s;
  const set = new Uint8Array((last - first + 8) >> 3);
  for (const s of slices) {
    if (s < first) assert(false, `slice ${s} comes before the set's first, ${first}`);
    set[(s - first) >> 3] |= 1 << ((s - first) & 7);
  }
  return set;
}

/** Whether a SliceSet from `first` holds slice `s`. */
export function sliceSetHas(set: SliceSet, first: number, s: number): boolean {
  const bit = s - first;
  return bit >= 0 && bit >> 3 < set.length && (set[bit >> 3] & (1 << (bit & 7))) !== 0;
}

/** The slices of a SliceSet from `first`, ascending. */
export function slicesIn(set: SliceSet, first: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < set.length; i++) {
    // Each set bit, lowest first.
    for (let byte = set[i]; byte !== 0; byte &= byte - 1) out.push(first + i * 8 + (31 - Math.clz32(byte & -byte)));
  }
  return out;
}
export type ScanEntry = [slice: number, key: string, item: Item | Uint8Array | typeof KEPT_IN_LIST | null, bytes: number];
/** A packed scan's entry whose item was kept: the item is the next one of the result's packed list. */
export const KEPT_IN_LIST = 1;

/** In each packed scan result, puts the bytes of its kept items up to (lastSlice, lastKey), the
 * last entry of the page, in place of their KEPT_IN_LIST marks. A page is a prefix of each
 * worker's entries, so only that much of each list is cut: the workers answer up to a page
 * each, and the page takes one page of all of them. Each piece is checked as it is cut
 * (splitPackedList), and every kept entry of the page gets one, so the page's items are all
 * checked pieces (scanPage passes them on as they are). */
export function cutScanItems(results: ScanResult[], lastSlice: number, lastKey: string): void {
  for (const [entries, , list] of results) {
    if (list === null) fail('a packed scan answers its kept items as one list');
    let n = 0;
    let kept = 0;
    for (const e of entries) {
      if (e[0] > lastSlice || (e[0] === lastSlice && e[1] > lastKey)) break;
      n++;
      if (e[2] !== null) kept++;
    }
    // Cut to its end, a list must hold exactly the kept items. A node's answer, not this process's state: one that
    // disagrees with itself is refused as malformed (the request fails; the router goes on), as splitPackedList does.
    const pieces = n === entries.length ? splitPackedList(list) : splitPackedList(list, kept);
    if (pieces.length !== kept) fail(`a packed scan lists exactly its kept items: ${kept} kept, ${pieces.length} in its list`);
    let next = 0;
    for (let i = 0; i < n; i++) {
      const e = entries[i];
      if (e[2] === null) continue;
      if (e[2] !== KEPT_IN_LIST) fail('a packed scan marks each kept entry');
      e[2] = pieces[next++];
    }
  }
}

/** Cumulative counters since the worker started (slice-worker/slice-load.ts): they only grow. duplicateWrites: writes
 * whose request id the slice's replica had applied already (a router's resend), answered what they got then, applied
 * nothing (slice-worker/replication/applied-requests.ts); they count there only, not as writes. */
export type SliceCounts = [reads: number, writes: number, readBytes: number, writeBytes: number, throttled: number, duplicateWrites: number];
/** Stats result: for each slice the op names (all of which the worker owns, or it answers WrongOwner) that holds
 * items or saw load, [slice, items, bytes, reads/s, writes/s, counters]; the table's hottest sharding
 * keys on this worker as [encoded sharding part, ops/s]; the table's counters on
 * this worker over every slice it served (moved-away slices included); and the items and
 * bytes of the table the worker holds in its store over every slice there (the slices it owns,
 * its follower replicas, and anything else it keeps), where `slices` counts the owned ones only. */
export type StatsResult = [
  slices: [slice: number, items: number, bytes: number, readsPerSecond: number, writesPerSecond: number, counts: SliceCounts][],
  hotKeys: [string, number][],
  tableCounts: SliceCounts,
  held: [items: number, bytes: number],
];

/** What each slice op answers when it succeeds, declared once for both ends: the worker
 * (slice-worker/partition.ts) returns it, the router's channel (coordinator/router/slice-channel.ts)
 * hands it to its caller typed. */
export interface SliceOpResults {
  [SliceOp.Assign]: null;
  /** The old item (or null) when the check asked for it; otherwise null. */
  [SliceOp.Put]: Item | null;
  /** The item, or (the op's `packed`) its bytes in the client's msgpack form (packClientItem); null: none. */
  [SliceOp.Get]: Item | Uint8Array | null;
  /** With a check that asks for the old item: that item or null; otherwise whether one was deleted. */
  [SliceOp.Delete]: Item | null | boolean;
  /** The item as returnValues asks ('old' or 'new'), null for 'none' or no old item. */
  [SliceOp.Update]: Item | null;
  [SliceOp.Range]: RangeResult;
  [SliceOp.ReplicaGet]: Item | Uint8Array | null;
  [SliceOp.ReplicaRange]: RangeResult;
  [SliceOp.Scan]: ScanResult;
  /** Whether the worker held any of the table. */
  [SliceOp.DropTable]: boolean;
  [SliceOp.Stats]: StatsResult;
  [SliceOp.MoveStart]: [items: number, bytes: number];
  [SliceOp.MoveRead]: MoveReadResult;
  /** The last changes recorded before the worker stopped owning the slice. */
  [SliceOp.MoveFreeze]: MovedEffects;
  [SliceOp.MoveDrop]: null;
  [SliceOp.MoveBegin]: null;
  [SliceOp.MoveApply]: null;
  [SliceOp.MoveAbort]: null;
}

/** The result of one slice op, by its kind. */
export type ResultOf<Op extends SliceOpMessage> = SliceOpResults[Op[0]];

/** Checks a worker's answer to `op` against its op before anyone uses it: the shape SliceOpResults gives that op's
 * kind, in the form the op asked for (packed or objects, keys or none), and a Scan's entries within the slices the op
 * asked that worker for, after its (fromSlice, afterKey), in (slice, key) order, at most its limit. The router's
 * channel (coordinator/metadata/node-link.ts) runs it once per answer, where the answer is decoded: a node's answer
 * that fails it fails its own request (MalformedFrame), never a TypeError or an assert later; the connection and the
 * batch's other answers go on. Shallow where it can be: an item is a plain object (the node decoded it with
 * internalUnpackr, which makes no other kind of value), a packed list is bytes (splitPackedList and PackedItems check
 * them as they cut or walk them). A move's effects are bytes the coordinator passes on to the target, which checks them
 * whole; here only their size. Throws MalformedFrame. */
export function checkSliceResult(op: SliceOpMessage, r: unknown): void {
  switch (op[0]) {
    case SliceOp.Get:
    case SliceOp.ReplicaGet:
      if (!(r === null || (op[5] ? r instanceof Uint8Array : isPlainObject(r)))) fail(`a Get asked for its item ${op[5] ? 'packed' : 'as an object'} was answered with ${show(r)}`);
      return;
    case SliceOp.Put:
    case SliceOp.Update:
      if (!(r === null || isPlainObject(r))) fail(`a ${op[0] === SliceOp.Put ? 'Put' : 'Update'} was answered with ${show(r)}, not an item or null`);
      return;
    case SliceOp.Delete:
      // Asked for the old item: it or null; otherwise whether one was deleted (DeleteItem relies on which).
      if (op[4]?.returnOld ? !(r === null || isPlainObject(r)) : typeof r !== 'boolean') fail(`a Delete ${op[4]?.returnOld ? 'asked for the old item' : 'not asked for the old item'} was answered with ${show(r)}, not ${op[4]?.returnOld ? 'an item or null' : 'a boolean'}`);
      return;
    case SliceOp.Range:
    case SliceOp.ReplicaRange:
      return checkRangeResult(op[3], r);
    case SliceOp.Scan:
      return checkScanResult(op, r);
    case SliceOp.DropTable:
      if (typeof r !== 'boolean') fail(`a DropTable was answered with ${show(r)}, not a boolean`);
      return;
    case SliceOp.MoveStart:
      if (!(Array.isArray(r) && r.length === 2 && isUint(r[0]) && isUint(r[1]))) fail('a MoveStart is answered [items, bytes]');
      return;
    case SliceOp.MoveRead:
      // The effects go on to the target as they are, which checks them whole (checkMovedEffects) before it applies any.
      if (!(Array.isArray(r) && r.length === 5 && isUint(r[0]) && isUint(r[1]) && r[2] instanceof Uint8Array && r[2].byteLength <= MOVE_EFFECTS_BYTES_MAX && typeof r[4] === 'boolean')) {
        fail(`a MoveRead is answered [changes, items, effects (bytes, at most ${MOVE_EFFECTS_BYTES_MAX}), next, done]`);
      }
      if (!isMoveCursor(r[3])) fail(`a MoveRead's next cursor is null or [table, encoded key (a byte string)], not ${show(r[3])}`);
      return;
    case SliceOp.MoveFreeze:
      if (!(r instanceof Uint8Array && r.byteLength <= MOVE_EFFECTS_BYTES_MAX)) fail(`a MoveFreeze is answered with its last changes as bytes, at most ${MOVE_EFFECTS_BYTES_MAX}`);
      return;
    case SliceOp.Stats:
      if (!(Array.isArray(r) && r.length === 4 && Array.isArray(r[0]) && Array.isArray(r[1]) && Array.isArray(r[2]) && Array.isArray(r[3]))) fail('a Stats is answered [slices, hot keys, counters, held]');
      for (const e of r[0] as unknown[]) {
        if (!(Array.isArray(e) && e.length === 6 && isSlice(e[0]) && sliceSetHas(op[2], 0, e[0]) && Array.isArray(e[5]))) fail(`a Stats answered ${show(Array.isArray(e) ? e[0] : e)}, not a slice it was asked for with its load`);
      }
      return;
  }
}

/** A Range's answer, as checkSliceResult says. */
function checkRangeResult(spec: RangeSpec, r: unknown): void {
  if (!(Array.isArray(r) && r.length === 5)) fail(`a range is answered [items, last key, more, keys, examined], got ${show(r)}`);
  const [items, lastKey, more, keys, examined] = r as unknown[];
  if (spec.packed) {
    if (!(items instanceof Uint8Array)) fail(`a range asked for its items packed was answered with ${show(items)}`);
  } else {
    if (!Array.isArray(items)) fail(`a range asked for its items as objects was answered with ${show(items)}`);
    for (const item of items) if (!isPlainObject(item)) fail(`a range asked for its items as objects was answered with ${show(item)} among them`);
  }
  if (!(lastKey === null || isByteString(lastKey))) fail(`a range's last key is null or an encoded key (a byte string), not ${show(lastKey)}`);
  if (typeof more !== 'boolean') fail(`a range's "more" is a boolean, not ${show(more)}`);
  if (!isUint(examined)) fail(`a range's examined count is a whole number, not ${show(examined)}`);
  if (!spec.withKeys) {
    if (keys !== null) fail('a range asked for no keys was answered with some');
    return;
  }
  // Packed, the count of items is known once the list is cut (gatherBuckets compares it there).
  if (!(Array.isArray(keys) && (spec.packed || keys.length === (items as unknown[]).length))) fail(`a range asked for its items' keys was answered ${Array.isArray(keys) ? `${keys.length} keys for ${(items as unknown[]).length} items` : show(keys)}`);
  for (const k of keys) if (!isByteString(k)) fail(`a range's keys are encoded keys (byte strings), not ${show(k)}`);
}

/** A Scan's answer, as checkSliceResult says. */
function checkScanResult(op: Extract<SliceOpMessage, [typeof SliceOp.Scan, ...unknown[]]>, r: unknown): void {
  const [, , fromSlice, afterKey, limit, , , asked, packed] = op;
  if (!(Array.isArray(r) && r.length === 3)) fail(`a scan is answered [entries, exhausted, packed list], got ${show(r)}`);
  const [entries, exhausted, list] = r as unknown[];
  if (!Array.isArray(entries)) fail(`a scan's entries are a list, not ${show(entries)}`);
  if (typeof exhausted !== 'boolean') fail(`a scan's "exhausted" is a boolean, not ${show(exhausted)}`);
  if (!(packed ? list instanceof Uint8Array : list === null)) fail(`a scan asked for its items ${packed ? 'packed' : 'as objects'} was answered with ${show(list)} as its list`);
  if (entries.length > limit) fail(`a scan of at most ${limit} entries was answered ${entries.length}`);
  // Entries in (slice, key) order, only the slices asked: the router's page merge relies on it (scanPage asserts it,
  // checks it no more). A slice is looked up in the set once, where the entries move on to it.
  let slice = -1;
  let key: string | null = null;
  for (const e of entries) {
    if (!(Array.isArray(e) && e.length === 4 && isByteString(e[1]) && isUint(e[3]))) fail(`a scan's entry is [slice, encoded key (a byte string), item, bytes], not ${show(e)}`);
    const item: unknown = e[2];
    if (!(item === null || (packed ? item === KEPT_IN_LIST : isPlainObject(item)))) fail(`a scan asked for its items ${packed ? 'packed' : 'as objects'} was answered with ${show(item)} as an entry's item`);
    if (e[0] !== slice) {
      if (!(isSlice(e[0]) && e[0] > slice && sliceSetHas(asked, fromSlice, e[0]))) {
        fail(`a scan answered an entry of slice ${show(e[0])}, ${isSlice(e[0]) && e[0] <= slice ? `after slice ${slice}'s` : `not one of the slices it was asked for (from ${fromSlice}: ${slicesIn(asked, fromSlice).slice(0, 8).join(', ')}${slicesIn(asked, fromSlice).length > 8 ? ', ...' : ''})`}`);
      }
      slice = e[0];
      key = slice === fromSlice ? afterKey : null;
    }
    if (!(key === null || key < e[1])) fail(`a scan answered slice ${slice}'s key ${show(e[1])} after ${show(key)}${key === afterKey && slice === fromSlice ? ' (where it was asked to start)' : ''}`);
    key = e[1];
  }
}

export type SliceOpResult =
  | [typeof RESULT_OK, unknown]
  | [typeof RESULT_ERROR, ErrorCode, string]
  | [typeof RESULT_ERROR, ErrorCode, string, ErrorDetails];

export function encodeSliceOps(ops: SliceOpMessage[]): Uint8Array {
  return internalPackr.pack(ops);
}
/** Decodes one worker's packed ops: a list of at most NODE_BATCH_OPS_MAX values, each
 * still to be checked with checkSliceOp. Throws MalformedFrame. */
export function decodeSliceOps(bytes: Uint8Array): unknown[] {
  let ops: unknown;
  try {
    ops = workerUnpackr.unpack(bytes);
  } catch (err) {
    throw new MalformedFrame(`slice ops are not valid msgpack: ${(err as Error).message}`);
  }
  if (!(Array.isArray(ops) && ops.length <= NODE_BATCH_OPS_MAX)) fail(`slice ops are a list of at most ${NODE_BATCH_OPS_MAX} ops`);
  return ops;
}
export function encodeSliceResults(results: SliceOpResult[]): Uint8Array {
  return internalPackr.pack(results.map(joinedPages));
}

/** `r` with each PackedPage of its payload as its bytes, for msgpackr (which would pack the object as a map). */
function joinedPages(r: SliceOpResult): SliceOpResult {
  if (r[0] !== RESULT_OK || !Array.isArray(r[1]) || !(r[1] as unknown[]).some((v) => v instanceof PackedPage)) return r;
  return [RESULT_OK, (r[1] as unknown[]).map((v) => (v instanceof PackedPage ? v.bytes() : v))] as SliceOpResult;
}

/** A packed list at least this long is written into a worker's answer as it is (encodeOwnedResults), not through msgpackr. */
const SPLICED_BIN_BYTES_MIN = 1024;

/** What a worker thread answers its node for one chunk: encodeSliceResults' bytes, byte for byte, in a buffer of
 * their own with the headroom for the node's BatchReply head (withReplyHeadroom, encodeBatchReply). A result
 * [RESULT_OK, [...]] that carries a packed list (a range page or a scan's kept items in the client's form) has the
 * rest of its parts packed apart and the list written once, straight into the answer: through msgpackr it was
 * copied twice (into msgpackr's buffer, which grows by allocating anew, then out of it: bench/PROFILE.md, "range
 * pages with fewer copies"), and a range page (a PackedPage) is written there from its items, not joined first
 * ("a range page written once into its answer"). Only parts without objects are packed apart: records mode defines
 * an object's record in the pack call that meets it, so objects are packed with the whole list as before. */
export function encodeOwnedResults(results: SliceOpResult[]): Uint8Array {
  const first = results.findIndex(splices);
  if (first < 0) return withReplyHeadroom([encodeSliceResults(results)]);
  const parts: (Uint8Array | PackedPage)[] = [arrayHeader(results.length)];
  for (let n = 0; n < results.length; n++) {
    const r = results[n];
    // splices() looked at each result up to `first` already: it is asked again only of those after.
    if (n < first || (n > first && !splices(r))) {
      parts.push(internalPackr.pack(joinedPages(r)));
      continue;
    }
    const payload = r[1] as unknown[];
    parts.push(Uint8Array.of(0x92, RESULT_OK), arrayHeader(payload.length));
    // Each run of parts between lists is packed in one call, as a list whose header is then left out.
    let from = 0;
    for (let i = 0; i <= payload.length; i++) {
      const v = payload[i];
      const list = v instanceof Uint8Array || v instanceof PackedPage;
      if (i < payload.length && !list) continue;
      if (i > from) {
        const run = internalPackr.pack(payload.slice(from, i));
        parts.push(run.subarray(arrayHeaderBytes(i - from)));
      }
      if (list) parts.push(binHeader(v.byteLength), v);
      from = i + 1;
    }
  }
  return withReplyHeadroom(parts);
}

/** Whether a result's parts are written one by one (encodeOwnedResults): an OK result whose payload is a list with a
 * packed list of SPLICED_BIN_BYTES_MIN or more in it, or a PackedPage of any size (joined or not, it is written
 * once), and no object anywhere in the rest. */
function splices(r: SliceOpResult): boolean {
  if (r[0] !== RESULT_OK || !Array.isArray(r[1])) return false;
  let big = false;
  for (const v of r[1] as unknown[]) {
    if (v instanceof PackedPage) big = true;
    else if (v instanceof Uint8Array) big ||= v.byteLength >= SPLICED_BIN_BYTES_MIN;
    else if (!withoutObjects(v)) return false;
  }
  return big;
}

/** Whether `v` holds no object (what records mode would define a record for): scalars and lists of them. */
function withoutObjects(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (!Array.isArray(v)) return false;
  for (const e of v) if (!withoutObjects(e)) return false;
  return true;
}


export function decodeSliceResults(bytes: Uint8Array): SliceOpResult[] {
  return internalUnpackr.unpack(bytes) as SliceOpResult[];
}

// ---- slice op checks ----------------------------------------------------------------
//
// A worker runs only ops that have exactly the shape SliceOpMessage gives them, down
// to every value, condition and effect: the partition and the evaluator trust that
// shape (and assert on some of it), so nothing else may reach them.

const ARGUMENTS: Record<number, number> = {
  [SliceOp.Assign]: 2,
  [SliceOp.Put]: 7,
  [SliceOp.Get]: 5,
  [SliceOp.Delete]: 5,
  [SliceOp.Update]: 5,
  [SliceOp.Range]: 3,
  [SliceOp.Scan]: 8,
  [SliceOp.DropTable]: 1,
  [SliceOp.Stats]: 2,
  [SliceOp.MoveStart]: 1,
  [SliceOp.MoveRead]: 3,
  [SliceOp.MoveFreeze]: 1,
  [SliceOp.MoveDrop]: 1,
  [SliceOp.MoveBegin]: 1,
  [SliceOp.MoveApply]: 3,
  [SliceOp.MoveAbort]: 2,
  [SliceOp.ReplicaGet]: 5,
  [SliceOp.ReplicaRange]: 3,
};
const COMPARATORS = new Set(['=', '<>', '<', '<=', '>', '>=']);

/** Null when `op` is a slice op a worker may run; otherwise what is wrong with it.
 * `trusted`: the op comes from the node itself (only it may send SliceOp.Assign). */
export function checkSliceOp(op: unknown, trusted: boolean): string | null {
  try {
    checkOp(op, trusted);
    return null;
  } catch (err) {
    if (err instanceof MalformedFrame || err instanceof KeysliceError) return err.message;
    throw err;
  }
}

function checkOp(op: unknown, trusted: boolean): asserts op is SliceOpMessage {
  if (!(Array.isArray(op) && op.length > 0)) fail(`a slice op is an array [code, ...], got ${show(op)}`);
  const code = op[0] as number;
  const args = Number.isInteger(code) ? ARGUMENTS[code] : undefined;
  if (args === undefined) fail(`unknown slice op ${show(code)}`);
  if (op.length !== args + 1) fail(`slice op ${code} takes ${args} arguments, got ${op.length - 1}`);
  // Every op of every batch passes here. The most common shapes (a plain Get, an unconditional
  // Put) are checked without allocating; the full check below builds its messages' pieces.
  if (code === SliceOp.Get && isUint(op[1]) && isSlice(op[2]) && isByteString(op[3]) && op[4] === null && typeof op[5] === 'boolean') return;
  if (code === SliceOp.Put && isUint(op[1]) && isSlice(op[2]) && isByteString(op[3]) && isPlainObject(op[4]) && isItemValue(op[4]) && isUint(op[5]) && op[6] === null && (op[7] === null || isRequestId(op[7]))) return;
  const at = (what: string) => `slice op ${code}, ${what}`;
  const uint = (i: number, what: string) => isUint(op[i]) || fail(`${at(what)}: ${show(op[i])} is not a whole number`);
  const slice = (i: number) => isSlice(op[i]) || fail(`${at('slice')}: ${show(op[i])} is not a slice number`);
  const key = (i: number) => isByteString(op[i]) || fail(`${at('key')}: ${show(op[i])} ${NOT_AN_ENCODED_KEY}`);
  const requestId = (i: number) => op[i] === null || isRequestId(op[i]) || fail(`${at('request id')}: ${show(op[i])} is not null, [instance, counter] or [instance, counter, true]: whole numbers, the instance at most ${REQUEST_ID_INSTANCE_MAX}, the counter at least 1`);
  switch (code) {
    case SliceOp.Assign:
      if (!trusted) fail('slice op Assign comes from the slice node itself, never in a batch');
      uint(1, 'epoch');
      if (!(Array.isArray(op[2]) && (op[2] as unknown[]).every(isSlice))) fail(`${at('slices')}: not a list of slice numbers`);
      return;
    case SliceOp.Put:
      uint(1, 'table');
      slice(2);
      key(3);
      checkItem(op[4], at('item'));
      uint(5, 'item bytes');
      checkWriteCheck(op[6], at('check'));
      requestId(7);
      return;
    case SliceOp.Get:
    case SliceOp.ReplicaGet:
      uint(1, 'table');
      slice(2);
      key(3);
      checkProjection(op[4], at('projection'));
      if (typeof op[5] !== 'boolean') fail(`${at('packed')}: not a boolean`);
      return;
    case SliceOp.Delete:
      uint(1, 'table');
      slice(2);
      key(3);
      checkWriteCheck(op[4], at('check'));
      requestId(5);
      return;
    case SliceOp.Update: {
      uint(1, 'table');
      slice(2);
      key(3);
      const spec = op[4];
      const where = at('update');
      if (!isPlainObject(spec)) fail(`${where}: not a map`);
      checkItem(spec.base, `${where}.base`);
      if (!Array.isArray(spec.actions)) fail(`${where}.actions: not a list`);
      (spec.actions as unknown[]).forEach((a, i) => checkUpdateAction(a, `${where}.actions[${i}]`));
      checkConditionOrNull(spec.condition, `${where}.condition`);
      if (typeof spec.oldOnFailure !== 'boolean') fail(`${where}.oldOnFailure: not a boolean`);
      if (!(spec.returnValues === 'none' || spec.returnValues === 'old' || spec.returnValues === 'new')) fail(`${where}.returnValues: not none, old or new`);
      requestId(5);
      return;
    }
    case SliceOp.Range:
    case SliceOp.ReplicaRange: {
      uint(1, 'table');
      slice(2);
      const spec = op[3];
      const where = at('range');
      if (!isPlainObject(spec)) fail(`${where}: not a map`);
      if (!(isByteString(spec.low) && isByteString(spec.high))) fail(`${where}: low and high are encoded keys (byte strings: char codes 0 to 255)`);
      for (const flag of ['lowInclusive', 'highInclusive', 'reverse', 'withKeys', 'packed'] as const) if (typeof spec[flag] !== 'boolean') fail(`${where}.${flag}: not a boolean`);
      if (!isUint(spec.limit)) fail(`${where}.limit: not a whole number`);
      checkProjection(spec.projection, `${where}.projection`);
      checkConditionOrNull(spec.filter, `${where}.filter`);
      return;
    }
    case SliceOp.Scan:
      uint(1, 'table');
      slice(2);
      if (!(op[3] === null || isByteString(op[3]))) fail(`${at('after key')}: ${show(op[3])} is not null and ${NOT_AN_ENCODED_KEY}`);
      uint(4, 'limit');
      checkProjection(op[5], at('projection'));
      checkConditionOrNull(op[6], at('filter'));
      checkSliceSet(op[7], op[2] as number, at('slices'));
      if (typeof op[8] !== 'boolean') fail(`${at('packed')}: not a boolean`);
      return;
    case SliceOp.DropTable:
      uint(1, 'table');
      return;
    case SliceOp.Stats:
      uint(1, 'table');
      checkSliceSet(op[2], 0, at('slices'));
      return;
    case SliceOp.MoveStart:
    case SliceOp.MoveFreeze:
    case SliceOp.MoveDrop:
    case SliceOp.MoveBegin:
      slice(1);
      return;
    case SliceOp.MoveRead: {
      slice(1);
      if (!isMoveCursor(op[2])) fail(`${at('cursor')}: ${show(op[2])} is not null or [table, encoded key (a byte string)]`);
      uint(3, 'limit');
      return;
    }
    case SliceOp.MoveApply: {
      slice(1);
      checkMovedEffects(op[2], op[1] as number, at('effects'));
      if (typeof op[3] !== 'boolean') fail(`${at('own')}: not a boolean`);
      return;
    }
    case SliceOp.MoveAbort:
      slice(1);
      if (!(op[2] === 'source' || op[2] === 'target')) fail(`${at('role')}: not source or target`);
      return;
  }
}

/** A SliceSet from `from` names slice numbers only (below SLICE_COUNT_MAX): no byte past them, no bit past them in
 * its last byte. */
function checkSliceSet(v: unknown, from: number, where: string): void {
  const room = SLICE_COUNT_MAX - from;
  if (!(v instanceof Uint8Array)) fail(`${where}: not a slice set (bytes)`);
  if (v.length * 8 > room + 7 || (v.length * 8 > room && v[v.length - 1] >> (room & 7) !== 0)) fail(`${where}: names a slice from ${SLICE_COUNT_MAX} on`);
}

/** A move's effects (MovedEffects) to `slice`'s target, checked whole: bytes, at most MOVE_EFFECTS_BYTES_MAX, one
 * msgpack list of changes checkMovedEffect takes and nothing after it. Set-effects of plain items (most moves' steps:
 * setEffectsEnd's layout) are read by their headers alone; anything else is decoded (as the target decodes it,
 * plain maps: slice-worker/log-format.ts) and checked value by value (checkSliceChanges), so the target reads it
 * again to apply it: a step whose changes hold a delete, or whose items hold a map, is decoded twice there. */
function checkMovedEffects(b: unknown, slice: number, where: string): asserts b is MovedEffects {
  if (!(b instanceof Uint8Array)) fail(`${where}: not bytes`);
  if (b.byteLength > MOVE_EFFECTS_BYTES_MAX) fail(`${where}: ${b.byteLength} bytes, over ${MOVE_EFFECTS_BYTES_MAX}`);
  if (setEffectsEnd(b, 0, slice) === b.byteLength) return;
  let v: unknown;
  try {
    // From a plain Uint8Array, as the target decodes a step (SliceStore.moveApply): a Buffer (an op's bytes as a frame
    // decoded them) would make the items' binary values Buffers, where the step read by its headers gives Uint8Arrays.
    v = replicationUnpackr.unpack(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
  } catch (err) {
    fail(`${where}: not one msgpack value: ${(err as Error).message}`);
  }
  checkSliceChanges(v, null, slice, false);
  checkedMoves.set(b, v as Effect[]);
}

/** Move steps that checkMovedEffects decoded whole (a delete or a drop among the changes, an item holding a map), by
 * their bytes, for the target's apply to take (takeCheckedMove) rather than decode the step a second time (without the
 * second decode a move of such steps took 0.88x the CPU: bench/README.md, "A move's copy carries the items' bytes").
 * Weak: a step checked and never applied (the worker refused the op after its check) goes with its op. */
const checkedMoves = new WeakMap<MovedEffects, Effect[]>();

/** The changes checkMovedEffects decoded from `bytes`, once (the store applies and so owns them), or undefined where
 * it did not decode them (a step of plain set-effects, read by its headers; one not checked here). */
export function takeCheckedMove(bytes: MovedEffects): Effect[] | undefined {
  const effects = checkedMoves.get(bytes);
  if (effects !== undefined) checkedMoves.delete(bytes);
  return effects;
}

/** A move's cursor (MoveCursor), as MoveRead names it and its answer gives the next: null or [table, encoded key]. */
function isMoveCursor(v: unknown): boolean {
  return v === null || (Array.isArray(v) && v.length === 2 && isUint(v[0]) && isByteString(v[1]));
}

/** What a key that is not a byte string is told (shared/key-encoding.ts isByteString). */
const NOT_AN_ENCODED_KEY = 'is not an encoded key (a byte string: char codes 0 to 255)';
function checkEffectKey(key: string, where: string): void {
  if (!isByteString(key)) fail(`${where}: key ${show(key)} ${NOT_AN_ENCODED_KEY}`);
}

/** A change a move carries to `slice`'s target: set or delete of an item of that slice, or a drop of that slice. */
function checkMovedEffect(e: unknown, slice: number, where: string): void {
  if (!(Array.isArray(e) && e.length > 0)) fail(`${where}: not an effect`);
  switch (e[0]) {
    case EFFECT_SET:
      if (!(e.length === 6 && isUint(e[1]) && e[2] === slice && typeof e[3] === 'string' && isUint(e[5]))) fail(`${where}: not [set, table, ${slice}, key, item, bytes]`);
      checkEffectKey(e[3], where);
      checkItem(e[4], `${where} item`);
      return;
    case EFFECT_DELETE:
      if (!(e.length === 4 && isUint(e[1]) && e[2] === slice && typeof e[3] === 'string')) fail(`${where}: not [delete, table, ${slice}, key]`);
      checkEffectKey(e[3], where);
      return;
    case EFFECT_DROP_SLICE:
      if (!(e.length === 3 && e[1] === slice && (e[2] === null || isUint(e[2])))) fail(`${where}: not [drop-slice, ${slice}, table or null]`);
      return;
    default:
      fail(`${where}: a slice's changes are set, delete and drop-slice only, got kind ${show(e[0])}`);
  }
}

/** The request ids that a replicated slice's changes carry (slice-worker/replication/applied-requests.ts, AppliedList),
 * by their parts. */
export interface AppliedListParts {
  instances: unknown;
  counters: unknown;
  of: unknown;
  ats: unknown;
  answers: unknown;
}

/** A replicated slice's changes as a peer sends them (a record's payload, a snapshot's state; decoded by
 * slice-worker/log-format.ts), whole: effects on `slice` alone (a snapshot's are its items, set-effects only), and
 * the request ids applied with them (null: none), each id once in a snapshot, with a time and an answer each. A replica applies
 * them later (a record once committed), when nothing may be refused any more. Throws MalformedFrame. */
export function checkSliceChanges(effects: unknown, requests: AppliedListParts | null, slice: number, snapshot: boolean): void {
  if (!Array.isArray(effects)) fail('the effects are a list');
  for (let i = 0; i < effects.length; i++) {
    const e = effects[i] as unknown;
    // A follower checks every record: a whole set-effect (most of them) without building a message.
    if (Array.isArray(e) && e.length === 6 && e[0] === EFFECT_SET && isUint(e[1]) && e[2] === slice && isByteString(e[3]) && isPlainObject(e[4]) && isItemValue(e[4]) && isUint(e[5])) continue;
    if (snapshot && !(Array.isArray(e) && e[0] === EFFECT_SET)) fail(`effect ${i}: a snapshot holds items (set-effects) only`);
    checkMovedEffect(e, slice, `effect ${i}`);
  }
  if (requests === null) return;
  const { instances, counters, of, ats, answers } = requests;
  if (!(Array.isArray(counters) && counters.length > 0 && counters.every((c) => isUint(c) && c > 0))) fail('the request counters are a list of whole numbers of at least 1');
  const n = counters.length;
  if (!(Array.isArray(instances) && instances.length > 0 && instances.every((v) => isUint(v) && v <= REQUEST_ID_INSTANCE_MAX))) {
    fail(`the request instances are a list of whole numbers of at most ${REQUEST_ID_INSTANCE_MAX}`);
  }
  if (of === null ? instances.length !== 1 : !(Array.isArray(of) && of.length === n && of.every((v) => isUint(v) && v < instances.length))) {
    fail('the requests name their instance by its place in the list of instances (null: the only one)');
  }
  const isTime = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
  if (!(isTime(ats) || (Array.isArray(ats) && ats.length === n && ats.every(isTime)))) fail('the requests\' times are one time or one per request');
  if (answers !== null) {
    if (!(Array.isArray(answers) && answers.length === n)) fail('the requests\' answers are null or one per request');
    answers.forEach((a, i) => a === null || typeof a === 'boolean' || checkItem(a, `answer ${i}`));
  }
  // A snapshot's list becomes an AppliedRequests, which asserts that it remembers an id once: it must not name one
  // twice. A record's may (a leader that forgot an id executed a copy of its write again in the same task): applied
  // in order, the second keeps the first's answer (AppliedRequests.addAll).
  if (n === 1 || !snapshot) return;
  const ids = new Map<number, Set<number>>();
  for (let i = 0; i < n; i++) {
    const instance = instances[of === null ? 0 : (of as number[])[i]] as number;
    let counterSet = ids.get(instance);
    if (counterSet === undefined) ids.set(instance, (counterSet = new Set()));
    if (counterSet.has(counters[i])) fail(`request [${instance}, ${counters[i]}] is named twice`);
    counterSet.add(counters[i]);
  }
}

/** Where a list of set-effects of `slice` that checkSliceChanges takes ends (its header at `at`), read by its msgpack
 * headers alone, without building a value; -1 when not sure. A follower checks every record it is sent before it
 * logs it, and decoded whole for that (its items built, then dropped until the apply decodes it again) the check was
 * as much of its CPU as the apply's decode, and garbage besides (bench/README.md, "A follower's check without a
 * decode"). Only the common layout is read: each effect [set, table, slice, key, item, bytes] with whole numbers as
 * msgpackr writes them up to 32 bits, a string key, an item map of string names whose values are strings, booleans,
 * nil, bins, finite numbers and lists of those (nested no deeper than isValue allows); anything else (another kind of
 * effect, a nested map, which may be a set's or a decimal's tag, an ext, a 64-bit or non-finite number) answers -1,
 * and the caller decodes and checks it whole, so what a follower refuses is decided there, as before. */
export function setEffectsEnd(b: Uint8Array, at: number, slice: number, visit: SetEffectVisit | null = null): number {
  let count: number;
  [count, at] = listHeaderAt(b, at);
  for (let i = 0; i < count && at >= 0; i++) {
    if (b[at] !== 0x96 || b[at + 1] !== EFFECT_SET) return -1;
    at += 2;
    const table = plainUint(b, at);
    if (table < 0) return -1;
    at += uintWidth(b[at]);
    if (plainUint(b, at) !== slice) return -1;
    at += uintWidth(b[at]);
    const keyAt = at;
    at = encodedKeyEnd(b, at);
    if (at < 0) return -1;
    const itemAt = at;
    at = itemMapEnd(b, at);
    const itemEnd = at;
    const size = at < 0 ? -1 : plainUint(b, at);
    if (size < 0) return -1;
    at += uintWidth(b[at]);
    visit?.(table, keyAt, itemAt, itemEnd, size);
  }
  return at <= b.length ? at : -1;
}
/** Where the msgpack string at `at` ends when its UTF-8 is a byte string's as msgpackr writes one (each byte below 0x80,
 * or 0xc2 or 0xc3 then a continuation byte: a char 0x80 to 0xff), else -1: any other bytes (a char past 0xff, which
 * checkSliceChanges refuses, or bytes no encoder of a byte string writes) are left to the whole decode and its check.
 * What passes here is what log-format.ts keyOf reads without msgpackr. */
function encodedKeyEnd(b: Uint8Array, at: number): number {
  const end = stringEnd(b, at);
  if (end < 0) return -1;
  for (let i = at + stringHeaderBytes(b[at]); i < end; i++) {
    const c = b[i];
    if (c < 0x80) continue;
    if ((c !== 0xc2 && c !== 0xc3) || i + 1 >= end || (b[i + 1] & 0xc0) !== 0x80) return -1;
    i++;
  }
  return end;
}

/** What setEffectsEnd tells of each set-effect it read, in order (a follower's apply without a decode: log-format.ts
 * readPackedReplicated): its table, where its key's string (header included) and its item's map start, where the
 * item ends, and the item's size as the effect records it. Told only of effects read whole; the walk may still
 * answer -1 at a later one. */
export type SetEffectVisit = (table: number, keyAt: number, itemAt: number, itemEnd: number, size: number) => void;

/** Where the request ids of a record's changes end (AppliedListParts' five after its effects: instances, counters, of,
 * ats, answers, at `at`), read by their msgpack headers as checkSliceChanges checks them for a record; -1 when not
 * sure. Only the common layout: every answer null (a put's, most writes'), `of` null or a list, `ats` one time or a
 * list, numbers whole or as msgpackr writes one past 32 bits (a float 64). The caller decodes anything else. */
export function plainRequestsEnd(b: Uint8Array, at: number, out: PlainRequests | null = null): number {
  let instances: number;
  [instances, at] = listHeaderAt(b, at);
  if (at < 0 || instances === 0) return -1;
  for (let i = 0; i < instances && at >= 0; i++) {
    const v = plainNumber(b, at);
    at = Number.isSafeInteger(v) && v >= 0 && v <= REQUEST_ID_INSTANCE_MAX ? numberEnd(b, at) : -1;
    out?.instances.push(v);
  }
  if (at < 0) return -1;
  let n: number;
  [n, at] = listHeaderAt(b, at);
  if (at < 0 || n === 0) return -1;
  for (let i = 0; i < n && at >= 0; i++) {
    const v = plainNumber(b, at);
    at = Number.isSafeInteger(v) && v > 0 ? numberEnd(b, at) : -1;
    out?.counters.push(v);
  }
  if (at < 0) return -1;
  if (b[at] === 0xc0) {
    if (instances !== 1) return -1;
    at++;
  } else {
    let count: number;
    [count, at] = listHeaderAt(b, at);
    if (at < 0 || count !== n) return -1;
    if (out !== null) out.of = [];
    for (let i = 0; i < n && at >= 0; i++) {
      const v = plainNumber(b, at);
      at = Number.isSafeInteger(v) && v >= 0 && v < instances ? numberEnd(b, at) : -1;
      out?.of!.push(v);
    }
    if (at < 0) return -1;
  }
  const time = plainNumber(b, at);
  if (Number.isFinite(time) && time >= 0) {
    at = numberEnd(b, at);
    if (out !== null) out.ats = time;
  } else {
    let count: number;
    [count, at] = listHeaderAt(b, at);
    if (at < 0 || count !== n) return -1;
    const ats: number[] | null = out !== null ? [] : null;
    if (out !== null) out.ats = ats!;
    for (let i = 0; i < n && at >= 0; i++) {
      const v = plainNumber(b, at);
      at = Number.isFinite(v) && v >= 0 ? numberEnd(b, at) : -1;
      ats?.push(v);
    }
    if (at < 0) return -1;
  }
  return b[at] === 0xc0 ? at + 1 : -1;
}
/** The request ids plainRequestsEnd reads, when asked for them (`out`): the lists of AppliedList (answers all null),
 * each number as plainNumber reads it, which is the number msgpackr decodes (a follower's apply reads them so:
 * log-format.ts readPackedReplicated). Filled as they are read: whole only where plainRequestsEnd does not answer -1. */
export interface PlainRequests {
  instances: number[];
  counters: number[];
  of: number[] | null;
  ats: number[] | number;
}

/** The number at `at` as msgpackr decodes it (a positive fixint, uint 8, 16, 32, float 64), or NaN for any other. */
function plainNumber(b: Uint8Array, at: number): number {
  if (b[at] === 0xcb) {
    if (at + 9 > b.length) return NaN;
    // Big-endian into the scratch's bytes, little-endian on every machine Node runs on here (asserted below).
    for (let i = 0; i < 8; i++) float64Bytes[7 - i] = b[at + 1 + i];
    return float64[0];
  }
  const v = plainUint(b, at);
  return v < 0 ? NaN : v;
}

const float64 = new Float64Array(1);
const float64Bytes = new Uint8Array(float64.buffer);
float64[0] = 1;
assert(float64Bytes[7] === 0x3f, 'a float 64 is read little-endian from its scratch');

/** Where the number plainNumber read ends. */
const numberEnd = (b: Uint8Array, at: number): number => at + (b[at] === 0xcb ? 9 : uintWidth(b[at]));

/** The bytes a whole number's tag and body take, for the tags plainUint reads. */
const uintWidth = (t: number): number => (t <= 0x7f ? 1 : t === 0xcc ? 2 : t === 0xcd ? 3 : 5);

/** The whole number at `at` (a positive fixint, uint 8, 16 or 32), or -1. */
function plainUint(b: Uint8Array, at: number): number {
  const t = b[at];
  if (t === undefined) return -1;
  if (t <= 0x7f) return t;
  if (t === 0xcc && at + 2 <= b.length) return b[at + 1];
  if (t === 0xcd && at + 3 <= b.length) return u16(b, at);
  if (t === 0xce && at + 5 <= b.length) return u32(b, at);
  return -1;
}

/** Where an item's map at `at` ends (string names, isValue's values at depth 0), or -1. */
function itemMapEnd(b: Uint8Array, at: number): number {
  let count: number;
  [count, at] = mapHeaderAt(b, at);
  for (let i = 0; i < count && at >= 0; i++) {
    at = stringEnd(b, at);
    if (at >= 0) at = plainValueEnd(b, at, 0);
  }
  return at;
}

/** Where a value that isValue takes at `depth` ends (of the kinds setEffectsEnd reads), or -1. */
function plainValueEnd(b: Uint8Array, at: number, depth: number): number {
  if (depth > VALUE_DEPTH_MAX) return -1;
  const t = b[at];
  let end: number;
  if (t === undefined) return -1;
  if (t <= 0x7f || t >= 0xe0) end = at + 1; // fixint
  else if (t >= 0x90 && t <= 0x9f) return plainListEnd(b, at + 1, t & 0x0f, depth);
  // fixstr: its length in its type byte, its end checked below with the others' (stringEnd would read the type again)
  else if (t >= 0xa0 && t <= 0xbf) end = at + 1 + (t & 0x1f);
  else {
    switch (t) {
      case 0xc0: // nil, false, true
      case 0xc2:
      case 0xc3:
        end = at + 1;
        break;
      case 0xc4: // bin 8, 16, 32
        end = at + 2 + (b[at + 1] ?? b.length);
        break;
      case 0xc5:
        end = at + 3 > b.length ? -1 : at + 3 + u16(b, at);
        break;
      case 0xc6:
        end = at + 5 > b.length ? -1 : at + 5 + u32(b, at);
        break;
      case 0xd9: // str 8, 16, 32
      case 0xda:
      case 0xdb:
        return stringEnd(b, at);
      case 0xca: // float 32, 64: finite (the exponent not all ones)
        end = (b[at + 1] & 0x7f) === 0x7f && (b[at + 2] & 0x80) === 0x80 ? -1 : at + 5;
        break;
      case 0xcb:
        end = (b[at + 1] & 0x7f) === 0x7f && (b[at + 2] & 0xf0) === 0xf0 ? -1 : at + 9;
        break;
      case 0xcc: // uint 8, 16, 32; int 8, 16, 32 (64-bit ones may decode as a BigInt: not read here)
      case 0xd0:
        end = at + 2;
        break;
      case 0xcd:
      case 0xd1:
        end = at + 3;
        break;
      case 0xce:
      case 0xd2:
        end = at + 5;
        break;
      case 0xdc:
        return at + 3 > b.length ? -1 : plainListEnd(b, at + 3, u16(b, at), depth);
      case 0xdd:
        return at + 5 > b.length ? -1 : plainListEnd(b, at + 5, u32(b, at), depth);
      default:
        return -1; // a map (a set's or a decimal's tag has rules of its own), an ext, 0xc1, a 64-bit whole number
    }
  }
  return end >= 0 && end <= b.length ? end : -1;
}

function plainListEnd(b: Uint8Array, at: number, count: number, depth: number): number {
  for (let i = 0; i < count && at >= 0; i++) at = plainValueEnd(b, at, depth + 1);
  return at;
}

/** An item as stored: a map of values (system attributes included, so names are not checked as a client's are). */
function checkItem(item: unknown, where: string): void {
  if (!isPlainObject(item)) fail(`${where}: not a map of attributes`);
  for (const name in item) if (!isValue(item[name], 0)) checkValue(item[name], `${where}.${name}`);
}

/** An item's attributes are all values (the common case, checked without building a message). */
function isItemValue(item: Record<string, unknown>): boolean {
  for (const name in item) if (!isValue(item[name], 0)) return false;
  return true;
}

/** validateValue's rules, without building a name for every nested value: that is done
 * (by validateValue, for its message) only for a value that fails. Its refusal (a client's ValidationError) is
 * MalformedFrame here, as every frame check's: a follower's check of a peer's record takes MalformedFrame as the
 * record's fault (refused MalformedContents) and any other error as its own bug, thrown on, which failed its worker. */
function checkValue(v: unknown, where: string): void {
  if (isValue(v, 0)) return;
  try {
    validateValue(v, where);
  } catch (err) {
    if (err instanceof KeysliceError) fail(err.message);
    throw err;
  }
  fail(`${where}: not a value`);
}

function isValue(v: unknown, depth: number): boolean {
  if (depth > VALUE_DEPTH_MAX) return false;
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(v);
    case 'object': {
      if (v === null || v instanceof Uint8Array) return true;
      if (Array.isArray(v)) {
        for (const e of v) if (!isValue(e, depth + 1)) return false;
        return true;
      }
      if (!isPlainObject(v)) return false;
      // A map of one set tag is a set: its elements have rules of their own (validateValue's).
      const keys = Object.keys(v);
      if (keys.length === 1 && SET_TAG_KEYS.has(keys[0])) return isValidValue(v);
      for (const k in v) if (k === UNSTORABLE_MAP_KEY || !isValue(v[k], depth + 1)) return false;
      return true;
    }
    default:
      return false;
  }
}

/** Maps of one of these keys are sets or a decimal number: validateValue has their rules. */
const SET_TAG_KEYS = new Set([...Object.values(SET_TAGS), DECIMAL_TAG]);

function isValidValue(v: unknown): boolean {
  try {
    validateValue(v, 'value');
    return true;
  } catch {
    return false;
  }
}

function checkWriteCheck(check: unknown, where: string): void {
  if (check === null) return;
  if (!isPlainObject(check)) fail(`${where}: not a map or null`);
  checkConditionOrNull(check.condition, `${where}.condition`);
  if (!(typeof check.returnOld === 'boolean' && typeof check.oldOnFailure === 'boolean')) fail(`${where}: returnOld and oldOnFailure are booleans`);
}

function checkPath(path: unknown, where: string): void {
  if (!(Array.isArray(path) && path.length >= 1 && path.length <= EXPRESSION_PATH_DEPTH_MAX)) fail(`${where}: a path is a list of 1 to ${EXPRESSION_PATH_DEPTH_MAX} steps`);
  if (typeof path[0] !== 'string') fail(`${where}: a path starts with an attribute name`);
  for (const step of path) if (!(typeof step === 'string' || isUint(step))) fail(`${where}: a path step is a name or a list index, got ${show(step)}`);
}

function checkProjection(projection: unknown, where: string): void {
  if (projection === null) return;
  if (!Array.isArray(projection)) fail(`${where}: not a list of paths or null`);
  projection.forEach((p, i) => checkPath(p, `${where}[${i}]`));
}

function checkConditionOrNull(c: unknown, where: string): void {
  if (c !== null) checkCondition(c, where, 0);
}

function checkCondition(c: unknown, where: string, depth: number): void {
  if (depth > BOUND_EXPRESSION_DEPTH_MAX) fail(`${where}: nested deeper than ${BOUND_EXPRESSION_DEPTH_MAX}`);
  if (!isPlainObject(c)) fail(`${where}: not a condition`);
  switch (c.k) {
    case 'cmp':
      if (!COMPARATORS.has(c.op as string)) fail(`${where}: unknown comparator ${show(c.op)}`);
      checkOperand(c.a, where, depth + 1);
      checkOperand(c.b, where, depth + 1);
      return;
    case 'between':
      for (const o of [c.a, c.low, c.high]) checkOperand(o, where, depth + 1);
      return;
    case 'in':
      checkOperand(c.a, where, depth + 1);
      if (!(Array.isArray(c.list) && c.list.length >= 1 && c.list.length <= EXPRESSION_IN_OPERANDS_MAX)) fail(`${where}: IN takes 1 to ${EXPRESSION_IN_OPERANDS_MAX} operands`);
      for (const o of c.list) checkOperand(o, where, depth + 1);
      return;
    case 'and':
    case 'or':
      checkCondition(c.a, where, depth + 1);
      checkCondition(c.b, where, depth + 1);
      return;
    case 'not':
      checkCondition(c.a, where, depth + 1);
      return;
    case 'exists':
    case 'notExists':
      checkPath(c.path, where);
      return;
    case 'type':
      checkOperand(c.a, where, depth + 1);
      if (!TYPE_NAMES.includes(c.type as never)) fail(`${where}: unknown type name ${show(c.type)}`);
      return;
    case 'beginsWith':
    case 'contains':
      checkOperand(c.a, where, depth + 1);
      checkOperand(c.b, where, depth + 1);
      return;
    default:
      fail(`${where}: unknown condition ${show(c.k)}`);
  }
}

function checkOperand(o: unknown, where: string, depth: number): void {
  if (depth > BOUND_EXPRESSION_DEPTH_MAX) fail(`${where}: nested deeper than ${BOUND_EXPRESSION_DEPTH_MAX}`);
  if (!isPlainObject(o)) fail(`${where}: not an operand`);
  if (o.k === 'path') checkPath(o.path, where);
  else if (o.k === 'value') checkValue(o.v, `${where} value`);
  else if (o.k === 'size') checkOperand(o.a, where, depth + 1);
  else fail(`${where}: unknown operand ${show(o.k)}`);
}

function checkUpdateAction(a: unknown, where: string): void {
  if (!isPlainObject(a)) fail(`${where}: not an update action`);
  checkPath(a.path, where);
  if (a.k === 'set') checkSetValue(a.value, where, 0);
  else if (a.k === 'add') {
    if (!isNumberValue(a.n)) fail(`${where}: ADD takes a finite number or a decimal ({"$N": "..."})`);
  } else if (a.k === 'addSet' || a.k === 'deleteSet') {
    checkValue(a.set, `${where} set`);
    if (setTypeOf(a.set) === null) fail(`${where}: ADD or DELETE of elements takes a set`);
  } else if (a.k !== 'remove') fail(`${where}: unknown update action ${show(a.k)}`);
}

function checkSetValue(v: unknown, where: string, depth: number): void {
  if (depth > BOUND_EXPRESSION_DEPTH_MAX) fail(`${where}: nested deeper than ${BOUND_EXPRESSION_DEPTH_MAX}`);
  if (!isPlainObject(v)) fail(`${where}: not a SET value`);
  switch (v.k) {
    case 'path':
      checkPath(v.path, where);
      return;
    case 'value':
      checkValue(v.v, `${where} value`);
      return;
    case '+':
    case '-':
    case 'listAppend':
      checkSetValue(v.a, where, depth + 1);
      checkSetValue(v.b, where, depth + 1);
      return;
    case 'ifNotExists':
      checkPath(v.path, where);
      checkSetValue(v.b, where, depth + 1);
      return;
    default:
      fail(`${where}: unknown SET value ${show(v.k)}`);
  }
}

/** The error a slice node answered: only the details fields that ErrorDetails declares for a node (item,
 * notApplied), each of its type; routerRetried is the router's own to say (router.ts failoverSpent). */
export function errorFromResult(code: unknown, message: unknown, details?: unknown): KeysliceError {
  let d: ErrorDetails | undefined;
  if (isPlainObject(details)) {
    d = {};
    const { item, notApplied } = details as Record<string, unknown>;
    if (item === null || isPlainObject(item)) d.item = item as Item | null;
    if (notApplied === true) d.notApplied = true;
  }
  return new KeysliceError(isErrorCode(code) ? code : 'Internal', String(message), d);
}

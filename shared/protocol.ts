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
//   node  -> coord  [NodeFrame.Hello, NODE_PROTOCOL_VERSION, workerCount]
//   coord -> node   [NodeFrame.Assign, epoch, sliceCount, slices]
//   node  -> coord  [NodeFrame.Assigned, epoch]
//   coord -> node   [NodeFrame.Batch, batchId, epoch, [[worker, opsBytes], ...]]
//   node  -> coord  [NodeFrame.BatchReply, batchId, worker, resultsBytes]
//                   [NodeFrame.BatchError, batchId, code, message]
//   coord -> node   [NodeFrame.Epoch, epoch]   the map moved on (a slice moved elsewhere)
// The coordinator opens the connection and shows the cluster secret in the
// handshake (header CLUSTER_SECRET_HEADER); a node refuses a connection without it.
// opsBytes is a packed array of slice ops for one worker thread. The node
// hands it to that worker untouched (one message per batch) and relays the
// worker's packed results the same way; only the outer frame is decoded.
import { Packr, Unpackr } from 'msgpackr';
import { isOperationName, type OperationName } from './api.js';
import { KeysliceError, isErrorCode, type ErrorCode, type ErrorDetails } from './errors.js';
import type { Condition, Path, UpdateAction } from './expression-ast.js';
import { CLIENT_FRAME_REQUESTS_MAX, INTERNAL_FRAME_BYTES_MAX, REQUEST_BYTES_MAX } from './limits.js';
import type { Item } from './values.js';

/** The client protocol. 2: a frame may carry a list of requests or responses. */
export const PROTOCOL_VERSION = 2;
export const CLIENT_SUBPROTOCOL = `keyslice.v${PROTOCOL_VERSION}`;
/** Coordinator <-> slice node. 2: slice ops carry bound expressions (conditions, filters, updates, projections).
 * 3: slice moves (Move* ops) and the Epoch frame. */
export const NODE_PROTOCOL_VERSION = 3;
/** Header that carries the cluster secret (coordinator -> node handshake, node -> coordinator join). */
export const CLUSTER_SECRET_HEADER = 'x-keyslice-cluster-secret';
/** Membership and operator endpoints on the coordinator's HTTP port. */
export const CLUSTER_API_PREFIX = '/cluster/';
export const CLIENT_WS_PATH = '/ws';
export const HTTP_API_PREFIX = '/api/';

export const RESULT_OK = 0;
export const RESULT_ERROR = 1;

// ---- client frames -------------------------------------------------------

const clientPackr = new Packr({ useRecords: false });
const clientUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

export type ClientRequestFrame = [id: number, op: OperationName, payload: Record<string, unknown>];
export type ClientResponseFrame =
  | [id: number, ok: typeof RESULT_OK, result: unknown]
  | [id: number, err: typeof RESULT_ERROR, code: ErrorCode, message: string]
  | [id: number, err: typeof RESULT_ERROR, code: ErrorCode, message: string, details: ErrorDetails];

/** One request or response, or several in one frame. */
export function encodeClientFrame(frame: ClientRequestFrame | ClientResponseFrame | ClientRequestFrame[] | ClientResponseFrame[]): Buffer {
  return clientPackr.pack(frame);
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
  if (!Array.isArray(frame[0])) return [checkRequest(frame)];
  if (frame.length > CLIENT_FRAME_REQUESTS_MAX) throw new FrameError(-1, 'RequestTooLarge', `a frame holds at most ${CLIENT_FRAME_REQUESTS_MAX} requests; got ${frame.length}`);
  return frame.map(checkRequest);
}

function checkRequest(frame: unknown): ClientRequestFrame | FrameError {
  if (!Array.isArray(frame) || frame.length !== 3) return new FrameError(-1, 'MalformedRequest', 'a request is an array [id, operation, payload]');
  const [id, op, payload] = frame;
  if (!Number.isSafeInteger(id) || id < 0) return new FrameError(-1, 'MalformedRequest', 'request id must be an unsigned integer');
  if (!isOperationName(op)) return new FrameError(id, 'UnknownOperation', `unknown operation ${JSON.stringify(op)}`);
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return new FrameError(id, 'MalformedRequest', 'request payload must be a map');
  return [id, op, payload as Record<string, unknown>];
}

/** The responses of one frame (one, or a list). */
export function decodeClientResponses(bytes: Uint8Array): ClientResponseFrame[] {
  const frame = clientUnpackr.unpack(bytes) as unknown;
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
} as const;

export type NodeFrameMessage =
  | [typeof NodeFrame.Hello, version: number, workerCount: number]
  | [typeof NodeFrame.Assign, epoch: number, sliceCount: number, slices: number[]]
  | [typeof NodeFrame.Assigned, epoch: number]
  | [typeof NodeFrame.Batch, batchId: number, epoch: number, parts: [worker: number, ops: Uint8Array][]]
  | [typeof NodeFrame.BatchReply, batchId: number, worker: number, results: Uint8Array]
  | [typeof NodeFrame.BatchError, batchId: number, code: ErrorCode, message: string]
  | [typeof NodeFrame.Epoch, epoch: number];

// Records mode: objects of one shape in a frame share one structure definition.
const internalPackr = new Packr({ useRecords: true, mapsAsObjects: true });
const internalUnpackr = new Unpackr({ useRecords: true, mapsAsObjects: true });
// Workers keep decoded binary values in their partitions: copy them out of the frame.
const workerUnpackr = new Unpackr({ useRecords: true, mapsAsObjects: true, copyBuffers: true });

export function encodeNodeFrame(frame: NodeFrameMessage): Buffer {
  return internalPackr.pack(frame);
}

export function decodeNodeFrame(bytes: Uint8Array): NodeFrameMessage {
  if (bytes.byteLength > INTERNAL_FRAME_BYTES_MAX) throw new Error(`node frame of ${bytes.byteLength} bytes is over the limit`);
  const frame = internalUnpackr.unpack(bytes);
  if (!Array.isArray(frame) || typeof frame[0] !== 'number' || frame[0] < NodeFrame.Hello || frame[0] > NodeFrame.Epoch) {
    throw new Error('malformed node frame');
  }
  if (frame[0] === NodeFrame.Batch) {
    const [, batchId, epoch, parts] = frame;
    const partsOk = Array.isArray(parts) && parts.every((p) => Array.isArray(p) && Number.isInteger(p[0]) && p[1] instanceof Uint8Array);
    if (!Number.isSafeInteger(batchId) || !Number.isSafeInteger(epoch) || !partsOk) throw new Error('malformed batch frame');
  }
  return frame as NodeFrameMessage;
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
  // Slice moves (coordinator/slice-mover.ts). On the source worker:
  MoveStart: 10,
  MoveRead: 11,
  MoveFreeze: 12,
  MoveDrop: 13,
  // On the target worker:
  MoveBegin: 14,
  MoveApply: 15,
  // Either side: forget the move (the source owns the slice again, the target drops what it got).
  MoveAbort: 16,
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
/** MoveRead result: the slice's changes since the last read, then the next items after the
 * cursor as set-effects, and the cursor after them (null: the copy is complete). */
export type MoveReadResult = [changes: Effect[], items: Effect[], next: MoveCursor, done: boolean];

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
};

export type SliceOpMessage =
  | [typeof SliceOp.Assign, epoch: number, slices: number[]]
  | [typeof SliceOp.Put, tableId: number, slice: number, key: string, item: Item, itemBytes: number, check: WriteCheck | null]
  | [typeof SliceOp.Get, tableId: number, slice: number, key: string, projection: Projection]
  | [typeof SliceOp.Delete, tableId: number, slice: number, key: string, check: WriteCheck | null]
  | [typeof SliceOp.Update, tableId: number, slice: number, key: string, spec: UpdateSpec]
  | [typeof SliceOp.Range, tableId: number, slice: number, spec: RangeSpec]
  | [typeof SliceOp.Scan, tableId: number, fromSlice: number, afterKey: string | null, limit: number, projection: Projection, filter: Condition | null, toSlice: number]
  | [typeof SliceOp.DropTable, tableId: number]
  | [typeof SliceOp.Stats, tableId: number]
  | [typeof SliceOp.MoveStart, slice: number]
  | [typeof SliceOp.MoveRead, slice: number, cursor: MoveCursor, limit: number]
  | [typeof SliceOp.MoveFreeze, slice: number]
  | [typeof SliceOp.MoveDrop, slice: number]
  | [typeof SliceOp.MoveBegin, slice: number]
  | [typeof SliceOp.MoveApply, slice: number, effects: Effect[], own: boolean]
  | [typeof SliceOp.MoveAbort, slice: number, role: 'source' | 'target'];

/** Range result: items in order, the encoded key of the last examined one, whether
 * more remain, (if asked for) every returned item's encoded key, and how many
 * items the range examined (the filter's rejects included). */
export type RangeResult = [items: Item[], lastKey: string | null, more: boolean, keys: string[] | null, examined: number];
/** Scan result: every examined entry [slice, key, item, storedBytes] in (slice, key) order,
 * with item null where the filter left it out, and whether this worker has nothing more. */
export type ScanResult = [entries: [slice: number, key: string, item: Item | null, bytes: number][], exhausted: boolean];

/** Stats result: for each slice of the table on this worker that holds items or saw
 * load, [slice, items, bytes, reads/s, writes/s]; and the table's hottest sharding
 * keys on this worker as [encoded sharding part, ops/s]. */
export type StatsResult = [slices: [slice: number, items: number, bytes: number, readsPerSecond: number, writesPerSecond: number][], hotKeys: [string, number][]];

export type SliceOpResult =
  | [typeof RESULT_OK, unknown]
  | [typeof RESULT_ERROR, ErrorCode, string]
  | [typeof RESULT_ERROR, ErrorCode, string, ErrorDetails];

export function encodeSliceOps(ops: SliceOpMessage[]): Uint8Array {
  return internalPackr.pack(ops);
}
export function decodeSliceOps(bytes: Uint8Array): SliceOpMessage[] {
  return workerUnpackr.unpack(bytes) as SliceOpMessage[];
}
export function encodeSliceResults(results: SliceOpResult[]): Uint8Array {
  return internalPackr.pack(results);
}
export function decodeSliceResults(bytes: Uint8Array): SliceOpResult[] {
  return internalUnpackr.unpack(bytes) as SliceOpResult[];
}

export function errorFromResult(code: unknown, message: unknown, details?: unknown): KeysliceError {
  const d = typeof details === 'object' && details !== null ? (details as ErrorDetails) : undefined;
  return new KeysliceError(isErrorCode(code) ? code : 'Internal', String(message), d);
}

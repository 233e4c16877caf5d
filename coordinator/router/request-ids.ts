// The request ids a router gives the writes it sends (shared/protocol.ts, RequestId), so that a write it
// sends again after an unknown outcome is applied once (docs/replication.md, "A write sent twice is applied
// once"). An id is [instance, counter]: this router's instance, 52 random bits drawn at its start, and a counter
// of its writes. Two numbers, not a string: a replica finds and remembers an id per write without building,
// hashing or comparing a string (applied-requests.ts).
//
// Why it is unique in the cluster for as long as a replica remembers it (APPLIED_REQUESTS_KEPT_MS): one
// router never gives the same counter twice (it only grows, and stays exact: 2^53 writes would take
// centuries), and two routers (or one restarted: a new instance) share an instance only by chance, about
// n^2 / 2^53 for n instances ever started: for a thousand, about 1 in 10 billion. (Only instances whose writes
// are remembered at once can clash, those that wrote within APPLIED_REQUESTS_KEPT_MS of each other, so n is
// far smaller than every router ever started.)
//
// A client may name a write itself, with an idempotency id (clientRequestId below): then its request id is made
// from that text and the write, so that every copy the client sends, through any router, carries the same.
import { hash, randomBytes } from 'node:crypto';
import { Packr } from 'msgpackr';
import { assert, KeysliceError } from '../../shared/errors.js';
import { IDEMPOTENCY_ID_CHARS_MAX, REQUEST_ID_INSTANCE_MAX } from '../../shared/limits.js';
import { REQUEST_ID_AT, type ClientRequestId, type RequestId, type WriteOp } from '../../shared/protocol.js';

export class RequestIds {
  private readonly instance: number;
  private count = 0;

  constructor() {
    const b = randomBytes(7);
    // 48 bits and 4 more: a safe integer.
    this.instance = b.readUIntBE(0, 6) * 16 + (b[6] & 15);
    assert(this.instance <= REQUEST_ID_INSTANCE_MAX, 'a router instance fits its bound');
  }

  next(): RequestId {
    this.count++;
    assert(Number.isSafeInteger(this.count), 'a router counts its writes exactly');
    return [this.instance, this.count];
  }
}

/** Checks a request's `idempotencyId` (undefined: none). */
export function idempotencyIdOf(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > IDEMPOTENCY_ID_CHARS_MAX || !/^[\x21-\x7e]+$/.test(v)) {
    throw new KeysliceError('ValidationError', `"idempotencyId" must be 1 to ${IDEMPOTENCY_ID_CHARS_MAX} printable ASCII characters (no spaces)`);
  }
  return v;
}

/** Encodes a write to fingerprint it: without records, so that one write always gives the same bytes. */
const fingerprintPackr = new Packr({ useRecords: false });

/** A client's idempotency id as a write carries it to the router: the id's text, and which write of a BatchWrite
 * it is (`puts.3`; '' for a single write). */
export interface ClientName {
  text: string;
  part: string;
}

/** The request id of a write that a client named `text` (`part`: which write of a BatchWrite, '' for a single
 * write), made from `op` before it carries an id. The instance is 52 bits of SHA-256 of the text (and part): the same for every copy, through any router;
 * the counter 53 bits of SHA-256 of the write itself, its op without an id (table, slice, key, item or update,
 * condition, what it returns): the same for a copy of the same request, another for another request, which the
 * slice then refuses (slice-replicas.ts: IdempotentParameterMismatch). A client's instance meets a router's (random) or
 * another text's only by chance, like two routers' (request-ids above): about n^2 / 2^53 for n of them remembered
 * at once. Hashed on the router (Router.send), once per copy a client sends to a replicated slice; a write without one, or to a
 * slice of one replica, costs nothing. */
export function clientRequestId(text: string, part: string, op: WriteOp): ClientRequestId {
  // One-shot hash(): about a third of createHash's time on inputs this small (measured side by side).
  const named = hash('sha256', part === '' ? text : `${text}\0${part}`, 'buffer');
  const instance = named.readUIntBE(0, 6) * 16 + (named[6] & 15);
  const body = hash('sha256', fingerprintPackr.pack(op), 'buffer');
  // 53 bits, never 0 (a counter is at least 1).
  const counter = (body.readUIntBE(0, 6) * 32 + (body[6] & 31)) || 1;
  assert(op[REQUEST_ID_AT[op[0]]] === null, 'a write is fingerprinted without its request id');
  assert(instance <= REQUEST_ID_INSTANCE_MAX && Number.isSafeInteger(counter) && counter > 0, 'a client id fits a request id');
  return [instance, counter, true];
}

// The request ids a router gives the writes it sends (shared/protocol.ts, RequestId), so that a write it
// sends again after an unknown outcome is applied once (docs/replication.md, "A write sent twice is applied
// once"). An id is this router's instance, 64 random bits drawn at its start, and a counter of its writes:
// `<16 hex digits>.<counter in base 36>`.
//
// Why it is unique in the cluster for as long as a replica remembers it (APPLIED_REQUESTS_KEPT_MS): one
// router never gives the same counter twice (it only grows, and stays exact: 2^53 writes would take
// centuries), and two routers (or one restarted: a new instance) share an instance only by chance, about
// n^2 / 2^65 for n instances ever started: for a million, about 3 in 100 million.
import { randomBytes } from 'node:crypto';
import { assert } from '../../shared/errors.js';
import { REQUEST_ID_CHARS_MAX } from '../../shared/limits.js';
import type { RequestId } from '../../shared/protocol.js';

export class RequestIds {
  private readonly prefix = `${randomBytes(8).toString('hex')}.`;
  private count = 0;

  next(): RequestId {
    this.count++;
    assert(Number.isSafeInteger(this.count), 'a router counts its writes exactly');
    const id = this.prefix + this.count.toString(36);
    assert(id.length <= REQUEST_ID_CHARS_MAX, 'a request id fits its bound');
    return id;
  }
}

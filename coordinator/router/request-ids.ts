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
import { randomBytes } from 'node:crypto';
import { assert } from '../../shared/errors.js';
import { REQUEST_ID_INSTANCE_MAX } from '../../shared/limits.js';
import type { RequestId } from '../../shared/protocol.js';

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

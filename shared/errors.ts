// Expected failures: every one has a stable code a program can switch on, an
// HTTP status, and whether a retry may succeed. Append new codes; never rename.
// A broken invariant is not one of these: it is an assertion (see assert()).
import type { Item } from './values.js';

export const ERROR_CODES = {
  ValidationError: { status: 400, retryable: false },
  MalformedRequest: { status: 400, retryable: false },
  UnknownOperation: { status: 400, retryable: false },
  InvalidKey: { status: 400, retryable: false },
  KeyTooLarge: { status: 400, retryable: false },
  ItemTooLarge: { status: 413, retryable: false },
  BatchTooLarge: { status: 400, retryable: false },
  RequestTooLarge: { status: 413, retryable: false },
  InvalidMarker: { status: 400, retryable: false },
  TableNotFound: { status: 404, retryable: false },
  TableExists: { status: 409, retryable: false },
  LimitExceeded: { status: 400, retryable: false },
  Unavailable: { status: 503, retryable: true },
  WrongOwner: { status: 503, retryable: true },
  Internal: { status: 500, retryable: false },
  /** A write's condition was false: nothing was changed. */
  ConditionalCheckFailed: { status: 400, retryable: false },
  ThroughputExceeded: { status: 429, retryable: true },
  /** The client token (or, between processes, the cluster secret) is missing or wrong. */
  Unauthorized: { status: 401, retryable: false },
  /** An operator request that the cluster's state does not allow now (e.g. removing a node that still owns slices). */
  InvalidState: { status: 409, retryable: false },
  /** HTTP: the path exists but does not take this method (the answer's Allow header lists those it takes). */
  MethodNotAllowed: { status: 405, retryable: false },
  /** HTTP: the request's headers or body did not arrive in time; nothing of it was applied. */
  RequestTimeout: { status: 408, retryable: true },
  /** An eventually consistent read reached a replica that may not answer it (not a replica of the slice here,
   * still catching up or being rebuilt, or between leaders): nothing was read; the router reads from the leader. */
  ReplicaNotReady: { status: 503, retryable: true },
  /** A write's idempotency id was used for a different request that the same slice still remembers (always within
   * IDEMPOTENCY_WINDOW_MS, at most APPLIED_REQUESTS_KEPT_MS after it was applied): nothing was applied
   * (docs/replication.md, "A client's write sent twice"). */
  IdempotentParameterMismatch: { status: 400, retryable: false },
  /** keyslice remove: without the node, some replicated slices would keep fewer replicas that are up than a majority
   * of their set, so they could elect no leader until the replicas that are down are back; nothing was changed (an
   * operator may insist: remove's "force", docs/operations.md). */
  ReplicaMajorityDown: { status: 409, retryable: false },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, code);
}

/** What an error may carry besides its code and message. */
export interface ErrorDetails {
  /** ConditionalCheckFailed, when the request asked for it: the item as it was (null: there was none). */
  item?: Item | null;
  /** Unavailable: the op was not applied (never sent to a node, or refused by a replica that does not serve
   * before it ran), so sending it again is safe. Absent when the outcome is unknown. */
  notApplied?: true;
  /** Unavailable: the router already sent the op again while its replicated slice had no serving leader, for as
   * long as its bounds allow (FAILOVER_RETRIES_MAX tries within FAILOVER_RETRY_MS_MAX), and gave up. A caller above
   * the router passes it on (callerMayRetry): asking again at once would multiply the router's wait. */
  routerRetried?: true;
  /** WrongOwner, between a slice node and a router only: the epoch the node was at when it refused the op's batch for
   * its epoch (BatchError's own field, node protocol 26; absent when a worker refused an op on a slice it does not own
   * at the batch's epoch). The Router waits for it (shared/wrong-owner.ts wrongOwnerWait); what it sends on after its
   * tries is an error of its own, without it. */
  nodeEpoch?: number;
}

/** Whether `err` says that its op was not applied (details.notApplied), so that it may be sent again. Takes what it
 * reads of the error (a node's result carries both, and the seeded simulation asks without building an error). */
export function wasNotApplied(err: Pick<KeysliceError, 'code' | 'details'>): boolean {
  return err.code === 'Unavailable' && err.details?.notApplied === true;
}

export class KeysliceError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails | undefined;
  constructor(code: ErrorCode, message: string, details?: ErrorDetails) {
    super(message);
    this.name = 'KeysliceError';
    this.code = code;
    this.details = details;
  }
  /** The old item of a ConditionalCheckFailed that asked for it; undefined otherwise. */
  get item(): Item | null | undefined {
    return this.details?.item;
  }
  get status(): number {
    return ERROR_CODES[this.code].status;
  }
  get retryable(): boolean {
    return ERROR_CODES[this.code].retryable;
  }
  /** Whether the router retried it for as long as its bounds allow (details.routerRetried). */
  get routerRetried(): boolean {
    return this.details?.routerRetried === true;
  }
}

/** Whether a caller above the Router (the TypeScript client's write resend, `keyslice export` and import, and the
 * DynamoDB endpoint's choice of an error that SDKs retry: dynamodb/errors.ts) may send a request again after `err`:
 * a retryable error, except one the Router already retried for as long as its bounds allow, since asking again there
 * would multiply them (the caller's tries times the Router's): WrongOwner, which the Router alone retries
 * (shared/wrong-owner.ts; the client sends it once to each other router address instead), and an Unavailable of a
 * replicated slice whose failover outlasted the Router's wait (routerRetried). What is left to a caller is
 * ThroughputExceeded, and an Unavailable the Router does not wait out: a slice of one replica whose node is down (no
 * failover to wait for), a lost connection to the router itself. Whether sending it again is safe is the caller's to
 * judge as well: a read or a whole item's put is; another write only if it was not applied (wasNotApplied) or a
 * replicated slice remembers its idempotency id. */
export function callerMayRetry(err: { code: ErrorCode; retryable: boolean; routerRetried?: boolean }): boolean {
  return err.retryable && err.code !== 'WrongOwner' && err.routerRetried !== true;
}

/** Any thrown value as a KeysliceError: unexpected ones become Internal. */
export function toKeysliceError(err: unknown): KeysliceError {
  if (err instanceof KeysliceError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new KeysliceError('Internal', message);
}

/** A broken invariant is a bug: fail loudly, never return a typed error for it. */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`invariant broken: ${message}`);
}

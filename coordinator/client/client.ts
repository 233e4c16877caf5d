// The TypeScript client: WebSockets to a coordinator or to several routers, requests
// pipelined by id and spread over the connections; the requests made in one turn of
// the event loop leave in one frame per connection. Used by the tests, the bench
// and the README. Errors arrive as KeysliceError with a code.
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import type {
  EvenDistribution,
  Idempotent,
  ItemFailure,
  KeyColumns,
  KeyRef,
  OperationName,
  ProjectionOptions,
  ReadOptions,
  Request,
  Response,
  ReturnValues,
  TableDescription,
  WriteCondition,
} from '../../shared/api.js';
import { assert, callerMayRetry, KeysliceError, isErrorCode, wasNotApplied, type ErrorDetails } from '../../shared/errors.js';
import { CLIENT_RANGE_PAGES_MAX_DEFAULT, IDEMPOTENCY_WINDOW_MS } from '../../shared/limits.js';
import { backoffMs } from '../../shared/timeout.js';
import { CLIENT_SUBPROTOCOL, decodeClientResponses, encodeClientFrame, RESULT_OK, type ClientRequestFrame, type ClientResponseFrame } from '../../shared/protocol.js';
import type { NumberValue } from '../../shared/decimal.js';
import type { Item } from '../../shared/values.js';

export interface ClientOptions {
  /** A request with no answer after this long fails with Unavailable. */
  requestTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** The cluster's client token, if it has one (sent as `Authorization: Bearer`). */
  token?: string;
  /** WebSocket connections to open, spread over the addresses in turn (default: one per address). */
  connections?: number;
  /** How many more times a write (PutItem, UpdateItem, DeleteItem, BatchWrite) is sent again, on the next
   * connection, within IDEMPOTENCY_WINDOW_MS of its first copy (default 0: never), after: a lost connection to the
   * router or no answer within requestTimeoutMs (Unavailable made here: the router's answer was lost, so the
   * write may have been applied); ThroughputExceeded; an Unavailable the router answered without waiting for a
   * failover only if it was not applied (`details.notApplied`: a slice of one replica whose node is down). Not
   * WrongOwner (it goes to another router address instead, if there is one: requestOnce), nor an Unavailable
   * whose failover outlasted the router's wait (`details.routerRetried`): the router already sent it again for as
   * long as its bounds allow (errors.ts callerMayRetry). Each such write
   * carries an idempotency id (its own `idempotencyId`, or a random UUID), the same in every copy, so that a
   * replicated slice applies it at most once (docs/replication.md, "A client's write sent twice"). Turn it on for
   * clusters whose slices are replicated (R >= 2): a slice of one replica keeps no ids, and a copy sent after a
   * lost connection may be applied twice there. Keep requestTimeoutMs longer than the router's wait for a
   * failover (FAILOVER_RETRY_MS_MAX), or each copy that times out adds one more to the router's. */
  writeRetries?: number;
  /** false: frames go with the zero mask, which the router's WebSocket library does not XOR off (it unmasks every
   * byte in JavaScript: without that, a router's CPU per PutItem at 256 in flight went 12.7 -> 10.8 µs,
   * bench/PROFILE.md). RFC 6455 requires a client to mask with an unpredictable key, so this is outside the RFC:
   * use it only where no proxy or cache sits between the client and the routers. The random mask (the default,
   * true) keeps a payload whose bytes someone else chose, an item's value, from reading as HTTP requests to an
   * intermediary that does not understand WebSocket (cache poisoning, RFC 6455 10.3). The links between routers and slice nodes use the zero mask (they carry the cluster
   * secret). */
  maskFrames?: boolean;
}

/** `take`: called instead of `resolve` with the answer as it is decoded, before anything else sees it; it settles the
 * request itself (requestOnce: forEachItemPage's page given to its callback, the promise answering its count, so
 * that a promise that lived long enough to be promoted does not keep the page alive: bench/PROFILE.md). */
type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; take?: (answer: unknown) => void };

/** What forEachItemPage answers once its last page has been handed to its callback. */
export interface ItemPagesRead {
  /** Items handed to the callback, over all pages. */
  items: number;
  /** Pages handed to the callback (GetItems requests answered). */
  pages: number;
  /** Stored items the slices read for those pages, a filter's rejects included (GetItems' `examined`, summed). */
  examined: number;
  /** Present when the call stopped at `maxPages` and more items may follow: a GetItems (or another forEachItemPage)
   * with this marker goes on from there. Absent when the range or scan was read to its end. */
  marker?: string;
}

/** Called with each page of a forEachItemPage in order, as soon as it is decoded; `index` counts pages from 0. The
 * next page is asked for after it returns (and, if it returns a promise, after that promise fulfils). */
export type ItemPageCallback = (page: Response<'GetItems'>, index: number) => void | PromiseLike<void>;

/** Whether `value` is a promise or another thenable (what `await` waits for). */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && 'then' in value && typeof value.then === 'function';
}

/** A lost connection is opened again after this long, doubling up to the max. */
const RECONNECT_DELAY_MS_MIN = 100;
const RECONNECT_DELAY_MS_MAX = 2_000;
/** A write sent again (writeRetries) waits this long first, doubling up to the max. */
const WRITE_RETRY_DELAY_MS_MIN = 50;
const WRITE_RETRY_DELAY_MS_MAX = 1_000;
/** The operations that writeRetries sends again, with an idempotency id. */
const RETRIED_WRITES: ReadonlySet<OperationName> = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWrite']);
/** The errors a router answered, as against those made here (a lost connection, no answer in time). */
const answeredByRouter = new WeakSet<KeysliceError>();

/** The addresses that refused a request WrongOwner after their own tries (each copy of it, client.ts requestOnce), and
 * until when (its first copy's time out, monotonic) a refused copy is sent on to another; 0 before its first copy. */
interface RefusedBy {
  tried: string[];
  until: number;
}

/** Whether writeRetries sends a write again after `err` (ClientOptions.writeRetries). */
function resendable(err: unknown): boolean {
  if (!(err instanceof KeysliceError) || !callerMayRetry(err)) return false;
  // The router answers Unavailable without waiting only for a slice of one replica: there a copy of a write whose
  // outcome is unknown may be applied twice (no ids are kept), so only one that was not applied goes again.
  return err.code !== 'Unavailable' || !answeredByRouter.has(err) || wasNotApplied(err);
}

/** One WebSocket to one coordinator or router, its requests in flight by id. */
class Connection {
  private outbox: ClientRequestFrame[] = [];
  readonly pending = new Map<number, Pending>();

  constructor(
    readonly url: string,
    readonly ws: WebSocket,
    private readonly onLost: (c: Connection) => void,
    private readonly onFrameError: (err: KeysliceError) => void,
  ) {
    ws.on('message', (data: Buffer) => this.onMessage(data));
    ws.on('close', () => {
      this.failAll(new KeysliceError('Unavailable', `connection to ${url} closed; a write in flight may or may not have been applied`));
      this.onLost(this);
    });
    ws.on('error', () => {});
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(id: number, op: OperationName, payload: Record<string, unknown>, p: Pending): void {
    this.pending.set(id, p);
    if (this.outbox.push([id, op, payload]) === 1) setImmediate(() => this.flush());
  }

  forget(id: number): void {
    this.pending.delete(id);
  }

  /** Sends the requests made in this turn of the event loop as one frame. */
  private flush(): void {
    const out = this.outbox;
    this.outbox = [];
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(encodeClientFrame(out.length === 1 ? out[0] : out));
  }

  private onMessage(data: Buffer): void {
    let frames: ClientResponseFrame[];
    try {
      frames = decodeClientResponses(data);
    } catch (err) {
      // A server that sends what we cannot read is not one to keep talking to.
      this.failAll(new KeysliceError('Unavailable', `${this.url} sent a malformed frame: ${(err as Error).message}`));
      this.ws.terminate();
      return;
    }
    for (const frame of frames) this.settle(frame);
  }

  private settle(frame: ClientResponseFrame): void {
    const p = this.pending.get(frame[0]);
    const error = () => {
      const err = new KeysliceError(isErrorCode(frame[2]) ? frame[2] : 'Internal', String(frame[3]), frame[4] as ErrorDetails | undefined);
      answeredByRouter.add(err);
      return err;
    };
    if (p === undefined) {
      if (frame[1] !== RESULT_OK) this.onFrameError(error());
      return;
    }
    this.pending.delete(frame[0]);
    clearTimeout(p.timer);
    if (frame[1] !== RESULT_OK) return p.reject(error());
    if (p.take !== undefined) return p.take(frame[2]);
    p.resolve(frame[2]);
  }

  private failAll(err: KeysliceError): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
  }
}

/** Opens one client WebSocket; a refused handshake (401: no or wrong token) rejects with the error it carries. */
function openSocket(url: string, options: ClientOptions): Promise<WebSocket> {
  const wsUrl = url.startsWith('http') ? url.replace(/^http/, 'ws').replace(/\/?$/, '/ws') : url;
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    const ws = new WebSocket(wsUrl, CLIENT_SUBPROTOCOL, { handshakeTimeout: options.connectTimeoutMs ?? 5000, headers, ...(options.maskFrames === false ? { generateMask: () => {} } : {}) });
    ws.binaryType = 'nodebuffer';
    ws.once('open', () => resolve(ws));
    ws.once('error', (err) => reject(new KeysliceError('Unavailable', `cannot connect to ${wsUrl}: ${err.message}`)));
    // A refused handshake (401: no or wrong token) carries the error as JSON, as over HTTP.
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let code: unknown = 'Unavailable';
        let message = `the coordinator refused the connection: HTTP ${res.statusCode}`;
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
          code = body.error?.code;
          message = String(body.error?.message ?? message);
        } catch {
          // not JSON: keep the status line
        }
        reject(new KeysliceError(isErrorCode(code) ? code : 'Unavailable', message));
        ws.terminate();
      });
    });
  });
}

/**
 * A client of one coordinator or of several routers: `connections` WebSockets spread
 * over the addresses given, requests sent on them in turn. A connection that is lost
 * fails its requests in flight (Unavailable: a write may or may not have been applied)
 * and is opened again in the background; meanwhile requests go to the others. A request
 * that a router refused WrongOwner goes once to each other router address (requestOnce).
 */
export class KeysliceClient {
  private nextId = 1;
  private next = 0;
  private closed = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly conns: Connection[],
    private readonly options: ClientOptions,
  ) {}

  /** Connects to `ws://host:port/ws` (an `http://host:port` address works too), or to each of
   * several routers. Fails if no connection can be opened; the others are retried later. */
  static async connect(urls: string | string[], options: ClientOptions = {}): Promise<KeysliceClient> {
    const list = Array.isArray(urls) ? urls : [urls];
    if (list.length === 0) throw new KeysliceError('ValidationError', 'KeysliceClient.connect needs at least one address');
    const count = Math.max(1, options.connections ?? list.length);
    const targets = Array.from({ length: count }, (_, i) => list[i % list.length]);
    const opened = await Promise.allSettled(targets.map((u) => openSocket(u, options)));
    const firstError = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected')?.reason;
    // No connection, or a refused token (not a router that is down): fail rather than serve with fewer.
    if (opened.every((o) => o.status === 'rejected') || (firstError instanceof KeysliceError && firstError.code === 'Unauthorized')) {
      for (const o of opened) if (o.status === 'fulfilled') o.value.terminate();
      throw firstError;
    }
    const client = new KeysliceClient([], options);
    targets.forEach((u, i) => {
      const o = opened[i];
      if (o.status === 'fulfilled') client.conns.push(client.wrap(u, o.value));
      else client.reconnect(u, 0);
    });
    return client;
  }

  /** The addresses of the connections open now (one entry per connection). */
  get connectedUrls(): string[] {
    return this.conns.filter((c) => c.open).map((c) => c.url);
  }

  /** Any operation by name: the typed methods below are shorthands for this. A write is sent again as
   * ClientOptions.writeRetries says. */
  request<Op extends OperationName>(op: Op, payload: Request<Op>): Promise<Response<Op>> {
    const retries = this.options.writeRetries ?? 0;
    if (retries <= 0 || !RETRIED_WRITES.has(op)) return this.requestOnce(op, payload);
    if ((payload as { idempotencyId?: string }).idempotencyId !== undefined) return this.resending(op, payload, retries);
    // A copy with the id set after it: `{ ...payload, idempotencyId }` (a spread with a property after it) took
    // V8's slow path, 2.4 µs a write against 0.3 µs this way (bench/PROFILE.md).
    const named: Request<Op> & { idempotencyId?: string } = Object.assign({}, payload);
    named.idempotencyId = randomUUID();
    return this.resending(op, named, retries);
  }

  /** Sends a write until it is answered, or fails with an error that is not resendable, or `retries` more copies
   * have been sent, or IDEMPOTENCY_WINDOW_MS has passed since the first (a later copy could be applied again:
   * the slice may have forgotten the first's id). Every copy carries the same idempotency id. */
  private async resending<Op extends OperationName>(op: Op, payload: Request<Op>, retries: number): Promise<Response<Op>> {
    // Monotonic: a wall clock set back must not stretch the window in which a copy is applied at most once.
    const started = performance.now();
    // One for the whole request: a copy is never sent to an address that refused an earlier one WrongOwner (its tries
    // were spent), so that the client's resends do not multiply the routers' tries (requestOnce).
    const refusedBy: RefusedBy = { tried: [], until: 0 };
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.requestOnce(op, payload, refusedBy);
      } catch (err) {
        const delay = backoffMs(attempt, WRITE_RETRY_DELAY_MS_MIN, WRITE_RETRY_DELAY_MS_MAX);
        if (!resendable(err) || attempt >= retries || performance.now() + delay - started >= IDEMPOTENCY_WINDOW_MS) throw err;
        // Every address open refused it WrongOwner: `err`, the last copy's failure, is the request's.
        if (refusedBy.tried.length > 0 && this.pick(refusedBy.tried, false) === null) throw err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  /** Sends a request on the next open connection. One that a router refused WrongOwner (its own tries were spent:
   * its copy of the map lags for good, as when it is cut off from its coordinator, or the slice's owner kept
   * changing) is sent again on a connection to another router address, once per address, within what is left of
   * requestTimeoutMs since the first copy: nothing of it was applied (shared/wrong-owner.ts), and another router may
   * have the newer map. Only another address: connections to one address may reach the same router, and the routers
   * that share one port (`--routers N`) share their host's coordinator, so they lag together. So a request is asked
   * of each router address at most once, and its tries are at most the routers' own tries times the addresses,
   * never the client's tries times theirs, whether or not the client sends a write again (resending: `refusedBy` is
   * the request's, kept across its copies, and so is the time within which it is sent on). `copyUntil`: when the copy
   * that a router refused times out (a copy sent on keeps it; a new copy gets requestTimeoutMs of its own). `take`:
   * Pending.take, for the copy that is answered. */
  private requestOnce<Op extends OperationName, R = Response<Op>>(
    op: Op,
    payload: Request<Op>,
    refusedBy: RefusedBy | null = null,
    copyUntil = 0,
    take?: (answer: Response<Op>) => R,
  ): Promise<R> {
    // (null: a request not sent again; its RefusedBy is made only if a router refuses it, not for every request.)
    const conn = this.pick(refusedBy?.tried);
    if (conn === null) return Promise.reject(new KeysliceError('Unavailable', 'the client is not connected'));
    const id = this.nextId++;
    const timeoutMs = this.options.requestTimeoutMs ?? 30_000;
    // Monotonic: a wall clock set back must not stretch the request's time.
    const now = performance.now();
    const until = copyUntil === 0 ? now + timeoutMs : copyUntil;
    if (refusedBy !== null && refusedBy.until === 0) refusedBy.until = until; // the request's first copy
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        conn.forget(id);
        reject(new KeysliceError('Unavailable', `${op} got no answer within ${timeoutMs} ms`));
      }, until - now);
      const refused = (err: Error) => {
        if (!(err instanceof KeysliceError) || err.code !== 'WrongOwner' || !answeredByRouter.has(err)) return reject(err);
        const by = refusedBy ?? { tried: [], until };
        if (performance.now() >= by.until) return reject(err);
        assert(!by.tried.includes(conn.url), 'no address is asked again once it refused a request WrongOwner');
        by.tried.push(conn.url);
        if (this.pick(by.tried, false) === null) return reject(err);
        this.requestOnce(op, payload, by, until, take).then(resolve, reject);
      };
      const pending: Pending = { resolve: resolve as (v: unknown) => void, reject: refused, timer };
      if (take !== undefined) {
        pending.take = (answer) => {
          // The caller's code runs here, inside the connection's message handler (Connection.settle), before the
          // answers after this one in the frame are settled: what it throws fails this request only, rejected as it
          // is, and never by `refused`, which would send the request again (and call the caller's code again) if what
          // it threw were a router's WrongOwner that it had caught from another request.
          let taken: R;
          try {
            taken = take(answer as Response<Op>);
          } catch (err) {
            return reject(err);
          }
          resolve(taken);
        };
      }
      conn.send(id, op, payload as Record<string, unknown>, pending);
    });
  }

  /** Sends raw bytes as one frame (for protocol tests); answers arrive as errors with id -1 or the frame's id. */
  sendRaw(bytes: Uint8Array): void {
    this.pick()?.ws.send(bytes);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all(
      this.conns.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.ws.readyState === WebSocket.CLOSED) return resolve();
            c.ws.once('close', () => resolve());
            c.ws.close();
          }),
      ),
    );
  }

  /** The next open connection in turn to an address not in `tried` (none, by default), or null; `take`: false only
   * looks. */
  private pick(tried: readonly string[] = [], take = true): Connection | null {
    for (let i = 0; i < this.conns.length; i++) {
      const c = this.conns[(this.next + i) % this.conns.length];
      if (!c.open || tried.includes(c.url)) continue;
      if (take) this.next += i + 1;
      return c;
    }
    return null;
  }

  private wrap(url: string, ws: WebSocket): Connection {
    return new Connection(
      url,
      ws,
      (lost) => {
        const i = this.conns.indexOf(lost);
        if (i >= 0) this.conns.splice(i, 1);
        if (!this.closed) this.reconnect(url, 0);
      },
      (err) => this.onFrameError?.(err),
    );
  }

  /** Opens a connection to `url` again after a wait of RECONNECT_DELAY_MS_MIN, doubled for each of the `failures`
   * tries that failed since the connection was lost, up to RECONNECT_DELAY_MS_MAX. */
  private reconnect(url: string, failures: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.closed) return;
      openSocket(url, this.options).then(
        (ws) => {
          if (this.closed) return void ws.terminate();
          this.conns.push(this.wrap(url, ws));
        },
        () => this.reconnect(url, failures + 1),
      );
    }, backoffMs(failures, RECONNECT_DELAY_MS_MIN, RECONNECT_DELAY_MS_MAX));
    timer.unref();
    this.timers.add(timer);
  }

  /** Called with errors that answer no pending request (frames the server could not read). */
  onFrameError?: (err: KeysliceError) => void;

  // ---- typed shorthands -------------------------------------------------

  async createTable(table: string, shardingKey: KeyColumns, sortingKey?: KeyColumns, options: { evenDistribution?: Partial<EvenDistribution> } = {}): Promise<TableDescription> {
    return (await this.request('CreateTable', { table, shardingKey, sortingKey: sortingKey ?? null, ...options })).table;
  }
  async describeTable(table: string): Promise<TableDescription> {
    return (await this.request('DescribeTable', { table })).table;
  }
  async listTables(): Promise<string[]> {
    return (await this.request('ListTables', {})).tables;
  }
  async deleteTable(table: string): Promise<TableDescription> {
    return (await this.request('DeleteTable', { table })).table;
  }
  /** With `returnValues: 'old'`, answers the item it replaced (null: none); a false `condition` throws ConditionalCheckFailed. */
  async putItem(table: string, item: Item, options: WriteCondition & Idempotent & { returnValues?: 'none' | 'old' } = {}): Promise<Item | null | undefined> {
    return (await this.request('PutItem', { table, item, ...options })).item;
  }
  /** `projection`: top-level attribute names, or `{ projection: 'a.b[1], #n', names }`; `{ consistentRead: false }`
   * (alone or with a projection) lets any replica answer (ReadOptions). */
  async getItem(table: string, key: KeyRef, projection?: string[] | (ProjectionOptions & ReadOptions)): Promise<Item | null> {
    const options = projection === undefined ? {} : Array.isArray(projection) ? { attributes: projection } : projection;
    return (await this.request('GetItem', { table, key, ...options })).item;
  }
  /** Structured (`set`, `remove`, `add`) or an expression (`update`, with `names` and `values`), optionally with a `condition`. */
  async updateItem(
    table: string,
    key: KeyRef,
    update: { update?: string; set?: Item; remove?: string[]; add?: Record<string, NumberValue>; returnValues?: ReturnValues } & WriteCondition & Idempotent,
  ): Promise<Item | null | undefined> {
    return (await this.request('UpdateItem', { table, key, ...update })).item;
  }
  async deleteItem(table: string, key: KeyRef, options: WriteCondition & Idempotent = {}): Promise<boolean> {
    return (await this.request('DeleteItem', { table, key, ...options })).deleted;
  }
  getItems(request: Request<'GetItems'>): Promise<Response<'GetItems'>> {
    return this.request('GetItems', request);
  }
  /** Every page of a GetItems, followed by marker, in one array. Bounded by `maxPages` (throws past it; below 1,
   * fractional or not finite: ValidationError, as forEachItemPage's, where an older client read ceil(maxPages)
   * pages or, for Infinity, had no bound). A page is
   * asked once: the router asks the nodes again while a slice changes owners (bounded in count and time), and a page
   * that still fails ends the call with that error (WrongOwner once the router's tries are spent). For a range too
   * large to hold, or read often, forEachItemPage. */
  async getAllItems(request: Omit<Request<'GetItems'>, 'marker'>, maxPages = CLIENT_RANGE_PAGES_MAX_DEFAULT): Promise<Item[]> {
    const out: Item[] = [];
    const read = await this.forEachItemPage(request, (page) => void out.push(...page.items), { maxPages });
    if (read.marker !== undefined) throw new Error(`getAllItems stopped after ${maxPages} pages`);
    return out;
  }
  /** The pages of a GetItems handed to `onPage` one by one, in order, each as soon as its answer is decoded, following
   * the markers from `request.marker` (absent: the start) to the end of the range or scan, or for `maxPages` pages
   * (default CLIENT_RANGE_PAGES_MAX_DEFAULT); the answer counts what was read and, if it stopped at `maxPages`, the
   * marker to go on from. `{ maxPages: 1 }` reads what one getItems reads. Each page is asked as getItems asks it
   * (and as getAllItems asks its pages: an error ends the call with that error; nothing is asked again here).
   *
   * Why beside getItems: getItems' promise is fulfilled with its page, and a promise that waited long enough to be
   * promoted to the old generation keeps that page reachable to the young collector until the next full collection,
   * after the caller dropped both; at 50-256 ranges in flight that was about a third of the client's CPU per range
   * (bench/PROFILE.md). Here the page goes to `onPage` and nowhere else: its promises answer counts. So keep a page
   * only if you need it, and let it go when `onPage` returns.
   *
   * If `onPage` throws (or its promise rejects), no further page is asked and the call rejects with that error; the
   * connection and the other requests on it go on as before. `onPage` runs inside the connection's message handler,
   * before the answers that came after its page in the same frame are settled: its time is added to theirs (getItems'
   * caller runs after them), and a slow `onPage` stalls every answer on that connection. Keep it short: waiting
   * (I/O) that must end before the next page belongs in the promise it returns, which holds back only this call.
   * A page is asked with the client's requestTimeoutMs, as getItems asks it; the time `onPage` or its promise takes
   * is not bounded here. `maxPages` below 1, fractional or not finite: ValidationError. */
  async forEachItemPage(request: Request<'GetItems'>, onPage: ItemPageCallback, options: { maxPages?: number } = {}): Promise<ItemPagesRead> {
    const maxPages = options.maxPages ?? CLIENT_RANGE_PAGES_MAX_DEFAULT;
    if (!Number.isSafeInteger(maxPages) || maxPages < 1) throw new KeysliceError('ValidationError', `maxPages must be a whole number of at least 1, got ${maxPages}`);
    const read: ItemPagesRead = { items: 0, pages: 0, examined: 0 };
    let marker = request.marker;
    while (read.pages < maxPages) {
      const index = read.pages;
      const got = await this.requestOnce('GetItems', marker === request.marker ? request : { ...request, marker }, null, 0, (page) => {
        const returned: unknown = onPage(page, index);
        // (A JavaScript caller's callback may return anything, the page itself even: only a thenable is kept, and
        // waited for.)
        const after = isThenable(returned) ? returned : undefined;
        // Handled now, so that one rejected before the await below reaches it is not reported as unhandled.
        after?.then(undefined, () => {});
        // Only these leave the message handler: the promise below must not hold the page.
        return { items: page.items.length, examined: page.examined, marker: page.marker, after };
      });
      if (got.after !== undefined) await got.after;
      read.pages++;
      read.items += got.items;
      read.examined += got.examined;
      if (got.marker === undefined) return read;
      marker = got.marker;
    }
    read.marker = marker;
    return read;
  }
  /** Answers the writes that failed at run time (empty when all were applied); the others were applied. */
  async batchWrite(table: string, writes: { puts?: Item[]; deletes?: KeyRef[] } & Idempotent): Promise<ItemFailure[]> {
    return (await this.request('BatchWrite', { table, ...writes })).failures;
  }
  /** Items in the order of `keys` (null: none, or failed), and the keys that failed at run time. */
  async batchGet(table: string, keys: KeyRef[], projection?: string[] | (ProjectionOptions & ReadOptions)): Promise<Response<'BatchGet'>> {
    const options = projection === undefined ? {} : Array.isArray(projection) ? { attributes: projection } : projection;
    return this.request('BatchGet', { table, keys, ...options });
  }

  describeSlices(table: string): Promise<Response<'DescribeSlices'>> {
    return this.request('DescribeSlices', { table });
  }
}

// The TypeScript client: one WebSocket, requests pipelined by id; the requests made
// in one turn of the event loop leave in one frame. Used by the tests, the bench
// and the README. Errors arrive as KeysliceError with a code.
import WebSocket from 'ws';
import type {
  EvenDistribution,
  ItemFailure,
  KeyColumns,
  KeyRef,
  OperationName,
  ProjectionOptions,
  Request,
  Response,
  ReturnValues,
  TableDescription,
  WriteCondition,
} from '../../shared/api.js';
import { KeysliceError, isErrorCode, type ErrorDetails } from '../../shared/errors.js';
import { CLIENT_SUBPROTOCOL, decodeClientResponses, encodeClientFrame, RESULT_OK, type ClientRequestFrame, type ClientResponseFrame } from '../../shared/protocol.js';
import type { Item } from '../../shared/values.js';

export interface ClientOptions {
  /** A request with no answer after this long fails with Unavailable. */
  requestTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** The cluster's client token, if it has one (sent as `Authorization: Bearer`). */
  token?: string;
}

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

export class KeysliceClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private outbox: ClientRequestFrame[] = [];

  private constructor(
    private readonly ws: WebSocket,
    private readonly requestTimeoutMs: number,
  ) {
    ws.on('message', (data: Buffer) => this.onMessage(data));
    ws.on('close', () => this.failAll(new KeysliceError('Unavailable', 'connection to the coordinator closed')));
    ws.on('error', () => {});
  }

  /** Connects to `ws://host:port/ws` (an `http://host:port` address works too). */
  static connect(url: string, options: ClientOptions = {}): Promise<KeysliceClient> {
    const wsUrl = url.startsWith('http') ? url.replace(/^http/, 'ws').replace(/\/?$/, '/ws') : url;
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
      const ws = new WebSocket(wsUrl, CLIENT_SUBPROTOCOL, { handshakeTimeout: options.connectTimeoutMs ?? 5000, headers });
      ws.binaryType = 'nodebuffer';
      ws.once('open', () => resolve(new KeysliceClient(ws, options.requestTimeoutMs ?? 30_000)));
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

  /** Any operation by name: the typed methods below are shorthands for this. */
  request<Op extends OperationName>(op: Op, payload: Request<Op>): Promise<Response<Op>> {
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new KeysliceError('Unavailable', 'the client is not connected'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new KeysliceError('Unavailable', `${op} got no answer within ${this.requestTimeoutMs} ms`));
      }, this.requestTimeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      if (this.outbox.push([id, op, payload as Record<string, unknown>]) === 1) setImmediate(() => this.flush());
    });
  }

  /** Sends the requests made in this turn of the event loop as one frame. */
  private flush(): void {
    const out = this.outbox;
    this.outbox = [];
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(encodeClientFrame(out.length === 1 ? out[0] : out));
  }

  /** Sends raw bytes as one frame (for protocol tests); answers arrive as errors with id -1 or the frame's id. */
  sendRaw(bytes: Uint8Array): void {
    this.ws.send(bytes);
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) return resolve();
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }

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
  async putItem(table: string, item: Item, options: WriteCondition & { returnValues?: 'none' | 'old' } = {}): Promise<Item | null | undefined> {
    return (await this.request('PutItem', { table, item, ...options })).item;
  }
  /** `projection`: top-level attribute names, or `{ projection: 'a.b[1], #n', names }`. */
  async getItem(table: string, key: KeyRef, projection?: string[] | ProjectionOptions): Promise<Item | null> {
    const options = projection === undefined ? {} : Array.isArray(projection) ? { attributes: projection } : projection;
    return (await this.request('GetItem', { table, key, ...options })).item;
  }
  /** Structured (`set`, `remove`, `add`) or an expression (`update`, with `names` and `values`), optionally with a `condition`. */
  async updateItem(
    table: string,
    key: KeyRef,
    update: { update?: string; set?: Item; remove?: string[]; add?: Record<string, number>; returnValues?: ReturnValues } & WriteCondition,
  ): Promise<Item | null | undefined> {
    return (await this.request('UpdateItem', { table, key, ...update })).item;
  }
  async deleteItem(table: string, key: KeyRef, options: WriteCondition = {}): Promise<boolean> {
    return (await this.request('DeleteItem', { table, key, ...options })).deleted;
  }
  getItems(request: Request<'GetItems'>): Promise<Response<'GetItems'>> {
    return this.request('GetItems', request);
  }
  /** Every page of a GetItems, followed by marker. Bounded by `maxPages`. */
  async getAllItems(
    request: Omit<Request<'GetItems'>, 'marker'>,
    maxPages = 100_000,
  ): Promise<Item[]> {
    const out: Item[] = [];
    let marker: string | undefined;
    for (let page = 0; page < maxPages; page++) {
      const res = await this.getItems(marker === undefined ? request : { ...request, marker });
      out.push(...res.items);
      if (res.marker === undefined) return out;
      marker = res.marker;
    }
    throw new Error(`getAllItems stopped after ${maxPages} pages`);
  }
  /** Answers the writes that failed at run time (empty when all were applied); the others were applied. */
  async batchWrite(table: string, writes: { puts?: Item[]; deletes?: KeyRef[] }): Promise<ItemFailure[]> {
    return (await this.request('BatchWrite', { table, ...writes })).failures;
  }
  /** Items in the order of `keys` (null: none, or failed), and the keys that failed at run time. */
  async batchGet(table: string, keys: KeyRef[], projection?: string[] | ProjectionOptions): Promise<Response<'BatchGet'>> {
    const options = projection === undefined ? {} : Array.isArray(projection) ? { attributes: projection } : projection;
    return this.request('BatchGet', { table, keys, ...options });
  }

  describeSlices(table: string): Promise<Response<'DescribeSlices'>> {
    return this.request('DescribeSlices', { table });
  }

  private onMessage(data: Buffer): void {
    let frames: ClientResponseFrame[];
    try {
      frames = decodeClientResponses(data);
    } catch (err) {
      // A server that sends what we cannot read is not one to keep talking to.
      this.failAll(new KeysliceError('Unavailable', `the coordinator sent a malformed frame: ${(err as Error).message}`));
      this.ws.terminate();
      return;
    }
    for (const frame of frames) this.settle(frame);
  }

  private settle(frame: ClientResponseFrame): void {
    const p = this.pending.get(frame[0]);
    const error = () => new KeysliceError(isErrorCode(frame[2]) ? frame[2] : 'Internal', String(frame[3]), frame[4] as ErrorDetails | undefined);
    if (p === undefined) {
      if (frame[1] !== RESULT_OK) this.onFrameError?.(error());
      return;
    }
    this.pending.delete(frame[0]);
    clearTimeout(p.timer);
    if (frame[1] === RESULT_OK) p.resolve(frame[2]);
    else p.reject(error());
  }

  /** Called with errors that answer no pending request (frames the server could not read). */
  onFrameError?: (err: KeysliceError) => void;

  private failAll(err: KeysliceError): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
  }
}

// The DynamoDB-compatible endpoint on the coordinator's HTTP port: `POST /`
// with `X-Amz-Target: DynamoDB_20120810.<Operation>` and DynamoDB's JSON
// (application/x-amz-json-1.0), answered with DynamoDB's JSON, status codes,
// `__type` and messages, so that the AWS SDKs, the AWS CLI and DynamoDB tools
// work unchanged. GET and HEAD of / belong to the studio (studio/routes.ts),
// which takes them before this endpoint is asked. One request is: read the body
// (at most REQUEST_BYTES_MAX, with the native API's early 413), check the
// signature, find the operation, parse the JSON, run the handler on the native
// operations, answer. Any failure is a DynamoDB error for that request alone;
// the process keeps serving.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { crc32 } from 'node:zlib';
import { bearerToken, secretMatches } from '../../shared/auth.js';
import { assert } from '../../shared/errors.js';
import { DYNAMODB_REQUEST_ID_BYTES, REQUEST_BYTES_MAX } from '../../shared/limits.js';
import { isPlainObject } from '../../shared/values.js';
import { readBody, type TooLargeAnswer } from '../router/http-api.js';
import type { Operations } from '../router/operations.js';
import type { ProcessMetrics } from '../router/process-metrics.js';
import { BatchGetItem, BatchWriteItem } from './batches.js';
import type { Context, Handler } from './context.js';
import { DynamoDbError, toDynamoDbError } from './errors.js';
import { DeleteItem, GetItem, PutItem, UpdateItem } from './items.js';
import { ItemsJson } from './item-json.js';
import { Params } from './params.js';
import { Query, Scan } from './reads.js';
import { regionOf, verifySignature } from './sigv4.js';
import { TableSettingsStore } from './table-settings.js';
import * as tables from './tables.js';

export const DYNAMODB_TARGET_PREFIX = 'DynamoDB_20120810.';
/** keyslice's own operations on this endpoint, e.g. `X-Amz-Target: Keyslice.DescribeSlices`. */
export const KEYSLICE_TARGET_PREFIX = 'Keyslice.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';

const OPERATIONS: Record<string, Handler> = {
  CreateTable: tables.CreateTable,
  DescribeTable: tables.DescribeTable,
  ListTables: tables.ListTables,
  DeleteTable: tables.DeleteTable,
  UpdateTable: tables.UpdateTable,
  TagResource: tables.TagResource,
  UntagResource: tables.UntagResource,
  ListTagsOfResource: tables.ListTagsOfResource,
  DescribeTimeToLive: tables.DescribeTimeToLive,
  DescribeContinuousBackups: tables.DescribeContinuousBackups,
  DescribeLimits: tables.DescribeLimits,
  DescribeEndpoints: tables.DescribeEndpoints,
  PutItem,
  GetItem,
  UpdateItem,
  DeleteItem,
  Query,
  Scan,
  BatchGetItem,
  BatchWriteItem,
};

/** The operations that read or change tables (and their DynamoDB-only settings, kept in the
 * coordinator's data folder): a router forwards them to the coordinator. */
export const TABLE_OPERATIONS: ReadonlySet<string> = new Set(Object.entries(tables).filter(([name]) => name in OPERATIONS).map(([name]) => name));

const KEYSLICE_OPERATIONS: Record<string, Handler> = {
  DescribeSlices: tables.DescribeSlices,
};

/** DynamoDB operations that exist but that keyslice does not offer yet: refused with a reason. */
const NOT_YET: Record<string, string> = {
  TransactWriteItems: 'transactions',
  TransactGetItems: 'transactions',
  ExecuteStatement: 'PartiQL',
  BatchExecuteStatement: 'PartiQL',
  ExecuteTransaction: 'PartiQL',
  UpdateTimeToLive: 'time to live (TTL)',
  CreateBackup: 'backups',
  CreateGlobalTable: 'global tables',
};

export interface DynamoDbOptions {
  /** The coordinator's data folder (DynamoDB's table settings are kept there); null: in memory only. */
  dataDir: string | null;
  /** The settings of dataDir opened already (the coordinator checks every file of its folder before it changes any);
   * absent: opened here. */
  settings?: TableSettingsStore;
  /** The cluster's client token: the secret access key requests must be signed with ('' requires none). */
  token: string;
  sliceCount: number;
  /** The process's series (process-metrics.ts): Query and Scan pages by what their items were written from. Absent
   * where the endpoint runs without a process's series (bench/ddb-layer.ts drives it in-process). */
  metrics?: Pick<ProcessMetrics, 'dynamodbPage'>;
}

export class DynamoDbEndpoint {
  private readonly settings: TableSettingsStore;

  constructor(
    private readonly ops: Operations,
    private readonly options: DynamoDbOptions,
  ) {
    this.settings = options.settings ?? TableSettingsStore.open(options.dataDir);
  }

  /** The endpoint answers every request on the path "/". */
  handles(req: IncomingMessage): boolean {
    const url = req.url ?? '/';
    return url === '/' || url.startsWith('/?');
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    // The native API's body reader: an oversized body is refused early (from Content-Length
    // or once it passes the limit) and the rest is read and dropped, bounded.
    readBody(req, res, tooLarge, (raw) => {
      this.serve(req, raw).then(
        (body) => this.send(res, 200, body),
        (err) => this.sendError(res, toDynamoDbError(err)),
      );
    });
  }

  private async serve(req: IncomingMessage, raw: Buffer): Promise<Record<string, unknown>> {
    this.authenticate(req, raw);
    if (req.method !== 'POST') throw new DynamoDbError('UnknownOperationException', `DynamoDB requests are POST /, not ${req.method}`);
    const handler = handlerOf(req.headers['x-amz-target']);
    let body: unknown;
    try {
      body = raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw DynamoDbError.serialization(`The request body is not valid JSON: ${(err as Error).message}`);
    }
    if (!isPlainObject(body)) throw DynamoDbError.serialization('The request body must be a JSON object');
    const ctx: Context = {
      ops: this.ops,
      settings: this.settings,
      sliceCount: this.options.sliceCount,
      // Only ARNs (table operations) need it: item operations do not parse the Authorization header for it.
      get region() {
        return regionOf(req.headers.authorization);
      },
      host: req.headers.host ?? '127.0.0.1',
      metrics: this.options.metrics,
    };
    return handler(ctx, new Params(body));
  }

  /** With a client token, a request is signed with it (SigV4, the token as secret key) or carries it as a bearer token. */
  private authenticate(req: IncomingMessage, raw: Buffer): void {
    const token = this.options.token;
    if (token === '') return;
    const authorization = req.headers.authorization;
    if (authorization === undefined || authorization === '') throw new DynamoDbError('MissingAuthenticationTokenException', 'Request is missing Authentication Token');
    const bearer = bearerToken(authorization, undefined);
    if (bearer !== null) {
      if (!secretMatches(token, bearer)) throw new DynamoDbError('UnrecognizedClientException', 'The security token included in the request is invalid.');
      return;
    }
    verifySignature(req, raw, token, Date.now());
  }

  private send(res: ServerResponse, status: number, body: Record<string, unknown>): void {
    if (res.headersSent) return;
    if (body.Items instanceof ItemsJson) {
      const bytes = withItemsJson(body, body.Items);
      res.writeHead(status, [...answerHeaders(bytes), 'content-length', String(bytes.length)]);
      res.end(bytes);
      return;
    }
    const text = JSON.stringify(body);
    // A flat list of headers: node:http takes it as it is, without an object to walk; the
    // string body goes out in one write with the head.
    res.writeHead(status, [...answerHeaders(text), 'content-length', String(Buffer.byteLength(text))]);
    res.end(text);
  }

  private sendError(res: ServerResponse, err: DynamoDbError): void {
    if (err.exception === 'InternalServerError') console.error(`keyslice coordinator: DynamoDB endpoint: internal error: ${err.stack}`);
    this.send(res, err.status, err.body());
  }
}

/** DynamoDB's headers on an answer, as a flat list (name, value, ...): its content type, a
 * request id, and its checksum of the body (some SDKs verify it; zlib's crc32 takes the
 * string as UTF-8 without a copy of it). */
function answerHeaders(text: string | Buffer): string[] {
  return ['content-type', CONTENT_TYPE, 'x-amzn-requestid', requestId(), 'x-amz-crc32', String(crc32(text))];
}

const ITEMS_HEAD = '{"Items":';

/** An answer whose Items are written as JSON already (itemsJson, a Query's or Scan's page passed through): its
 * other fields stringified as any answer's, after them, in one buffer. */
function withItemsJson(body: Record<string, unknown>, items: ItemsJson): Buffer {
  const rest = JSON.stringify({ ...body, Items: undefined }); // "{}" or "{...}": JSON.stringify leaves undefined out
  const tail = rest.length === 2 ? '}' : `,${rest.slice(1)}`;
  const out = Buffer.allocUnsafe(ITEMS_HEAD.length + items.bytes.length + Buffer.byteLength(tail));
  let at = out.write(ITEMS_HEAD, 0, 'latin1');
  at += items.bytes.copy(out, at);
  at += out.write(tail, at, 'utf8');
  assert(at === out.length, 'an answer with written items is its head, its items and its tail');
  return out;
}

/** Random bytes for REQUEST_IDS_PER_DRAW request ids, drawn at once: one call into the
 * random source per that many answers instead of one per answer. */
const REQUEST_IDS_PER_DRAW = 64;
let idPool = Buffer.alloc(0);
let idAt = 0;

/** A request id of DYNAMODB_REQUEST_ID_BYTES random bytes (each id its own bytes), base64url, upper case as DynamoDB's. */
function requestId(): string {
  if (idAt === idPool.length) {
    idPool = randomBytes(DYNAMODB_REQUEST_ID_BYTES * REQUEST_IDS_PER_DRAW);
    idAt = 0;
  }
  const id = idPool.toString('base64url', idAt, idAt + DYNAMODB_REQUEST_ID_BYTES).toUpperCase();
  idAt += DYNAMODB_REQUEST_ID_BYTES;
  return id;
}

function tooLarge(what: string): TooLargeAnswer {
  const err = new DynamoDbError('RequestEntityTooLarge', `${what} exceeded ${REQUEST_BYTES_MAX} bytes`);
  const text = JSON.stringify(err.body());
  const headers: Record<string, string> = {};
  const list = answerHeaders(text);
  for (let i = 0; i < list.length; i += 2) headers[list[i]] = list[i + 1];
  return { status: err.status, headers, text };
}

function handlerOf(target: string | string[] | undefined): Handler {
  if (typeof target !== 'string' || target === '') {
    throw new DynamoDbError('UnknownOperationException', `Missing X-Amz-Target header; DynamoDB requests name their operation as X-Amz-Target: ${DYNAMODB_TARGET_PREFIX}<Operation>`);
  }
  if (target.startsWith(DYNAMODB_TARGET_PREFIX)) {
    const op = target.slice(DYNAMODB_TARGET_PREFIX.length);
    if (Object.hasOwn(OPERATIONS, op)) return OPERATIONS[op];
    if (Object.hasOwn(NOT_YET, op)) throw DynamoDbError.validation(`keyslice does not support ${NOT_YET[op]} yet (${op}); see docs/dynamodb.md`);
  }
  if (target.startsWith(KEYSLICE_TARGET_PREFIX)) {
    const op = target.slice(KEYSLICE_TARGET_PREFIX.length);
    if (Object.hasOwn(KEYSLICE_OPERATIONS, op)) return KEYSLICE_OPERATIONS[op];
  }
  throw new DynamoDbError('UnknownOperationException', `Unknown operation: ${target}`);
}

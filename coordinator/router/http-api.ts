// HTTP transport: POST /api/<Operation> with a JSON body; JSON back; GET
// /metrics for Prometheus and GET /health. Membership and operator requests
// under /cluster/: POST join (slice nodes, with the cluster secret), GET status,
// POST add / drain / remove {"node": "ws://host:port"} (remove also takes
// "forgetData": true for a node whose data is lost, and "force": true to remove
// one although some slices would keep no majority of live replicas) (operators, with the
// client token). When a token is configured, everything but /health and
// /cluster/join needs `Authorization: Bearer <token>`. Binary
// values travel as {"$binary": "<base64>"}. Errors: the status from
// ERROR_CODES and {"error": {"code", "message", "retryable"}}, plus the error's
// details when it has some (e.g. "item" of a ConditionalCheckFailed); 503 and
// 429 carry Retry-After, 405 carries Allow. The query string is ignored and one
// trailing slash is tolerated. Requests the HTTP parser refuses (bad framing,
// timeouts) get the same JSON errors (shared/http-server.ts). GET /, /studio and
// /studio/stream belong to the studio (studio/routes.ts); POST / to the DynamoDB endpoint.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isOperationName } from '../../shared/api.js';
import { clientTokenRefusal, clusterSecretRefusal } from '../../shared/auth.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { HTTP_DISCARD_BYTES_MAX, REQUEST_BYTES_MAX } from '../../shared/limits.js';
import { errorBody, pathOf, sendErrorJson, sendText } from '../../shared/http-server.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER, HTTP_API_PREFIX } from '../../shared/protocol.js';
import { fromJson, isPlainObject, toJson } from '../../shared/values.js';
import type { DynamoDbEndpoint } from '../dynamodb/endpoint.js';
import type { Studio } from '../studio/routes.js';
import type { Membership } from '../metadata/membership.js';
import type { Operations } from './operations.js';

export interface HttpSecurity {
  /** Client token; '' requires none. */
  token: string;
  /** Cluster secret for /cluster/join; '' requires none. */
  clusterSecret: string;
}

/** What only one kind of process adds to the HTTP API. */
export interface HttpEdge {
  /** The coordinator: GET /cluster/feed (with the cluster secret), its routers' copy of the catalog and map. */
  feed?: { serve(query: URLSearchParams, res: ServerResponse): void };
  /** A router: the requests it forwards to the coordinator (table changes, /cluster/, the studio), and its /health. */
  router?: { forwards(req: IncomingMessage, path: string): boolean; forward(req: IncomingMessage, res: ServerResponse): void; health(): Record<string, unknown> };
}

const GET = ['GET', 'HEAD'] as const;
const POST = ['POST'] as const;
const CLUSTER_POSTS = ['add', 'drain', 'remove'];

/** `cluster` null: a router, which forwards /cluster/ requests (edge.router). Pipelined requests are bounded by the
 * server it runs under (boundedHttpServer, shared/http-server.ts). */
export function handleHttp(
  ops: Operations,
  metrics: () => Promise<string>,
  cluster: Membership | null,
  security: HttpSecurity,
  req: IncomingMessage,
  res: ServerResponse,
  dynamodb?: DynamoDbEndpoint,
  studio?: Studio,
  edge: HttpEdge = {},
): void {
  if (edge.router?.forwards(req, pathOf(req.url ?? '/'))) return edge.router.forward(req, res);
  // GET / and /studio (the page) and /studio/stream: the studio checks the token itself (it also takes ?token=).
  if (studio?.handle(req, res)) return;
  // The DynamoDB-compatible endpoint owns POST / (with X-Amz-Target) and checks SigV4 itself.
  if (dynamodb !== undefined && dynamodb.handles(req)) return dynamodb.handle(req, res);
  const path = pathOf(req.url ?? '/');
  if (path === '/health') {
    if (allowed(req, res, GET)) send(res, 200, edge.router?.health() ?? { status: 'ok' });
    return;
  }
  if (path === `${CLUSTER_API_PREFIX}feed` && edge.feed !== undefined) {
    const refusal = clusterSecretRefusal(security.clusterSecret, req.headers[CLUSTER_SECRET_HEADER]);
    if (refusal !== null) return sendError(res, new KeysliceError('Unauthorized', refusal));
    if (allowed(req, res, GET)) edge.feed.serve(new URLSearchParams((req.url ?? '').split('?')[1] ?? ''), res);
    return;
  }

  if (cluster === null && path.startsWith(CLUSTER_API_PREFIX)) return sendError(res, new KeysliceError('Internal', 'a router forwards cluster requests to the coordinator'));
  if (path === `${CLUSTER_API_PREFIX}join`) {
    const refusal = clusterSecretRefusal(security.clusterSecret, req.headers[CLUSTER_SECRET_HEADER]);
    if (refusal !== null) return sendError(res, new KeysliceError('Unauthorized', refusal));
    if (allowed(req, res, POST)) readJson(req, res, (body) => cluster!.join(body));
    return;
  }
  const refusal = clientTokenRefusal(security.token, req.headers.authorization, undefined);
  if (refusal !== null) return sendError(res, new KeysliceError('Unauthorized', refusal));
  if (path.startsWith(CLUSTER_API_PREFIX) && cluster !== null) {
    const action = path.slice(CLUSTER_API_PREFIX.length);
    if (action === 'status') {
      if (allowed(req, res, GET)) cluster.status().then((st) => send(res, 200, st), (err) => sendError(res, toKeysliceError(err)));
      return;
    }
    if (!CLUSTER_POSTS.includes(action)) {
      return sendError(res, new KeysliceError('UnknownOperation', `no such path ${path}; cluster requests are GET ${CLUSTER_API_PREFIX}status and POST ${CLUSTER_API_PREFIX}add, drain, remove`));
    }
    if (!allowed(req, res, POST)) return;
    if (action === 'add') return readJson(req, res, (body) => ({ node: cluster.map.nodes[cluster.add(body.node)] }));
    if (action === 'drain') return readJson(req, res, (body) => (cluster.drain(body.node), {}));
    return readJson(req, res, (body) => cluster.remove(body.node, body.forgetData ?? false, body.force ?? false).then(() => ({})));
  }
  if (path === '/metrics') {
    if (!allowed(req, res, GET)) return;
    metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
      (err) => sendError(res, toKeysliceError(err)),
    );
    return;
  }
  if (!path.startsWith(HTTP_API_PREFIX)) {
    return sendError(res, new KeysliceError('UnknownOperation', `no such path ${path}; operations are POST ${HTTP_API_PREFIX}<Operation>`));
  }
  const op = path.slice(HTTP_API_PREFIX.length);
  if (!isOperationName(op)) return sendError(res, new KeysliceError('UnknownOperation', `unknown operation ${JSON.stringify(op)}`));
  if (allowed(req, res, POST)) readJson(req, res, (payload) => ops.execute(op, payload));
}

/** True if the request's method is one of `methods`; otherwise answers 405 with Allow. */
function allowed(req: IncomingMessage, res: ServerResponse, methods: readonly string[]): boolean {
  if (methods.includes(req.method ?? '')) return true;
  const path = pathOf(req.url ?? '/');
  sendError(res, new KeysliceError('MethodNotAllowed', `${path} takes ${methods.join(' or ')}, not ${req.method}`), { allow: methods.join(', ') });
  return false;
}

/** Reads a JSON object body, runs `handle` on it, answers its result (or error) as JSON. */
function readJson(req: IncomingMessage, res: ServerResponse, handle: (payload: Record<string, unknown>) => unknown): void {
  readBody(req, res, nativeTooLarge, (raw) => {
    let payload: unknown;
    try {
      const text = raw.toString('utf8');
      payload = text.trim() === '' ? {} : fromJson(JSON.parse(text));
    } catch (err) {
      return sendError(res, new KeysliceError('MalformedRequest', `request body is not valid JSON: ${(err as Error).message}`));
    }
    if (!isPlainObject(payload)) return sendError(res, new KeysliceError('MalformedRequest', 'request body must be a JSON object'));
    new Promise((resolve) => resolve(handle(payload as Record<string, unknown>))).then(
      (result) => send(res, 200, toJson(result)),
      (err) => sendError(res, toKeysliceError(err)),
    );
  });
}

/** The answer to a body over REQUEST_BYTES_MAX, in the words of the API that refuses it. */
export interface TooLargeAnswer {
  status: number;
  headers: Record<string, string | number>;
  text: string;
}

function nativeTooLarge(what: string): TooLargeAnswer {
  const err = new KeysliceError('RequestTooLarge', `${what} is over the limit of ${REQUEST_BYTES_MAX} bytes`);
  return { status: err.status, headers: { 'content-type': 'application/json' }, text: errorBody(err) };
}

/** Reads a body of at most REQUEST_BYTES_MAX and hands it to `done`. A larger one is
 * refused with `tooLarge(what)` as soon as it is known: from Content-Length before any
 * of it is read, or once a chunked body passes the limit. */
export function readBody(req: IncomingMessage, res: ServerResponse, tooLarge: (what: string) => TooLargeAnswer, done: (body: Buffer) => void): void {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > REQUEST_BYTES_MAX) return refuseTooLarge(req, res, tooLarge(`request body of ${declared} bytes (Content-Length)`));
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size <= REQUEST_BYTES_MAX) return void chunks.push(chunk);
    chunks.length = 0;
    req.off('data', onData);
    req.off('end', onEnd);
    refuseTooLarge(req, res, tooLarge(`request body of over ${REQUEST_BYTES_MAX} bytes`));
  };
  // Most bodies arrive in one chunk: that one is the body, not a copy of it.
  const onEnd = () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', () => res.destroy());
}

/** Answers 413 at once (Connection: close), then reads and drops the rest of the body, so
 * that a client still sending gets to read the answer instead of a reset connection; the
 * connection closes when the body has ended, or is cut past HTTP_DISCARD_BYTES_MAX more
 * (the request timeout bounds the time it may take). */
function refuseTooLarge(req: IncomingMessage, res: ServerResponse, answer: TooLargeAnswer): void {
  // Connection: close makes node:http close the connection once this response ends.
  res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.text), connection: 'close' });
  res.write(answer.text);
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > HTTP_DISCARD_BYTES_MAX) req.socket.destroy();
  });
  req.on('end', () => res.end());
  req.on('error', () => res.destroy());
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  sendText(res, status, JSON.stringify(body), headers);
}

/** Answers a KeysliceError as JSON with its status (and Retry-After on 503 and 429); logs Internal ones. */
export function sendError(res: ServerResponse, err: KeysliceError, headers: Record<string, string> = {}): void {
  if (err.code === 'Internal') console.error(`keyslice coordinator: internal error: ${err.stack}`);
  sendErrorJson(res, err, headers);
}

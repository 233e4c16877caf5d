// HTTP transport: POST /api/<Operation> with a JSON body; JSON back; GET
// /metrics for Prometheus and GET /health. Membership and operator requests
// under /cluster/: POST join (slice nodes, with the cluster secret), GET status,
// POST add / drain / remove {"node": "ws://host:port"} (operators, with the
// client token). When a token is configured, everything but /health and
// /cluster/join needs `Authorization: Bearer <token>`. Binary
// values travel as {"$binary": "<base64>"}. Errors: the status from
// ERROR_CODES and {"error": {"code", "message", "retryable"}}, plus the error's
// details when it has some (e.g. "item" of a ConditionalCheckFailed).
// GET /, /studio and /studio/stream belong to the studio (studio/routes.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isOperationName } from '../shared/api.js';
import { bearerToken, secretMatches } from '../shared/auth.js';
import { KeysliceError, toKeysliceError } from '../shared/errors.js';
import { REQUEST_BYTES_MAX } from '../shared/limits.js';
import { CLUSTER_API_PREFIX, CLUSTER_SECRET_HEADER, HTTP_API_PREFIX } from '../shared/protocol.js';
import { fromJson, isPlainObject, toJson } from '../shared/values.js';
import type { Membership } from './membership.js';
import type { Operations } from './operations.js';
import type { Studio } from './studio/routes.js';

export interface HttpSecurity {
  /** Client token; '' requires none. */
  token: string;
  /** Cluster secret for /cluster/join; '' requires none. */
  clusterSecret: string;
}

export function handleHttp(ops: Operations, metrics: () => Promise<string>, cluster: Membership, security: HttpSecurity, req: IncomingMessage, res: ServerResponse, studio?: Studio): void {
  const url = req.url ?? '/';
  if (url === '/health' && req.method === 'GET') return send(res, 200, { status: 'ok' });
  // GET / and /studio (the page) and /studio/stream: the studio checks the token itself (it also takes ?token=).
  if (studio?.handle(req, res)) return;
  if (url === `${CLUSTER_API_PREFIX}join`) {
    if (!secretMatches(security.clusterSecret, req.headers[CLUSTER_SECRET_HEADER])) {
      return sendError(res, new KeysliceError('Unauthorized', 'the cluster secret is missing or wrong; a slice node needs the same --cluster-secret as the coordinator'));
    }
    return readJson(req, res, (body) => cluster.join(body.url));
  }
  if (!secretMatches(security.token, bearerToken(req.headers.authorization, undefined) ?? undefined)) {
    return sendError(res, new KeysliceError('Unauthorized', 'this cluster needs a client token: send "Authorization: Bearer <token>"'));
  }
  if (url.startsWith(CLUSTER_API_PREFIX)) {
    const action = url.slice(CLUSTER_API_PREFIX.length);
    if (action === 'status' && req.method === 'GET') {
      cluster.status().then((st) => send(res, 200, st), (err) => sendError(res, toKeysliceError(err)));
      return;
    }
    if (req.method !== 'POST') return sendError(res, new KeysliceError('MalformedRequest', `${url} takes POST`));
    if (action === 'add') return readJson(req, res, (body) => ({ node: cluster.map.nodes[cluster.add(body.node)] }));
    if (action === 'drain') return readJson(req, res, (body) => (cluster.drain(body.node), {}));
    if (action === 'remove') return readJson(req, res, (body) => (cluster.remove(body.node), {}));
    return sendError(res, new KeysliceError('UnknownOperation', `no such path ${url}; cluster requests are GET ${CLUSTER_API_PREFIX}status and POST ${CLUSTER_API_PREFIX}add, drain, remove`));
  }
  if (url === '/metrics' && req.method === 'GET') {
    metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
      (err) => sendError(res, toKeysliceError(err)),
    );
    return;
  }
  if (!url.startsWith(HTTP_API_PREFIX)) {
    return sendError(res, new KeysliceError('UnknownOperation', `no such path ${url}; operations are POST ${HTTP_API_PREFIX}<Operation>`));
  }
  const op = url.slice(HTTP_API_PREFIX.length);
  if (!isOperationName(op)) return sendError(res, new KeysliceError('UnknownOperation', `unknown operation ${JSON.stringify(op)}`));
  if (req.method !== 'POST') return sendError(res, new KeysliceError('MalformedRequest', `operations take POST, not ${req.method}`));
  readJson(req, res, (payload) => ops.execute(op, payload));
}

/** Reads a JSON object body, runs `handle` on it, answers its result (or error) as JSON. */
function readJson(req: IncomingMessage, res: ServerResponse, handle: (payload: Record<string, unknown>) => unknown): void {
  // An oversized body is read and thrown away so that the client, still sending,
  // gets the 413 instead of a reset connection; past twice the limit we hang up.
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > REQUEST_BYTES_MAX) {
      chunks.length = 0;
      if (size > 2 * REQUEST_BYTES_MAX) req.destroy();
    } else chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > REQUEST_BYTES_MAX) {
      return sendError(res, new KeysliceError('RequestTooLarge', `request body of ${size} bytes is over the limit of ${REQUEST_BYTES_MAX}`));
    }
    let payload: unknown;
    try {
      const text = Buffer.concat(chunks).toString('utf8');
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
  req.on('error', () => res.destroy());
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendError(res: ServerResponse, err: KeysliceError): void {
  if (err.code === 'Internal') console.error(`keyslice coordinator: internal error: ${err.stack}`);
  const details = err.details === undefined ? {} : (toJson(err.details) as object);
  send(res, err.status, { error: { code: err.code, message: err.message, retryable: err.retryable, ...details } });
}

// What every HTTP port of keyslice shares (the client port of the coordinator and of each router, and a slice node's
// --metrics-port): timeouts, so that a slow or stalled client cannot hold a connection open forever (a slowloris
// sending a header line now and then, or one that connects and sends nothing, is answered 408 and cut once
// the headers' time is up), and the JSON error shape, {"error": {"code", "message", "retryable"}} with the status
// of ERROR_CODES, for the requests a handler refuses and for those the HTTP parser refuses (bad framing, headers
// over the parser's limit, timeouts), and the bound on pipelined requests of one connection (shared/http-pipeline.ts):
// each is applied here, so that no port can be opened without them.
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { KeysliceError } from './errors.js';
import { admitPipelined } from './http-pipeline.js';
import {
  HTTP_HEADERS_TIMEOUT_MS,
  HTTP_IDLE_TIMEOUT_MS,
  HTTP_KEEP_ALIVE_TIMEOUT_MS,
  HTTP_REQUEST_TIMEOUT_MS,
  HTTP_TIMEOUT_CHECK_INTERVAL_MS,
  RETRY_AFTER_SECONDS,
} from './limits.js';
import { toJson } from './values.js';

/** How long a request's headers, and the whole request, may take to arrive (--http-headers-timeout-ms,
 * --http-request-timeout-ms). */
export interface HttpTimeouts {
  headersMs: number;
  requestMs: number;
}
export const HTTP_TIMEOUTS_DEFAULT: HttpTimeouts = { headersMs: HTTP_HEADERS_TIMEOUT_MS, requestMs: HTTP_REQUEST_TIMEOUT_MS };

/** An HTTP server with the timeouts of shared/limits.ts, JSON answers to what the parser refuses, and `handle` run
 * for each request as admitPipelined lets it (at most HTTP_PIPELINED_REQUESTS_MAX of a connection at once). */
export function boundedHttpServer(handle: (req: IncomingMessage, res: ServerResponse) => void, timeouts = HTTP_TIMEOUTS_DEFAULT): Server {
  const server = createServer(
    { headersTimeout: timeouts.headersMs, requestTimeout: timeouts.requestMs, connectionsCheckingInterval: HTTP_TIMEOUT_CHECK_INTERVAL_MS },
    (req, res) => admitPipelined(req, res, () => handle(req, res)),
  );
  server.keepAliveTimeout = HTTP_KEEP_ALIVE_TIMEOUT_MS;
  server.timeout = HTTP_IDLE_TIMEOUT_MS;
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, timeouts));
  return server;
}

/** The 'clientError' handler: a request the HTTP parser refused (bad
 * framing, a chunk size out of range, a body cut short) or one that did not arrive in
 * time gets a JSON error like any other, then the connection closes. Nothing is written
 * where a response has begun on that connection (it would corrupt it): that one is cut. */
function answerClientError(err: Error & { code?: string; reason?: string }, socket: Duplex, timeouts: HttpTimeouts): void {
  const current = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage; // node's own check before it answers
  if (err.code === 'ECONNRESET' || !socket.writable || current?.headersSent === true) {
    socket.destroy();
    return;
  }
  let e: KeysliceError;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    e = new KeysliceError('RequestTimeout', `the request did not arrive in time (headers within ${timeouts.headersMs} ms, all of it within ${timeouts.requestMs} ms)`);
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    e = new KeysliceError('RequestTooLarge', 'the request headers are over the limit of the HTTP parser');
  } else {
    e = new KeysliceError('MalformedRequest', `malformed HTTP request: ${err.reason ?? err.message}${err.code === undefined ? '' : ` (${err.code})`}`);
  }
  const text = errorBody(e);
  const head = [`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}`, 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(text)}`, 'Connection: close'];
  socket.end(`${head.join('\r\n')}\r\n\r\n${text}`);
  // Once the answer has left, the connection goes (the client may still be sending).
  socket.once('finish', () => socket.destroy());
}

export function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string>): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function errorBody(err: KeysliceError): string {
  const details = err.details === undefined ? {} : (toJson(err.details) as object);
  return JSON.stringify({ error: { code: err.code, message: err.message, retryable: err.retryable, ...details } });
}

/** The path of a request target: no query or fragment, at most one trailing slash dropped;
 * an absolute target (http://host/path, as proxies send) gives its path. */
export function pathOf(target: string): string {
  let path = /^https?:\/\//i.test(target) ? safePathname(target) : target;
  const end = path.search(/[?#]/);
  if (end >= 0) path = path.slice(0, end);
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

function safePathname(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/** Answers a KeysliceError as JSON with its status (and Retry-After on 503 and 429). */
export function sendErrorJson(res: ServerResponse, err: KeysliceError, headers: Record<string, string> = {}): void {
  // A client told to come back gets a when, the same for every retryable refusal.
  if (err.status === 503 || err.status === 429) headers = { ...headers, 'retry-after': String(RETRY_AFTER_SECONDS) };
  sendText(res, err.status, errorBody(err), headers);
}

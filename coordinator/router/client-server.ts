// The client port's HTTP server with the WebSocket API on it, as the coordinator
// (--routers 0) and every router run it. Timeouts (shared/limits.ts) so that a
// slow or stalled client cannot hold a connection open forever; requests the HTTP
// parser refuses get a JSON error (answerClientError).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import {
  HTTP_HEADERS_TIMEOUT_MS,
  HTTP_IDLE_TIMEOUT_MS,
  HTTP_KEEP_ALIVE_TIMEOUT_MS,
  HTTP_REQUEST_TIMEOUT_MS,
  HTTP_TIMEOUT_CHECK_INTERVAL_MS,
} from '../../shared/limits.js';
import { answerClientError } from './http-api.js';
import type { Operations } from './operations.js';
import { attachWebSocketApi } from './ws-api.js';

export interface ClientServer {
  server: Server;
  wss: WebSocketServer;
  /** Drops every client connection and stops listening (a process that stops). */
  close(): void;
}

/** How long a request's headers, and the whole request, may take to arrive (--http-headers-timeout-ms,
 * --http-request-timeout-ms). */
export interface HttpTimeouts {
  headersMs: number;
  requestMs: number;
}
export const HTTP_TIMEOUTS_DEFAULT: HttpTimeouts = { headersMs: HTTP_HEADERS_TIMEOUT_MS, requestMs: HTTP_REQUEST_TIMEOUT_MS };

export function clientServer(ops: Operations, token: string, handle: (req: IncomingMessage, res: ServerResponse) => void, timeouts = HTTP_TIMEOUTS_DEFAULT): ClientServer {
  const server = createServer({ headersTimeout: timeouts.headersMs, requestTimeout: timeouts.requestMs, connectionsCheckingInterval: HTTP_TIMEOUT_CHECK_INTERVAL_MS }, handle);
  server.keepAliveTimeout = HTTP_KEEP_ALIVE_TIMEOUT_MS;
  server.timeout = HTTP_IDLE_TIMEOUT_MS;
  server.on('clientError', (err: Error, socket: Duplex) => answerClientError(err, socket, timeouts));
  const wss = attachWebSocketApi(ops, server, token);
  const close = () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close();
    server.closeAllConnections();
  };
  return { server, wss, close };
}

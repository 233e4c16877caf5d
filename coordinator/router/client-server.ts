// The client port's HTTP server with the WebSocket API on it, as the coordinator
// (--routers 0) and every router run it. Timeouts (shared/limits.ts) so that a
// slow or stalled client cannot hold a connection open forever; requests the HTTP
// parser refuses get a JSON error; pipelined requests of a connection are bounded
// (all three: shared/http-server.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { WebSocketServer } from '../../shared/ws.js';
import { boundedHttpServer, HTTP_TIMEOUTS_DEFAULT } from '../../shared/http-server.js';
import type { Operations } from './operations.js';
import { attachWebSocketApi } from './ws-api.js';

export interface ClientServer {
  server: Server;
  wss: WebSocketServer;
  /** Drops every client connection and stops listening (a process that stops). */
  close(): void;
}

export function clientServer(ops: Operations, token: string, handle: (req: IncomingMessage, res: ServerResponse) => void, timeouts = HTTP_TIMEOUTS_DEFAULT): ClientServer {
  const server = boundedHttpServer(handle, timeouts);
  const wss = attachWebSocketApi(ops, server, token);
  const close = () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close();
    server.closeAllConnections();
  };
  return { server, wss, close };
}

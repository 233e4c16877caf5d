// WebSocket transport: msgpack frames of requests [id, operation, payload] in
// (one, or a list), responses [id, 0, result] or [id, 1, code, message,
// details?] out, many in flight per connection. The responses that are ready in
// one turn of the event loop leave in one frame.
import type { IncomingMessage, Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { bearerToken, secretMatches } from '../shared/auth.js';
import { KeysliceError, toKeysliceError } from '../shared/errors.js';
import { CLIENT_IN_FLIGHT_MAX, REQUEST_BYTES_MAX } from '../shared/limits.js';
import {
  CLIENT_SUBPROTOCOL,
  CLIENT_WS_PATH,
  decodeClientRequests,
  encodeClientFrame,
  FrameError,
  RESULT_ERROR,
  RESULT_OK,
  type ClientResponseFrame,
} from '../shared/protocol.js';
import type { Operations } from './operations.js';

/** Responses bound for one connection, sent as one frame per turn. */
class Outbox {
  private queued: ClientResponseFrame[] = [];

  constructor(private readonly ws: WebSocket) {}

  push(response: ClientResponseFrame): void {
    if (this.queued.push(response) === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const out = this.queued;
    this.queued = [];
    if (this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(encodeClientFrame(out.length === 1 ? out[0] : out));
  }
}

/** `token`: the client token ('' requires none), from `Authorization: Bearer` or `?token=`.
 * A handshake without it is answered 401 with the error as JSON, like HTTP. */
export function attachWebSocketApi(ops: Operations, server: Server, token = ''): WebSocketServer {
  const wss = new WebSocketServer({
    server,
    path: CLIENT_WS_PATH,
    maxPayload: REQUEST_BYTES_MAX,
    verifyClient: (info: { req: IncomingMessage }, done: (ok: boolean, code?: number, message?: string, headers?: Record<string, string>) => void) => {
      if (secretMatches(token, bearerToken(info.req.headers.authorization, info.req.url) ?? undefined)) return done(true);
      const body = { error: { code: 'Unauthorized', message: 'this cluster needs a client token: send "Authorization: Bearer <token>" (or ?token=)', retryable: false } };
      done(false, 401, JSON.stringify(body), { 'content-type': 'application/json' });
    },
    handleProtocols: (offered) => (offered.has(CLIENT_SUBPROTOCOL) ? CLIENT_SUBPROTOCOL : false),
  });
  wss.on('connection', (ws: WebSocket, _req: IncomingMessage) => {
    if (ws.protocol !== CLIENT_SUBPROTOCOL) {
      ws.close(1002, `use the WebSocket subprotocol ${CLIENT_SUBPROTOCOL}`);
      return;
    }
    const outbox = new Outbox(ws);
    // Requests in flight on this connection are bounded: past the limit the coordinator
    // stops reading from the socket until half of them are answered (TCP pushes back).
    let inFlight = 0;
    const answered = () => {
      if (--inFlight === CLIENT_IN_FLIGHT_MAX >> 1 && ws.isPaused) ws.resume();
    };
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) return outbox.push(errorFrame(-1, new KeysliceError('MalformedRequest', 'frames are binary msgpack, not text')));
      let requests;
      try {
        requests = decodeClientRequests(data);
      } catch (err) {
        return outbox.push(errorFrame(err instanceof FrameError ? err.id : -1, toKeysliceError(err)));
      }
      for (const r of requests) {
        if (r instanceof FrameError) {
          outbox.push(errorFrame(r.id, r));
          continue;
        }
        const [id, op, payload] = r;
        inFlight++;
        ops.execute(op, payload).then(
          (result) => {
            answered();
            outbox.push([id, RESULT_OK, result]);
          },
          (err) => {
            answered();
            outbox.push(errorFrame(id, toKeysliceError(err)));
          },
        );
      }
      if (inFlight >= CLIENT_IN_FLIGHT_MAX && !ws.isPaused) ws.pause();
    });
    ws.on('error', () => {}); // a broken client connection only ends that connection
  });
  return wss;
}

function errorFrame(id: number, err: KeysliceError): ClientResponseFrame {
  if (err.code === 'Internal') console.error(`keyslice coordinator: internal error: ${err.stack}`);
  return err.details === undefined ? [id, RESULT_ERROR, err.code, err.message] : [id, RESULT_ERROR, err.code, err.message, err.details];
}

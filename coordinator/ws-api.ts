// WebSocket transport: msgpack frames [id, operation, payload] in, [id, 0,
// result] or [id, 1, code, message, details?] out, many in flight per connection.
import type { IncomingMessage, Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { KeysliceError, toKeysliceError } from '../shared/errors.js';
import { REQUEST_BYTES_MAX } from '../shared/limits.js';
import { CLIENT_SUBPROTOCOL, CLIENT_WS_PATH, decodeClientRequest, encodeClientFrame, FrameError, RESULT_ERROR, RESULT_OK } from '../shared/protocol.js';
import type { Operations } from './operations.js';

export function attachWebSocketApi(ops: Operations, server: Server): WebSocketServer {
  const wss = new WebSocketServer({
    server,
    path: CLIENT_WS_PATH,
    maxPayload: REQUEST_BYTES_MAX,
    handleProtocols: (offered) => (offered.has(CLIENT_SUBPROTOCOL) ? CLIENT_SUBPROTOCOL : false),
  });
  wss.on('connection', (ws: WebSocket, _req: IncomingMessage) => {
    if (ws.protocol !== CLIENT_SUBPROTOCOL) {
      ws.close(1002, `use the WebSocket subprotocol ${CLIENT_SUBPROTOCOL}`);
      return;
    }
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) return replyError(ws, -1, new KeysliceError('MalformedRequest', 'frames are binary msgpack, not text'));
      let id = -1;
      try {
        const [reqId, op, payload] = decodeClientRequest(data);
        id = reqId;
        ops.execute(op, payload).then(
          (result) => ws.readyState === ws.OPEN && ws.send(encodeClientFrame([reqId, RESULT_OK, result])),
          (err) => replyError(ws, reqId, toKeysliceError(err)),
        );
      } catch (err) {
        replyError(ws, err instanceof FrameError ? err.id : id, toKeysliceError(err));
      }
    });
    ws.on('error', () => {}); // a broken client connection only ends that connection
  });
  return wss;
}

function replyError(ws: WebSocket, id: number, err: KeysliceError): void {
  if (err.code === 'Internal') console.error(`keyslice coordinator: internal error: ${err.stack}`);
  if (ws.readyState !== ws.OPEN) return;
  ws.send(encodeClientFrame(err.details === undefined ? [id, RESULT_ERROR, err.code, err.message] : [id, RESULT_ERROR, err.code, err.message, err.details]));
}

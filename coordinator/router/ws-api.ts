// WebSocket transport: msgpack frames of requests [id, operation, payload] in
// (one, or a list), responses [id, 0, result] or [id, 1, code, message,
// details?] out, many in flight per connection. The responses that are ready in
// one turn of the event loop leave in one frame; while more of the connection's
// requests are running they wait one turn more for those (flush).
import type { IncomingMessage, Server } from 'node:http';
import { WebSocketServer, type WebSocket } from '../../shared/ws.js';
import { clientTokenRefusal } from '../../shared/auth.js';
import { assert, KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { CLIENT_FRAME_SLAB_BYTES_MAX, CLIENT_FRAME_SLAB_BYTES_MIN, CLIENT_FRAME_SLAB_SHRINK_MS, CLIENT_IN_FLIGHT_MAX, CLIENT_RESPONSE_BYTES_GUESS, CLIENT_UNSENT_BYTES_MAX, REQUEST_BYTES_MAX } from '../../shared/limits.js';
import {
  CLIENT_SUBPROTOCOL,
  CLIENT_WS_PATH,
  decodeClientRequests,
  encodeClientFrame,
  FrameError,
  RESULT_ERROR,
  RESULT_OK,
  type ClientRequestFrame,
  type ClientResponseFrame,
} from '../../shared/protocol.js';
import type { Operations } from './operations.js';

/** The buffer a router joins client frames in (what encodeClientFrame's `join` gives), reused from frame to frame while the
 * socket takes each frame whole at once. A frame whose items pass through (a range page, a GetItem's item) was joined
 * in a buffer of its own (Buffer.concat), an allocation outside V8's heap the size of the frame for every frame; in
 * the slab the router spent a tenth to a fifth less CPU per range of 100 (bench/README.md, "Client frames joined in a
 * reused buffer"). One for the whole process: a frame is joined and handed to its socket in one call (flush), so no
 * two frames are in it at once.
 * Why 0 bytes unsent right after ws.send means nothing holds the frame (ws 8, Node 20): ws counts in bufferedAmount
 * the socket's writableLength and every frame it queued or is compressing (Sender._bufferedBytes; the client server
 * negotiates no permessage-deflate anyway); the socket drops a write from writableLength once libuv has written it to
 * the kernel, which copies it, at once where the kernel takes it all, else when the rest is written later. */
class FrameSlab {
  private free: Buffer | null = null;
  private bytes = CLIENT_FRAME_SLAB_BYTES_MIN;
  /** The largest frame joined since shrink last looked or the slab last grew. */
  private largestSince = 0;
  /** Armed while the slab is grown: CLIENT_FRAME_SLAB_SHRINK_MS after it grew, then as long again after each look, it
   * shrinks to what that time's joined frames needed. */
  private shrinkTimer: NodeJS.Timeout | null = null;

  /** Where a frame of `size` bytes whose items pass through is joined (encodeClientFrame's `join`): the slab where it
   * fits, else a buffer of its own, and then the next slab is made as large, up to CLIENT_FRAME_SLAB_BYTES_MAX, for as
   * long as frames that large keep coming (shrink). Only frames joined ask: one that msgpackr packs whole (no item
   * passes through: an error, a put's answer, items as objects) neither grows the slab nor keeps it grown, which it
   * would never be joined in. Nor does one larger than CLIENT_FRAME_SLAB_BYTES_MAX, which no slab holds: counted as the
   * largest frame of its time, a stream of them kept a slab grown by an earlier frame at its size, joined in by none. */
  readonly join = (size: number): Buffer => {
    if (size > CLIENT_FRAME_SLAB_BYTES_MAX) return Buffer.allocUnsafe(size);
    this.largestSince = Math.max(this.largestSince, size);
    if (size <= this.bytes) return (this.free ??= Buffer.allocUnsafeSlow(this.bytes));
    this.bytes = size;
    this.free = null;
    // Looked at CLIENT_FRAME_SLAB_SHRINK_MS from now, by the frames joined after this one.
    this.largestSince = 0;
    if (this.shrinkTimer === null) this.shrinkTimer = setTimeout(() => this.shrink(), CLIENT_FRAME_SLAB_SHRINK_MS).unref();
    else this.shrinkTimer.refresh();
    return Buffer.allocUnsafe(size);
  };

  /** `frame` (joined in the slab or not) has been handed to its socket, `unsent` of its connection's bytes not yet
   * taken by the kernel. A frame in the slab that the socket did not take at once holds the slab until it is written:
   * the next frame joined takes a new one. */
  sent(frame: Buffer, unsent: number): void {
    if (unsent > 0 && this.free !== null && frame.buffer === this.free.buffer) this.free = null;
  }

  /** Down to the largest frame joined in the last CLIENT_FRAME_SLAB_SHRINK_MS, at least CLIENT_FRAME_SLAB_BYTES_MIN (not
   * to MIN only when no frame larger than MIN came: a stream of 100 KiB frames would keep a slab grown to 4 MiB by one
   * answer for the life of the process); looks again after as long while it is larger than MIN. Safe at any time
   * between two frames (a timer never runs inside flush's encode..sent): a larger slab is only let go (the garbage
   * collector frees it once no socket holds a frame in it), never joined in again, and a slab a socket holds was let
   * go when it was sent (free null). */
  private shrink(): void {
    const keep = Math.max(CLIENT_FRAME_SLAB_BYTES_MIN, Math.min(this.largestSince, this.bytes));
    this.largestSince = 0;
    if (keep < this.bytes) {
      this.bytes = keep;
      this.free = null;
    }
    this.shrinkTimer = this.bytes > CLIENT_FRAME_SLAB_BYTES_MIN ? setTimeout(() => this.shrink(), CLIENT_FRAME_SLAB_SHRINK_MS).unref() : null;
  }
}
const frameSlab = new FrameSlab();

/** One client connection: its requests in flight, the responses ready to leave
 * (sent as one frame per turn, or per two: flush), and the bound on what it may leave unread.
 * Requests start while the connection is under both bounds: fewer than
 * CLIENT_IN_FLIGHT_MAX in flight, and at most CLIENT_UNSENT_BYTES_MAX bytes not
 * yet handed to the kernel (frames buffered in the socket, ws.bufferedAmount,
 * plus every response not sent yet at the running mean response size). Over a
 * bound, requests already read wait here and the socket is not read (TCP pushes
 * back on the client); it is read again once they have started and both figures
 * are down to half. */
class Connection {
  private ready: ClientResponseFrame[] = [];
  /** Requests started whose responses have not been handed to ws.send yet. */
  private pending = 0;
  private responseBytes = CLIENT_RESPONSE_BYTES_GUESS;
  /** Requests read but not started (at most one read's or one frame's worth). */
  private waiting: ClientRequestFrame[] = [];
  private waitingAt = 0;

  constructor(
    private readonly ws: WebSocket,
    private readonly ops: Operations,
  ) {}

  run(request: ClientRequestFrame): void {
    if (this.waitingAt < this.waiting.length || this.overBound()) {
      this.waiting.push(request);
      this.ws.pause();
    } else this.start(request);
  }

  refuse(id: number, err: KeysliceError): void {
    this.pending++;
    this.answer(errorFrame(id, err));
  }

  private start([id, op, payload]: ClientRequestFrame): void {
    this.pending++;
    // The answer leaves in a msgpack frame: range items may pass through packed (PackedItems).
    this.ops.execute(op, payload, true).then(
      (result) => this.answer([id, RESULT_OK, result]),
      (err) => this.answer(errorFrame(id, toKeysliceError(err))),
    );
  }

  private overBound(): boolean {
    return this.pending >= CLIENT_IN_FLIGHT_MAX || this.unsentBytes() > CLIENT_UNSENT_BYTES_MAX;
  }

  private unsentBytes(): number {
    return this.ws.bufferedAmount + this.pending * this.responseBytes;
  }

  /** Starts what waits while under the bounds; reads the socket again once nothing waits and both are below half. */
  private progress(): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    while (this.waitingAt < this.waiting.length && !this.overBound()) this.start(this.waiting[this.waitingAt++]);
    if (this.waitingAt < this.waiting.length) return;
    this.waiting = [];
    this.waitingAt = 0;
    if (this.ws.isPaused && this.pending <= CLIENT_IN_FLIGHT_MAX >> 1 && this.unsentBytes() <= CLIENT_UNSENT_BYTES_MAX >> 1) this.ws.resume();
  }

  private answer(response: ClientResponseFrame): void {
    if (this.ready.push(response) === 1) setImmediate(() => this.flush(false));
  }

  /** Sends what is ready as one frame. While more of this connection's requests are running, the first call (`held`
   * false) waits one more turn of the event loop instead: their answers come in batches from several workers, often
   * in the next turn's reads, and each frame is a socket write (bench/PROFILE.md, "shorter hops"). A connection whose
   * every request is answered (one in flight) is answered in the turn its answer came; none waits more than one turn. */
  private flush(held: boolean): void {
    if (!held && this.pending > this.ready.length) return void setImmediate(() => this.flush(true));
    const out = this.ready;
    this.ready = [];
    this.pending -= out.length;
    assert(this.pending >= 0, 'a response for every request started, and one only');
    if (this.ws.readyState !== this.ws.OPEN) return;
    // A socket that holds bytes already (bufferedAmount) will hold this frame too, and keep its buffer whole: such a
    // frame is joined in a buffer of its own, its size, so that a client that does not read keeps at most one slab
    // (CLIENT_FRAME_SLAB_BYTES_MAX) beyond its CLIENT_UNSENT_BYTES_MAX, not one per frame, however small.
    const frame = encodeClientFrame(out.length === 1 ? out[0] : out, this.ws.bufferedAmount === 0 ? frameSlab.join : null);
    // Follow a rise at once (the next responses may be as large), a fall slowly.
    const mean = frame.length / out.length;
    this.responseBytes = mean >= this.responseBytes ? mean : this.responseBytes + (mean - this.responseBytes) * (1 - (63 / 64) ** out.length);
    // The callback runs once the frame has left for the kernel: bufferedAmount has shrunk. Right after send, what of
    // the frame the socket did not take (or ws queued) is in bufferedAmount: the slab is free again only at 0.
    this.ws.send(frame, () => this.progress());
    frameSlab.sent(frame, this.ws.bufferedAmount);
    this.progress();
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
      const refusal = clientTokenRefusal(token, info.req.headers.authorization, info.req.url ?? '');
      if (refusal === null) return done(true);
      const body = { error: { code: 'Unauthorized', message: refusal, retryable: false } };
      done(false, 401, JSON.stringify(body), { 'content-type': 'application/json' });
    },
    handleProtocols: (offered) => (offered.has(CLIENT_SUBPROTOCOL) ? CLIENT_SUBPROTOCOL : false),
  });
  wss.on('connection', (ws: WebSocket, _req: IncomingMessage) => {
    if (ws.protocol !== CLIENT_SUBPROTOCOL) {
      ws.close(1002, `use the WebSocket subprotocol ${CLIENT_SUBPROTOCOL}`);
      return;
    }
    const conn = new Connection(ws, ops);
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) return conn.refuse(-1, new KeysliceError('MalformedRequest', 'frames are binary msgpack, not text'));
      let requests;
      try {
        requests = decodeClientRequests(data);
      } catch (err) {
        return conn.refuse(err instanceof FrameError ? err.id : -1, toKeysliceError(err));
      }
      for (const r of requests) {
        if (r instanceof FrameError) conn.refuse(r.id, r);
        else conn.run(r);
      }
    });
    ws.on('error', () => {}); // a broken client connection only ends that connection
  });
  return wss;
}

function errorFrame(id: number, err: KeysliceError): ClientResponseFrame {
  if (err.code === 'Internal') console.error(`keyslice coordinator: internal error: ${err.stack}`);
  return err.details === undefined ? [id, RESULT_ERROR, err.code, err.message] : [id, RESULT_ERROR, err.code, err.message, err.details];
}

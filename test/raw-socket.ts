// Test fixture: HTTP and WebSocket spoken by hand over node:net, for the edge
// cases a well-behaved client never produces (bad framing, stalled bodies, a
// client that does not read). Every wait is bounded.
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import WebSocket from 'ws';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Connects to the host:port of `url` (http:// or ws://). */
export function rawConnect(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** A connection whose answers are gathered as they come, with the error code it met (if any)
 * and whether the server closed it within `closeWithinMs` (for a test that goes on writing). */
export async function watchedConnect(url: string, closeWithinMs = 30_000): Promise<{ socket: Socket; chunks: Buffer[]; error: () => string | undefined; closed: Promise<boolean> }> {
  const socket = await rawConnect(url);
  const chunks: Buffer[] = [];
  let error: string | undefined;
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', (err) => (error = (err as NodeJS.ErrnoException).code));
  const closed = new Promise<boolean>((resolve) => {
    socket.on('close', () => resolve(true));
    setTimeout(() => resolve(false), closeWithinMs);
  });
  return { socket, chunks, error: () => error, closed };
}

/** Collects what the server sends on `socket` until it closes or `timeoutMs` passes. */
export function readAll(socket: Socket, timeoutMs: number): Promise<{ bytes: Buffer; closed: boolean; error?: string }> {
  const chunks: Buffer[] = [];
  return new Promise((resolve) => {
    let error: string | undefined;
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ bytes: Buffer.concat(chunks), closed, error });
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => (error = (err as NodeJS.ErrnoException).code ?? err.message));
    socket.on('close', () => done(true));
  });
}

/** Parses the HTTP responses in `bytes` (Content-Length bodies; a trailing partial one is dropped). */
export function parseResponses(bytes: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let at = 0;
  while (at < bytes.length) {
    const end = bytes.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const [statusLine, ...lines] = bytes.subarray(at, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const colon = l.indexOf(':');
      headers[l.slice(0, colon).trim().toLowerCase()] = l.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (end + 4 + length > bytes.length) break;
    out.push({ status: Number(statusLine.split(' ')[1]), headers, body: bytes.subarray(end + 4, end + 4 + length).toString('utf8') });
    at = end + 4 + length;
  }
  return out;
}

/** Sends `chunks` (written one after another) and returns the responses read until the
 * server closes, or until `timeoutMs` passes. */
export async function rawHttp(url: string, chunks: (string | Buffer)[], timeoutMs = 10_000): Promise<{ responses: RawResponse[]; closed: boolean; error?: string }> {
  const socket = await rawConnect(url);
  const reading = readAll(socket, timeoutMs);
  for (const c of chunks) if (!socket.destroyed) socket.write(c);
  const { bytes, closed, error } = await reading;
  return { responses: parseResponses(bytes), closed, error };
}

/** Request head of a POST to `path` on `url`'s host. */
export function postHead(url: string, path: string, headers: Record<string, string | number>): string {
  const host = new URL(url).host;
  const lines = [`POST ${path} HTTP/1.1`, `Host: ${host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return lines.join('\r\n') + '\r\n\r\n';
}

/** A WebSocket handshake by hand; resolves with the socket once the 101 is read, and the bytes after it. */
export async function rawWebSocket(wsUrl: string, protocol: string, timeoutMs = 10_000): Promise<{ socket: Socket; rest: Buffer }> {
  const socket = await rawConnect(wsUrl);
  const u = new URL(wsUrl);
  const key = randomBytes(16).toString('base64');
  socket.write(
    [`GET ${u.pathname} HTTP/1.1`, `Host: ${u.host}`, 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${key}`, 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Protocol: ${protocol}`, '', ''].join('\r\n'),
  );
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new Error('no handshake answer')), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const onData = (c: Buffer) => {
      got = Buffer.concat([got, c]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.pause();
      clearTimeout(timer);
      const head = got.subarray(0, end).toString('latin1');
      if (!head.startsWith('HTTP/1.1 101')) return fail(new Error(`handshake refused: ${head}`));
      resolve({ socket, rest: got.subarray(end + 4) });
    };
    socket.on('data', onData);
    socket.once('error', fail);
  });
}

/** One masked binary frame from client to server. */
export function clientFrame(payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const len = payload.length;
  const head = len < 126 ? Buffer.from([0x82, 0x80 | len]) : len < 65536 ? Buffer.from([0x82, 0x80 | 126, len >> 8, len & 255]) : Buffer.concat([Buffer.from([0x82, 0x80 | 127]), u64(len)]);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i] ^= mask[i & 3];
  return Buffer.concat([head, mask, body]);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/** A byte stream read in pieces: `take` waits until `n` bytes are there (no copying per chunk). */
class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }
  /** The first `n` bytes (or fewer, if fewer are there) without consuming them. */
  peek(n: number): Buffer {
    if (this.chunks.length > 1 && this.chunks[0].length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks.length === 0 ? Buffer.alloc(0) : this.chunks[0].subarray(0, n);
  }
  take(n: number): Buffer {
    const out = this.peek(n);
    this.chunks[0] = this.chunks[0].subarray(n);
    if (this.chunks[0].length === 0) this.chunks.shift();
    this.length -= n;
    return out;
  }
}

/** Splits the server's (unmasked, unfragmented) frames out of a byte stream; hands on binary payloads. */
export class ServerFrameReader {
  private readonly q = new ByteQueue();
  private need = 2;
  /** Frames of other opcodes (close, ping). */
  other = 0;

  constructor(private readonly onPayload: (payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.q.push(chunk);
    while (this.q.length >= this.need) {
      const head = this.q.peek(10);
      let len = head[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (head.length < 4) return void (this.need = 4);
        len = head.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (head.length < 10) return void (this.need = 10);
        len = Number(head.readBigUInt64BE(2));
        at = 10;
      }
      if (this.q.length < at + len) return void (this.need = at + len);
      const frame = this.q.take(at + len);
      if ((frame[0] & 0x0f) === 2) this.onPayload(frame.subarray(at));
      else this.other++;
      this.need = 2;
    }
  }
}

/** Splits HTTP responses (Content-Length bodies) out of a byte stream. */
export class HttpResponseReader {
  private readonly q = new ByteQueue();
  private need = 0;

  constructor(private readonly onResponse: (r: RawResponse) => void) {}

  push(chunk: Buffer): void {
    this.q.push(chunk);
    while (this.q.length > 0 && this.q.length >= this.need) {
      const all = this.q.peek(Math.max(this.need, Math.min(this.q.length, 64 * 1024)));
      const end = all.indexOf('\r\n\r\n');
      if (end < 0) return void (this.need = this.q.length + 1);
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(all.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (this.q.length < end + 4 + length) return void (this.need = end + 4 + length);
      this.onResponse(parseResponses(this.q.take(end + 4 + length))[0]);
      this.need = 0;
    }
  }
}

/** Resident memory of a process in MB (Linux): now and the peak so far. */
export function memoryMb(pid: number): { rss: number; peak: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Resets the peak that memoryMb reports (Linux: 5 into /proc/<pid>/clear_refs). */
export function resetMemoryPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** The HTTP status of a WebSocket handshake with these headers (101: accepted; -1: no answer). */
export function wsHandshakeStatus(url: string, headers: Record<string, string>, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers, handshakeTimeout: timeoutMs });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', () => resolve(-1));
  });
}

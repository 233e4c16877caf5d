// When the WebSocket API sends a connection its answers (coordinator/router/ws-api.ts): the answers ready in one turn
// of the event loop leave in one frame; while more of the connection's requests are running, they wait one more
// turn for those (so a connection with requests on several workers gets fewer frames, each a socket write), never
// more than one; a connection whose every request is answered is answered in the turn its answer came. In one
// process: the real server and a real WebSocket client on 127.0.0.1, with operations whose results the test settles
// itself, and the frames the server hands to its socket recorded turn by turn.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Operations } from '../coordinator/router/operations.js';
import { attachWebSocketApi } from '../coordinator/router/ws-api.js';
import { CLIENT_FRAME_SLAB_BYTES_MAX, CLIENT_FRAME_SLAB_BYTES_MIN, CLIENT_FRAME_SLAB_SHRINK_MS } from '../shared/limits.js';
import { CLIENT_SUBPROTOCOL, CLIENT_WS_PATH, decodeClientResponses, encodeClientFrame, packClientList, PackedItems, RESULT_OK, type ClientRequestFrame } from '../shared/protocol.js';
import { waitFor } from './elastic-fixture.js';

/** How long a wait on the server or the client may take (idle, a few ms), polled every POLL_MS: a request that never
 * runs, or an answer that never comes, fails the wait with what was seen rather than the test's own timeout. */
const WAIT_MS = 2_000;
const POLL_MS = 2;

/** The end of the next turn: after the jobs that a settle just queued (the server's answer, which schedules its flush)
 * have run, so that this turn's end comes after the flush that they scheduled. */
const turn = () => Promise.resolve().then(() => new Promise<void>((r) => setImmediate(r)));

/** Operations whose every request waits until the test settles it: by its id (the payload's `n`). */
class HeldOperations {
  readonly running = new Map<number, (v: unknown) => void>();
  execute(_op: string, payload: Record<string, unknown>): Promise<unknown> {
    return new Promise((resolve) => this.running.set(payload.n as number, resolve));
  }
  answer(n: number, result: unknown = { n }): void {
    const resolve = this.running.get(n);
    expect(resolve).toBeDefined();
    this.running.delete(n);
    resolve!(result);
  }
  /** Resolves once `count` requests are running; fails after WAIT_MS. */
  async started(count: number): Promise<void> {
    await waitFor(() => this.running.size >= count, `${count} requests running on the server`, WAIT_MS, () => `${this.running.size} running`, POLL_MS);
  }
}

let server: Server;
let ops: HeldOperations;
/** The frames the server handed to its socket: the ids of the answers in each. */
let sent: number[][];
/** The same frames themselves, each with whether its socket held some of it right after the send (bufferedAmount). */
let handed: { frame: Buffer; held: boolean }[];
/** The server's end of the client's connection. */
let serverSide: WebSocket;
let client: WebSocket;
/** The ids the client received, frame by frame. */
let received: number[][];

beforeEach(async () => {
  ops = new HeldOperations();
  sent = [];
  handed = [];
  received = [];
  server = createServer();
  const wss = attachWebSocketApi(ops as unknown as Operations, server);
  wss.on('connection', (ws) => {
    serverSide = ws;
    const send = ws.send.bind(ws) as (data: Buffer, cb?: (err?: Error) => void) => void;
    ws.send = ((data: Buffer, cb?: (err?: Error) => void) => {
      sent.push(decodeClientResponses(data).map((r) => r[0]));
      send(data, cb);
      handed.push({ frame: data, held: ws.bufferedAmount > 0 });
    }) as typeof ws.send;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}${CLIENT_WS_PATH}`, CLIENT_SUBPROTOCOL);
  client.on('message', (data: Buffer) => {
    const answers = decodeClientResponses(data);
    for (const a of answers) expect(a[1]).toBe(RESULT_OK);
    received.push(answers.map((r) => r[0]));
  });
  await new Promise((r, f) => client.once('open', r).once('error', f));
});

afterEach(async () => {
  client.terminate();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** Sends requests 0..count-1 in one frame and waits until all run on the server. */
async function request(count: number): Promise<void> {
  const frames: ClientRequestFrame[] = Array.from({ length: count }, (_, n) => [n, 'GetItem', { n }]);
  client.send(encodeClientFrame(count === 1 ? frames[0] : frames));
  await ops.started(count);
}

/** Waits until the client has received `count` answers; fails after WAIT_MS. */
async function receivedAll(count: number): Promise<void> {
  await waitFor(() => received.flat().length >= count, `${count} answers at the client`, WAIT_MS, () => `received ${JSON.stringify(received)}`, POLL_MS);
}

/** Answers `n` with a blob of `bytes` that passes through (joined in the reused buffer where its socket is empty),
 * and waits until the client has it and the server's socket holds nothing. */
async function answerAndWait(n: number, bytes: number): Promise<void> {
  ops.answer(n, { items: PackedItems.ofList(packClientList([{ n, blob: new Uint8Array(bytes).fill(n) }])) });
  await receivedAll(n + 1);
  await waitFor(() => serverSide.bufferedAmount === 0, 'the server socket empty', WAIT_MS, () => `${serverSide.bufferedAmount} bytes unsent`, POLL_MS);
}

describe('the answers of one WebSocket connection', () => {
  it('one request in flight: its answer leaves in the turn it came', async () => {
    await request(1);
    ops.answer(0);
    await turn();
    expect(sent).toEqual([[0]]);
    await receivedAll(1);
    expect(received).toEqual([[0]]);
  });

  it('answers that come in one turn leave in one frame, in the order they came', async () => {
    await request(3);
    ops.answer(2);
    ops.answer(0);
    ops.answer(1);
    await turn();
    expect(sent).toEqual([[2, 0, 1]]);
    await receivedAll(3);
    expect(received).toEqual([[2, 0, 1]]);
  });

  it('an answer waits one more turn while more requests run, and the answers of that turn join it', async () => {
    await request(3);
    ops.answer(1);
    await turn();
    expect(sent).toEqual([]); // request 0 and 2 still run: 1 waits a turn
    ops.answer(0);
    await turn();
    expect(sent).toEqual([[1, 0]]);
    ops.answer(2);
    await turn();
    expect(sent).toEqual([[1, 0], [2]]); // the last: nothing else runs, so it does not wait
    await receivedAll(3);
    expect(received).toEqual([[1, 0], [2]]);
  });

  it('waits one turn only: a request that runs on does not hold the others back', async () => {
    await request(2);
    ops.answer(0);
    await turn();
    await turn();
    expect(sent).toEqual([[0]]);
    for (let t = 0; t < 5; t++) await turn();
    ops.answer(1);
    await turn();
    expect(sent).toEqual([[0], [1]]);
    await receivedAll(2);
    expect(received).toEqual([[0], [1]]);
  });
});

describe('answers joined in the buffer the server reuses (FrameSlab)', () => {
  it("are not written over while a socket still holds them: a client that reads late gets every item as it was, while another client's answers are joined", async () => {
    // 64 answers of 256 KiB to a client that does not read: far more than loopback's socket buffers take, so most are
    // handed to a socket that cannot take them at once. After each, an answer as large to a second client that reads:
    // its socket takes each at once, and each is joined where a frame still held for the first client could be, over
    // all of it (the kernel took the start of a frame it took in part).
    const COUNT = 64;
    const BYTES = 256 * 1024;
    const OTHER = 1000;
    const other = new WebSocket(client.url, CLIENT_SUBPROTOCOL);
    try {
      await new Promise((r, f) => other.once('open', r).once('error', f));
      const items = new Map<number, Uint8Array>();
      const take = (data: Buffer) => {
        for (const [id, , result] of decodeClientResponses(data)) items.set(id as number, ((result as { items: { blob: Uint8Array }[] }).items[0]).blob);
      };
      client.on('message', take);
      other.on('message', take);
      client.pause();
      await request(COUNT);
      other.send(encodeClientFrame(Array.from({ length: COUNT }, (_, n): ClientRequestFrame => [OTHER + n, 'GetItem', { n: OTHER + n }])));
      await ops.started(2 * COUNT);
      const fill = (n: number) => (n < OTHER ? n : 255 - (n - OTHER));
      const answer = async (n: number) => {
        ops.answer(n, { items: PackedItems.ofList(packClientList([{ n, blob: new Uint8Array(BYTES).fill(fill(n)) }])) });
        // Two turns: the answer waits one while the others run, then leaves alone.
        await turn();
        await turn();
      };
      for (let n = 0; n < COUNT; n++) {
        await answer(n);
        await answer(OTHER + n);
      }
      expect(sent.length).toBe(2 * COUNT);
      // The test means something only where the first client's socket held frames.
      expect(handed.filter((h) => h.held).length).toBeGreaterThan(COUNT / 2);
      client.resume();
      await waitFor(() => items.size >= 2 * COUNT, `${2 * COUNT} answers at the clients`, 10 * WAIT_MS, () => `${items.size} received`, POLL_MS);
      for (const n of Array.from({ length: COUNT }, (_, i) => [i, OTHER + i]).flat()) {
        const blob = items.get(n)!;
        expect(blob.byteLength, `answer ${n}`).toBe(BYTES);
        expect(blob.every((b) => b === fill(n)), `answer ${n}: every byte ${fill(n)}`).toBe(true);
      }
    } finally {
      other.terminate();
    }
  });

  it('cost a client that does not read about the bytes its socket holds, plus one buffer at most: a small answer does not keep a large buffer', async () => {
    // 20 answers of 256 KiB fill loopback's socket buffers while the client does not read (the reused buffer grows to
    // their size); then 44 answers of a few bytes, each handed to a socket that already holds frames. 64 in all: the
    // server starts no more at once (CLIENT_UNSENT_BYTES_MAX at CLIENT_RESPONSE_BYTES_GUESS each).
    const BIG = 20;
    const SMALL = 44;
    client.pause();
    await request(BIG + SMALL);
    for (let n = 0; n < BIG + SMALL; n++) {
      const blob = new Uint8Array(n < BIG ? 256 * 1024 : 8).fill(n);
      ops.answer(n, { items: PackedItems.ofList(packClientList([{ n, blob }])) });
      await turn();
      await turn();
    }
    expect(sent.length).toBe(BIG + SMALL);
    const held = handed.filter((h) => h.held);
    // The test means something only where the socket held most small answers.
    expect(held.filter((h) => h.frame.byteLength < 1024).length).toBeGreaterThan(SMALL / 2);
    // What the held frames keep alive: each distinct buffer under them, whole.
    const buffers = new Set(held.map((h) => h.frame.buffer));
    const kept = [...buffers].reduce((sum, b) => sum + b.byteLength, 0);
    const own = held.reduce((sum, h) => sum + h.frame.byteLength, 0);
    // Frames of their own share Node's 8 KiB pool (a few pools' worth): 64 KiB of slack.
    expect(kept, `${held.length} held frames of ${own} bytes in ${buffers.size} buffers`).toBeLessThanOrEqual(own + CLIENT_FRAME_SLAB_BYTES_MAX + 64 * 1024);
  });

  it('grows for a large answer and goes back to its least size once no large answer has come for CLIENT_FRAME_SLAB_SHRINK_MS', async () => {
    // One answer of 512 KiB (joined in a buffer of its own: it does not fit) grows the reused buffer to its size; a
    // small answer after it is joined there. Past CLIENT_FRAME_SLAB_SHRINK_MS with no large answer, a small one is
    // joined in a buffer of CLIENT_FRAME_SLAB_BYTES_MIN again: the 512 KiB were let go.
    const LARGE = 512 * 1024;
    await request(3);
    await answerAndWait(0, LARGE);
    await answerAndWait(1, 8);
    // Joined in the reused buffer (its socket took it at once), which has grown to hold the large answer.
    expect(handed[1].held).toBe(false);
    expect(handed[1].frame.buffer.byteLength).toBeGreaterThan(LARGE);
    await new Promise((r) => setTimeout(r, CLIENT_FRAME_SLAB_SHRINK_MS * 1.5));
    await answerAndWait(2, 8);
    expect(handed[2].held).toBe(false);
    expect(handed[2].frame.buffer.byteLength).toBe(CLIENT_FRAME_SLAB_BYTES_MIN);
  });

  it('is not grown by an answer that msgpackr packs whole (nothing passes through), which is never joined in it', async () => {
    // A small answer whose items pass through is joined in the reused buffer; then one of 2 MiB packed whole (an
    // object holding a blob, as an answer of items as objects is), larger than any this file's answers grew the buffer
    // to; then a small one joined again, in a buffer no larger than the first's. (Once every frame the socket took was
    // weighed, joined or not: the 2 MiB answer made the next buffer 2 MiB, allocated for frames of a few bytes.)
    const WHOLE = 2 * 1024 * 1024;
    await request(3);
    await answerAndWait(0, 8);
    const before = handed[0].frame.buffer.byteLength;
    expect(before).toBeLessThan(WHOLE);
    ops.answer(1, { n: 1, blob: new Uint8Array(WHOLE).fill(1) });
    await receivedAll(2);
    await waitFor(() => serverSide.bufferedAmount === 0, 'the server socket empty', WAIT_MS, () => `${serverSide.bufferedAmount} bytes unsent`, POLL_MS);
    expect(handed[1].frame.byteLength).toBeGreaterThan(WHOLE);
    await answerAndWait(2, 8);
    expect(handed[2].held).toBe(false);
    expect(handed[2].frame.buffer.byteLength, 'the buffer the small answer after the whole one was joined in').toBeLessThanOrEqual(before);
  });

  it('goes down to its least size under a mixed stream of answers none of which is joined in it: packed whole, or larger than any buffer it may grow to', async () => {
    // One answer of 512 KiB that passes through grows the reused buffer; then, every 100 ms for over twice
    // CLIENT_FRAME_SLAB_SHRINK_MS, answers that pass through but are larger than CLIENT_FRAME_SLAB_BYTES_MAX (each in a
    // buffer of its own, its size) and answers of 512 KiB packed whole, by turns; a small answer joined after them is in
    // a buffer of CLIENT_FRAME_SLAB_BYTES_MIN. (Once the answers packed whole, and then those larger than
    // CLIENT_FRAME_SLAB_BYTES_MAX, counted as the largest frame of their time and kept the 512 KiB: each kind alone
    // keeps it, so this one stream catches either.)
    const LARGE = 512 * 1024;
    const HUGE = CLIENT_FRAME_SLAB_BYTES_MAX + 1024;
    const COUNT = 60;
    await request(COUNT);
    await answerAndWait(0, LARGE);
    const until = performance.now() + CLIENT_FRAME_SLAB_SHRINK_MS * 2.5;
    let n = 1;
    for (; n < COUNT - 1 && performance.now() < until; n++) {
      if (n % 2 === 1) {
        await answerAndWait(n, HUGE);
        const own = handed[handed.length - 1].frame;
        expect(own.buffer.byteLength, 'an answer larger than any reused buffer is in one of its own').toBe(own.byteLength);
      } else {
        ops.answer(n, { n, blob: new Uint8Array(LARGE).fill(n) });
        await receivedAll(n + 1);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(performance.now(), `${n} answers did not span the time`).toBeGreaterThanOrEqual(until);
    await waitFor(() => serverSide.bufferedAmount === 0, 'the server socket empty', WAIT_MS, () => `${serverSide.bufferedAmount} bytes unsent`, POLL_MS);
    await answerAndWait(n, 8);
    const last = handed[handed.length - 1];
    expect(last.held).toBe(false);
    expect(last.frame.buffer.byteLength, 'the buffer the small answer was joined in').toBe(CLIENT_FRAME_SLAB_BYTES_MIN);
    for (n++; n < COUNT; n++) ops.answer(n);
  });

  it('grown by one large answer, goes down to the answers that keep coming, not kept at the large size by them', async () => {
    // One answer of 1 MiB grows the reused buffer; answers of 128 KiB (larger than CLIENT_FRAME_SLAB_BYTES_MIN) then
    // come every 50 ms for over twice CLIENT_FRAME_SLAB_SHRINK_MS: the buffer they are joined in goes down to their
    // size, the 1 MiB let go. (Once it shrank only after CLIENT_FRAME_SLAB_SHRINK_MS with no frame above the least
    // size: such a stream kept the largest slab for the life of the process.)
    const LARGE = 1024 * 1024;
    const MID = 128 * 1024;
    const COUNT = 60;
    await request(COUNT);
    await answerAndWait(0, LARGE);
    const until = performance.now() + CLIENT_FRAME_SLAB_SHRINK_MS * 2.5;
    let n = 1;
    for (; n < COUNT - 1 && performance.now() < until; n++) {
      await answerAndWait(n, MID);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(performance.now(), `${n} answers of ${MID} bytes did not span the time`).toBeGreaterThanOrEqual(until);
    const last = handed[handed.length - 1];
    expect(last.frame.byteLength).toBeGreaterThan(MID);
    expect(last.frame.buffer.byteLength, 'the buffer the last 128 KiB answer was joined in').toBeLessThan(LARGE);
    for (; n < COUNT; n++) ops.answer(n);
  });
});

// A WebSocket server on 127.0.0.1 that speaks the client protocol as a router does, for the client's own behaviour
// where a real router cannot be made to do it on cue: refuse WrongOwner at the end of its tries (client-refused),
// answer late or never, close mid-range, answer several requests in one frame (item-pages-frames).
import { WebSocketServer, type WebSocket } from 'ws';
import { CLIENT_SUBPROTOCOL, decodeClientRequests, encodeClientFrame, type ClientRequestFrame, type ClientResponseFrame } from '../shared/protocol.js';

export interface FakeRouter {
  url: string;
  /** Requests it got, in order. */
  requests: ClientRequestFrame[];
  /** How many requests each frame it got carried, in order. */
  frameSizes: number[];
  close(): Promise<void>;
}

/** Answers the requests of each frame it gets with one frame of `answer`'s answers, in order; a request that `answer`
 * answers null gets none (the test may answer it later on `ws`, or close it). */
export async function fakeRouter(answer: (request: ClientRequestFrame, ws: WebSocket) => ClientResponseFrame | null): Promise<FakeRouter> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => CLIENT_SUBPROTOCOL });
  await new Promise((r) => wss.once('listening', r));
  const requests: ClientRequestFrame[] = [];
  const frameSizes: number[] = [];
  wss.on('connection', (ws) => {
    ws.on('message', (data: Buffer) => {
      const answers: ClientResponseFrame[] = [];
      const frame = decodeClientRequests(data);
      frameSizes.push(frame.length);
      for (const r of frame) {
        if (!Array.isArray(r)) throw r; // a FrameError: the client sent what a router could not read
        requests.push(r);
        const a = answer(r, ws);
        if (a !== null) answers.push(a);
      }
      if (answers.length > 0 && ws.readyState === ws.OPEN) ws.send(encodeClientFrame(answers));
    });
  });
  return {
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}/ws`,
    requests,
    frameSizes,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => resolve());
      }),
  };
}

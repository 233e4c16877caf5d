// A slice node's links to its peers, for replication (docs/replication.md): the
// node dials each peer that its assignment names (the URL the coordinator's map
// has for it), with the cluster secret, and sends only Replicate frames on that
// link; the peer answers on its own link back, so nothing here waits for a reply.
// The link names this node's protocol version (NODE_PROTOCOL_HEADER: a peer of
// another version refuses it), and the peer greets with Hello, whose version must
// be this node's before any frame is sent; anything else it sends on this link
// breaks the protocol and the link is dropped and dialed again.
//
// Bounded and lossy by design: frames wait (up to PEER_LINK_QUEUE_BYTES_MAX) while
// the link is being dialed or in the socket's buffer; past that, or to a peer that
// cannot be reached they are dropped, since the replication core resends what was
// not acknowledged (a leader's heartbeat) and the coordinator repeats its election.
// A lost link is dialed again after a back-off that doubles up to a bound.
import WebSocket from 'ws';
import {
  INTERNAL_FRAME_BYTES_MAX,
  NODE_CONNECT_TIMEOUT_MS,
  NODE_RECONNECT_DELAY_MS_MAX,
  NODE_RECONNECT_DELAY_MS_MIN,
  PEER_LINK_QUEUE_BYTES_MAX,
} from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame } from '../shared/protocol.js';
import { backoffMs } from '../shared/timeout.js';

class PeerLink {
  private ws: WebSocket | null = null;
  private open = false;
  private queue: Buffer[] = [];
  private queuedBytes = 0;
  /** Dials that failed since the peer last greeted: the next waits backoffMs of it (NODE_RECONNECT_DELAY_MS_*). */
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private lastProblem = '';
  /** Frames dropped (a count, for the curious; the core resends what matters). */
  dropped = 0;

  constructor(
    readonly node: number,
    readonly url: string,
    private readonly secret: string,
    private readonly log: (line: string) => void,
  ) {
    this.connect();
  }

  send(frame: Buffer): void {
    if (this.open) {
      // A socket that holds the bound already: the peer is not keeping up, and the core resends.
      if (this.ws!.bufferedAmount + frame.length <= PEER_LINK_QUEUE_BYTES_MAX) this.ws!.send(frame);
      else this.dropped++;
      return;
    }
    // Dialing: the first frames of a link wait for it, within the bound.
    if (this.ws !== null && this.queuedBytes + frame.length <= PEER_LINK_QUEUE_BYTES_MAX) {
      this.queue.push(frame);
      this.queuedBytes += frame.length;
      return;
    }
    this.dropped++;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.ws?.terminate();
    this.ws = null;
  }

  private connect(): void {
    this.timer = undefined;
    if (this.closed) return;
    const ws = new WebSocket(this.url, {
      maxPayload: INTERNAL_FRAME_BYTES_MAX,
      handshakeTimeout: NODE_CONNECT_TIMEOUT_MS,
      headers: { [CLUSTER_SECRET_HEADER]: this.secret, [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) },
      generateMask: () => {}, // as the coordinator's links: ours end to end, with the cluster secret
    });
    this.ws = ws;
    ws.binaryType = 'nodebuffer';
    // Frames wait for the peer's Hello, not only for the socket's open: a peer of another protocol version (one
    // that does not check NODE_PROTOCOL_HEADER) must get none of them.
    const greeted = () => {
      this.open = true;
      this.failures = 0;
      this.lastProblem = '';
      const queued = this.queue;
      this.queue = [];
      this.queuedBytes = 0;
      for (const f of queued) ws.send(f);
    };
    ws.on('unexpected-response', (_req, res) => {
      this.problem(`peer ${this.node} at ${this.url} refused the link (HTTP ${res.statusCode}${res.statusCode === 401 ? ': the cluster secrets differ' : res.statusCode === 400 ? ': it speaks another node protocol version' : ''})`);
      ws.terminate();
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      let problem: string;
      try {
        // decodeNodeFrame refuses a Hello of another protocol version, naming both.
        const frame = isBinary ? decodeNodeFrame(data, 'coordinator') : undefined;
        if (frame?.[0] === NodeFrame.Hello && !this.open) return greeted(); // its greeting; it answers on its own link
        problem = 'sent something other than one Hello on a replication link';
      } catch (err) {
        problem = `sent a frame this node refuses (${(err as Error).message})`;
      }
      this.problem(`peer ${this.node} at ${this.url} ${problem}; dialing again`);
      ws.terminate();
    });
    ws.on('error', () => {}); // 'close' follows and handles it
    ws.on('close', () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.open = false;
      this.dropped += this.queue.length;
      this.queue = [];
      this.queuedBytes = 0;
      if (this.closed) return;
      this.timer = setTimeout(() => this.connect(), backoffMs(this.failures++, NODE_RECONNECT_DELAY_MS_MIN, NODE_RECONNECT_DELAY_MS_MAX));
      this.timer.unref();
    });
  }

  private problem(line: string): void {
    if (line !== this.lastProblem) this.log(line);
    this.lastProblem = line;
  }
}

/** The node's links to its peers, by node index. */
export class PeerLinks {
  private readonly links = new Map<number, PeerLink>();

  constructor(
    private readonly secret: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Dials the peers of the latest assignment; drops links to nodes no longer named (or at a new URL). */
  setPeers(peers: [node: number, url: string][]): void {
    const want = new Map(peers);
    for (const [node, link] of this.links) {
      if (want.get(node) !== link.url) {
        link.close();
        this.links.delete(node);
      }
    }
    for (const [node, url] of want) if (!this.links.has(node)) this.links.set(node, new PeerLink(node, url, this.secret, this.log));
  }

  /** Sends one encoded Replicate frame to `node`; dropped if it is not a peer or cannot be reached. */
  send(node: number, frame: Buffer): void {
    this.links.get(node)?.send(frame);
  }

  close(): void {
    for (const link of this.links.values()) link.close();
    this.links.clear();
  }
}

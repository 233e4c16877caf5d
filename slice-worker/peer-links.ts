// A worker thread's links to the workers of its peers, for replication (docs/replication.md, node protocol 25):
// a worker's replicas send what they have for a peer node straight to the worker thread of the slice there, on
// that worker's batch port (batch-port.ts), so that neither node's main thread is on the path of a write. To learn
// where those are, the link dials the peer node's URL (the one Assign's peers name) with the cluster secret: the
// peer greets with Hello, which names its worker count and each worker's batch port; the link then dials every one
// of those ports on the peer's host, and is open once all are. The node connection stays open and sends nothing
// more: it and the batch ports live and die together (a peer that restarts listens on new batch ports, and its
// node connection closing is how the link learns it), one lost closes the rest, and the link dials again.
// Both dials name this node's protocol version (NODE_PROTOCOL_HEADER: a peer of another version refuses them), and
// the Hello's version must be this node's before any frame is sent; anything else the peer sends on either breaks
// the protocol and the link is dropped and dialed again.
//
// What a turn sends a peer node is split by the worker that owns each slice there (workerOf with the peer's worker
// count), and goes as one Replicate frame per worker: the messages of one slice from this worker all go on one
// socket, their bytes in the order they were sent (a worker's folded KeepAlives and AppendOks go after them,
// which replicas take in any order: a later commit point or sentAt wins). Its KeepAlive and AppendOk messages are folded here, into one entry of
// numbers of each kind per worker there (a worker does not know its peers' worker counts: folding them per node and
// splitting them again per worker wrote every number twice).
//
// Bounded and lossy by design: entries wait (up to PEER_LINK_QUEUE_BYTES_MAX shared out among the node's workers, as
// what they hold: a message's bytes copied out of the buffer they view, counted with their copy's overhead) while
// the link is being dialed or in a socket's buffer; past that, or to a peer that cannot be reached, they are dropped, since the replication core
// resends what was not acknowledged (a leader's heartbeat) and the coordinator repeats its election. A lost link is
// dialed again after a back-off that doubles up to a bound.
import { WebSocket } from '../shared/ws.js';
import { workerOf } from '../shared/hashing.js';
import {
  INTERNAL_FRAME_BYTES_MAX,
  NODE_CONNECT_TIMEOUT_MS,
  NODE_RECONNECT_DELAY_MS_MAX,
  NODE_RECONNECT_DELAY_MS_MIN,
  PEER_LINK_PING_MS,
  PEER_LINK_QUEUE_BYTES_MAX,
  PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES,
  PEER_LINK_QUEUED_MESSAGE_BYTES,
  REPLICATION_FRAME_ENTRIES_MAX,
  SLICE_COUNT_MAX,
} from '../shared/limits.js';
import { CLUSTER_SECRET_HEADER, decodeNodeFrame, encodeNodeFrame, NODE_PROTOCOL_HEADER, NODE_PROTOCOL_VERSION, NodeFrame, type WireReplicateEntry } from '../shared/protocol.js';
import { foldedType, foldedWidth, foldInto, type FoldableMessage, type FoldedMessage } from '../shared/replication-protocol.js';
import { backoffMs } from '../shared/timeout.js';
import { TRACE_TURNS, turns } from './turn-trace.js';

/** What a worker hands its link to a peer node: a message's bytes, or a KeepAlive or AppendOk, which the link folds
 * into numbers (byWorker). */
export type PeerEntry = [slice: number, message: Uint8Array | FoldableMessage];

/** What an entry waiting while the link is dialed counts against the queue's bound: what it holds then. A message's
 * bytes are copied (owned): their length and their copy's objects (PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES); a KeepAlive
 * or AppendOk its object (PEER_LINK_QUEUED_MESSAGE_BYTES: it is folded only when sent). */
const entryBytes = ([, m]: PeerEntry): number => (m instanceof Uint8Array ? m.byteLength + PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES : PEER_LINK_QUEUED_MESSAGE_BYTES);

/** The entry as it waits: a message's bytes copied into an ArrayBuffer of their own. The worker's bytes view a buffer
 * that other messages share (writeAppend's arena, 256 KiB; msgpackr's, as large as the largest message it packed),
 * and a view kept keeps all of it alive: a dialing link that held a few small views held whole arenas, which the
 * bound, counting the views' bytes, did not see. Not done on an open link's way out: encodeNodeFrame copies them
 * into the frame at once, and the views die with the turn. */
const owned = (e: PeerEntry): PeerEntry => (e[1] instanceof Uint8Array ? [e[0], new Uint8Array(e[1])] : e);

function dial(url: string, secret: string): WebSocket {
  const ws = new WebSocket(url, {
    maxPayload: INTERNAL_FRAME_BYTES_MAX,
    handshakeTimeout: NODE_CONNECT_TIMEOUT_MS,
    headers: { [CLUSTER_SECRET_HEADER]: secret, [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) },
    generateMask: () => {}, // as the coordinator's links: ours end to end, with the cluster secret
  });
  ws.binaryType = 'nodebuffer';
  ws.on('error', () => {}); // 'close' follows and handles it
  return ws;
}

/** Splits entries for a node of `workers` workers (a turn's, or what waited while the link was dialed: several turns',
 * split by the worker count of the Hello that opened it) by the worker that owns each slice there (one list per
 * worker), folding the KeepAlives and the AppendOks for each worker into one entry of numbers each (foldInto): folded
 * once, for the socket they go on, after the messages' bytes. An entry holds at most SLICE_COUNT_MAX
 * slices (the receiver refuses more and closes the link: checkReplicationMessage), and a follower answers every Append
 * it took: a turn that took more than that many (a worker that fell behind, catching up) sends a full entry as it is
 * and starts another. */
export function byWorker(entries: PeerEntry[], workers: number): WireReplicateEntry[][] {
  const out: WireReplicateEntry[][] = Array.from({ length: workers }, () => []);
  /** Per worker w, its KeepAlives at 2w and its AppendOks at 2w + 1. */
  let folded: (FoldedMessage | undefined)[] | null = null;
  for (const [slice, m] of entries) {
    const w = workers === 1 ? 0 : workerOf(slice, workers);
    if (m instanceof Uint8Array) {
      out[w].push([slice, m]);
      continue;
    }
    folded ??= new Array<FoldedMessage | undefined>(2 * workers);
    const k = 2 * w + (m.type === 'KeepAlive' ? 0 : 1);
    const f = folded[k];
    if (f !== undefined && f.slices.length < foldedWidth(f.type) * SLICE_COUNT_MAX) {
      foldInto(f.slices, slice, m);
      continue;
    }
    if (f !== undefined) out[w].push([f.slices[0], f]);
    const slices: number[] = [];
    foldInto(slices, slice, m);
    folded[k] = { type: foldedType(m), slices };
  }
  for (let k = 0; k < (folded?.length ?? 0); k++) {
    const f = folded![k];
    if (f !== undefined) out[k >> 1].push([f.slices[0], f]);
  }
  return out;
}

class PeerLink {
  /** The connection to the peer node (its Hello), while dialed or open; null while waiting to dial again. */
  private ws: WebSocket | null = null;
  /** The sockets to the peer's workers' batch ports, by worker, once its Hello came. */
  private sockets: WebSocket[] | null = null;
  /** Every batch port is open: frames go out at once. */
  private open = false;
  private queue: PeerEntry[] = [];
  private queuedBytes = 0;
  /** Dials that failed since the peer last greeted: the next waits backoffMs of it (NODE_RECONNECT_DELAY_MS_*). */
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private lastProblem = '';
  /** Messages (one slice's each: bytes, a KeepAlive or an AppendOk, as the worker handed them) or frames (one
   * worker's part of a turn) dropped since the last report (the core resends what matters; problem() says how many). */
  dropped = 0;
  /** The ping of the node connection: also the wait for its Hello. */
  private pinger: NodeJS.Timeout | undefined;

  constructor(
    readonly node: number,
    readonly url: string,
    private readonly secret: string,
    private readonly self: number,
    private readonly log: (line: string) => void,
    /** This worker's share of PEER_LINK_QUEUE_BYTES_MAX. */
    private readonly queueBytesMax: number,
  ) {
    this.connect();
  }

  /** A turn's entries for this peer node: sent at once while the link is open, else held within queueBytesMax. */
  send(entries: PeerEntry[]): void {
    if (this.open) return this.sendNow(entries);
    // Dialing: the first entries of a link wait for it, within the bound.
    for (const e of entries) {
      const size = entryBytes(e);
      if (this.ws !== null && this.queuedBytes + size <= this.queueBytesMax) {
        this.queue.push(owned(e));
        this.queuedBytes += size;
      } else this.dropped++;
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger); // (lost() below returns early for a link waiting to dial again)
    this.ws?.terminate();
    this.lost(this.ws);
  }

  private sendNow(entries: PeerEntry[]): void {
    const sockets = this.sockets!;
    // The bound holds for the link, all its sockets together, as for the entries that wait while it is dialed.
    let buffered = 0;
    for (const s of sockets) buffered += s.bufferedAmount;
    const lists = byWorker(entries, sockets.length);
    for (let w = 0; w < lists.length; w++) {
      const list = lists[w];
      for (let i = 0; i < list.length; i += REPLICATION_FRAME_ENTRIES_MAX) {
        const frame = encodeNodeFrame([NodeFrame.Replicate, this.self, list.length <= REPLICATION_FRAME_ENTRIES_MAX ? list : list.slice(i, i + REPLICATION_FRAME_ENTRIES_MAX)]);
        // Sockets that hold the bound already: the peer's workers are not keeping up, and the core resends.
        if (buffered + frame.length <= this.queueBytesMax) {
          sockets[w].send(frame);
          if (TRACE_TURNS) turns.peerFramesOut++;
          buffered += frame.length;
        } else this.dropped++;
      }
    }
  }

  private connect(): void {
    this.timer = undefined;
    if (this.closed) return;
    const ws = dial(this.url, this.secret);
    this.ws = ws;
    ws.on('error', (err: NodeJS.ErrnoException) => this.problem(`peer ${this.node} at ${this.url}: ${err.code ?? err.message}`));
    // No Hello within the connect timeout, or no pong to the last ping by the next: the peer is gone or stuck.
    let ponged = true;
    ws.on('pong', () => (ponged = true));
    clearInterval(this.pinger);
    this.pinger = setInterval(() => {
      if (this.ws !== ws) return;
      if (!ponged || (this.sockets === null && ws.readyState === ws.OPEN)) {
        this.problem(`peer ${this.node} at ${this.url} ${ponged ? 'sent no Hello' : 'answered no ping'} within ${PEER_LINK_PING_MS} ms; dialing again`);
        return void ws.terminate();
      }
      if (ws.readyState !== ws.OPEN) return;
      ponged = false;
      ws.ping();
    }, Math.max(PEER_LINK_PING_MS, NODE_CONNECT_TIMEOUT_MS));
    this.pinger.unref();
    ws.on('unexpected-response', (_req, res) => {
      this.problem(`peer ${this.node} at ${this.url} refused the link (HTTP ${res.statusCode}${res.statusCode === 401 ? ': the cluster secrets differ' : res.statusCode === 400 ? ': it speaks another node protocol version' : ''})`);
      ws.terminate();
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      let problem: string;
      try {
        // decodeNodeFrame refuses a Hello of another protocol version, naming both, and checks the ports whole.
        const frame = isBinary ? decodeNodeFrame(data, 'coordinator') : undefined;
        if (frame?.[0] === NodeFrame.Hello && this.sockets === null && this.ws === ws) return this.dialWorkers(ws, frame[5]);
        problem = 'sent something other than one Hello on a replication link';
      } catch (err) {
        problem = `sent a frame this node refuses (${(err as Error).message})`;
      }
      this.problem(`peer ${this.node} at ${this.url} ${problem}; dialing again`);
      ws.terminate();
    });
    ws.on('close', () => this.lost(ws));
  }

  /** The peer's Hello came on `ws`: dials each of its workers' batch ports (on the host this link reaches it at;
   * URL.hostname keeps an IPv6 address's brackets). Frames go out once all are open. */
  private dialWorkers(ws: WebSocket, ports: number[]): void {
    const host = new URL(this.url).hostname;
    let open = 0;
    this.sockets = ports.map((port, w) => {
      const s = dial(`ws://${host}:${port}`, this.secret);
      s.on('open', () => {
        if (++open === ports.length && this.ws === ws) this.opened();
      });
      s.on('unexpected-response', (_req, res) => {
        this.problem(`worker ${w} of peer ${this.node} (port ${port}) refused the link (HTTP ${res.statusCode})`);
        s.terminate();
      });
      // A batch port this node cannot reach (a firewall that lets the peer's node port through but not its workers'
      // ports) fails here, link after link: said, so that replication that never starts is not silent.
      s.on('error', (err: NodeJS.ErrnoException) => this.problem(`worker ${w} of peer ${this.node} (${host}:${port}): ${err.code ?? err.message}`));
      // A batch port answers only batches, which a replication link never sends.
      s.on('message', () => {
        this.problem(`worker ${w} of peer ${this.node} sent a frame on a replication link; dialing again`);
        s.terminate();
      });
      s.on('close', (code, reason) => {
        if (code === 1008) this.problem(`worker ${w} of peer ${this.node} closed the link: ${reason.toString()}`);
        if (this.ws === ws) ws.terminate(); // one lost: the rest go, and the link dials again
      });
      return s;
    });
  }

  private opened(): void {
    this.open = true;
    this.failures = 0;
    this.lastProblem = '';
    const queued = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    if (queued.length > 0) this.sendNow(queued);
  }

  /** The node connection `ws` closed (or the link is closed): its batch ports go too, and what waited is dropped. */
  private lost(ws: WebSocket | null): void {
    if (this.ws !== ws || ws === null) return;
    this.ws = null;
    this.open = false;
    for (const s of this.sockets ?? []) s.terminate();
    this.sockets = null;
    this.dropped += this.queue.length;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.closed) return void clearInterval(this.pinger);
    this.timer = setTimeout(() => this.connect(), backoffMs(this.failures++, NODE_RECONNECT_DELAY_MS_MIN, NODE_RECONNECT_DELAY_MS_MAX));
    this.timer.unref();
  }

  private problem(line: string): void {
    if (line !== this.lastProblem) this.log(this.dropped > 0 ? `${line} (${this.dropped} messages or frames for it dropped since the last such line)` : line);
    if (line !== this.lastProblem) this.dropped = 0;
    this.lastProblem = line;
  }
}

/** A worker's links to its replicas' peer nodes, by node index. `self`: this node's index in the map (the sender of
 * every frame). */
export class PeerLinks {
  private readonly links = new Map<number, PeerLink>();

  constructor(
    private readonly secret: string,
    private readonly self: number,
    private readonly log: (line: string) => void,
    /** The node's worker count: each worker's links hold at most its share of PEER_LINK_QUEUE_BYTES_MAX. */
    private readonly workers: number,
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
    for (const [node, url] of want) if (!this.links.has(node)) this.links.set(node, new PeerLink(node, url, this.secret, this.self, this.log, Math.floor(PEER_LINK_QUEUE_BYTES_MAX / this.workers)));
  }

  /** Sends a turn's entries for `node` (messages' bytes, KeepAlives, AppendOks) to its workers; dropped if it is not
   * a peer or cannot be reached. */
  send(node: number, entries: PeerEntry[]): void {
    this.links.get(node)?.send(entries);
  }

  close(): void {
    for (const link of this.links.values()) link.close();
    this.links.clear();
  }
}

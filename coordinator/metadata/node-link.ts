// The coordinator's connection to one slice node. Ops bound for the node are
// queued per worker thread and sent in shared frames (send-queue.ts says when);
// replies come back per worker and settle each op's promise in order. While
// the node is not connected, ops fail at once with a retryable Unavailable
// error; the link keeps reconnecting.
// Every frame from the node is checked whole before use; a node whose Hello
// names a data folder or cluster the coordinator does not accept for this
// address (admit() says why) is not assigned slices, and is asked again on
// each reconnect.
//
// A router's link (assignment null) never sends Assign or Epoch: the node's slices and
// epoch are the coordinator's to set. It sends batches at the epoch of the router's copy
// of the map; a node at another epoch refuses them (WrongOwner) and the router catches up.
// A router's link also dials each worker's batch port (named in Hello, node protocol 20)
// and sends each worker's batches there, one frame per worker, so that a request skips
// the node's main thread (slice-worker/batch-port.ts). The link is ready once all of them
// are open, and the node's connection and its batch ports live and die together: one
// lost closes the rest, which fails what is in flight, and the link dials again. The
// coordinator's link keeps its batches on the node's connection, in order with its Assign
// and Epoch frames.
import { performance } from 'node:perf_hooks';
import { WebSocket } from '../../shared/ws.js';
import { assert, KeysliceError } from '../../shared/errors.js';
import {
  INTERNAL_FRAME_BYTES_MAX,
  NODE_CONNECT_TIMEOUT_MS,
  NODE_RECONNECT_DELAY_MS_MAX,
  NODE_RECONNECT_DELAY_MS_MIN,
  NODE_REQUEST_TIMEOUT_MS,
  REPLICATION_FRAME_ENTRIES_MAX,
} from '../../shared/limits.js';
import { workerOf } from '../../shared/hashing.js';
import { backoffMs } from '../../shared/timeout.js';
import { COORDINATOR } from '../../shared/replication-protocol.js';
import {
  checkSliceResult,
  closeReason,
  CLUSTER_SECRET_HEADER,
  decodeNodeFrame,
  decodeSliceResults,
  encodeNodeFrame,
  encodeSliceOps,
  errorFromResult,
  errorOfBatchError,
  MalformedFrame,
  NodeFrame,
  NODE_PROTOCOL_HEADER,
  NODE_PROTOCOL_VERSION,
  RESULT_ERROR,
  RESULT_OK,
  type AssignReplication,
  type BatchErrorFrame,
  type CoordinatorNodeFrame,
  type DecodedReplicateEntry,
  type ReplicateEntry,
  type ResultOf,
  type SliceOpMessage,
  type SliceOpResult,
} from '../../shared/protocol.js';
import { SendQueue, type FrameParts } from './send-queue.js';

/** One op in flight: its answer is checked against it (checkSliceResult) before it resolves. */
type Settle = { op: SliceOpMessage; resolve: (v: unknown) => void; reject: (e: Error) => void };
/** A batch sent and not yet answered: `epoch`, the one it was sent at (a node refuses it for its epoch only at another). */
type InFlight = { waiting: Map<number, Settle[]>; timer: NodeJS.Timeout; queue: SendQueue<Settle>; sentAt: number; epoch: number };

export type LinkState = 'connecting' | 'assigning' | 'ready' | 'closed';

/** What of a node's Hello decides whether it is admitted (its identity). Its worker count and its incarnation (its
 * process's id) are not asked about: the link keeps them (workerCount, incarnation). */
export interface NodeHello {
  nodeId: string;
  clusterId: string | null;
}

export class NodeLink {
  state: LinkState = 'connecting';
  workerCount = 0;
  private ws: WebSocket | null = null;
  /** A router's connections to the node's workers' batch ports, by worker (null: batches go on `ws`). */
  private batchSockets: WebSocket[] | null = null;
  private queue = new SendQueue<Settle>(0, (parts) => this.sendBatch(parts));
  private nextBatchId = 1;
  private readonly inFlight = new Map<number, InFlight>();
  /** Dials that failed since the link was last ready: the next waits backoffMs of it (NODE_RECONNECT_DELAY_MS_*). */
  private reconnectFailures = 0;
  private readyWaiters: (() => void)[] = [];
  /** Counts the node's greetings: a slice move gives up if either side reconnected
   * (and so was assigned its slices afresh) while it ran. */
  generation = 0;
  /** The incarnation of the node process whose Hello this link last took (null: none yet). A later Hello of another
   * one says the node restarted (logged); of the same one, that only the connection went and came back. What the
   * coordinator kept of the node's workers goes at either (ReplicaLeaders.linkUp: each took its Assign since). */
  incarnation: string | null = null;
  private lastProblem = '';
  /** Why the coordinator does not use this node although it answers ('' when it does). */
  refusal = '';
  private assignedEpoch = -1;
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** When the link last stopped being ready (performance.now()'s clock, as RouterView.upSince it is compared with: a wall
   * clock stepped between the two misordered them; 0: never). */
  lostAt = 0;
  /** Called when the link becomes ready or stops being ready (the routers' feed says which nodes are up). */
  onStateChange: () => void = () => {};
  /** Replication messages from the node (a Replicate frame's entries; coordinator/metadata/replica-leaders.ts). */
  onReplicate: (entries: DecodedReplicateEntry[]) => void = () => {};
  /** When anything last came from the node (performance.now): a frame on any of its connections, a pong to probe's
   * ping, or its heartbeat (heard). The one clock of a node's silence outside elections: Membership pings each link
   * every turn, so a node whose event loop runs is heard at least that often, and a frozen one (SIGSTOP, its link open)
   * is not (Membership.countsUp; docs/replication.md, "A new replica that freezes"). */
  heardAt = performance.now();
  /** Assigns sent on the ready link (reassign) whose Assigned has not come back yet. */
  private reassigning = 0;
  /** Assigns sent on the ready link (reassign) since the link was made: a slice move gives up when its
   * source or target got one during the move (slice-mover.ts). */
  reassignsSent = 0;
  /** A reassign came while the first Assign of this connection was in flight. */
  private reassignWhenReady = false;
  /** When abandonInFlight last gave up what the link held (performance.now; -Infinity on a new connection): the node
   * is still taken as silent while nothing was heard from it since (heardAt). */
  private abandonedAt = -Infinity;
  /** probe's ping on this connection not answered yet: no other is sent until its pong comes. A frozen node reads
   * nothing, so each ping would wait in the socket's buffer for as long as it stays frozen (two a second, for good);
   * a later pong would say no more than this one's will. False on a new connection. */
  private pingOutstanding = false;

  constructor(
    readonly url: string,
    /** Null: a router's link, which uses the node as the coordinator assigned it. */
    private readonly assignment: (() => { epoch: number; sliceCount: number; slices: number[]; clusterId: string; replication: AssignReplication | null }) | null,
    private readonly currentEpoch: () => number,
    private readonly log: (line: string) => void,
    private readonly clusterSecret = '',
    /** Null to take the node; otherwise why not (said once in the log, kept in `refusal`). */
    private readonly admit: (hello: NodeHello) => string | null = () => null,
  ) {
    this.connect();
  }

  /** Whether an Assign sent by reassign is not answered yet (the node may take it at any time). */
  get reassignInFlight(): boolean {
    return this.reassigning > 0;
  }

  /** `ws` (by default the link's connection) when it is the link's connection and open, else null. The one test of
   * whether anything is sent on it or taken from it: a connection the link ended (protocolError, a malformed frame, a
   * refused Hello: terminate) is not open at once, though ws still hands over the frames read with the one that ended
   * it, until its 'close' comes. */
  private openConnection(ws: WebSocket | null = this.ws): WebSocket | null {
    return ws !== null && ws === this.ws && ws.readyState === WebSocket.OPEN ? ws : null;
  }

  /** Tells the node that the map moved on, so that it accepts batches of the new epoch. */
  sendEpoch(epoch: number): void {
    assert(this.assignment !== null, 'only the coordinator moves a node\'s epoch');
    const ws = this.openConnection();
    if (ws !== null && this.state !== 'connecting') ws.send(encodeNodeFrame([NodeFrame.Epoch, epoch]));
  }

  /** Sends the node its assignment again (its led slices or replica sets changed: a failover, a
   * removal); a link that is not ready gets it when it is. */
  reassign(): void {
    assert(this.assignment !== null, 'only the coordinator assigns a node its slices');
    // An Assign in flight was computed before this change (replica sets change without an epoch bump):
    // send the assignment again once the node has taken that one.
    if (this.state === 'assigning') this.reassignWhenReady = true;
    const ws = this.openConnection();
    if (ws === null || this.state !== 'ready') return;
    const a = this.assignment();
    this.reassigning++;
    this.reassignsSent++;
    ws.send(encodeNodeFrame([NodeFrame.Assign, a.epoch, a.sliceCount, a.slices, a.clusterId, a.replication]));
  }

  /** Asks the node for a sign of life: a WebSocket ping on its open connection, which its event loop answers with a
   * pong (heardAt) unless it is frozen. Membership asks each turn over every link; one ping at a time is in flight
   * (pingOutstanding), so a node frozen for hours is sent one, not one a turn. */
  probe(): void {
    const ws = this.openConnection();
    if (ws === null || this.pingOutstanding) return;
    this.pingOutstanding = true;
    ws.ping();
  }

  /** Something came from the node outside this link (its heartbeat, POST /cluster/join): it runs. */
  heard(): void {
    this.heardAt = performance.now();
    this.excusedMs = 0;
  }

  /** Of the time since heardAt, how much this process itself did not run (excuse): not the node's silence. */
  private excusedMs = 0;

  /** This process did not run for `ms` up to `now` (Membership.turnDue: a turn that came that late): the node could not
   * be heard then, and that time is not counted as its silence (heardMsAgo) until something comes from it. Only the
   * part after heardAt: a node heard within the window (the turn late behind a busy loop that still read its sockets)
   * was silent for real since, and excused the whole window a node that died then counted up that much longer. */
  excuse(ms: number, now = performance.now()): void {
    assert(ms >= 0, 'a stall lasts a while');
    this.excusedMs += Math.min(ms, Math.max(0, now - this.heardAt - this.excusedMs));
  }

  /** How long since anything came from the node (heardAt), whatever the link's state, less the time this process did
   * not run since (excuse). */
  heardMsAgo(now = performance.now()): number {
    return Math.max(0, now - this.heardAt - this.excusedMs);
  }

  /** Sends replication messages to the node in one frame (at most REPLICATION_FRAME_ENTRIES_MAX
   * entries: the caller splits). Dropped while the link is not ready: the failover's heartbeat and
   * election timeouts resend what matters. */
  sendReplicate(entries: ReplicateEntry[]): void {
    assert(entries.length <= REPLICATION_FRAME_ENTRIES_MAX, 'a Replicate frame holds at most REPLICATION_FRAME_ENTRIES_MAX entries');
    const ws = this.openConnection();
    if (ws === null || this.state !== 'ready') return;
    ws.send(encodeNodeFrame([NodeFrame.Replicate, COORDINATOR, entries]));
  }

  /** Queues one op for the worker that owns `slice` on this node. */
  send<Op extends SliceOpMessage>(slice: number, op: Op): Promise<ResultOf<Op>> {
    if (this.state !== 'ready') return Promise.reject(this.unavailable());
    return this.sendToWorker(workerOf(slice, this.workerCount), op);
  }

  /** Queues one op for a given worker (ops that span a worker's slices). */
  sendToWorker<Op extends SliceOpMessage>(worker: number, op: Op): Promise<ResultOf<Op>> {
    if (this.state !== 'ready') return Promise.reject(this.unavailable());
    assert(worker >= 0 && worker < this.workerCount, 'worker index within the node');
    // The worker answers an op of this kind with ResultOf<Op> (partition.ts checks that at compile time); this is where
    // the decoded reply takes that type, once for every caller, after onBatchReply checked it (checkSliceResult).
    return new Promise((resolve, reject) => this.queue.push(worker, op, { op, resolve: resolve as (v: unknown) => void, reject }));
  }

  /** Resolves when the node is ready, or after `timeoutMs`. */
  waitReady(timeoutMs: number): Promise<boolean> {
    if (this.state === 'ready') return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.readyWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  close(): void {
    this.state = 'closed';
    this.ws?.terminate();
    this.closeBatchSockets();
    this.failAll(new KeysliceError('Unavailable', 'the coordinator is shutting down'));
  }

  /** What an op gets that is not sent because the link is not ready: not applied, so it may be sent again
   * (wasNotApplied), as a router does on replicated slices and a client's write resend on any. */
  private unavailable(): KeysliceError {
    if (this.refusal !== '') return new KeysliceError('Unavailable', `slice node ${this.url} is not used: ${this.refusal}`, { notApplied: true });
    return new KeysliceError('Unavailable', `slice node ${this.url} is not available (${this.state}); retry later`, { notApplied: true });
  }

  private connect(): void {
    this.reconnectTimer = undefined;
    if (this.state === 'closed') return;
    this.state = 'connecting';
    this.abandonedAt = -Infinity;
    this.pingOutstanding = false;
    const ws = new WebSocket(this.url, {
      maxPayload: INTERNAL_FRAME_BYTES_MAX,
      handshakeTimeout: NODE_CONNECT_TIMEOUT_MS,
      headers: { [CLUSTER_SECRET_HEADER]: this.clusterSecret },
      // The zero mask, so ws neither draws a random mask nor XORs each frame (both showed in the
      // profile, bench/PROFILE.md). Masking guards proxies against frames a browser script makes;
      // this link is ours end to end, with the cluster secret.
      generateMask: () => {},
    });
    this.ws = ws;
    ws.binaryType = 'nodebuffer';
    ws.on('unexpected-response', (_req, res) => {
      const problem = `slice node ${this.url} refused the connection (HTTP ${res.statusCode}${res.statusCode === 401 ? ': the cluster secrets differ' : ''})`;
      if (problem !== this.lastProblem) this.log(problem);
      this.lastProblem = problem;
      ws.terminate();
    });
    ws.on('message', (data: Buffer) => this.onFrame(data));
    ws.on('pong', () => {
      if (this.ws !== ws) return;
      this.pingOutstanding = false;
      this.heard();
    });
    ws.on('error', () => {}); // 'close' follows and handles it
    ws.on('close', () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.closeBatchSockets();
      const wasReady = this.state === 'ready';
      if (this.state !== 'closed') this.state = 'connecting';
      if (wasReady) this.log(`slice node ${this.url} disconnected`);
      this.failAll(
        new KeysliceError('Unavailable', `connection to slice node ${this.url} was lost; a write in flight may or may not have been applied`),
        notSent(`connection to slice node ${this.url} was lost`),
      );
      if (this.state === 'closed') return;
      if (wasReady) {
        this.lostAt = performance.now();
        this.onStateChange();
      }
      this.reconnectTimer = setTimeout(() => this.connect(), backoffMs(this.reconnectFailures++, NODE_RECONNECT_DELAY_MS_MIN, NODE_RECONNECT_DELAY_MS_MAX));
      this.reconnectTimer.unref();
    });
  }

  private onFrame(data: Buffer): void {
    const ws = this.openConnection();
    // Not open (openConnection): taken, a Hello and an Assigned read with the frame that ended the connection made the
    // link ready on it, its Assign never sent (test/node-link-assign.test.ts).
    if (ws === null) return;
    const frame = this.readFrame(ws, data, '');
    if (frame === null) return;
    switch (frame[0]) {
      case NodeFrame.Hello: {
        // A router's link stays 'connecting' after its Hello, while it dials the batch ports (batchSockets): a Hello
        // then is a second one too (taken, openBatchSockets' assertion threw out of ws's 'message' event, uncaught).
        if (this.state !== 'connecting' || this.batchSockets !== null) return this.protocolError(ws, 'a second Hello');
        const [, , workerCount, nodeId, clusterId, , incarnation] = frame;
        const refusal = this.admit({ nodeId, clusterId });
        if (refusal !== null) {
          if (refusal !== this.refusal) this.log(refusal);
          this.refusal = refusal;
          // A router only waits (e.g. for the coordinator to assign a new node): nothing for the node to log.
          if (this.assignment === null) return void ws.terminate();
          // The node logs the reason of a 4000 close (at most 123 bytes); the whole sentence is in our log and status.
          ws.close(4000, closeReason(refusal));
          return;
        }
        if (this.refusal !== '') this.log(`slice node ${this.url} is accepted again`);
        this.refusal = '';
        // Said by the coordinator's link (whose questions it drops: ReplicaLeaders.linkUp), not again by each router's.
        if (this.assignment !== null && this.incarnation !== null && incarnation !== this.incarnation) this.log(`slice node ${this.url} restarted (incarnation ${incarnation}, was ${this.incarnation})`);
        this.incarnation = incarnation;
        this.generation++;
        this.lastProblem = '';
        this.workerCount = workerCount;
        this.queue = new SendQueue<Settle>(workerCount, (parts) => this.sendBatch(parts));
        if (this.assignment === null) return this.openBatchSockets(ws, frame[5]);
        this.state = 'assigning';
        const a = this.assignment();
        this.assignedEpoch = a.epoch;
        this.reassigning = 0;
        this.reassignWhenReady = false;
        ws.send(encodeNodeFrame([NodeFrame.Assign, a.epoch, a.sliceCount, a.slices, a.clusterId, a.replication]));
        return;
      }
      case NodeFrame.Replicate: {
        if (this.assignment === null || this.state === 'connecting') return this.protocolError(ws, 'a Replicate frame before Hello, or to a router');
        this.onReplicate(frame[2]);
        return;
      }
      case NodeFrame.Assigned: {
        if (this.assignment !== null && this.state === 'ready' && this.reassigning > 0) {
          this.reassigning--;
          if (frame[1] < this.currentEpoch()) ws.send(encodeNodeFrame([NodeFrame.Epoch, this.currentEpoch()]));
          return;
        }
        if (this.assignment === null || this.state !== 'assigning' || frame[1] !== this.assignedEpoch) return this.protocolError(ws, `Assigned for epoch ${frame[1]} (${this.state})`);
        // The map moved on while the node took its assignment: its slices did not change
        // (a move gives up when either side reconnects), only the epoch; replica sets may have, and a
        // reassign asked for meanwhile (reassignWhenReady) sends them.
        if (frame[1] < this.currentEpoch()) ws.send(encodeNodeFrame([NodeFrame.Epoch, this.currentEpoch()]));
        this.becomeReady(`slice node ${this.url} ready: ${this.workerCount} workers, epoch ${frame[1]}`);
        if (this.reassignWhenReady) {
          this.reassignWhenReady = false;
          this.reassign();
        }
        return;
      }
      case NodeFrame.BatchReply:
        return this.onBatchReply(frame);
      case NodeFrame.BatchError:
        return this.onBatchError(ws, frame);
    }
  }

  /** Decodes a frame the node connected as `ws` sent (`where`: on which of its connections). A malformed one ends
   * the link (the node's connection, and with it its batch ports): null. */
  private readFrame(ws: WebSocket, data: Buffer, where: string): CoordinatorNodeFrame | null {
    this.heard();
    try {
      return decodeNodeFrame(data, 'coordinator');
    } catch (err) {
      this.log(`slice node ${this.url} sent a malformed frame${where}: ${(err as Error).message}`);
      ws.terminate();
      return null;
    }
  }

  /** A router's link: dials each worker's batch port; ready once all are open. */
  private openBatchSockets(ws: WebSocket, ports: number[]): void {
    assert(this.assignment === null && this.batchSockets === null && ports.length === this.workerCount, 'a router link dials one batch port per worker, once per connection');
    // The node's host as this link reaches it (URL.hostname keeps an IPv6 address's brackets).
    const host = new URL(this.url).hostname;
    let open = 0;
    this.batchSockets = ports.map((port) => {
      const s = new WebSocket(`ws://${host}:${port}`, {
        maxPayload: INTERNAL_FRAME_BYTES_MAX,
        handshakeTimeout: NODE_CONNECT_TIMEOUT_MS,
        headers: { [CLUSTER_SECRET_HEADER]: this.clusterSecret, [NODE_PROTOCOL_HEADER]: String(NODE_PROTOCOL_VERSION) },
        generateMask: () => {}, // as on the node's connection (connect)
      });
      s.binaryType = 'nodebuffer';
      s.on('open', () => {
        // Not on a node connection the link ended (openConnection) whose 'close' has not come yet: ready there, it would
        // flap to down at that close.
        if (++open === ports.length && this.openConnection(ws) !== null && this.state === 'connecting') this.becomeReady(`slice node ${this.url} ready: ${this.workerCount} workers, batch ports ${ports.join(', ')}`);
      });
      s.on('message', (data: Buffer) => this.onBatchPortFrame(ws, data));
      s.on('error', () => {}); // 'close' follows
      // One batch port lost (or refused): the whole link goes, and its close handler fails what is in flight.
      s.on('close', () => {
        if (this.ws === ws) ws.terminate();
      });
      return s;
    });
  }

  private closeBatchSockets(): void {
    for (const s of this.batchSockets ?? []) s.terminate();
    this.batchSockets = null;
  }

  /** A frame on a batch port of the node connected as `ws`: only answers to batches. */
  private onBatchPortFrame(ws: WebSocket, data: Buffer): void {
    // The node's connection not open (openConnection; its batch ports go with its 'close'): taken, a reply this port
    // read with the frame that ended it resolved its ops from a node the link had given up on
    // (test/node-link-assign.test.ts), where the close fails them as lost.
    if (this.openConnection(ws) === null) return;
    const frame = this.readFrame(ws, data, ' on a batch port');
    if (frame === null) return;
    if (frame[0] === NodeFrame.BatchReply) return this.onBatchReply(frame);
    if (frame[0] === NodeFrame.BatchError) return this.onBatchError(ws, frame);
    this.protocolError(ws, `frame kind ${frame[0]} on a batch port`);
  }

  /** A node refused a batch: its ops fail with the refusal (errorOfBatchError), which names the node's epoch where it
   * refused the batch for its epoch; a node that names the batch's own epoch so broke the protocol. */
  private onBatchError(ws: WebSocket, frame: BatchErrorFrame): void {
    const [, batchId, , , nodeEpoch] = frame;
    const batch = this.inFlight.get(batchId);
    if (batch === undefined) return; // timed out or given up earlier
    if (nodeEpoch === batch.epoch) return this.protocolError(ws, `refused batch ${batchId} of epoch ${batch.epoch} for its epoch, saying it is at that epoch`);
    this.failBatch(batchId, errorOfBatchError(frame));
  }

  private onBatchReply([, batchId, worker, bytes]: [number, number, number, Uint8Array]): void {
    const batch = this.inFlight.get(batchId);
    const settles = batch?.waiting.get(worker);
    if (batch === undefined || settles === undefined) return; // timed out earlier
    batch.waiting.delete(worker);
    batch.queue.answered(worker);
    if (batch.waiting.size === 0) {
      clearTimeout(batch.timer);
      this.inFlight.delete(batchId);
    }
    let results: SliceOpResult[];
    try {
      results = decodeSliceResults(bytes);
    } catch {
      results = [];
    }
    // A broken node, not a broken coordinator: fail these ops and say so.
    if (!Array.isArray(results) || results.length !== settles.length || !results.every((r) => Array.isArray(r) && (r[0] === RESULT_OK || r[0] === RESULT_ERROR))) {
      const err = new KeysliceError('Internal', `slice node ${this.url} answered batch ${batchId} with malformed results`);
      this.log(err.message);
      for (const s of settles) s.reject(err);
      return;
    }
    for (let i = 0; i < results.length; i++) {
      const r = results[i];
      const s = settles[i];
      if (r[0] !== RESULT_OK) {
        s.reject(errorFromResult(r[1], r[2], r[3]));
        continue;
      }
      // The node's answer, checked against its op once, here: one that has not the op's shape fails that op alone
      // (MalformedFrame: Internal to its client), not a TypeError or an assert wherever it is used.
      try {
        checkSliceResult(s.op, r[1]);
      } catch (err) {
        if (!(err instanceof MalformedFrame)) throw err;
        s.reject(new MalformedFrame(`slice node ${this.url} answered malformed: ${err.message}`));
        continue;
      }
      s.resolve(r[1]);
    }
  }

  private becomeReady(line: string): void {
    this.state = 'ready';
    this.reconnectFailures = 0;
    this.log(line);
    for (const w of this.readyWaiters.splice(0)) w();
    this.onStateChange();
  }

  /** Dials at once instead of after the back-off (a router told that the node is up). */
  reconnectNow(): void {
    if (this.state !== 'connecting' || this.ws !== null || this.reconnectTimer === undefined) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.reconnectFailures = 0;
    this.connect();
  }

  private protocolError(ws: WebSocket, what: string): void {
    this.log(`slice node ${this.url} broke the protocol (${what}); reconnecting`);
    ws.terminate();
  }

  /** The queue's parts (send-queue.ts decides when): one frame on the node's connection, or one per worker on its batch port. */
  private sendBatch(frameParts: FrameParts<Settle>): void {
    const sockets = this.batchSockets;
    if (sockets === null) return this.sendFrame(this.ws, frameParts);
    for (const p of frameParts) this.sendFrame(sockets[p.worker], [p]);
  }

  private sendFrame(ws: WebSocket | null, frameParts: FrameParts<Settle>): void {
    const parts: [number, Uint8Array][] = [];
    const waiting = new Map<number, Settle[]>();
    for (const p of frameParts) {
      parts.push([p.worker, encodeSliceOps(p.ops)]);
      waiting.set(p.worker, p.settles);
    }
    const batchId = this.nextBatchId++;
    const timer = setTimeout(
      () => this.failBatch(batchId, new KeysliceError('Unavailable', `slice node ${this.url} did not answer within ${NODE_REQUEST_TIMEOUT_MS} ms`)),
      NODE_REQUEST_TIMEOUT_MS,
    );
    const epoch = this.currentEpoch();
    this.inFlight.set(batchId, { waiting, timer, queue: this.queue, sentAt: performance.now(), epoch });
    if (ws === null || this.state !== 'ready') {
      this.failBatch(batchId, this.unavailable());
      return;
    }
    ws.send(encodeNodeFrame([NodeFrame.Batch, batchId, epoch, parts]));
  }

  /** Gives up what the link holds for a node that stopped answering and lost the leadership of
   * slices to an election (a frozen node would otherwise hold it for NODE_REQUEST_TIMEOUT_MS). The
   * node is taken as silent if a batch sent more than `olderThanMs` ago is unanswered, or if it was
   * so taken before and nothing was heard from it since (heardAt). Then every batch in flight fails, young ones too
   * (their outcome is unknown, as after a lost connection), and so does every op still queued for
   * it (not sent, so not applied): answering a failed batch would otherwise send the queue to the
   * silent node in a new batch, too young to be given up at the next election's map. */
  abandonInFlight(olderThanMs: number, why: string): number {
    const before = performance.now() - olderThanMs;
    const stillSilent = this.abandonedAt >= this.heardAt;
    if (!stillSilent && ![...this.inFlight.values()].some((b) => b.sentAt <= before)) return 0;
    if (!stillSilent) this.abandonedAt = performance.now();
    const ids = [...this.inFlight.keys()];
    for (const id of ids) this.failBatch(id, new KeysliceError('Unavailable', `slice node ${this.url} ${why}; a write in flight may or may not have been applied`));
    // After failBatch: the queue's count of batches in flight is back to zero.
    for (const s of this.queue.clear()) s.reject(notSent(`slice node ${this.url} ${why}`));
    return ids.length;
  }

  private failBatch(batchId: number, err: KeysliceError): void {
    const batch = this.inFlight.get(batchId);
    if (batch === undefined) return;
    clearTimeout(batch.timer);
    this.inFlight.delete(batchId);
    for (const [worker, settles] of batch.waiting) {
      batch.queue.answered(worker);
      for (const s of settles) s.reject(err);
    }
  }

  /** `queued`: what ops still waiting to be sent get (they were not applied); the default, `err`. */
  private failAll(err: KeysliceError, queued = err): void {
    for (const id of [...this.inFlight.keys()]) this.failBatch(id, err);
    for (const s of this.queue.clear()) s.reject(queued);
  }
}

/** What an op still queued gets when its link is lost or given up: it never left this process, so it was
 * not applied and may be sent again (wasNotApplied). */
function notSent(why: string): KeysliceError {
  return new KeysliceError('Unavailable', `${why}; the op was not sent to it; retry`, { notApplied: true });
}


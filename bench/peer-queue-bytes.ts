// What an entry waiting in a peer link's queue costs in memory (slice-worker/peer-links.ts; PEER_LINK_QUEUED_MESSAGE_BYTES
// and PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES in shared/limits.ts). A real PeerLinks of one worker dials a stand-in peer
// that takes the connection and never greets, so everything it is sent waits in its queue (for the few seconds before
// the link gives up on the Hello): KeepAlives as objects, as a replica makes them, or messages' bytes as views of one
// 256 KiB buffer standing for writeAppend's arena, which the link copies out. Two figures per entry:
// - V8's: the heap and the ArrayBuffers' bytes after a full GC with the entries queued, less the same after the link
//   is closed (its queue dropped), over the entries;
// - the process's: its resident memory after a full GC with the entries queued, less before they were sent, over the
//   entries. It also sees what V8 does not count: each ArrayBuffer's backing store as malloc keeps it (its chunk's
//   header and rounding) and the C++ objects that hold it. Each shape and round runs in a process of its own, so that
//   no round reuses memory that an earlier one freed; a warm-up of short-lived objects first grows the young generation
//   to its size, so that its growth is not counted.
// The overhead of a message's bytes is the measured figure less their length.
//
//   npm run build && node dist/bench/peer-queue-bytes.js [rounds]    (ENTRIES=N, SHAPES=KeepAlive,16,...)
// (each round's process is started with --expose-gc by the bench)
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';
import { readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import { PEER_LINK_QUEUE_BYTES_MAX, PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES, PEER_LINK_QUEUED_MESSAGE_BYTES } from '../shared/limits.js';
import type { FoldableMessage } from '../shared/replication-protocol.js';
import { PeerLinks, type PeerEntry } from '../slice-worker/peer-links.js';
import { median } from './median.js';

/** Entries queued per round (ENTRIES=N): within one link's share of PEER_LINK_QUEUE_BYTES_MAX as each is counted. */
const ENTRIES = Number(process.env.ENTRIES ?? 40_000);
/** Entries a turn sends (one send call). */
const TURN = 100;
/** A KeepAlive, or a message's bytes of this length (SHAPES=KeepAlive,16,...). */
const SHAPES: ('KeepAlive' | number)[] = (process.env.SHAPES ?? 'KeepAlive,16,64,128,256,512,1024').split(',').map((s) => (s === 'KeepAlive' ? 'KeepAlive' : Number(s)));

interface Round {
  v8: number;
  rss: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

function full(): NodeJS.MemoryUsage {
  gc!();
  gc!();
  return process.memoryUsage();
}
const v8Bytes = (m: NodeJS.MemoryUsage) => m.heapUsed + m.arrayBuffers;

/** One round of one shape, in this process: bytes per entry queued. */
async function round(shape: 'KeepAlive' | number): Promise<Round> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const connected = new Promise<void>((r) => server.once('connection', () => r()));
  const links = new PeerLinks('', 0, () => {}, 1);
  links.setPeers([[1, `ws://127.0.0.1:${(server.address() as { port: number }).port}`]]);
  await connected; // (dialing: it waits for a Hello that never comes)
  const link = (links as unknown as { links: Map<number, { dropped: number; queue: PeerEntry[] }> }).links.get(1)!;
  // Short-lived objects, so that the young generation has grown to what sending allocates before the baseline.
  let sink = 0;
  for (let i = 0; i < 2_000_000; i++) sink += [i, { i }].length;
  const arena = new Uint8Array(256 * 1024);
  let at = 0;
  const make = (slice: number): PeerEntry => {
    if (shape === 'KeepAlive') return [slice, { type: 'KeepAlive', term: 7, commitIndex: 1000 + slice, sentAt: Date.now(), leased: true } satisfies FoldableMessage];
    if (at + shape > arena.byteLength) at = 0;
    at += shape;
    return [slice, arena.subarray(at - shape, at)];
  };
  const before = full();
  for (let i = 0; i < ENTRIES; i += TURN) {
    const turn: PeerEntry[] = [];
    for (let k = i; k < i + TURN; k++) turn.push(make(k % 1024));
    links.send(1, turn);
  }
  const queued = full();
  if (link.queue.length !== ENTRIES || link.dropped !== 0) throw new Error(`${link.queue.length} entries queued and ${link.dropped} dropped, not ${ENTRIES} and 0`);
  links.close();
  const dropped = full();
  await new Promise((r) => server.close(r));
  if (sink === 0) throw new Error('unreachable');
  return { v8: (v8Bytes(queued) - v8Bytes(dropped)) / ENTRIES, rss: (queued.rss - before.rss) / ENTRIES };
}

// `--round SHAPE`: one round, in a process of its own that the bench starts (below), not a user's command line.
if (process.argv[2] === '--round') {
  if (gc === undefined) throw new Error('a round runs with node --expose-gc');
  const shape = process.argv[3] === 'KeepAlive' ? 'KeepAlive' : Number(process.argv[3]);
  console.log(JSON.stringify(await round(shape)));
} else {
  const USAGE = 'usage: node dist/bench/peer-queue-bytes.js [ROUNDS]  (rounds a shape, default 5)';
  const [roundsText = '5', ...more] = readCommandLine(process.argv.slice(2), {}, USAGE, { positionals: true }).positionals;
  if (more.length > 0 || !/^[1-9][0-9]{0,3}$/.test(roundsText)) refuseCommandLine(`ROUNDS must be one whole number from 1 to 9999, got "${process.argv.slice(2).join(' ')}"`, USAGE);
  const rounds = Number(roundsText);
  const self = fileURLToPath(import.meta.url);
  console.log(`node ${process.version}; ${ENTRIES} entries a round, ${rounds} rounds a shape, each in its own process; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`counted now: a KeepAlive PEER_LINK_QUEUED_MESSAGE_BYTES ${PEER_LINK_QUEUED_MESSAGE_BYTES}; a message's bytes their length + PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES ${PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES} (a worker's share: PEER_LINK_QUEUE_BYTES_MAX ${PEER_LINK_QUEUE_BYTES_MAX} / its node's workers)`);
  console.log('entry | V8 bytes an entry (median, min-max) | resident bytes an entry (median, min-max) | overhead beside the bytes (resident, median) | counted');
  for (const shape of SHAPES) {
    const rs: Round[] = [];
    for (let r = 0; r < rounds; r++) {
      const out = execFileSync(process.execPath, ['--expose-gc', self, '--round', String(shape)], { encoding: 'utf8', timeout: 60_000 });
      rs.push(JSON.parse(out) as Round);
    }
    const v8 = rs.map((r) => r.v8);
    const rss = rs.map((r) => r.rss);
    const len = shape === 'KeepAlive' ? 0 : shape;
    const counted = shape === 'KeepAlive' ? PEER_LINK_QUEUED_MESSAGE_BYTES : shape + PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES;
    const range = (xs: number[]) => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`;
    console.log(`${shape === 'KeepAlive' ? 'KeepAlive' : `${shape} bytes`} | ${range(v8)} | ${range(rss)} | ${shape === 'KeepAlive' ? '-' : (median(rss) - len).toFixed(0)} | ${counted}`);
  }
}

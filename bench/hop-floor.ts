// The floor of each kind of hop a request takes, at one message in flight, on this
// machine: a loopback round trip to another process (plain TCP, and WebSocket as the
// router and nodes use it), and a round trip from a main thread to a worker thread and
// back (piscina as slice-worker/worker-channel.ts used it, a worker's own MessagePort,
// a doorbell on a SharedArrayBuffer with Atomics.wait / Atomics.waitAsync, the same with the
// worker's event loop turning (Atomics.waitAsync at both ends), and postMessage answered onto a
// port that the main thread polls in a busy loop), a WebSocket over a Unix socket, and a
// WebSocket answered by a worker thread of the other process, through that process's main
// thread (as a slice node answers) or on a connection the worker thread owns. Every
// hop carries 64 bytes each way and does no work at the far end. Rounds go through the
// hops in turn (so that the machine's load falls on all of them alike); each figure is
// the median over rounds of a round's p50 (and p99), in microseconds.
// `--gap-ms N` waits N ms between round trips, so that both ends fall asleep in between as
// they do at one request in flight (without it the far end is often still awake).
//   node dist/bench/hop-floor.js [--rounds 5] [--count 3000] [--gap-ms 0]
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { loadavg } from 'node:os';
import { isMainThread, MessageChannel, parentPort, receiveMessageOnPort, Worker, workerData, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import WebSocket, { WebSocketServer } from 'ws';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { median } from './median.js';

const SELF = new URL(import.meta.url);
const PAYLOAD_BYTES = 64;
/** A round of one hop stops after this many round trips or this long, whichever comes first. */
const ROUND_MS_MAX = 3000;

/** A piscina task (this module is also the pool's task file): the bytes back. */
export default function echo(bytes: Uint8Array): Uint8Array {
  return bytes;
}

type Role = { role: 'port' } | { role: 'ws-server' } | { role: 'atomics'; sab: SharedArrayBuffer } | { role: 'atomics-async'; sab: SharedArrayBuffer } | { role: 'port-answer'; answers: MessagePort };
/** The main thread's busy poll for an answer gives the event loop a turn after this long. */
const SPIN_US_MAX = 500;
const UNIX_SOCKET = `/tmp/keyslice-hop-floor-${process.pid}.sock`;

// Atomics.waitAsync: Node 20 has it; the ES2022 lib that tsconfig names does not.
const waitAsync = (a: Int32Array, i: number, v: number) =>
  (Atomics as unknown as { waitAsync: (a: Int32Array, i: number, v: number) => { async: boolean; value: Promise<string> | string } }).waitAsync(a, i, v);

function workerSide(): void {
  const data = workerData as Role | undefined;
  if (data?.role === 'port') {
    parentPort!.on('message', (m: Uint8Array) => parentPort!.postMessage(m));
  } else if (data?.role === 'ws-server') {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    wss.on('connection', (ws) => ws.on('message', (d) => ws.send(d as Buffer)));
    wss.on('listening', () => parentPort!.postMessage((wss.address() as net.AddressInfo).port));
  } else if (data?.role === 'port-answer') {
    const answers = data.answers;
    parentPort!.on('message', (m: Uint8Array) => answers.postMessage(m));
  } else if (data?.role === 'atomics-async') {
    // As atomics below, but the thread never blocks: its event loop turns between doorbells, as a
    // slice worker's must (snapshot steps, replication timers and messages).
    const seq = new Int32Array(data.sab);
    let seen = 0;
    const next = (): void => {
      const r = waitAsync(seq, 0, seen);
      void (r.async ? (r.value as Promise<string>) : Promise.resolve('')).then(() => {
        seen = Atomics.load(seq, 0);
        if (seen < 0) return;
        Atomics.store(seq, 1, seen);
        Atomics.notify(seq, 1);
        next();
      });
    };
    next();
    setInterval(() => {}, 1000); // a timer, as the slice worker has
  } else if (data?.role === 'atomics') {
    // [0]: request sequence (main bumps it), [1]: answer sequence (the worker bumps it).
    const seq = new Int32Array(data.sab);
    let seen = 0;
    for (;;) {
      Atomics.wait(seq, 0, seen);
      seen = Atomics.load(seq, 0);
      if (seen < 0) return;
      Atomics.store(seq, 1, seen);
      Atomics.notify(seq, 1);
    }
  }
  // Otherwise a piscina worker: piscina calls the default export.
}

async function serverSide(kind: string): Promise<void> {
  if (kind === 'tcp') {
    const srv = net.createServer((s) => {
      s.setNoDelay(true);
      s.on('data', (b) => s.write(b));
    });
    srv.listen(0, '127.0.0.1', () => console.log(String((srv.address() as net.AddressInfo).port)));
  } else if (kind === 'ws-relay' || kind === 'ws-in-worker') {
    // The slice node's shape (ws-relay: the main thread takes the frame and hands it to a worker
    // thread, whose answer it sends back) against a worker thread that owns its connection.
    const w = new Worker(SELF, { workerData: { role: kind === 'ws-relay' ? 'port' : 'ws-server' } satisfies Role });
    if (kind === 'ws-in-worker') {
      w.once('message', (port: number) => console.log(String(port)));
    } else {
      const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
      wss.on('connection', (ws) => {
        w.on('message', (m: Uint8Array) => ws.send(m));
        ws.on('message', (d: Buffer) => {
          const b = new Uint8Array(d);
          w.postMessage(b, [b.buffer as ArrayBuffer]);
        });
      });
      wss.on('listening', () => console.log(String((wss.address() as net.AddressInfo).port)));
    }
  } else if (kind === 'ws-unix') {
    const http = await import('node:http');
    const srv = http.createServer();
    const wss = new WebSocketServer({ server: srv });
    wss.on('connection', (ws) => ws.on('message', (d) => ws.send(d as Buffer)));
    srv.listen(process.argv[4], () => console.log('0'));
  } else {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    wss.on('connection', (ws) => ws.on('message', (d) => ws.send(d as Buffer)));
    wss.on('listening', () => console.log(String((wss.address() as net.AddressInfo).port)));
  }
  process.on('SIGTERM', () => process.exit(0));
}

function startServer(kind: string, path = ''): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [SELF.pathname, '--serve', kind, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((done, fail) => {
    child.stdout!.once('data', (b: Buffer) => done({ child, port: Number(b.toString().trim()) }));
    child.once('exit', (code) => fail(new Error(`${kind} server exited (${code})`)));
  });
}

/** Stops a server process and waits for it to be gone (SIGKILL if SIGTERM took longer than 2 s). */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
  await gone;
  clearTimeout(timer);
}

/** A round trip: resolves once the answer is back. */
type Hop = { name: string; once: () => Promise<void>; close: () => Promise<void> };

async function tcpHop(): Promise<Hop> {
  const { child, port } = await startServer('tcp');
  const sock = net.connect(port, '127.0.0.1');
  sock.setNoDelay(true);
  await new Promise((r) => sock.once('connect', r));
  const out = Buffer.alloc(PAYLOAD_BYTES, 1);
  let got = 0;
  let waiter: (() => void) | null = null;
  sock.on('data', (b) => {
    got += b.length;
    if (got >= PAYLOAD_BYTES && waiter !== null) {
      got -= PAYLOAD_BYTES;
      const w = waiter;
      waiter = null;
      w();
    }
  });
  return {
    name: 'TCP echo, another process (loopback)',
    once: () => new Promise<void>((r) => { waiter = r; sock.write(out); }),
    close: async () => { sock.destroy(); await stopChild(child); },
  };
}

async function wsHop(kind: 'ws' | 'ws-relay' | 'ws-in-worker' = 'ws'): Promise<Hop> {
  const { child, port } = await startServer(kind);
  const ws = new WebSocket(`ws://127.0.0.1:${port}`, { generateMask: () => {} });
  await new Promise((r, f) => { ws.once('open', r); ws.once('error', f); });
  const out = Buffer.alloc(PAYLOAD_BYTES, 1);
  let waiter: (() => void) | null = null;
  ws.on('message', () => { const w = waiter; waiter = null; w?.(); });
  return {
    name: {
      ws: 'WebSocket echo, another process (ws, loopback)',
      'ws-relay': "WebSocket echo by a worker thread of another process, through its main thread (a slice node's shape)",
      'ws-in-worker': 'WebSocket echo by a worker thread of another process that owns the connection',
    }[kind],
    once: () => new Promise<void>((r) => { waiter = r; ws.send(out); }),
    close: async () => { ws.terminate(); await stopChild(child); },
  };
}

async function wsUnixHop(): Promise<Hop> {
  const { child } = await startServer('ws-unix', UNIX_SOCKET);
  const ws = new WebSocket(`ws+unix://${UNIX_SOCKET}:/`, { generateMask: () => {} });
  await new Promise((r, f) => { ws.once('open', r); ws.once('error', f); });
  const out = Buffer.alloc(PAYLOAD_BYTES, 1);
  let waiter: (() => void) | null = null;
  ws.on('message', () => { const w = waiter; waiter = null; w?.(); });
  return {
    name: 'WebSocket echo, another process (ws, Unix socket)',
    once: () => new Promise<void>((r) => { waiter = r; ws.send(out); }),
    close: async () => { ws.terminate(); await stopChild(child); },
  };
}

function piscinaHop(atomics: 'disabled' | 'sync'): Hop {
  const pool = new Piscina({ filename: SELF.href, minThreads: 1, maxThreads: 1, idleTimeout: Number.MAX_SAFE_INTEGER, atomics });
  return {
    name: `worker thread: piscina run() (atomics '${atomics}')`,
    once: async () => {
      const b = new Uint8Array(PAYLOAD_BYTES);
      await pool.run(b, { transferList: [b.buffer as ArrayBuffer] });
    },
    close: () => pool.destroy(),
  };
}

/** A worker thread of this file in `role`, once it is online. */
async function thread(role: Role, transferList: MessagePort[] = []): Promise<Worker> {
  const w = new Worker(SELF, { workerData: role, transferList });
  await new Promise((r) => w.once('online', r));
  return w;
}

async function portHop(): Promise<Hop> {
  const w = await thread({ role: 'port' });
  let waiter: (() => void) | null = null;
  w.on('message', () => { const f = waiter; waiter = null; f?.(); });
  return {
    name: 'worker thread: postMessage both ways',
    once: () => new Promise<void>((r) => {
      waiter = r;
      const b = new Uint8Array(PAYLOAD_BYTES);
      w.postMessage(b, [b.buffer as ArrayBuffer]);
    }),
    close: async () => { await w.terminate(); },
  };
}

async function atomicsHop(): Promise<Hop> {
  const sab = new SharedArrayBuffer(8);
  const seq = new Int32Array(sab);
  const w = await thread({ role: 'atomics', sab });
  let n = 0;
  return {
    name: 'worker thread: Atomics.notify + Atomics.waitAsync (the thread blocked in Atomics.wait)',
    once: async () => {
      n++;
      Atomics.store(seq, 0, n);
      Atomics.notify(seq, 0);
      while (Atomics.load(seq, 1) !== n) {
        const r = waitAsync(seq, 1, n - 1);
        if (r.async) await r.value;
      }
    },
    close: async () => { Atomics.store(seq, 0, -1); Atomics.notify(seq, 0); await w.terminate(); },
  };
}

/** postMessage to the thread; its answer comes on a port that the main thread reads in a busy loop
 * (receiveMessageOnPort) right after posting, instead of sleeping until a 'message' event. */
async function portSpinHop(): Promise<Hop> {
  const { port1, port2 } = new MessageChannel();
  const w = await thread({ role: 'port-answer', answers: port2 }, [port2]);
  return {
    name: 'worker thread: postMessage, the answer polled by the main thread (busy loop)',
    once: async () => {
      const b = new Uint8Array(PAYLOAD_BYTES);
      w.postMessage(b, [b.buffer as ArrayBuffer]);
      const deadline = performance.now() + ROUND_MS_MAX;
      while (performance.now() < deadline) {
        const end = performance.now() + SPIN_US_MAX / 1000;
        while (performance.now() < end) if (receiveMessageOnPort(port1) !== undefined) return;
        await new Promise((r) => setImmediate(r));
      }
      throw new Error(`no answer from the worker thread within ${ROUND_MS_MAX} ms`);
    },
    close: async () => { port1.close(); await w.terminate(); },
  };
}

/** The doorbell both ways with both event loops turning: Atomics.waitAsync at each end. */
async function atomicsAsyncHop(): Promise<Hop> {
  const sab = new SharedArrayBuffer(8);
  const seq = new Int32Array(sab);
  const w = await thread({ role: 'atomics-async', sab });
  let n = 0;
  return {
    name: 'worker thread: Atomics.notify + Atomics.waitAsync at both ends (no thread blocked)',
    once: async () => {
      n++;
      const r = waitAsync(seq, 1, n - 1);
      Atomics.store(seq, 0, n);
      Atomics.notify(seq, 0);
      if (r.async) await r.value;
      const deadline = performance.now() + ROUND_MS_MAX;
      while (Atomics.load(seq, 1) !== n) {
        if (performance.now() > deadline) throw new Error(`no answer from the worker thread within ${ROUND_MS_MAX} ms`);
        const again = waitAsync(seq, 1, Atomics.load(seq, 1));
        if (again.async) await again.value;
      }
    },
    close: async () => { Atomics.store(seq, 0, -1); Atomics.notify(seq, 0); await w.terminate(); },
  };
}

const quantile = (s: number[], q: number) => s[Math.min(s.length - 1, Math.floor(s.length * q))];

async function main(): Promise<void> {
  const opts = readCommandLine(
    process.argv.slice(2),
    { rounds: { type: 'string', default: '5' }, count: { type: 'string', default: '3000' }, 'gap-ms': { type: 'string', default: '0' } },
    'usage: node dist/bench/hop-floor.js [--rounds 5] [--count 3000] [--gap-ms 0]',
  ).values;
  // Whole numbers within bounds, refused in a sentence before a hop starts: Number() of a bad one ran no round and
  // printed NaN rows.
  const gapMs = intArg('gap-ms', opts['gap-ms'], 0, 1000);
  const rounds = intArg('rounds', opts.rounds, 1, 100);
  const count = intArg('count', opts.count, 1, 1_000_000);
  const hops = [await tcpHop(), await wsHop(), await wsHop('ws-relay'), await wsHop('ws-in-worker'), await wsUnixHop(), piscinaHop('disabled'), piscinaHop('sync'), await portHop(), await portSpinHop(), await atomicsHop(), await atomicsAsyncHop()];
  const p50s = hops.map((): number[] => []);
  const p99s = hops.map((): number[] => []);
  const load = [loadavg()[0]];
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [i, hop] of hops.entries()) {
        for (let j = 0; j < 200; j++) await hop.once(); // warm
        const lat: number[] = [];
        const end = performance.now() + ROUND_MS_MAX;
        while (lat.length < count && performance.now() < end) {
          if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
          const t0 = performance.now();
          await hop.once();
          lat.push((performance.now() - t0) * 1000);
        }
        lat.sort((a, b) => a - b);
        p50s[i].push(quantile(lat, 0.5));
        p99s[i].push(quantile(lat, 0.99));
      }
      load.push(loadavg()[0]);
    }
  } finally {
    for (const h of hops) await h.close();
    rmSync(UNIX_SOCKET, { force: true });
  }
  console.log(`| hop (64 bytes each way, 1 in flight${gapMs > 0 ? `, ${gapMs} ms apart` : ''}) | p50 µs | p99 µs |`);
  console.log('|---|--:|--:|');
  hops.forEach((h, i) => console.log(`| ${h.name} | ${median(p50s[i]).toFixed(0)} | ${median(p99s[i]).toFixed(0)} |`));
  console.log(`\n1-minute load average during the run: ${Math.min(...load).toFixed(1)}-${Math.max(...load).toFixed(1)}`);
}

if (!isMainThread) workerSide();
else if (process.argv[2] === '--serve') await serverSide(process.argv[3]);
else if (process.argv[1] === SELF.pathname) {
  main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
}

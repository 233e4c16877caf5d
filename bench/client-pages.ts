// The client's CPU and garbage collection per range of 100, getItems against forEachItemPage, through a real local
// cluster (bench/PROFILE.md, "the client's GC on range pages" and "forEachItemPage"): getItems' promise is fulfilled
// with the page, and one promoted while it waited keeps the page alive to the scavenger after the caller dropped it;
// forEachItemPage hands the page to a callback and its promise answers counts. One cluster (2 nodes x 2 workers,
// durability os) loaded with --devices devices of 100 items (~200 bytes); then, for each in-flight count and round,
// one client process per method, the order swapped from round to round, each under `node --trace-gc-nvp`: 4
// connections, the ranges spread over them, each range `{shardingKey, limit: 100}` read once (forEachItemPage with
// maxPages 1: the same one request) and each of its items looked at (its device compared). Per run: the client
// process's CPU (all threads: the collector's helpers too) per range, and of what its scavenges in the measured
// window allocated, the share they promoted. Prints a Markdown table with medians; load average per run.
//   node dist/bench/client-pages.js [--rounds 3] [--seconds 6] [--warm 2] [--in-flight 50,256] [--devices 50]
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, numberArg, readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import type { Item } from '../shared/values.js';
import { median } from './median.js';
import { benchTempDir, stopAll, stopAllAtExit, stopAllOnExit } from './stop-all.js';

const USAGE = 'usage: node dist/bench/client-pages.js [--rounds 3] [--seconds 6] [--warm 2] [--in-flight 50,256] [--devices 50]';
const opts = readCommandLine(
  process.argv.slice(2),
  {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '6' },
    warm: { type: 'string', default: '2' },
    'in-flight': { type: 'string', default: '50,256' },
    devices: { type: 'string', default: '50' },
    // The child's own: one client process.
    child: { type: 'string' },
    method: { type: 'string' },
  },
  USAGE,
).values;
const ROUNDS = intArg('rounds', opts.rounds, 1, 50);
const SECONDS = numberArg('seconds', opts.seconds, 0.5, 600);
const WARM = numberArg('warm', opts.warm, 0, 600);
const DEVICES = intArg('devices', opts.devices, 1, 10_000);
const IN_FLIGHT = opts['in-flight'].split(',').map((x) => intArg('in-flight', x, 1, 8192));
const METHODS = ['getItems', 'forEachItemPage'] as const;
type Method = (typeof METHODS)[number];
const TABLE = 'pages';
const PER_DEVICE = 100;
const CONNECTIONS = 4;
const PAD = 'x'.repeat(160);

interface ChildResult {
  ranges: number;
  cpuUs: number;
  /** performance.now() at the measured window's ends: V8's --trace-gc-nvp times count from about the same origin. */
  from: number;
  to: number;
}

/** One client process: ranges in a closed loop, IN_FLIGHT at a time, by one method. */
async function child(url: string, method: Method, inFlight: number): Promise<void> {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => KeysliceClient.connect(url, { requestTimeoutMs: 30_000 })));
  const rangeOf = async (c: KeysliceClient, device: string): Promise<number> => {
    let n = 0;
    const count = (items: Item[]) => {
      for (const i of items) if (i.device === device) n++;
    };
    if (method === 'getItems') count((await c.getItems({ table: TABLE, shardingKey: device, limit: PER_DEVICE })).items);
    else await c.forEachItemPage({ table: TABLE, shardingKey: device, limit: PER_DEVICE }, (page) => count(page.items), { maxPages: 1 });
    return n;
  };
  let measuring = false;
  let stop = false;
  let ranges = 0;
  const loop = async (j: number) => {
    while (!stop) {
      const n = await rangeOf(clients[j % CONNECTIONS], `d${Math.floor(Math.random() * DEVICES)}`);
      if (n !== PER_DEVICE) throw new Error(`a range answered ${n} items of its device, not ${PER_DEVICE}`);
      if (measuring) ranges++;
    }
  };
  const loops = Array.from({ length: inFlight }, (_, j) => loop(j));
  await new Promise((r) => setTimeout(r, WARM * 1000));
  measuring = true;
  const cpu0 = process.cpuUsage();
  const from = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const cpu = process.cpuUsage(cpu0);
  const to = performance.now();
  measuring = false;
  stop = true;
  await Promise.all(loops);
  const result: ChildResult = { ranges, cpuUs: cpu.user + cpu.system, from, to };
  console.log(`RESULT ${JSON.stringify(result)}`);
  await Promise.all(clients.map((c) => c.close()));
}

interface Run {
  method: Method;
  inFlight: number;
  round: number;
  usPerRange: number;
  rangesPerS: number;
  promoted: number;
  scavenges: number;
  load1: number;
}

/** Runs one child under --trace-gc-nvp; its scavenges in the measured window give the promoted share. */
function runChild(url: string, method: Method, inFlight: number, round: number): Promise<Run> {
  const self = fileURLToPath(import.meta.url);
  const args = ['--trace-gc-nvp', self, '--child', url, '--method', method, '--in-flight', String(inFlight), '--seconds', String(SECONDS), '--warm', String(WARM), '--devices', String(DEVICES)];
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const out: Buffer[] = [];
    p.stdout.on('data', (b: Buffer) => out.push(b));
    p.on('error', reject);
    p.on('close', (code) => {
      const lines = Buffer.concat(out).toString('utf8').split('\n');
      const r = lines.find((l) => l.startsWith('RESULT '));
      if (code !== 0 || r === undefined) return reject(new Error(`${method} client exited ${code} with no result`));
      const res = JSON.parse(r.slice('RESULT '.length)) as ChildResult;
      let allocated = 0;
      let promoted = 0;
      let scavenges = 0;
      for (const l of lines) {
        const m = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: .* gc=s .* allocated=(\d+) promoted=(\d+) /.exec(l);
        if (m === null || Number(m[1]) < res.from || Number(m[1]) > res.to) continue;
        scavenges++;
        allocated += Number(m[2]);
        promoted += Number(m[3]);
      }
      resolve({ method, inFlight, round, usPerRange: res.cpuUs / res.ranges, rangesPerS: res.ranges / SECONDS, promoted: allocated === 0 ? NaN : promoted / allocated, scavenges, load1: loadavg()[0] });
    });
  });
}

/** A promoted share; '-' for a run with no scavenge in its measured window (a short one). */
const pct = (x: number) => (Number.isNaN(x) ? '-' : `${(x * 100).toFixed(0)}%`);

async function main(): Promise<void> {
  stopAllAtExit();
  stopAllOnExit((l) => console.error(l));
  const dir = benchTempDir('keyslice-client-pages-');
  const cluster = await startLocalCluster({ dataDir: dir, nodes: 2, workers: 2, durability: 'os' });
  try {
    const c = await KeysliceClient.connect(cluster.url);
    await c.createTable(TABLE, { name: 'device', type: 'string' }, { name: 'seq', type: 'number' });
    for (let d = 0; d < DEVICES; d++) {
      const rows = Array.from({ length: PER_DEVICE }, (_, seq) => ({ device: `d${d}`, seq, payload: PAD }));
      for (let i = 0; i < rows.length; i += 25) if ((await c.batchWrite(TABLE, { puts: rows.slice(i, i + 25) })).length > 0) throw new Error('load failed');
    }
    await c.close();
    const runs: Run[] = [];
    for (const inFlight of IN_FLIGHT) {
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? METHODS : [...METHODS].reverse();
        for (const m of order) {
          const r = await runChild(cluster.url, m, inFlight, round);
          runs.push(r);
          console.error(`${inFlight} in flight, round ${round + 1}: ${m.padEnd(15)} ${r.usPerRange.toFixed(1)} µs CPU per range, ${pct(r.promoted)} promoted (${r.scavenges} scavenges), ${r.rangesPerS.toFixed(0)} ranges/s, load ${r.load1.toFixed(1)}`);
        }
      }
    }
    const L: string[] = [];
    L.push(`Client CPU per range of ${PER_DEVICE} and scavenges' promoted share; ${ROUNDS} rounds of ${SECONDS} s (after ${WARM} s), order swapped each round; ${CONNECTIONS} connections, one cluster of 2 nodes x 2 workers`);
    L.push('');
    L.push('| in flight | method | µs CPU per range, each round | median | promoted, each round | median | ranges/s (median) | load |');
    L.push('|--:|---|---|--:|---|--:|--:|---|');
    for (const inFlight of IN_FLIGHT) {
      for (const m of METHODS) {
        const rs = runs.filter((r) => r.inFlight === inFlight && r.method === m);
        const loads = rs.map((r) => r.load1);
        L.push(`| ${inFlight} | ${m} | ${rs.map((r) => r.usPerRange.toFixed(1)).join(', ')} | ${median(rs.map((r) => r.usPerRange)).toFixed(1)} | ${rs.map((r) => pct(r.promoted)).join(', ')} | ${pct(median(rs.map((r) => r.promoted)))} | ${median(rs.map((r) => r.rangesPerS)).toFixed(0)} | ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)} |`);
      }
      const ratios = Array.from({ length: ROUNDS }, (_, round) => {
        const [a, b] = METHODS.map((m) => runs.find((r) => r.inFlight === inFlight && r.round === round && r.method === m)!.usPerRange);
        return b / a;
      });
      L.push(`| ${inFlight} | forEachItemPage / getItems | ${ratios.map((x) => `${x.toFixed(2)}x`).join(', ')} | ${median(ratios).toFixed(2)}x | | | | |`);
    }
    console.log(L.join('\n'));
  } finally {
    await stopAll();
  }
}

if (opts.child !== undefined) {
  if (opts.method !== 'getItems' && opts.method !== 'forEachItemPage') refuseCommandLine(`--method must be getItems or forEachItemPage, got ${JSON.stringify(opts.method)}`, USAGE);
  if (IN_FLIGHT.length !== 1) refuseCommandLine('a child takes one --in-flight', USAGE);
  await child(opts.child, opts.method, IN_FLIGHT[0]);
  process.exit(0);
} else await main();

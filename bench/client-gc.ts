// The client's garbage collection on range pages, by requests in flight, in one process: why most of what the client
// allocates at 256 ranges in flight is promoted (bench/PROFILE.md, "the client's GC on range pages"). Each request is a
// promise made when it is sent, as KeysliceClient's are; answers arrive as the router sends them, a frame of --pages
// answers of 100 stored-shape items for the oldest requests, each turn, read by the client's own decodeClientResponses;
// the caller counts a page's items and drops it. --hold box: the promise is fulfilled with a small box that the caller
// empties after it counted, instead of with the page itself (not the client's API: the control that shows what holds
// the pages). Prints CPU ns per item (the process's, all threads: the collector's helpers too) and the collections
// (PerformanceObserver 'gc') per million items. Run with --trace-gc-nvp for what each scavenge kept and promoted.
//   node dist/bench/client-gc.js [--in-flight 256] [--pages 64] [--hold page|box] [--seconds 4]
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { intArg, numberArg, readCommandLine, refuseCommandLine } from '../shared/cli-args.js';
import { decodeClientResponses, encodeClientFrame, RESULT_OK } from '../shared/protocol.js';
import { NAME_ATTRIBUTE, type Item } from '../shared/values.js';

const USAGE = 'usage: node dist/bench/client-gc.js [--in-flight 256] [--pages 64] [--hold page|box] [--seconds 4]';
const opts = readCommandLine(
  process.argv.slice(2),
  { 'in-flight': { type: 'string', default: '256' }, pages: { type: 'string', default: '64' }, hold: { type: 'string', default: 'page' }, seconds: { type: 'string', default: '4' } },
  USAGE,
).values;
const IN_FLIGHT = intArg('in-flight', opts['in-flight'], 1, 100_000);
const PAGES = intArg('pages', opts.pages, 1, IN_FLIGHT);
const SECONDS = numberArg('seconds', opts.seconds, 0.5, 600);
if (opts.hold !== 'page' && opts.hold !== 'box') refuseCommandLine(`--hold must be page or box, got ${JSON.stringify(opts.hold)}`, USAGE);
const BOX = opts.hold === 'box';
/** Unmeasured first part of the run: the reader's code optimized, the young generation grown. */
const WARM_MS = 1000;

// hops.ts's items as a slice returns them: a name, the device, a sequence number, 160 bytes of payload, __mtime.
const page: Item[] = Array.from({ length: 100 }, (_, i) => ({ [NAME_ATTRIBUTE]: `d1_${i}`, device: 'd1', seq: i, payload: 'x'.repeat(160), __mtime: 1_764_000_000_000.5 + i }));
const frame = encodeClientFrame(Array.from({ length: PAGES }, (_, k) => [k, RESULT_OK, { items: page, examined: 100 }] as [number, typeof RESULT_OK, unknown]));

type Answer = { items: Item[] };
const waiting: ((a: Answer | { a: Answer | null }) => void)[] = [];
const request = () => new Promise<Answer | { a: Answer | null }>((resolve) => waiting.push(resolve));

let measuring = false;
let items = 0;
let done = false;
async function caller(): Promise<void> {
  while (!done) {
    const got = await request();
    let n: number;
    if (BOX) {
      const box = got as { a: Answer | null };
      n = box.a!.items.length;
      box.a = null;
    } else n = (got as Answer).items.length;
    if (measuring) items += n;
  }
}

/** Collections while measuring, by kind: counts, not their pauses (wall time, which a loaded machine stretches). */
const gcs = { minor: 0, major: 0 };
const observer = new PerformanceObserver((list) => {
  if (!measuring) return;
  for (const e of list.getEntries()) {
    const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs.minor++;
    else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.major++;
  }
});
observer.observe({ entryTypes: ['gc'] });

const callers = Array.from({ length: IN_FLIGHT }, caller);
let cpu0 = process.cpuUsage();
const started = performance.now();
/** One frame a turn, for the oldest PAGES requests, as a router's flush answers a connection. */
function deliver(): void {
  const now = performance.now();
  if (!measuring && now - started >= WARM_MS) {
    measuring = true;
    cpu0 = process.cpuUsage();
  }
  if (now - started >= WARM_MS + SECONDS * 1000) return finish();
  const answers = decodeClientResponses(frame);
  for (const [k, resolve] of waiting.splice(0, PAGES).entries()) {
    const result = answers[k][2] as Answer;
    resolve(BOX ? { a: result } : result);
  }
  setImmediate(deliver);
}
function finish(): void {
  const used = process.cpuUsage(cpu0);
  done = true;
  observer.disconnect();
  const perMillion = (x: number) => ((x * 1e6) / items).toFixed(1);
  console.log(`hold ${opts.hold}, ${IN_FLIGHT} in flight, frames of ${PAGES} pages: ${((used.user + used.system) * 1000 / items).toFixed(0)} ns CPU per item; per million items ${perMillion(gcs.minor)} scavenges, ${perMillion(gcs.major)} mark-compacts (${items} items)`);
  // The callers wait for answers that will not come; nothing else keeps the process alive.
  void callers;
}
setImmediate(deliver);

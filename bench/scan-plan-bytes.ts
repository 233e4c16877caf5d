// What a router's kept scan plan costs in memory (coordinator/router/router.ts, scanAsks; SCAN_PLANS_BYTES_MAX and
// SCAN_PLAN_OVERHEAD_BYTES in shared/limits.ts). The real Router builds plans for many distinct ranges against an
// in-process map (no nodes: a plan is built and kept before anything is sent); the V8 heap and the ArrayBuffers'
// bytes are read after a full GC with the plans kept and again after they are dropped, and the difference is
// divided among the plans kept (as many as SCAN_PLANS_BYTES_MAX keeps). What a plan costs beyond its SliceSets' bytes
// is its overhead: the plan's object, its lists, its Map entry and each ask's and link's object and Uint8Array. The
// last shape's SliceSets (8 KiB each, outside V8's heap) dominate it, and it keeps too few plans to fit the rest.
//
//   npm run build && node --expose-gc dist/bench/scan-plan-bytes.js
import { SCAN_ASK_OVERHEAD_BYTES, SCAN_PLAN_OVERHEAD_BYTES } from '../shared/limits.js';
import { Router } from '../coordinator/router/router.js';
import type { Routing } from '../coordinator/router/routing.js';
import type { SliceChannel } from '../coordinator/router/slice-channel.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');

/** A node as far as building a plan reads it: ready, with its worker count. */
const node = (url: string, workerCount: number): SliceChannel => ({
  url,
  state: 'ready',
  workerCount,
  send: () => Promise.reject(new Error('not sent')),
  sendToWorker: () => Promise.reject(new Error('not sent')),
});

/** A map that gives slice s to node (s >> 1) % nodes (pairs of slices in turn, as test/scan-plans.test.ts does). */
function routing(nodes: SliceChannel[]): Routing {
  return {
    epoch: 1,
    replicationFactor: 1,
    linkOf: (s: number) => nodes[(s >> 1) % nodes.length],
    scanUnfrozen: async () => {},
    linkReady: async () => {},
  } as unknown as Routing;
}

interface Plans {
  scanPlans: Map<number, { asks: { slices: Uint8Array }[]; bytes: number }>;
  scanAsks(from: number, to: number): Promise<unknown>;
}

function used(): number {
  gc!();
  gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Per plan kept: bytes measured, its SliceSets' bytes, its asks, and what the router counted. */
async function measure(nodes: number, workers: number, rangeSlices: number, plans: number) {
  const router = new Router(routing(Array.from({ length: nodes }, (_, n) => node(`n${n}`, workers)))) as unknown as Plans;
  // Ranges that start at every other pair of slices: distinct plans of the same shape.
  for (let k = 0; k < plans; k++) await router.scanAsks(4 * k, 4 * k + rangeSlices);
  let sets = 0;
  let asks = 0;
  let counted = 0;
  for (const p of router.scanPlans.values()) {
    for (const a of p.asks) sets += a.slices.byteLength;
    asks += p.asks.length;
    counted += p.bytes;
  }
  const kept = router.scanPlans.size;
  const before = used();
  router.scanPlans.clear();
  const after = used();
  return { kept, measured: (before - after) / kept, sets: sets / kept, asks: asks / kept, counted: counted / kept };
}

const shapes: [string, number, number, number, number][] = [
  ['2 slices, 1 node x 2 workers', 1, 2, 2, 20_000],
  ['64 slices, 2 nodes x 2 workers', 2, 2, 64, 10_000],
  ['1,024 slices, 2 nodes x 2 workers', 2, 2, 1_024, 3_000],
  ['1,024 slices, 16 nodes x 4 workers', 16, 4, 1_024, 1_000],
  ['65,536 slices, 16 nodes x 4 workers', 16, 4, 65_536, 8],
];
console.log(`counted now: the SliceSets, SCAN_ASK_OVERHEAD_BYTES ${SCAN_ASK_OVERHEAD_BYTES} an ask, SCAN_PLAN_OVERHEAD_BYTES ${SCAN_PLAN_OVERHEAD_BYTES} a plan`);
console.log('shape | plans kept | asks a plan | SliceSet bytes a plan | measured bytes a plan | overhead a plan (measured - SliceSets) | overhead an ask | counted bytes a plan');
const rows: { asks: number; overhead: number }[] = [];
for (const [name, nodes, workers, range, plans] of shapes) {
  const r = await measure(nodes, workers, range, plans);
  const overhead = r.measured - r.sets;
  rows.push({ asks: r.asks, overhead });
  console.log(`${name} | ${r.kept} | ${r.asks} | ${r.sets.toFixed(0)} | ${r.measured.toFixed(0)} | ${overhead.toFixed(0)} | ${(overhead / (r.asks + 1)).toFixed(0)} | ${r.counted.toFixed(0)}`);
}
// overhead = perPlan + perAsk * asks, from the fewest and the most asks a plan.
const [a, b] = [rows[0], rows[3]];
const perAsk = (b.overhead - a.overhead) / (b.asks - a.asks);
console.log(`fit: about ${perAsk.toFixed(0)} bytes an ask and ${(a.overhead - perAsk * a.asks).toFixed(0)} a plan beside its SliceSets`);

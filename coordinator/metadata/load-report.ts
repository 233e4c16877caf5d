// A table's load, gathered from every worker of every node: per slice, per
// node, the hottest sharding keys, and max/mean over all slices, the one figure
// that says whether a key design piles its work onto a few slices.
import { withTimeout } from '../../shared/timeout.js';
import type { Counts, HotKey, NodeLoad, SliceDescription, TableLoad } from '../../shared/api.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { HOT_KEYS_REPORTED, LOAD_REPORT_TIMEOUT_MS, LOAD_REPORT_TRIES_MAX, LOAD_WINDOW_SECONDS } from '../../shared/limits.js';
import { SliceOp, type SliceCounts, type StatsResult } from '../../shared/protocol.js';
import type { Table } from './catalog.js';
import type { NodeLink } from './node-link.js';

/** What a load report needs of a node's link (a router's channel to it has as much). */
type NodeStats = Pick<NodeLink, 'url' | 'state' | 'workerCount' | 'sendToWorker'>;

/** Names a stored sharding part as text, with its slice (router/primary-key.ts describePart:
 * passed in, so that metadata/ does not depend on the request path). */
export type KeyNamer = (table: Table, part: string, sliceCount: number) => { text: string; slice: number };

/** DescribeSlices: a table's load from every node that answers within LOAD_REPORT_TIMEOUT_MS,
 * as /metrics has it; a node that is down or late is named in `unreported` with the slices
 * the map gives it (`layout`), and the answer says it is not complete. */
export async function tableLoad(
  table: Table,
  links: readonly NodeStats[],
  layout: { nodes: string[]; owners: number[] },
  nameKey: KeyNamer,
): Promise<TableLoad> {
  const { load, failures } = await gatherTableLoad(table, links, layout.owners.length, LOAD_REPORT_TIMEOUT_MS, nameKey);
  for (const f of failures) {
    const index = layout.nodes.indexOf(f.node);
    const slices = index < 0 ? [] : layout.owners.flatMap((o, s) => (o === index ? [s] : []));
    load.unreported.push({ node: f.node, slices, code: f.error.code, message: f.error.message });
  }
  // Slices without a node (none has joined yet) are not reported by anyone either.
  const orphans = layout.owners.flatMap((o, s) => (o === -1 ? [s] : []));
  if (orphans.length > 0) load.unreported.push({ node: '', slices: orphans, code: 'Unavailable', message: 'these slices have no node yet' });
  load.complete = load.unreported.length === 0;
  return load;
}

/** Asks the nodes (`ask`) so that the answer counts only at one map epoch. Each worker reports the slices it owns
 * now: asked while an owner changes, a slice can be left out or reported twice. So the map's epoch is read before
 * the nodes are asked and again once every answer is in (`settledEpoch`: null while a move holds a slice frozen,
 * owned by no worker though the epoch stays); unless it was settled and the same, they are asked again, at most
 * `triesMax` times in all and, past the first, within `msMax`; then `moved` says why the answer is not complete. */
export async function atOneSettledEpoch<T>(
  settledEpoch: () => number | null,
  ask: () => Promise<T>,
  triesMax: number,
  msMax = Infinity,
): Promise<{ answer: T; moved: string | null }> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const before = settledEpoch();
    const answer = await ask();
    const after = settledEpoch();
    if (before !== null && after === before) return { answer, moved: null };
    if (attempt >= triesMax || Date.now() - started >= msMax) {
      const moved = before === null || after === null ? 'a slice move held a slice frozen' : `the map moved from epoch ${before} to ${after}`;
      return { answer, moved: `${moved} while the nodes reported; a slice may be left out or counted twice` };
    }
  }
}

/** gatherTableLoad for /metrics, the studio and cluster status, at one settled epoch (atOneSettledEpoch), asked at
 * most LOAD_REPORT_TRIES_MAX times. */
export async function gatherTableLoadAtOneEpoch(
  settledEpoch: () => number | null,
  ...args: Parameters<typeof gatherTableLoad>
): Promise<Awaited<ReturnType<typeof gatherTableLoad>> & { moved: string | null }> {
  const { answer, moved } = await atOneSettledEpoch(settledEpoch, () => gatherTableLoad(...args), LOAD_REPORT_TRIES_MAX);
  return { ...answer, moved };
}

/** A table's load from the nodes that are ready and answer within `timeoutMs`; the others
 * are in `failures`, and the figures (slices, nodes, max/mean) are those of
 * the rest (/metrics and cluster status: what is known, marked as partial). */
export async function gatherTableLoad(
  table: Table,
  links: readonly NodeStats[],
  sliceCount: number,
  timeoutMs = LOAD_REPORT_TIMEOUT_MS,
  /** Without it the hot keys are left out (the cluster status needs only the totals). */
  nameKey: KeyNamer | null = null,
): Promise<{ load: TableLoad; failures: { node: string; error: KeysliceError }[] }> {
  const perNode = links.map(async (link): Promise<[NodeStats, StatsResult[] | KeysliceError]> => {
    if (link.state !== 'ready') return [link, new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)];
    const perWorker = Promise.all(Array.from({ length: link.workerCount }, (_, w) => link.sendToWorker(w, [SliceOp.Stats, table.id])));
    try {
      return [link, await withTimeout(perWorker, timeoutMs, () => new KeysliceError('Unavailable', `slice node ${link.url} did not report its load within ${timeoutMs} ms`))];
    } catch (err) {
      return [link, toKeysliceError(err)];
    }
  });
  const reports = await Promise.all(perNode);
  const failures = reports.flatMap(([link, r]) => (r instanceof KeysliceError ? [{ node: link.url, error: r }] : []));
  const answers = reports.flatMap(([link, r]) => (r instanceof KeysliceError ? [] : r.map((perWorker): [NodeStats, StatsResult] => [link, perWorker])));

  const slices: SliceDescription[] = [];
  const nodes = new Map<string, NodeLoad>();
  for (const [link, r] of reports) if (!(r instanceof KeysliceError)) nodes.set(link.url, { node: link.url, items: 0, bytes: 0, heldItems: 0, heldBytes: 0, readsPerSecond: 0, writesPerSecond: 0, ...noCounts() });
  const hotKeys: HotKey[] = [];
  const hotByPart = new Map<string, number>();
  const totals = noCounts();
  for (const [link, [perSlice, hot, tableCounts, [heldItems, heldBytes]]] of answers) {
    const node = nodes.get(link.url)!;
    node.heldItems += heldItems;
    node.heldBytes += heldBytes;
    for (const [slice, items, bytes, readsPerSecond, writesPerSecond, counts] of perSlice) {
      slices.push({ slice, node: link.url, items, bytes, readsPerSecond, writesPerSecond, ...countsOf(counts) });
      node.items += items;
      node.bytes += bytes;
      node.readsPerSecond += readsPerSecond;
      node.writesPerSecond += writesPerSecond;
    }
    // Per worker, over every slice it served: a slice moved away does not take its counts along.
    addCounts(node, countsOf(tableCounts));
    addCounts(totals, countsOf(tableCounts));
    // A key can be reported by two workers (its slice moved within the window): sum them.
    for (const [part, opsPerSecond] of hot) hotByPart.set(part, (hotByPart.get(part) ?? 0) + opsPerSecond);
  }
  for (const [part, opsPerSecond] of nameKey === null ? [] : hotByPart) {
    const { text, slice } = nameKey!(table, part, sliceCount);
    hotKeys.push({ key: text, slice, opsPerSecond });
  }
  slices.sort((a, b) => a.slice - b.slice);
  hotKeys.sort((a, b) => b.opsPerSecond - a.opsPerSecond);
  const ratio = (f: (s: SliceDescription) => number) => {
    const total = slices.reduce((a, s) => a + f(s), 0);
    return total === 0 ? 0 : Math.max(...slices.map(f)) / (total / sliceCount);
  };
  const load: TableLoad = {
    sliceCount,
    windowSeconds: LOAD_WINDOW_SECONDS,
    slices,
    nodes: [...nodes.values()],
    hotKeys: hotKeys.slice(0, HOT_KEYS_REPORTED),
    maxOverMean: { items: ratio((s) => s.items), reads: ratio((s) => s.readsPerSecond), writes: ratio((s) => s.writesPerSecond) },
    totals,
    complete: failures.length === 0,
    unreported: [],
  };
  return { load, failures };
}

const noCounts = (): Counts => ({ reads: 0, writes: 0, readBytes: 0, writeBytes: 0, throttled: 0, duplicateWrites: 0 });

function countsOf([reads, writes, readBytes, writeBytes, throttled, duplicateWrites]: SliceCounts): Counts {
  return { reads, writes, readBytes, writeBytes, throttled, duplicateWrites };
}

function addCounts(to: Counts, c: Counts): void {
  to.reads += c.reads;
  to.writes += c.writes;
  to.readBytes += c.readBytes;
  to.writeBytes += c.writeBytes;
  to.throttled += c.throttled;
  to.duplicateWrites += c.duplicateWrites;
}


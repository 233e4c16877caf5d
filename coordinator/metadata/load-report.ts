// A table's load, gathered from every worker of every node: per slice, per
// node, the hottest sharding keys, and max/mean over all slices, the one figure
// that says whether a key design piles its work onto a few slices.
import { withTimeout } from '../../shared/timeout.js';
import type { Counts, HotKey, NodeLoad, SliceDescription, TableLoad } from '../../shared/api.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { workerOf } from '../../shared/hashing.js';
import { HOT_KEYS_REPORTED, LOAD_REPORT_TIMEOUT_MS, LOAD_REPORT_TRIES_MAX, LOAD_WINDOW_SECONDS } from '../../shared/limits.js';
import { WrongOwnerTries } from '../../shared/wrong-owner.js';
import { SliceOp, sliceSetOf, type SliceCounts, type StatsResult } from '../../shared/protocol.js';
import type { Table } from './catalog.js';
import type { NodeLink } from './node-link.js';

/** What a load report needs of a node's link (a router's channel to it has as much). */
type NodeStats = Pick<NodeLink, 'url' | 'state' | 'workerCount' | 'sendToWorker'>;

/** Names a stored sharding part as text, with its slice (router/primary-key.ts describePart:
 * passed in, so that metadata/ does not depend on the request path). */
export type KeyNamer = (table: Table, part: string, sliceCount: number) => { text: string; slice: number };

/** Where a load report asks, read afresh for each try: the links of the nodes that are part of the cluster, and the
 * map's nodes and each slice's owner (an index into nodes, or -1) with the map's epoch; and the wait before a try
 * after a refusal, the Router's (Routing.afterWrongOwner: a router asks for the newer map). */
export interface LoadSource {
  presentLinks(): readonly NodeStats[];
  layout(): { nodes: string[]; owners: number[] };
  /** The map's epoch, read with layout(): the try's `sentAt` for afterWrongOwner. */
  readonly epoch: number;
  afterWrongOwner(attempt: number, sentAt?: number, nodeEpoch?: number): Promise<void>;
}

/** DescribeSlices: a table's load from every node that answers within LOAD_REPORT_TIMEOUT_MS,
 * as /metrics has it; a node that is down or late, or whose slices changed owners while it was asked more often than
 * its tries allow, is named in `unreported` with the slices the map gives it, and the answer says it is not complete. */
export async function tableLoad(table: Table, source: LoadSource, nameKey: KeyNamer, triesMax: number): Promise<TableLoad> {
  const { load, failures, layout } = await gatherTableLoad(table, source, LOAD_REPORT_TIMEOUT_MS, nameKey, triesMax);
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

/** A table's load from the nodes that are ready and answer within `timeoutMs`; the others
 * are in `failures`, and the figures (slices, nodes, max/mean) are those of
 * the rest (/metrics and cluster status: what is known, marked as partial).
 * Each worker is asked for the slices the map gives it (Stats names them) and refuses (WrongOwner) unless it owns
 * every one, so each slice is reported once, by its owner, or its node is refused: then the map is read and the nodes
 * asked again, under the Router's policy (shared/wrong-owner.ts: its waits, WRONG_OWNER_RETRY_MS_MAX) but at most
 * `triesMax` tries in all; a node still refused is among the failures, with the error that says so. Were a worker to
 * report the slices it owns instead, one asked while an owner changes could leave a slice out or report it twice (as
 * the owner it was and the one it became), with no error. */
export async function gatherTableLoad(
  table: Table,
  source: LoadSource,
  timeoutMs = LOAD_REPORT_TIMEOUT_MS,
  /** Without it the hot keys are left out (the cluster status needs only the totals). */
  nameKey: KeyNamer | null = null,
  triesMax = LOAD_REPORT_TRIES_MAX,
): Promise<{ load: TableLoad; failures: { node: string; error: KeysliceError }[]; layout: { nodes: string[]; owners: number[] } }> {
  const tries = new WrongOwnerTries(`the load of table ${table.name}`, triesMax);
  for (;;) {
    const layout = source.layout();
    // The epoch of the map that chose the try's asks: a map that moved while they were in flight (a handover's new
    // leader, a move's switch) takes the next try at once (wrongOwnerWait), as for a Router's op.
    const sentAt = source.epoch;
    const got = await gatherOnce(table, source.presentLinks(), layout, timeoutMs, nameKey);
    if (!got.failures.some((f) => f.error.code === 'WrongOwner')) return { ...got, layout };
    if (!tries.again()) {
      const failures = got.failures.map((f) => (f.error.code === 'WrongOwner' ? { node: f.node, error: tries.exhausted(f.error) } : f));
      return { load: got.load, failures, layout };
    }
    await source.afterWrongOwner(tries.refusals - 1, sentAt, namedEpoch(got.failures));
  }
}

/** The newest epoch the nodes named in refusing their asks for their epoch (details.nodeEpoch), where each WrongOwner
 * named one, for the wait before the next try (wrongOwnerWait: a map that new where a node is ahead); undefined where
 * a worker refused a slice it did not own at the batch's epoch, which names none (a newer map is waited for then). */
function namedEpoch(failures: readonly { error: KeysliceError }[]): number | undefined {
  const named = failures.filter((f) => f.error.code === 'WrongOwner').map((f) => f.error.details?.nodeEpoch);
  return named.length > 0 && named.every((e) => e !== undefined) ? Math.max(...(named as number[])) : undefined;
}

/** gatherTableLoad's one try, with the map's `layout` read with `links`. */
async function gatherOnce(
  table: Table,
  links: readonly NodeStats[],
  layout: { nodes: string[]; owners: number[] },
  timeoutMs: number,
  nameKey: KeyNamer | null,
): Promise<{ load: TableLoad; failures: { node: string; error: KeysliceError }[] }> {
  const sliceCount = layout.owners.length;
  const perNode = links.map(async (link): Promise<[NodeStats, StatsResult[] | KeysliceError]> => {
    if (link.state !== 'ready') return [link, new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)];
    // Each worker of the node is asked (for what it holds over every slice), each for the slices the map gives it.
    const index = layout.nodes.indexOf(link.url);
    const slicesOf: number[][] = Array.from({ length: link.workerCount }, () => []);
    if (index >= 0) layout.owners.forEach((o, s) => o === index && slicesOf[workerOf(s, link.workerCount)].push(s));
    const perWorker = Promise.all(slicesOf.map((slices, w) => link.sendToWorker(w, [SliceOp.Stats, table.id, sliceSetOf(0, slices)])));
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


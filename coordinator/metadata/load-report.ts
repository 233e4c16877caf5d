// A table's load, gathered from every worker of every node: per slice, per
// node, the hottest sharding keys, and max/mean over all slices, the one figure
// that says whether a key design piles its work onto a few slices.
import type { HotKey, NodeLoad, SliceDescription, TableLoad } from '../../shared/api.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import { HOT_KEYS_REPORTED, LOAD_REPORT_TIMEOUT_MS, LOAD_WINDOW_SECONDS } from '../../shared/limits.js';
import { SliceOp, type StatsResult } from '../../shared/protocol.js';
import type { Table } from './catalog.js';
import { requireReady, type NodeLink } from './node-link.js';

/** Names a stored sharding part as text, with its slice (router/primary-key.ts describePart:
 * passed in, so that metadata/ does not depend on the request path). */
export type KeyNamer = (table: Table, part: string, sliceCount: number) => { text: string; slice: number };

/** A table's load from every node, or the error of a node that is not ready or fails
 * (DescribeSlices: its callers read a complete answer, e.g. to wait until every node serves). */
export async function tableLoad(table: Table, links: readonly NodeLink[], sliceCount: number, nameKey: KeyNamer): Promise<TableLoad> {
  requireReady(links);
  const { load, failures } = await gatherTableLoad(table, links, sliceCount, Infinity, nameKey);
  if (failures.length > 0) throw failures[0].error;
  return load;
}

/** A table's load from the nodes that are ready and answer within `timeoutMs`; the others
 * are in `failures`, and the figures (slices, nodes, max/mean) are those of
 * the rest (/metrics and cluster status: what is known, marked as partial). */
export async function gatherTableLoad(
  table: Table,
  links: readonly NodeLink[],
  sliceCount: number,
  timeoutMs = LOAD_REPORT_TIMEOUT_MS,
  /** Without it the hot keys are left out (the cluster status needs only the totals). */
  nameKey: KeyNamer | null = null,
): Promise<{ load: TableLoad; failures: { node: string; error: KeysliceError }[] }> {
  const perNode = links.map(async (link): Promise<[NodeLink, StatsResult[] | KeysliceError]> => {
    if (link.state !== 'ready') return [link, new KeysliceError('Unavailable', `slice node ${link.url} is not available; retry later`)];
    const perWorker = Promise.all(Array.from({ length: link.workerCount }, (_, w) => link.sendToWorker(w, [SliceOp.Stats, table.id]) as Promise<StatsResult>));
    try {
      return [link, await withTimeout(perWorker, timeoutMs, () => new KeysliceError('Unavailable', `slice node ${link.url} did not report its load within ${timeoutMs} ms`))];
    } catch (err) {
      return [link, toKeysliceError(err)];
    }
  });
  const reports = await Promise.all(perNode);
  const failures = reports.flatMap(([link, r]) => (r instanceof KeysliceError ? [{ node: link.url, error: r }] : []));
  const answers = reports.flatMap(([link, r]) => (r instanceof KeysliceError ? [] : r.map((perWorker): [NodeLink, StatsResult] => [link, perWorker])));

  const slices: SliceDescription[] = [];
  const nodes = new Map<string, NodeLoad>();
  for (const [link, r] of reports) if (!(r instanceof KeysliceError)) nodes.set(link.url, { node: link.url, items: 0, bytes: 0, readsPerSecond: 0, writesPerSecond: 0 });
  const hotKeys: HotKey[] = [];
  const hotByPart = new Map<string, number>();
  for (const [link, [perSlice, hot]] of answers) {
    const node = nodes.get(link.url)!;
    for (const [slice, items, bytes, readsPerSecond, writesPerSecond] of perSlice) {
      slices.push({ slice, node: link.url, items, bytes, readsPerSecond, writesPerSecond });
      node.items += items;
      node.bytes += bytes;
      node.readsPerSecond += readsPerSecond;
      node.writesPerSecond += writesPerSecond;
    }
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
  };
  return { load, failures };
}

/** `p`, or a rejection with `late()` after `ms` (Infinity: `p` itself). */
function withTimeout<T>(p: Promise<T>, ms: number, late: () => Error): Promise<T> {
  if (ms === Infinity) return p;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(late()), ms)));
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

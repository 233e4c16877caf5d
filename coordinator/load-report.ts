// A table's load, gathered from every worker of every node: per slice, per
// node, the hottest sharding keys, and max/mean over all slices, the one figure
// that says whether a key design piles its work onto a few slices.
import type { HotKey, NodeLoad, SliceDescription, TableLoad } from '../shared/api.js';
import { HOT_KEYS_REPORTED, LOAD_WINDOW_SECONDS } from '../shared/limits.js';
import { SliceOp, type StatsResult } from '../shared/protocol.js';
import type { Table } from './catalog.js';
import { requireReady, type NodeLink } from './node-link.js';
import { describePart } from './primary-key.js';

export async function tableLoad(table: Table, links: readonly NodeLink[], sliceCount: number): Promise<TableLoad> {
  requireReady(links);
  const asked: Promise<[NodeLink, StatsResult]>[] = [];
  for (const link of links) {
    for (let w = 0; w < link.workerCount; w++) asked.push(link.sendToWorker(w, [SliceOp.Stats, table.id]).then((r) => [link, r as StatsResult]));
  }
  const answers = await Promise.all(asked);

  const slices: SliceDescription[] = [];
  const nodes = new Map<string, NodeLoad>(links.map((l) => [l.url, { node: l.url, items: 0, bytes: 0, readsPerSecond: 0, writesPerSecond: 0 }]));
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
  for (const [part, opsPerSecond] of hotByPart) {
    const { text, slice } = describePart(table, part, sliceCount);
    hotKeys.push({ key: text, slice, opsPerSecond });
  }
  slices.sort((a, b) => a.slice - b.slice);
  hotKeys.sort((a, b) => b.opsPerSecond - a.opsPerSecond);
  const ratio = (f: (s: SliceDescription) => number) => {
    const total = slices.reduce((a, s) => a + f(s), 0);
    return total === 0 ? 0 : Math.max(...slices.map(f)) / (total / sliceCount);
  };
  return {
    sliceCount,
    windowSeconds: LOAD_WINDOW_SECONDS,
    slices,
    nodes: [...nodes.values()],
    hotKeys: hotKeys.slice(0, HOT_KEYS_REPORTED),
    maxOverMean: { items: ratio((s) => s.items), reads: ratio((s) => s.readsPerSecond), writes: ratio((s) => s.writesPerSecond) },
  };
}

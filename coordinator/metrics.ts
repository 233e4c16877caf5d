// Prometheus text at GET /metrics: per node and per slice of every table,
// items, bytes, reads and writes per second, and each table's max/mean.
import type { TableLoad } from '../shared/api.js';
import type { Catalog } from './catalog.js';
import type { ClusterMap } from './cluster-map.js';
import { tableLoad } from './load-report.js';
import type { NodeLink } from './node-link.js';

const GAUGES = [
  ['items', 'items stored'],
  ['bytes', 'bytes stored'],
  ['reads_per_second', 'read operations per second over the load window'],
  ['writes_per_second', 'write operations per second over the load window'],
] as const;

const label = (v: string | number) => `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

export async function renderMetrics(catalog: Catalog, map: ClusterMap, links: readonly NodeLink[], moves?: { inFlight: number; completed: number; failed: number; itemsMoved: number }): Promise<string> {
  const lines: string[] = [];
  lines.push('# HELP keyslice_node_up 1 if the coordinator is connected to the slice node');
  lines.push('# TYPE keyslice_node_up gauge');
  for (const l of links) lines.push(`keyslice_node_up{node=${label(l.url)}} ${l.state === 'ready' ? 1 : 0}`);
  const up = links.every((l) => l.state === 'ready');
  const loads: [string, TableLoad][] = [];
  if (up) for (const name of catalog.names()) loads.push([name, await tableLoad(catalog.get(name), links, map.sliceCount)]);

  const values = { items: 'items', bytes: 'bytes', reads_per_second: 'readsPerSecond', writes_per_second: 'writesPerSecond' } as const;
  for (const [metric, help] of GAUGES) {
    lines.push(`# HELP keyslice_node_${metric} ${help}, per node and table`, `# TYPE keyslice_node_${metric} gauge`);
    for (const [table, load] of loads) for (const n of load.nodes) lines.push(`keyslice_node_${metric}{table=${label(table)},node=${label(n.node)}} ${n[values[metric]]}`);
    lines.push(`# HELP keyslice_slice_${metric} ${help}, per slice that holds items or saw load`, `# TYPE keyslice_slice_${metric} gauge`);
    for (const [table, load] of loads) {
      for (const s of load.slices) lines.push(`keyslice_slice_${metric}{table=${label(table)},slice="${s.slice}",node=${label(s.node)}} ${s[values[metric]]}`);
    }
  }
  lines.push('# HELP keyslice_table_max_over_mean the busiest slice over the mean of all slices', '# TYPE keyslice_table_max_over_mean gauge');
  for (const [table, load] of loads) {
    for (const [kind, v] of Object.entries(load.maxOverMean)) lines.push(`keyslice_table_max_over_mean{table=${label(table)},kind="${kind}"} ${v}`);
  }
  if (moves !== undefined) {
    lines.push('# HELP keyslice_cluster_epoch the cluster map epoch', '# TYPE keyslice_cluster_epoch gauge', `keyslice_cluster_epoch ${map.epoch}`);
    lines.push('# HELP keyslice_moves_in_flight slice moves running now', '# TYPE keyslice_moves_in_flight gauge', `keyslice_moves_in_flight ${moves.inFlight}`);
    lines.push('# HELP keyslice_moves_completed_total slice moves completed', '# TYPE keyslice_moves_completed_total counter', `keyslice_moves_completed_total ${moves.completed}`);
    lines.push('# HELP keyslice_moves_failed_total slice moves rolled back', '# TYPE keyslice_moves_failed_total counter', `keyslice_moves_failed_total ${moves.failed}`);
    lines.push('# HELP keyslice_moved_items_total items copied by completed moves', '# TYPE keyslice_moved_items_total counter', `keyslice_moved_items_total ${moves.itemsMoved}`);
  }
  return lines.join('\n') + '\n';
}

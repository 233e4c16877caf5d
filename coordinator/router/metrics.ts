// Prometheus text at GET /metrics: per node and per slice of every table,
// items, bytes, reads and writes per second, and each table's max/mean. With a
// node down (or slow to answer), the series of the nodes that answered are
// served, and keyslice_node_load_reported / keyslice_metrics_complete say what
// is missing.
import type { TableLoad } from '../../shared/api.js';
import { gatherTableLoad, type LoadSource } from '../metadata/load-report.js';
import type { NodeLink } from '../metadata/node-link.js';
import { describePart } from './primary-key.js';
import type { TableSource } from './routing.js';

const GAUGES = [
  ['items', 'items stored'],
  ['bytes', 'bytes stored'],
  ['reads_per_second', 'read operations per second over the load window'],
  ['writes_per_second', 'write operations per second over the load window'],
] as const;

/** Cumulative counters from the slice nodes (shared/api.ts Counts): per slice (the node that
 * serves it now) and per table and node (every slice the node served since it started). No
 * per-table series: a node that is down would make a sum go back, which reads as a reset. */
const COUNTERS = [
  ['reads', 'reads', 'read operations admitted (GetItem, one per range request)'],
  ['writes', 'writes', 'write operations admitted (put, update, delete)'],
  ['read_bytes', 'readBytes', 'stored bytes of the items read'],
  ['write_bytes', 'writeBytes', 'stored bytes of the items written'],
  ['throttled', 'throttled', 'operations refused with ThroughputExceeded at the per-slice capacity'],
  ['duplicate_writes', 'duplicateWrites', 'writes sent again whose request id the slice had applied already: answered what they got then, applied nothing'],
] as const;

const label = (v: string | number) => `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** `extra`: lines of the process's own (a router's link to its coordinator). */
export async function renderMetrics(
  catalog: TableSource,
  map: LoadSource,
  links: readonly NodeLink[],
  moves?: { inFlight: number; completed: number; failed: number; itemsMoved: number },
  extra: string[] = [],
): Promise<string> {
  const lines: string[] = [...extra];
  lines.push('# HELP keyslice_node_up 1 if the coordinator is connected to the slice node');
  lines.push('# TYPE keyslice_node_up gauge');
  for (const l of links) lines.push(`keyslice_node_up{node=${label(l.url)}} ${l.state === 'ready' ? 1 : 0}`);
  // Every node that is up is asked, all tables at once, each for at most LOAD_REPORT_TIMEOUT_MS:
  // a node that is down or slow leaves out its own series, not everybody's.
  // A node whose slices changed owners while it was asked, and again when asked once more, is unreported too
  // (load-report.ts gatherTableLoad).
  const gathered = await Promise.all(catalog.names().map(async (name) => [name, await gatherTableLoad(catalog.get(name), map, undefined, describePart)] as const));
  const loads: [string, TableLoad][] = gathered.map(([name, g]) => [name, g.load]);
  const unreported = new Set(gathered.flatMap(([, g]) => g.failures.map((f) => f.node)));
  for (const l of links) if (l.state !== 'ready') unreported.add(l.url);
  lines.push('# HELP keyslice_node_load_reported 1 if the slice node reported the load of every table for this scrape; 0: its per-table and per-slice series are missing');
  lines.push('# TYPE keyslice_node_load_reported gauge');
  for (const l of links) lines.push(`keyslice_node_load_reported{node=${label(l.url)}} ${unreported.has(l.url) ? 0 : 1}`);
  lines.push('# HELP keyslice_metrics_complete 1 if every slice node reported its load; 0: the per-table and per-slice series are partial');
  lines.push('# TYPE keyslice_metrics_complete gauge', `keyslice_metrics_complete ${unreported.size === 0 ? 1 : 0}`);

  const values = { items: 'items', bytes: 'bytes', reads_per_second: 'readsPerSecond', writes_per_second: 'writesPerSecond' } as const;
  for (const [metric, help] of GAUGES) {
    lines.push(`# HELP keyslice_node_${metric} ${help}, per node and table`, `# TYPE keyslice_node_${metric} gauge`);
    for (const [table, load] of loads) for (const n of load.nodes) lines.push(`keyslice_node_${metric}{table=${label(table)},node=${label(n.node)}} ${n[values[metric]]}`);
    lines.push(`# HELP keyslice_slice_${metric} ${help}, per slice that holds items or saw load`, `# TYPE keyslice_slice_${metric} gauge`);
    for (const [table, load] of loads) {
      for (const s of load.slices) lines.push(`keyslice_slice_${metric}{table=${label(table)},slice="${s.slice}",node=${label(s.node)}} ${s[values[metric]]}`);
    }
  }
  for (const [metric, field] of [['held_items', 'heldItems'], ['held_bytes', 'heldBytes']] as const) {
    lines.push(`# HELP keyslice_node_${metric} ${metric === 'held_items' ? 'items' : 'bytes'} held in memory over every replica on the node (led and followed slices), per node and table`, `# TYPE keyslice_node_${metric} gauge`);
    for (const [table, load] of loads) for (const n of load.nodes) lines.push(`keyslice_node_${metric}{table=${label(table)},node=${label(n.node)}} ${n[field]}`);
  }
  for (const [metric, field, help] of COUNTERS) {
    lines.push(`# HELP keyslice_slice_${metric}_total ${help}, per slice, since the serving node started`, `# TYPE keyslice_slice_${metric}_total counter`);
    for (const [table, load] of loads) {
      for (const s of load.slices) lines.push(`keyslice_slice_${metric}_total{table=${label(table)},slice="${s.slice}",node=${label(s.node)}} ${s[field]}`);
    }
    lines.push(`# HELP keyslice_node_${metric}_total ${help}, per table and node, since the node started`, `# TYPE keyslice_node_${metric}_total counter`);
    for (const [table, load] of loads) for (const n of load.nodes) lines.push(`keyslice_node_${metric}_total{table=${label(table)},node=${label(n.node)}} ${n[field]}`);
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

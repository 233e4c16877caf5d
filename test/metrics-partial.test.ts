// /metrics and cluster status with a slice node that does not answer: a story on a
// real two-node cluster. The node that is up keeps its per-table and per-slice
// series; the one that is hung (SIGSTOP), then killed (SIGKILL, by PID), is marked
// by keyslice_node_load_reported 0 and keyslice_metrics_complete 0, and a scrape
// never waits longer than LOAD_REPORT_TIMEOUT_MS for it.
import { beforeAll, describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import type { ClusterStatus } from '../shared/api.js';
import { LOAD_REPORT_TIMEOUT_MS, RETRY_AFTER_SECONDS } from '../shared/limits.js';
import { useCluster } from './cluster-fixture.js';
import { parseExposition, samples, total } from './prometheus-text.js';
import { waitFor } from './elastic-fixture.js';
import { freezeProcess } from './freeze.js';

const c = useCluster({ nodes: 2, workers: 1, slices: 64 });
const T = 'partial';
const KEYS = Array.from({ length: 40 }, (_, i) => `k${i}`);

beforeAll(async () => {
  await c.client.createTable(T, { name: 'id', type: 'string' });
  await Promise.all(KEYS.map((id) => c.client.putItem(T, { id })));
});

async function scrape(): Promise<{ text: string; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${c.cluster.url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  expect(res.status).toBe(200);
  return { text: await res.text(), ms: Date.now() - started };
}

/** Items per node from the keyslice_slice_items series of the table. */
function sliceItemsByNode(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^keyslice_slice_items\{table="partial",slice="\d+",node="([^"]+)"\} (\d+)$/gm)) out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[2]));
  return out;
}

const gauge = (text: string, series: string) => new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\d+)$`, 'm').exec(text)?.[1];

describe('a slice node stops answering', () => {
  it('keeps the series of the node that answers and marks the other, hung and then dead', async () => {
    const [up, down] = c.cluster.nodes;
    const before = await scrape();
    const items = sliceItemsByNode(before.text);
    expect(items.get(up.url)).toBeGreaterThan(0);
    expect(items.get(down.url)).toBeGreaterThan(0);
    expect(items.get(up.url)! + items.get(down.url)!).toBe(KEYS.length);
    expect(gauge(before.text, 'keyslice_metrics_complete')).toBe('1');
    for (const n of [up, down]) expect(gauge(before.text, `keyslice_node_load_reported{node="${n.url}"}`)).toBe('1');

    // Hung: connected, so "up", but it does not answer. The scrape waits for it a bounded time.
    try {
      await freezeProcess(down.child.pid!);
      const hung = await scrape();
      expect(hung.ms).toBeLessThan(LOAD_REPORT_TIMEOUT_MS + 3_000);
      expect(gauge(hung.text, `keyslice_node_up{node="${down.url}"}`)).toBe('1');
      expect(gauge(hung.text, `keyslice_node_load_reported{node="${down.url}"}`)).toBe('0');
      expect(gauge(hung.text, `keyslice_node_load_reported{node="${up.url}"}`)).toBe('1');
      expect(gauge(hung.text, 'keyslice_metrics_complete')).toBe('0');
      expect(sliceItemsByNode(hung.text)).toEqual(new Map([[up.url, items.get(up.url)]]));
    } finally {
      process.kill(down.child.pid!, 'SIGCONT');
    }

    // Dead.
    await stopProcess(down.child, 'SIGKILL');
    await waitFor(async () => gauge((await scrape()).text, `keyslice_node_up{node="${down.url}"}`) === '0', 'the coordinator to see the node gone', 10_000);
    const dead = await scrape();
    // It still parses strictly, keeps the counters of the node that is up as they were, and
    // leaves out the dead node's; this process's request and process series are all there.
    const parsed = parseExposition(dead.text);
    const upWrites = total(parseExposition(before.text), 'keyslice_node_writes_total', { table: T, node: up.url });
    expect(upWrites).toBeGreaterThan(0);
    expect(total(parsed, 'keyslice_node_writes_total', { table: T, node: up.url })).toBe(upWrites);
    expect(samples(parsed, 'keyslice_node_writes_total').filter((s) => s.labels.node === down.url)).toEqual([]);
    expect(samples(parsed, 'keyslice_slice_writes_total').filter((s) => s.labels.node === down.url)).toEqual([]);
    expect(total(parsed, 'keyslice_requests_total', { op: 'PutItem' })).toBe(KEYS.length);
    expect(total(parsed, 'keyslice_process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sliceItemsByNode(dead.text)).toEqual(new Map([[up.url, items.get(up.url)]]));
    expect(dead.text).toMatch(new RegExp(`^keyslice_node_items\\{table="partial",node="${up.url}"\\} ${items.get(up.url)}$`, 'm'));
    expect(dead.text).toMatch(/^keyslice_table_max_over_mean\{table="partial",kind="items"\} [\d.]+$/m);
    expect(gauge(dead.text, `keyslice_node_load_reported{node="${down.url}"}`)).toBe('0');
    expect(gauge(dead.text, `keyslice_node_load_reported{node="${up.url}"}`)).toBe('1');
    expect(gauge(dead.text, 'keyslice_metrics_complete')).toBe('0');

    // Cluster status: the same figures, marked partial.
    const status = (await (await fetch(`${c.cluster.url}/cluster/status`, { signal: AbortSignal.timeout(15_000) })).json()) as ClusterStatus;
    expect(status.loadComplete).toBe(false);
    expect(status.nodes.find((n) => n.node === up.url)?.items).toBe(items.get(up.url));

    // DescribeSlices: the same figures, marked partial, with the dead node's slices named.
    const described = await c.client.describeSlices(T);
    expect(described.complete).toBe(false);
    expect(described.unreported.map((u) => [u.node, u.code])).toEqual([[down.url, 'Unavailable']]);
    expect(described.unreported[0].slices.length).toBeGreaterThan(0);
    expect(described.slices.some((s) => described.unreported[0].slices.includes(s.slice))).toBe(false);
    expect(described.slices.reduce((a, s) => a + s.items, 0)).toBe(items.get(up.url));
    expect(described.nodes.map((n) => n.node)).toEqual([up.url]);

    // An item on the dead node: 503 with Retry-After.
    const onDown = (await Promise.all(KEYS.map((id) => c.client.getItem(T, id).then(() => null, () => id)))).find((id) => id !== null)!;
    const res = await fetch(`${c.cluster.url}/api/GetItem`, { method: 'POST', body: JSON.stringify({ table: T, key: onDown }), signal: AbortSignal.timeout(15_000) });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS));
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('Unavailable');
  });
});

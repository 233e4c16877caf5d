// The studio's cost at scale: a local cluster of 1024 slices with --tables
// tables of --items items each (random keys, so nearly every slice of every
// table holds items) and a write load over all of them, watched by --viewers
// stream readers for --duration seconds. Reports what one sample costs the
// coordinator (tookMs per sample, CPU of the coordinator process) and what a
// viewer receives (the hello with its history, bytes per sample).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeysliceClient } from '../coordinator/client/client.js';
import { startLocalCluster } from '../coordinator/cli/local-cluster.js';
import { intArg, numberArg, readCommandLine } from '../shared/cli-args.js';
import { BATCH_WRITE_ITEMS_MAX } from '../shared/limits.js';
import { prng } from './keys.js';
import { forEachEvent } from './sse.js';

const opts = readCommandLine(
  process.argv.slice(2),
  {
    tables: { type: 'string', default: '100' },
    items: { type: 'string', default: '2000' },
    viewers: { type: 'string', default: '4' },
    duration: { type: 'string', default: '15' },
    'writes-per-second': { type: 'string', default: '2000' },
  },
  'usage: node dist/bench/studio.js [--tables 100] [--items 2000] [--viewers 4] [--duration 15] [--writes-per-second 2000]',
).values;
const tables = intArg('tables', opts.tables, 1, 10_000);
const items = intArg('items', opts.items, 1, 10_000_000);
const viewers = intArg('viewers', opts.viewers, 1, 256);
const durationMs = numberArg('duration', opts.duration, 0.5, 600) * 1000;
const writesPerSecond = intArg('writes-per-second', opts['writes-per-second'], 1, 1_000_000);

const dataDir = mkdtempSync(join(tmpdir(), 'keyslice-bench-studio-'));
const cluster = await startLocalCluster({ dataDir, durability: 'os' });
const client = await KeysliceClient.connect(cluster.url);
const rand = prng(7);
const name = (t: number) => `table-${String(t).padStart(3, '0')}`;
try {
  const t0 = Date.now();
  for (let t = 0; t < tables; t++) {
    await client.createTable(name(t), { name: 'id', type: 'string' });
    const batches: Promise<unknown>[] = [];
    for (let i = 0; i < items; i += BATCH_WRITE_ITEMS_MAX) {
      const puts = Array.from({ length: Math.min(BATCH_WRITE_ITEMS_MAX, items - i) }, (_, j) => ({ id: `k${i + j}`, v: i + j }));
      batches.push(client.batchWrite(name(t), { puts }));
    }
    await Promise.all(batches);
  }
  console.error(`loaded ${tables} tables x ${items} items in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  // A write load over every table, bounded in time, paced per 100 ms.
  let stop = false;
  const writer = (async () => {
    const deadline = Date.now() + 2 * durationMs + 15_000;
    while (!stop && Date.now() < deadline) {
      const round: Promise<unknown>[] = [];
      for (let i = 0; i < writesPerSecond / 10; i++) round.push(client.putItem(name(Math.floor(rand() * tables)), { id: `k${Math.floor(rand() * items)}`, v: i }));
      await Promise.all(round);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await new Promise((r) => setTimeout(r, 10_000)); // fill the load window

  const cpuOf = (pid: number) => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime, in clock ticks of 1/100 s
  };
  const nodesCpu = () => cluster.nodes.reduce((a, n) => a + cpuOf(n.child.pid!), 0);
  const cpuMs = () => cpuOf(cluster.coordinator.child.pid!);
  // The same load without a viewer first: what the write load alone costs the processes.
  const base0 = [cpuMs(), nodesCpu()];
  await new Promise((r) => setTimeout(r, durationMs));
  const base = [cpuMs() - base0[0], nodesCpu() - base0[1]];
  const readers = Array.from({ length: viewers }, (_, v) => watch(`${cluster.url}/studio/stream?table=${name(v % tables)}`, durationMs));
  const cpu0 = cpuMs();
  const nodes0 = nodesCpu();
  const results = await Promise.all(readers);
  const cpu = cpuMs() - cpu0;
  const nodeCpu = nodesCpu() - nodes0;
  stop = true;
  await writer;
  const took = results[0].took.sort((a, b) => a - b);
  const samples = results.map((r) => r.samples);
  console.log(
    JSON.stringify(
      {
        tables,
        itemsPerTable: items,
        viewers,
        seconds: durationMs / 1000,
        samplesPerViewer: samples,
        sampleTookMs: { p50: took[took.length >> 1], max: took[took.length - 1] },
        cpuPercentWithoutViewers: { coordinator: Math.round((100 * base[0]) / durationMs), sliceNodes: Math.round((100 * base[1]) / durationMs) },
        cpuPercentWithViewers: { coordinator: Math.round((100 * cpu) / durationMs), sliceNodes: Math.round((100 * nodeCpu) / durationMs) },
        helloBytes: results.map((r) => r.helloBytes),
        sampleBytesMean: Math.round(results[0].sampleBytes / Math.max(1, results[0].samples)),
        slicesInDetail: results[0].slicesInDetail,
      },
      null,
      2,
    ),
  );
} finally {
  await client.close();
  await cluster.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

async function watch(url: string, ms: number) {
  const out = { samples: 0, sampleBytes: 0, helloBytes: 0, took: [] as number[], slicesInDetail: 0 };
  const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
  await forEachEvent(res, (event, data) => {
    if (event === 'hello') out.helloBytes = data.length;
    else if (event === 'sample') {
      const s = JSON.parse(data);
      out.samples++;
      out.sampleBytes += data.length;
      out.took.push(s.summary.tookMs);
      out.slicesInDetail = s.detail?.slices.length ?? 0;
    }
  });
  return out;
}

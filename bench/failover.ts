// Failover under load, with real processes (issue 14's measurement): 3 slice
// nodes, W writers of unique keys, one node SIGKILLed and restarted (kill) or
// SIGSTOPped and continued (stop) every --period-s, in turn, for --cycles; then
// every key is read back. Prints a Markdown report (and writes it to --out).
// Exits 1 if an acknowledged write was lost, an item appeared that no writer
// attempted, or a value differs from the one written.
//   node dist/bench/failover.js [--mode kill,stop] [--cycles 100] [--replication-factor 3] [--out bench/FAILOVER.md]
import { openSync, writeFileSync, writeSync } from 'node:fs';
import { cpus } from 'node:os';
import { fail, intArg, readCommandLine } from '../shared/cli-args.js';
import { DURABILITY_DEFAULT, DURABILITY_MODES, type DurabilityMode } from '../shared/limits.js';
import { FAILOVER_DEFAULTS, startFailover, type ChaosMode, type FailoverResult, type FailoverRun } from './failover-run.js';
import { stopAllAtExit } from './stop-all.js';

const d = FAILOVER_DEFAULTS;
const args = readCommandLine(
  process.argv.slice(2),
  {
    mode: { default: 'kill', help: 'kill (SIGKILL, restart) | stop (SIGSTOP, SIGCONT after --stop-s) | kill,stop (one run each, a fresh cluster each)' },
    'replication-factor': { default: String(d.replicationFactor), help: 'the coordinator\'s --replication-factor' },
    writers: { default: String(d.writers), help: 'writers, each with one write in flight' },
    'period-s': { default: String(d.periodMs / 1000), help: 'seconds from one chaos event to the next' },
    cycles: { default: String(d.cycles), help: 'chaos events per mode' },
    'stop-s': { default: String(d.stopMs / 1000), help: 'mode stop: seconds a node stays frozen (a cycle lasts at least this)' },
    workers: { default: String(d.workers), help: 'worker threads per slice node' },
    durability: { default: DURABILITY_DEFAULT, help: `slice node durability: ${DURABILITY_MODES.join(' | ')}` },
    'timeout-ms': { default: String(d.requestTimeoutMs), help: 'a write with no answer after this long counts as timed out (outcome unknown)' },
    'error-pause-ms': { default: String(d.errorPauseMs), help: 'a writer\'s pause after a write that failed (a client backs off)' },
    out: { help: 'also write the report to this file (e.g. bench/FAILOVER.md)' },
    log: { help: 'write every line of the cluster\'s processes and each event\'s failover time to this file, timestamped (a timeline)' },
  },
  'usage: node dist/bench/failover.js [options]',
).values;
const modes = args.mode.split(',');
if (modes.length === 0 || !modes.every((m) => m === 'kill' || m === 'stop')) fail(`--mode must be kill, stop or kill,stop, got "${args.mode}"`);
if (!DURABILITY_MODES.includes(args.durability as DurabilityMode)) fail(`--durability must be one of ${DURABILITY_MODES.join(', ')}`);
const base = {
  ...d,
  replicationFactor: intArg('replication-factor', args['replication-factor'], 1, 3),
  writers: intArg('writers', args.writers, 1, 1000),
  periodMs: intArg('period-s', args['period-s'], 1, 3600) * 1000,
  cycles: intArg('cycles', args.cycles, 1, 100_000),
  stopMs: intArg('stop-s', args['stop-s'], 1, 3600) * 1000,
  workers: intArg('workers', args.workers, 1, 64),
  durability: args.durability as DurabilityMode,
  requestTimeoutMs: intArg('timeout-ms', args['timeout-ms'], 100, 600_000),
  errorPauseMs: intArg('error-pause-ms', args['error-pause-ms'], 0, 60_000),
  progress: (line: string) => process.stderr.write(line + '\n'),
};
if (args.log !== undefined) {
  const fd = openSync(args.log, 'w');
  const stamp = (line: string) => writeSync(fd, `${new Date().toISOString().slice(11, 23)} ${line}\n`);
  Object.assign(base, { log: stamp, progress: (line: string) => (stamp(`[bench] ${line}`), process.stderr.write(line + '\n')) });
}

// A second Ctrl-C exits at once: no process of the run outlives it, and its data folder goes (bench/stop-all.ts).
stopAllAtExit();
let current: FailoverRun | null = null;
let interrupts = 0;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    interrupts++;
    if (interrupts === 1 && current !== null) {
      process.stderr.write('stopping the chaos and the writers, then checking what was written (Ctrl-C again: stop every process now)\n');
      current.abort();
      return;
    }
    current?.killNow();
    process.exit(130);
  });
}

const ms = (v: number | null) => (v === null ? 'n/a' : `${Math.round(v).toLocaleString('en-US')} ms`);
const pct = (n: number, of: number) => (of === 0 ? 'n/a' : `${((100 * n) / of).toFixed(2)}%`);

function report(mode: ChaosMode, r: FailoverResult): string {
  const o = r.options;
  const errors = Object.entries(r.refused).sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ${n.toLocaleString('en-US')}`);
  if (r.timedOut > 0) errors.push(`timed out ${r.timedOut.toLocaleString('en-US')}`);
  if (r.connectionLost > 0) errors.push(`connection lost ${r.connectionLost.toLocaleString('en-US')}`);
  const idle = r.events.filter((e) => e.slices === 0).length;
  const ok = r.lost.length === 0 && r.phantoms.length === 0 && r.wrongValues.length === 0 && r.duplicates === 0;
  const lines = [
    `### mode ${mode}: R=${o.replicationFactor}, ${o.writers} writers, ${r.events.length} ${mode === 'kill' ? 'SIGKILLs' : `SIGSTOPs of ${o.stopMs / 1000} s`}, one every ${Math.max(o.periodMs, mode === 'stop' ? o.stopMs : 0) / 1000} s, durability ${o.durability}`,
    '',
    '| figure | value |',
    '|---|---|',
    `| write attempts | ${r.attempts.toLocaleString('en-US')} in ${(r.durationMs / 1000).toFixed(1)} s (${Math.round(r.attempts / (r.durationMs / 1000)).toLocaleString('en-US')}/s) |`,
    `| acknowledged (success) | ${r.acknowledged.toLocaleString('en-US')} (**${pct(r.acknowledged, r.attempts)}**) |`,
    `| failed, by code | ${errors.length === 0 ? 'none' : errors.join(', ')} |`,
    `| client latency, all attempts | p50 ${ms(r.latencyMs.p50)}, p99 ${ms(r.latencyMs.p99)}, max ${ms(r.latencyMs.max)} |`,
    `| client latency, acknowledged | p50 ${ms(r.ackLatencyMs.p50)}, p99 ${ms(r.ackLatencyMs.p99)}, max ${ms(r.ackLatencyMs.max)} |`,
    `| failover time (signal to first acknowledged write, sent after it, on a slice the node led) | p50 ${ms(r.failoverMs.p50)}, p99 ${ms(r.failoverMs.p99)}, max ${ms(r.failoverMs.max)}${r.failoverMs.unobserved > 0 ? `; not seen for ${r.failoverMs.unobserved} events` : ''}${idle > 0 ? `; ${idle} events on a node that led no slice holding items (none to see)` : ''} |`,
    `| settled after the chaos | ${ms(r.settledMs)} |`,
    `| items read back | ${r.stored.toLocaleString('en-US')} |`,
    `| **acknowledged writes lost** | **${r.lost.length}**${r.lost.length > 0 ? ` (e.g. ${r.lost.slice(0, 5).join(', ')})` : ''} |`,
    `| **phantom items** (never attempted) | **${r.phantoms.length}**${r.phantoms.length > 0 ? ` (e.g. ${r.phantoms.slice(0, 5).join(', ')})` : ''} |`,
    `| values not as written / items read twice | ${r.wrongValues.length} / ${r.duplicates} |`,
    `| failed or unknown writes found stored (allowed: outcome unknown) | ${r.unacknowledgedStored.toLocaleString('en-US')} |`,
  ];
  if (mode === 'stop') lines.push(`| writes on a frozen node's slices acknowledged after it was continued / of them lost | ${r.ackedAfterWake.toLocaleString('en-US')} / **${r.ackedAfterWakeLost}** |`);
  lines.push('', ok ? 'Checks: passed.' : '**Checks: FAILED.**', '');
  return lines.join('\n');
}

const sections: string[] = [];
let failed = false;
for (const mode of modes as ChaosMode[]) {
  if (interrupts > 0) break;
  process.stderr.write(`failover bench, mode ${mode}: starting a cluster of 3 slice nodes (R=${base.replicationFactor})\n`);
  current = startFailover({ ...base, mode });
  const r = await current.result.catch((err: Error) => {
    process.stderr.write(`failover bench, mode ${mode}: the run failed: ${err.message}\n`);
    failed = true;
    return null;
  });
  current = null;
  if (r === null) continue;
  if (r.lost.length + r.phantoms.length + r.wrongValues.length + r.duplicates > 0) failed = true;
  sections.push(report(mode, r));
}
const header = [
  '## Failover under load (bench/failover.ts)',
  '',
  `\`node dist/bench/failover.js ${process.argv.slice(2).join(' ')}\`, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${cpus().length} cores${interrupts > 0 ? ', interrupted' : ''}`,
  '',
].join('\n');
const text = header + sections.join('\n');
console.log(text);
if (args.out !== undefined) writeFileSync(args.out, text);
process.exit(failed ? 1 : 0);

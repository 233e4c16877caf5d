// Summarizes V8 CPU profiles (`node --cpu-prof` output): for each file, the share of
// samples that were idle, GC and program, and the functions with the most self time
// (name, script and line), so that bench/PROFILE.md can say what dominates; with --under,
// the busy time with any of the named functions on the stack (self time and below).
// With --last S, only the samples of the S seconds before the profile's end (less --skip-end S,
// the shutdown): a profile covers its process's whole life, start-up and data loading included,
// which at one request in flight outweigh the measured seconds.
//   node dist/bench/profile-top.js DIR [--top 15] [--under decodeSliceResults,encodeClientFrame] [--last 8 --skip-end 1] [--inclusive]
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { intArg, numberArg, readCommandLine, refuseCommandLine } from '../shared/cli-args.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const USAGE = 'usage: node dist/bench/profile-top.js DIR [--top N] [--under NAME,NAME] [--last SECONDS [--skip-end SECONDS]] [--inclusive]';
const { values: opts, positionals } = readCommandLine(
  process.argv.slice(2),
  { top: { type: 'string', default: '15' }, under: { type: 'string' }, last: { type: 'string' }, 'skip-end': { type: 'string' }, inclusive: { type: 'boolean', default: false } },
  USAGE,
  { positionals: true },
);
if (positionals.length !== 1) refuseCommandLine(`takes one folder of .cpuprofile files, got ${positionals.length}`, USAGE);
const dir = positionals[0];
const top = intArg('top', opts.top, 1, 100_000);
const under = opts.under?.split(',') ?? [];
const SECONDS_MAX = 86_400;
// --inclusive: also the functions with the most time on the stack (self and below), which names the callers
// (a timer's callback, a frame's handler) that a cost comes from.
const inclusive = opts.inclusive;
const lastUs = opts.last === undefined ? null : numberArg('last', opts.last, 0, SECONDS_MAX) * 1e6;
const skipEndUs = opts['skip-end'] === undefined ? 0 : numberArg('skip-end', opts['skip-end'], 0, SECONDS_MAX) * 1e6;
/** A frame's row name: its function and, where it has one, its file and line. */
const frameKey = (f: ProfileNode['callFrame']): string => `${f.functionName || '(anonymous)'}${f.url === '' ? '' : ` ${basename(f.url)}:${f.lineNumber + 1}`}`;

for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort()) {
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const below = new Map(under.map((name) => [name, 0]));
  const self = new Map<string, number>();
  const onStackTime = new Map<string, number>();
  let total = 0;
  let idle = 0;
  const windowEnd = p.endTime - skipEndUs;
  const windowStart = lastUs === null ? -Infinity : windowEnd - lastUs;
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i])!;
    const dt = p.timeDeltas[i] ?? 0;
    at += dt;
    if (lastUs !== null && (at < windowStart || at > windowEnd)) continue;
    total += dt;
    const f = n.callFrame;
    if (f.functionName === '(idle)') idle += dt;
    const key = frameKey(f);
    self.set(key, (self.get(key) ?? 0) + dt);
    const onStack = new Set<string>();
    const keys = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const cf = byId.get(id)!.callFrame;
      onStack.add(cf.functionName);
      if (inclusive && f.functionName !== '(idle)') keys.add(frameKey(cf));
    }
    for (const name of under) if (onStack.has(name)) below.set(name, below.get(name)! + dt);
    for (const k of keys) onStackTime.set(k, (onStackTime.get(k) ?? 0) + dt);
  }
  const busy = total - idle;
  console.log(`\n${file}: ${(total / 1e6).toFixed(1)} s sampled${lastUs === null ? '' : ' (the window)'}, busy ${((100 * busy) / total).toFixed(0)}% (${(busy / 1e3).toFixed(0)} ms)`);
  const rows = [...self.entries()].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [k, us] of rows) console.log(`  ${((100 * us) / busy).toFixed(1).padStart(5)}% of busy  ${k}`);
  if (inclusive) {
    console.log('  on the stack (self and below):');
    const rows = [...onStackTime.entries()].filter(([k]) => !k.startsWith('(root)')).sort((a, b) => b[1] - a[1]).slice(0, top);
    for (const [k, us] of rows) console.log(`  ${((100 * us) / busy).toFixed(1).padStart(5)}% of busy  ${k}`);
  }
  for (const [name, us] of below) console.log(`  under ${name}: ${((100 * us) / busy).toFixed(1)}% of busy, ${(us / 1e3).toFixed(0)} ms`);
}

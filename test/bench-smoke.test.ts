// The benches in bench/, each run end to end as a user runs it: a real process of the built dist/, with the smallest
// arguments it takes, so that a bench that no longer runs (bench:move crashed unseen for as long as replication had
// been the default) fails here. Speed is not asserted (bench/ measures it); each case asserts that the bench exits 0
// within its bound, prints (or writes) its report with a non-zero count in it, writes a report only where it is told
// (a temp folder: no file of the checkout, bench/*.md or any other; see checkoutFiles), and leaves nothing behind: no
// live process of its process group (the bench runs as the leader of a group of its own, which every process it
// starts joins) and nothing in its temp folder (TMPDIR is the case's own). One case more runs every bench that reads
// options with one it does not know: exit 2, its usage line on stderr, no stack trace.
//
// Not run here: bench:compare (it needs redis-server and bench/peers' npm packages: dynalite, ioredis, the AWS SDK,
// installed from the network; even --only dynamodb needs dynalite; hops's SDK case runs only where they are installed) and bench:studio (a fixed 10 s wait to fill the
// load window, then two --duration phases). scale runs with --redis-server none, which runs no Redis.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { median } from '../bench/median.js';
import { cleanEnv } from './cli-run.js';
import { liveProcesses } from './procs.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const work = mkdtempSync(join(tmpdir(), 'keyslice-bench-smoke-'));
/** How long a bench's processes may take to go once it exited: a SIGKILL sent at its exit (bench/stop-all.ts,
 * stopAllAtExit) takes effect within milliseconds; this leaves room on a loaded machine. */
const GROUP_GONE_MS = 3_000;
/** The vitest bound of a case: the bench's own bound (at which its whole group is SIGKILLed) and room for the checks. */
const caseMs = (benchMs: number) => benchMs + GROUP_GONE_MS + 5_000;
/** The environment of every case whose bench starts its clusters at the coordinator's default slice count: 16 slices
 * (the coordinator's own KEYSLICE_SLICES) rather than 1,024, whose start, elections and failovers at R=3, twice, took
 * much of the failover case's time (the case alone 12.5-16.3 s, 9.3-11.6 s with 16; the whole file 26-38 s, 15-17 s
 * with 16: two runs each, load 11-12), and of the others' as well: the CPU (user + system, the bench and the
 * processes it waited for) of load 7.7 and 5.6 s against 3.2 and 3.5, recovery 10.0 and 7.1 against 3.6 and 3.9,
 * client-pages 5.7 and 7.6 against 3.5 and 3.5, scale 2.1 and 2.1 against 1.8 and 1.8, hops 17.1 and 15.2 against 7.7 and 6.9 (each bench run alone with
 * the case's arguments, alternated, load 22-36). A smoke needs each bench to run its phases and report, not a
 * full-size cluster. The cases whose bench sets its own slice count (move, idle-cpu, put-shape, cluster-start) give it. */
const FEW_SLICES = { KEYSLICE_SLICES: '16' };
/** How many of the option checks' benches run at once (each exits before it starts anything): as many as the batches of
 * the unknown-option check took before, now for every check of that case. */
const RUNS_AT_ONCE = 4;

/** Process groups of benches that may still run (a case that threw midway): SIGKILLed after the file. */
const groups = new Set<number>();
afterAll(() => {
  for (const pgid of groups) killGroup(pgid);
  rmSync(work, { recursive: true, force: true });
});

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // the group is gone
  }
}

/** The live processes of process group `pgid`: pid and command line of each. */
const liveInGroup = (pgid: number): string[] => liveProcesses().flatMap((p) => (p.pgid === pgid ? [`${p.pid} ${p.cmdline}`] : []));

/** Folders git ignores that a bench could still wrongly write, walked whole: dist/ (a report beside the bench's own
 * script, dist/bench/SCALE.md) and data/ (a cluster started without a data folder writes ./data). */
const IGNORED_WATCHED = ['dist', 'data'];

/** The checkout's files a bench could wrongly write, with the size and modification time of each: a case may change
 * none of them, nor add one. They are git's files (tracked, and untracked but not ignored: bench/*.md, a new file
 * anywhere) and IGNORED_WATCHED's. The other ignored paths are not watched: while a case runs, vitest and the test
 * file it runs beside this one (maxWorkers 2) may write there (vitest's cache in node_modules/, say), which would
 * fail the case for what no bench did. No test writes a watched file (test/studio.test.ts's screenshot goes to
 * os.tmpdir()). A file gone between its listing and its lstat (removed meanwhile) is left out. Where git cannot list
 * the checkout, every file but node_modules/ and .git/ is watched. */
function checkoutFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const take = (path: string): void => {
    try {
      const st = lstatSync(join(root, path));
      if (!st.isDirectory()) files.set(path, `${st.size} bytes, modified ${st.mtimeMs}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  };
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(join(root, dir), { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // no such folder (data/ as a rule)
      throw err;
    }
    for (const e of entries) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else take(path);
    }
  };
  let listed: string;
  try {
    listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch {
    // No git, no .git (a source tarball), or a checkout git refuses (owned by another user): every file but
    // node_modules/ and .git/ is watched, which vitest's own writes (its cache is in node_modules/) leave alone.
    for (const e of readdirSync(root, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name === '.git') continue;
      if (e.isDirectory()) walk(e.name);
      else take(e.name);
    }
    return files;
  }
  for (const path of listed.split('\0')) if (path !== '') take(path);
  for (const dir of IGNORED_WATCHED) walk(dir);
  return files;
}

interface BenchRun {
  stdout: string;
  stderr: string;
  /** The case's folder for reports (the bench's --out). */
  out: string;
}

/**
 * Runs `node dist/bench/<script> <args>` as the leader of a new process group, with a TMPDIR of its own, for at most
 * `boundMs` (then its whole group is SIGKILLed), and checks what every bench owes: exit 0 within the bound, no live
 * process left in its group, nothing left in its TMPDIR, no file of the checkout written (checkoutFiles's).
 * `args` may name `{out}`: the case's report folder; `env` is added to its (KEYSLICE_-free) environment.
 */
async function bench(script: string, args: string[], boundMs: number, env: Record<string, string> = {}): Promise<BenchRun> {
  const dir = mkdtempSync(join(work, `${script.replace(/\.js$/, '')}-`));
  const tmp = join(dir, 'tmp');
  const out = join(dir, 'out');
  mkdirSync(tmp);
  mkdirSync(out);
  const filesBefore = checkoutFiles();
  const started = performance.now();
  const child = spawn(process.execPath, [join(root, 'dist', 'bench', script), ...args.map((a) => a.replace('{out}', out))], {
    cwd: root,
    detached: true, // setsid: the bench leads a process group that its children (and theirs) join
    stdio: ['ignore', 'pipe', 'pipe'],
    env: cleanEnv({ ...env, TMPDIR: tmp }),
  });
  const pgid = child.pid!;
  groups.add(pgid);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d));
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(pgid);
  }, boundMs);
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
    child.on('exit', (c, s) => resolve([c, s]));
    // A spawn that failed emits no exit: said with the case's output, not left to the test's timeout.
    child.on('error', (err) => {
      stderr += `\nspawn failed: ${err.message}`;
      resolve([null, null]);
    });
  });
  clearTimeout(timer);
  const ms = Math.round(performance.now() - started);
  // The rest of its output; a process left behind that holds its stdout would keep it open, so bounded.
  await Promise.race([closed, new Promise((r) => setTimeout(r, GROUP_GONE_MS))]);
  // Bounded: polled every 50 ms for GROUP_GONE_MS.
  let left = liveInGroup(pgid);
  for (const end = performance.now() + GROUP_GONE_MS; left.length > 0 && performance.now() < end; left = liveInGroup(pgid)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  // What is left fails the case below; it does not outlive the test. Only then: a group that is gone has a number
  // the system may give to another process's group.
  if (left.length > 0) killGroup(pgid);
  groups.delete(pgid);
  const tail = `\n--- stderr (last 3,000 characters):\n${stderr.slice(-3000)}\n--- stdout (last 2,000):\n${stdout.slice(-2000)}`;
  expect(timedOut, `${script} ran past its bound of ${boundMs} ms${tail}`).toBe(false);
  expect({ code, signal }, `${script} exited ${code ?? signal} after ${ms} ms${tail}`).toEqual({ code: 0, signal: null });
  expect(left, `${script} left processes of its group running`).toEqual([]);
  expect(readdirSync(tmp), `${script} left these in its temp folder`).toEqual([]);
  const filesAfter = checkoutFiles();
  const written = [...filesAfter].filter(([f, was]) => filesBefore.get(f) !== was).map(([f]) => f);
  const removed = [...filesBefore.keys()].filter((f) => !filesAfter.has(f));
  expect({ written, removed }, `${script} changed files of the checkout (give it --out under the case's folder)`).toEqual({ written: [], removed: [] });
  return { stdout, stderr, out };
}

const num = (s: string) => Number(s.replace(/,/g, ''));

describe('the median of a bench\'s rounds (bench/median.ts)', () => {
  it('the middle one, or the mean of the two middle ones; a NaN round (one that measured nothing) left out; NaN for none', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    // Before NaN was left out, a NaN made the sort's order unspecified: this answered NaN (the sort left [3, NaN, 1]).
    expect(median([3, NaN, 1])).toBe(2);
    expect(median([NaN, 5, NaN])).toBe(5);
    expect(median([NaN])).toBeNaN();
    expect(median([])).toBeNaN();
  });
});

describe('the benches, end to end with their smallest arguments (real processes from dist/)', () => {
  it('load (npm run bench): put, get and range on a local cluster, each with ops and a latency', async () => {
    const r = await bench('load.js', ['--workload', 'put,get,range', '--duration', '1', '--ops', '300', '--keys', '50', '--range-items', '10', '--connections', '2', '--concurrency', '8'], 45_000, FEW_SLICES);
    expect(r.stdout).toMatch(/^ +workload +ops +errors +seconds +ops\/s +items\/s +p50 ms +p95 ms +p99 ms +max ms +stopped by$/m);
    for (const w of ['put', 'get', 'range']) {
      const row = new RegExp(`^ +${w} +([\\d,]+) +([\\d,]+) +[\\d.]+ +([\\d,]+) +(\\S+) +[\\d.]+ `, 'm').exec(r.stdout);
      expect(row, `a row for ${w}`).not.toBeNull();
      expect(num(row![3]), `${w}: successful ops per second`).toBeGreaterThan(0);
      if (w === 'range') expect(num(row![4]), 'range: items per second').toBeGreaterThan(0);
    }
    expect(r.stdout).not.toMatch(/FAILED/);
  }, caseMs(45_000));

  it('move (npm run bench:move): every item moves off the drained node and reads back', async () => {
    const r = await bench('move.js', ['--items', '200', '--slices', '16', '--clients', '2', '--baseline-seconds', '1'], 45_000);
    const moved = /^moved ([\d,]+) items in (\d+) slice moves \((\d+) rolled back\)/m.exec(r.stdout);
    expect(moved, 'the "moved ... items" line').not.toBeNull();
    expect(num(moved![1])).toBeGreaterThan(0);
    expect(Number(moved![2])).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^phase +ops +p50 ms +p99 ms +max ms$/m);
    expect(Number(/^before move +(\d+) /m.exec(r.stdout)?.[1])).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^during move +\d+ /m);
    expect(r.stdout).toMatch(/^after: 200 items readable \(loaded 200\)$/m);
  }, caseMs(45_000));

  it('failover (npm run bench:failover): two kills and two freezes at R=3, its checks passed, the report where --out says', async () => {
    const r = await bench('failover.js', ['--mode', 'kill,stop', '--cycles', '2', '--period-s', '1', '--stop-s', '1', '--writers', '4', '--workers', '1', '--out', '{out}/FAILOVER.md'], 60_000, FEW_SLICES);
    const report = readFileSync(join(r.out, 'FAILOVER.md'), 'utf8');
    expect(r.stdout).toContain(report);
    expect(report).toMatch(/^## Failover under load \(bench\/failover\.ts\)$/m);
    const sections = report.split(/^(?=### mode )/m).slice(1);
    expect(sections.map((s) => /^### mode (\w+): R=3, 4 writers, 2 /.exec(s)?.[1])).toEqual(['kill', 'stop']);
    for (const section of sections) {
      expect(num(/^\| acknowledged \(success\) \| ([\d,]+) /m.exec(section)?.[1] ?? '0'), `writes acknowledged in ${section.split('\n')[0]}`).toBeGreaterThan(0);
      expect(section).toMatch(/^\| \*\*acknowledged writes lost\*\* \| \*\*0\*\* \|$/m);
      expect(section).toMatch(/^Checks: passed\.$/m);
    }
  }, caseMs(60_000));

  it('scale (npm run bench:scale): one shape, no Redis, the report where --out says', async () => {
    const r = await bench('scale.js', ['--shapes', '1:1:1', '--clients', '1', '--workload', 'put', '--duration', '1', '--ops', '300', '--connections', '1', '--concurrency', '4', '--redis-server', 'none', '--out', '{out}/SCALE.md'], 45_000, FEW_SLICES);
    const report = readFileSync(join(r.out, 'SCALE.md'), 'utf8');
    expect(report).toMatch(/^# Scale: throughput by cluster shape, side by side with Redis$/m);
    expect(report).toContain('Redis was not run (--redis-server none).');
    expect(report).toMatch(/^\| system \| workload \| ops\/s \| items\/s \| p50 ms \| p99 ms \| errors \|$/m);
    const row = /^\| keyslice 1 routers, 1 nodes x 1 workers \| put \| ([\d,]+) \|/m.exec(report);
    expect(row, 'the shape\'s put row').not.toBeNull();
    expect(num(row![1])).toBeGreaterThan(0);
    expect(report).not.toMatch(/failed:/);
  }, caseMs(45_000));

  it('replication-node: puts at R=1 and at R=3 on three slice nodes, each at a rate above 0', async () => {
    const r = await bench('replication-node.js', ['--seconds', '1', '--rounds', '1', '--slices', '1', '--workers', '1', '--in-flight', '1', '--batch', '1'], 45_000);
    for (const k of ['R=1', 'R=3']) expect(Number(new RegExp(`^${k}: (\\d+) puts/s`, 'm').exec(r.stdout)?.[1]), `${k} puts/s`).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^R=3 \/ R=1: [\d.]+$/m);
  }, caseMs(45_000));

  it('client-pages: getItems and forEachItemPage, one round each, their CPU per range and promoted share', async () => {
    // No warm-up (--warm 0): the smoke reads that each method's row has figures, not how steady they are.
    const r = await bench('client-pages.js', ['--rounds', '1', '--seconds', '0.5', '--warm', '0', '--in-flight', '8', '--devices', '2'], 45_000, FEW_SLICES);
    for (const method of ['getItems', 'forEachItemPage']) {
      const row = new RegExp(`^\\| 8 \\| ${method} \\| [\\d.]+ \\| ([\\d.]+) \\| [^|]+ \\| [^|]+ \\| (\\d+) \\|`, 'm').exec(r.stdout);
      expect(row, `${method}'s row`).not.toBeNull();
      expect(Number(row![1]), `${method}: µs CPU per range`).toBeGreaterThan(0);
      expect(Number(row![2]), `${method}: ranges/s`).toBeGreaterThan(0);
    }
  }, caseMs(45_000));

  it('hops: one workload, one round, this build against itself', async () => {
    const workload = 'ws GetItem, 1 in flight';
    const r = await bench('hops.js', ['--base', root, '--rounds', '1', '--duration', '1', '--devices', '2', '--only', workload], 45_000, FEW_SLICES);
    expect(r.stdout).toMatch(/^\| workload \| base ops\/s \| this ops\/s \| this \/ base \|/m);
    const row = new RegExp(`^\\| ${workload} \\| (\\d+) \\| (\\d+) \\|`, 'm').exec(r.stdout);
    expect(row, 'the workload\'s row').not.toBeNull();
    expect(Number(row![1]), 'base ops/s').toBeGreaterThan(0);
    expect(Number(row![2]), 'this ops/s').toBeGreaterThan(0);
  }, caseMs(45_000));

  // The SDK workloads need bench/peers' npm packages (the AWS SDK), which CI does not install (bench/peers/package.json):
  // run where bench:compare installed them, skipped elsewhere.
  it.skipIf(!existsSync(join(root, 'bench', 'peers', 'node_modules', '@aws-sdk', 'client-dynamodb')))('hops --signed: the AWS SDK workloads, their requests signed and checked, this build against itself', async () => {
    const r = await bench('hops.js', ['--base', root, '--rounds', '1', '--duration', '1', '--devices', '2', '--sdk-processes', '1', '--signed', '--only', 'sdk '], 60_000, FEW_SLICES);
    for (const workload of ['sdk PutItem, 50 in flight', 'sdk GetItem, 50 in flight', 'sdk Query of 100, 50 in flight \\(items/s\\)']) {
      const row = new RegExp(`^\\| ${workload} \\| (\\d+) \\| (\\d+) \\|`, 'm').exec(r.stdout);
      expect(row, `${workload}'s row`).not.toBeNull();
      expect(Number(row![1]), `${workload}: base ops/s`).toBeGreaterThan(0);
      expect(Number(row![2]), `${workload}: this ops/s`).toBeGreaterThan(0);
    }
  }, caseMs(60_000));

  it('ddb-layer: the DynamoDB endpoint in one process, this build against itself, a row per workload', async () => {
    const r = await bench('ddb-layer.js', ['--base', root, '--rounds', '1', '--ms', '10'], 45_000);
    for (const w of ['PutItem', 'GetItem', 'Query of 100', 'Query of 100, more to read']) {
      for (const how of ['unsigned', 'signed']) expect(r.stdout, `${w}, ${how}`).toMatch(new RegExp(`^\\| ${w}, ${how} \\| [\\d.]+ \\| [\\d.]+ \\| [\\d.]+x \\| [01] of 1 \\|$`, 'm'));
    }
  }, caseMs(45_000));

  it('idle-cpu: an idle R=3 cluster of 64 slices, this build against itself as the base, a row per process', async () => {
    // Half-second windows (the bench's smallest is 0.1 s): one window of the watch, one round.
    const r = await bench('idle-cpu.js', ['--slices', '64', '--base', root, '--sides', 'this,base', '--watch-s', '0.5', '--window-s', '0.5', '--rounds', '1', '--seconds', '0.5'], 45_000);
    expect(r.stdout).toMatch(/^\| medians of 1 run\(s\) x 1 rounds of 0\.5 s, % of a core \(64 slices, 3 nodes\) \| this \| base \|$/m);
    for (const row of ['coordinator', 'node 1', 'node 2', 'node 3', 'all']) expect(r.stdout, row).toMatch(new RegExp(`^\\| ${row} \\| [\\d.]+ \\| [\\d.]+ \\|$`, 'm'));
    expect(r.stdout).toMatch(/^this: cluster CPU, % of a core, per 0\.5 s after every slice was led: [\d.]+$/m);
    expect(r.stdout).toMatch(/^this: settled (0|0\.5) s after every slice was led/m);
  }, caseMs(45_000));

  it('put-shape: puts at R=3 through a cluster, their CPU per thread and the workers\' turns', async () => {
    // A side's Node option with an '=' of its own reaches its processes whole (a V8 flag without its value stops them).
    const r = await bench('put-shape.js', ['--sides', 'this:3@KEYSLICE_NODE_ARGS=--max-semi-space-size=8', '--rounds', '1', '--seconds', '1', '--in-flight', '4', '--slices', '64'], 45_000);
    expect(Number(/^\| puts\/s \| (\d+) \|$/m.exec(r.stdout)?.[1]), 'puts/s').toBeGreaterThan(0);
    expect(Number(/^\| cpu nodes all \| ([\d.]+) \|$/m.exec(r.stdout)?.[1]), 'nodes\' CPU per put').toBeGreaterThan(0);
    expect(Number(/^\| cpu cluster all \| ([\d.]+) \|$/m.exec(r.stdout)?.[1]), 'the cluster\'s CPU per put').toBeGreaterThan(Number(/^\| cpu nodes all \| ([\d.]+) \|$/m.exec(r.stdout)?.[1]));
    // Every put measured is counted once by the leader worker that ran it (KEYSLICE_TRACE_TURNS).
    expect(r.stdout).toMatch(/^\| turns replPuts \| 1\.000 \|$/m);
    // How far the messages and the replica log's writes are amortized: records per Append, ops per flush. Each put is a
    // record, sent to two followers and written on three logs, each with a commit point.
    const turn = (k: string) => Number(new RegExp(`^\\| turns ${k} \\| ([\\d.]+) \\|$`, 'm').exec(r.stdout)?.[1]);
    for (const k of ['recordsOut', 'logFlushes', 'logSyncs', 'logOps']) expect(turn(k), k).toBeGreaterThan(0);
    expect(turn('appendOps'), 'records logged per put').toBeGreaterThanOrEqual(turn('recordsOut'));
    expect(turn('commitOps'), 'commit points logged per put').toBeGreaterThan(0);
    // The coordinator's CPU a second while driven (its pings at R=3 at least); idle needs a turn of another side or a
    // warm-up first, which one side of one round without --warm-s has not: no reading.
    expect(Number(/^\| cpu coordinator ms\/s driven \| ([\d.]+) \|$/m.exec(r.stdout)?.[1]), 'the coordinator\'s CPU a second').toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^\| cpu coordinator ms\/s idle \| NaN \|$/m);
    // Bytes allocated per put, from each thread's gc line (allocKB): the workers' and the router's, never none.
    for (const role of ['workers', 'routers']) expect(Number(new RegExp(`^\\| alloc KB ${role} \\| ([\\d.]+) \\|$`, 'm').exec(r.stdout)?.[1]), `KB allocated per put by the ${role}`).toBeGreaterThan(0);
  }, caseMs(45_000));

  it('recovery (npm run bench:recovery): every item served again after both slice nodes were SIGKILLed', async () => {
    const r = await bench('recovery.js', ['--items', '100'], 45_000, FEW_SLICES);
    expect(r.stdout).toMatch(/^loaded 100 items in [\d.]+ s/m);
    expect(r.stdout).toMatch(/^restart of 2 slice nodes: listening after [\d.]+ s, serving 100 items after [\d.]+ s$/m);
  }, caseMs(45_000));

  it('snapshot (npm run bench:snapshot): PutItem and BatchWrite latency while snapshots are written', async () => {
    const r = await bench('snapshot.js', ['--items', '25', '--duration', '1', '--snapshot-after-bytes', '1024', '--puts', '1', '--batches', '1'], 30_000);
    for (const op of ['PutItem', 'BatchWrite']) expect(Number(new RegExp(`^  ${op} +(\\d+) ops`, 'm').exec(r.stdout)?.[1]), `${op} ops`).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/^  snapshots completed: \d+ .*; errors: 0$/m);
  }, caseMs(30_000));

  it('leader-append: ns per put of one leader', async () => {
    const r = await bench('leader-append.js', ['--slices', '1', '--puts', '1000'], 20_000);
    expect(Number(/: (\d+) ns per put \(1 slices, 1000 puts, (\d+) bytes encoded per put\)$/m.exec(r.stdout)?.[1])).toBeGreaterThan(0);
  }, caseMs(20_000));

  it('put-path: CPU ns per put of an R=1 worker, and of an R=3 leader and its followers', async () => {
    const r1 = await bench('put-path.js', ['--r', '1', '--slices', '4', '--puts', '1000'], 20_000);
    const m1 = /: R=1 worker (\d+) ns, ([\d.]+) KB allocated per put \(4 slices, batches of 32, 1024 puts\)$/m.exec(r1.stdout);
    expect(Number(m1?.[1])).toBeGreaterThan(0);
    expect(Number(m1?.[2]), 'KB allocated per put').toBeGreaterThan(0);
    const r3 = await bench('put-path.js', ['--r', '3', '--slices', '4', '--puts', '1000'], 20_000);
    // (It exits non-zero, failing bench(), if a replica refused anything or a follower did not apply what it should.)
    const m = /: R=3 total (\d+) ns per put \(leader (\d+), each follower (\d+)\); KB allocated per put ([\d.]+) \(leader ([\d.]+), each follower ([\d.]+); 4 slices, batches of 32, 1024 puts\)$/m.exec(r3.stdout);
    for (let i = 1; i <= 6; i++) expect(Number(m?.[i]), `figure ${i} of ${r3.stdout}`).toBeGreaterThan(0);
    // The total is the sides' (the leader and two followers), KB as ns.
    expect(Math.abs(Number(m?.[4]) - Number(m?.[5]) - 2 * Number(m?.[6]))).toBeLessThan(0.02);
    // --ids 1: each put with a router's request id; it exits non-zero if a follower does not remember the leader's ids.
    const ids = await bench('put-path.js', ['--r', '3', '--slices', '4', '--puts', '1000', '--ids', '1'], 20_000);
    expect(Number(/: R=3 total (\d+) ns per put \(leader \d+, each follower \d+\); KB allocated per put [\d.]+ \(leader [\d.]+, each follower [\d.]+; 4 slices, batches of 32, 1024 puts, request ids\)$/m.exec(ids.stdout)?.[1])).toBeGreaterThan(0);
  }, caseMs(60_000));

  it('fresh-read-cpu: CPU per range of a fresh store read once, as objects and packed', async () => {
    for (const form of ['objects', 'packed']) {
      const r = await bench('fresh-read-cpu.js', ['--stores', '1', ...(form === 'packed' ? ['--packed'] : [])], 20_000);
      expect(Number(new RegExp(`^([\\d.]+) us of CPU per range \\(its 100 puts and 1 read, ${form}\\)$`, 'm').exec(r.stdout)?.[1])).toBeGreaterThan(0);
    }
  }, caseMs(40_000));

  it('every bench that reads options refuses an unknown one with its usage line on stderr, exit 2, no stack trace; --help prints it, exit 0', async () => {
    // The benches that read options through shared/cli-args.ts (readCommandLine, refuseCommandLine), found in their
    // sources, so that a new one is checked too. Each exits before it starts anything.
    const scripts = readdirSync(join(root, 'bench'))
      .filter((f) => f.endsWith('.ts') && /\b(readCommandLine|refuseCommandLine)\(/.test(readFileSync(join(root, 'bench', f), 'utf8')))
      .map((f) => f.replace(/\.ts$/, '.js'));
    expect(scripts.length, scripts.join(' ')).toBeGreaterThanOrEqual(25);
    const run = (script: string, ...args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        // The leader of a group of its own, as bench() runs them: a bench that went on past its options may have
        // started processes, and the bound (or afterAll, where the case ended first) kills them all.
        const child = spawn(process.execPath, [join(root, 'dist', 'bench', script), ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv({}), detached: true });
        const pgid = child.pid!;
        groups.add(pgid);
        let stdout = '';
        let stderr = '';
        child.stdout!.on('data', (d: Buffer) => (stdout += d));
        child.stderr!.on('data', (d: Buffer) => (stderr += d));
        // Bounded: a bench that went on past its options is killed with its group and fails the case by its exit.
        const timer = setTimeout(() => killGroup(pgid), 20_000);
        child.on('close', (code) => {
          clearTimeout(timer);
          killGroup(pgid);
          groups.delete(pgid);
          resolve({ code, stdout, stderr });
        });
      });
    // Every check below spawns its bench and waits for it to exit; none depends on another, so they run RUNS_AT_ONCE at a
    // time from one queue (each bench's start is mostly waiting on its modules; one after another, the ~55 spawns took
    // most of this case's 21 s).
    const checks: (() => Promise<void>)[] = [];
    for (const script of scripts) {
      checks.push(async () => {
        const bad = await run(script, '--no-such-option');
        expect(bad.code, `${script} --no-such-option: ${bad.stderr}`).toBe(2);
        const lines = bad.stderr.trim().split('\n');
        expect(lines[0], script).toMatch(/^keyslice: unknown option "--no-such-option" \(try .+ --help\)$/);
        expect(lines[1], `${script}: its usage line`).toMatch(new RegExp(`^usage: .*${script.replace('.', '\\.')}`));
        expect(bad.stderr, `${script}: no stack trace`).not.toMatch(/^\s+at /m);
      });
    }
    // A bad value of a number (--flag=value form) is refused in a sentence too, where these read it (intArg).
    for (const script of ['range-hop.js', 'hop-floor.js', 'hops.js']) {
      checks.push(async () => {
        const bad = await run(script, '--rounds=x');
        expect([bad.code, bad.stderr.trim()], script).toEqual([2, 'keyslice: --rounds must be a whole number from 1 to 100, got "x"']);
      });
    }
    // The benches that read their numbers with Number() took "x" as NaN and ran on it (hops: no round; studio: no table).
    for (const [script, arg, said] of [
      ['hops.js', '--duration=0', '--duration must be a number from 0.5 to 600, got "0"'],
      ['studio.js', '--tables=x', '--tables must be a whole number from 1 to 10000, got "x"'],
      ['import.js', '--items=1e9', '--items must be a whole number from 1 to 100000000, got "1e9"'],
      ['advise-check.js', '--duration=', '--duration must be a whole number from 1 to 3600, got ""'],
    ] as const) {
      checks.push(async () => {
        const bad = await run(script, arg);
        expect([bad.code, bad.stderr.trim()], `${script} ${arg}`).toEqual([2, `keyslice: ${said}`]);
      });
    }
    // load's --duration: seconds above 0 and at most a day, read as every bench's numbers (anyNumber: 10.5 and 1e1
    // too); a unit, an empty value or 0 is refused with its usage line. A bad --keys-dist (read after --duration) is
    // given too: a --duration taken ends the run on that refusal, not in a local cluster.
    for (const value of ['10s', '', '0', '86401']) {
      checks.push(async () => {
        const bad = await run('load.js', `--duration=${value}`, '--keys-dist', 'nope');
        expect([bad.code, bad.stderr.trim().split('\n')[0]], `load.js --duration=${value}`).toEqual([2, `keyslice: --duration must be a number above 0 and at most 86400, got "${value}" (try node dist/bench/load.js --help)`]);
      });
    }
    for (const value of ['10.5', '1e1']) {
      checks.push(async () => {
        const taken = await run('load.js', `--duration=${value}`, '--keys-dist', 'nope');
        expect([taken.code, taken.stderr.trim().split('\n')[0]], `load.js --duration=${value}`).toEqual([2, 'keyslice: --keys-dist must be one of uniform, zipfian, hotkey, got "nope" (try node dist/bench/load.js --help)']);
      });
    }
    // An option given twice is refused by every bench, as load always did (which run was meant?).
    checks.push(async () => {
      const twice = await run('range-hop.js', '--rounds', '3', '--rounds=4');
      expect([twice.code, twice.stderr.trim().split('\n')[0]]).toEqual([2, 'keyslice: --rounds is given twice (try node dist/bench/range-hop.js --help)']);
    });
    // And a value not among an option's choices (cluster-start's --join), before it starts any process.
    checks.push(async () => {
      const choice = await run('cluster-start.js', '--join=soon');
      expect([choice.code, choice.stderr.trim()], 'cluster-start.js --join=soon').toEqual([2, 'keyslice: --join must be at-start or later, got soon']);
    });
    // The benches that take arguments besides options (readCommandLine's positionals) refuse a wrong count of them, or a bad
    // one, the same way, before they read or write anything.
    for (const [script, args, said] of [
      ['profile-top.js', [], 'takes one folder of .cpuprofile files, got 0'],
      ['profile-top.js', [work, work], 'takes one folder of .cpuprofile files, got 2'],
      ['replica-recovery.js', [], 'takes one worker folder, got 0'],
      ['key-design-summary.js', [], 'no folder given'],
      ['advise-samples.js', ['hotkey'], "takes a sample's name, a file and at most a number of items"],
      ['advise-samples.js', ['no-such-sample', join(work, 'never.jsonl')], 'no sample "no-such-sample" (samples: hotkey, lowcard, timebucket, oversized, monotonic, usertime)'],
      ['peer-queue-bytes.js', ['0'], 'ROUNDS must be one whole number from 1 to 9999, got "0"'],
    ] as const) {
      checks.push(async () => {
        const bad = await run(script, ...args);
        const lines = bad.stderr.trim().split('\n');
        expect([bad.code, lines[0]], `${script} ${args.join(' ')}`).toEqual([2, `keyslice: ${said} (try node dist/bench/${script} --help)`]);
        expect(lines[1], `${script}: its usage line`).toMatch(new RegExp(`^usage: node dist/bench/${script.replace('.', '\\.')} `));
      });
    }
    checks.push(async () => {
      const help = await run('hops.js', '--help');
      expect([help.code, help.stdout.split('\n')[0]]).toEqual([0, expect.stringMatching(/^usage: node dist\/bench\/hops\.js /)]);
    });
    // RUNS_AT_ONCE workers taking the next check as each ends. The first failure fails the case: no worker takes another
    // check after it (those already running end within their bound), as the checks one after another stopped there.
    const queue = checks.slice();
    const failures: unknown[] = [];
    await Promise.all(
      Array.from({ length: RUNS_AT_ONCE }, async () => {
        for (let check = queue.shift(); check !== undefined && failures.length === 0; check = queue.shift()) await check().catch((err: unknown) => void failures.push(err));
      }),
    );
    if (failures.length > 0) throw failures[0];
    expect(existsSync(join(work, 'never.jsonl')), 'advise-samples refused wrote no file').toBe(false);
  }, 120_000);

  it('cluster-start: a new cluster of 12 slices on free ports, every phase found in the coordinator\'s log', async () => {
    const r = await bench('cluster-start.js', ['--rounds', '1', '--slices', '12', '--port', '0'], 60_000);
    // A log line the bench looks for and no longer finds makes its phase -Infinity or Infinity.
    const m = /^round 1, .*: nodes ready ([\d.]+) s, elections from ([\d.]+) s to ([\d.]+) s, coordinator ready ([\d.]+) s, every slice led ([\d.]+) s, balanced ([\d.]+) s; (\d+) handovers;/m.exec(r.stdout);
    // (Each phase a number: [\d.]+ takes no -Infinity, Infinity or NaN.)
    expect(m, r.stdout).not.toBeNull();
    expect(m!.slice(1, 7).map(Number).every((s) => s > 0)).toBe(true);
    // Balanced (every move done, every change settled) no sooner than every slice led.
    expect(Number(m![6])).toBeGreaterThanOrEqual(Number(m![5]));
  }, caseMs(60_000));

  it('cluster-start --join later: the coordinator first, the nodes joining it one by one, every phase found in its log', async () => {
    const r = await bench('cluster-start.js', ['--rounds', '1', '--slices', '12', '--port', '0', '--join', 'later'], 60_000);
    const m = /^round 1, .*: nodes ready ([\d.]+) s, elections from ([\d.]+) s to ([\d.]+) s, last node ready ([\d.]+) s, every slice led ([\d.]+) s, balanced ([\d.]+) s; (\d+) handovers;/m.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    expect(m!.slice(1, 7).map(Number).every((s) => s > 0)).toBe(true);
    // Balanced (every move done, every change settled) no sooner than every slice led.
    expect(Number(m![6])).toBeGreaterThanOrEqual(Number(m![5]));
  }, caseMs(60_000));
});

#!/usr/bin/env node
// The operator CLI: `keyslice <command>`. Starts processes (coordinator, slice
// node, a local cluster) and talks to a running coordinator's /cluster/ API
// (status, add, drain, remove), with progress while slices move. Every wait is
// bounded by --timeout; every request by its own timeout.
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { anyNumber, EXIT_USAGE, readCommandLine, UsageError } from '../../shared/cli-args.js';
import type { ClusterStatus, MoveReport } from '../../shared/api.js';
import { CLI_REQUEST_TIMEOUT_MS, CLI_WAIT_S_DEFAULT, CLI_WAIT_S_MAX, STALLED_SAY_WHY_MS } from '../../shared/limits.js';
import { CLUSTER_API_PREFIX } from '../../shared/protocol.js';
import { bar, size } from './cli-progress.js';
import { CLUSTER_OPTIONS, clusterOf } from './command-line.js';

const USAGE = `keyslice: a distributed NoSQL item store

usage:
  keyslice coordinator [options]    start a coordinator (keyslice coordinator --help for its options)
  keyslice router --coordinator <http://host:port>   start a router: serves clients with the coordinator's catalog and map (keyslice router --help)
  keyslice node [options]           start a slice node (keyslice node --help); with --coordinator it registers itself
  keyslice local                    start a coordinator and three slice nodes on 127.0.0.1 (what npm start runs; keyslice local --help)
  keyslice status [--watch]         nodes, slices per node, items/bytes/load per node, moves in flight
  keyslice add <ws://host:port>     add a slice node by address; slices move onto it (waits, with progress)
  keyslice drain <ws://host:port>   move every slice (replication factor > 1: every replica) off a node (waits, with progress)
  keyslice remove <ws://host:port>  forget a drained node, or (replication factor > 1) one that is down: its replicas are placed again
         [--forget-data]            ... or one that owns slices whose data is lost: they go, empty, to the other nodes
         [--force]                  ... even if some slices would keep fewer replicas up than a majority, or a change
                                    not settled still counts the node (they elect no leader until their replicas
                                    that are down are back; docs/operations.md)
  keyslice advise FILE --table T    judge a key design and its alternatives on sample items (keyslice advise --help)
  keyslice import TABLE FILE        load JSON lines or CSV into a table (keyslice import --help)
  keyslice export TABLE             stream a table out as JSON lines (keyslice export --help)
  keyslice --version                the version of this keyslice

options of status, add, drain, remove:
  --url <http://host:port>   the coordinator (env KEYSLICE_URL; default http://127.0.0.1:7100)
  --token <token>            the client token, if the cluster has one (env KEYSLICE_TOKEN)
  --no-wait                  add, drain: return once the coordinator accepted the request
  --timeout <seconds>        add, drain, status --watch: stop waiting after this long (default ${CLI_WAIT_S_DEFAULT}, at most ${CLI_WAIT_S_MAX})
`;

const LOCAL_USAGE = `usage: keyslice local

Starts a coordinator and three slice nodes (two worker threads each) on 127.0.0.1 and
keeps them running until Ctrl-C, which stops them all. Each slice has a replica on every
node (replication factor 3), so when one node exits the others keep serving; if the
coordinator or a second node exits, the others are stopped too. This is what npm start runs. It takes no options; environment
variables, read by keyslice local only:
  KEYSLICE_PORT   the coordinator's port; the nodes take the next three (default 7100; 0: any free ports)
  KEYSLICE_DATA   the folder that holds every process's data (default ./data)
  KEYSLICE_REPLICATION_FACTOR   the coordinator's --replication-factor (default auto; docs/replication.md)
`;

const here = dirname(fileURLToPath(import.meta.url));
const [command, ...rest] = process.argv.slice(2);

function die(message: string, code = 1): never {
  console.error(`keyslice: ${message}`);
  process.exit(code);
}

/** Runs an entry point in this process, as if it had been started with `args`. */
async function runEntry(script: string, args: string[]): Promise<void> {
  process.argv = [process.argv[0], script, ...args];
  await import(script);
}

/** The version in the package.json next to dist/ (the repository's, or the installed package's). */
function version(): string {
  return (JSON.parse(readFileSync(join(here, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
}

function options(args: string[]) {
  let parsed;
  let timeoutS;
  try {
    parsed = readCommandLine(args, { ...CLUSTER_OPTIONS, 'no-wait': { type: 'boolean' }, 'forget-data': { type: 'boolean' }, force: { type: 'boolean' }, watch: { type: 'boolean' }, timeout: { type: 'string' } }, USAGE, { positionals: true, throws: true });
    // Read as every number option is (shared/cli-args.ts), and bounded: "Infinity" made follow's and --watch's loops
    // endless.
    timeoutS = anyNumber('timeout', parsed.values.timeout, 1, CLI_WAIT_S_MAX, { dflt: CLI_WAIT_S_DEFAULT });
  } catch (err) {
    if (err instanceof UsageError) die(`${err.message} (try keyslice --help)`, EXIT_USAGE);
    throw err;
  }
  const v = parsed.values;
  const cluster = clusterOf(v);
  return {
    url: cluster.url,
    token: cluster.token ?? '',
    wait: v['no-wait'] !== true,
    watch: v.watch === true,
    forgetData: v['forget-data'] === true,
    force: v.force === true,
    timeoutS,
    positional: parsed.positionals,
  };
}
type Options = ReturnType<typeof options>;

async function call(o: Options, method: 'GET' | 'POST', action: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(`${o.url}${CLUSTER_API_PREFIX}${action}`, {
      method,
      headers: { 'content-type': 'application/json', ...(o.token !== '' ? { authorization: `Bearer ${o.token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(CLI_REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    die(`cannot reach the coordinator at ${o.url}: ${(err as Error).message}`);
  }
  const json = (await res.json().catch(() => ({}))) as { error?: { code: string; message: string } };
  if (res.status !== 200) die(`${json.error?.code ?? res.status}: ${json.error?.message ?? 'no message'}`);
  return json;
}

const status = (o: Options) => call(o, 'GET', 'status') as Promise<ClusterStatus>;

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join('  ').trimEnd()).join('\n');
}

function moveLine(m: MoveReport): string {
  // startedAt is the coordinator's wall clock (a time it sends), so the age is read against this machine's.
  const secs = ((Date.now() - m.startedAt) / 1000).toFixed(1);
  return `  slice ${String(m.slice).padEnd(5)} ${m.from} -> ${m.to}  ${m.phase.padEnd(8)} ${bar(m.copied, m.items)} ${m.copied}/${m.items} items (${size(m.bytes)}), ${secs} s`;
}

function render(st: ClusterStatus, url: string): string {
  // With replicated slices a node leads SLICES and holds REPLICAS (leading or following): replica moves show there.
  const replicated = st.replication.factor > 1;
  // ITEMS and BYTES are those of the slices a node leads; HELD counts what it holds over every replica (its memory).
  const rows = [['NODE', 'STATUS', 'UP', 'SLICES', ...(replicated ? ['REPLICAS'] : []), 'ITEMS', 'BYTES', ...(replicated ? ['HELD'] : []), 'READS/S', 'WRITES/S', 'HEARTBEAT']];
  for (const n of st.nodes) {
    rows.push([
      n.node,
      n.status,
      n.up ? 'yes' : typeof n.silentMs === 'number' ? `SILENT ${(n.silentMs / 1000).toFixed(1)} s` : 'NO',
      String(n.slices),
      ...(replicated ? [String(n.replicas)] : []),
      String(n.items),
      size(n.bytes),
      ...(replicated ? [`${n.heldItems} items, ${size(n.heldBytes)}`] : []),
      n.readsPerSecond.toFixed(0),
      n.writesPerSecond.toFixed(0),
      n.heartbeatMsAgo === null ? 'static' : `${(n.heartbeatMsAgo / 1000).toFixed(1)} s ago`,
    ]);
  }
  const m = st.moves;
  const lines = [
    `keyslice cluster at ${url}: epoch ${st.epoch}, ${st.sliceCount} slices${st.unassignedSlices > 0 ? `, ${st.unassignedSlices} waiting for a node` : ''}`,
    st.nodes.length === 0 ? 'no slice nodes yet' : table(rows),
  ];
  for (const n of st.nodes) if (n.problem !== null) lines.push(`NOT USED: ${n.problem}`);
  const r = st.replication;
  lines.push(`replication factor ${r.factor} (${r.why})${r.note === '' ? '' : `; ${r.note}`}`);
  if (!st.loadComplete) lines.push('(items, bytes and load are partial: some node did not answer)');
  lines.push(`moves: ${m.inFlight.length} in flight, about ${m.pending} to go, ${m.completed} completed (${m.itemsMoved} items), ${m.failed} rolled back`);
  for (const mv of m.inFlight) lines.push(moveLine(mv));
  if (m.lastError !== '') lines.push(`last rollback: ${m.lastError}`);
  if (m.waitingSlices > 0) lines.push(waitLines(st));
  return lines.join('\n');
}

/** The slices a drain step or replica move waits for, and why (status lists the first few). */
function waitLines(st: ClusterStatus): string {
  const m = st.moves;
  return [`waiting: ${m.waitingSlices} slices wait to let a replica go${m.waitingSlices > m.waiting.length ? ` (the first ${m.waiting.length})` : ''}:`, ...m.waiting.map((w) => `  slice ${w.slice} (replica on ${w.node}): ${w.why}`)].join('\n');
}

/** Polls until `done` says so, printing a progress line (and, when it changes, what the coordinator waits for);
 * bounded by --timeout, after which it says what was still waited for. Its waits are on the monotonic clock: on
 * Date.now()'s a wall clock stepped forward ended the wait at once ("not finished after N s"), stepped back stretched
 * it by the step. */
async function follow(o: Options, what: string, progress: (st: ClusterStatus) => { done: number; total: number; finished: boolean; note?: string }): Promise<void> {
  const until = performance.now() + o.timeoutS * 1000;
  const tty = process.stdout.isTTY === true;
  let lastPrint = -Infinity;
  let lastWaits = '';
  let waitsAt = -Infinity;
  let lastDone = -1;
  let movedAt = performance.now();
  let st: ClusterStatus | undefined;
  let lastLine = '';
  while (performance.now() < until) {
    st = await status(o);
    const p = progress(st);
    if (p.done !== lastDone) [lastDone, movedAt] = [p.done, performance.now()];
    // What a drain waits for (a slice without a leader, a replica behind, no node up to take a replica) is said once
    // it has made no progress for a while, and again (when it changed) at most that often: a drain that goes on
    // shows only its bar.
    const waits = st.moves.waitingSlices > 0 ? waitLines(st) : '';
    const now = performance.now();
    if (!p.finished && waits !== '' && waits !== lastWaits && now - movedAt >= STALLED_SAY_WHY_MS && now - waitsAt >= STALLED_SAY_WHY_MS) {
      if (tty) process.stdout.write('\n');
      console.log(waits);
      [lastWaits, waitsAt] = [waits, now];
    }
    const moving = st.moves.inFlight.map((m) => `${m.slice}:${m.phase}${m.items > 0 ? ` ${Math.floor((100 * m.copied) / m.items)}%` : ''}`).join(' ');
    const line = `${what} ${bar(p.done, p.total)} ${p.done}/${p.total} slices${p.note ?? ''}${moving ? `  moving ${moving}` : ''}${st.moves.failed > 0 ? `  (${st.moves.failed} rolled back)` : ''}`;
    lastLine = `${p.done}/${p.total} slices${p.note ?? ''}`;
    if (tty) process.stdout.write(`\r${line.slice(0, (process.stdout.columns ?? 120) - 1).padEnd((process.stdout.columns ?? 120) - 1)}`);
    else if (p.finished || performance.now() - lastPrint > 2000) {
      console.log(line);
      lastPrint = performance.now();
    }
    if (p.finished) {
      if (tty) process.stdout.write('\n');
      return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  if (tty) process.stdout.write('\n');
  // What is left may be moves, or only replica-set changes settling (p.note says so): the line names it.
  die(`not finished after ${o.timeoutS} s (${lastLine}); the coordinator goes on (see keyslice status)${st !== undefined && st.moves.waitingSlices > 0 ? `\n${waitLines(st)}` : ''}`);
}

async function main(): Promise<void> {
  switch (command) {
    case 'coordinator':
      return runEntry(join(here, '..', 'main.js'), rest);
    case 'router':
      return runEntry(join(here, '..', 'router', 'main.js'), rest);
    case 'node':
      return runEntry(join(here, '..', '..', 'slice-worker', 'main.js'), rest);
    case 'local':
      if (rest.includes('--help') || rest.includes('-h')) return console.log(LOCAL_USAGE);
      if (rest.length > 0) die(`keyslice local takes no arguments, got "${rest.join(' ')}" (see keyslice local --help)`, EXIT_USAGE);
      return runEntry(join(here, 'local-cluster.js'), rest);
    case 'status': {
      const o = options(rest);
      if (!o.watch) return console.log(render(await status(o), o.url));
      const until = performance.now() + o.timeoutS * 1000; // --timeout, a duration: the monotonic clock, as follow's
      while (performance.now() < until) {
        const text = render(await status(o), o.url);
        process.stdout.write(process.stdout.isTTY ? `\x1b[2J\x1b[H${text}\n` : `${text}\n\n`);
        await new Promise((r) => setTimeout(r, 1000));
      }
      return;
    }
    case 'add': {
      const o = options(rest);
      const node = o.positional[0] ?? die('add needs a node address: keyslice add ws://host:port', EXIT_USAGE);
      await call(o, 'POST', 'add', { node });
      console.log(`added ${node}; slices move onto it`);
      if (!o.wait) return;
      const before = await status(o);
      const share = Math.floor(before.sliceCount / before.nodes.filter((n) => n.status === 'active').length);
      return follow(o, `filling ${node}`, (st) => {
        const n = st.nodes.find((x) => x.node === node);
        const counts = st.nodes.filter((x) => x.status === 'active').map((x) => x.slices);
        return { done: n?.slices ?? 0, total: share, finished: st.moves.inFlight.length === 0 && Math.max(...counts) - Math.min(...counts) <= 1 };
      });
    }
    case 'drain': {
      const o = options(rest);
      const node = o.positional[0] ?? die('drain needs a node address: keyslice drain ws://host:port', EXIT_USAGE);
      const before = (await status(o)).nodes.find((n) => n.node === node);
      await call(o, 'POST', 'drain', { node });
      // With replicated slices, what leaves the node is its replicas (leading or following); at R=1 they are its slices.
      console.log(`draining ${node} (${before === undefined ? '?' : `${before.replicas} slices${before.replicas !== before.slices ? `, leading ${before.slices}` : ''}`})`);
      if (!o.wait) return;
      // Moves that were under way onto the node when the drain began may still land: the total grows with them.
      let total = before?.replicas ?? 0;
      // Done once the node holds no replica and no replica-set change that took one out still counts it (until that
      // settles, keyslice remove refuses the node: its answer may be the one that settles the change).
      await follow(o, `draining ${node}`, (st) => {
        const n = st.nodes.find((x) => x.node === node);
        const left = n?.replicas ?? 0;
        const unsettled = n?.unsettledChanges ?? 0;
        total = Math.max(total, left);
        return { done: total - left, total, finished: left === 0 && unsettled === 0, note: left === 0 && unsettled > 0 ? `, ${unsettled} replica-set change${unsettled === 1 ? '' : 's'} that took its replicas out settling` : '' };
      });
      return console.log(`${node} holds no slices; "keyslice remove ${node}" forgets it, then stop its process`);
    }
    case 'remove': {
      const o = options(rest);
      const node = o.positional[0] ?? die('remove needs a node address: keyslice remove ws://host:port', EXIT_USAGE);
      await call(o, 'POST', 'remove', { node, ...(o.forgetData ? { forgetData: true } : {}), ...(o.force ? { force: true } : {}) });
      return console.log(o.forgetData ? `removed ${node}; the data of the slices it owned is given up (they are empty on the nodes that took them)` : `removed ${node}`);
    }
    case 'advise':
      return (await import('./cli-advise.js')).advise(rest);
    case 'import':
      return (await import('./cli-import.js')).importCommand(rest);
    case 'export':
      return (await import('./cli-export.js')).exportCommand(rest);
    case '--version':
    case '-v':
      return console.log(version());
    case 'help':
    case '--help':
    case '-h':
      return console.log(USAGE);
    case undefined:
      // Asked for nothing: the help, on stderr, and a failure, so that a script that forgot its command notices.
      console.error(USAGE);
      process.exit(EXIT_USAGE);
    default:
      die(`unknown command "${command}"\n\n${USAGE}`, EXIT_USAGE);
  }
}

await main();

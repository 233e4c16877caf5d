// keyslice as an npm package: `npm pack` (its prepack builds, from the files the
// Docker image is built from: no tests, no benches), install the tarball into a
// fresh project from the npm cache alone (npm ci --offline), then use it as a user would: the client
// imported from a .mjs script and from a .ts file that tsc type-checks, both run
// against a cluster that the installed package's own `keyslice local` started.
// Every process is bounded in time and stopped by its PID; the folders are removed.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopProcess } from '../coordinator/cli/local-cluster.js';
import { waitFor } from './elastic-fixture.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const work = mkdtempSync(join(tmpdir(), 'keyslice-package-'));
const app = join(work, 'app');
/** A project that installs the keyslice folder itself (npm links it) rather than the tarball. */
const folderApp = join(work, 'folder-app');
const src = join(work, 'src');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string };
/** What the Dockerfile copies into its build stage, plus the README the package carries. */
const SOURCES = ['package.json', 'tsconfig.json', 'README.md', 'shared', 'coordinator', 'slice-worker'];
const SERVER_FOLDERS = ['shared', 'coordinator', 'slice-worker'];

let local: ChildProcess | undefined;
const localPids: number[] = [];
let clusterUrl = '';

afterAll(async () => {
  if (local !== undefined) await stopProcess(local);
  for (const pid of localPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already, as it should be
    }
  }
  rmSync(work, { recursive: true, force: true });
});

/** A user's project that depends on the tarball, with a lock file whose other entries are this
 * checkout's production dependencies at the versions its own lock file pins: `npm ci --offline`
 * then installs exactly what a user's `npm install` of the tarball would, from the npm cache. */
function writeOfflineLock(project: string, tarball: string): void {
  const ours = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string>; bin: Record<string, string> };
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const dependencies = { [pkg.name]: `file:${relative(project, tarball)}` };
  const packages: Record<string, unknown> = {
    '': { name: 'keyslice-user', dependencies },
    [`node_modules/${pkg.name}`]: { version: ours.version, resolved: dependencies[pkg.name], dependencies: ours.dependencies, bin: ours.bin },
  };
  for (const [path, entry] of Object.entries(lock.packages)) if (path.startsWith('node_modules/') && entry.dev !== true) packages[path] = entry;
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'keyslice-user', private: true, type: 'module', dependencies }));
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify({ name: 'keyslice-user', lockfileVersion: 3, requires: true, packages }));
}

/** Runs a command to its end, bounded; fails with its output if it exits non-zero. */
function run(cmd: string, args: string[], cwd: string, timeoutMs: number, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(cmd, args, { cwd, env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed (${err.message}):\n${stdout}\n${stderr}`));
      else resolvePromise(stdout);
    });
  });
}

/** The relative imports of a source file, resolved to source paths. */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g)].map((m) => m[1] ?? m[2]);
  return specs.map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

/** Every source file reachable from `entry` by relative imports. */
function importClosure(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    expect(existsSync(f), `${relative(root, f)} exists`).toBe(true);
    todo.push(...relativeImports(f));
  }
  return [...seen].map((f) => relative(root, f)).sort();
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(root, folder, f));
}

describe('what the package and the image are made of', () => {
  it('the client entry imports only the client and shared/', () => {
    const closure = importClosure(join(root, 'coordinator', 'client', 'index.ts'));
    expect(closure).toContain('coordinator/client/client.ts');
    expect(closure.filter((f) => !f.startsWith('shared/') && f !== 'coordinator/client/index.ts' && f !== 'coordinator/client/client.ts')).toEqual([]);
  });

  it('the server code imports nothing from bench/ or test/, so the image builds without them', () => {
    for (const folder of SERVER_FOLDERS) {
      for (const file of sourceFiles(folder)) {
        for (const target of relativeImports(file)) expect(SERVER_FOLDERS, `${relative(root, file)} imports ${relative(root, target)}`).toContain(relative(root, target).split('/')[0]);
      }
    }
  });

  it('the Dockerfile copies only the sources, and the image runs as an unprivileged user', () => {
    const lines = readFileSync(join(root, 'Dockerfile'), 'utf8').split('\n').filter((l) => !l.startsWith('#'));
    const copied = lines.filter((l) => /^COPY\s/.test(l) && !l.includes('--from=')).flatMap((l) => l.trim().split(/\s+/).slice(1, -1));
    expect(copied.sort()).toEqual(['coordinator', 'package-lock.json', 'package.json', 'shared', 'slice-worker', 'tsconfig.json']);
    const users = lines.filter((l) => /^USER\s/.test(l)).map((l) => l.split(/\s+/)[1]);
    expect(users.length).toBeGreaterThan(0);
    expect(['root', '0']).not.toContain(users.at(-1));
    // The last stage runs as that user: no FROM after the USER line.
    const lastLine = (re: RegExp) => lines.reduce((last, l, i) => (re.test(l) ? i : last), -1);
    expect(lastLine(/^USER\s/)).toBeGreaterThan(lastLine(/^FROM\s/));
  });
});

describe('npm pack and npm install, as a user', () => {
  let tarball = '';

  beforeAll(async () => {
    // A copy of only what the image is built from, with this checkout's node_modules: prepack builds it there.
    mkdirSync(src);
    for (const s of SOURCES) cpSync(join(root, s), join(src, s), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(src, 'node_modules'), 'dir');
    const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', work], src, 120_000)) as { filename: string; files: { path: string }[] }[];
    tarball = join(work, packed[0].filename);
    expect(statSync(join(src, 'dist', 'coordinator', 'cli', 'cli.js')).mode & 0o111, 'the build leaves the bin executable').toBe(0o111);

    mkdirSync(app);
    writeOfflineLock(app, tarball);
    // From the npm cache alone (CI's `npm ci` filled it): the test never reaches the registry.
    await run('npm', ['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], app, 90_000);

    mkdirSync(folderApp);
    writeFileSync(join(folderApp, 'package.json'), JSON.stringify({ name: 'keyslice-folder-user', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', src], folderApp, 60_000);
  }, 240_000);

  it('holds the built code, its type declarations and the README; no sources, tests, benches or source maps', () => {
    const installed = join(app, 'node_modules', pkg.name);
    const files = readdirSync(installed, { recursive: true, encoding: 'utf8' });
    for (const f of ['package.json', 'README.md', 'dist/coordinator/client/index.js', 'dist/coordinator/client/index.d.ts', 'dist/coordinator/cli/cli.js', 'dist/slice-worker/worker.js']) expect(files).toContain(f);
    const unexpected = files.filter((f) => (f.endsWith('.ts') && !f.endsWith('.d.ts')) || f.endsWith('.map') || /^(test|bench|dist\/bench|dist\/test)(\/|$)/.test(f));
    expect(unexpected).toEqual([]);
  });

  it('installs the keyslice command, which starts a cluster from the installed package', async () => {
    const bin = join(app, 'node_modules', '.bin', 'keyslice');
    expect((await run(bin, ['--version'], app, 20_000)).trim()).toBe(pkg.version);
    local = spawn(bin, ['local'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KEYSLICE_PORT: '0', KEYSLICE_DATA: join(work, 'data') } });
    let out = '';
    local.stdout!.on('data', (d: Buffer) => (out += d));
    local.stderr!.on('data', (d: Buffer) => (out += d));
    await waitFor(async () => {
      if (local!.exitCode !== null) throw new Error(`keyslice local exited:\n${out}`);
      return out.includes('keyslice is running');
    }, `the installed keyslice local to start:\n${out}`, 30_000);
    for (const m of out.matchAll(/ready .*pid=(\d+)/g)) localPids.push(Number(m[1]));
    clusterUrl = /keyslice is running: (http:\/\/\S+)/.exec(out)![1];
    // The processes run the installed package's code, not this checkout's.
    expect(localPids).toHaveLength(4); // a coordinator and three slice nodes;
    if (existsSync('/proc')) {
      for (const pid of localPids) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain(join(app, 'node_modules', pkg.name, 'dist'));
    }
  }, 60_000);

  it.each([
    ['the tarball', app, 'from_mjs'],
    ['the project folder', folderApp, 'from_folder'],
  ])('imports from a .mjs script after npm install of %s: the client, KeysliceError and the error codes, against the cluster', async (_, project, table) => {
    writeFileSync(
      join(project, 'check.mjs'),
      `import { KeysliceClient, KeysliceError, ERROR_CODES, isErrorCode } from 'keyslice';
const [url, table] = process.argv.slice(2);
const client = await KeysliceClient.connect(url);
await client.createTable(table, { name: 'device', type: 'string' }, { name: 'ts', type: 'number' });
await client.putItem(table, { device: 'd1', ts: 1, temp: 21.5 });
const item = await client.getItem(table, { device: 'd1', ts: 1 }, ['temp']);
let caught;
try { await client.getItem('no_such_table', 'x'); } catch (err) { caught = err; }
await client.close();
console.log(JSON.stringify({ temp: item.temp, isKeysliceError: caught instanceof KeysliceError, code: caught.code, retryable: caught.retryable, codes: Object.keys(ERROR_CODES).includes('TableNotFound'), isCode: isErrorCode('Unavailable') }));
`,
    );
    const out = JSON.parse(await run(process.execPath, ['check.mjs', clusterUrl, table], project, 30_000));
    expect(out).toEqual({ temp: 21.5, isKeysliceError: true, code: 'TableNotFound', retryable: false, codes: true, isCode: true });
  }, 60_000);

  it('type-checks a .ts file against the declarations (a wrong call is an error), and the compiled file runs', async () => {
    writeFileSync(
      join(app, 'check.ts'),
      `import { KeysliceClient, KeysliceError, type ErrorCode, type Item, type Request, type TableDescription } from 'keyslice';
const client: KeysliceClient = await KeysliceClient.connect(process.argv[2]!, { requestTimeoutMs: 10_000 });
const table: TableDescription = await client.createTable('from_ts', { name: 'id', type: 'string' });
await client.putItem(table.name, { id: 'a', tags: ['x', 'y'] });
const query: Request<'GetItems'> = { table: table.name, limit: 10 };
const items: Item[] = (await client.getItems(query)).items;
let code: ErrorCode | undefined;
try {
  await client.describeTable('no_such_table');
} catch (err) {
  if (err instanceof KeysliceError) code = err.code;
}
// @ts-expect-error: 'date' is not a key type; if the declarations were missing (any), this line would be an error
await client.createTable('never', { name: 'id', type: 'date' }).catch(() => undefined);
await client.close();
console.log(JSON.stringify({ items: items.map((i) => i.id), code }));
`,
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, outDir: 'out', typeRoots: [join(root, 'node_modules', '@types')], types: ['node'] },
        files: ['check.ts'],
      }),
    );
    await run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], app, 60_000);
    const out = JSON.parse(await run(process.execPath, [join('out', 'check.js'), clusterUrl], app, 30_000));
    expect(out).toEqual({ items: ['a'], code: 'TableNotFound' });
  }, 90_000);
});

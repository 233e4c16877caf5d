// The coordinator's metadata files (cluster-map.json and catalog.json in its data folder) read back checked field by
// field: a file cut short, a field of the wrong type, a list of the wrong length, a node index out of range, a term or
// an epoch that is not a whole number, a node named twice, or a file of a newer format is refused in one sentence that
// names the file, the field and what is wrong, and the file is left as it was. A coordinator started on such a file
// exits with that sentence (the built CLI, a real process, bounded in time), serving nothing.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Catalog, CATALOG_FORMAT } from '../coordinator/metadata/catalog.js';
import { CLUSTER_MAP_FORMAT } from '../coordinator/metadata/cluster-map-file.js';
import { defaultSettings, DYNAMODB_TABLES_FORMAT, TableSettingsStore } from '../coordinator/dynamodb/table-settings.js';
import { ClusterMap } from '../coordinator/metadata/cluster-map.js';
import { Membership } from '../coordinator/metadata/membership.js';
import { NODE_URL_CHARS_MAX } from '../shared/limits.js';
import { StateFileError } from '../shared/state-file.js';
import { cleanEnv, keyslice, stopRunning } from './cli-run.js';

const dirs: string[] = [];
const newDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ks-metadata-files-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(() => stopRunning());

const SLICES = 8;
const NODES = ['ws://127.0.0.1:9000', 'ws://127.0.0.1:9001', 'ws://127.0.0.1:9002'];
type Json = Record<string, any>;

/** A data folder with a map of 3 nodes and 3 replicas per slice, as a coordinator wrote it. */
function mapFolder(): { dir: string; file: string; good: string } {
  const dir = newDir();
  const map = ClusterMap.open(dir, NODES, SLICES, 3);
  if (typeof map === 'string') throw new Error(map);
  const file = join(dir, 'cluster-map.json');
  return { dir, file, good: readFileSync(file, 'utf8') };
}

/** Each damage in turn (a change to the file's JSON, or its text), and the sentence expected of it. */
const MAP_DAMAGE: [string, (m: Json) => unknown, RegExp][] = [
  ['not an object', () => [], /: the file must be a JSON object; it is \[\]/],
  ['a newer format', (m) => ((m.format = CLUSTER_MAP_FORMAT + 1), m), /has format 2, written by a newer coordinator; this one reads format 1 at most: start the version that wrote it/],
  ['a format that is not a number', (m) => ((m.format = '1'), m), /: format must be a whole number from 1 to \d+; it is "1"/],
  ['no slice count', (m) => (delete m.sliceCount, m), /: sliceCount must be a whole number from 1 to 65536; it is missing/],
  ['an epoch that is not whole', (m) => ((m.epoch = 2.5), m), /: epoch must be a whole number from 1 to \d+; it is 2.5/],
  ['an epoch as text', (m) => ((m.epoch = '3'), m), /: epoch must be a whole number from 1 to \d+; it is "3"/],
  ['nodes not a list', (m) => ((m.nodes = 'ws://127.0.0.1:9000'), m), /: nodes must be a list; it is "ws:/],
  ['a node that is not a string', (m) => ((m.nodes[1] = 9001), m), /: nodes\[1\] must be a string of at most 2048 characters; it is 9001/],
  ['a node named twice', (m) => ((m.nodes[2] = m.nodes[0]), m), /: nodes\[2\] names "ws:\/\/127.0.0.1:9000" a second time \(nodes\[0\]\)/],
  ['a status not known', (m) => ((m.status[1] = 'gone'), m), /: status\[1\] must be one of active, draining, removed; it is "gone"/],
  ['one status short', (m) => (m.status.pop(), m), /: status must be a list of 3; it has 2/],
  ['one owner short', (m) => (m.owners.pop(), m), /: owners must be a list of 8; it has 7/],
  ['an owner out of range', (m) => ((m.owners[3] = 3), m), /: owners\[3\] must be a whole number from -1 to 2; it is 3/],
  ['an owner that is not whole', (m) => ((m.owners[0] = 0.5), m), /: owners\[0\] must be a whole number from -1 to 2; it is 0.5/],
  ['an owner removed', (m) => ((m.status[m.owners[0]] = 'removed'), m), /: slice 0's leader \(node 0\) is on a removed node/],
  ['a node id that is not one', (m) => ((m.nodeIds[0] = 'abc'), m), /: nodeIds\[0\] must be an id of 32 hex digits/],
  ['a cluster id that is not one', (m) => ((m.clusterId = 7), m), /: clusterId must be an id of 32 hex digits/],
  ['followers not a list', (m) => ((m.followers[2] = 1), m), /: followers\[2\] must be a list; it is 1/],
  ['a follower out of range', (m) => ((m.followers[2][0] = 5), m), /: followers\[2\]\[0\] must be a whole number from 0 to 2; it is 5/],
  ['a follower that is its leader', (m) => ((m.followers[2][0] = m.owners[2]), m), /: slice 2's replicas \(0,0,\d\) are not on distinct nodes/],
  ['a term that is not whole', (m) => ((m.terms[4] = 1.5), m), /: terms\[4\] must be a whole number from 1 to \d+; it is 1.5/],
  ['a term of 0', (m) => ((m.terms[4] = 0), m), /: terms\[4\] must be a whole number from 1 to \d+; it is 0/],
  ['one term short', (m) => (m.terms.pop(), m), /: terms must be a list of 8; it has 7/],
  ['a term used as text', (m) => ((m.termsUsed[0] = '2'), m), /: termsUsed\[0\] must be a whole number from 1 to \d+; it is "2"/],
  ['a leaving replica out of range', (m) => ((m.leaving[1] = 3), m), /: leaving\[1\] must be a whole number from -1 to 2; it is 3/],
  ['a joining replica not beside a leaving one', (m) => ((m.joining[1] = m.owners[1]), m), /: slice 1's joining replica \(node 0\) is not in its set beside a leaving or draining one/],
  ['an unsettled set with a node out of range', (m) => ((m.unsettled[0] = [[0, 9]]), m), /: unsettled\[0\]\[0\]\[1\] must be a whole number from 0 to 2; it is 9/],
  ['a last Lead of one entry', (m) => ((m.lastLead[0] = [1]), m), /: lastLead\[0\] must be a list of 2; it has 1/],
  ['a last Lead with a term not whole', (m) => ((m.lastLead[0] = [1.5, 0]), m), /: lastLead\[0\]\[0\] must be a whole number from 1 to \d+; it is 1.5/],
  ['everLed not true or false', (m) => ((m.everLed[0] = 0), m), /: everLed\[0\] must be true or false; it is 0/],
];

describe('cluster-map.json read back', () => {
  it('is written with its format number, and one without it (written before) reads as the current format', () => {
    const { dir, file, good } = mapFolder();
    const saved = rewrittenWithoutFormat(file, good, CLUSTER_MAP_FORMAT);
    const map = ClusterMap.open(dir, NODES, SLICES, 3);
    if (typeof map === 'string') throw new Error(map);
    expect(map.replicasOf(0), 'read as written').toEqual([saved.owners[0], ...saved.followers[0]]);
    map.setOwner(0, map.replicasOf(0)[1]);
    expect((JSON.parse(readFileSync(file, 'utf8')) as Json).format, 'written again with it').toBe(CLUSTER_MAP_FORMAT);
  });

  it('refuses a file cut short in one sentence naming it, and leaves it as it was', () => {
    const { dir, file, good } = mapFolder();
    const cut = good.slice(0, Math.floor(good.length / 2));
    writeFileSync(file, cut);
    const opened = ClusterMap.open(dir, NODES, SLICES, 3);
    expect(opened).toMatch(new RegExp(`^${escaped(file)} is not whole JSON \\(.*\\): the file is cut short or damaged$`));
    expect(readFileSync(file, 'utf8')).toBe(cut);
  });

  it('refuses each damaged field in turn in one sentence naming the file and the field, and leaves the file as it was', () => {
    const { dir, file, good } = mapFolder();
    for (const [what, damage, said] of MAP_DAMAGE) {
      const text = JSON.stringify(damage(JSON.parse(good) as Json));
      writeFileSync(file, text);
      const opened = ClusterMap.open(dir, NODES, SLICES, 3);
      expect(opened, what).toEqual(expect.any(String));
      expect(opened as string, what).toMatch(said);
      expect((opened as string).startsWith(`${file}`), `${what}: names the file`).toBe(true);
      expect((opened as string).split('\n'), `${what}: one line`).toHaveLength(1);
      expect(readFileSync(file, 'utf8'), `${what}: the file is left as it was`).toBe(text);
    }
  });
});

describe('a node address the map file would refuse', () => {
  // ws://host:port longer than the file check takes (NODE_URL_CHARS_MAX): admitted, it would be written to the map, and
  // the map refused when the coordinator restarts.
  const long = `ws://${'a'.repeat(NODE_URL_CHARS_MAX)}:7101`;

  it('is refused by keyslice add (and a node that joins), leaving the map as it was', async () => {
    const { dir, file, good } = mapFolder();
    const map = ClusterMap.open(dir, NODES, SLICES, 3);
    if (typeof map === 'string') throw new Error(map);
    const m = new Membership(map, Catalog.open(dir), 'secret', 1_000, false, () => {});
    try {
      expect(() => m.add(long)).toThrow(/a node address is ws:\/\/host:port of at most 2048 characters/);
      expect(readFileSync(file, 'utf8')).toBe(good);
    } finally {
      m.close();
    }
  });

  it('is refused in --nodes: exit 2, no map written', async () => {
    const dir = newDir();
    const r = await keyslice(['coordinator', '--data', dir, '--port', '0', '--routers', '0', '--nodes', long], 30_000, cleanEnv());
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--nodes: "ws:\/\/a+:7101" is not a ws:\/\/host:port address of at most 2048 characters/);
    expect(() => readFileSync(join(dir, 'cluster-map.json'))).toThrow(/ENOENT/);
  }, 40_000);
});

function catalogFolder(): { dir: string; file: string; good: string } {
  const dir = newDir();
  const catalog = Catalog.open(dir);
  catalog.create('orders', { name: 'customer', type: 'string' }, [{ name: 'day', type: 'number' }, { name: 'n', type: 'number' }], { buckets: 4 });
  catalog.create('users', { name: 'id', type: 'string' }, null, null);
  const file = join(dir, 'catalog.json');
  return { dir, file, good: readFileSync(file, 'utf8') };
}

const CATALOG_DAMAGE: [string, (c: Json) => unknown, RegExp][] = [
  ['a newer format', (c) => ((c.format = CATALOG_FORMAT + 1), c), /has format 2, written by a newer coordinator; this one reads format 1 at most/],
  ['nextTableId as text', (c) => ((c.nextTableId = '3'), c), /: nextTableId must be a whole number from 1 to \d+; it is "3"/],
  ['tables not a list', (c) => ((c.tables = {}), c), /: tables must be a list; it is \{\}/],
  ['a table id not below nextTableId', (c) => ((c.tables[1].id = c.nextTableId), c), /: tables\[1\]\.id must be a whole number from 1 to 2; it is 3/],
  ['a table name refused', (c) => ((c.tables[0].name = 'a'), c), /: tables\[0\]\.name must be a table name/],
  ['a key type not known', (c) => ((c.tables[1].shardingKey.type = 'X'), c), /: tables\[1\]\.shardingKey\.type must be one of string, number, binary; it is "X"/],
  ['a key column without a name', (c) => (delete c.tables[0].sortingKey[1].name, c), /: tables\[0\]\.sortingKey\[1\]\.name must be a string of at most 255 characters; it is missing/],
  ['a key of no column', (c) => ((c.tables[0].sortingKey = []), c), /: tables\[0\]\.sortingKey must be a column or a list of 1 or more; it is \[\]/],
  ['a key column twice', (c) => ((c.tables[0].sortingKey[1].name = 'day'), c), /: tables\[0\] \(table "orders"\) names key column "day" twice/],
  // An attribute name may hold a line break: the sentence stays one line.
  ['a key column twice, its name on two lines', (c) => ((c.tables[0].sortingKey[0].name = 'd\nay'), (c.tables[0].sortingKey[1].name = 'd\nay'), c), /: tables\[0\] \(table "orders"\) names key column "d\\nay" twice/],
  ['buckets of 0', (c) => ((c.tables[0].evenDistribution.buckets = 0), c), /: tables\[0\]\.evenDistribution\.buckets must be a whole number from 1 to 1024; it is 0/],
  ['even distribution without a sorting key', (c) => ((c.tables[1].evenDistribution = { buckets: 4 }), c), /: tables\[1\]\.evenDistribution is set on a table without a sorting key/],
  ['a time that is not whole', (c) => ((c.tables[0].createdAt = -1), c), /: tables\[0\]\.createdAt must be a whole number from 0 to \d+; it is -1/],
  ['a name twice', (c) => ((c.tables[1].name = 'orders'), c), /: tables\[1\] has the name "orders" of tables\[0\]/],
  ['an id twice', (c) => ((c.tables[1].id = c.tables[0].id), c), /: tables\[1\] has the id 1 of tables\[0\]/],
];

describe('catalog.json read back', () => {
  it('is written with its format number, and one without it reads as the current format', () => {
    const { dir, file, good } = catalogFolder();
    rewrittenWithoutFormat(file, good, CATALOG_FORMAT);
    expect(Catalog.open(dir).names()).toEqual(['orders', 'users']);
  });

  it('opens every key design CreateTable takes, as it was created', () => {
    const dir = newDir();
    const catalog = Catalog.open(dir);
    catalog.create('simple', { name: 'id', type: 'binary' }, null, null);
    catalog.create('compound', [{ name: 'a', type: 'string' }, { name: 'b', type: 'number' }], [{ name: 'c', type: 'binary' }, { name: 'd', type: 'string' }, { name: 'e', type: 'number' }, { name: 'f', type: 'string' }], null);
    catalog.create('even.default', { name: 'k', type: 'number' }, { name: 's', type: 'string' }, {});
    catalog.create('even-max', [{ name: 'k', type: 'string' }], [{ name: 's', type: 'number' }], { buckets: 1024 });
    catalog.delete('simple');
    const again = Catalog.open(dir);
    expect(again.stored()).toEqual(catalog.stored());
    expect(again.names()).toEqual(['compound', 'even-max', 'even.default']);
    expect(again.get('compound').sorting).toHaveLength(4);
  });

  it('opens a table whose key design CreateTable took when it was made and refuses now (a rule added since)', () => {
    // Before CreateTable refused a lone UTF-16 surrogate in an attribute name (c2c8d1f), a key column could be named
    // with one, and JSON keeps it ("\\ud800"). A catalog such a coordinator wrote is valid: refusing it would stop the
    // coordinator at restart. The file's check takes the key design's shape, not CreateTable's rules of the day.
    const { dir, file, good } = catalogFolder();
    const saved = JSON.parse(good) as Json;
    saved.tables[1].shardingKey.name = 'id\ud800';
    delete saved.format;
    const text = JSON.stringify(saved);
    expect(text, 'JSON keeps the lone surrogate').toContain('\\ud800');
    writeFileSync(file, text);
    const catalog = Catalog.open(dir);
    expect(catalog.get('users').shardingKey, 'read as written').toEqual({ name: 'id\ud800', type: 'string' });
    expect(catalog.get('users').sharding).toEqual([{ name: 'id\ud800', type: 'string' }]);
    expect(readFileSync(file, 'utf8'), 'the file is left as it was').toBe(text);
  });

  it('refuses a file cut short and each damaged field in turn in one sentence naming the file and the field, leaving it as it was', () => {
    const { dir, file, good } = catalogFolder();
    const texts = [[' cut short', good.slice(0, good.length - 10), /catalog\.json is not whole JSON \(.*\): the file is cut short or damaged$/] as const,
      ...CATALOG_DAMAGE.map(([what, damage, said]) => [what, JSON.stringify(damage(JSON.parse(good) as Json)), said] as const)];
    for (const [what, text, said] of texts) {
      writeFileSync(file, text);
      let refused: unknown;
      try {
        Catalog.open(dir);
      } catch (err) {
        refused = err;
      }
      expect(refused, what).toBeInstanceOf(StateFileError);
      expect((refused as Error).message, what).toMatch(said);
      expect((refused as Error).message.startsWith(file), `${what}: names the file`).toBe(true);
      expect((refused as Error).message.split('\n'), `${what}: one line`).toHaveLength(1);
      expect(readFileSync(file, 'utf8'), `${what}: the file is left as it was`).toBe(text);
    }
  });
});

/** A data folder with DynamoDB's settings of two tables, as a coordinator wrote them. */
function settingsFolder(): { dir: string; file: string; good: string } {
  const dir = newDir();
  const store = TableSettingsStore.open(dir);
  store.set('orders', { ...defaultSettings(1_700_000_000_000), billingMode: 'PROVISIONED', readCapacityUnits: 5, writeCapacityUnits: 7, lastDecreaseAt: 1_700_000_100_000, decreasesToday: 1, tags: [{ Key: 'team', Value: 'a' }] });
  store.set('users', defaultSettings(1_700_000_200_000));
  const file = join(dir, 'dynamodb-tables.json');
  return { dir, file, good: readFileSync(file, 'utf8') };
}

const SETTINGS_DAMAGE: [string, (c: Json) => unknown, RegExp][] = [
  ['a newer format', (c) => ((c.format = DYNAMODB_TABLES_FORMAT + 1), c), /has format 2, written by a newer coordinator; this one reads format 1 at most/],
  ['tables a list', (c) => ((c.tables = []), c), /: tables must be a JSON object; it is \[\]/],
  ['a billing mode not known', (c) => ((c.tables.orders.billingMode = 'FREE'), c), /: tables\["orders"\]\.billingMode must be one of PROVISIONED, PAY_PER_REQUEST; it is "FREE"/],
  ['a throughput as text', (c) => ((c.tables.orders.readCapacityUnits = '5'), c), /: tables\["orders"\]\.readCapacityUnits must be a whole number from 0; it is "5"/],
  ['a time that is not whole', (c) => ((c.tables.users.createdAt = 1.5), c), /: tables\["users"\]\.createdAt must be a whole number from 0 to \d+; it is 1.5/],
  ['no deletion protection', (c) => (delete c.tables.users.deletionProtection, c), /: tables\["users"\]\.deletionProtection must be true or false; it is missing/],
  ['a tag without a value', (c) => (delete c.tables.orders.tags[0].Value, c), /: tables\["orders"\]\.tags\[0\]\.Value must be a string of at most 256 characters; it is missing/],
];

describe('dynamodb-tables.json read back', () => {
  it('is written with its format number; one without it reads as the current format, a throughput above any safe integer too', () => {
    const { dir, file, good } = settingsFolder();
    // UpdateTable bounds a throughput by nothing but "whole, at least 1": a file may hold any such number.
    const saved = rewrittenWithoutFormat(file, good, DYNAMODB_TABLES_FORMAT, (s) => (s.tables.orders.writeCapacityUnits = 1e20));
    const store = TableSettingsStore.open(dir);
    expect(store.get('orders', 1_700_000_000_000)).toEqual(saved.tables.orders);
    expect(store.get('users', 1_700_000_200_000)).toEqual(defaultSettings(1_700_000_200_000));
  });

  it('refuses a file cut short and each damaged field in turn in one sentence naming the file and the field, leaving it as it was', () => {
    const { dir, file, good } = settingsFolder();
    const texts = [[' cut short', good.slice(0, good.length - 10), /dynamodb-tables\.json is not whole JSON \(.*\): the file is cut short or damaged$/] as const,
      ...SETTINGS_DAMAGE.map(([what, damage, said]) => [what, JSON.stringify(damage(JSON.parse(good) as Json)), said] as const)];
    for (const [what, text, said] of texts) {
      writeFileSync(file, text);
      const refused = messageOf(() => TableSettingsStore.open(dir));
      expect(refused, what).toMatch(said);
      expect(refused.startsWith(file), `${what}: names the file`).toBe(true);
      expect(refused.split('\n'), `${what}: one line`).toHaveLength(1);
      expect(readFileSync(file, 'utf8'), `${what}: the file is left as it was`).toBe(text);
    }
  });
});

describe('a coordinator started on a damaged metadata file', () => {
  it('exits 2 within a bound with the one sentence on stderr, serving nothing, and leaves the file as it was', async () => {
    // The last case names a node the map lacks (--nodes): a coordinator that opened the map first would add it, at a new
    // epoch, before it refused the catalog; both files are checked before either is changed.
    for (const [what, name, damage, nodes] of [
      ['a map with an epoch that is not whole', 'cluster-map.json', (m: Json) => ((m.epoch = 2.5), m), []],
      ['a map of a newer format', 'cluster-map.json', (m: Json) => ((m.format = CLUSTER_MAP_FORMAT + 1), m), []],
      ['a catalog with a table id not below nextTableId', 'catalog.json', (c: Json) => ((c.tables[0].id = c.nextTableId), c), []],
      ['a catalog with a table id not below nextTableId, and a node the map lacks', 'catalog.json', (c: Json) => ((c.tables[0].id = c.nextTableId), c), [...NODES, 'ws://127.0.0.1:9003']],
      ['DynamoDB settings with a billing mode not known, and a node the map lacks', 'dynamodb-tables.json', (c: Json) => ((c.tables.orders.billingMode = 'FREE'), c), [...NODES, 'ws://127.0.0.1:9003']],
    ] as const) {
      const { dir } = name === 'cluster-map.json' ? mapFolder() : name === 'catalog.json' ? catalogFolder() : settingsFolder();
      if (name !== 'cluster-map.json') {
        const map = ClusterMap.open(dir, NODES, SLICES, 3);
        if (typeof map === 'string') throw new Error(map);
      }
      const file = join(dir, name);
      const text = JSON.stringify(damage(JSON.parse(readFileSync(file, 'utf8')) as Json));
      writeFileSync(file, text);
      const mapBefore = readFileSync(join(dir, 'cluster-map.json'), 'utf8');
      const expected = name === 'cluster-map.json' ? ClusterMap.open(dir, NODES, SLICES, 3) : messageOf(() => (name === 'catalog.json' ? Catalog.open(dir) : TableSettingsStore.open(dir)));
      expect(expected, what).toMatch(new RegExp(`^${escaped(file)}`));
      const startedAt = performance.now();
      const r = await keyslice(['coordinator', '--data', dir, '--port', '0', '--routers', '0', '--slices', String(SLICES), '--replication-factor', '3', ...(nodes.length > 0 ? ['--nodes', nodes.join(',')] : [])], 30_000, cleanEnv());
      const tookMs = performance.now() - startedAt;
      expect([r.code, r.stderr.trim()], what).toEqual([2, `keyslice: ${expected as string}`]);
      expect(tookMs, `${what}: refused within the bound`).toBeLessThan(20_000);
      expect(r.stdout, `${what}: nothing served`).not.toMatch(/coordinator ready/);
      expect(readFileSync(file, 'utf8'), `${what}: the file is left as it was`).toBe(text);
      expect(readFileSync(join(dir, 'cluster-map.json'), 'utf8'), `${what}: the map is left as it was`).toBe(mapBefore);
    }
  }, 90_000);
});

/** A metadata file as a coordinator wrote it (`good`, checked to hold its `format` number), written back without that
 * number, as a coordinator before formats wrote it, and with `change` made: what was written. */
function rewrittenWithoutFormat(file: string, good: string, format: number, change: (saved: Json) => unknown = () => {}): Json {
  const saved = JSON.parse(good) as Json;
  expect(saved.format, `${file} is written with its format number`).toBe(format);
  delete saved.format;
  change(saved);
  writeFileSync(file, JSON.stringify(saved));
  return saved;
}

/** `text` as a RegExp matches it. */
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function messageOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('not refused');
}

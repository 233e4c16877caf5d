// The DynamoDB endpoint's own CPU per request, in one process: what a router spends in
// coordinator/dynamodb/ between a request's body and its answer (SigV4 check, JSON parse,
// parameters, AttributeValues, the handler, JSON of the answer, its headers), with the
// native operations faked (they answer at once from items made here), no socket and no
// HTTP parser. On a shared machine a cluster's CPU per op moves by 10-30% from round to
// round; this moves by a few percent, so it shows what a change to the endpoint saves, which
// the cluster figures (bench/hops.ts's `sdk` workloads) cannot resolve.
//   node dist/bench/ddb-layer.js [--base DIR] [--rounds 7] [--ms 300]
// `--base DIR`: a built checkout whose endpoint runs in the same rounds, alternated with this one.
// Workloads: PutItem of a 200-byte item, GetItem of one, Query of 100 such items (the shape of bench:compare and
// hops.js's `sdk` workloads), and the same Query whose page has more to read (a marker: its answer has a
// LastEvaluatedKey, read from the last item), each unsigned (a cluster with no client token) and signed (SigV4 checked against the
// token; signed afresh for each measurement, so that a long run's signatures stay within the 15 minutes the check
// allows: made once, they expired after 15 minutes, and the bench stopped on InvalidSignatureException).
// A Query's page comes as the router's link hands it on: the slice worker's answer (encodeSliceResults: the items as
// objects, with keyslice's system attributes, or packed in the client's form when the endpoint asks for them so)
// decoded for each request (decodeSliceResults), and a packed page taken as answerItems takes it
// (PackedItems.ofList); a build whose endpoint asks for objects pays their decode, as its router does.
import { createHash, createHmac } from 'node:crypto';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { encodeSliceResults, packClientList, RESULT_OK, type SliceOpResult } from '../shared/protocol.js';
import { median } from './median.js';

const opts = readCommandLine(
  process.argv.slice(2),
  { base: { type: 'string' }, rounds: { type: 'string', default: '7' }, ms: { type: 'string', default: '300' } },
  'usage: node dist/bench/ddb-layer.js [--base DIR] [--rounds 7] [--ms 300]',
).values;
const ROUNDS = intArg('rounds', opts.rounds, 1, 100);
const MS = intArg('ms', opts.ms, 10, 60_000);
/** Requests per workload and round at most, whatever --ms allows. */
const REQUESTS_MAX = 1_000_000;

const TABLE = 'ddb_layer';
const SECRET = 'ddb-layer-token';
const REGION = 'us-east-1';
const PAD = 'x'.repeat(160);
const ITEMS = Array.from({ length: 100 }, (_, s) => ({ device: 'range-3', seq: s, payload: PAD, __name: `range-3.${s}`, __mtime: 1795419678645 + s }));
/** A worker's answer to the Query's range (a RangeResult, nothing more to read), items as objects or packed. */
const rangeAnswer = (items: unknown) => encodeSliceResults([[RESULT_OK, [items, null, false, null, ITEMS.length]]] as unknown as SliceOpResult[]);
const PAGE_OBJECTS = rangeAnswer(ITEMS);
const PAGE_PACKED = rangeAnswer(packClientList(ITEMS));
/** A build's protocol.js, as much as page() uses of it: each build's endpoint knows a packed page by its own
 * PackedItems class. */
type Protocol = Pick<typeof import('../shared/protocol.js'), 'decodeSliceResults' | 'PackedItems'>;
/** The page as the router's GetItems answers it, from the worker's bytes, by the build's `protocol`; `more`: with a
 * marker, as a page that a Limit cut short (its answer says LastEvaluatedKey, read from its last item). */
function page(protocol: Protocol, passThrough: boolean, more: boolean): { items: unknown; examined: number; marker?: string } {
  const [[code, [items]]] = protocol.decodeSliceResults(passThrough ? PAGE_PACKED : PAGE_OBJECTS) as unknown as [[number, [unknown]]];
  if (code !== RESULT_OK) throw new Error('a faked range answer that is not OK');
  const out = { items: passThrough ? protocol.PackedItems.ofList(items as Uint8Array) : items, examined: ITEMS.length };
  return more ? { ...out, marker: 'r1.more' } : out;
}
const CATALOG_TABLE = { name: TABLE, shardingKey: { name: 'device', type: 'string' }, sortingKey: { name: 'seq', type: 'number' }, evenDistribution: null, createdAt: 1 };
/** A Query of this table answers its page with a marker: the same 100 items, and a LastEvaluatedKey. */
const PAGED_TABLE = 'ddb_layer_paged';
const CATALOG_PAGED = { ...CATALOG_TABLE, name: PAGED_TABLE };

interface Request {
  method: string;
  url: string;
  headers: Record<string, string>;
  rawHeaders: string[];
  readonly headersDistinct: Record<string, string[]>;
}
/** The endpoint's steps after the body is read (DynamoDbEndpoint.handle less node:http's body reader). */
interface Endpoint {
  serve(req: Request, raw: Buffer): Promise<Record<string, unknown>>;
  send(res: Answer, status: number, body: Record<string, unknown>): void;
}
class Answer {
  headersSent = false;
  bytes = 0;
  writeHead(): void {
    this.headersSent = true;
  }
  end(body: string | Buffer): void {
    this.bytes = body.length;
  }
}

async function endpointOf(distRoot: string, token: string): Promise<Endpoint> {
  const m = (await import(pathToFileURL(join(distRoot, 'coordinator', 'dynamodb', 'endpoint.js')).href)) as { DynamoDbEndpoint: new (ops: unknown, o: unknown) => unknown };
  const protocol = (await import(pathToFileURL(join(distRoot, 'shared', 'protocol.js')).href)) as Protocol;
  const ops = {
    catalog: { get: (name: string) => (name === PAGED_TABLE ? CATALOG_PAGED : CATALOG_TABLE) },
    execute: (op: string, payload: { table?: string }, passThrough = false) => Promise.resolve(op === 'GetItem' ? { item: ITEMS[7] } : op === 'GetItems' ? page(protocol, passThrough, payload.table === PAGED_TABLE) : {}),
  };
  return new m.DynamoDbEndpoint(ops, { dataDir: null, token, sliceCount: 1024 }) as Endpoint;
}

const BODIES: Record<string, unknown> = {
  PutItem: { TableName: TABLE, Item: { device: { S: 'put-1' }, seq: { N: '17' }, payload: { S: PAD } } },
  GetItem: { TableName: TABLE, Key: { device: { S: 'range-3' }, seq: { N: '7' } } },
  Query: {
    TableName: TABLE,
    KeyConditionExpression: '#d = :d AND #s BETWEEN :a AND :b',
    ExpressionAttributeNames: { '#d': 'device', '#s': 'seq' },
    ExpressionAttributeValues: { ':d': { S: 'range-3' }, ':a': { N: '0' }, ':b': { N: '99' } },
    Limit: 100,
  },
};
BODIES.QueryPaged = { ...(BODIES.Query as object), TableName: PAGED_TABLE };

/** The headers the AWS SDK v3 sends, signed with SECRET as it signs them (every header but user-agent). */
function headersOf(op: string, body: Buffer, signed: boolean): [string, string][] {
  const amzDate = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const payloadHash = createHash('sha256').update(body).digest('hex');
  const h: [string, string][] = [
    ['host', '127.0.0.1:7100'],
    ['content-type', 'application/x-amz-json-1.0'],
    ['x-amz-target', `DynamoDB_20120810.${op}`],
    ['x-amz-user-agent', 'aws-sdk-js/3.1164.0'],
    ['user-agent', 'aws-sdk-js/3.1164.0 ua/2.1 os/linux lang/js md/nodejs#20 api/dynamodb#3.1164.0'],
    ['amz-sdk-invocation-id', '0b7f1c2e-5d6a-4e8b-9c0d-1e2f3a4b5c6d'],
    ['amz-sdk-request', 'attempt=1; max=1'],
    ['x-amz-date', amzDate],
    ['x-amz-content-sha256', payloadHash],
    ['content-length', String(body.length)],
  ];
  if (!signed) return h;
  const names = h.map(([k]) => k).filter((k) => k !== 'user-agent').sort();
  const value = (k: string) => h.find(([n]) => n === k)![1];
  const canonical = ['POST', '/', '', names.map((k) => `${k}:${value(k)}\n`).join(''), names.join(';'), payloadHash].join('\n');
  const scope = `${amzDate.slice(0, 8)}/${REGION}/dynamodb/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonical).digest('hex')].join('\n');
  const mac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
  const key = mac(mac(mac(mac(`AWS4${SECRET}`, amzDate.slice(0, 8)), REGION), 'dynamodb'), 'aws4_request');
  const signature = createHmac('sha256', key).update(toSign).digest('hex');
  return [...h, ['authorization', `AWS4-HMAC-SHA256 Credential=bench/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}`]];
}

interface Workload {
  name: string;
  op: string;
  body: Buffer;
  signed: boolean;
}
const NAMES: Record<string, string> = { Query: 'Query of 100', QueryPaged: 'Query of 100, more to read' };
const WORKLOADS: Workload[] = ['PutItem', 'GetItem', 'Query', 'QueryPaged'].flatMap((name) =>
  [false, true].map((signed) => {
    const body = Buffer.from(JSON.stringify(BODIES[name]));
    const op = name === 'QueryPaged' ? 'Query' : name;
    return { name: `${NAMES[name] ?? name}, ${signed ? 'signed' : 'unsigned'}`, op, body, signed };
  }),
);

/** A request as node:http gives it: headers (lower case), the raw list, and headersDistinct made from it when first read. */
function request(list: [string, string][]): Request {
  const rawHeaders = list.flat();
  const headers: Record<string, string> = {};
  for (const [k, v] of list) headers[k] = v;
  let distinct: Record<string, string[]> | undefined;
  return {
    method: 'POST',
    url: '/',
    headers,
    rawHeaders,
    get headersDistinct() {
      if (distinct === undefined) {
        distinct = {};
        for (let i = 0; i < rawHeaders.length; i += 2) (distinct[rawHeaders[i].toLowerCase()] ??= []).push(rawHeaders[i + 1]);
      }
      return distinct;
    },
  };
}

/** CPU µs per request of `w` on `ep`, over MS ms of requests one after another. */
async function measure(ep: Endpoint, w: Workload): Promise<number> {
  const list = headersOf(w.op, w.body, w.signed);
  const one = async () => {
    const res = new Answer();
    ep.send(res, 200, await ep.serve(request(list), w.body));
    if (res.bytes === 0) throw new Error(`${w.name}: no answer`);
  };
  await one(); // an error here (a refused signature, a changed endpoint) stops the bench
  const t0 = process.cpuUsage();
  const end = performance.now() + MS;
  let n = 0;
  while (performance.now() < end && n < REQUESTS_MAX) {
    await one();
    n++;
  }
  const t = process.cpuUsage(t0);
  return (t.user + t.system) / n;
}

async function main(): Promise<void> {
  const here = resolve(new URL('.', import.meta.url).pathname, '..');
  const builds: { name: string; unsigned: Endpoint; signed: Endpoint }[] = [];
  const add = async (name: string, root: string) => builds.push({ name, unsigned: await endpointOf(root, ''), signed: await endpointOf(root, SECRET) });
  if (opts.base !== undefined) await add('base', join(resolve(opts.base), 'dist'));
  await add('this', here);
  const results = WORKLOADS.map(() => builds.map(() => [] as number[]));
  // One unmeasured pass: V8 compiles each build's path before the rounds.
  for (const w of WORKLOADS) for (const b of builds) await measure(w.signed ? b.signed : b.unsigned, w);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [k, w] of WORKLOADS.entries()) {
      for (let j = 0; j < builds.length; j++) {
        const i = (j + round) % builds.length;
        const b = builds[i];
        const us = await measure(w.signed ? b.signed : b.unsigned, w);
        results[k][i].push(us);
        process.stderr.write(`round ${round + 1} ${w.name.padEnd(24)} ${b.name.padEnd(4)} ${us.toFixed(2)} µs/request\n`);
      }
    }
  }
  if (builds.length === 1) {
    console.log('| workload | µs of CPU per request (median of the rounds) |');
    console.log('|---|--:|');
    WORKLOADS.forEach((w, k) => console.log(`| ${w.name} | ${median(results[k][0]).toFixed(2)} |`));
    return;
  }
  console.log('| workload | base µs per request | this | this / base, median of the rounds\' ratios | rounds where this used less |');
  console.log('|---|--:|--:|--:|--:|');
  WORKLOADS.forEach((w, k) => {
    const [b, t] = results[k];
    const ratios = b.map((x, r) => t[r] / x);
    console.log(`| ${w.name} | ${median(b).toFixed(2)} | ${median(t).toFixed(2)} | ${median(ratios).toFixed(2)}x | ${ratios.filter((x) => x < 1).length} of ${ratios.length} |`);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

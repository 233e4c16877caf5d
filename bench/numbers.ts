// Microbenchmark of the Put/Get path's number handling, in one process: what a
// PutItem and a GetItem do to an item of numbers at the edges (DynamoDB's wire
// values in and out, the native check of an item, the key's encoding and
// slice hash, a condition and an ADD). Doubles must not get slower for the
// decimals beside them; decimals are measured too. Uses only functions that
// existed before decimals, so the same file compiled into an older dist/
// measures the older code:
//   node dist/bench/numbers.js [--rounds 5] [--ops 200000]
import { fromNativeItem, toNativeItem } from '../coordinator/dynamodb/attribute-values.js';
import { intArg, readCommandLine } from '../shared/cli-args.js';
import { applyUpdate, evaluate } from '../shared/expression-eval.js';
import { initHashing, keyHash } from '../shared/hashing.js';
import { encodeKeyPart, type KeyValue } from '../shared/key-encoding.js';
import { validateItem, type Item } from '../shared/values.js';

const opts = readCommandLine(process.argv.slice(2), { rounds: { type: 'string', default: '5' }, ops: { type: 'string', default: '200000' } }, 'usage: node dist/bench/numbers.js [--rounds 5] [--ops 200000]').values;
const ROUNDS = intArg('rounds', opts.rounds, 1, 100_000_000);
const OPS = intArg('ops', opts.ops, 1, 100_000_000);

const wireDoubles = { pk: { S: 'device-17' }, sk: { N: '1700000060' }, temp: { N: '21.5' }, count: { N: '42' }, ratio: { N: '0.1' }, big: { N: '9007199254740991' } };
const wireDecimals = { pk: { S: 'device-17' }, sk: { N: '1700000060' }, amount: { N: '12345678901234567890123456789.12345678' }, id: { N: '9007199254740993' } };

type Case = { name: string; run: (i: number) => unknown };

function cases(): Case[] {
  const nativeDoubles = toNativeItem(wireDoubles, 'Item');
  const nativeDecimals = (() => {
    try {
      return toNativeItem(wireDecimals, 'Item');
    } catch {
      return null; // the older code refuses numbers no double holds
    }
  })();
  const gt: Parameters<typeof evaluate>[0] = { k: 'cmp', op: '>', a: { k: 'path', path: ['temp'] }, b: { k: 'value', v: 20 } };
  const add: Parameters<typeof applyUpdate>[1] = [{ k: 'add', path: ['count'], n: 1 }];
  const all: Case[] = [
    { name: 'DynamoDB item in (doubles)', run: () => toNativeItem(wireDoubles, 'Item') },
    { name: 'DynamoDB item out (doubles)', run: () => fromNativeItem(nativeDoubles) },
    { name: 'native validateItem (doubles)', run: () => validateItem(nativeDoubles) },
    { name: 'number key part + slice hash', run: (i) => keyHash('number', i * 1.5) + encodeKeyPart('number', i).length },
    { name: 'condition temp > 20', run: () => evaluate(gt, nativeDoubles as Item) },
    { name: 'ADD count 1', run: () => applyUpdate(nativeDoubles as Item, add) },
  ];
  if (nativeDecimals !== null) {
    const d = nativeDecimals.amount as KeyValue;
    all.push(
      { name: 'DynamoDB item in (decimals)', run: () => toNativeItem(wireDecimals, 'Item') },
      { name: 'DynamoDB item out (decimals)', run: () => fromNativeItem(nativeDecimals) },
      { name: 'decimal key part + slice hash', run: () => keyHash('number', d) + encodeKeyPart('number', d).length },
    );
  }
  return all;
}

await initHashing();
const list = cases();
const best = new Map<string, number>();
for (let round = 0; round < ROUNDS; round++) {
  for (const c of list) {
    let sink = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < OPS; i++) if (c.run(i) !== undefined) sink++;
    const ns = Number(process.hrtime.bigint() - t0) / OPS;
    if (sink < 0) console.log(sink); // keeps the calls alive
    best.set(c.name, Math.min(best.get(c.name) ?? Infinity, ns));
  }
}
for (const [name, ns] of best) console.log(`${name.padEnd(34)} ${ns.toFixed(0).padStart(6)} ns/op (best of ${ROUNDS} rounds of ${OPS})`);

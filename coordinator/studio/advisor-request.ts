// The Advise operation's request, checked whole (a bad one changes nothing and
// costs nothing), then judged by the advisor over the cluster's own layout.
import type { AccessEntry, AdviceReport } from '../../shared/advice.js';
import { KeysliceError } from '../../shared/errors.js';
import { ADVISE_ACCESS_ENTRIES_MAX, ADVISE_ITEMS_MAX } from '../../shared/limits.js';
import { isPlainObject, validateItem, type Item } from '../../shared/values.js';
import type { Table } from '../metadata/catalog.js';
import { Advisor } from './advisor.js';
import { givenDesign } from './advisor-designs.js';
import type { Layout } from './advisor-simulation.js';

/** The largest table size the advisor projects to. */
const EXPECTED_ITEMS_MAX = 1e15;
const MOMENT_WRITES_MAX = 1_000_000;
/** The coordinator serves other requests between runs of this many items (a few ms each). */
const TURN_ITEMS = 256;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export async function adviseRequest(p: Record<string, unknown>, tableOf: (name: unknown) => Table, layout: Layout): Promise<AdviceReport> {
  const bySchema = p.shardingKey !== undefined;
  if (p.table !== undefined && bySchema) throw new KeysliceError('ValidationError', 'Advise takes a "table" or a design ("shardingKey", "sortingKey", "evenDistribution"), not both');
  if (p.table === undefined && !bySchema) throw new KeysliceError('ValidationError', 'Advise needs a "table" (its design is judged) or a "shardingKey" (and optionally "sortingKey", "evenDistribution")');
  if (!bySchema && (p.sortingKey !== undefined || p.evenDistribution !== undefined)) {
    throw new KeysliceError('ValidationError', '"sortingKey" and "evenDistribution" go with "shardingKey"; with "table" the table\'s design is judged');
  }
  const table = bySchema ? null : tableOf(p.table);
  const given = table === null ? givenDesign(p.shardingKey, p.sortingKey, p.evenDistribution) : givenDesign(table.shardingKey, table.sortingKey, table.evenDistribution);

  if (!Array.isArray(p.items) || p.items.length === 0) throw new KeysliceError('ValidationError', '"items" must be a list of sample items (at least one)');
  if (p.items.length > ADVISE_ITEMS_MAX) {
    throw new KeysliceError('LimitExceeded', `Advise takes at most ${ADVISE_ITEMS_MAX} sample items; got ${p.items.length} (keyslice advise --sharding ... judges larger samples on your machine)`);
  }
  p.items.forEach((item, i) => validateItem(item, `items[${i}]`));
  const log: AccessEntry[] = [];
  if (p.accessLog !== undefined) {
    if (!Array.isArray(p.accessLog)) throw new KeysliceError('ValidationError', '"accessLog" must be a list of {"op": "read" | "write", "key": {...}}');
    if (p.accessLog.length > ADVISE_ACCESS_ENTRIES_MAX) throw new KeysliceError('LimitExceeded', `Advise takes at most ${ADVISE_ACCESS_ENTRIES_MAX} access-log entries; got ${p.accessLog.length}`);
    p.accessLog.forEach((e, i) => {
      if (!isPlainObject(e) || (e.op !== 'read' && e.op !== 'write') || Object.keys(e).some((k) => k !== 'op' && k !== 'key')) {
        throw new KeysliceError('ValidationError', `accessLog[${i}] must be {"op": "read" | "write", "key": {...}}`);
      }
      validateItem(e.key, `accessLog[${i}].key`);
      log.push({ op: e.op, key: e.key as Item });
    });
  }
  const expectedItems = optionalNumber(p.expectedItems, 'expectedItems', 1, EXPECTED_ITEMS_MAX);
  const momentWrites = optionalNumber(p.momentWrites, 'momentWrites', 1, MOMENT_WRITES_MAX);

  const advisor = new Advisor(given, { layout, expectedItems, momentWrites });
  const items = p.items as Item[];
  for (let i = 0; i < items.length; i++) {
    advisor.addItem(items[i]);
    if ((i + 1) % TURN_ITEMS === 0) await nextTurn();
  }
  for (let i = 0; i < log.length; i++) {
    advisor.addAccess(log[i]);
    if ((i + 1) % TURN_ITEMS === 0) await nextTurn();
  }
  return advisor.report();
}

function optionalNumber(v: unknown, field: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) throw new KeysliceError('ValidationError', `"${field}" must be a whole number from ${min} to ${max}`);
  return v as number;
}

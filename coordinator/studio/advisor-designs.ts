// The designs the advisor compares: the one given, and its alternatives: the
// key order swapped, even distribution over 4, 16 and 64 buckets, and a
// sharding key with one more column where the sample has an attribute that
// could be one. Each design is a table shape checked as CreateTable checks it
// (coordinator/catalog.ts), so the simulation places items with the cluster's code.
import type { EvenDistribution, KeySchema } from '../../shared/api.js';
import type { DesignOrigin } from '../../shared/advice.js';
import { KeysliceError } from '../../shared/errors.js';
import {
  ADVISOR_BUCKET_CHOICES,
  ADVISOR_CANDIDATE_COLUMNS_MAX,
  ADVISOR_CANDIDATE_VALUE_BYTES_MAX,
  SHARDING_KEY_COLUMNS_MAX,
} from '../../shared/limits.js';
import type { Item } from '../../shared/values.js';
import { tableShape, type Table } from '../metadata/catalog.js';

export interface Design {
  id: string;
  label: string;
  origin: DesignOrigin;
  table: Table;
}

export function designLabel(sharding: readonly KeySchema[], sorting: readonly KeySchema[], even: EvenDistribution | null): string {
  const names = (cs: readonly KeySchema[]) => cs.map((c) => c.name).join('+');
  return `${names(sharding)}${sorting.length > 0 ? ` / ${names(sorting)}` : ''}${even ? `, even ${even.buckets}` : ''}`;
}

function design(id: string, origin: DesignOrigin, sharding: KeySchema[], sorting: KeySchema[], even: EvenDistribution | null): Design {
  const table = tableShape(`advice-${id}`, sharding, sorting.length === 0 ? null : sorting, even);
  return { id, origin, label: designLabel(table.sharding, table.sorting, even), table };
}

/** The design as given: its columns and even distribution, checked (a bad one is a ValidationError). */
export function givenDesign(shardingKey: unknown, sortingKey: unknown, evenDistribution: unknown): Design {
  const table = tableShape('advice-given', shardingKey, sortingKey, evenDistribution);
  return { id: 'given', origin: 'given', label: designLabel(table.sharding, table.sorting, table.evenDistribution), table };
}

/** The alternatives that do not depend on the sample: swapped order and bucket counts. */
export function fixedAlternatives(given: Design): Design[] {
  const { sharding, sorting, evenDistribution } = given.table;
  const out: Design[] = [];
  if (sorting.length > 0 && sorting.length <= SHARDING_KEY_COLUMNS_MAX) out.push(design('swapped', 'swapped', sorting, sharding, null));
  if (sorting.length > 0) {
    if (evenDistribution !== null) out.push(design('even-off', 'even', sharding, sorting, null));
    for (const buckets of ADVISOR_BUCKET_CHOICES) {
      if (buckets !== evenDistribution?.buckets) out.push(design(`even-${buckets}`, 'even', sharding, sorting, { buckets }));
    }
  }
  return out;
}

/** Designs with one more sharding column, taken from the attributes of the sample's
 * first item: scalar (string or number), short enough to be a key, not already a
 * sharding column. A sorting column qualifies only if the sorting key keeps another. */
export function multiColumnCandidates(given: Design, first: Item): Design[] {
  const { sharding, sorting, evenDistribution } = given.table;
  if (sharding.length >= SHARDING_KEY_COLUMNS_MAX) return [];
  const out: Design[] = [];
  for (const [name, value] of Object.entries(first)) {
    if (out.length >= ADVISOR_CANDIDATE_COLUMNS_MAX) break;
    if (sharding.some((c) => c.name === name)) continue;
    const inSorting = sorting.some((c) => c.name === name);
    if (inSorting && sorting.length < 2) continue;
    let type: KeySchema['type'];
    if (typeof value === 'number' && Number.isFinite(value)) type = 'number';
    else if (typeof value === 'string' && value.length > 0 && Buffer.byteLength(value) <= ADVISOR_CANDIDATE_VALUE_BYTES_MAX) type = 'string';
    else continue;
    const column = inSorting ? sorting.find((c) => c.name === name)! : { name, type };
    try {
      out.push(design(`multi-column-${name}`, 'multi-column', [...sharding, column], sorting.filter((c) => c.name !== name), evenDistribution));
    } catch (err) {
      // A column the schema rules refuse (a reserved name, say) is simply no candidate.
      if (!(err instanceof KeysliceError)) throw err;
    }
  }
  return out;
}

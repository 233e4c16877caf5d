// ConsumedCapacity, computed by DynamoDB's rules from DynamoDB's item sizes
// (attribute-values.ts itemSize): a read takes one unit per 4 KB (rounded up,
// at least one; half as much when eventually consistent), a Query or Scan
// rounds the total of the items it examined, a write takes one unit per 1 KB
// of the larger of the item before and after (at least one). keyslice does not
// bill, and provisioned throughput is not enforced: these figures are what the
// same requests would consume on DynamoDB.
import { DYNAMODB_READ_UNIT_BYTES, DYNAMODB_WRITE_UNIT_BYTES } from '../../shared/limits.js';

export type CapacityMode = 'NONE' | 'TOTAL' | 'INDEXES';
export const CAPACITY_MODES: readonly CapacityMode[] = ['INDEXES', 'TOTAL', 'NONE'];

export function readUnits(bytes: number, consistent: boolean): number {
  const units = Math.max(1, Math.ceil(bytes / DYNAMODB_READ_UNIT_BYTES));
  return consistent ? units : units / 2;
}

export function writeUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / DYNAMODB_WRITE_UNIT_BYTES));
}

/** The ConsumedCapacity of one table, or undefined when the request did not ask for it. `unitsOf` is
 * called only when it did: the units need DynamoDB's size of every item read or written (a walk of
 * each attribute, a number's significant digits), which most requests never ask for. */
export function consumedCapacity(mode: CapacityMode, table: string, unitsOf: () => { read?: number; write?: number }): Record<string, unknown> | undefined {
  if (mode === 'NONE') return undefined;
  const units = unitsOf();
  const total = (units.read ?? 0) + (units.write ?? 0);
  const parts: Record<string, number> = { CapacityUnits: total };
  if (units.read !== undefined) parts.ReadCapacityUnits = units.read;
  if (units.write !== undefined) parts.WriteCapacityUnits = units.write;
  return mode === 'INDEXES' ? { TableName: table, ...parts, Table: { ...parts } } : { TableName: table, ...parts };
}

/** Units per table over a batch, as the list DynamoDB answers. */
export class CapacityTally {
  private readonly tables = new Map<string, { read?: number; write?: number }>();

  constructor(private readonly mode: CapacityMode) {}

  add(table: string, kind: 'read' | 'write', units: number): void {
    const t = this.tables.get(table) ?? {};
    t[kind] = (t[kind] ?? 0) + units;
    this.tables.set(table, t);
  }

  /** Tables that consumed nothing still appear (with 0) when they were named in the request. */
  touch(table: string, kind: 'read' | 'write'): void {
    const t = this.tables.get(table) ?? {};
    t[kind] ??= 0;
    this.tables.set(table, t);
  }

  list(): Record<string, unknown>[] | undefined {
    if (this.mode === 'NONE') return undefined;
    return [...this.tables].map(([table, units]) => consumedCapacity(this.mode, table, () => units)!);
  }
}

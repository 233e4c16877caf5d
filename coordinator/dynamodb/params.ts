// Reading a DynamoDB request's top-level parameters as DynamoDB does: a value of
// the wrong JSON type is a SerializationException; a value that breaks a
// constraint (length, range, enum, required) is collected, and all of them are
// reported together as one ValidationException ("2 validation errors detected:
// Value ... at 'tableName' failed to satisfy constraint: ...; ..."). Unknown
// parameters are ignored, as DynamoDB ignores them.
import { TABLE_NAME_CHARS_MAX, TABLE_NAME_CHARS_MIN } from '../../shared/limits.js';
import { isPlainObject } from '../../shared/values.js';
import { jsonType } from './attribute-values.js';
import { DynamoDbError } from './errors.js';

const TABLE_NAME_PATTERN = /^[a-zA-Z0-9_.-]+$/;

/** DynamoDB names a parameter in its messages in lower camel case: TableName is 'tableName'. */
function memberName(field: string): string {
  return field.charAt(0).toLowerCase() + field.slice(1);
}

function shown(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return `'${v}'`;
  return `'${JSON.stringify(v)}'`;
}

export class Params {
  private readonly violations: string[] = [];

  constructor(readonly body: Record<string, unknown>) {}

  has(field: string): boolean {
    return this.body[field] !== undefined && this.body[field] !== null;
  }

  /** Records a broken constraint; check() reports all of them. */
  violation(value: unknown, member: string, constraint: string): void {
    this.violations.push(`Value ${shown(value)} at '${member}' failed to satisfy constraint: ${constraint}`);
  }

  /** Throws the collected violations as one ValidationException. */
  check(): void {
    const n = this.violations.length;
    if (n === 0) return;
    throw DynamoDbError.validation(`${n} validation error${n === 1 ? '' : 's'} detected: ${this.violations.join('; ')}`);
  }

  private typed<T>(field: string, ok: (v: unknown) => boolean, typeName: string): T | undefined {
    const v = this.body[field];
    if (v === undefined || v === null) return undefined;
    if (!ok(v)) throw DynamoDbError.serialization(`${jsonType(v)} cannot be converted to ${typeName} (parameter ${field})`);
    return v as T;
  }

  string(field: string): string | undefined {
    return this.typed<string>(field, (v) => typeof v === 'string', 'String');
  }

  bool(field: string): boolean | undefined {
    return this.typed<boolean>(field, (v) => typeof v === 'boolean', 'Boolean');
  }

  map(field: string): Record<string, unknown> | undefined {
    return this.typed<Record<string, unknown>>(field, isPlainObject, 'a Map');
  }

  list(field: string): unknown[] | undefined {
    return this.typed<unknown[]>(field, Array.isArray, 'a List');
  }

  /** A whole number within [min, max]; out of range is a violation. */
  int(field: string, min: number, max: number): number | undefined {
    const v = this.typed<number>(field, (x) => typeof x === 'number' && Number.isInteger(x), 'Integer');
    if (v === undefined) return undefined;
    if (v < min) this.violation(v, memberName(field), `Member must have value greater than or equal to ${min}`);
    else if (v > max) this.violation(v, memberName(field), `Member must have value less than or equal to ${max}`);
    return v;
  }

  /** One of `values`; anything else is a violation (and undefined is returned). */
  enumOf<T extends string>(field: string, values: readonly T[]): T | undefined {
    const v = this.string(field);
    if (v === undefined) return undefined;
    if (!values.includes(v as T)) {
      this.violation(v, memberName(field), `Member must satisfy enum value set: [${values.join(', ')}]`);
      return undefined;
    }
    return v as T;
  }

  /** A table name: required, TABLE_NAME_CHARS_MIN to TABLE_NAME_CHARS_MAX characters of [a-zA-Z0-9_.-] (DynamoDB's bounds and keyslice's are one). */
  tableName(field = 'TableName'): string {
    const v = this.string(field);
    checkTableName(v, memberName(field), (value, member, constraint) => this.violation(value, member, constraint));
    return v ?? '';
  }

  /** A required parameter of any type. */
  required(field: string): void {
    if (!this.has(field)) this.violation(null, memberName(field), 'Member must not be null');
  }
}

/** DynamoDB's constraints on a table name, reported through `violation`. */
export function checkTableName(v: string | undefined, member: string, violation: (value: unknown, member: string, constraint: string) => void): void {
  if (v === undefined) return violation(null, member, 'Member must not be null');
  if (v.length < TABLE_NAME_CHARS_MIN) violation(v, member, `Member must have length greater than or equal to ${TABLE_NAME_CHARS_MIN}`);
  if (v.length > TABLE_NAME_CHARS_MAX) violation(v, member, `Member must have length less than or equal to ${TABLE_NAME_CHARS_MAX}`);
  if (!TABLE_NAME_PATTERN.test(v)) violation(v, member, 'Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+');
}

// Table operations: CreateTable, DescribeTable, ListTables, DeleteTable,
// UpdateTable, tags, and the few describe calls tools make on start-up. A
// DynamoDB table is a native table: HASH is its sharding key, RANGE its sorting
// key; the tag keyslice:evenDistributionBuckets at creation turns on even
// distribution. Settings DynamoDB has and the catalog does not live in
// table-settings.ts.
import { createHash } from 'node:crypto';
import type { TableDescription, TableLoad } from '../../shared/api.js';
import { KeysliceError } from '../../shared/errors.js';
import { DYNAMODB_LIST_TABLES_LIMIT_MAX, EVEN_DISTRIBUTION_BUCKETS_MAX, TAG_KEY_CHARS_MAX, TAG_VALUE_CHARS_MAX } from '../../shared/limits.js';
import { isPlainObject } from '../../shared/values.js';
import { ACCOUNT_ID, type Context, type Handler } from './context.js';
import { DynamoDbError } from './errors.js';
import { nativeKeySchema, schemaOf, tableSchema, type KeyAttribute, type TableSchema } from './key-schema.js';
import { checkTableName, type Params } from './params.js';
import type { Tag, TableSettings } from './table-settings.js';
import { defaultSettings } from './table-settings.js';

/** The tag that asks for even distribution at CreateTable: its value is the bucket count. */
export const EVEN_DISTRIBUTION_TAG = 'keyslice:evenDistributionBuckets';
const TABLE_ARN = /^arn:aws[a-z-]*:dynamodb:[^:]*:[^:]*:table\/([a-zA-Z0-9_.-]{3,255})$/;
const SCALAR_TYPES = ['S', 'N', 'B'] as const;

function notFound(name: string): DynamoDbError {
  return new DynamoDbError('ResourceNotFoundException', `Requested resource not found: Table: ${name} not found`);
}

async function describeNative(ctx: Context, name: string): Promise<TableDescription> {
  try {
    return ((await ctx.ops.execute('DescribeTable', { table: name })) as { table: TableDescription }).table;
  } catch (err) {
    if (err instanceof KeysliceError && err.code === 'TableNotFound') throw notFound(name);
    throw err;
  }
}

function tableArn(ctx: Context, name: string): string {
  return `arn:aws:dynamodb:${ctx.region}:${ACCOUNT_ID}:table/${name}`;
}

/** A stable id per table incarnation, shaped like DynamoDB's TableId (a UUID). */
function tableId(schema: TableSchema): string {
  const h = createHash('sha256').update(`${schema.name}\u0000${schema.createdAt}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Items and bytes from the slice nodes; 0 when some node cannot say (DynamoDB's figures are approximate too). */
async function itemCount(ctx: Context, name: string): Promise<{ items: number; bytes: number }> {
  try {
    const load = (await ctx.ops.execute('DescribeSlices', { table: name })) as TableLoad;
    if (!load.complete) return { items: 0, bytes: 0 };
    let items = 0;
    let bytes = 0;
    for (const s of load.slices) {
      items += s.items;
      bytes += s.bytes;
    }
    return { items, bytes };
  } catch {
    return { items: 0, bytes: 0 };
  }
}

const seconds = (ms: number) => ms / 1000;

/** DynamoDB's TableDescription of a table. */
async function tableDescription(ctx: Context, schema: TableSchema, status: 'ACTIVE' | 'DELETING', counts = true): Promise<Record<string, unknown>> {
  const s = ctx.settings.get(schema.name, schema.createdAt);
  const keys: KeyAttribute[] = schema.range === null ? [schema.hash] : [schema.hash, schema.range];
  const { items, bytes } = counts ? await itemCount(ctx, schema.name) : { items: 0, bytes: 0 };
  const throughput: Record<string, unknown> = {
    NumberOfDecreasesToday: s.decreasesToday,
    ReadCapacityUnits: s.readCapacityUnits,
    WriteCapacityUnits: s.writeCapacityUnits,
  };
  if (s.lastIncreaseAt !== null) throughput.LastIncreaseDateTime = seconds(s.lastIncreaseAt);
  if (s.lastDecreaseAt !== null) throughput.LastDecreaseDateTime = seconds(s.lastDecreaseAt);
  const d: Record<string, unknown> = {
    AttributeDefinitions: keys.map((k) => ({ AttributeName: k.name, AttributeType: k.type })),
    TableName: schema.name,
    KeySchema: keys.map((k, i) => ({ AttributeName: k.name, KeyType: i === 0 ? 'HASH' : 'RANGE' })),
    TableStatus: status,
    CreationDateTime: seconds(schema.createdAt),
    ProvisionedThroughput: throughput,
    TableSizeBytes: bytes,
    ItemCount: items,
    TableArn: tableArn(ctx, schema.name),
    TableId: tableId(schema),
    DeletionProtectionEnabled: s.deletionProtection,
  };
  if (s.billingMode === 'PAY_PER_REQUEST') d.BillingModeSummary = { BillingMode: 'PAY_PER_REQUEST', LastUpdateToPayPerRequestDateTime: seconds(schema.createdAt) };
  if (s.tableClass !== 'STANDARD') d.TableClassSummary = { TableClass: s.tableClass };
  return d;
}

// ---- throughput and tags -----------------------------------------------------------

function throughputOf(p: Params): { read: number; write: number } | null {
  const t = p.map('ProvisionedThroughput');
  if (t === undefined) return null;
  const read = t.ReadCapacityUnits;
  const write = t.WriteCapacityUnits;
  for (const [v, member] of [
    [read, 'provisionedThroughput.readCapacityUnits'],
    [write, 'provisionedThroughput.writeCapacityUnits'],
  ] as const) {
    if (v === undefined || v === null) p.violation(null, member, 'Member must not be null');
    else if (typeof v !== 'number' || !Number.isInteger(v)) throw DynamoDbError.serialization(`${member} must be a whole number`);
    else if (v < 1) p.violation(v, member, 'Member must have value greater than or equal to 1');
  }
  return { read: read as number, write: write as number };
}

function tagsOf(v: unknown, field: string): Tag[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw DynamoDbError.serialization(`${field} must be a list of {Key, Value}`);
  return v.map((t, i) => {
    if (!isPlainObject(t) || typeof t.Key !== 'string' || typeof t.Value !== 'string') {
      throw DynamoDbError.serialization(`${field}[${i}] must be {"Key": string, "Value": string}`);
    }
    if (t.Key.length < 1 || t.Key.length > TAG_KEY_CHARS_MAX) throw DynamoDbError.validation(`1 validation error detected: Value '${t.Key}' at 'tags.${i + 1}.member.key' failed to satisfy constraint: Member must have length between 1 and ${TAG_KEY_CHARS_MAX}`);
    if (t.Value.length > TAG_VALUE_CHARS_MAX) throw DynamoDbError.validation(`1 validation error detected: Value '${t.Value}' at 'tags.${i + 1}.member.value' failed to satisfy constraint: Member must have length less than or equal to ${TAG_VALUE_CHARS_MAX}`);
    return { Key: t.Key, Value: t.Value };
  });
}

function mergeTags(old: Tag[], added: Tag[]): Tag[] {
  const byKey = new Map(old.map((t) => [t.Key, t.Value]));
  for (const t of added) byKey.set(t.Key, t.Value);
  return [...byKey].map(([Key, Value]) => ({ Key, Value }));
}

function evenDistributionOf(tags: Tag[]): { buckets: number } | null {
  const tag = tags.find((t) => t.Key === EVEN_DISTRIBUTION_TAG);
  if (tag === undefined) return null;
  const n = Number(tag.Value);
  if (!/^\d+$/.test(tag.Value) || n < 1 || n > EVEN_DISTRIBUTION_BUCKETS_MAX) {
    throw DynamoDbError.validation(`The tag ${EVEN_DISTRIBUTION_TAG} takes a whole number of buckets from 1 to ${EVEN_DISTRIBUTION_BUCKETS_MAX}; got ${JSON.stringify(tag.Value)}`);
  }
  return { buckets: n };
}

/** Features DynamoDB has and keyslice does not (yet): refused, not silently dropped. */
function refuseUnsupported(p: Params, fields: readonly string[]): void {
  for (const f of fields) {
    const v = p.body[f];
    if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) continue;
    if (f === 'StreamSpecification' && isPlainObject(v) && v.StreamEnabled === false) continue;
    const what: Record<string, string> = {
      GlobalSecondaryIndexes: 'secondary indexes',
      LocalSecondaryIndexes: 'secondary indexes',
      GlobalSecondaryIndexUpdates: 'secondary indexes',
      StreamSpecification: 'DynamoDB Streams',
      ReplicaUpdates: 'global tables (replicas)',
    };
    throw DynamoDbError.validation(`keyslice does not support ${what[f] ?? f} yet (${f}); see docs/dynamodb.md`);
  }
}

// ---- operations -----------------------------------------------------------------

export const CreateTable: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.required('KeySchema');
  p.required('AttributeDefinitions');
  const keySchema = p.list('KeySchema') ?? [];
  const definitions = p.list('AttributeDefinitions') ?? [];
  if (p.has('KeySchema') && keySchema.length < 1) p.violation('[]', 'keySchema', 'Member must have length greater than or equal to 1');
  if (keySchema.length > 2) p.violation(JSON.stringify(keySchema), 'keySchema', 'Member must have length less than or equal to 2');
  const billingMode = p.enumOf('BillingMode', ['PROVISIONED', 'PAY_PER_REQUEST']) ?? 'PROVISIONED';
  const tableClass = p.enumOf('TableClass', ['STANDARD', 'STANDARD_INFREQUENT_ACCESS']) ?? 'STANDARD';
  const deletionProtection = p.bool('DeletionProtectionEnabled') ?? false;
  const throughput = throughputOf(p);
  const types = new Map<string, 'S' | 'N' | 'B'>();
  definitions.forEach((d, i) => {
    if (!isPlainObject(d) || typeof d.AttributeName !== 'string') throw DynamoDbError.serialization(`AttributeDefinitions[${i}] must be {"AttributeName", "AttributeType"}`);
    if (!SCALAR_TYPES.includes(d.AttributeType as never)) {
      p.violation(d.AttributeType, `attributeDefinitions.${i + 1}.member.attributeType`, `Member must satisfy enum value set: [${SCALAR_TYPES.join(', ')}]`);
    }
    if (types.has(d.AttributeName)) throw DynamoDbError.validation('Cannot have two attributes with the same name');
    types.set(d.AttributeName, d.AttributeType as 'S' | 'N' | 'B');
  });
  const keys = keySchema.map((k, i) => {
    if (!isPlainObject(k) || typeof k.AttributeName !== 'string') throw DynamoDbError.serialization(`KeySchema[${i}] must be {"AttributeName", "KeyType"}`);
    if (k.KeyType !== 'HASH' && k.KeyType !== 'RANGE') p.violation(k.KeyType, `keySchema.${i + 1}.member.keyType`, 'Member must satisfy enum value set: [HASH, RANGE]');
    if (k.AttributeName.length < 1 || k.AttributeName.length > 255) {
      p.violation(k.AttributeName, `keySchema.${i + 1}.member.attributeName`, 'Member must have length between 1 and 255');
    }
    return { name: k.AttributeName, keyType: k.KeyType };
  });
  p.check();
  refuseUnsupported(p, ['GlobalSecondaryIndexes', 'LocalSecondaryIndexes', 'StreamSpecification']);
  if (keys[0].keyType !== 'HASH') throw DynamoDbError.validation('Invalid KeySchema: The first KeySchemaElement is not a HASH key type');
  if (keys.length === 2 && keys[1].keyType !== 'RANGE') throw DynamoDbError.validation('Invalid KeySchema: The second KeySchemaElement is not a RANGE key type');
  if (keys.length === 2 && keys[0].name === keys[1].name) throw DynamoDbError.validation('Both the Hash Key and the Range Key element in the KeySchema have the same name');
  const undefinedKeys = keys.filter((k) => !types.has(k.name)).map((k) => k.name);
  if (undefinedKeys.length > 0) {
    throw DynamoDbError.validation(
      `One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [${undefinedKeys.join(', ')}], AttributeDefinitions: [${[...types.keys()].join(', ')}]`,
    );
  }
  if (types.size !== keys.length) {
    throw DynamoDbError.validation('One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions');
  }
  if (billingMode === 'PROVISIONED' && throughput === null) {
    throw DynamoDbError.validation('One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED');
  }
  if (billingMode === 'PAY_PER_REQUEST' && throughput !== null) {
    throw DynamoDbError.validation('One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST');
  }
  const tags = tagsOf(p.body.Tags, 'Tags');
  const even = evenDistributionOf(tags);
  const hash: KeyAttribute = { name: keys[0].name, type: types.get(keys[0].name)! };
  const range: KeyAttribute | null = keys.length === 2 ? { name: keys[1].name, type: types.get(keys[1].name)! } : null;
  if (even !== null && (hash.type !== 'S' || range === null)) {
    throw DynamoDbError.validation(`The tag ${EVEN_DISTRIBUTION_TAG} needs a string (S) partition key and a sort key: the bucket is appended to the partition key and computed from the sort key`);
  }
  let created: TableDescription;
  try {
    created = (
      (await ctx.ops.execute('CreateTable', {
        table: name,
        shardingKey: nativeKeySchema(hash),
        sortingKey: range === null ? null : nativeKeySchema(range),
        evenDistribution: even,
      })) as { table: TableDescription }
    ).table;
  } catch (err) {
    if (err instanceof KeysliceError && err.code === 'TableExists') throw new DynamoDbError('ResourceInUseException', `Table already exists: ${name}`);
    throw err;
  }
  const settings: TableSettings = {
    ...defaultSettings(created.createdAt),
    billingMode,
    readCapacityUnits: throughput?.read ?? 0,
    writeCapacityUnits: throughput?.write ?? 0,
    tableClass,
    deletionProtection,
    tags,
  };
  ctx.settings.set(name, settings);
  return { TableDescription: await tableDescription(ctx, schemaOf(created), 'ACTIVE', false) };
};

export const DescribeTable: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.check();
  return { Table: await tableDescription(ctx, schemaOf(await describeNative(ctx, name)), 'ACTIVE') };
};

export const ListTables: Handler = async (ctx, p) => {
  const start = p.string('ExclusiveStartTableName');
  if (start !== undefined) {
    checkTableName(start, 'exclusiveStartTableName', (v, m, c) => p.violation(v, m, c));
  }
  const limit = p.int('Limit', 1, DYNAMODB_LIST_TABLES_LIMIT_MAX) ?? DYNAMODB_LIST_TABLES_LIMIT_MAX;
  p.check();
  const { tables } = (await ctx.ops.execute('ListTables', {})) as { tables: string[] };
  const after = start === undefined ? tables : tables.filter((t) => t > start);
  const page = after.slice(0, limit);
  const out: Record<string, unknown> = { TableNames: page };
  if (after.length > limit) out.LastEvaluatedTableName = page[page.length - 1];
  return out;
};

export const DeleteTable: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.check();
  const schema = schemaOf(await describeNative(ctx, name));
  if (ctx.settings.get(name, schema.createdAt).deletionProtection) {
    throw DynamoDbError.validation('Resource cannot be deleted as it is currently protected against deletion. Disable deletion protection first.');
  }
  const description = await tableDescription(ctx, schema, 'DELETING');
  try {
    await ctx.ops.execute('DeleteTable', { table: name });
  } catch (err) {
    if (err instanceof KeysliceError && err.code === 'TableNotFound') throw notFound(name);
    throw err;
  }
  ctx.settings.delete(name);
  return { TableDescription: description };
};

export const UpdateTable: Handler = async (ctx, p) => {
  const name = p.tableName();
  const billingMode = p.enumOf('BillingMode', ['PROVISIONED', 'PAY_PER_REQUEST']);
  const tableClass = p.enumOf('TableClass', ['STANDARD', 'STANDARD_INFREQUENT_ACCESS']);
  const deletionProtection = p.bool('DeletionProtectionEnabled');
  const throughput = throughputOf(p);
  p.check();
  refuseUnsupported(p, ['GlobalSecondaryIndexUpdates', 'StreamSpecification', 'ReplicaUpdates']);
  if (billingMode === undefined && throughput === null && tableClass === undefined && deletionProtection === undefined && !p.has('SSESpecification')) {
    throw DynamoDbError.validation(
      'At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required',
    );
  }
  const schema = await tableSchema(ctx.ops, name).catch((err) => {
    throw err instanceof DynamoDbError && err.exception === 'ResourceNotFoundException' ? notFound(name) : err;
  });
  const old = ctx.settings.get(name, schema.createdAt);
  const next: TableSettings = { ...old, tags: old.tags };
  const mode = billingMode ?? old.billingMode;
  if (mode === 'PAY_PER_REQUEST' && throughput !== null) {
    throw DynamoDbError.validation('One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST');
  }
  if (mode === 'PROVISIONED' && old.billingMode === 'PAY_PER_REQUEST' && throughput === null) {
    throw DynamoDbError.validation('One or more parameter values were invalid: ProvisionedThroughput must be specified when BillingMode is PROVISIONED');
  }
  next.billingMode = mode;
  if (mode === 'PAY_PER_REQUEST') {
    next.readCapacityUnits = 0;
    next.writeCapacityUnits = 0;
  }
  if (throughput !== null) {
    if (old.billingMode === 'PROVISIONED' && throughput.read === old.readCapacityUnits && throughput.write === old.writeCapacityUnits && billingMode === undefined) {
      throw DynamoDbError.validation(
        `The provisioned throughput for the table will not change. The requested value equals the current value. Current ReadCapacityUnits provisioned for the table: ${old.readCapacityUnits}. Requested ReadCapacityUnits: ${throughput.read}. Current WriteCapacityUnits provisioned for the table: ${old.writeCapacityUnits}. Requested WriteCapacityUnits: ${throughput.write}. Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.`,
      );
    }
    const now = Date.now();
    if (throughput.read > old.readCapacityUnits || throughput.write > old.writeCapacityUnits) next.lastIncreaseAt = now;
    if (throughput.read < old.readCapacityUnits || throughput.write < old.writeCapacityUnits) {
      const sameDay = old.lastDecreaseAt !== null && new Date(old.lastDecreaseAt).toISOString().slice(0, 10) === new Date(now).toISOString().slice(0, 10);
      next.decreasesToday = sameDay ? old.decreasesToday + 1 : 1;
      next.lastDecreaseAt = now;
    }
    next.readCapacityUnits = throughput.read;
    next.writeCapacityUnits = throughput.write;
  }
  if (tableClass !== undefined) next.tableClass = tableClass;
  if (deletionProtection !== undefined) next.deletionProtection = deletionProtection;
  ctx.settings.set(name, next);
  return { TableDescription: await tableDescription(ctx, schema, 'ACTIVE') };
};

/** The table named by a ResourceArn. */
async function tableOfArn(ctx: Context, p: Params): Promise<TableSchema> {
  const arn = p.string('ResourceArn');
  if (arn === undefined) p.violation(null, 'resourceArn', 'Member must not be null');
  p.check();
  const m = TABLE_ARN.exec(arn!);
  if (m === null) throw DynamoDbError.validation(`Invalid TableArn: Invalid ResourceArn provided as input ${arn}`);
  const schema = await tableSchema(ctx.ops, m[1]).catch(() => {
    throw new DynamoDbError('ResourceNotFoundException', `Requested resource not found: ResourcArn: ${arn} not found`);
  });
  return schema;
}

export const TagResource: Handler = async (ctx, p) => {
  const schema = await tableOfArn(ctx, p);
  const tags = tagsOf(p.body.Tags, 'Tags');
  if (tags.some((t) => t.Key === EVEN_DISTRIBUTION_TAG)) {
    throw DynamoDbError.validation(`The tag ${EVEN_DISTRIBUTION_TAG} can only be given to CreateTable: even distribution is chosen when the table is created`);
  }
  const s = ctx.settings.get(schema.name, schema.createdAt);
  ctx.settings.set(schema.name, { ...s, tags: mergeTags(s.tags, tags) });
  return {};
};

export const UntagResource: Handler = async (ctx, p) => {
  const schema = await tableOfArn(ctx, p);
  const keys = p.list('TagKeys') ?? [];
  if (keys.includes(EVEN_DISTRIBUTION_TAG)) throw DynamoDbError.validation(`The tag ${EVEN_DISTRIBUTION_TAG} cannot be removed: even distribution stays for the life of the table`);
  const s = ctx.settings.get(schema.name, schema.createdAt);
  ctx.settings.set(schema.name, { ...s, tags: s.tags.filter((t) => !keys.includes(t.Key)) });
  return {};
};

export const ListTagsOfResource: Handler = async (ctx, p) => {
  const schema = await tableOfArn(ctx, p);
  return { Tags: ctx.settings.get(schema.name, schema.createdAt).tags };
};

export const DescribeTimeToLive: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.check();
  await describeNative(ctx, name);
  return { TimeToLiveDescription: { TimeToLiveStatus: 'DISABLED' } };
};

export const DescribeContinuousBackups: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.check();
  await describeNative(ctx, name);
  return { ContinuousBackupsDescription: { ContinuousBackupsStatus: 'DISABLED', PointInTimeRecoveryDescription: { PointInTimeRecoveryStatus: 'DISABLED' } } };
};

export const DescribeLimits: Handler = async () => ({
  AccountMaxReadCapacityUnits: 80000,
  AccountMaxWriteCapacityUnits: 80000,
  TableMaxReadCapacityUnits: 40000,
  TableMaxWriteCapacityUnits: 40000,
});

export const DescribeEndpoints: Handler = async (ctx) => ({ Endpoints: [{ Address: ctx.host, CachePeriodInMinutes: 1440 }] });

/** keyslice's own target (Keyslice.DescribeSlices): where the table's items live and how busy each slice is. */
export const DescribeSlices: Handler = async (ctx, p) => {
  const name = p.tableName();
  p.check();
  await describeNative(ctx, name);
  return (await ctx.ops.execute('DescribeSlices', { table: name })) as Record<string, unknown>;
};

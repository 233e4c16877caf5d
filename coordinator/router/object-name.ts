// The object name of an item (`__name`): its key values as text, and back.
//
// One column on each side keeps the v3io form: `<sharding>` or
// `<sharding>.<sorting>`, split at the first period, so a sharding value of a
// table with a sorting key may not contain a period. With several columns on
// either side, the name is every key column's text (sharding columns, then
// sorting columns) joined by periods, and in every column but the last, '%'
// is written %25 and '.' %2E: the first n-1 periods are the separators and the
// last column is taken as it is, as the v3io form takes its sorting value.
// Values are never restricted by the name there. Spec: docs/key-encoding.md.
import type { KeySchema } from '../../shared/api.js';
import { decimalLimitError, isDecimal, numberValueOf, parseDecimal } from '../../shared/decimal.js';
import { KeysliceError } from '../../shared/errors.js';
import type { KeyValue } from '../../shared/key-encoding.js';
import type { Table } from '../metadata/catalog.js';

const NUMBER_TEXT = /^-?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether the table names its items in the v3io form (one column on each side). */
export function isV3ioForm(table: Table): boolean {
  return table.sharding.length === 1 && table.sorting.length <= 1;
}

export function keyValueText(column: KeySchema, value: KeyValue): string {
  if (column.type === 'binary') return Buffer.from(value as Uint8Array).toString('base64');
  return isDecimal(value) ? value.$N : String(value);
}

function escapeColumn(text: string): string {
  return text.replace(/%/g, '%25').replace(/\./g, '%2E');
}

function unescapeColumn(text: string, column: KeySchema, name: string): string {
  return text.replace(/%(25|2[Ee])?/g, (_m, code: string | undefined) => {
    if (code === undefined) {
      throw new KeysliceError('InvalidKey', `object name ${JSON.stringify(name)}: in column "${column.name}", a '%' must be written %25 (and a '.' %2E) in every column but the last`);
    }
    return code === '25' ? '%' : '.';
  });
}

/** Texts of the given columns joined by periods, each escaped unless it is the name's last column. */
export function columnsText(columns: readonly KeySchema[], values: readonly KeyValue[], lastIsRaw: boolean): string {
  return columns.map((c, i) => (lastIsRaw && i === columns.length - 1 ? keyValueText(c, values[i]) : escapeColumn(keyValueText(c, values[i])))).join('.');
}

/** The object name of a key (its values checked already). */
export function objectName(table: Table, sharding: readonly KeyValue[], sorting: readonly KeyValue[]): string {
  if (isV3ioForm(table)) {
    const s = keyValueText(table.sharding[0], sharding[0]);
    return table.sorting.length === 0 ? s : s + '.' + keyValueText(table.sorting[0], sorting[0]);
  }
  return columnsText([...table.sharding, ...table.sorting], [...sharding, ...sorting], true);
}

/** The key values an object name spells, parsed by type (not yet checked against limits). */
export function parseObjectName(table: Table, name: string): { sharding: unknown[]; sorting: unknown[] } {
  const columns = [...table.sharding, ...table.sorting];
  const texts: string[] = [];
  let rest = name;
  for (let i = 0; i < columns.length - 1; i++) {
    const dot = rest.indexOf('.');
    if (dot < 0) {
      const form = columns.map((c) => `<${c.name}>`).join('.');
      throw new KeysliceError('InvalidKey', `object name ${JSON.stringify(name)} must be ${form} in table "${table.name}"`);
    }
    texts.push(rest.slice(0, dot));
    rest = rest.slice(dot + 1);
  }
  texts.push(rest);
  const escaped = !isV3ioForm(table);
  const values = columns.map((c, i) => parseText(c, escaped && i < columns.length - 1 ? unescapeColumn(texts[i], c, name) : texts[i]));
  return { sharding: values.slice(0, table.sharding.length), sorting: values.slice(table.sharding.length) };
}

function parseText(column: KeySchema, text: string): unknown {
  switch (column.type) {
    case 'string':
      return text;
    case 'number':
      if (!NUMBER_TEXT.test(text)) throw new KeysliceError('InvalidKey', `the "${column.name}" part of the object name must be a number, got ${JSON.stringify(text)}`);
      return numberOfText(text);
    case 'binary':
      if (text.length === 0 || !BASE64.test(text)) throw new KeysliceError('InvalidKey', `the "${column.name}" part of the object name must be base64, got ${JSON.stringify(text)}`);
      return new Uint8Array(Buffer.from(text, 'base64'));
  }
}

/** A number's text as its one native form (a decimal beyond every double stays a decimal);
 * a text beyond DynamoDB's limits reads as the nearest double, as it always did. */
function numberOfText(text: string): unknown {
  const d = parseDecimal(text);
  if (d === null) return Number(text);
  const v = numberValueOf(d);
  return typeof v === 'number' || decimalLimitError(d) === null ? v : Number(text);
}

// Item files for keyslice advise, import and export: JSON lines (one item per
// line, binary as {"$binary": "<base64>"}) or CSV (a header of attribute names,
// then one item per record; RFC 4180 quoting, so a quoted cell may hold commas,
// quotes and line breaks). Records are read in chunks with their line number
// and byte range, so that a bad one is reported by line and an import can read
// a record again by its range instead of keeping it in memory.
import { open, type FileHandle } from 'node:fs/promises';
import type { KeyType } from '../../shared/key-encoding.js';
import { IMPORT_LINE_BYTES_MAX } from '../../shared/limits.js';
import { fromJson, isPlainObject, validateItem, type Item, type Value } from '../../shared/values.js';

export type ItemFormat = 'jsonl' | 'csv';
export const ITEM_FORMATS: readonly ItemFormat[] = ['jsonl', 'csv'];

/** A file's format: the flag if given, else .csv means CSV and anything else JSON lines. */
export function formatOf(path: string, flag: string | undefined): ItemFormat {
  if (flag !== undefined) {
    if (!(ITEM_FORMATS as readonly string[]).includes(flag)) throw new Error(`--format must be ${ITEM_FORMATS.join(' or ')}, got "${flag}"`);
    return flag as ItemFormat;
  }
  return /\.csv$/i.test(path) ? 'csv' : 'jsonl';
}

/** One record as read: where it starts (line number, from 1), its bytes, its text. */
export interface RawRecord {
  line: number;
  start: number;
  end: number;
  text: string;
  /** Set when the record could not be read whole (too long): the reason. */
  error?: string;
}

/** A record that is not an item: its line and why. */
export class BadRecord extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
  }
}

const CHUNK_BYTES = 1 << 20;

/** The lines of a file with their line numbers and byte ranges (the range excludes the
 * line break); a line over IMPORT_LINE_BYTES_MAX comes back with an error, unread. */
async function* lines(file: FileHandle, onBytes?: (bytesRead: number) => void): AsyncGenerator<RawRecord> {
  const buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let carry: Buffer[] = [];
  let carryBytes = 0;
  let tooLong = false;
  let lineStart = 0;
  let position = 0;
  let line = 1;
  for (;;) {
    const { bytesRead } = await file.read(buf, 0, CHUNK_BYTES, position);
    if (bytesRead === 0) break;
    let from = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, from);
      const to = nl < 0 || nl >= bytesRead ? bytesRead : nl;
      if (!tooLong) {
        carryBytes += to - from;
        if (carryBytes > IMPORT_LINE_BYTES_MAX) {
          tooLong = true;
          carry = [];
        } else carry.push(Buffer.from(buf.subarray(from, to)));
      }
      if (nl < 0 || nl >= bytesRead) break;
      const end = position + nl;
      if (tooLong) yield { line, start: lineStart, end, text: '', error: `line ${line} is longer than ${IMPORT_LINE_BYTES_MAX} bytes` };
      else {
        let text = Buffer.concat(carry).toString('utf8');
        if (text.endsWith('\r')) text = text.slice(0, -1);
        yield { line, start: lineStart, end, text };
      }
      carry = [];
      carryBytes = 0;
      tooLong = false;
      line++;
      lineStart = end + 1;
      from = nl + 1;
    }
    position += bytesRead;
    onBytes?.(position);
  }
  if (lineStart < position) {
    if (tooLong) yield { line, start: lineStart, end: position, text: '', error: `line ${line} is longer than ${IMPORT_LINE_BYTES_MAX} bytes` };
    else {
      let text = Buffer.concat(carry).toString('utf8');
      if (text.endsWith('\r')) text = text.slice(0, -1);
      yield { line, start: lineStart, end: position, text };
    }
  }
}

/** The records of a file: non-blank lines of JSON lines; CSV records (a record goes on
 * while a quoted cell is open). For CSV the first record is the header. */
export async function* records(path: string, format: ItemFormat, onBytes?: (bytesRead: number) => void): AsyncGenerator<RawRecord> {
  const file = await open(path, 'r');
  try {
    let pending: RawRecord | null = null;
    for await (const r of lines(file, onBytes)) {
      if (format === 'jsonl') {
        if (r.error !== undefined || r.text.trim() !== '') yield r;
        continue;
      }
      if (pending !== null) {
        pending = { line: pending.line, start: pending.start, end: r.end, text: `${pending.text}\n${r.text}`, error: pending.error ?? r.error };
        if (pending.text.length > IMPORT_LINE_BYTES_MAX) pending.error ??= `the record at line ${pending.line} is longer than ${IMPORT_LINE_BYTES_MAX} bytes`;
      } else if (r.text === '' && r.error === undefined) continue;
      const current: RawRecord = pending ?? r;
      if (current.error === undefined && quotesOpen(current.text)) {
        pending = current;
        continue;
      }
      pending = null;
      yield current;
    }
    if (pending !== null) yield { ...pending, error: pending.error ?? `the record at line ${pending.line} has a quoted cell that never closes` };
  } finally {
    await file.close();
  }
}

/** Reads the bytes [start, end) of an open file as text (a record read again by its range). */
export async function readRange(file: FileHandle, start: number, end: number): Promise<string> {
  const buf = Buffer.allocUnsafe(end - start);
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await file.read(buf, done, buf.length - done, start + done);
    if (bytesRead === 0) throw new Error(`the file ended at byte ${start + done}, inside a record it had before (was it changed during the import?)`);
    done += bytesRead;
  }
  let text = buf.toString('utf8');
  if (text.endsWith('\r')) text = text.slice(0, -1);
  return text.replace(/\r\n/g, '\n');
}

function quotesOpen(text: string): boolean {
  let n = 0;
  for (let i = text.indexOf('"'); i >= 0; i = text.indexOf('"', i + 1)) n++;
  return n % 2 === 1;
}

/** The cells of one CSV record. */
export function csvCells(text: string, line: number): string[] {
  const cells: string[] = [];
  let i = 0;
  for (;;) {
    if (text[i] === '"') {
      let cell = '';
      i++;
      for (;;) {
        const q = text.indexOf('"', i);
        if (q < 0) throw new BadRecord(line, `line ${line}: a quoted cell does not close`);
        cell += text.slice(i, q);
        if (text[q + 1] === '"') {
          cell += '"';
          i = q + 2;
          continue;
        }
        i = q + 1;
        break;
      }
      cells.push(cell);
      if (i === text.length) return cells;
      if (text[i] !== ',') throw new BadRecord(line, `line ${line}: a quoted cell must be followed by a comma or the end of the record`);
      i++;
    } else {
      const c = text.indexOf(',', i);
      if (c < 0) {
        cells.push(text.slice(i));
        return cells;
      }
      cells.push(text.slice(i, c));
      i = c + 1;
    }
  }
}

/** A CSV cell as a value. Key columns take their type (number: a number's text;
 * binary: base64); other cells become numbers only when they are a number's own
 * text ("12", "1.5"; not "007" or "1e3"), so no text is changed by the trip. */
function csvValue(cell: string, type: KeyType | undefined, name: string, line: number): Value {
  if (type === 'number' || (type === undefined && cell !== '' && String(Number(cell)) === cell)) {
    const n = Number(cell);
    if (cell.trim() === '' || !Number.isFinite(n)) throw new BadRecord(line, `line ${line}: "${name}" must be a number, got ${JSON.stringify(cell)}`);
    return n;
  }
  if (type === 'binary') return new Uint8Array(Buffer.from(cell, 'base64'));
  return cell;
}

/** Turns records into items: JSON objects, or CSV records named by the header. */
export class ItemParser {
  private header: string[] | null = null;

  constructor(
    readonly format: ItemFormat,
    /** Types of the key columns (CSV cells of a key column are read as its type). */
    private readonly keyTypes: ReadonlyMap<string, KeyType> = new Map(),
  ) {}

  /** CSV: takes the first record as the header; answers whether it did. */
  takeHeader(r: RawRecord): boolean {
    if (this.format !== 'csv' || this.header !== null) return false;
    if (r.error !== undefined) throw new BadRecord(r.line, r.error);
    this.header = csvCells(r.text, r.line).map((h) => h.trim());
    const seen = new Set<string>();
    for (const h of this.header) {
      if (h === '') throw new BadRecord(r.line, `line ${r.line}: the CSV header has an empty column name`);
      if (seen.has(h)) throw new BadRecord(r.line, `line ${r.line}: the CSV header names "${h}" twice`);
      seen.add(h);
    }
    return true;
  }

  /** The item of a record, checked as an item (attribute names and values); BadRecord if it is none. */
  item(r: RawRecord): Item {
    if (r.error !== undefined) throw new BadRecord(r.line, r.error);
    let item: unknown;
    if (this.format === 'jsonl') {
      try {
        item = fromJson(JSON.parse(r.text));
      } catch (err) {
        throw new BadRecord(r.line, `line ${r.line}: not JSON: ${(err as Error).message}`);
      }
      if (!isPlainObject(item)) throw new BadRecord(r.line, `line ${r.line}: an item must be a JSON object`);
    } else {
      const header = this.header;
      if (header === null) throw new Error('invariant broken: a CSV record before its header');
      const cells = csvCells(r.text, r.line);
      if (cells.length !== header.length) throw new BadRecord(r.line, `line ${r.line}: ${cells.length} cells; the header has ${header.length}`);
      const out: Item = {};
      cells.forEach((cell, i) => {
        if (cell !== '') out[header[i]] = csvValue(cell, this.keyTypes.get(header[i]), header[i], r.line);
      });
      item = out;
    }
    try {
      validateItem(item);
    } catch (err) {
      throw new BadRecord(r.line, `line ${r.line}: ${(err as Error).message}`);
    }
    return item;
  }
}

/** Access-log entries: JSON lines {"op": "read" | "write" (or "r" | "w"), "key": {...}},
 * or CSV with an "op" column and a column per key attribute. */
export function accessEntry(parser: ItemParser, r: RawRecord): { op: 'read' | 'write'; key: Item } {
  const item = parser.item(r);
  const op = item.op;
  const kind = op === 'read' || op === 'r' ? 'read' : op === 'write' || op === 'w' ? 'write' : null;
  if (kind === null) throw new BadRecord(r.line, `line ${r.line}: "op" must be read or write (r or w), got ${JSON.stringify(op)}`);
  if (parser.format === 'jsonl') {
    if (!isPlainObject(item.key)) throw new BadRecord(r.line, `line ${r.line}: "key" must be an object of key attributes`);
    return { op: kind, key: item.key as Item };
  }
  const { op: _op, ...key } = item;
  return { op: kind, key };
}

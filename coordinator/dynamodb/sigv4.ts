// AWS Signature Version 4 on the DynamoDB endpoint. When the cluster has a
// client token, a request must be signed with that token as its secret access
// key (any access key id) and the signature is computed here and compared:
// canonical request (method, path, query, signed headers, payload hash), string
// to sign (date, credential scope), and the HMAC chain of the scope. Without a
// token, signatures are accepted unchecked (only the region is read, for ARNs).
import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { DYNAMODB_SIGNATURE_SKEW_MS_MAX, DYNAMODB_SIGNING_KEYS_MAX } from '../../shared/limits.js';
import { DynamoDbError } from './errors.js';

const ALGORITHM = 'AWS4-HMAC-SHA256';
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
export const DEFAULT_REGION = 'local';

export interface ParsedAuthorization {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  terminator: string;
  signedHeaders: string[];
  signature: string;
}

/** The parts of a SigV4 Authorization header, or the IncompleteSignatureException DynamoDB answers. */
export function parseAuthorization(header: string): ParsedAuthorization {
  const space = header.indexOf(' ');
  const scheme = space < 0 ? header : header.slice(0, space);
  if (scheme !== ALGORITHM) {
    throw new DynamoDbError('IncompleteSignatureException', `Unsupported authorization type: ${scheme}; DynamoDB requests are signed with ${ALGORITHM}`);
  }
  const fields = new Map<string, string>();
  for (const part of header.slice(space + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const missing = ['Credential', 'Signature', 'SignedHeaders'].filter((f) => !fields.has(f));
  if (missing.length > 0) {
    throw new DynamoDbError('IncompleteSignatureException', `${missing.map((f) => `Authorization header requires '${f}' parameter.`).join(' ')} Authorization=${header}`);
  }
  const credential = fields.get('Credential')!.split('/');
  if (credential.length !== 5) {
    throw new DynamoDbError('IncompleteSignatureException', `Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '${fields.get('Credential')}'`);
  }
  const [accessKeyId, date, region, service, terminator] = credential;
  return { accessKeyId, date, region, service, terminator, signedHeaders: fields.get('SignedHeaders')!.split(';'), signature: fields.get('Signature')! };
}

/** The region a request was signed for, for ARNs; DEFAULT_REGION when it is not signed. */
export function regionOf(authorization: string | undefined): string {
  if (authorization === undefined || !authorization.startsWith(ALGORITHM)) return DEFAULT_REGION;
  try {
    return parseAuthorization(authorization).region || DEFAULT_REGION;
  } catch {
    return DEFAULT_REGION;
  }
}

/** RFC 3986 encoding, as SigV4 wants it. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** A query component decoded; a broken percent-encoding (`%zz`, a cut UTF-8 sequence)
 * is the client's error: no signature can be computed over it. */
function queryDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch (err) {
    if (!(err instanceof URIError)) throw err;
    throw new DynamoDbError('InvalidSignatureException', `The request's query string is not valid percent-encoding (${JSON.stringify(s)}), so its signature cannot be checked.`);
  }
}

function canonicalQuery(query: string): string {
  if (query === '') return '';
  const pairs = query.split('&').map((kv) => {
    const eq = kv.indexOf('=');
    const k = queryDecode(eq < 0 ? kv : kv.slice(0, eq));
    const v = eq < 0 ? '' : queryDecode(kv.slice(eq + 1));
    return [uriEncode(k), uriEncode(v)] as const;
  });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();
// One call, no Hash object: crypto.hash is Node's one-shot digest for small inputs.
const sha256Hex = (data: Buffer | string) => hash('sha256', data, 'hex');

/** Signing keys by secret and scope: the four HMACs of the scope give the same key all day
 * for every request of a client, so they are computed once per scope. Only a key a signature
 * was checked with is kept (keepSigningKey): the scope is the client's, unauthenticated until
 * then, and requests that fail the check must neither grow this nor push out the keys of
 * clients that sign. Past DYNAMODB_SIGNING_KEYS_MAX the kept ones are dropped. */
const signingKeys = new Map<string, Buffer>();

// The parts hold no newline that could make two scopes one name: a header value cannot carry one.
const scopeName = (secret: string, auth: ParsedAuthorization) => `${secret}\n${auth.date}\n${auth.region}\n${auth.service}\n${auth.terminator}`;

function signingKey(secret: string, auth: ParsedAuthorization): { key: Buffer; name: string; kept: boolean } {
  const name = scopeName(secret, auth);
  const kept = signingKeys.get(name);
  if (kept !== undefined) return { key: kept, name, kept: true };
  return { key: hmac(hmac(hmac(hmac(`AWS4${secret}`, auth.date), auth.region), auth.service), auth.terminator), name, kept: false };
}

function keepSigningKey(name: string, key: Buffer): void {
  if (signingKeys.size >= DYNAMODB_SIGNING_KEYS_MAX) signingKeys.clear();
  signingKeys.set(name, key);
}

/** How many signing keys are kept (for the test that a refused signature keeps none). */
export function signingKeysKept(): number {
  return signingKeys.size;
}

/** The canonical headers of SigV4 ("name:value,value\n" for each signed header, in the order
 * signed, values trimmed and their runs of spaces made one), read from the raw header list:
 * `headersDistinct` would build an object of every header for the few signed. */
function canonicalHeaders(raw: readonly string[], signed: readonly string[]): string {
  const values = new Map<string, string[]>(signed.map((h) => [h, []]));
  for (let i = 0; i < raw.length; i += 2) values.get(raw[i].toLowerCase())?.push(raw[i + 1].trim().replace(/\s+/g, ' '));
  let out = '';
  for (const h of signed) out += `${h}:${values.get(h)!.join(',')}\n`;
  return out;
}

function toMs(amzDate: string): number {
  const m = AMZ_DATE.exec(amzDate)!;
  return Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
}

function formatAmzDate(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/** Checks the request's SigV4 signature against `secret`; throws DynamoDB's exception when it does not hold. */
export function verifySignature(req: IncomingMessage, body: Buffer, secret: string, now: number): ParsedAuthorization {
  const auth = parseAuthorization(req.headers.authorization ?? '');
  const amzDate = req.headers['x-amz-date'];
  if (typeof amzDate !== 'string' || !AMZ_DATE.test(amzDate)) {
    throw new DynamoDbError('IncompleteSignatureException', "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header (in the form YYYYMMDDTHHMMSSZ).");
  }
  if (auth.terminator !== 'aws4_request') throw new DynamoDbError('InvalidSignatureException', "Credential should be scoped with a valid terminator: 'aws4_request', not '" + auth.terminator + "'.");
  if (auth.service !== 'dynamodb') throw new DynamoDbError('InvalidSignatureException', `Credential should be scoped to correct service: 'dynamodb'. `);
  if (auth.date !== amzDate.slice(0, 8)) {
    throw new DynamoDbError('InvalidSignatureException', `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${auth.date}' != '${amzDate.slice(0, 8)}', from '${amzDate}'.`);
  }
  const signedAt = toMs(amzDate);
  if (signedAt < now - DYNAMODB_SIGNATURE_SKEW_MS_MAX) {
    throw new DynamoDbError('InvalidSignatureException', `Signature expired: ${amzDate} is now earlier than ${formatAmzDate(now - DYNAMODB_SIGNATURE_SKEW_MS_MAX)} (${formatAmzDate(now)} - 15 min.)`);
  }
  if (signedAt > now + DYNAMODB_SIGNATURE_SKEW_MS_MAX) {
    throw new DynamoDbError('InvalidSignatureException', `Signature not yet current: ${amzDate} is still later than ${formatAmzDate(now + DYNAMODB_SIGNATURE_SKEW_MS_MAX)} (${formatAmzDate(now)} + 15 min.)`);
  }
  if (!auth.signedHeaders.includes('host')) throw new DynamoDbError('InvalidSignatureException', "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");

  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q + 1);
  const payloadHash = sha256Hex(body);
  const claimed = req.headers['x-amz-content-sha256'];
  if (typeof claimed === 'string' && claimed !== payloadHash) {
    throw new DynamoDbError('InvalidSignatureException', 'The provided x-amz-content-sha256 header does not match what was computed.');
  }
  const canonicalRequest = [req.method ?? 'POST', path, canonicalQuery(query), canonicalHeaders(req.rawHeaders, auth.signedHeaders), auth.signedHeaders.join(';'), payloadHash].join('\n');
  const scope = `${auth.date}/${auth.region}/${auth.service}/${auth.terminator}`;
  const stringToSign = [ALGORITHM, amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const signing = signingKey(secret, auth);
  const expected = hmac(signing.key, stringToSign);
  const given = /^[0-9a-f]{64}$/.test(auth.signature) ? Buffer.from(auth.signature, 'hex') : Buffer.alloc(0);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new DynamoDbError(
      'InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
  }
  if (!signing.kept) keepSigningKey(signing.name, signing.key);
  return auth;
}

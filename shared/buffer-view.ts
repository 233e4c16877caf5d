/** `bytes` as a Buffer over the same memory (no copy): msgpackr and the stores hand out plain Uint8Arrays (a value
 * transferred from a worker, a binary attribute), and Buffer's readers and latin1 slices need a Buffer. */
export function bufferView(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Buffer's UTF-8 decoder without toString's checks and its lookup of the encoding (which took 18% of the client's
 * msgpack reader's samples on a page of items through toString). Every Buffer of Node has it, untyped (msgpackr calls
 * latin1Slice so). */
export const utf8Slice = (Buffer.prototype as unknown as { utf8Slice?: (this: Buffer, start: number, end: number) => string }).utf8Slice ?? function (this: Buffer, start: number, end: number) {
  return this.toString('utf8', start, end);
};

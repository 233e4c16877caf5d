/** `bytes` as a Buffer over the same memory (no copy): msgpackr and the stores hand out plain Uint8Arrays (a value
 * transferred from a worker, a binary attribute), and Buffer's readers and latin1 slices need a Buffer. */
export function bufferView(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

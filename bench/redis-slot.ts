// The hash slot of a key in a Redis Cluster, as the cluster specification
// defines it: CRC16 (the XMODEM variant: polynomial 0x1021, initial value 0,
// no reflection, no final xor) of the key's bytes, modulo 16384; when the key
// holds a hash tag ("{...}" with at least one byte between the first "{" and
// the "}" after it), only the tag is hashed. The bench computes it to send each
// command to the shard that owns its slot, as a cluster-aware client does.
export const REDIS_CLUSTER_SLOTS = 16384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % REDIS_CLUSTER_SLOTS;
  }
  return crc16(bytes) % REDIS_CLUSTER_SLOTS;
}

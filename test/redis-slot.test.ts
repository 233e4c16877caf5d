// The bench's Redis Cluster client sends each command to the shard that owns its
// key's slot (bench/redis-slot.ts). The expected slots below are what Redis 7.0's
// CLUSTER KEYSLOT answered for the same keys (and the CRC16 check value of the
// XMODEM variant the cluster specification names), so a wrong table, byte order
// or hash-tag rule fails here rather than as MOVED answers in the benchmark.
import { describe, expect, it } from 'vitest';
import { crc16, keySlot } from '../bench/redis-slot.js';

describe('Redis Cluster key slots', () => {
  it('computes CRC16/XMODEM', () => {
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
  });

  it('answers the slot CLUSTER KEYSLOT answers, hash tags included', () => {
    const slots: Record<string, number> = {
      '123456789': 12739,
      foo: 12182,
      bar: 5061,
      hello: 866,
      '{user1000}.following': 3443,
      '{user1000}.followers': 3443,
      'foo{}{bar}': 8363, // an empty tag: the whole key
      'foo{{bar}}zap': 4015, // the tag is "{bar"
      'foo{bar}{zap}': 5061, // only the first tag
      'c123:item:dev-42:0000000007': 12432, // a key the bench writes
      'é€': 934, // UTF-8 bytes
    };
    for (const [key, slot] of Object.entries(slots)) expect(keySlot(key), key).toBe(slot);
  });
});

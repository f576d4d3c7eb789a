/** CRC16-XMODEM lookup table, as used by Redis Cluster for key slots. */
const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

/** Redis Cluster hash slot of a key (honours `{hash tags}`). */
export function keySlot(key: string): number {
  let part = key;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) part = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(part, 'utf8')) % 16384;
}

/**
 * Groups resources by the Redis Cluster hash slot of their keys, so that each group can run in
 * one script on a Cluster master without CROSSSLOT errors. Order within groups is kept.
 */
export function slotGroups(
  resources: readonly string[],
  keyOf: (resource: string) => string,
): string[][] {
  const groups = new Map<number, string[]>();
  for (const r of resources) {
    const slot = keySlot(keyOf(r));
    const g = groups.get(slot);
    if (g) g.push(r);
    else groups.set(slot, [r]);
  }
  return [...groups.values()];
}

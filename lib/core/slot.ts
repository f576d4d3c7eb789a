/**
 * Redis Cluster hash slots (CRC16-XMODEM of the key's `{hash tag}`, mod 16384), and one short
 * hash tag per slot: the fencing counters are one per slot (keys.ts `fenceKey`), named with the
 * tag of their slot so that a counter shares the slot of every lock key it serves.
 */

/** Number of Redis Cluster hash slots. */
export const SLOTS = 16384;

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

/** CRC16-XMODEM of the UTF-8 bytes of `text[start, end)` (no Buffer for ASCII text). */
function crc16(text: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return crc16Bytes(Buffer.from(text.slice(start, end), 'utf8'));
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ c) & 0xff];
  }
  return crc;
}

function crc16Bytes(data: Buffer): number {
  let crc = 0;
  for (const byte of data) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

/** Redis Cluster hash slot of a key (honours `{hash tags}` as Redis does). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(key, open + 1, close) % SLOTS;
  }
  return crc16(key, 0, key.length) % SLOTS;
}

const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

let tags: string[] | undefined;

/** Fills `t` (slot → tag) with the tags of `length` base-36 digits, no leading zero but '0'. */
function fillTags(t: string[], length: number, left: number): number {
  const walk = (text: string, crc: number, depth: number): void => {
    for (let d = depth === 0 && length > 1 ? 1 : 0; d < 36 && left > 0; d++) {
      const c = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ DIGITS.charCodeAt(d)) & 0xff];
      if (depth + 1 < length) {
        walk(text + DIGITS[d], c, depth + 1);
      } else if (t[c % SLOTS] === undefined) {
        t[c % SLOTS] = text + DIGITS[d];
        left--;
      }
    }
  };
  walk('', 0, 0);
  return left;
}

/**
 * The hash tag of `slot`: the first of `'0'`, `'1'`, …, `'z'`, `'10'`, … (base 36, in counting
 * order) whose slot it is — the same for every engine and version, so engines on the same masters
 * share the counter of a slot. The table of all 16,384 tags (1 to 4 characters) is made on first
 * use, once per process (walking base-36 numbers with their CRC16 built digit by digit).
 */
export function slotTag(slot: number): string {
  if (!tags) {
    const t = new Array<string>(SLOTS);
    let left = SLOTS;
    for (let length = 1; left > 0; length++) left = fillTags(t, length, left);
    tags = t;
  }
  return tags[slot];
}

/**
 * Decoding of Redis replies that differ between protocols. ioredis 6 speaks RESP3 and, with its
 * default `replyMapping: 'legacy'`, returns RESP2 shapes; a client created with
 * `replyMapping: 'resp3'` returns RESP3 maps as plain objects instead. Script replies (arrays,
 * integers, bulk strings) and `INFO` (a string) have one shape under both.
 */

/**
 * The value of `name` in a `CONFIG GET name` reply: a flat `[name, value]` array (RESP2, or
 * RESP3 with the legacy mapping) or a `{ name: value }` object (RESP3 with `replyMapping: 'resp3'`).
 */
export function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) {
      if (String(reply[i]) === name) return String(reply[i + 1]);
    }
    return undefined;
  }
  if (reply instanceof Map) {
    const value: unknown = reply.get(name);
    return value === undefined ? undefined : String(value);
  }
  if (reply !== null && typeof reply === 'object' && Object.hasOwn(reply, name)) {
    return String((reply as Record<string, unknown>)[name]);
  }
  return undefined;
}

/**
 * A `TIME` reply (`[seconds, microseconds]`, as strings, numbers or buffers) in ms since the epoch,
 * the microseconds as the fraction; rejects anything else.
 */
export function timeMs(reply: unknown): number {
  if (Array.isArray(reply) && reply.length === 2) {
    const seconds = Number(String(reply[0]));
    const micros = Number(String(reply[1]));
    if (Number.isSafeInteger(seconds) && Number.isSafeInteger(micros) && micros >= 0) {
      return seconds * 1000 + micros / 1000;
    }
  }
  throw new Error(`Malformed reply of TIME: ${String(reply).slice(0, 100)}`);
}

/** Taking a parked token that must not be installed any more off (lib/core/fair/install-undo.ts). */
import { script } from '../redis/scripts/lua';

/**
 * Unpark: takes engine ARGV[1]'s entry off the park hash KEYS[1] when it still holds the token
 * ARGV[2] (`<token> <ttl> <until>`, fair/install-scripts.ts `parkLua`); an entry of another token (the
 * engine parked a newer one since) is left alone. KEYS, ARGV, reply: the layout below
 * (docs/scripts.md).
 */
export const UNPARK_SCRIPT = script(
  'unpark',
  `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, string.len(ARGV[2]) + 1) == ARGV[2] .. ' ' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
`,
  {
    keys: [{ name: 'park hash' }],
    argv: [{ name: 'engine id' }, { name: 'token' }],
    reply: '`1` the entry was taken off; else `0`',
  },
);

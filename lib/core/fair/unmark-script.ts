/** The poll marks' take-down script (the marks: fair/acquire-script.ts FAIR_ACQUIRE_SCRIPT, fair/fair-keys.ts). */
import { ENGINE_ID_LENGTH } from '../base/token';
import { script } from '../redis/scripts/lua';

/**
 * Takes an engine's poll mark down (store.ts `unmarkPolling`): deletes the mark when it
 * names the engine — its own mark, one that another engine's deferred attempt joined
 * (`<id>+<other id>`, FAIR_ACQUIRE_SCRIPT `defer`), which would otherwise keep that engine deferring
 * until it expired, or another engine's mark that this one joined (`<other id>+<id>`): a
 * deferring attempt of that other engine would hand the turn to this one, which is gone (the
 * other engine's next refused poll raises its mark again). KEYS: the poll mark, then
 * optionally the resource's order (fair/fair-keys.ts `orderKey`), from which the engine is
 * taken off too: a yield would otherwise reserve the key for an engine that no longer waits,
 * and the others would stand by for it (fair/announced.ts `standBy`); then optionally the
 * park (fair/fair-keys.ts `parkKey`), from which the engine's entry is taken off, and the lock
 * key: where it holds one of the tokens ARGV[2..] (tokens the engine parked, which a yield may
 * have installed unheard: lib/core/fair/README.md), it is deleted and the release
 * announced. KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const UNMARK_SCRIPT = script(
  'unmark',
  `
if KEYS[2] then redis.call('ZREM', KEYS[2], ARGV[1]) end
if KEYS[3] then redis.call('HDEL', KEYS[3], ARGV[1]) end
if KEYS[4] and #ARGV > 1 then
  local v = redis.pcall('GET', KEYS[4])
  for i = 2, #ARGV do
    if v == ARGV[i] then
      redis.call('DEL', KEYS[4])
      redis.call('PUBLISH', KEYS[4], ARGV[i])
      break
    end
  end
end
local m = redis.pcall('GET', KEYS[1])
if type(m) == 'string' and (string.sub(m, 1, ${ENGINE_ID_LENGTH}) == ARGV[1]
    or string.sub(m, -${ENGINE_ID_LENGTH} - 1) == '+' .. ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`,
  {
    keys: [
      { name: 'poll mark' },
      { name: 'order key', when: 'optional' },
      { name: 'park key', when: 'optional', withPrevious: true },
      { name: 'lock key', when: 'optional', withPrevious: true },
    ],
    argv: [{ name: 'engine id' }, { name: 'tokens the engine parked', count: 'rest' }],
    reply: '`1` the mark was deleted; else `0`',
  },
);

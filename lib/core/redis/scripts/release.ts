/** The mutex's release script (redis/kinds/mutex.ts; the fair mode's undo of an install too). */
import { releaseAnnounceLua } from './announce';
import { script } from './lua';

/**
 * Release (docs/REDLOCK.md "N masters", step 5): compare-and-delete over several keys; each key
 * deleted is announced on its channel (named like the key) so that waiters can retry at once
 * (the clean-up of a failed attempt as `~token`: redis/scripts/announce.ts). KEYS, ARGV, reply:
 * the layout below (docs/scripts.md). A key held by readers or semaphore holders (a zset) is not
 * ours: `redis.pcall` turns GET's WRONGTYPE into an error table, which never equals the token — no
 * extra command, no error.
 */
export const RELEASE_SCRIPT = script(
  'release',
  `
local deleted = 0
for i = 1, #KEYS do
  if redis.pcall('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
    ${releaseAnnounceLua('KEYS[i]')}
  end
end
return deleted
`,
  {
    keys: [{ name: 'lock keys', count: 'rest' }],
    argv: [
      { name: 'token' },
      { name: "publish flag: '0' none, '1' a release, '2' a clean-up (`~token`)" },
    ],
    reply: 'the number of keys deleted',
  },
);

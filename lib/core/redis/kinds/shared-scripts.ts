/**
 * Shared (read) locks and their exclusive (write) side on one master. Readers share a holder zset
 * (`#shared` marker); a writer is the plain mutex: a string at the same key. One key cannot be
 * both, so a reader and a writer never hold the same master; both need a majority
 * (lib/core/quorum/kind-rules.ts). Key layout, reply shapes and the writer-starvation policy: docs/lock-kinds.md.
 *
 * Writer starvation. A writer refused because readers hold the key leaves a "writer waiting"
 * flag (base/keys.ts `waitKey`, same slot) that lives until the readers' key expires plus
 * `waitTtl` ms (redis/kinds/mutex-among-kinds.ts). While it exists, new readers
 * are refused (readers already in keep extending and leave when done), so the readers drain and
 * a writer gets in. The flag is refreshed by every refused writer attempt and is never shortened;
 * it ends with its writer (writer-flag.ts): deleted where the writer is granted, taken down by
 * its engine when the writer gives up, else it expires by itself. Writers ignore the flag — it
 * holds back readers, not other writers; writer against writer is ordinary mutex contention.
 * `waitTtl` should cover the writers' retry interval (retryDelay + retryJitter, a few request
 * timeouts), so a writer that slept until the readers expired still finds its flag up.
 */
import { ACQUIRE_AMONG_KINDS_SCRIPT } from './mutex-among-kinds';
import {
  ACQUIRE_ARGV,
  MARKER_AGE_REPLY,
  CHECK_TOKEN_LUA,
  TOKEN_ERROR_REPLY,
  addHolder,
  FENCING_LUA,
  MARKER_LUA,
  NOW_LUA,
  kindOf,
  prune,
  pttl,
  script,
} from '../scripts/kind-lua';

/** Lua: `w0`, the index before the first writer-waiting flag (after lock keys and counters). */
const WAIT_INDEX_LUA = `
local w0 = n
if ARGV[3] == '1' then w0 = 2 * n end`;

/**
 * Reader acquire: all-or-nothing over several resources. KEYS, ARGV, reply: the layout below
 * (docs/scripts.md; redis/kinds/mutex.ts `acquireLayout` builds it, with the writer-waiting flags).
 *
 * Per key (expired readers pruned first):
 * - a writer holds it (a string): {0, age, its pttl};
 * - free or readers only, but a writer is waiting (flag present): {0, age, the flag's pttl};
 * - another kind (a semaphore, a foreign type): {-1, age, pttl, found kind, found limit};
 * - otherwise admissible. When all are, the token joins each key's readers and the reply is
 *   {1, age, ...fencing counters}, as ACQUIRE_SCRIPT.
 */
export const SHARED_ACQUIRE_SCRIPT = script(
  'shared-acquire',
  `${CHECK_TOKEN_LUA}
local n = tonumber(ARGV[5])
${WAIT_INDEX_LUA}
${MARKER_LUA}${NOW_LUA}
for i = 1, n do${kindOf('KEYS[i]')}
  if kind == 'mutex' then
    return {0, age, ${pttl('KEYS[i]')}}
  elseif kind == 'shared' or kind == 'none' then
    local mine = kind == 'shared' and redis.call('ZSCORE', KEYS[i], ARGV[1])
    if kind == 'shared' then${prune('KEYS[i]')}
    end
    if (not mine) and redis.call('EXISTS', KEYS[w0 + i]) == 1 then
      return {0, age, ${pttl('KEYS[w0 + i]')}}
    end
  else
    if kind == 'foreign' then kind = 'foreign:' .. t end
    return {-1, age, ${pttl('KEYS[i]')}, kind, l}
  end
end
${addHolder("'#shared'")}
local res = {1, age}
${FENCING_LUA}
return res
`,
  {
    keys: [
      { name: 'lock keys', count: 'n' },
      { name: 'fencing counters', count: 'n', when: "ARGV[3] == '1'" },
      { name: 'writer-waiting flags', count: 'n' },
      { name: 'boot marker', last: true, when: "ARGV[4] ~= '0'" },
    ],
    argv: ACQUIRE_ARGV,
    reply:
      '`{1, age, ...counters}` granted (one fencing counter per key when fencing is on); ' +
      "`{0, age, pttl}` a writer holds a key (its pttl) or waits for it (the flag's pttl); " +
      '`{-1, age, pttl, kind, limit}` another kind at a key (nothing written). ' +
      MARKER_AGE_REPLY +
      ' ' +
      TOKEN_ERROR_REPLY,
  },
);

/**
 * Writer (exclusive) acquire: every plain lock may be the writer of a resource that others read.
 * The plain acquire (redis/kinds/mutex.ts ACQUIRE_SCRIPT) stays a single `SET NX` and asks again
 * with the mutex's script among the kinds (mutex-among-kinds.ts ACQUIRE_AMONG_KINDS_SCRIPT) when
 * a key holds another type; that script is the writer's acquire.
 *
 * KEYS, ARGV, reply: ACQUIRE_AMONG_KINDS_SCRIPT's layout (docs/scripts.md, `acquire-among-kinds`;
 * without waitTtl, ARGV[7], it never leaves a writer-waiting flag and the flag keys are left out).
 *
 * Refused: a semaphore or a foreign type at any key gives {-1, age, pttl, found kind, found limit}
 * (nothing is written); otherwise, on every key held by live readers, the writer-waiting flag is
 * raised — created with this token and `waitTtl`, or, when another writer's flag is there, only
 * lengthened to `waitTtl` (its token is kept, it is never shortened) — and the reply is
 * {0, age, pttl} with the pttl of the first refusing key (for readers: until the last of them
 * expires). Granted: `SET key token PX ttl` on every key and {1, age, ...fencing counters}.
 */
export const WRITE_ACQUIRE_SCRIPT = ACQUIRE_AMONG_KINDS_SCRIPT;

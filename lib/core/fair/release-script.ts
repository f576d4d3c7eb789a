/** The fair mode's release: yields and passes (README.md here). */
import { NOW_LUA, num } from '../redis/scripts/kind-lua';
import { RESERVED_SEP, publishLua } from './yield-announce';
import { ENGINE_OF, INSTALL_LUA, parkLua } from './install-scripts';
import { script } from '../redis/scripts/lua';

/**
 * Release with the hand-over across processes (`fairness: 'across-processes'`,
 * lib/core/fair/README.md): {@link RELEASE_SCRIPT} with yields and passes.
 *
 * Release: compare-and-delete over several keys; publishes the token on each deleted key's
 * channel (the channel is named like the key) so that waiters can retry at once (a yield to
 * other processes' waiters as `^token`: yield-announce.ts). KEYS, ARGV, reply: the layout below
 * (docs/scripts.md; fair/fair-mutex.ts `releaseAs` builds it).
 * Ordered yields (fair/streak.ts `RESERVE_MS`): with ARGV[3] = n, the n lock keys are followed
 * by their order keys (fair/fair-keys.ts `orderKey`), and a yield ('3') of a key reserves it
 * for ARGV[4] ms for the engine that has waited longest in its order, other than the yielding
 * one: that engine leaves the order, the member `<until ms>:<engine id>` of score -1 is the
 * reservation (FAIR_ACQUIRE_SCRIPT refuses other engines' retrying attempts meanwhile), and the
 * announcement names it (`^token:engineId`, yield-announce.ts), so that only its waiters
 * attempt. With ARGV[5] (wall ms) the yielding engine joins the order (`NX`: an older entry
 * stays), its local waiters waiting from then on, and the order lives at least ARGV[6] ms more
 * (the longest a lock may be held, and a second).
 * A pass ('4', fair/fair-queue.ts `announceAs`: a plain lock released while other engines
 * wait) does the same with ARGV[5] '' (the releasing engine does not join the order, parks
 * nothing: ARGV[7] ''); when no other engine is in the order it is announced as a release.
 * A yield or a pass with order keys does this on a master where the key is free too (not where
 * another holder has it), announced only when it names an engine: the engine it gives the lock
 * to gets it on every master where nobody holds it, not only where the releasing lock was.
 * Where another holder has the key, the engine named is only taken off the order and the park
 * (nothing installed, reserved or announced), and a yielding engine joins the order: every
 * master's order stays the same.
 * Hand-over across processes (lib/core/fair/README.md): with ARGV[7] the yield's order
 * keys are followed by the park keys (fair/fair-keys.ts `parkKey`), then the fencing counters
 * (ARGV[10] '1') and the boot marker (ARGV[12] '1'); the named engine's parked token is
 * installed instead of the reservation (fair/install-scripts.ts `INSTALL_LUA`), announced as
 * `^token:engineId:installed token:counter:age`, and the yielding engine parks its own next
 * token ARGV[7] ('' none) with the ttl ARGV[8], installable for ARGV[9] ms (the counters' TTL:
 * ARGV[11]). With ARGV[13] (the alive channels' prefix, fair/fair-keys.ts `aliveChannel`; ''
 * on a Cluster, whose subscribers may sit on another node) an engine of the order whose alive
 * channel has no subscriber on this master is skipped and taken off the order and the park: a
 * waiting process that died is not given the lock for its whole ttl. ARGV[14] ('' none): the
 * token whose yield or pass installed the releasing lock (FairGrant.installedBy); on a master whose
 * key still holds it, that release has not run yet, and this one names nobody (see the script).
 * A key held by readers or semaphore holders (a zset) is not ours: `redis.pcall` turns GET's
 * WRONGTYPE into an error table, which never equals the token — no extra command, no error.
 */
export const FAIR_RELEASE_SCRIPT = script(
  'fair-release',
  `
local n = #KEYS
if ARGV[3] then n = tonumber(ARGV[3]) end
local deleted = 0
for i = 1, n do
  local v = redis.pcall('GET', KEYS[i])
  local q = (ARGV[2] == '3' or ARGV[2] == '4') and KEYS[n + i]
  -- A yield or a pass also gives the key away where it is free (no lock there: this lock's
  -- key expired or never got there): else the next holder would hold only where this one did,
  -- and every waiter's attempt would keep splitting the votes on the other masters. Where
  -- another holder has the key, it gives nothing away but keeps the order in step.
  local mine = v == ARGV[1]
  local give = mine or not v
  if mine or q then
    if mine then
      redis.call('DEL', KEYS[i])
      deleted = deleted + 1
    end
    local to = ''
    if q then${NOW_LUA}
      -- A yield (ordered) or a pass: reserve the key for ARGV[4] ms for the engine that has
      -- waited longest (not the releasing one), take it off the order and name it in the
      -- announcement. A yielding engine, whose local waiters wait from now on (ARGV[5]; '' for a
      -- pass), joins the order.
      local pk = ARGV[7] and KEYS[2 * n + i]
      redis.call('ZREMRANGEBYSCORE', q, '-inf', '-1')
      local me = ${ENGINE_OF('ARGV[1]')}
      -- (An engine granted while others waited kept its place in the order, FAIR_ACQUIRE_SCRIPT:
      -- it leaves it now; a yield joins it again below, behind those waiting.)
      redis.call('ZREM', q, me)
      local nx = nil
      local behind = ARGV[14] and ARGV[14] ~= '' and v == ARGV[14]
      if behind then
        -- Behind: the key still holds the token whose yield or pass installed this lock on the
        -- other masters (ARGV[14]); that release runs here next — two processes' commands may
        -- reach a descheduled master in either order — and names here the engine that this
        -- release names there. This one names nobody: it would name the engine after that one,
        -- and this master's order would stay one engine ahead of the others'. It leaves the
        -- order and the park (its parked token was used up elsewhere).
        if pk then redis.call('HDEL', pk, me) end
      end
      -- (At most 4 looked at: gone ones met are taken off, so the next release looks further.)
      for _, m in ipairs(behind and {} or redis.call('ZRANGEBYSCORE', q, '0', '+inf', 'LIMIT', 0, 4)) do
        if m ~= me then
          -- (ARGV[13], installs on standalone masters: an engine whose alive channel has no
          -- subscriber here is gone — off the order and the park, the next one is named.)
          if ARGV[13] and ARGV[13] ~= '' and redis.call('PUBSUB', 'NUMSUB', ARGV[13] .. m)[2] == 0 then
            redis.call('ZREM', q, m)
            if pk then redis.call('HDEL', pk, m) end
          else
            nx = m
            break
          end
        end
      end
      if nx and not give then
        -- Another holder has the key here (a failed attempt's or install's token, say): the
        -- engine named is named here too — taken off the order and the park, nothing installed
        -- — so that this master's order stays the others' (an engine left in it would be
        -- named by this master alone, its stale parked token installed by a later attempt:
        -- lib/core/fair/README.md, "One order on every master").
        redis.call('ZREM', q, nx)
        if pk then redis.call('HDEL', pk, nx) end
      elseif nx then
        redis.call('ZREM', q, nx)
        local inst = nil
        ${INSTALL_LUA}
        if inst then
          to = '${RESERVED_SEP}' .. nx .. inst
        else
          redis.call('ZADD', q, -1, ${num('now + tonumber(ARGV[4])')} .. ':' .. nx)
          to = '${RESERVED_SEP}' .. nx
        end
      end
      if ARGV[5] and ARGV[5] ~= '' then
        redis.call('ZADD', q, 'NX', ARGV[5], me)
        -- Never an order without expiry (the ZADD may have made it): at least ARGV[6] ms.
        local keep = tonumber(ARGV[6])
        if redis.call('PTTL', q) < keep then redis.call('PEXPIRE', q, keep) end
        if pk and ARGV[7] ~= '' then
          ${parkLua('pk', 'ARGV[7]', 'ARGV[8]', 'ARGV[9]', 'keep')}
        end
      end
    end
    -- (Where the key was free, only an engine named is announced: nothing was released.)
    if mine or to ~= '' then
      ${publishLua('KEYS[i]', 'to')}
    end
  end
end
return deleted
`,
  {
    keys: [
      { name: 'lock keys (n: ARGV[3], else #KEYS)', count: 'n' },
      { name: 'order keys', count: 'n', when: 'ARGV[3]' },
      { name: 'park keys', count: 'n', when: 'ARGV[7]', withPrevious: true },
      { name: 'fencing counters', count: 'n', when: "ARGV[10] == '1'", withPrevious: true },
      { name: 'boot marker', last: true, when: "ARGV[12] ~= '0'" },
    ],
    argv: [
      { name: 'token' },
      {
        name:
          "publish flag: '0' none, '1' a release, '2' a clean-up (`~token`), '3' a yield " +
          "(`^token`), '4' a pass",
      },
      { name: 'n: the number of lock keys', when: 'ordered yields and passes (order keys)' },
      { name: 'reserve (ms): how long a yield reserves the key', when: 'with ARGV[3]' },
      {
        name: "waitSince (wall ms; '' a pass): the yielding engine joins the order",
        when: 'with ARGV[3]',
      },
      { name: 'keep (ms): how long the order lives at least', when: 'with ARGV[3]' },
      { name: "park token: the yielding engine's next token ('' none)", when: 'the park keys' },
      { name: 'park ttl (ms)', when: 'the park keys' },
      { name: 'park life (ms)', when: 'the park keys' },
      { name: "fencing flag: '1' an install increments the counters", when: 'the park keys' },
      { name: 'fencing counter ttl (ms)', when: 'the park keys' },
      { name: "marker flag: '1' an install reads the boot marker", when: 'the park keys' },
      { name: "alive prefix: the alive channels' ('' not checked)", when: 'the park keys' },
      {
        name: "after: the token whose yield or pass installed this lock ('' none)",
        when: 'the park keys',
      },
    ],
    reply: 'the number of keys deleted',
  },
);

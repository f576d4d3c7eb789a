/**
 * The end of a writer-waiting flag (base/keys.ts `waitKey`, docs/lock-kinds.md "Writer
 * starvation policy"). A plain lock refused by shared readers raises the flag
 * (mutex-among-kinds.ts `refusedLua`); it ends when its writer is granted ({@link writerGrantedLua},
 * in the acquire scripts' granted path) or gives up ({@link WRITER_GAVE_UP_SCRIPT}, sent by the
 * store when a retrying plain acquire ends without a lock: redis/writer-flag.ts) — not when the
 * readers it waited for would have expired, which kept new readers out for up to their whole ttl
 * after the writer had come and gone.
 */
import { ENGINE_ID_LENGTH } from '../../base/token';
import { script } from '../scripts/kind-lua';

/**
 * Lua for the plain lock's acquire scripts' granted path (the local `n` and the arguments of
 * those scripts; redis/kinds/mutex.ts and mutex-among-kinds.ts run it for a retry, the fair acquire
 * for every attempt but a take-over): when `flagged` (a Lua condition: the flags are then
 * KEYS[w0 + 1 .. w0 + n], after the lock keys and the fencing counters), deletes them where it is
 * granted. Its flag, or another writer's: this master now holds the resource as a
 * plain lock, which refuses new readers by itself, and a writer still waiting raises its flag
 * again at its next refusal by readers. Its release announcement then wakes the readers, which
 * find no flag left. A master where it was refused keeps its flag until it expires or the writer
 * gives up. `fencing` (a Lua condition) says whether the fencing counters come before the flags
 * (the mutex's ARGV[3] also carries the clock flag: redis/kinds/mutex.ts).
 */
export const writerGrantedLua = (flagged: string, fencing = "ARGV[3] == '1'"): string => `
if ${flagged} then
  local w0 = n
  if ${fencing} then w0 = 2 * n end
  -- (Read first: nothing is written where no flag is up, the common case.)
  if redis.call('EXISTS', unpack(KEYS, w0 + 1, w0 + n)) > 0 then
    redis.call('DEL', unpack(KEYS, w0 + 1, w0 + n))
  end
end`;

/**
 * A retrying plain acquire ended without a lock (it timed out, ran out of retries, was aborted):
 * takes down each writer-waiting flag that its engine raised (the flag holds the token of the
 * writer attempt that raised it; tokens start with the engine id: lib/core/base/token.ts). A flag
 * another engine raised is left alone; one this engine raised and another writer lengthened is
 * taken down too, and that writer raises it again at its next refusal by readers.
 *
 * KEYS, ARGV, reply: the layout below (docs/scripts.md).
 */
export const WRITER_GAVE_UP_SCRIPT = script(
  'writer-gave-up',
  `
local deleted = 0
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'string' and string.sub(v, 1, ${ENGINE_ID_LENGTH}) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    deleted = deleted + 1
  end
end
return deleted
`,
  {
    keys: [{ name: 'writer-waiting flags', count: 'rest' }],
    argv: [{ name: 'engine id' }],
    reply: 'the number of flags deleted',
  },
);

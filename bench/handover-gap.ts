/**
 * Probe (not a side-by-side scenario): where the time between two holders goes in one process.
 * 16 callers take one resource in turns (held 1 ms, as in the benchmark's contended scenario), for
 * 3 s on 5 fresh masters; from the second second on, for each grant, the gap from the previous
 * holder's `release()` call to this grant, and inside it (by the `EVALSHA`s the client sends and
 * the replies it reads): the first send, the third reply, and the grant after the last reply read
 * before it.
 *
 *   npx ts-node --transpile-only bench/handover-gap.ts [contender id: ours] [show]
 *
 * RD=10 for a 10 ms retry delay (default: 200 ms, where the other libraries' releasing caller
 * takes the lock again while the others sleep). `show` prints the sends and replies of a few
 * gaps.
 */
import Redis from 'ioredis';
import type { Command } from 'ioredis';
import { RedisMasters } from '../test/harness/redis-masters';
import { CONTENDER_IDS, isUnavailable, makeContender } from './contenders';
import type { ContenderId } from './contenders';
import { FAST_RETRY, SLOW_RETRY } from './config';

const marks: [number, string][] = [];
let on = false;

type Send = (this: Redis, cmd: Command, stream?: unknown) => unknown;
const proto = Redis.prototype as unknown as { sendCommand: Send };
const send = proto.sendCommand;
proto.sendCommand = function (this: Redis, cmd: Command, stream?: unknown): unknown {
  if (!on || cmd.name !== 'evalsha') return send.call(this, cmd, stream);
  const what = `${String(cmd.args[0]).slice(0, 6)}@${this.options.port ?? '?'}`;
  marks.push([performance.now(), `send ${what}`]);
  const out = send.call(this, cmd, stream);
  cmd.promise.then(
    () => marks.push([performance.now(), `reply ${what}`]),
    () => undefined,
  );
  return out;
};

const quantile = (a: readonly number[], p: number): string => {
  const s = [...a].sort((x, y) => x - y);
  const v = s[Math.floor(p * (s.length - 1))];
  return v === undefined ? '-' : v.toFixed(3);
};

async function main(): Promise<void> {
  const id = (process.argv[2] ?? 'ours') as ContenderId;
  if (!CONTENDER_IDS.includes(id)) throw new Error(`unknown contender ${id}`);
  const show = process.argv[3] === 'show';
  const retry = process.env.RD === '10' ? FAST_RETRY : SLOW_RETRY;
  const masters = await RedisMasters.start(5);
  const clients = masters.createClients();
  try {
    await RedisMasters.ready(clients);
    const c = await makeContender(id, clients, retry, true);
    if (isUnavailable(c)) throw new Error(c.reason);
    await c.ready?.(120_000);
    const gap: number[] = [];
    const firstSend: number[] = [];
    const thirdReply: number[] = [];
    const toGrant: number[] = [];
    let released = 0;
    let shown = 0;
    const end = performance.now() + 3000;
    const worker = async (): Promise<void> => {
      while (performance.now() < end) {
        const held = await c.lock('res');
        const t = performance.now();
        if (on && released > 0) {
          gap.push(t - released);
          const inGap = marks.filter(([at]) => at >= released && at <= t);
          const sends = inGap.filter(([, m]) => m.startsWith('send'));
          const replies = inGap.filter(([, m]) => m.startsWith('reply'));
          if (sends.length > 0) firstSend.push(sends[0][0] - released);
          if (replies.length >= 3) thirdReply.push(replies[2][0] - released);
          if (replies.length > 0) toGrant.push(t - replies[replies.length - 1][0]);
          if (show && shown < 4 && gap.length % 200 === 0) {
            shown++;
            console.log(inGap.map(([at, m]) => `${(at - released).toFixed(3)} ${m}`).join(' | '));
          }
        }
        marks.length = 0;
        await new Promise((r) => setTimeout(r, 1));
        released = performance.now();
        await held.release();
      }
    };
    const start = setTimeout(() => (on = true), 1000);
    await Promise.all(Array.from({ length: 16 }, worker));
    clearTimeout(start);
    const row = (name: string, a: readonly number[]): void =>
      console.log(
        `${name.padEnd(18)} n ${String(a.length).padStart(5)}  p25 ${quantile(a, 0.25)}  p50 ${quantile(a, 0.5)}  p75 ${quantile(a, 0.75)}  p90 ${quantile(a, 0.9)}  ms`,
      );
    console.log(`${c.label}, 1 × 16, retry ${retry.retryDelay} ms`);
    row('release → grant', gap);
    row('release → 1st send', firstSend);
    row('release → 3rd reply', thirdReply);
    row('last reply → grant', toGrant);
    await c.close();
  } finally {
    for (const cl of clients) cl.disconnect();
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});

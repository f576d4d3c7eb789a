/**
 * Reads the MONITOR log of `bench/mp-trace.ts` (`MON=<file>`) and replays each master's order of
 * the probe's resource (ZADD, ZREM, ZREMRANGEBYSCORE inside the scripts) to find the passes the
 * masters ran for different engines (`PUBLISH ^<released token>:<engine>…` naming another engine
 * on some master), and prints, for the first `N` (1) of them, every master's scripts and order
 * changes in the `MS` ms (30) before: which master's order was out of step, and since when.
 *
 *   MON=/tmp/mon.txt E=4 npx ts-node --transpile-only bench/mp-trace.ts
 *   N=3 npx ts-node --transpile-only bench/mon-orders.ts /tmp/mon.txt
 *
 * Written for the fair mode (lib/core/fair/README.md, "A pass read before the pass it follows"): it showed
 * a pass that a descheduled master read before the pass that had installed its lock elsewhere.
 */
import { readFileSync } from 'node:fs';

const ORDER = 'lock:order:{mp-resource}';
const KEY = 'lock:{mp-resource}';

interface Line {
  readonly t: number;
  readonly text: string;
}

function main(): void {
  const file = process.argv[2];
  if (!file) throw new Error('usage: mon-orders.ts <MON file of bench/mp-trace.ts>');
  const shown = Number(process.env.N ?? 1);
  const window = Number(process.env.MS ?? 30) / 1000;
  const orders: Map<string, number>[] = [];
  const history: Line[][] = [];
  // Released token -> per master, the engine its pass named there (and when).
  const named = new Map<string, Map<number, { engine: string; t: number }>>();
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const [time, master, source, command, ...args] = raw.split(' ');
    if (!command) continue;
    const t = Number(time);
    const m = Number(master.slice(1));
    const order = (orders[m] ??= new Map());
    const log = (history[m] ??= []);
    const cmd = command.toUpperCase();
    if (source === 'C') {
      const keys = Number(args[1]);
      const argv = args.slice(2 + keys);
      log.push({
        t,
        text: `script ${args[0].slice(0, 6)} token ${argv[0]?.slice(0, 16)} ${argv[1]}`,
      });
      continue;
    }
    if (args[0] === ORDER && cmd === 'ZADD') {
      const nx = args.some((a) => a.toUpperCase() === 'NX');
      const [score, member] = args.slice(1).filter((a) => a.toUpperCase() !== 'NX');
      if (!(nx && order.has(member))) order.set(member, Number(score));
      log.push({ t, text: `ZADD${nx ? ' NX' : ''} ${member.slice(0, 16)} ${score}` });
    } else if (args[0] === ORDER && cmd === 'ZREM') {
      for (const member of args.slice(1)) {
        log.push({ t, text: `ZREM ${member.slice(0, 16)}${order.has(member) ? '' : ' (absent)'}` });
        order.delete(member);
      }
    } else if (args[0] === ORDER && cmd === 'ZREMRANGEBYSCORE') {
      for (const [member, score] of order) if (score <= -1) order.delete(member);
    } else if (args[0] === KEY && cmd === 'PUBLISH' && args[1]?.startsWith('^')) {
      const [released, engine = '-'] = args[1].slice(1).split(':');
      const perMaster = named.get(released) ?? new Map<number, { engine: string; t: number }>();
      named.set(released, perMaster.set(m, { engine, t }));
      log.push({ t, text: `PUBLISH ^${released.slice(0, 16)} names ${engine.slice(0, 12)}` });
    }
  }
  const split = [...named].filter(
    ([, per]) => new Set([...per.values()].map((v) => v.engine)).size > 1,
  );
  console.log(
    `${named.size} passes announced, ${split.length} named different engines on different masters`,
  );
  for (const [released, per] of split.slice(0, shown)) {
    const t0 = Math.min(...[...per.values()].map((v) => v.t));
    const names = [...per].map(([m, v]) => `m${m} ${v.engine.slice(0, 12)}`).join(', ');
    console.log(`\n^${released.slice(0, 16)}: ${names}`);
    history.forEach((lines, m) => {
      console.log(`  m${m}`);
      for (const l of lines) {
        if (l.t > t0 - window && l.t <= t0 + 0.004) {
          console.log(`    ${((l.t - t0) * 1000).toFixed(3).padStart(8)} ms  ${l.text}`);
        }
      }
    });
  }
}

main();

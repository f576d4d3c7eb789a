/**
 * Which files of lib/ run during one uncontended `acquire` + `release` of a plain lock (the
 * "plain path" of docs/architecture.md): V8's precise coverage, taken around one warm
 * acquire + release on 3 real masters, lists every lib/ file in which a function ran.
 *
 *   npx ts-node --transpile-only scripts/plain-path.ts [across-processes] [--functions] [--json]
 *
 * Run by test/core/plain-path-files.spec.ts, which holds the path to its bounds.
 */
import { Session } from 'node:inspector/promises';
import { relative } from 'node:path';
import { RedisMasters } from '../test/harness/redis-masters';
import { Redlock } from '../lib/core';
import type { Fairness } from '../lib/core/base/settings';

const ROOT = relative(process.cwd(), `${__dirname}/..`) || '.';

async function main(): Promise<void> {
  const fairness: Fairness = process.argv.includes('across-processes')
    ? 'across-processes'
    : 'local';
  const masters = await RedisMasters.start(3);
  const clients = masters.createClients();
  await RedisMasters.ready(clients);
  const engine = new Redlock(clients, { fairness, quarantine: false });
  const session = new Session();
  session.connect();
  try {
    // Warm: the masters' scripts loaded, the boot markers learnt, every lazy table built.
    for (let i = 0; i < 5; i++) await (await engine.acquire('plain-path')).release();
    await session.post('Profiler.enable');
    await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    await session.post('Profiler.takePreciseCoverage'); // reset the counts
    await (await engine.acquire('plain-path')).release();
    const { result } = await session.post('Profiler.takePreciseCoverage');
    const files = new Set<string>();
    for (const script of result) {
      const path = script.url.replace(/^file:\/\//, '');
      const rel = relative(`${process.cwd()}/${ROOT}`, path);
      if (!rel.startsWith('lib/')) continue;
      // Functions that ran (the module's own top-level code, named '', ran at load).
      const ran = script.functions.filter((f) => f.functionName !== '' && f.ranges[0].count > 0);
      if (ran.length === 0) continue;
      files.add(
        process.argv.includes('--functions')
          ? `${rel}: ${ran.map((f) => f.functionName).join(', ')}`
          : rel,
      );
    }
    const list = [...files].sort();
    if (process.argv.includes('--json')) process.stdout.write(JSON.stringify(list) + '\n');
    else process.stdout.write(`${list.length} files\n${list.join('\n')}\n`);
  } finally {
    await session.post('Profiler.stopPreciseCoverage').catch(() => undefined);
    session.disconnect();
    await engine.close();
    await masters.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});

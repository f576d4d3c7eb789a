import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { repoPath } from '../harness/paths';
import { waitUntil } from './helpers';

/**
 * The README's command to run the sample app: `npm run sample` starts the sample shop as a native ES module app (as
 * `nest new` scaffolds them since Nest 12) with five masters of its own, answers `GET /health`
 * and a `@Locked` route (an order paid once under its lock), and shuts down cleanly on SIGTERM.
 * The command is read from package.json, so the test runs what the README promises; it is started
 * through `sh -c 'exec …'` (not through npm) so that SIGTERM reaches the app itself, as it would
 * from a process manager.
 */
describe('npm run sample', () => {
  let child: ChildProcess | undefined;
  let output = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  afterEach(async () => {
    if (child && !exit) {
      child.kill('SIGKILL');
      await waitUntil(() => exit !== undefined, 10_000, 'the sample process to exit');
    }
  });

  it('runs the sample as an ES module app that locks and stops on SIGTERM', async () => {
    const { scripts } = JSON.parse(readFileSync(repoPath('package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    child = spawn('/bin/sh', ['-c', `exec ${scripts.sample}`], {
      cwd: repoPath(),
      // PORT / RPC_PORT 0: free ports (other suites run beside this one). No REDLOCK_URLS: the
      // sample starts its own masters, as on a fresh machine.
      env: { ...process.env, PORT: '0', RPC_PORT: '0', REDLOCK_URLS: '', SAMPLE_OTEL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', (code, signal) => (exit = { code, signal }));

    const banner = /Sample shop \((\w+), ([^)]+)\) on (http:\/\/[\d.:]+)/;
    await waitUntil(
      () => banner.test(output) || exit !== undefined,
      90_000,
      'the sample to print its banner',
    );
    const match = banner.exec(output);
    if (!match)
      throw new Error(`the sample did not start (exit ${JSON.stringify(exit)}):\n${output}`);
    const [, platform, moduleSystem, url] = match;
    expect(platform).toBe('express');
    expect(moduleSystem).toBe('ES module');

    // On a loaded machine a lock round can miss its per-node timeouts (503, no quorum; nothing
    // was done then): such answers are retried until a deadline, anything else fails at once.
    const until = async (
      call: () => Promise<Response>,
      expected: number,
      retryOn: number,
    ): Promise<Response> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const res = await call();
        if (res.status !== retryOn || Date.now() > deadline) {
          expect(res.status).toBe(expected);
          return res;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const health = await until(() => fetch(`${url}/health`), 200, 503);
    expect(
      ((await health.json()) as { info: { locks: { status: string } } }).info.locks.status,
    ).toBe('up');

    const created = await until(
      () =>
        fetch(`${url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sku: 'coffee', qty: 1 }),
        }),
      201,
      503,
    );
    const { id } = (await created.json()) as { id: string };
    // POST /orders/:id/pay is @Locked('order:{params.id}') and charges once under the lock.
    await until(() => fetch(`${url}/orders/${id}/pay`, { method: 'POST' }), 201, 503);
    const charges = (await (await fetch(`${url}/orders/${id}/charges`)).json()) as unknown[];
    expect(charges).toHaveLength(1);

    child.kill('SIGTERM');
    await waitUntil(() => exit !== undefined, 30_000, 'the sample to exit after SIGTERM');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(output).toContain('SIGTERM: shutting down');
  }, 150_000);
});

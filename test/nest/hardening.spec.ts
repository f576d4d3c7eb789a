/**
 * Hardening of the Nest layer against real masters:
 * - item 1: Nest shutdown past `shutdownTimeout` aborts the signal of a running `@Locked()`
 *   provider call and `using()` routine (and of plain locks) before their keys are deleted;
 * - item 3: a password never appears in bootstrap errors, log lines, health output, events or
 *   engine errors, whatever characters it holds (`#`, `/`, `?`, `@`, `:`, spaces, `%`, unicode).
 */
import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import type { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { jest } from '@jest/globals';
import Redis from 'ioredis';
import { normalizeRedisUrl, redactText, redactUrl, urlCredentials } from '../../lib/clients';
import { InvalidConfigurationError, LockLostError } from '../../lib/core/base/errors';
import { Redlock } from '../../lib/core/redlock';
import { RELEASE_SCRIPT } from '../../lib/core/redis/scripts/release';
import { Locked } from '../../lib/decorators/locked.decorator';
import type { LockContext } from '../../lib/interfaces';
import { RedlockModule } from '../../lib/redlock.module';
import { RedlockService } from '../../lib/redlock.service';
import { RedisMasters, freePort } from '../harness/redis-masters';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

/** A Nest logger that records every line (with the extra arguments: stacks, contexts). */
class RecordingLogger implements LoggerService {
  readonly lines: string[] = [];
  private record(m: unknown, rest: unknown[]): void {
    this.lines.push(
      [m, ...rest]
        .map((x) => (x instanceof Error ? `${x.message}\n${x.stack}` : String(x)))
        .join(' '),
    );
  }
  log(m: unknown, ...rest: unknown[]): void {
    this.record(m, rest);
  }
  error(m: unknown, ...rest: unknown[]): void {
    this.record(m, rest);
  }
  warn(m: unknown, ...rest: unknown[]): void {
    this.record(m, rest);
  }
  debug(m: unknown, ...rest: unknown[]): void {
    this.record(m, rest);
  }
  verbose(m: unknown, ...rest: unknown[]): void {
    this.record(m, rest);
  }
}

let masters: RedisMasters;
let probe: Redis[];
const opened: INestApplicationContext[] = [];

async function boot(
  imports: Parameters<typeof Test.createTestingModule>[0]['imports'],
  providers: Parameters<typeof Test.createTestingModule>[0]['providers'] = [],
  logger: LoggerService = new RecordingLogger(),
): Promise<INestApplicationContext> {
  const builder = Test.createTestingModule({ imports, providers });
  builder.setLogger(logger);
  const moduleRef = await builder.compile();
  await moduleRef.init();
  opened.push(moduleRef);
  return moduleRef;
}

async function closeNow(ctx: INestApplicationContext): Promise<void> {
  opened.splice(opened.indexOf(ctx), 1);
  await ctx.close();
}

beforeAll(async () => {
  masters = await RedisMasters.start(3);
  probe = masters.createClients();
  await RedisMasters.ready(probe);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((m) => m.close()));
});

afterAll(async () => {
  await masters?.stop();
});

describe('item 1: shutdown past shutdownTimeout aborts signals before releasing', () => {
  const gates = new Map<string, Promise<void>>();
  const contexts = new Map<string, LockContext>();

  @Injectable()
  class Jobs {
    constructor(private readonly redlock: RedlockService) {}

    /** Holds its lock until its gate opens or its signal aborts; reports whether it aborted. */
    @Locked('job:{args.0}')
    async run(id: string): Promise<boolean> {
      const ctx = this.redlock.current() as LockContext;
      contexts.set(id, ctx);
      await Promise.race([
        gates.get(id),
        new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)),
      ]);
      return ctx.signal.aborted;
    }
  }

  it('@Locked() provider call, using() routine and plain lock: aborted first, then released', async () => {
    const ctx = await boot(
      [
        RedlockModule.forRoot({
          clients: masters.urls,
          quarantine: false,
          requestTimeout: 500,
          shutdownTimeout: 100,
        }),
      ],
      [Jobs],
    );
    const svc = ctx.get(RedlockService);
    const spies = svc.clients.map((c) => jest.spyOn(c as Redis, 'evalsha'));
    const releasesSent = (): number =>
      spies.reduce(
        (n, spy) => n + spy.mock.calls.filter((call) => call[0] === RELEASE_SCRIPT.sha).length,
        0,
      );
    const atAbort: Record<string, number> = {};
    const watch = (name: string, signal: AbortSignal): void =>
      signal.addEventListener('abort', () => (atAbort[name] = releasesSent()));

    const id = uniqueResource('job');
    let openGate!: () => void;
    gates.set(id, new Promise<void>((resolve) => (openGate = resolve)));
    const job = ctx.get(Jobs).run(id);
    await waitUntil(() => contexts.has(id));
    watch('locked', (contexts.get(id) as LockContext).signal);

    const routineResource = uniqueResource('routine');
    let routineSignal: AbortSignal | undefined;
    let stopRoutine!: () => void;
    const routineStopped = new Promise<void>((resolve) => (stopRoutine = resolve));
    const routine = svc.using(routineResource, async (signal) => {
      routineSignal = signal;
      watch('using', signal);
      await Promise.race([
        routineStopped,
        new Promise((resolve) => signal.addEventListener('abort', resolve)),
      ]);
      return signal.aborted;
    });
    await waitUntil(() => routineSignal !== undefined);

    const plainResource = uniqueResource('plain');
    const plain = await svc.acquire(plainResource);
    watch('plain', plain.signal);

    expect(releasesSent()).toBe(0);
    await closeNow(ctx); // waits shutdownTimeout (100 ms) for the calls, then closes the engine
    openGate();
    stopRoutine();
    expect(await job).toBe(true);
    expect(await routine).toBe(true);
    expect(plain.signal.aborted).toBe(true);
    expect(plain.signal.reason).toBeInstanceOf(LockLostError);
    expect(atAbort).toEqual({ locked: 0, using: 0, plain: 0 });
    for (const r of [`job:${id}`, routineResource, plainResource]) {
      expect(await valuesOn(probe, svc.engine.keyOf(r))).toEqual([null, null, null]);
    }
  });
});

describe('item 3: passwords never leak', () => {
  /** Separators that cut naive URL parsing and redaction short. */
  const SEPARATORS = [
    '#',
    '/',
    '?',
    '@',
    ':',
    ' ',
    '\t',
    '%41',
    '%2F',
    '%zz',
    '%',
    'é',
    '密码',
    '😀',
    '"',
    "'",
    '<',
    '>',
    '\\',
    '&x=',
    ';',
    '=',
    '+',
    '://',
    '@@',
    '[',
    ']',
    '{',
    '}',
    '|',
    '`',
    ',',
    '\n',
  ];

  /** A password made of distinctive chunks (`Q<n>x<i>`) joined by awkward separators. */
  function awkward(n: number, seps: readonly string[]): { password: string; chunks: string[] } {
    const chunks = Array.from({ length: seps.length + 1 }, (_, i) => `Q${n}x${i}`);
    return {
      password: chunks.map((c, i) => (i < seps.length ? c + seps[i] : c)).join(''),
      chunks,
    };
  }

  /** Deterministic pseudo-random generator (a property test that reproduces). */
  function prng(seed: number): () => number {
    let s = seed >>> 0;
    return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  }

  function expectClean(texts: readonly string[], chunks: readonly string[], what: string): void {
    const all = texts.join('\n');
    for (const c of chunks) {
      if (all.includes(c)) throw new Error(`${what} shows part "${c}" of the password:\n${all}`);
    }
  }

  it('redactUrl / redactText hide every part of 2,000 generated passwords', () => {
    const rand = prng(15);
    for (let n = 0; n < 2000; n++) {
      const seps = Array.from(
        { length: 1 + Math.floor(rand() * 4) },
        () => SEPARATORS[Math.floor(rand() * SEPARATORS.length)],
      );
      const { password, chunks } = awkward(n, seps);
      const url = `redis://hardy:${password}@127.0.0.1:6390/2`;
      expect(redactUrl(url)).toBe('redis://hardy:***@127.0.0.1:6390/2');
      const text = `Error: connect to ${url} failed; retrying ${url.replace('redis', 'rediss')}`;
      // What the library does (it knows its clients' passwords)...
      expectClean([redactText(text, [password])], chunks, 'redactText with the known secret');
      // ...and without knowing them, except where two URLs and one are indistinguishable.
      // (A password with a URL-starting delimiter followed by `word://` reads as two URLs.)
      if (!/[\s"'(<[{=,;].*:\/\//s.test(password)) {
        expectClean([redactText(text)], chunks, 'redactText');
      }
      expect(redactUrl(`redis://:${password}@h:1`)).toBe('redis://:***@h:1');
      if (!password.includes(':')) {
        // A lone user info may be a password for some clients: hidden whole.
        expect(redactUrl(`redis://${password}@h:1`)).toBe('redis://***@h:1');
      }
      expectClean(
        [redactUrl(`redis://h:1/0?password=${encodeURIComponent(password)}`)],
        chunks,
        'query',
      );
      // The password reaches the server as written (percent-escapes decoded when valid).
      const creds = urlCredentials(normalizeRedisUrl(url));
      expect(creds?.username).toBe('hardy');
      expect(creds?.password).toBe(urlCredentials(url)?.password);
      expect(new URL(normalizeRedisUrl(url)).hostname).toBe('127.0.0.1');
    }
  });

  /**
   * Awkward passwords for the real server: each separator at least once — except `#`, `/` and
   * `?` unencoded, which end a URL's user info: such a URL is a configuration error
   * (client-url-password.spec.ts).
   */
  const table = SEPARATORS.filter((s) => s !== '\n' && !/[#/?]/.test(s)).map((sep, i) =>
    awkward(100 + i, [sep, i % 2 ? ' ' : '@']),
  );
  /** What the server must accept for a URL password (valid percent-escapes are decoded). */
  const serverPassword = (p: string): string => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  };

  let secured: RedisMasters;
  let port: number;
  beforeAll(async () => {
    secured = await RedisMasters.start(1);
    port = secured.masters[0].port;
    const admin = secured.createClients()[0];
    await RedisMasters.ready([admin]);
    await admin.call(
      'ACL',
      'SETUSER',
      'hardy',
      'on',
      ...table.map(({ password }) => `>${serverPassword(password)}`),
      '~*',
      '&*',
      '+@all',
    );
  });
  afterAll(async () => {
    await secured?.stop();
  });

  it.each(table.map((t) => [JSON.stringify(t.password), t] as const))(
    'password %s: boots, locks, and shows up nowhere',
    async (_label, { password, chunks }) => {
      const url = `redis://hardy:${password}@127.0.0.1:${port}`;
      const deadPort = await freePort();
      const deadUrl = `redis://hardy:${password}@127.0.0.1:${deadPort}`;
      const wrongUrl = `redis://hardy:${password}x@127.0.0.1:${port}`;
      const logger = new RecordingLogger();
      const seen: string[] = [];

      // Right password: authenticates with the password as written, and locks.
      const ok = await boot(
        [RedlockModule.forRoot({ clients: [url], quarantine: false, requestTimeout: 500 })],
        [],
        logger,
      );
      const svc = ok.get(RedlockService);
      expect(svc.masterNames).toEqual([`redis://hardy:***@127.0.0.1:${port}`]);
      svc.engine.observe((e) =>
        seen.push(
          JSON.stringify({
            ...e,
            lock: undefined,
            error: e.type === 'failed' ? e.error.message : undefined,
          }),
        ),
      );
      const lock = await svc.acquire(uniqueResource('pw'));
      await svc.release(lock);
      seen.push(JSON.stringify(await svc.engine.health()));

      // A master down and a wrong password: logged (redacted), health shows the errors.
      const bad = await boot(
        [
          RedlockModule.forRoot({
            clients: [wrongUrl, deadUrl],
            quarantine: false,
            requestTimeout: 500,
            quorum: 1,
          }),
        ],
        [],
        logger,
      );
      await waitUntil(() => logger.lines.some((l) => /WRONGPASS|invalid username/i.test(l)));
      await waitUntil(() => logger.lines.some((l) => l.includes(`127.0.0.1:${deadPort}`)));
      const badSvc = bad.get(RedlockService);
      seen.push(JSON.stringify(badSvc.masterNames), JSON.stringify(await badSvc.engine.health()));
      seen.push(
        String(
          await badSvc
            .acquire(uniqueResource('pw-bad'), { retryCount: 0 })
            .catch((e: Error) => `${e.message}\n${e.stack}\n${JSON.stringify(e)}`),
        ),
      );

      // Bootstrap errors: a URL without host, an engine given URL strings.
      for (const broken of [
        `redis://hardy:${password}@`,
        `redis://hardy:${password}@127.0.0.1:notaport`,
      ]) {
        const err = await boot([RedlockModule.forRoot({ clients: [broken] })], [], logger).catch(
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(InvalidConfigurationError);
        seen.push(`${(err as Error).message}\n${(err as Error).stack}\n${JSON.stringify(err)}`);
      }
      let engineError: unknown;
      try {
        new Redlock([url, url, url] as never);
      } catch (e) {
        engineError = e;
      }
      expect(engineError).toBeInstanceOf(InvalidConfigurationError);
      seen.push(`${(engineError as Error).message}\n${(engineError as Error).stack}`);
      expect((engineError as Error).message).not.toContain('127.0.0.1');

      await closeNow(bad);
      await closeNow(ok);
      expectClean(logger.lines, chunks, 'the Nest log');
      expectClean(seen, chunks, 'errors, events and health output');
    },
  );
});

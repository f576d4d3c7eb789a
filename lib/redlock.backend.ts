import { Logger } from '@nestjs/common';
import { Redlock } from './core';
import type { RedlockClient } from './core';
import { createClients, redactText } from './clients';
import type { ResolvedRedlockModuleOptions } from './interfaces';
import { engineSettingsOf } from './options';
import { REDLOCK_LOGGER_CONTEXT } from './redlock.constants';
import { logLockEvents } from './redlock.logging';
import { instrumentRedlock, loadOpenTelemetry } from './telemetry/opentelemetry';

/**
 * What the Nest layer runs on (injected under `REDLOCK_BACKEND`): an engine, the connections it
 * uses, and how to close both. The module builds it on Redis masters ({@link redisBackend}); the
 * testing module on the in-memory engine.
 */
export interface RedlockBackend {
  readonly engine: Redlock;
  /** The clients, one per master (none in memory). */
  readonly clients: readonly RedlockClient[];
  /** Display names of the masters, passwords redacted. */
  readonly names: readonly string[];
  /** Removes the known secrets of the connections from a text. */
  redact(text: string): string;
  /** Closes the engine (releasing what it holds), its observers, then the connections it created. */
  close(): Promise<void>;
}

/**
 * Attaches the module's observers to an engine: the lock log lines, and OpenTelemetry as the
 * `telemetry` option says. Returns a function that detaches them.
 */
export function observeEngine(
  engine: Redlock,
  options: ResolvedRedlockModuleOptions,
  logger: Logger,
): () => void {
  const stops = [logLockEvents(engine, logger)];
  const telemetry = options.telemetry;
  if (telemetry !== false && (telemetry !== 'auto' || loadOpenTelemetry() !== undefined)) {
    stops.push(instrumentRedlock(engine, telemetry === 'auto' ? {} : telemetry));
  }
  return () => {
    for (const stop of stops.splice(0)) stop();
  };
}

/** The engine on the configured Redis masters, with the connections the options ask for. */
export function redisBackend(options: ResolvedRedlockModuleOptions): RedlockBackend {
  const logger = new Logger(REDLOCK_LOGGER_CONTEXT);
  const connections = createClients(options.clients, options.clientOptions, {
    warn: (m) => logger.warn(m),
    log: (m) => logger.log(m),
  });
  const redact = (text: string): string => redactText(text, connections.secrets);
  let unobserve = (): void => undefined;
  try {
    const engine = new Redlock(connections.clients, {
      ...engineSettingsOf(options),
      logger: { warn: (m) => logger.warn(redact(m)), debug: (m) => logger.debug(redact(m)) },
    });
    unobserve = observeEngine(engine, options, logger);
    return {
      engine,
      clients: connections.clients,
      names: connections.names,
      redact,
      close: async () => {
        try {
          await engine.close();
        } finally {
          unobserve();
          await connections.close();
        }
      },
    };
  } catch (err) {
    unobserve();
    void connections.close();
    throw err;
  }
}

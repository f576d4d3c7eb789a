import type { LoggerService } from '@nestjs/common';
import { NoQuorumError, WaitTimeoutError } from './core';
import type { Redlock, RedlockEvent } from './core';
import { redactText } from './clients';
import { lockLostMessage, noQuorumMessage } from './redlock.messages';

/** At most one "no quorum" warning per this many ms (the others are counted and summarized). */
export const NO_QUORUM_LOG_INTERVAL = 10_000;

/**
 * Logs what an operator must see, through Nest's logger: a lost lock (warn, each time: the
 * protected work may have overlapped with another holder's) and acquisitions that failed for
 * lack of a quorum (warn, at most one line per {@link NO_QUORUM_LOG_INTERVAL} with a count of
 * the suppressed ones — an outage must not flood the logs). Contention, grants, releases and
 * extensions are business as usual and are not logged: use `engine.observe()` or the
 * OpenTelemetry integration for them. Returns a function that stops logging.
 */
export function logLockEvents(
  engine: Redlock,
  logger: Pick<LoggerService, 'warn'>,
  now: () => number = Date.now,
): () => void {
  let lastNoQuorum = -Infinity;
  let suppressed = 0;
  return engine.observe((event: RedlockEvent) => {
    if (event.type === 'lost') {
      logger.warn(lockLostMessage(redactText(event.reason.message), event.holdTime));
      return;
    }
    if (event.type !== 'failed') return;
    const { error } = event;
    const cause = error instanceof WaitTimeoutError ? error.cause : error;
    if (!(cause instanceof NoQuorumError)) return;
    const t = now();
    if (t - lastNoQuorum < NO_QUORUM_LOG_INTERVAL) {
      suppressed++;
      return;
    }
    lastNoQuorum = t;
    logger.warn(noQuorumMessage(redactText(cause.message), suppressed));
    suppressed = 0;
  });
}

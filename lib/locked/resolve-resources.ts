import { Logger } from '@nestjs/common';
import { InvalidArgumentError, InvalidConfigurationError } from '../core';
import { REDLOCK_LOGGER_CONTEXT } from '../redlock.constants';
import { INVALID_LOCK_RESOURCE_MESSAGE, unresolvedResourceMessage } from '../redlock.messages';
import {
  MAX_RESOURCE_LENGTH,
  checkResourceName,
  describe,
  isWellFormed,
} from '../core/base/validate';
import type { LockedCallContext, LockedResources } from '../interfaces';

/** Roots a `{placeholder}` may start with. */
export const PLACEHOLDER_ROOTS = ['args', 'params', 'query', 'body', 'data'] as const;

const PLACEHOLDER = /\{([^{}]*)\}/g;

/**
 * A `@Locked()` resource that could not be computed for one call (an {@link InvalidArgumentError},
 * field `resources`). Its message names the template, placeholder and method, for the server's
 * log and the callers of provider methods; {@link clientMessage} is what an HTTP / RPC / WS client
 * is told: only the request value at fault, not the application's internal names.
 */
export class UnresolvedResourceError extends InvalidArgumentError {
  /** The message for clients of a handler. */
  readonly clientMessage: string;

  /** `problem`: the full description; `clientMessage`: the client's view. */
  constructor(problem: string, clientMessage: string) {
    super('resources', problem);
    this.clientMessage = clientMessage;
  }
}

const logger = new Logger(REDLOCK_LOGGER_CONTEXT);
/** Methods and placeholders whose failure was logged already (a bounded set: one per template). */
const logged = new Set<string>();

/**
 * Logs an unresolved-resource error once per `key` — as a warning when it is the application's
 * mistake (`mistake`), else at debug level (a request without the value: the client's) — then
 * throws it.
 */
function unresolved(key: string, problem: string, clientMessage: string, mistake: boolean): never {
  const error = new UnresolvedResourceError(problem, clientMessage);
  if (!logged.has(key)) {
    logged.add(key);
    const line = unresolvedResourceMessage(error.message);
    if (mistake) logger.warn(line);
    else logger.debug(line);
  }
  throw error;
}

/**
 * Checks the resources written in `@Locked()` at decoration time, so that a typo such as
 * `'order:{param.id}'` fails when the class is defined, not on the first request. Throws
 * {@link InvalidConfigurationError} naming `where`.
 */
export function checkLockedResources(resources: unknown, where: string): void {
  if (typeof resources === 'function') return;
  const list = typeof resources === 'string' ? [resources] : resources;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidConfigurationError(
      where,
      `resources must be a string, a non-empty array of strings or a function, got ${describe(resources)}`,
    );
  }
  // An indexed loop: holes of a sparse array are checked too.
  for (let i = 0; i < list.length; i++) {
    const template: unknown = (list as unknown[])[i];
    if (typeof template !== 'string' || template.length === 0) {
      throw new InvalidConfigurationError(
        where,
        `every resource must be a non-empty string, got ${describe(template)}`,
      );
    }
    if (!isWellFormed(template)) {
      throw new InvalidConfigurationError(
        where,
        'every resource must be a well-formed string (no lone UTF-16 surrogate)',
      );
    }
    const rest = template.replace(PLACEHOLDER, (_m, path: string) => {
      const segments = path.split('.');
      const root = segments[0];
      if (
        segments.some((s) => s.trim().length === 0) ||
        !(PLACEHOLDER_ROOTS as readonly string[]).includes(root)
      ) {
        throw new InvalidConfigurationError(
          where,
          `placeholder {${path}} in "${template}" must be a dotted path starting with ${PLACEHOLDER_ROOTS.join(', ')}`,
        );
      }
      return '';
    });
    if (/[{}]/.test(rest)) {
      throw new InvalidConfigurationError(where, `unbalanced "{" or "}" in "${template}"`);
    }
  }
}

/**
 * Computes the resources of one call: fills `{path}` placeholders from the call context, or runs
 * the resource function. A placeholder or function result that is `undefined`, `null`, empty, an
 * object or a function is an {@link InvalidArgumentError} (field `resources`) — a lock on
 * `"order:undefined"` would serialize unrelated calls, or none.
 */
export function resolveResources(resources: LockedResources, call: LockedCallContext): string[] {
  if (typeof resources === 'function') {
    const result: unknown = resources(call);
    const list = typeof result === 'string' ? [result] : result;
    if (!Array.isArray(list) || list.length === 0) {
      unresolved(
        `${callName(call)}()`,
        `the resource function of ${callName(call)} must return a non-empty string or array of strings, got ${describe(result)}`,
        INVALID_LOCK_RESOURCE_MESSAGE,
        true,
      );
    }
    // An indexed loop, not map: a hole in the returned array is an error too.
    const out: string[] = [];
    for (let i = 0; i < list.length; i++) {
      out.push(
        checkResourceName(
          'resources',
          (list as unknown[])[i],
          MAX_RESOURCE_LENGTH,
          (_f, problem) => {
            const got = describe((list as unknown[])[i]);
            return unresolved(
              `${callName(call)}()`,
              `the resource function of ${callName(call)} returned ${got} at index ${i}: ${problem}`,
              INVALID_LOCK_RESOURCE_MESSAGE,
              true,
            );
          },
        ),
      );
    }
    return out;
  }
  const list = typeof resources === 'string' ? [resources] : resources;
  return list.map((template) =>
    template.replace(PLACEHOLDER, (_m, path: string) => {
      const value = lookup(call, path.split('.'));
      if (typeof value === 'string' && value.length > 0) return value;
      if (typeof value === 'number' && Number.isFinite(value)) return String(value);
      if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
      // A route parameter the route does not have is the application's mistake: the client is
      // told nothing about the template.
      const hint = paramsHint(call, path);
      return unresolved(
        `${callName(call)} {${path}}`,
        `placeholder {${path}} of "${template}" in ${callName(call)} resolved to ${describe(value)}${hint}`,
        hint
          ? INVALID_LOCK_RESOURCE_MESSAGE
          : `${INVALID_LOCK_RESOURCE_MESSAGE}: {${path}} is missing, empty or not a string or number`,
        hint !== '',
      );
    }),
  );
}

/** For a `{params.x}` that is not a parameter of the request: the parameters it has. */
function paramsHint(call: LockedCallContext, path: string): string {
  const [root, name] = path.split('.');
  if (root !== 'params' || name === undefined || !call.params || name in call.params) return '';
  const names = Object.keys(call.params);
  return ` (the route has no parameter ${name}; its parameters: ${names.length > 0 ? names.join(', ') : 'none'})`;
}

function lookup(call: LockedCallContext, segments: readonly string[]): unknown {
  let current: unknown = call;
  for (const segment of segments) {
    if (current === null || typeof current !== 'object') return undefined;
    // Own or inherited (class getters) properties, but never Object.prototype's own members.
    const obj = current as Record<string, unknown>;
    current = segment in obj && !(segment in Object.prototype) ? obj[segment] : undefined;
  }
  return current;
}

function callName(call: LockedCallContext): string {
  const cls = (call.target as { name?: unknown }).name;
  return `${typeof cls === 'string' && cls ? cls : 'anonymous'}.${call.method}`;
}

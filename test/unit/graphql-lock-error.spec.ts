/**
 * The GraphQL answer to a lock failure (graphqlLockError): an error whose `extensions` carry the
 * RPC / WebSocket payload's `code`, `resources` and `retryAfter`, not an HttpException — and
 * graphql-js itself (no Nest driver) puts those extensions into the response.
 */
import { HttpException } from '@nestjs/common';
import { buildSchema, graphql } from 'graphql';
import { LockContendedError, NoQuorumError } from '../../lib';
import type { NodeVote } from '../../lib';
import { classifyLockError, graphqlLockError } from '../../lib/errors/lock-failure';
import type { LockFailure } from '../../lib/errors/lock-failure';
import { UnresolvedResourceError } from '../../lib/locked/resolve-resources';
import { RESOURCE_LOCKED_MESSAGE } from '../../lib/redlock.messages';

const held = (node: number): NodeVote => ({
  node,
  name: `m${node}`,
  outcome: 'held',
  latency: 1,
  holderTtl: 4_200,
});

function failureOf(error: Error): LockFailure {
  const failure = classifyLockError(error);
  if (!failure) throw new Error(`not a lock failure: ${String(error)}`);
  return failure;
}

const contended = () =>
  new LockContendedError({
    resources: ['order:42'],
    votes: [held(0), held(1)],
    attempts: 1,
    elapsed: 2,
  });

it('contention: LOCK_CONTENDED with resources and retryAfter, the engine error as cause', () => {
  const engine = contended();
  const error = graphqlLockError(failureOf(engine));
  expect(error).toBeInstanceOf(Error);
  expect(error).not.toBeInstanceOf(HttpException);
  expect(error.message).toBe(RESOURCE_LOCKED_MESSAGE);
  expect(error.cause).toBe(engine);
  expect((error as Error & { extensions: unknown }).extensions).toEqual({
    code: 'LOCK_CONTENDED',
    resources: ['order:42'],
    retryAfter: 5,
  });
});

it('no quorum: NO_QUORUM with retryAfter', () => {
  const error = graphqlLockError(
    failureOf(
      new NoQuorumError({
        resources: ['r'],
        votes: [],
        attempts: 1,
        elapsed: 1,
        reason: 'unavailable',
        quorum: 2,
      }),
    ),
  );
  expect((error as Error & { extensions: unknown }).extensions).toEqual({
    code: 'NO_QUORUM',
    resources: ['r'],
    retryAfter: 1,
  });
});

it("an unresolved template: INVALID_ARGUMENT with the client's message, no retryAfter", () => {
  const error = graphqlLockError(
    failureOf(new UnresolvedResourceError('the full problem', 'what the client is told')),
  );
  expect(error.message).toBe('what the client is told');
  expect((error as Error & { extensions: unknown }).extensions).toEqual({
    code: 'INVALID_ARGUMENT',
    resources: [],
  });
});

it('graphql-js copies the extensions into the response error (any driver)', async () => {
  const schema = buildSchema('type Query { order: String }');
  const result = await graphql({
    schema,
    source: '{ order }',
    rootValue: {
      order: () => {
        throw graphqlLockError(failureOf(contended()));
      },
    },
  });
  expect(result.data).toEqual({ order: null });
  expect(result.errors?.map((e) => e.toJSON())).toEqual([
    {
      message: RESOURCE_LOCKED_MESSAGE,
      locations: [{ line: 1, column: 3 }],
      path: ['order'],
      extensions: { code: 'LOCK_CONTENDED', resources: ['order:42'], retryAfter: 5 },
    },
  ]);
});

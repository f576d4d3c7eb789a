/**
 * `@Locked()` on GraphQL resolvers (@nestjs/graphql with the Apollo driver on Express, code-first
 * schema built in memory), against 3 real masters through `RedlockModule.forRoot`: the template
 * reads the GraphQL args (`{data.id}`), the mutation runs under the lock (its key holds the
 * lock's token on a majority while the resolver runs, and is gone after), a concurrent mutation
 * on the same order gets a GraphQL error with `extensions.code: 'LOCK_CONTENDED'` (not the
 * driver's INTERNAL_SERVER_ERROR for an HTTP 423), and the lock is released when the resolver
 * throws. Contention met inside a resolver (LockErrorFilter) and a template the args leave empty
 * (INVALID_ARGUMENT) answer the same way.
 *
 * The first resolver is held by a gate that the test opens, and the test waits for the resolver
 * to have entered it: no sleeps.
 */
import 'reflect-metadata';
import { ApolloDriver } from '@nestjs/apollo';
import type { ApolloDriverConfig } from '@nestjs/apollo';
import { Injectable } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import {
  Args,
  Field,
  GraphQLModule,
  ID,
  Mutation,
  ObjectType,
  Query,
  Resolver,
} from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked, RedlockModule, RedlockService } from '../../lib';
import { useMasters } from '../harness/engines';
import { uniqueResource, valuesOn, waitUntil } from '../harness/util';

/**
 * A promise the test resolves, and promises that tell the test a resolver is waiting on it
 * (`entered`) and that a second one is (`enteredAgain`: two resolvers ran at once).
 */
class Gate {
  private openGate!: () => void;
  private readonly marks: (() => void)[] = [];
  readonly opened = new Promise<void>((resolve) => (this.openGate = resolve));
  readonly entered = new Promise<void>((resolve) => this.marks.push(resolve));
  readonly enteredAgain = new Promise<void>((resolve) => this.marks.push(resolve));
  /** Called by the resolver: resolves when the test opens the gate. */
  pass(): Promise<void> {
    this.marks.shift()?.();
    return this.opened;
  }
  open(): void {
    this.openGate();
  }
}

/** The gates of the orders the resolver is asked about, and what the resolver saw. */
@Injectable()
class Gates {
  private readonly gates = new Map<string, Gate>();
  /** Resolver entries per order id. */
  readonly entries = new Map<string, number>();
  /** The lock token the resolver saw (RedlockService.current()), per order id. */
  readonly tokens = new Map<string, string | undefined>();

  of(id: string): Gate {
    let gate = this.gates.get(id);
    if (!gate) this.gates.set(id, (gate = new Gate()));
    return gate;
  }

  enter(id: string): void {
    this.entries.set(id, (this.entries.get(id) ?? 0) + 1);
  }
}

@ObjectType()
class Order {
  @Field(() => ID)
  id!: string;

  @Field()
  status!: string;
}

/** A long ttl: a lock found gone after a call was released, not expired. */
const TTL = 30_000;

@Resolver(() => Order)
class OrdersResolver {
  constructor(
    private readonly gates: Gates,
    private readonly redlock: RedlockService,
  ) {}

  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => Order)
  @Locked('order:{data.id}', { ttl: TTL })
  async payOrder(@Args('id', { type: () => ID }) id: string): Promise<Order> {
    this.gates.enter(id);
    this.gates.tokens.set(id, this.redlock.current(`order:${id}`)?.token);
    await this.gates.of(id).pass();
    return { id, status: 'paid' };
  }

  @Mutation(() => Order)
  @Locked('order:{data.id}', { ttl: TTL })
  async refundOrder(@Args('id', { type: () => ID }) id: string): Promise<Order> {
    this.gates.enter(id);
    this.gates.tokens.set(id, this.redlock.current(`order:${id}`)?.token);
    await this.gates.of(id).pass();
    throw new Error(`refund of ${id} failed`);
  }

  /** Locks in its body (RedlockService), without @Locked: the module's LockErrorFilter answers. */
  @Mutation(() => Order)
  async shipOrder(@Args('id', { type: () => ID }) id: string): Promise<Order> {
    const lock = await this.redlock.acquire(`order:${id}`, { ttl: TTL, retryCount: 0 });
    await lock.release();
    return { id, status: 'shipped' };
  }

  /** The template needs `id`, which the schema lets the client leave out. */
  @Mutation(() => Order)
  @Locked('order:{data.id}', { ttl: TTL })
  async noteOrder(@Args('id', { type: () => ID, nullable: true }) id?: string): Promise<Order> {
    return { id: id ?? '?', status: 'noted' };
  }
}

const suite = useMasters(3);
let app: INestApplication;
let gates: Gates;
let redlock: RedlockService;

/** Redis key of a resource's lock with the default key prefix. */
const lockKey = (resource: string): string => `lock:{${resource}}`;

/** How many masters hold `resource` (with `token`, when given). */
async function holders(resource: string, token?: string): Promise<number> {
  const values = await valuesOn(suite.probe, lockKey(resource));
  return values.filter((v) => v !== null && (token === undefined || v === token)).length;
}

interface GraphQLResponse {
  data?: Record<string, unknown> | null;
  errors?: {
    message: string;
    path?: string[];
    extensions?: Record<string, unknown>;
  }[];
}

type OrderMutation = 'payOrder' | 'refundOrder' | 'shipOrder' | 'noteOrder';

/** Sends `mutation { field(id) { id status } }`; without `id`, the argument is left out. */
async function mutate(field: OrderMutation, id?: string): Promise<GraphQLResponse> {
  const res = await request(app.getHttpServer())
    .post('/graphql')
    .send(
      id === undefined
        ? { query: `mutation { ${field} { id status } }` }
        : { query: `mutation ($id: ID!) { ${field}(id: $id) { id status } }`, variables: { id } },
    );
  // Apollo answers 200 with `errors` for resolver errors (the driver resets the HTTP status).
  expect(res.status).toBe(200);
  return res.body as GraphQLResponse;
}

beforeAll(async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({
        clients: suite.masters.urls,
        quarantine: false,
        requestTimeout: 250,
      }),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        graphiql: false,
        includeStacktraceInErrorResponses: false,
      }),
    ],
    providers: [Gates, OrdersResolver],
  }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  gates = app.get(Gates);
  redlock = app.get(RedlockService);
});

afterAll(async () => {
  await app?.close();
});

it('serves the code-first schema', async () => {
  const res = await request(app.getHttpServer())
    .post('/graphql')
    .send({ query: '{ ping }' })
    .expect(200);
  expect(res.body).toEqual({ data: { ping: 'pong' } });
});

it('runs a mutation under the lock of its GraphQL args: held on a majority while it runs, gone after', async () => {
  const id = uniqueResource('pay');
  const resource = `order:${id}`;
  const gate = gates.of(id);
  const answer = mutate('payOrder', id);
  try {
    await gate.entered;
    // The resolver runs in the lock's context, and its key holds the token on a majority.
    const token = gates.tokens.get(id);
    expect(token).toEqual(expect.any(String));
    expect(await holders(resource, token)).toBeGreaterThanOrEqual(2);
  } finally {
    gate.open();
  }
  expect(await answer).toEqual({ data: { payOrder: { id, status: 'paid' } } });
  // The release is not awaited before the answer is sent: wait for it (every master).
  await waitUntil(async () => (await holders(resource)) === 0);
  expect(gates.entries.get(id)).toBe(1);
});

it('answers a concurrent mutation on the same order with a LOCK_CONTENDED GraphQL error', async () => {
  const id = uniqueResource('race');
  const resource = `order:${id}`;
  const gate = gates.of(id);
  const first = mutate('payOrder', id);
  try {
    await gate.entered;
    // Without the lock the second resolver would wait on the gate too: stop at that.
    const second = await Promise.race([
      mutate('payOrder', id),
      gate.enteredAgain.then(() => ({ ranConcurrently: true }) as GraphQLResponse),
    ]);
    expect(second.data).toBeNull();
    expect(second.errors).toEqual([
      {
        message: expect.stringMatching(/locked/i),
        path: ['payOrder'],
        locations: expect.any(Array),
        extensions: {
          code: 'LOCK_CONTENDED',
          resources: [resource],
          retryAfter: expect.any(Number),
        },
      },
    ]);
    const retryAfter = second.errors![0].extensions!.retryAfter as number;
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(TTL / 1000);
    // The second resolver never ran.
    expect(gates.entries.get(id)).toBe(1);
  } finally {
    gate.open();
  }
  expect(await first).toEqual({ data: { payOrder: { id, status: 'paid' } } });
  await waitUntil(async () => (await holders(resource)) === 0);
});

it('releases the lock when the resolver throws', async () => {
  const id = uniqueResource('refund');
  const resource = `order:${id}`;
  const gate = gates.of(id);
  const answer = mutate('refundOrder', id);
  try {
    await gate.entered;
    const token = gates.tokens.get(id);
    expect(token).toEqual(expect.any(String));
    expect(await holders(resource, token)).toBeGreaterThanOrEqual(2);
  } finally {
    gate.open();
  }
  const failed = await answer;
  expect(failed.data).toBeNull();
  // The resolver's own error passes through untouched.
  expect(failed.errors).toEqual([
    expect.objectContaining({
      message: `refund of ${id} failed`,
      path: ['refundOrder'],
      extensions: expect.objectContaining({ code: 'INTERNAL_SERVER_ERROR' }),
    }),
  ]);
  // Released, not expired (ttl 30 s): gone from every master, and the order can be locked again
  // (its gate is open already).
  await waitUntil(async () => (await holders(resource)) === 0);
  expect(await mutate('payOrder', id)).toEqual({ data: { payOrder: { id, status: 'paid' } } });
  expect(gates.entries.get(id)).toBe(2);
});

it('answers contention inside a resolver (RedlockService.acquire, LockErrorFilter) the same way', async () => {
  const id = uniqueResource('ship');
  const resource = `order:${id}`;
  const lock = await redlock.acquire(resource, { ttl: TTL });
  try {
    const refused = await mutate('shipOrder', id);
    expect(refused.data).toBeNull();
    expect(refused.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/locked/i),
        path: ['shipOrder'],
        extensions: {
          code: 'LOCK_CONTENDED',
          resources: [resource],
          retryAfter: expect.any(Number),
        },
      }),
    ]);
  } finally {
    await lock.release();
  }
  expect(await mutate('shipOrder', id)).toEqual({ data: { shipOrder: { id, status: 'shipped' } } });
});

it('answers a template the GraphQL args do not fill with an INVALID_ARGUMENT error', async () => {
  const refused = await mutate('noteOrder');
  expect(refused.data).toBeNull();
  expect(refused.errors).toEqual([
    expect.objectContaining({
      message: expect.stringContaining('{data.id} is missing'),
      path: ['noteOrder'],
      extensions: { code: 'INVALID_ARGUMENT', resources: [] },
    }),
  ]);
  const id = uniqueResource('note');
  expect(await mutate('noteOrder', id)).toEqual({ data: { noteOrder: { id, status: 'noted' } } });
});

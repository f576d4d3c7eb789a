import 'reflect-metadata';
import { Body, Controller, Injectable, Module, Param, Post, Query, Req } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import { LockContendedError, Locked, RedlockService } from '../../../lib';
import { RedlockTestingController, RedlockTestingModule } from '../../../lib/testing';

/**
 * The testing module as a user's test writes it: `RedlockTestingModule.forRoot()` next to a
 * feature module whose providers inject `RedlockService`, and `@Locked()` handlers called
 * directly (no HTTP), their placeholders read from the arguments Nest's decorators map.
 */
@Injectable()
class OrdersService {
  constructor(readonly redlock: RedlockService) {}

  /** The resources the current call chain holds. */
  held(): readonly string[] {
    return this.redlock.current()?.resources ?? [];
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post(':id/pay')
  @Locked('order:{params.id}')
  pay(@Param('id') id: string): readonly string[] {
    void id;
    return this.orders.held();
  }

  @Post(':id/ship')
  @Locked(['order:{params.id}', 'carrier:{body.carrier}', 'zone:{query.zone}'])
  ship(
    @Param() _params: { id: string },
    @Body('carrier') _carrier: string,
    @Query() _query: { zone: string },
  ): readonly string[] {
    return this.orders.held();
  }

  @Post(':id/refund')
  @Locked('order:{params.id}')
  refund(@Req() _req: { params: { id: string } }): readonly string[] {
    return this.orders.held();
  }

  @MessagePattern('orders.cancel')
  @Locked('order:{data.id}')
  cancel(@Payload() _data: { id: string }): readonly string[] {
    return this.orders.held();
  }
}

@Module({ controllers: [OrdersController], providers: [OrdersService] })
class OrdersModule {}

describe('RedlockTestingModule.forRoot() with a feature module', () => {
  let moduleRef: TestingModule;
  let orders: OrdersController;
  let locks: RedlockTestingController;

  beforeAll(async () => {
    // As the README writes it: no `isGlobal`.
    moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot(), OrdersModule],
    }).compile();
    await moduleRef.init();
    orders = moduleRef.get(OrdersController);
    locks = moduleRef.get(RedlockTestingController);
  });

  afterEach(() => locks.reset());
  afterAll(async () => moduleRef?.close());

  it('resolves RedlockService in the feature module', () => {
    expect(moduleRef.get(OrdersService).redlock).toBe(moduleRef.get(RedlockService));
  });

  it('a direct call of a handler reads {params.id} from its @Param("id") argument', async () => {
    await expect(orders.pay('42')).resolves.toEqual(['order:42']);
    expect(locks.isHeld('order:42')).toBe(false);
  });

  it('a direct call meets the lock held elsewhere', async () => {
    locks.hold('order:7', 5000);
    await expect(orders.pay('7')).rejects.toBeInstanceOf(LockContendedError);
  });

  it('whole @Param(), a @Body field and a whole @Query() fill their roots', async () => {
    await expect(orders.ship({ id: '9' }, 'dhl', { zone: 'eu' })).resolves.toEqual([
      'carrier:dhl',
      'order:9',
      'zone:eu',
    ]);
  });

  it('@Req() gives the request params', async () => {
    await expect(orders.refund({ params: { id: '5' } })).resolves.toEqual(['order:5']);
  });

  it('@Payload() of a message handler is {data}', async () => {
    await expect(orders.cancel({ id: '3' })).resolves.toEqual(['order:3']);
  });

  it('isGlobal: false scopes the module to its importers', async () => {
    await expect(
      Test.createTestingModule({
        imports: [RedlockTestingModule.forRoot({ isGlobal: false }), OrdersModule],
      }).compile(),
    ).rejects.toThrow(/RedlockService/);
  });
});

import { Inject, Injectable } from '@nestjs/common';
import { SAMPLE_OPTIONS, type ResolvedSampleOptions } from '../sample.options';
import { SampleStore } from '../store/sample-store';
import { pause } from './order.model';

/** One charge as the (simulated) payment provider records it. */
export interface Charge {
  readonly orderId: string;
  readonly instance: string;
  /** The fencing token of the lock the charge was made under. */
  readonly fencingToken: number | undefined;
  /** Wall-clock ms when the provider started and finished the charge. */
  readonly startedAt: number;
  readonly at: number;
}

/**
 * A simulated payment provider: slow, and it charges every time it is asked — charging an order
 * twice is exactly the bug the order lock prevents. Charges are recorded in the shared store so
 * that double charges are visible across instances. Real providers accept an idempotency key;
 * passing the lock's fencing token lets them also reject a charge from a holder whose lock was
 * lost meanwhile (a token lower than one they already saw).
 */
@Injectable()
export class PaymentGateway {
  constructor(
    private readonly store: SampleStore,
    @Inject(SAMPLE_OPTIONS) private readonly options: ResolvedSampleOptions,
  ) {}

  /** Charges an order. */
  async charge(orderId: string, fencingToken: number | undefined): Promise<Charge> {
    const startedAt = Date.now();
    await pause(this.options.timings.paymentMs);
    const charge: Charge = {
      orderId,
      instance: this.options.instanceId,
      fencingToken,
      startedAt,
      at: Date.now(),
    };
    await this.store.push(this.key(orderId), JSON.stringify(charge));
    return charge;
  }

  /** Every charge made for an order (by any instance). */
  async chargesOf(orderId: string): Promise<Charge[]> {
    return (await this.store.list(this.key(orderId))).map((c) => JSON.parse(c) as Charge);
  }

  private key(orderId: string): string {
    return `${this.options.namespace}charges:${orderId}`;
  }
}

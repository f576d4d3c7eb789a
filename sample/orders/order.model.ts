/** Lifecycle of an order. */
export type OrderStatus = 'reserved' | 'paid' | 'shipped' | 'expired' | 'cancelled';

/** An order: a stock reservation that is paid, shipped, cancelled or expires. */
export interface Order {
  readonly id: string;
  readonly sku: string;
  readonly qty: number;
  status: OrderStatus;
  /** Wall-clock ms of the reservation. */
  readonly createdAt: number;
  /** Fencing token of the lock under which the order was paid (see PaymentGateway). */
  paidWithFencingToken?: number;
  /** Notes added by support agents over the WebSocket gateway. */
  notes: string[];
}

/** Stock of one product. */
export interface Stock {
  readonly sku: string;
  available: number;
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

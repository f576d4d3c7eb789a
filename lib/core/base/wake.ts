/**
 * One `'abort'` listener per signal, shared by every waiter that watches it.
 *
 * Many waiters sleep on the same signal (the engine's drain signal, or one signal a caller passes
 * to many acquisitions). Adding one listener each would pass Node's listener limit (10) and print
 * `MaxListenersExceededWarning`; instead the first waiter of a signal installs a single listener
 * that wakes the set of its waiters, and the last one to leave removes it.
 */
const waitersOf = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `wake` once when `signal` aborts (at once, synchronously, when it already has). Returns
 * a function that stops watching; call it when the wait ends for another reason.
 */
export function onAbort(signal: AbortSignal, wake: () => void): () => void {
  if (signal.aborted) {
    wake();
    return () => undefined;
  }
  const waiters = waitersOf.get(signal) ?? watch(signal);
  // A distinct entry per call: the same function may wait twice.
  const entry = (): void => wake();
  waiters.add(entry);
  return () => {
    const set = waitersOf.get(signal);
    if (!set) return;
    set.delete(entry);
    // The listener stays installed while the signal lives (at most one per signal, released
    // with it): removing and re-adding it for every wait would cost more than it saves.
  };
}

/**
 * Installs the one listener of `signal`. In a function of its own: a listener created inside
 * {@link onAbort} would share its scope and keep the first waiter's `wake` — and everything
 * that waiter's sleep holds — for as long as the signal lives (a shared signal passed to every
 * acquire of a long-running process: one ever-growing chain of old queue entries).
 */
function watch(signal: AbortSignal): Set<() => void> {
  const set = new Set<() => void>();
  waitersOf.set(signal, set);
  signal.addEventListener(
    'abort',
    () => {
      waitersOf.delete(signal);
      for (const w of [...set]) w();
      set.clear();
    },
    { once: true },
  );
  return set;
}

/** Number of waiters currently watching `signal` (for diagnostics and tests). */
export function abortWaiters(signal: AbortSignal): number {
  return waitersOf.get(signal)?.size ?? 0;
}

/**
 * The well-known symbol of `await using` (explicit resource management), declared for the
 * typings: a `Lock` is async disposable (lock/lock.ts). TypeScript ≥ 5.2 declares it in its
 * `esnext.disposable` lib and `@types/node` ≥ 20.4 in its globals; this declaration — the same
 * `unique symbol`, merged with theirs — lets our declaration files compile for a consumer whose
 * TypeScript or `@types/node` predates it (`await using` itself needs TypeScript ≥ 5.2).
 *
 * At run time Node.js ≥ 20 has `Symbol.asyncDispose`, in its main realm. A realm without it (a
 * jest test file's vm context on Node.js 20 and 22, unless a setup file adds it) still loads the
 * package: `Lock`'s method is then keyed by the string `"undefined"`, and `await using` itself
 * fails there with the compiler's "Symbol.asyncDispose is not defined".
 */
declare global {
  interface SymbolConstructor {
    /** The method `await using` calls when its block ends (`[Symbol.asyncDispose]()`). */
    readonly asyncDispose: unique symbol;
  }
}

export {};

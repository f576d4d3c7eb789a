/**
 * jest setup file (jest.config.js `setupFiles`): jest runs every test file in a vm context of its
 * own, whose `Symbol` is not the main realm's. Node.js 20 and 22 add `Symbol.dispose` and
 * `Symbol.asyncDispose` to the main realm only (registered symbols: `nodejs.dispose`,
 * `nodejs.asyncDispose`), so without this `await using` in a test — and the library's
 * `Lock[Symbol.asyncDispose]` — would not find them. The same symbols, set where missing, before
 * any module of the test loads (README, "await using", says the same to users).
 */
const symbols = Symbol as unknown as { dispose?: symbol; asyncDispose?: symbol };
symbols.dispose ??= Symbol.for('nodejs.dispose');
symbols.asyncDispose ??= Symbol.for('nodejs.asyncDispose');

export {};

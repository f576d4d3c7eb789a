/**
 * `{ ...base, ...fields }` — a new object with the own enumerable fields of `base`, then those of
 * `fields` (which win) — built with `Object.assign` instead of a spread.
 *
 * Why: V8 (Node 20) builds an object literal that starts with a spread and goes on
 * (`{ ...base, x }`, `{ ...base, ...more }`) in its slow path, about 1 µs each against 0.1 µs
 * here — measured on the lock's hot path, where the hand-over alone built six of them per lock
 * (bench/README.md, "Object spreads on the hot path, session 20"; the lint rule in
 * eslint.config.mjs keeps them out of the per-lock code).
 *
 * Only for objects the library made itself: `Object.assign` sets fields, so an own `__proto__`
 * field (which only parsed JSON makes) would set the new object's prototype instead of being
 * copied, where a spread copies it. Input from users is validated and copied field by field
 * before it gets here.
 */
export function withFields<T extends object, U extends object>(
  base: T,
  fields: U,
): Omit<T, keyof U> & U {
  return Object.assign({}, base, fields);
}

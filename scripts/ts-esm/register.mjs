// `node --import ./scripts/ts-esm/register.mjs <file>.ts`: runs this repository's TypeScript
// sources as native ES modules (see ./hooks.mjs). `--import` and `module.register()` are stable
// Node APIs (Node ≥ 20.6); no experimental flag is involved.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);

import 'reflect-metadata';

/**
 * Nest's metadata keys, written by its decorators. Spelled here rather than imported from
 * `@nestjs/common/constants`, which Nest 10–12 do not all export the same way; the values have
 * not changed across these versions.
 */
/** Route path of a controller class or handler method (`@Controller()`, `@Get()`, ...). */
export const NEST_PATH_METADATA = 'path';
/** Parameter decorators of a method (`@Param()`, `@Body()`, `@Payload()`, ...), on its class. */
const NEST_ROUTE_ARGS_METADATA = '__routeArguments__';

/**
 * Parameter types of Nest's built-in parameter decorators (`RouteParamtypes` of
 * `@nestjs/common`; `RpcParamtype.PAYLOAD` and `WsParamtype.PAYLOAD` are 3 as well).
 */
const REQUEST = 0;
const BODY_OR_PAYLOAD = 3;
const QUERY = 4;
const PARAM = 5;

/** Where one argument of a method goes in the call context. */
interface ArgumentSlot {
  /** Argument position. */
  readonly index: number;
  /** Call-context root it fills; `request` spreads a request's params, query and body. */
  readonly root: 'params' | 'query' | 'body' | 'data' | 'request';
  /** The decorator's property name (`@Param('id')`), or `undefined` for the whole object. */
  readonly field: string | undefined;
}

/** The call-context fields that a direct call's arguments supply. */
export interface ArgumentFields {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
  data?: unknown;
}

const slotsCache = new WeakMap<object, readonly ArgumentSlot[]>();

/**
 * How the arguments of `method` (a handler decorated with Nest's parameter decorators) map to
 * `params` / `query` / `body` / `data`: `@Param('id') id` is `params.id`, `@Param() p` is
 * `params`, `@Query()`, `@Body()` likewise, `@Req() req` gives the request's `params`, `query`
 * and `body`; on a non-HTTP handler (no route path) `@Payload()` / `@MessageBody()` is `data`.
 * Cached per method function.
 */
function slotsOf(cls: object, key: string, fn: object): readonly ArgumentSlot[] {
  const cached = slotsCache.get(fn);
  if (cached) return cached;
  const http = Reflect.getMetadata(NEST_PATH_METADATA, fn) !== undefined;
  const raw = Reflect.getMetadata(NEST_ROUTE_ARGS_METADATA, cls, key) as
    Record<string, { index?: unknown; data?: unknown }> | undefined;
  const slots: ArgumentSlot[] = [];
  for (const [name, entry] of Object.entries(raw ?? {})) {
    // Built-in decorators are keyed `${paramtype}:${index}`; custom ones carry another prefix.
    const match = /^(\d+):\d+$/.exec(name);
    if (!match || typeof entry?.index !== 'number') continue;
    const type = Number(match[1]);
    const field = typeof entry.data === 'string' ? entry.data : undefined;
    const root =
      type === PARAM && http
        ? 'params'
        : type === QUERY && http
          ? 'query'
          : type === BODY_OR_PAYLOAD
            ? http
              ? 'body'
              : 'data'
            : type === REQUEST && http
              ? 'request'
              : undefined;
    if (root) slots.push({ index: entry.index, root, field });
  }
  slotsCache.set(fn, slots);
  return slots;
}

/**
 * The `params` / `query` / `body` / `data` of a direct call of a `@Locked()` handler (a unit test
 * calling `controller.pay('42')`, another provider calling the method): read from the arguments
 * where Nest's parameter decorators say what they hold, so that `'order:{params.id}'` on
 * `pay(@Param('id') id: string)` locks `order:42` as it does over HTTP. Empty when the method
 * has no such decorators.
 */
export function argumentFields(
  cls: object,
  key: string,
  fn: object,
  args: readonly unknown[],
): ArgumentFields {
  const slots = slotsOf(cls, key, fn);
  if (slots.length === 0) return {};
  const out: ArgumentFields = {};
  const object = (root: 'params' | 'query'): Record<string, unknown> =>
    (out[root] ??= Object.create(null) as Record<string, unknown>);
  // Whole objects first, then single fields on top: `@Param() p, @Param('id') id` sees `id`.
  const ordered = [...slots].sort(
    (a, b) => Number(a.field !== undefined) - Number(b.field !== undefined),
  );
  for (const { index, root, field } of ordered) {
    const value = args[index];
    if (root === 'request') {
      if (value === null || typeof value !== 'object') continue;
      const req = value as { params?: unknown; query?: unknown; body?: unknown };
      if (isRecord(req.params)) Object.assign(object('params'), req.params);
      if (isRecord(req.query)) Object.assign(object('query'), req.query);
      if (req.body !== undefined && out.body === undefined) out.body = req.body;
    } else if (root === 'params' || root === 'query') {
      if (field !== undefined) object(root)[field] = value;
      else if (isRecord(value)) Object.assign(object(root), value);
    } else if (field !== undefined) {
      // A copy: the caller's argument object is never written to.
      const whole = out[root];
      const copy = Object.assign(
        Object.create(null) as Record<string, unknown>,
        isRecord(whole) ? whole : undefined,
      );
      copy[field] = value;
      out[root] = copy;
    } else {
      out[root] = value;
    }
  }
  return out;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object';
}

import 'reflect-metadata';
import type { LockedResources } from '../interfaces';
import { NEST_PATH_METADATA } from './call-arguments';

/** Prefix of the metadata key under which RouterModule records a module's path. */
const NEST_MODULE_PATH_PREFIX = '__module_path__';

const PLACEHOLDER = /\{([^{}]*)\}/g;

/** Route parameter names in a Nest / Express / Fastify path: `:id`, `:id?`, `{/:id}`, `*splat`. */
function paramsOfPath(path: string, into: Set<string>): void {
  for (const m of path.matchAll(/[:*]([A-Za-z0-9_$]+)/g)) into.add(m[1]);
}

function pathsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/**
 * The paths other than the controller's and the handler's that can hold route parameters of an
 * HTTP handler: the application's global prefix and the RouterModule path of the controller's
 * module.
 */
export function outerRoutePaths(globalPrefix: string | undefined, module: unknown): string[] {
  const out = globalPrefix ? [globalPrefix] : [];
  if (typeof module === 'function') {
    for (const key of Reflect.getMetadataKeys(module) as unknown[]) {
      if (typeof key === 'string' && key.startsWith(NEST_MODULE_PATH_PREFIX)) {
        out.push(...pathsOf(Reflect.getMetadata(key, module)));
      }
    }
  }
  return out;
}

/** An HTTP route's placeholder that names a parameter no path of the route has. */
export interface MissingRouteParam {
  /** The template, e.g. `order:{params.orderId}`. */
  readonly template: string;
  /** The placeholder's path, e.g. `params.orderId`. */
  readonly placeholder: string;
  /** The parameters the route has (sorted). */
  readonly routeParams: readonly string[];
}

/**
 * The `{params.x}` placeholders of an HTTP handler's `@Locked()` templates whose `x` is a
 * parameter of none of the route's paths (the controller's paths, the handler's, and
 * `outerPaths`): such a template resolves to nothing on every request. Empty for a method that
 * is not an HTTP route, and for resource functions.
 */
export function missingRouteParams(
  resources: LockedResources,
  cls: object,
  handler: object,
  outerPaths: readonly string[],
): MissingRouteParam[] {
  if (typeof resources === 'function') return [];
  const own = Reflect.getMetadata(NEST_PATH_METADATA, handler) as unknown;
  if (own === undefined) return [];
  const names = new Set<string>();
  for (const path of [
    ...pathsOf(own),
    ...pathsOf(Reflect.getMetadata(NEST_PATH_METADATA, cls)),
    ...outerPaths,
  ]) {
    paramsOfPath(path, names);
  }
  const out: MissingRouteParam[] = [];
  for (const template of typeof resources === 'string' ? [resources] : resources) {
    for (const m of template.matchAll(PLACEHOLDER)) {
      const [root, name] = m[1].split('.');
      if (root !== 'params' || name === undefined || names.has(name)) continue;
      out.push({ template, placeholder: m[1], routeParams: [...names].sort() });
    }
  }
  return out;
}

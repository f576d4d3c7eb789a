/**
 * Credential redaction for everything the library prints: master names, error messages, log
 * lines, events and health output. One home for it (the engine and the Nest layer both use it).
 *
 * Passwords are not always well-formed URL parts: users paste `redis://user:SEC#RET@host` or a
 * password with a space, `/`, `?`, `@`, `:` or non-ASCII letters. So credentials are not found by
 * a URL grammar that stops at such characters but by position: everything between `scheme://`
 * and the **last** `@` of the URL is treated as credentials. Query parameters that carry secrets
 * (`?password=...`, which ioredis reads as an option) are redacted too. Where the secrets are
 * known (passwords of the configured clients), their literal occurrences are removed as well.
 */

/** Query parameters whose values are secrets. */
const SECRET_PARAM = /^(?:password|pass|pwd|sentinelpassword|secret|token|auth)$/i;

/** Secrets shorter than this are not scrubbed literally: they would mangle every message. */
export const MIN_SCRUBBED_SECRET_LENGTH = 4;

/** Redacts the secret-carrying query parameters of a URL's tail (`?a=b&password=c`). */
function redactQuery(tail: string): string {
  return tail.replace(/([?&;])([^=&;#\s]*)=([^&;#]*)/g, (m, sep: string, key: string) =>
    SECRET_PARAM.test(safeDecode(key)) ? `${sep}${key}=***` : m,
  );
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Replaces the password of a URL with `***`, keeping the user name:
 * `redis://user:secret@host:6379` → `redis://user:***@host:6379`. Everything between `//` (or the
 * start, without a scheme) and the last `@` is credentials, whatever characters it holds; a user
 * info without `:` is redacted whole (`redis://***@host`), since some clients take it as a password.
 */
export function redactUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url);
  const start = scheme ? scheme[0].length : 0;
  const rest = url.slice(start);
  const at = rest.lastIndexOf('@');
  if (at < 0) return url.slice(0, start) + redactQuery(rest);
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const user = colon >= 0 ? userinfo.slice(0, colon) : undefined;
  const shownUser = user !== undefined && !/[\s/?#@]/.test(user) ? `${user}:***` : '***';
  return `${url.slice(0, start)}${shownUser}@${redactQuery(rest.slice(at + 1))}`;
}

/**
 * Strips credentials from every URL found in a free text (error messages, log lines): after each
 * `scheme://`, everything up to the last `@` before the next URL is replaced by `***` (a URL
 * without `@` before the next one extends to it: its password may itself contain `://`, spaces
 * or line breaks); secret query parameters too. Every literal occurrence of `secrets` (and
 * their encoded forms) is replaced first. Errs on the side of redacting too much.
 *
 * One case only the known secrets cover: without them, a password holding whitespace (or a
 * quote, a bracket, `=`, `,`, `;`) followed by `word://` cannot be told apart from two URLs
 * (`redis://u:a@b c://d@host`). The engine and
 * the Nest layer always pass the passwords of their clients.
 */
export function redactText(text: string, secrets: readonly string[] = []): string {
  // Known secrets first, while they are still whole in the text.
  let out = text;
  for (const form of secretForms(secrets)) out = out.split(form).join('***');
  return redactUrls(out);
}

function redactUrls(text: string): string {
  // A URL starts at the beginning, after whitespace, a quote, a bracket, '=' or ','; not inside
  // a word or right after '@' or ':' (where '://' is more likely part of a password).
  const scheme = /(?<![^\s"'(<[{=,;])[a-z][a-z0-9+.-]*:\/\//gi;
  const found: { at: number; end: number }[] = [];
  for (let m = scheme.exec(text); m; m = scheme.exec(text)) {
    found.push({ at: m.index, end: m.index + m[0].length });
  }
  if (found.length === 0) return redactQuery(text);
  let out = text.slice(0, found[0].at);
  let i = 0;
  while (i < found.length) {
    const { at, end } = found[i];
    // This URL's credentials end at the last '@' before the next URL that follows an '@'.
    let k = i + 1;
    while (k < found.length && !text.slice(end, found[k].at).includes('@')) k++;
    const limit = k < found.length ? found[k].at : text.length;
    const segment = text.slice(end, limit);
    const lastAt = segment.lastIndexOf('@');
    const tail = lastAt < 0 ? segment : `***@${segment.slice(lastAt + 1)}`;
    out += text.slice(at, end) + redactQuery(tail);
    i = k;
  }
  return out;
}

/** The literal forms of `secrets` worth scrubbing, longest first. */
function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (typeof secret !== 'string' || secret.length < MIN_SCRUBBED_SECRET_LENGTH) continue;
    forms.add(secret);
    forms.add(encodeURIComponent(secret));
    forms.add(encodeURI(secret));
    forms.add(JSON.stringify(secret).slice(1, -1));
  }
  return [...forms]
    .filter((f) => f.length >= MIN_SCRUBBED_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
}

/** A text redactor bound to known secrets (see {@link redactText}). */
export type Redactor = (text: string) => string;

/** A {@link Redactor} that also removes the given secrets. */
export function redactorFor(secrets: readonly string[]): Redactor {
  const known = secrets.filter((s) => typeof s === 'string' && s.length > 0);
  return (text) => redactText(text, known);
}

/**
 * The passwords a `scheme://` URL carries: its user info's password (by position, raw and
 * percent-decoded: everything between `//` and the last `@`, after the first `:`; a user info
 * without `:` whole) and the values of secret query parameters (`?password=`). Tolerates anything.
 */
export function urlSecrets(url: string): string[] {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url);
  if (!scheme) return [];
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@');
  const found: string[] = [];
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    const password = colon >= 0 ? userinfo.slice(colon + 1) : userinfo;
    found.push(password, safeDecode(password));
  }
  const q = rest.indexOf('?', at + 1);
  if (q >= 0) {
    for (const pair of rest
      .slice(q + 1)
      .split('#')[0]
      .split(/[&;]/)) {
      const eq = pair.indexOf('=');
      if (eq > 0 && /pass|secret|token|auth/i.test(safeDecode(pair.slice(0, eq)))) {
        const value = pair.slice(eq + 1);
        // Query values are also read with '+' as a space (URLSearchParams).
        found.push(value, safeDecode(value), safeDecode(value.replace(/\+/g, ' ')));
      }
    }
  }
  return [...new Set(found.filter((v) => v.length > 0))];
}

/**
 * Passwords held in a client's options: ioredis (`password`, `sentinelPassword`; for a Cluster,
 * those of its `redisOptions`) and node-redis (`password`, and the password of its `url`).
 * Tolerates anything.
 */
export function clientSecrets(client: unknown): string[] {
  const c = client as {
    options?: Record<string, unknown> & { redisOptions?: Record<string, unknown> };
  } | null;
  const found: string[] = [];
  const collect = (o: Record<string, unknown> | undefined): void => {
    if (!o || typeof o !== 'object') return;
    for (const key of ['password', 'sentinelPassword']) {
      const v = o[key];
      if (typeof v === 'string' && v.length > 0) found.push(v);
    }
    if (typeof o.url === 'string') found.push(...urlSecrets(o.url));
  };
  collect(c?.options);
  collect(c?.options?.redisOptions);
  return found;
}

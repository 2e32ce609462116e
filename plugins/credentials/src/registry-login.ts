/**
 * Checks a username/password against a registry the way `docker login` does (Docker Registry HTTP API v2):
 * `GET /v2/`, then either Basic auth on `/v2/` or a token from the realm the registry names.
 */

export interface LoginResult {
  valid: boolean;
  message: string;
  /** HTTP status of the decisive answer, when there was one. */
  status: number | null;
}

const TIMEOUT_MS = 10_000;

/** `Bearer realm="https://auth.docker.io/token",service="registry.docker.io"` → scheme and parameters. */
export function parseChallenge(header: string): { scheme: string; params: Record<string, string> } {
  const m = /^\s*(\w+)\s*(.*)$/.exec(header);
  if (!m) return { scheme: '', params: {} };
  const params: Record<string, string> = {};
  for (const p of m[2]!.matchAll(/(\w+)="([^"]*)"|(\w+)=([^,\s]*)/g)) params[(p[1] ?? p[3])!.toLowerCase()] = p[2] ?? p[4] ?? '';
  return { scheme: m[1]!.toLowerCase(), params };
}

const MAX_REDIRECTS = 5;

/**
 * GET with redirects followed by hand, each one checked: the credentials only ever go to the origin they were sent
 * to first (a redirect elsewhere is answered as is, never followed with them), and never from HTTPS down to HTTP.
 */
async function get(url: string, signal: AbortSignal, auth?: string): Promise<Response> {
  let target = new URL(url);
  for (let hop = 0; ; hop++) {
    const res = await fetch(target, {
      method: 'GET',
      headers: { 'user-agent': 'host-agent/credentials-test', ...(auth ? { authorization: auth } : {}) },
      redirect: 'manual',
      signal,
    });
    const location = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !location || hop >= MAX_REDIRECTS) return res;
    const next = new URL(location, target);
    if (next.origin !== target.origin) return res;
    await res.body?.cancel();
    target = next;
  }
}

export async function registryLogin(apiBase: string, username: string, password: string, parentSignal?: AbortSignal): Promise<LoginResult> {
  const signal = parentSignal ? AbortSignal.any([parentSignal, AbortSignal.timeout(TIMEOUT_MS)]) : AbortSignal.timeout(TIMEOUT_MS);
  const basic = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  try {
    const probe = await get(`${apiBase}/v2/`, signal);
    await probe.body?.cancel();
    if (probe.ok) return { valid: true, message: 'the registry does not require authentication', status: probe.status };
    if (probe.status !== 401) return { valid: false, message: `unexpected answer ${probe.status} from ${apiBase}/v2/`, status: probe.status };
    const challenge = parseChallenge(probe.headers.get('www-authenticate') ?? '');

    if (challenge.scheme === 'basic') {
      const res = await get(`${apiBase}/v2/`, signal, basic);
      await res.body?.cancel();
      return res.ok
        ? { valid: true, message: 'login succeeded', status: res.status }
        : { valid: false, message: res.status === 401 ? 'unauthorized: wrong username or password' : `login failed with ${res.status}`, status: res.status };
    }
    if (challenge.scheme === 'bearer' && challenge.params.realm) {
      let realm: URL;
      try {
        realm = new URL(challenge.params.realm, apiBase);
      } catch {
        return { valid: false, message: 'the registry names an invalid token realm', status: null };
      }
      if (realm.protocol !== 'https:' && realm.protocol !== 'http:')
        return { valid: false, message: 'the registry names an invalid token realm', status: null };
      // The registry may name a token service elsewhere (Docker Hub does); the password never travels there in clear.
      if (realm.protocol === 'http:' && realm.origin !== new URL(apiBase).origin) {
        return {
          valid: false,
          message: `the registry names a token realm over plain HTTP on another host (${realm.origin}); the password is not sent there`,
          status: null,
        };
      }
      if (challenge.params.service) realm.searchParams.set('service', challenge.params.service);
      realm.searchParams.set('account', username);
      const res = await get(realm.toString(), signal, basic);
      const body = (await res.json().catch(() => ({}))) as { token?: string; access_token?: string };
      if (res.ok && (body.token || body.access_token)) return { valid: true, message: 'login succeeded', status: res.status };
      return {
        valid: false,
        message: res.status === 401 || res.status === 403 ? 'unauthorized: wrong username or password' : `token request failed with ${res.status}`,
        status: res.status,
      };
    }
    return { valid: false, message: `unsupported authentication challenge '${challenge.scheme || 'none'}'`, status: probe.status };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const why = e.name === 'TimeoutError' ? 'timed out' : (e.cause?.code ?? e.message);
    return { valid: false, message: `cannot reach ${apiBase}: ${why}`, status: null };
  }
}

/**
 * A login as an operation: `prepare` checks the request's shape (a username and password, or an API key);
 * `apply` is the attempt itself. The limiter counts an attempt before the password is checked, so that concurrent
 * guesses cannot slip past it: counting is a change, which is why the limiter and the credential check belong to
 * `apply` and not to `prepare` (which changes nothing). Each attempt's audit record (success or failure) is
 * written by the attempt, since the route itself is not audited (it has no principal yet).
 */
import { defineOperation, errors, HttpError, type AuditSink } from '@agent/sdk';
import type { Identity } from '../identity/identity.js';
import type { LoginLimiter } from '../identity/login-limiter.js';
import { Login } from '../schemas.js';

type Attempt = { method: 'password'; username: string; password: string } | { method: 'api_key'; api_key: string };

export type LoginOperation = ReturnType<typeof loginOperation>;

export function loginOperation(identity: Identity, limiter: LoginLimiter, audit: AuditSink) {
  return defineOperation({
    name: 'auth.login',
    input: Login,
    resource: (input) => ({ type: 'auth', id: input.username ?? 'api_key' }),
    prepare: ({ username, password, api_key }) => {
      const byPassword = username !== undefined || password !== undefined;
      if (byPassword === (api_key !== undefined)) throw errors.badRequest('send either {username, password} or {api_key}');
      if (byPassword && (username === undefined || password === undefined)) {
        throw errors.badRequest(`body.${username === undefined ? 'username' : 'password'}: required field is missing`);
      }
      const value: Attempt = byPassword ? { method: 'password', username: username!, password: password! } : { method: 'api_key', api_key: api_key! };
      return { value, preview: { changes: [{ type: 'session', id: username ?? 'api_key', actions: ['create'] }] } };
    },
    apply: async (attempt, { ip = '' }) => {
      const wait = limiter.begin(attempt.method === 'password' ? attempt.username : null, ip);
      if (wait > 0) {
        throw new HttpError(429, 'TOO_MANY_ATTEMPTS', `too many failed logins; try again in ${wait} s`, undefined, { 'retry-after': String(wait) });
      }
      // Answered once the record is durable; a failed login is answered as such even if it could not be recorded.
      const record = (success: boolean, actor_type: 'user' | 'api_key', actor_id: string, actor_name: string) =>
        audit.record({ actor_type, actor_id, actor_name, action: 'auth.login', resource_type: 'auth', success, status: success ? 200 : 401, client_ip: ip });
      if (attempt.method === 'password') {
        const { username, password } = attempt;
        const result = await identity.loginWithPassword(username, password);
        if (!result) {
          await record(false, 'user', `user:${identity.users.findByUsername(username)?.id ?? 'unknown'}`, username).catch(() => undefined);
          throw errors.unauthorized('invalid username or password', 'INVALID_CREDENTIALS');
        }
        limiter.succeed(username, ip);
        await record(true, 'user', `user:${result.user.id}`, result.user.username);
        return { token: result.token, expires_at: result.expires_at, user: { id: result.user.id, username: result.user.username, role: result.user.role } };
      }
      const result = await identity.loginWithApiKey(attempt.api_key, ip);
      if (!result) {
        await record(false, 'api_key', 'api_key:unknown', attempt.api_key.slice(0, 10)).catch(() => undefined);
        throw errors.unauthorized('invalid, expired or revoked API key', 'INVALID_CREDENTIALS');
      }
      limiter.succeed(null, ip);
      await record(true, 'api_key', `api_key:${result.api_key.id}`, result.api_key.name);
      return { token: result.token, expires_at: result.expires_at, api_key: { id: result.api_key.id, name: result.api_key.name, role: result.api_key.role } };
    },
  });
}

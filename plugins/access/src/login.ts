/** `POST /auth/login`: a token for a username and password, or for an API key, behind the login limiter. */
import { errors, HttpError, Secret, Type, type AuditSink, type PluginContext } from '@agent/sdk';
import type { Identity } from './identity/identity.js';
import type { LoginLimiter } from './identity/login-limiter.js';

export function registerLoginRoute(ctx: PluginContext<any>, identity: Identity, limiter: LoginLimiter, audit: AuditSink): void {
  ctx.route({
    method: 'POST',
    path: '/auth/login',
    public: true,
    tag: 'auth',
    operationId: 'auth.login',
    audit: false,
    summary: 'Obtain a token with a username and password, or with an API key',
    description:
      'Send either `{username, password}` or `{api_key}`. Attempts are counted before the password is checked; past ' +
      '`auth.login_max_failures` for one username from one client IP, or `auth.login_max_failures_per_ip` from one IP, further attempts ' +
      'from there get 429 for `auth.lockout` (other addresses can still log in to the same account).',
    body: Type.Object({
      username: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
      password: Type.Optional(Secret({ minLength: 1, maxLength: 512 })),
      api_key: Type.Optional(Secret({ minLength: 1, maxLength: 200, description: 'an API key (`agk_…`)' })),
    }),
    response: Type.Object({ token: Type.String(), expires_at: Type.String() }),
    handler: async (req) => {
      const { username, password, api_key } = req.body;
      const byPassword = username !== undefined || password !== undefined;
      if (byPassword === (api_key !== undefined)) throw errors.badRequest('send either {username, password} or {api_key}');
      if (byPassword && (username === undefined || password === undefined)) {
        throw errors.badRequest(`body.${username === undefined ? 'username' : 'password'}: required field is missing`);
      }
      const who = byPassword ? username! : null;
      // Counted before the password is checked: concurrent guesses cannot slip past the limit.
      const wait = limiter.begin(who, req.ip);
      if (wait > 0) {
        throw new HttpError(429, 'TOO_MANY_ATTEMPTS', `too many failed logins; try again in ${wait} s`, undefined, { 'retry-after': String(wait) });
      }
      // Answered once the record is durable; a failed login is answered as such even if it could not be recorded.
      const record = (success: boolean, actor_type: 'user' | 'api_key', actor_id: string, actor_name: string) =>
        audit.record({
          actor_type,
          actor_id,
          actor_name,
          action: 'auth.login',
          resource_type: 'auth',
          success,
          status: success ? 200 : 401,
          client_ip: req.ip,
        });
      if (byPassword) {
        const result = await identity.loginWithPassword(username!, password!);
        if (!result) {
          await record(false, 'user', `user:${identity.users.findByUsername(username!)?.id ?? 'unknown'}`, username!).catch(() => undefined);
          throw errors.unauthorized('invalid username or password', 'INVALID_CREDENTIALS');
        }
        limiter.succeed(username!, req.ip);
        await record(true, 'user', `user:${result.user.id}`, result.user.username);
        return { token: result.token, expires_at: result.expires_at, user: { id: result.user.id, username: result.user.username, role: result.user.role } };
      }
      const result = await identity.loginWithApiKey(api_key!, req.ip);
      if (!result) {
        await record(false, 'api_key', 'api_key:unknown', api_key!.slice(0, 10)).catch(() => undefined);
        throw errors.unauthorized('invalid, expired or revoked API key', 'INVALID_CREDENTIALS');
      }
      limiter.succeed(null, req.ip);
      await record(true, 'api_key', `api_key:${result.api_key.id}`, result.api_key.name);
      return { token: result.token, expires_at: result.expires_at, api_key: { id: result.api_key.id, name: result.api_key.name, role: result.api_key.role } };
    },
  });
}

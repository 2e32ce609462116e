/**
 * `/api/auth`: `POST /auth/login` (an operation: a token for a username and password, or for an API key, behind
 * the login limiter), and the reads `GET /auth/status` and `GET /auth/validate`: how to log in here, and what the
 * caller's token is worth (its principal and the tenancy model as it applies to it).
 */
import { operationRoute, Type, type AuthKernel, type PluginContext, type ResourceCatalogue } from '@agent/sdk';
import type { LoginOperation } from '../operations/login.js';
import { Login, Session } from '../schemas.js';

const PrincipalSchema = Type.Object({
  type: Type.String(),
  id: Type.String(),
  name: Type.String(),
  role: Type.String(),
  user_id: Type.Union([Type.Integer(), Type.Null()]),
  permissions: Type.Array(Type.String()),
  deployments: Type.Record(Type.String(), Type.String()),
  scope: Type.Union([Type.Literal('global'), Type.Literal('deployments')]),
});

const TenancySchema = Type.Object({
  scope: Type.Union([Type.Literal('global'), Type.Literal('deployments')]),
  summary: Type.String({ description: 'what this principal reaches, in words' }),
  deployments: Type.Record(Type.String(), Type.String(), { description: 'deployment → level; `*` = every deployment' }),
  global_writes: Type.Boolean({ description: 'whether it may change global state (as far as its permissions go)' }),
  resources: Type.Object({
    deployment: Type.Array(Type.String(), { description: 'resources owned by deployments: reached through a deployment only' }),
    global: Type.Array(Type.String(), { description: 'global resources: a scoped principal reaches none of them' }),
    both: Type.Array(Type.String(), { description: 'resources with deployment-owned and global parts' }),
  }),
});

type Owner = 'deployment' | 'global' | 'both';

/** Resource names by what owns their records (a deployment, the host, or either); recomputed when plugins change the catalogue. */
function ownersOf(catalogue: ResourceCatalogue): () => Record<Owner, string[]> {
  let owners: Record<Owner, string[]> | null = null;
  catalogue.onChange(() => (owners = null));
  return () => {
    if (owners) return owners;
    const of = (owner: Owner) => catalogue.list().flatMap((r) => (r.owner === owner ? [r.name] : []));
    return (owners = { deployment: of('deployment'), global: of('global'), both: of('both') });
  };
}

/** The login methods this directory accepts (`POST /auth/login`). */
export const LOGIN_METHODS = ['password', 'api_key'] as const;

export function authRoutes(ctx: PluginContext, auth: AuthKernel, login: LoginOperation): void {
  ctx.route(
    operationRoute(login, {
      method: 'POST',
      path: '/auth/login',
      public: true,
      tag: 'auth',
      // No principal to record yet: the attempt writes its own record, success or failure (operations/login.ts).
      audit: false,
      summary: 'Obtain a token with a username and password, or with an API key',
      description:
        'Send either `{username, password}` or `{api_key}`. Attempts are counted before the password is checked; past ' +
        '`auth.login_max_failures` for one username from one client IP, or `auth.login_max_failures_per_ip` from one IP, further attempts ' +
        'from there get 429 for `auth.lockout` (other addresses can still log in to the same account).',
      body: Login,
      response: Session,
      // A public route: the kernel answers no 401 of its own here.
      errors: { 401: ['INVALID_CREDENTIALS'], 429: ['TOO_MANY_ATTEMPTS'] },
      input: (req) => req.body,
    }),
  );
  readRoutes(ctx, auth);
}

function readRoutes(ctx: PluginContext, auth: AuthKernel): void {
  const owners = ownersOf(auth.resources);
  ctx.route({
    method: 'GET',
    path: '/auth/status',
    public: true,
    tag: 'auth',
    operationId: 'auth.status',
    summary: 'Whether authentication is enabled and which login methods are accepted',
    response: Type.Object({ enabled: Type.Boolean(), methods: Type.Array(Type.String()), token_ttl_seconds: Type.Number() }),
    handler: () => ({ enabled: true, methods: [...LOGIN_METHODS], token_ttl_seconds: auth.settings.token_ttl }),
  });
  ctx.route({
    method: 'GET',
    path: '/auth/validate',
    permission: 'authenticated',
    tag: 'auth',
    operationId: 'auth.validate',
    summary: 'Check the current token and show its principal',
    tenancy: 'own',
    description:
      '`tenancy` shows the tenancy model as it applies to the caller: global or limited to its deployments, which ones, and which resources are owned by deployments or global.',
    response: Type.Object({ valid: Type.Literal(true), principal: PrincipalSchema, tenancy: TenancySchema }),
    handler: (req) => {
      const p = req.principal;
      const names = Object.keys(p.deployments).filter((n) => n !== '*');
      return {
        valid: true as const,
        principal: p.toJSON(),
        tenancy: {
          scope: p.scope,
          summary: p.isGlobal
            ? `global: every deployment at level ${p.deployments['*'] ?? 'none'} (more where granted), and global state as far as the permissions go`
            : `limited to ${names.length} deployment(s) (${names.join(', ') || 'none'}): nothing global, whatever the role says`,
          deployments: p.deployments,
          global_writes: p.isGlobal && p.permissions.some((x) => x.endsWith(':write')),
          resources: owners(),
        },
      };
    },
  });
}

/**
 * Deploy hooks: `GET|POST|DELETE /deployments/:name/hook` (whether there is one; create or rotate its secret, shown
 * once; disable it), and the hook itself, `POST /hooks/deployments/:name/redeploy`: a public route (no bearer)
 * whose call is authenticated by its signature (see hooks.ts), answered 202 with the redeploy's job, and audited as
 * `system:hook`. The redeploy runs with the rights of the hook's creator as they are at each call: a creator that
 * lost write access to the deployment (or was removed) makes the hook answer 403.
 */
import type { IncomingMessage } from 'node:http';
import { errors, isHttpError, operationRoute, principalFrom, reply, type PluginContext, type PrincipalDirectory } from '@agent/sdk';
import type { DeploymentManager } from '../manager.js';
import { HOOK_BODY_LIMIT, HOOK_HEADERS, HOOK_SIGNATURE_BASE, HOOK_WINDOW_SECONDS, type Hooks } from '../hooks.js';
import type { HookOperations } from '../operations/hooks.js';
import type { ChangeOperations } from '../operations/changes.js';
import { CreatedHook, HookState, NameParams, StartedJob } from '../schemas.js';
import { DEPLOY_ERRORS } from './revisions.js';
import { Type } from '@agent/sdk';

const SERVICE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;

async function readBody(req: IncomingMessage): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? 0) > HOOK_BODY_LIMIT) throw errors.tooLarge(`a hook call's body is at most ${HOOK_BODY_LIMIT} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > HOOK_BODY_LIMIT) throw errors.tooLarge(`a hook call's body is at most ${HOOK_BODY_LIMIT} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The redeploy a call asks for: an empty body, or JSON `{pull?, services?, reason?}`. */
function hookInput(body: Buffer): { pull?: boolean; services?: string[]; reason?: string } {
  const text = body.toString('utf8').trim();
  if (!text) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw errors.badRequest('body: not JSON', 'VALIDATION_FAILED');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw errors.badRequest('body: must be a JSON object', 'VALIDATION_FAILED');
  const { pull, services, reason, ...rest } = parsed as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) throw errors.badRequest(`body.${extra}: unknown property (pull, services, reason)`, 'VALIDATION_FAILED', { field: extra });
  if (pull !== undefined && typeof pull !== 'boolean') throw errors.badRequest('body.pull: must be a boolean', 'VALIDATION_FAILED', { field: 'pull' });
  if (
    services !== undefined &&
    (!Array.isArray(services) || !services.length || services.length > 100 || services.some((s) => typeof s !== 'string' || !SERVICE.test(s)))
  )
    throw errors.badRequest('body.services: a list of service names', 'VALIDATION_FAILED', { field: 'services' });
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 500 || /[\u0000-\u0008\u000b-\u001f\u007f]/.test(reason)))
    throw errors.badRequest('body.reason: at most 500 characters of text', 'VALIDATION_FAILED', { field: 'reason' });
  return {
    ...(pull !== undefined ? { pull } : {}),
    ...(services !== undefined ? { services: [...new Set(services as string[])] } : {}),
    ...(reason !== undefined ? { reason } : {}),
  };
}

export function hookRoutes(
  ctx: PluginContext<any>,
  deps: { manager: DeploymentManager; hooks: Hooks; ops: HookOperations; changes: ChangeOperations; principals: PrincipalDirectory },
): void {
  const { manager, hooks, ops, changes, principals } = deps;
  const describe = (name: string) => ({
    url: `/api/hooks/deployments/${name}/redeploy`,
    headers: { timestamp: HOOK_HEADERS.timestamp, delivery: HOOK_HEADERS.delivery, signature: HOOK_HEADERS.signature },
    signature: HOOK_SIGNATURE_BASE,
  });
  const state = (name: string) => {
    const hook = hooks.get(name);
    return {
      deployment: name,
      enabled: hook !== null,
      created_at: hook?.created_at ?? null,
      created_by: hook?.created_by ?? null,
      last_used_at: hook?.last_used_at ?? null,
      ...describe(name),
    };
  };

  ctx.route({
    method: 'GET',
    path: '/deployments/:name/hook',
    permission: 'deployments:read',
    operationId: 'deployments.hook',
    tag: 'deployments',
    summary: 'Whether the deployment has a deploy hook (never its secret), and how to call it',
    params: NameParams,
    deployment: 'name',
    response: HookState,
    handler: (req) => {
      manager.require(req.params.name);
      return state(req.params.name);
    },
  });

  ctx.route(
    operationRoute(ops.rotate, {
      method: 'POST',
      path: '/deployments/:name/hook',
      permission: 'deployments:write',
      deploymentLevel: 'admin',
      tag: 'deployments',
      status: 201,
      summary: 'Create or rotate the deploy hook secret (shown once; the previous secret stops working)',
      description: `Whoever holds the secret can redeploy the deployment without an API key: needs admin access to it. Sign calls as the plugin README says: HMAC-SHA256 over ${HOOK_SIGNATURE_BASE}; the timestamp within ${HOOK_WINDOW_SECONDS} s, each delivery id once.`,
      params: NameParams,
      deployment: 'name',
      response: CreatedHook,
      input: (req) => req.params,
      respond: ({ secret, rotated }, req) =>
        reply.created(
          { ...state(req.params.name), secret },
          `deploy hook of ${req.params.name} ${rotated ? 'rotated' : 'created'}: store the secret now, it is not shown again`,
        ),
    }),
  );

  ctx.route(
    operationRoute(ops.remove, {
      method: 'DELETE',
      path: '/deployments/:name/hook',
      permission: 'deployments:write',
      deploymentLevel: 'admin',
      tag: 'deployments',
      summary: 'Disable the deploy hook (its secret is forgotten; calls answer 404)',
      params: NameParams,
      deployment: 'name',
      response: HookState,
      input: (req) => req.params,
      respond: ({ name, removed }) => reply.ok(state(name), removed ? `deploy hook of ${name} disabled` : `deployment ${name} had no deploy hook`),
    }),
  );

  ctx.route({
    method: 'POST',
    path: '/hooks/deployments/:name/redeploy',
    public: true,
    rawBody: true,
    operationId: 'deployments.hookRedeploy',
    tag: 'deployments',
    status: 202,
    summary: 'Deploy hook for CI: redeploy, authenticated by the signature of the call (no bearer token)',
    description: `Headers: \`${HOOK_HEADERS.timestamp}\` (Unix seconds, within ${HOOK_WINDOW_SECONDS} s of the agent's clock), \`${HOOK_HEADERS.delivery}\` (a unique id per call, 1–128 of \`A-Z a-z 0-9 . _ : -\`), \`${HOOK_HEADERS.signature}: sha256=<hex>\`: HMAC-SHA256 with the hook secret over ${HOOK_SIGNATURE_BASE}. Body: empty or JSON \`{pull?, services?, reason?}\` (at most 64 KiB). 202 with the redeploy's job (strategy recreate); 404 when the deployment has no hook (or does not exist); 401 \`HOOK_SIGNATURE_INVALID\` / \`HOOK_TIMESTAMP_STALE\`; 409 \`HOOK_DELIVERY_REPLAYED\` for a delivery id already used; 409 \`JOB_IN_PROGRESS\` while another deploy job of the deployment runs (the same delivery may be sent again); 403 \`HOOK_CREATOR_LACKS_ACCESS\` when whoever created the hook may no longer redeploy the deployment; 429 \`RATE_LIMITED\` with \`Retry-After\` beyond \`deployments.hook_rate_limit\` calls a minute. Audited as \`system:hook\`.`,
    params: NameParams,
    response: Type.Intersect([StartedJob, Type.Object({ delivery: Type.String() })]),
    errors: {
      400: [...DEPLOY_ERRORS[400], 'VALIDATION_FAILED'],
      401: ['HOOK_SIGNATURE_INVALID', 'HOOK_TIMESTAMP_STALE'],
      403: ['HOOK_CREATOR_LACKS_ACCESS'],
      409: ['HOOK_DELIVERY_REPLAYED', 'JOB_IN_PROGRESS'],
      413: ['PAYLOAD_TOO_LARGE'],
      429: ['RATE_LIMITED'],
      503: DEPLOY_ERRORS[503],
    },
    handler: async (req) => {
      const name = req.params.name;
      const hook = manager.entries.has(name) ? hooks.get(name) : null;
      // The same answer for a deployment without a hook and for no deployment: a caller learns nothing of names.
      if (!hook) throw errors.notFound('no such hook');
      let delivery: string | null = null;
      const audit = (success: boolean, status: number, detail: Record<string, unknown>) =>
        ctx.audit({
          actor_type: 'system',
          actor_id: 'system:hook',
          actor_name: `deploy hook of ${name}`,
          action: 'deployments.hookRedeploy',
          resource_type: 'deployments',
          resource_id: name,
          deployment: name,
          success,
          status,
          client_ip: req.ip,
          detail: { delivery, on_behalf_of: hook.created_by, ...detail },
        });
      const refuse = async (err: unknown): Promise<never> => {
        if (isHttpError(err) && err.status !== 429) await audit(false, err.status, { error: err.code });
        throw err;
      };
      const body = await readBody(req.raw.req);
      try {
        delivery = hooks.verify(name, req.headers, body).delivery;
      } catch (err) {
        // Refused calls beyond the rate are answered 429 without an audit record each.
        if (!isHttpError(err) || err.status !== 429) hooks.admitRefused(name);
        return refuse(err);
      }
      let input: ReturnType<typeof hookInput>;
      try {
        input = hookInput(body);
        if (!hooks.remember(name, delivery))
          throw errors.conflict(`delivery '${delivery}' was already received: a call is accepted once`, 'HOOK_DELIVERY_REPLAYED');
      } catch (err) {
        return refuse(err);
      }
      const info = principals.principalById(hook.created_by);
      const creator = info ? principalFrom(info) : null;
      if (!creator || !creator.can('deployments:write') || !creator.canAccessDeployment(name, 'write'))
        return refuse(
          errors.forbidden(
            'whoever created this hook may no longer redeploy the deployment: an admin of it must create the hook again',
            'HOOK_CREATOR_LACKS_ACCESS',
          ),
        );
      // The redeploy runs as the hook, within its creator's rights of now.
      const principal = principalFrom({
        type: 'system',
        id: 'system:hook',
        name: `deploy hook of ${name} (for ${creator.name})`,
        role: 'operator',
        user_id: creator.user_id,
        permissions: ['deployments:read', 'deployments:write'],
        deployments: { [name]: 'write' },
        scope: 'deployments',
      });
      let started;
      try {
        started = await changes.redeploy.run({ name, ...input, strategy: 'recreate' }, { principal, ip: req.ip });
      } catch (err) {
        // The redeploy did not start (another job runs, the files fail their checks): the same delivery may retry.
        hooks.forget(name, delivery);
        return refuse(err);
      }
      hooks.used(name);
      await audit(true, 202, { job_id: started.job_id });
      return reply.accepted({ ...started, delivery }, `redeploy of ${name} started (job ${started.job_id})`);
    },
  });
}

/**
 * The route pipeline after authentication: the checks every entry makes (`admit`) → body → the deployment the route
 * finds itself → plan or handler. HTTP requests and plan applies both go through it, so a plan runs exactly what a
 * direct request would.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errors, Reply, type Principal, type RouteRequest, type UploadedFile } from '@agent/sdk';
import type { RegisteredRoute } from '../openapi/registry.js';
import { admit, checkScope } from '../auth/checks.js';
import type { PlanEngine } from '../plans/engine.js';

export interface Invocation {
  route: RegisteredRoute;
  principal: Principal | null;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  ip: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Created on first use (most handlers never need it). */
  signal: () => AbortSignal;
  raw: { req: IncomingMessage; res: ServerResponse };
  /** The files of a multipart route. */
  files?: Record<string, UploadedFile>;
  /** `?plan=true` was given. */
  wantsPlan: boolean;
  /** Set when running through plan apply. */
  planId?: string;
}

export interface ExecuteResult {
  reply: Reply;
  /** The deployment the request was about, when the route is deployment-scoped (for the audit record). */
  deployment: string | null;
}

/**
 * What a handler receives. A class (not an object literal with a spread and a getter) keeps its shape fixed, so
 * building one per request stays on V8's fast path.
 */
class HandlerRequest implements RouteRequest {
  readonly params: Record<string, string>;
  readonly query: Record<string, unknown>;
  readonly principal: Principal;
  readonly ip: string;
  readonly method: RouteRequest['method'];
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly raw: RouteRequest['raw'];
  readonly plan: { id: string } | undefined;
  readonly files: Record<string, UploadedFile> | undefined;

  constructor(
    private readonly inv: Invocation,
    readonly body: unknown,
  ) {
    this.params = inv.params;
    this.query = inv.query;
    this.principal = inv.principal!;
    this.ip = inv.ip;
    this.method = inv.route.method;
    this.path = inv.path;
    this.headers = inv.headers;
    this.raw = inv.raw;
    this.plan = inv.planId ? { id: inv.planId } : undefined;
    this.files = inv.files;
  }

  get signal(): AbortSignal {
    return this.inv.signal();
  }
}

/**
 * Runs the pipeline. Synchronous for a synchronous handler (most are): the HTTP layer then answers without a
 * promise of its own. Errors before the handler runs are thrown, not returned as rejections.
 */
export function execute(
  inv: Invocation,
  plans: PlanEngine,
  validateResponse?: (route: RegisteredRoute, data: unknown) => void,
): ExecuteResult | Promise<ExecuteResult> {
  const { route, principal } = inv;
  const spec = route.spec;
  let deployment = admit(route, principal, inv.params, inv.query);
  let body = inv.body;
  if (route.validate.body) {
    if (body === undefined || body === null) body = {};
    const bodyError = route.validate.body(body);
    if (bodyError) throw bodyError;
  }

  const req = new HandlerRequest(inv, body);

  if (typeof spec.deployment === 'function' && principal) {
    deployment = checkScope(principal, spec.deployment(req), route, false);
  }

  if (inv.wantsPlan) {
    if (!spec.plan) throw errors.badRequest(`${route.method} ${route.path} does not support plans`, 'PLAN_NOT_SUPPORTED');
    return plans
      .create({ route, principal: inv.principal!, params: inv.params, query: inv.query, body, path: inv.path })
      .then((plan) => ({ reply: new Reply(201, { data: plans.view(plan), message: 'plan created; nothing was changed' }), deployment }));
  }

  const finish = (result: unknown): ExecuteResult => {
    const reply = result instanceof Reply ? result : new Reply(spec.status ?? 200, { data: result === undefined ? null : result });
    if (validateResponse && reply.body && reply.status < 300 && spec.response) validateResponse(route, reply.body.data);
    return { reply, deployment };
  };
  const result: unknown = spec.handler(req);
  return result instanceof Promise ? result.then(finish) : finish(result);
}

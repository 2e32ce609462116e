/**
 * Operations: each change a plugin makes, declared once. `prepare(input, caller)` does every check and returns the
 * planned change (what a plan shows, what it depends on, and what `apply` needs); `apply(prepared, caller)` does
 * it. A route made with `operationRoute` runs the same operation for a direct request (prepare → apply), for its
 * `?plan=true` preview (prepare only) and for a plan's apply (the stored request, so prepare again → apply): the
 * preview can no longer drift from what the handler checks, and a route handler is a few lines.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import type { PlanPreview, PlanSnapshot, RequestOf, RouteSpec } from './http.js';
import type { Principal } from './principal.js';

/** Who asks, and how to stop: the same for a request, a plan's apply, or the console. */
export interface OperationCaller {
  principal: Principal;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  ip?: string;
}

/** A checked change, ready to apply. */
export interface Prepared<V> {
  /** What `apply` needs (the checked, normalised input and whatever the checks found). */
  value: V;
  /** What a plan shows: a summary and the resources it changes. Required when a plannable route runs the operation (its `?plan=true` answer); others may leave it out. */
  preview?: PlanPreview;
  /** What the change depends on (files, records): re-read at a plan's apply, any difference is 409 PLAN_STALE. */
  snapshot?: PlanSnapshot;
}

export interface OperationSpec<S extends TSchema, V, R> {
  /** `<plugin>.<verb>`, e.g. `deployments.create`: names the operation in plans, the audit and the console. */
  name: string;
  /** The input's schema (its type is the input's type). */
  input: S;
  /** The resource the change is about: applying one plan obsoletes the others on the same resource. */
  resource(input: Static<S>): { type: string; id: string };
  /** Every check; throws `HttpError` (400/403/404/409…) when the change cannot be made. Changes nothing. */
  prepare(input: Static<S>, caller: OperationCaller): Prepared<V> | Promise<Prepared<V>>;
  /** Makes the change `prepare` planned. */
  apply(prepared: V, caller: OperationCaller): R | Promise<R>;
  /**
   * What a plan of the change depends on, from the input and the current state alone (paths, records), without the
   * checks. When given, it is what a plan fingerprints when it is made and again when it is applied, before
   * `prepare` runs again: a dependency edited meanwhile answers 409 PLAN_STALE, not whatever the checks now say about
   * the edited file, and the apply does not run the checks twice. Without it, the snapshot `prepare` returns is
   * used (at a plan's apply that means a whole `prepare` just to fingerprint).
   */
  snapshot?(input: Static<S>): PlanSnapshot | Promise<PlanSnapshot>;
  /**
   * Called when `prepare` refuses a change that was asked for (a request, a plan's apply, `run`), never for a
   * preview, which changes nothing. For refusals that are facts of their own: a start that the checks of its files
   * refuse is a failed start (recorded and announced), while the preview of that start only answers the error. An
   * error it throws does not replace the refusal.
   */
  refused?(input: Static<S>, error: unknown, caller: OperationCaller): void | Promise<void>;
}

export interface Operation<S extends TSchema = TSchema, V = unknown, R = unknown> extends OperationSpec<S, V, R> {
  /** prepare then apply, for callers that do not preview (other plugins, background work). */
  run(input: Static<S>, caller: OperationCaller): Promise<R>;
}

/** Declares an operation. */
export function defineOperation<S extends TSchema, V, R>(spec: OperationSpec<S, V, R>): Operation<S, V, R> {
  if (!/^[a-z][a-z0-9-]*(\.[a-z][A-Za-z0-9-]*)+$/.test(spec.name)) throw new Error(`invalid operation name '${spec.name}'`);
  return {
    ...spec,
    run: async (input, caller) => spec.apply((await asked(spec, input, caller, () => spec.prepare(input, caller))).value, caller),
  };
}

/** The prepare of a change that was asked for (not previewed): a refusal goes to `refused` first. */
async function asked<S extends TSchema, V, R>(
  spec: OperationSpec<S, V, R>,
  input: Static<S>,
  caller: OperationCaller,
  prepare: () => Prepared<V> | Promise<Prepared<V>>,
): Promise<Prepared<V>> {
  try {
    return await prepare();
  } catch (err) {
    if (spec.refused) {
      try {
        await spec.refused(input, err, caller);
      } catch {
        // The refusal is the answer; recording it is the operation's own concern (and its own log).
      }
    }
    throw err;
  }
}

/** A route spec without what the operation gives it. */
type RouteOf<P, Q, B> = Omit<RouteSpec<P, Q, B>, 'handler' | 'plan'>;

/**
 * A route that runs an operation. `input` maps the request (params, query, body) to the operation's input;
 * `respond` turns its result into the answer (`reply.created(…)`, data, …; the result as `data` by default).
 * With `plannable`, `?plan=true` answers the operation's preview. The route's `operationId` is the operation's
 * name unless it gives one.
 */
export function operationRoute<
  S extends TSchema,
  V,
  R,
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
>(
  operation: Operation<S, V, R>,
  route: RouteOf<P, Q, B> & {
    input(req: RequestOf<P, Q, B>): Static<S>;
    respond?(result: R, req: RequestOf<P, Q, B>): unknown;
    plannable?: boolean;
  },
): RouteSpec<P, Q, B> {
  const { input, respond, plannable, ...rest } = route;
  // One prepare per request: the plan engine asks for the preview and the snapshot separately.
  const prepared = new WeakMap<object, Promise<Prepared<V>>>();
  const prepare = (req: RequestOf<P, Q, B>) => {
    let found = prepared.get(req);
    // A promise either way: a prepare that throws at once is a refusal like any other.
    if (!found) prepared.set(req, (found = new Promise<Prepared<V>>((resolve) => resolve(operation.prepare(input(req), callerOf(req))))));
    return found;
  };
  const snapshot = operation.snapshot?.bind(operation);
  return {
    operationId: operation.name,
    ...rest,
    ...(plannable
      ? {
          plan: {
            resource: (req: RequestOf<P, Q, B>) => operation.resource(input(req)),
            preview: async (req: RequestOf<P, Q, B>) => {
              const { preview } = await prepare(req);
              if (!preview) throw new Error(`operation ${operation.name} runs a plannable route but its prepare gives no preview`);
              return preview;
            },
            snapshot: snapshot ? (req: RequestOf<P, Q, B>) => snapshot(input(req)) : async (req: RequestOf<P, Q, B>) => (await prepare(req)).snapshot ?? {},
          },
        }
      : {}),
    handler: async (req: RequestOf<P, Q, B>) => {
      const caller = callerOf(req);
      const result = await operation.apply((await asked(operation, input(req), caller, () => prepare(req))).value, caller);
      return respond ? respond(result, req) : result;
    },
  } as RouteSpec<P, Q, B>;
}

const callerOf = (req: { principal: Principal; ip: string; signal: AbortSignal }): OperationCaller => ({
  principal: req.principal,
  ip: req.ip,
  get signal() {
    return req.signal;
  },
});

/** Turns dockerode failures into the agent's HTTP errors. */
import { errors, HttpError, isHttpError, mergeErrors, type ErrorCodes } from '@agent/sdk';

/**
 * What a route that calls the engine may answer because of it (`toHttpError`, `unavailable`): the engine away, an
 * object it does not know, and its own refusals passed on. Every route of this plugin declares it (plugin-wide),
 * and routes of other plugins that call the `docker` service add it to theirs.
 */
export const ENGINE_ERRORS = {
  400: ['ENGINE_REJECTED'],
  403: ['ENGINE_FORBIDDEN'],
  404: ['NOT_FOUND'],
  409: ['CONFLICT'],
  502: ['ENGINE_ERROR'],
  503: ['DOCKER_UNAVAILABLE'],
} as const satisfies ErrorCodes;

/**
 * What checking or running a compose project answers besides the engine's (`compose.check`, `compose.run`): the
 * host-safety policy, the file (YAML, compose's own refusal, sizes, the build context), compose missing.
 */
export const COMPOSE_ERRORS: ErrorCodes = mergeErrors(ENGINE_ERRORS, {
  400: ['HOST_SAFETY', 'INVALID_COMPOSE', 'INVALID_YAML', 'COMPOSE_TOO_LARGE', 'BUILD_CONTEXT_TOO_LARGE', 'VALIDATION_FAILED'],
  503: ['COMPOSE_UNAVAILABLE'],
});

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTSOCK']);

export const isConnectionError = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && CONNECTION_CODES.has(String((err as { code?: unknown }).code));

export const unavailable = () => errors.unavailable('the Docker engine does not answer', 'DOCKER_UNAVAILABLE');

/** The message the engine gave (`json.message`), without the HTTP preamble dockerode adds. */
export function engineMessage(err: unknown): string {
  const e = err as { json?: { message?: string } | null; reason?: string; message?: string };
  return e?.json?.message ?? e?.reason ?? e?.message ?? String(err);
}

export function statusOf(err: unknown): number | null {
  const s = (err as { statusCode?: unknown })?.statusCode;
  return typeof s === 'number' ? s : null;
}

/** Maps an engine error; `what` names the object for 404s ("container abc"). */
export function toHttpError(err: unknown, what: string): HttpError | Error {
  if (isHttpError(err)) return err;
  if (isConnectionError(err)) return unavailable();
  const status = statusOf(err);
  if (status === 404) return errors.notFound(`${what} not found`);
  if (status === 409) return errors.conflict(`${what}: ${engineMessage(err)}`, 'CONFLICT');
  if (status === 400) return errors.badRequest(`${what}: ${engineMessage(err)}`, 'ENGINE_REJECTED');
  if (status === 403) return errors.forbidden(`${what}: ${engineMessage(err)}`, 'ENGINE_FORBIDDEN');
  // The engine's own failures (a container that cannot be restarted while it is being removed, …) are its answer,
  // not the agent's fault: passed on as such rather than as an internal error.
  if (status !== null && status >= 500) return errors.badGateway(`${what}: ${engineMessage(err)}`, 'ENGINE_ERROR');
  return err instanceof Error ? err : new Error(String(err));
}

/** Calling an operation by its operationId, checked against the description first (what agentctl does). */
import type { AgentClient, AgentResponse } from './agent-client.js';
import { fillPath, type ApiDescription } from './description.js';
import { RequestInvalidError } from './errors.js';
import type { Envelope } from './types.js';
import { validateBody, validateParameters } from './validate.js';

export interface OperationInput {
  params?: Record<string, unknown>;
  query?: Record<string, unknown>;
  body?: unknown;
  /** Send `plan=true` (the operation must support plans): the answer is a plan. */
  plan?: boolean;
  signal?: AbortSignal;
}

/**
 * `callOperation(client, description, 'deployments.create', { body })`: validates path arguments, query and body
 * against the live schemas (throws `RequestInvalidError` listing every problem, nothing sent), then sends it.
 */
export async function callOperation<T = unknown>(
  client: AgentClient,
  description: ApiDescription,
  operationId: string,
  input: OperationInput = {},
): Promise<AgentResponse<Envelope<T>>> {
  const op = description.byId(operationId);
  if (!op) throw new RequestInvalidError([`the agent has no operation '${operationId}'`]);
  if (op.websocket) throw new RequestInvalidError([`${operationId} is a websocket: use client.follow()`]);
  const params = { ...(input.params ?? {}) };
  const query = { ...(input.query ?? {}) };
  const problems = validateParameters(op, params, query);
  if (op.body) problems.push(...validateBody(op.body, input.body ?? {}));
  else if (input.body !== undefined) problems.push(`${operationId} takes no body`);
  if (input.plan && !op.plan) problems.push(`${operationId} does not support plans`);
  if (problems.length) throw new RequestInvalidError(problems);
  if (input.plan) query.plan = true;
  return client.request<Envelope<T>>(op.method, fillPath(op, params), {
    query: query as Record<string, string>,
    body: op.body ? (input.body ?? {}) : undefined,
    signal: input.signal,
  });
}

/** Errors the client raises: answers of the agent, and problems found before anything was sent. */
import type { ErrorBody } from './types.js';

/** The agent answered with an error status (`{error, code}`). */
export class AgentApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.error);
    this.name = 'AgentApiError';
    this.status = status;
    this.code = body.code;
    this.body = body;
  }
}

/** The agent could not be reached, or answered something that is not the agent's API. */
export class AgentConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentConnectionError';
  }
}

/** A request the client refused to send: the problems are listed, one per entry. */
export class RequestInvalidError extends Error {
  readonly problems: string[];

  constructor(problems: string[]) {
    super(problems.join('\n'));
    this.name = 'RequestInvalidError';
    this.problems = problems;
  }
}

/** Builds the error body for a non-JSON or malformed error answer. */
export function errorBodyFrom(status: number, text: string, parsed: unknown): ErrorBody {
  if (parsed && typeof parsed === 'object' && typeof (parsed as ErrorBody).error === 'string') {
    const body = parsed as ErrorBody;
    return { ...body, code: typeof body.code === 'string' ? body.code : `HTTP_${status}` };
  }
  return { error: text.trim().slice(0, 500) || `HTTP ${status}`, code: `HTTP_${status}` };
}

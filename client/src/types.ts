/** Shapes of the agent's HTTP API that the client relies on. */

/** Every error answer: `{error, code}`, sometimes with extra fields (e.g. `drifted` on a stale plan). */
export interface ErrorBody {
  error: string;
  code: string;
  [extra: string]: unknown;
}

/** A successful JSON answer. */
export interface Envelope<T = unknown> {
  data: T;
  message?: string;
  meta?: PageMeta;
}

export interface PageMeta {
  total: number;
  limit: number;
  offset: number;
}

export type PlanStatus = 'available' | 'applying' | 'applied' | 'failed' | 'obsolete' | 'expired';
export type PlanAction = 'create' | 'update' | 'delete' | 'no-op';

export interface PlanChange {
  type: string;
  id: string;
  actions: PlanAction[];
  before?: unknown;
  after?: unknown;
  /** A unified diff of text content, when the plugin provides one. */
  diff?: string;
  sensitive?: boolean;
}

export interface Plan {
  id: string;
  action: string;
  status: PlanStatus;
  summary?: string;
  resource: { type: string; id: string };
  request?: { method: string; path: string; query?: Record<string, unknown>; body?: unknown };
  changes: PlanChange[];
  created_at?: string;
  expires_at: string;
  applied_at?: string;
  apply_error?: { code: string; error: string };
}

/** `POST /api/plans/:id/apply` answers the applied plan and the result of the operation it ran. */
export interface PlanApplyResult {
  plan: Plan;
  result: unknown;
}

export interface LoginResult {
  token: string;
  expires_at: string;
  user?: { id: number; username: string; role: string };
  api_key?: { id: number; name: string; role: string };
}

export interface Health {
  status: 'ok' | 'degraded';
  version: string;
  uptime: string;
}

export type Credentials = { username: string; password: string } | { apiKey: string };

/**
 * `GET /api/system/doctor`. The plugin SDK declares the same shape for the code that produces it; the client
 * describes what it reads on the wire, as for the other answers here, so a client user does not pull the plugin API.
 */
export interface DoctorReport {
  /** No check failed (warnings allowed). */
  ok: boolean;
  checked_at: string;
  checks: DoctorCheckReport[];
}

export interface DoctorCheckReport {
  id: string;
  title: string;
  /** `ok` works; `warning` works but should be looked at; `failed` does not work; `skipped` not applicable here. */
  status: 'ok' | 'warning' | 'failed' | 'skipped';
  /** What was found, for people. */
  detail: string;
  /** The command (or step) that fixes a warning or failure. */
  fix?: string;
  /** The plugin that contributed the check (`core` for the core's own). */
  plugin: string;
  duration_ms: number;
}

/** A query parameter value: arrays repeat the parameter. */
export type QueryValue = string | number | boolean | null | undefined | (string | number | boolean)[];

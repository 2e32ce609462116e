/**
 * Checks of the external parts the agent uses (`agentctl doctor`, `GET /api/system/doctor`). Each plugin
 * contributes the checks of what it drives with `ctx.doctor(check)`; the core adds its own (Node.js, the data
 * folder, secrets) and the system plugin serves the report.
 */

/** `ok` works; `warning` works but should be looked at; `failed` does not work; `skipped` not applicable here. */
export type CheckStatus = 'ok' | 'warning' | 'failed' | 'skipped';

export interface CheckResult {
  status: CheckStatus;
  /** What was found, for people: "Docker 28.2.2, API 1.50" or why it failed. Never a secret. */
  detail: string;
  /** The command (or step) that fixes a warning or failure. */
  fix?: string;
}

export interface DoctorCheck {
  /** Stable id, `<plugin>.<part>` by convention: `docker.engine`, `edge.nginx`. */
  id: string;
  /** What is checked: "Docker engine". */
  title: string;
  /** Runs the check; a throw counts as `failed` with its message. Aborted when the report's time is up. */
  run(signal: AbortSignal): CheckResult | Promise<CheckResult>;
}

export interface DoctorCheckReport extends CheckResult {
  id: string;
  title: string;
  /** The plugin that contributed the check (`core` for the core's own). */
  plugin: string;
  duration_ms: number;
}

export interface DoctorReport {
  /** No check failed (warnings allowed). */
  ok: boolean;
  checked_at: string;
  checks: DoctorCheckReport[];
}

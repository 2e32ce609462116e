/**
 * The typed event bus. Known events are listed here; a plugin adds its own with declaration merging:
 *
 *   declare module '@agent/sdk' { interface AgentEvents { 'hello.said': { to: string } } }
 */
export interface AgentEvents {
  /** The agent serves requests (every plugin started): the moment for background work that can wait. */
  'agent.ready': { url: string };
  'plugin.started': { name: string };
  'plugin.failed': { name: string; error: string };
  'deployment.created': { name: string };
  'deployment.updated': { name: string };
  /**
   * What hangs on the name must not pass to a new deployment of that name: remove it, or keep it under
   * `retired_as` (`<name>~<time>`, never a valid deployment name, so only global principals reach it).
   */
  'deployment.deleted': { name: string; removed_files: boolean; retired_as: string };
  'deployment.started': { name: string };
  'deployment.stopped': { name: string };
  'deployment.failed': { name: string; error: string };
  'container.state': { id: string; name: string; deployment: string | null; service: string | null; action: string };
  'backup.finished': { id: string; deployment: string; success: boolean; error?: string };
  'restore.finished': { id: string; deployment: string; success: boolean; error?: string };
  'certificate.issued': { domain: string };
  'certificate.renewal_failed': { domain: string; error: string };
  'certificate.expiring': { domain: string; days_left: number };
  'security.ip_blocked': { ip: string; reason: string; deployment?: string | null; auto: boolean };
  'alert.fired': { rule: string; deployment?: string | null; container?: string; value: number; message: string };
  'alert.resolved': { rule: string; deployment?: string | null; container?: string; message: string };
  'health.recovered': { container: string; deployment: string | null; message: string };
  'health.gave_up': { container: string; deployment: string | null; message: string };
  'settings.changed': { plugin: string; keys: string[] };
}

export type EventName = keyof AgentEvents;

export interface EventBus {
  /** Subscribes; returns a function that unsubscribes. Listener errors are logged, never propagated. */
  on<E extends EventName>(event: E, listener: (payload: AgentEvents[E]) => void | Promise<void>): () => void;
  emit<E extends EventName>(event: E, payload: AgentEvents[E]): void;
}

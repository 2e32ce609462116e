/**
 * Calls back into the agent with the app's system token: actions go through the agent's own API (and its audit)
 * rather than straight to the engine. The token is issued when the core spawns the app; when the agent stops
 * accepting it (expired), the app exits so the core restarts it with a fresh one (its state is on disk).
 */
import type { Notice } from './notice.js';
import type { Logger } from './log.js';

export class AgentClient {
  private notifyMissingLogged = false;

  constructor(private readonly baseUrl: string, private readonly token: string, private readonly log: Logger) {}

  private async call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${this.baseUrl}/api${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch { /* not JSON */ }
    if (res.status === 401) {
      this.log.error('the agent refused the app token; exiting so the core restarts the app with a new one');
      setTimeout(() => process.exit(75), 100);
    }
    return { status: res.status, body: parsed };
  }

  /** Restarts a container through the docker plugin; throws with the agent's error message. */
  async restartContainer(id: string): Promise<void> {
    const res = await this.call('POST', `/containers/${encodeURIComponent(id)}/restart?timeout=10`);
    if (res.status >= 300) throw new Error(`restart refused: ${res.status} ${res.body?.error ?? ''}`.trim());
  }

  /** Names of the agent's deployments; empty when the deployments plugin is not enabled. */
  async deploymentNames(): Promise<string[]> {
    const res = await this.call('GET', '/deployments');
    if (res.status === 404) return [];
    if (res.status !== 200) throw new Error(`listing deployments: ${res.status} ${res.body?.error ?? ''}`.trim());
    return (res.body.data as { name: string }[]).map((d) => d.name);
  }

  /** Deployment deletions the agent recorded after `after` (see src/agent-routes.ts). */
  async deploymentDeletions(after: number): Promise<{ seq: number; items: { seq: number; name: string; retired_as: string; deleted_at: string }[] }> {
    const res = await this.call('GET', `/observability/deployment-deletions?after=${after}`);
    if (res.status !== 200) throw new Error(`reading deployment deletions: ${res.status} ${res.body?.error ?? ''}`.trim());
    return res.body.data;
  }

  /** Why a rule's creator may not run its action on a container of `deployment` now (null: it may). */
  async actionRefusal(principal: string, deployment: string | null): Promise<string | null> {
    const res = await this.call('POST', '/observability/authorize-action', { principal, deployment });
    if (res.status !== 200) throw new Error(`${res.status} ${res.body?.error ?? ''}`.trim());
    return res.body.data.allowed ? null : String(res.body.data.reason);
  }

  /** Queues a notification; failures are logged, never thrown (an alert must not fail because of a target). */
  async notify(message: Notice): Promise<void> {
    try {
      const res = await this.call('POST', '/notifications/send', message);
      if (res.status === 404 && res.body?.code === 'NOT_FOUND') {
        if (!this.notifyMissingLogged) this.log.warn('notifications plugin not enabled: alerts are not sent anywhere');
        this.notifyMissingLogged = true;
      } else if (res.status >= 300) {
        this.log.warn('notification refused by the agent', { status: res.status, error: res.body?.error });
      }
    } catch (err) {
      this.log.warn('could not reach the agent to notify', { error: String(err) });
    }
  }
}

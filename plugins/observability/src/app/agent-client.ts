/**
 * Calls back into the agent with the app's system token: actions go through the agent's own API (and its audit)
 * rather than straight to the engine. The token is issued when the agent (its apps plugin) spawns the app; when the
 * agent stops accepting it (expired), the app exits so the agent restarts it with a fresh one (its state is on disk).
 * The HTTP side is the agent's typed client (`@agent/client`); this class holds what the app asks of the agent.
 */
import { AgentApiError, AgentClient as ApiClient, type QueryValue } from '@agent/client';
import type { Notice } from './notice.js';
import type { Logger } from './log.js';

/** The agent's JSON answer: `{data}` on success, `{error, code}` for an error status. */
type Envelope = { data?: unknown; error?: string; code?: string };
/** The status and the parsed JSON body (an error answer's `{error, code}` included). */
type Answer = { status: number; body: Envelope | null };

/** Deployment deletions after a sequence number (see src/agent-routes.ts). */
type DeploymentDeletions = { seq: number; items: { seq: number; name: string; retired_as: string; deleted_at: string }[] };

export class AgentClient {
  private notifyMissingLogged = false;
  private readonly api: ApiClient;

  constructor(
    baseUrl: string,
    token: string,
    private readonly log: Logger,
  ) {
    this.api = new ApiClient({ url: baseUrl, token, userAgent: 'observability-app', timeoutMs: 60_000 });
  }

  /** The answer's status and JSON body, error statuses included: each call decides what an error means for it. */
  private async call(method: string, path: string, options: { body?: unknown; query?: Record<string, QueryValue> } = {}): Promise<Answer> {
    try {
      const res = await this.api.request<Envelope>(method, path, options);
      return { status: res.status, body: res.json ?? null };
    } catch (err) {
      if (!(err instanceof AgentApiError)) throw err;
      if (err.status === 401) {
        this.log.error('the agent refused the app token; exiting so the agent restarts the app with a new one');
        setTimeout(() => process.exit(75), 100);
      }
      return { status: err.status, body: err.body };
    }
  }

  /** Restarts a container through the docker plugin; throws with the agent's error message. */
  async restartContainer(id: string): Promise<void> {
    const res = await this.call('POST', `/containers/${encodeURIComponent(id)}/restart`, { query: { timeout: 10 } });
    if (res.status >= 300) throw new Error(`restart refused: ${res.status} ${res.body?.error ?? ''}`.trim());
  }

  /** Names of the agent's deployments; empty when the deployments plugin is not enabled. */
  async deploymentNames(): Promise<string[]> {
    const res = await this.call('GET', '/deployments');
    if (res.status === 404) return [];
    if (res.status !== 200) throw new Error(`listing deployments: ${res.status} ${res.body?.error ?? ''}`.trim());
    return (res.body!.data as { name: string }[]).map((d) => d.name);
  }

  /** Deployment deletions the agent recorded after `after` (see src/agent-routes.ts). */
  async deploymentDeletions(after: number): Promise<DeploymentDeletions> {
    const res = await this.call('GET', '/observability/deployment-deletions', { query: { after } });
    if (res.status !== 200) throw new Error(`reading deployment deletions: ${res.status} ${res.body?.error ?? ''}`.trim());
    return res.body!.data as DeploymentDeletions;
  }

  /** Why a rule's creator may not run its action on a container of `deployment` now (null: it may). */
  async actionRefusal(principal: string, deployment: string | null): Promise<string | null> {
    const res = await this.call('POST', '/observability/authorize-action', { body: { principal, deployment } });
    if (res.status !== 200) throw new Error(`${res.status} ${res.body?.error ?? ''}`.trim());
    const data = res.body!.data as { allowed: boolean; reason: string | null };
    return data.allowed ? null : String(data.reason);
  }

  /** Queues a notification; failures are logged, never thrown (an alert must not fail because of a target). */
  async notify(message: Notice): Promise<void> {
    try {
      const res = await this.call('POST', '/notifications/send', { body: message });
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

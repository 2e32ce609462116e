/**
 * The deployments this agent manages (from its `GET /api/deployments`). The health watcher and restart actions
 * only touch containers of these (unless `health.scope` is `all`): other compose projects on the same engine —
 * another agent's, or ones started by hand — are not ours to restart. Refreshed periodically, and sooner when a
 * container of an unknown project shows up.
 */
import type { AgentClient } from './agent-client.js';
import type { Logger } from './log.js';

const REFRESH_MS = 30_000;
const MIN_GAP_MS = 3_000;

export class KnownDeployments {
  private names = new Set<string>();
  private lastRefresh = 0;
  private inFlight: Promise<void> | null = null;

  constructor(private readonly agent: AgentClient, private readonly log: Logger) {}

  has(name: string | null): boolean {
    return name !== null && this.names.has(name);
  }

  /** Refreshes when stale, or when `wanted` names a project not known yet (at most every few seconds). */
  async ensure(wanted: (string | null)[] = []): Promise<void> {
    const now = Date.now();
    const unknown = wanted.some((n) => n !== null && !this.names.has(n));
    if (now - this.lastRefresh < (unknown ? MIN_GAP_MS : REFRESH_MS)) return;
    this.inFlight ??= (async () => {
      this.lastRefresh = Date.now();
      try {
        this.names = new Set(await this.agent.deploymentNames());
      } catch (err) {
        this.log.warn('could not list the deployments of the agent', { error: String(err) });
      } finally {
        this.inFlight = null;
      }
    })();
    await this.inFlight;
  }
}

/**
 * What the app knows of the agent's deployments, from the agent's API (refreshed periodically, and sooner when a
 * container of an unknown project shows up or a request needs it):
 * - their names (`GET /api/deployments`): the health watcher and restart actions only touch containers of these
 *   (unless `health.scope` is `all`); other compose projects on the same engine — another agent's, or ones started
 *   by hand — are not ours to restart;
 * - their deletions (`GET /api/observability/deployment-deletions`, recorded by the plugin's in-process part): what
 *   hangs on a deleted deployment's name (its alert rules) is removed, so a new deployment of the same name starts
 *   without it. The last deletion handled is kept on disk: one made while the app was down is handled at its start.
 */
import { join } from 'node:path';
import type { AgentClient } from './agent-client.js';
import { readJson, writeJson } from './files.js';
import type { Logger } from './log.js';

const REFRESH_MS = 30_000;
const MIN_GAP_MS = 3_000;
/** Requests that read or write rules apply deletions first, at most this often. */
const SYNC_GAP_MS = 1_000;

export interface Deletion {
  name: string;
  retired_as: string;
  /** Epoch ms. */
  deleted_at: number;
}

export class KnownDeployments {
  private names = new Set<string>();
  private lastRefresh = 0;
  private inFlight: Promise<void> | null = null;
  private readonly cursorFile: string;
  private cursor: number;
  private lastSync = 0;
  private syncing: Promise<void> | null = null;

  constructor(
    private readonly agent: AgentClient,
    private readonly log: Logger,
    dataDir: string,
    private readonly onDeleted: (deletion: Deletion) => void,
  ) {
    this.cursorFile = join(dataDir, 'deletions.json');
    this.cursor = readJson<{ seq: number }>(this.cursorFile, { seq: 0 }).seq;
  }

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
    await this.sync(REFRESH_MS);
  }

  /** Applies the deletions recorded since the last one handled (at most every `gapMs`). */
  async sync(gapMs = SYNC_GAP_MS): Promise<void> {
    if (Date.now() - this.lastSync < gapMs) return;
    this.syncing ??= (async () => {
      this.lastSync = Date.now();
      try {
        const { seq, items } = await this.agent.deploymentDeletions(this.cursor);
        const before = this.cursor;
        for (const item of items) {
          this.onDeleted({ name: item.name, retired_as: item.retired_as, deleted_at: Date.parse(item.deleted_at) });
          this.cursor = item.seq;
        }
        // The agent's list starts again (a new data folder): start from its end, there is nothing older to handle.
        if (seq < this.cursor) this.cursor = seq;
        if (this.cursor !== before) writeJson(this.cursorFile, { seq: this.cursor });
      } catch (err) {
        this.log.warn('could not read the deployment deletions of the agent', { error: String(err) });
      } finally {
        this.syncing = null;
      }
    })();
    await this.syncing;
  }
}

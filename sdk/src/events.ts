/**
 * The typed event bus. The core's events are listed here; a plugin adds its own with declaration merging in its
 * `api` module (where its consumers find them):
 *
 *   declare module '@agent/sdk' { interface AgentEvents { 'hello.said': { to: string } } }
 */
export interface AgentEvents {
  /** The agent serves requests (every plugin started): the moment for background work that can wait. */
  'agent.ready': { url: string };
  'plugin.started': { name: string };
  'plugin.failed': { name: string; error: string };
  'settings.changed': { plugin: string; keys: string[] };
  /**
   * What these users, or keys of theirs, may do changed (a key revoked or deleted; a user disabled, deleted,
   * demoted or given a new password; a grant set or removed): emitted by the principal directory once the change is
   * in effect. The kernel then authenticates and admits again their open websockets, streamed answers and proxied
   * requests, and ends those that no longer pass.
   */
  'principals.changed': { user_ids: number[] };
}

export type EventName = keyof AgentEvents;

export interface EventBus {
  /** Subscribes; returns a function that unsubscribes. Listener errors are logged, never propagated. */
  on<E extends EventName>(event: E, listener: (payload: AgentEvents[E]) => void | Promise<void>): () => void;
  emit<E extends EventName>(event: E, payload: AgentEvents[E]): void;
}

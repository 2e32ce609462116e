/** The typed event bus over tiny-typed-emitter. A failing listener is logged and never breaks the emitter. */
import { TypedEmitter } from 'tiny-typed-emitter';
import type { AgentEvents, EventBus, EventName, Logger } from '@agent/sdk';

type Listeners = { [E in EventName]: (payload: AgentEvents[E]) => void };

export class AgentEventBus implements EventBus {
  private readonly emitter = new TypedEmitter<Listeners>();

  constructor(private readonly log: Logger) {
    this.emitter.setMaxListeners(200);
  }

  on<E extends EventName>(event: E, listener: (payload: AgentEvents[E]) => void | Promise<void>): () => void {
    const fail = (err: unknown) => this.log.error('event listener failed', { event, error: String(err) });
    const safe = ((payload: AgentEvents[E]) => {
      try {
        (listener(payload) as Promise<void> | undefined)?.catch?.(fail);
      } catch (err) {
        fail(err);
      }
    }) as Listeners[E];
    this.emitter.on(event, safe);
    return () => {
      this.emitter.off(event, safe);
    };
  }

  emit<E extends EventName>(event: E, payload: AgentEvents[E]): void {
    (this.emitter.emit as (e: E, p: AgentEvents[E]) => boolean)(event, payload);
  }

  /** A view whose subscriptions are dropped together (when a plugin stops). */
  scoped(): EventBus & { dispose(): void } {
    const offs: (() => void)[] = [];
    return {
      on: (event, listener) => {
        const off = this.on(event, listener);
        offs.push(off);
        return off;
      },
      emit: (event, payload) => this.emit(event, payload),
      dispose: () => offs.splice(0).forEach((off) => off()),
    };
  }
}

import type { AgentEvents, EventBus, EventName, Logger } from '@agent/sdk';
export declare class AgentEventBus implements EventBus {
    private readonly log;
    private readonly emitter;
    constructor(log: Logger);
    on<E extends EventName>(event: E, listener: (payload: AgentEvents[E]) => void | Promise<void>): () => void;
    emit<E extends EventName>(event: E, payload: AgentEvents[E]): void;
    /** A view whose subscriptions are dropped together (when a plugin stops). */
    scoped(): EventBus & {
        dispose(): void;
    };
}
//# sourceMappingURL=bus.d.ts.map
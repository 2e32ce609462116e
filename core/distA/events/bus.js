/** The typed event bus over tiny-typed-emitter. A failing listener is logged and never breaks the emitter. */
import { TypedEmitter } from 'tiny-typed-emitter';
export class AgentEventBus {
    log;
    emitter = new TypedEmitter();
    constructor(log) {
        this.log = log;
        this.emitter.setMaxListeners(200);
    }
    on(event, listener) {
        const safe = ((payload) => {
            try {
                const result = listener(payload);
                if (result && typeof result.catch === 'function') {
                    result.catch((err) => this.log.error('event listener failed', { event, error: String(err) }));
                }
            }
            catch (err) {
                this.log.error('event listener failed', { event, error: String(err) });
            }
        });
        this.emitter.on(event, safe);
        return () => {
            this.emitter.off(event, safe);
        };
    }
    emit(event, payload) {
        this.emitter.emit(event, payload);
    }
    /** A view whose subscriptions are dropped together (when a plugin stops). */
    scoped() {
        const offs = [];
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
//# sourceMappingURL=bus.js.map
import { type Logger, type Scheduler } from '@agent/sdk';
import type { Journal } from '../store/journal.js';
export declare function validateCron(expression: string): string | null;
export declare class CoreScheduler {
    private readonly db;
    private readonly log;
    private readonly insert;
    private readonly finish;
    private readonly shutdown;
    constructor(db: Journal, log: Logger);
    private get;
    private runEntry;
    /** The scheduler a plugin sees; its jobs are armed by `startAll` and cancelled by `stopAll`. */
    forPlugin(plugin: string): Scheduler & {
        startAll(): void;
        stopAll(): void;
        list(): {
            name: string;
            cron: string;
            next_run: string | null;
        }[];
    };
    stop(): void;
}
//# sourceMappingURL=scheduler.d.ts.map
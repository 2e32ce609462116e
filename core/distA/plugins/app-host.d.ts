import type { AppDefinition, Logger } from '@agent/sdk';
export interface AppState {
    name: string;
    status: 'starting' | 'running' | 'crashed' | 'stopped';
    pid: number | null;
    port: number | null;
    restarts: number;
    last_exit: {
        code: number | null;
        signal: string | null;
        at: string;
    } | null;
    secret: string;
}
export declare class AppHost {
    private readonly log;
    private readonly dataDir;
    private readonly agentUrl;
    private readonly issueToken;
    private readonly apps;
    private stopping;
    constructor(log: Logger, dataDir: string, agentUrl: () => string, issueToken: (name: string) => Promise<string>);
    state(name: string): AppState | undefined;
    start(name: string, packageDir: string, app: AppDefinition, config: Record<string, unknown>): Promise<void>;
    /** Stops every app: SIGTERM, then SIGKILL after 5 s. */
    stopAll(): Promise<void>;
}
//# sourceMappingURL=app-host.d.ts.map
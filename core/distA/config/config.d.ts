export declare class ConfigError extends Error {
    constructor(message: string);
}
export interface CoreConfig {
    listen: {
        host: string;
        port: number;
        text: string;
    };
    data_dir: string;
    admin_password: string | null;
    log: {
        level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';
    };
    api: {
        enable_cors: boolean;
        allowed_origins: string[];
        body_limit: number;
        trust_proxy: boolean;
    };
    auth: {
        token_ttl: number;
        login_max_failures: number;
        login_max_failures_per_ip: number;
        lockout: number;
    };
    plans: {
        ttl: number;
    };
    plugins: {
        enabled: string[];
        builtin_dir: string;
    };
}
export interface LoadedConfig {
    core: CoreConfig;
    /** Sections not owned by the core, keyed by top-level name: validated by the plugins that claim them. */
    sections: Record<string, unknown>;
    /** The file read, if any. */
    file: string | null;
    /** Folder relative paths in the file are resolved against. */
    baseDir: string;
}
/**
 * The repository root, where built-in plugins live: the nearest folder above this module whose package.json
 * declares the workspaces (the module runs from core/dist/config, or bundled from core/dist).
 */
export declare const REPO_ROOT: string;
export declare function findConfigFile(argv: string[], env: NodeJS.ProcessEnv): {
    path: string;
    explicit: boolean;
};
export declare function loadConfig(argv?: string[], env?: NodeJS.ProcessEnv): LoadedConfig;
//# sourceMappingURL=config.d.ts.map
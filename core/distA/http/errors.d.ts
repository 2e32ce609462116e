export interface ErrorAnswer {
    status: number;
    body: {
        error: string;
        code: string;
    } & Record<string, unknown>;
    headers?: Record<string, string>;
    /** True for failures that are the agent's fault (logged with details). */
    internal: boolean;
}
export declare function toErrorAnswer(err: unknown): ErrorAnswer;
//# sourceMappingURL=errors.d.ts.map
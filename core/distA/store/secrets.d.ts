export interface AgentSecrets {
    jwtKey: Uint8Array;
    dataKey: Buffer;
}
export declare function loadSecrets(dataDir: string): AgentSecrets;
//# sourceMappingURL=secrets.d.ts.map
// Types of what TypeScript code (the test helper) takes from scripts/lib.mjs: how `npm start` runs the agent.
export const ROOT: string;
export const AGENT_ENTRY: string;
export const NODE_FLAGS: string[];
export const AGENT_ENV: Record<string, string>;

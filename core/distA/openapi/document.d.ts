import type { RouteRegistry } from './registry.js';
import type { ResourcePolicy } from '@agent/sdk';
type Json = Record<string, unknown>;
export interface DocumentInput {
    version: string;
    registry: RouteRegistry;
    resources: ResourcePolicy[];
    plugins: {
        name: string;
        description?: string;
    }[];
}
export declare function buildOpenApi({ version, registry, resources, plugins }: DocumentInput): Json;
export {};
//# sourceMappingURL=document.d.ts.map
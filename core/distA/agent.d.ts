/**
 * The composition root: builds the core services (registered in a tsyringe container, which also carries the
 * services plugins provide), loads the plugins, serves HTTP and websockets, and stops everything in order.
 */
import 'reflect-metadata';
import { type LoadedConfig } from './config/config.js';
export interface RunningAgent {
    url: string;
    stop(): Promise<void>;
}
export declare const VERSION: string;
export declare function startAgent(loaded: LoadedConfig, print?: (line: string) => void): Promise<RunningAgent>;
//# sourceMappingURL=agent.d.ts.map
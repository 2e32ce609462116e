/**
 * Heavy dependencies loaded on first use: a command-line call that never follows a stream or writes YAML should
 * not pay for loading ws or yaml (start-up time is most of a short CLI call).
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const lazy = <T>(id: string): (() => T) => {
  let loaded: T | undefined;
  return () => (loaded ??= require(id) as T);
};

export const loadYaml = lazy<typeof import('yaml')>('yaml');
export const loadWs = lazy<typeof import('ws')>('ws');
export const loadAjv = lazy<typeof import('ajv/dist/2020.js')>('ajv/dist/2020.js');
export const loadAjvFormats = lazy<{ default: (ajv: unknown) => unknown }>('ajv-formats');

export const APP: string;
export function nodeWebBase(): Promise<string>;
export function nodeWebImage(tag: string, version: string, options?: { unhealthy?: boolean }): Promise<string>;
export function nodeWebCompose(image: string, options?: { healthcheck?: boolean; extra?: string }): string;

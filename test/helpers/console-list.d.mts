import type { Page } from 'playwright-core';

export function serveManyDeployments(page: Page, real: unknown, count?: number): Promise<void>;
export function timeListPaint(page: Page, baseUrl: string, count?: number): Promise<{ total: number; render: number }>;

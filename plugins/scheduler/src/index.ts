import { definePlugin } from '@agent/sdk';
export default definePlugin({ name: 'scheduler', version: '0.1.0', setup() {} });

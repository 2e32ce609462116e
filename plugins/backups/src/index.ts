import { definePlugin } from '@agent/sdk';
export default definePlugin({ name: 'backups', version: '0.1.0', setup() {} });

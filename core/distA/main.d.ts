#!/usr/bin/env node
export {};
//# sourceMappingURL=main.d.ts.map
import { build, ensureDeps } from './lib.mjs';

ensureDeps();
build();

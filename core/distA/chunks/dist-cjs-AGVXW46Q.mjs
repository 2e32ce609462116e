import { createRequire as __agentRequire } from 'node:module'; const require = __agentRequire(import.meta.url);
import{require_dist_cjs}from"./chunk-T2ZIRJ6F.mjs";import"./chunk-GXHLEA2W.mjs";import"./chunk-7A5BPEAF.mjs";export default require_dist_cjs();

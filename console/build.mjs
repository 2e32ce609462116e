// Builds the web console into console/dist with esbuild (already the agent's bundler: no second toolchain, and it
// runs on every Node.js the agent supports): hashed file names under assets/ (served as immutable), the editor in
// a chunk of its own (code-split by the dynamic import), index.html naming the entry's files, and .br/.gz copies
// of the text files so the agent sends them compressed without compressing at each request.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync, readdirSync, copyFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'dist');
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const result = await build({
  absWorkingDir: here,
  entryPoints: { main: 'src/main.tsx' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome110', 'firefox115', 'safari16'],
  minify: true,
  sourcemap: false,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  chunkNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

const outputs = Object.entries(result.metafile.outputs);
const [entryFile, entry] = outputs.find(([, o]) => o.entryPoint === 'src/main.tsx');
const url = (file) => '/' + relative(out, join(here, file)).split('\\').join('/');
const html = readFileSync(join(here, 'index.html'), 'utf8')
  .replace('<!-- styles -->', entry.cssBundle ? `<link rel="stylesheet" href="${url(entry.cssBundle)}" />` : '')
  .replace('<!-- scripts -->', `<script type="module" src="${url(entryFile)}"></script>`);
writeFileSync(join(out, 'index.html'), html);
copyFileSync(join(here, 'favicon.svg'), join(out, 'favicon.svg'));

const sizes = {};
for (const name of readdirSync(join(out, 'assets'))) {
  if (!/\.(js|css)$/.test(name)) continue;
  const path = join(out, 'assets', name);
  const data = readFileSync(path);
  const gz = gzipSync(data, { level: 9 });
  writeFileSync(path + '.gz', gz);
  writeFileSync(path + '.br', brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
  sizes[name] = { bytes: data.length, gzip: gz.length };
}
// What the first screen loads: the entry and the chunks it imports statically (not the dynamic ones).
const initial = new Set([entryFile]);
for (const file of initial) for (const imp of result.metafile.outputs[file].imports) if (imp.kind === 'import-statement') initial.add(imp.path);
if (entry.cssBundle) initial.add(entry.cssBundle);
const gzipOf = (file) => sizes[file.split('/').pop()]?.gzip ?? 0;
const report = {
  initial_gzip_bytes: [...initial].reduce((n, f) => n + gzipOf(f), 0),
  initial: [...initial].map((f) => f.split('/').pop()),
  files: sizes,
};
writeFileSync(join(out, 'build.json'), JSON.stringify(report, null, 2) + '\n');
console.log(
  `> console: ${(report.initial_gzip_bytes / 1024).toFixed(1)} KB gzipped on the first screen (${Object.keys(sizes).length} files in console/dist/assets)`,
);

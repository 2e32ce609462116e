// A deployment's `.env` is read as compose reads it: the cases below are checked against the compose installed
// here (`docker-compose config` with them as an env_file), then against parseEnv; serializeEnv's output must read
// back the same in both. The `dotenv` package is compared too: it reads several of them differently, which is why
// the agent keeps its own reader.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import dotenv from 'dotenv';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseEnv, serializeEnv } from '../src/env-file.js';

const dir = mkdtempSync(join(tmpdir(), 'agent-env-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Where compose v1 (python-dotenv) and v2 (compose-go) agree. No `$`: compose expands `${VAR}` itself. */
const CASES = [
  'PLAIN=hello',
  'SPACED = spaced value  ',
  'export EXPORTED=yes',
  'EMPTY=',
  'EMPTY_DQ=""',
  "EMPTY_SQ=''",
  'EQ_IN=a=b=c',
  'HASH_UNQ=value # a comment',
  'HASH_NOSPACE=value#not-a-comment',
  'HASH_DQ="value # kept"',
  "HASH_SQ='value # kept'",
  String.raw`DQ_ESC="a\"b\\c\nd"`,
  String.raw`DQ_BACKSLASH_N="a\\nb"`,
  String.raw`DQ_TAB="a\tb"`,
  String.raw`DQ_APOSTROPHE="it\'s"`,
  String.raw`SQ_LITERAL='a\nb\"c'`,
  'MULTI_DQ="line1',
  'line2 # still the value',
  'line3"',
  "MULTI_SQ='l1",
  "l2'",
  '# a comment line',
  '   # an indented comment',
  'INDENTED=  x  ',
  'URL=postgres://u:p@h:5432/db?sslmode=disable&x=1',
  'QUOTE_MID=a"b"c',
  "SQ_TRAIL='abc' # comment",
  'DQ_TRAIL="abc"   # comment',
  'DQ_HASH_TIGHT="abc"#comment',
  'BACKTICK=`tick`',
  'DOT.KEY=dot',
  'NOVALUE',
  'DUP=first',
  'DUP=second',
  'CRLF=crlf\r',
  'UNICODE=héllo wörld',
  'LAST=end',
].join('\n');

const COMPOSE_READS: Record<string, string> = {
  PLAIN: 'hello',
  SPACED: 'spaced value',
  EXPORTED: 'yes',
  EMPTY: '',
  EMPTY_DQ: '',
  EMPTY_SQ: '',
  EQ_IN: 'a=b=c',
  HASH_UNQ: 'value',
  HASH_NOSPACE: 'value#not-a-comment',
  HASH_DQ: 'value # kept',
  HASH_SQ: 'value # kept',
  DQ_ESC: 'a"b\\c\nd',
  DQ_BACKSLASH_N: 'a\\nb',
  DQ_TAB: 'a\tb',
  DQ_APOSTROPHE: "it's",
  SQ_LITERAL: 'a\\nb\\"c',
  MULTI_DQ: 'line1\nline2 # still the value\nline3',
  MULTI_SQ: 'l1\nl2',
  INDENTED: 'x',
  URL: 'postgres://u:p@h:5432/db?sslmode=disable&x=1',
  QUOTE_MID: 'a"b"c',
  SQ_TRAIL: 'abc',
  DQ_TRAIL: 'abc',
  DQ_HASH_TIGHT: 'abc',
  BACKTICK: '`tick`',
  'DOT.KEY': 'dot',
  DUP: 'second',
  CRLF: 'crlf',
  UNICODE: 'héllo wörld',
  LAST: 'end',
};

/** What the installed compose reads from an env_file (`$$` in its output is one `$`; a name without value: left out). */
async function composeReads(envText: string): Promise<Record<string, string>> {
  const project = mkdtempSync(join(dir, 'p-'));
  writeFileSync(join(project, 'vars.env'), envText);
  writeFileSync(join(project, 'docker-compose.yml'), 'version: "3"\nservices:\n  a:\n    image: busybox\n    env_file: vars.env\n');
  const v1 = await execa('docker-compose', ['version'], { reject: false });
  const [command, args] = v1.exitCode === 0 ? ['docker-compose', ['config']] : ['docker', ['compose', 'config']];
  const { stdout } = await execa(command, args, { cwd: project, env: { PATH: process.env.PATH ?? '' }, extendEnv: false });
  const environment = (parseYaml(stdout) as { services: { a: { environment: Record<string, string | null> } } }).services.a.environment;
  return Object.fromEntries(
    Object.entries(environment)
      .filter((entry): entry is [string, string] => entry[1] !== null)
      .map(([k, v]) => [k, String(v).replace(/\$\$/g, '$')]),
  );
}

describe('.env files', () => {
  it('compose reads the cases as the table says', async () => {
    expect(await composeReads(CASES)).toEqual(COMPOSE_READS);
  });

  it('parseEnv reads them the same', () => {
    expect(parseEnv(CASES)).toEqual(COMPOSE_READS);
    expect(parseEnv(`\uFEFFFIRST=1\r\nSECOND="two"\r\n`)).toEqual({ FIRST: '1', SECOND: 'two' });
  });

  it('leaves out what compose v1 cannot read, and reads on at the next line', async () => {
    // Text after a closing quote, YAML's `KEY: value`, a quote never closed (compose v2 refuses the first and the
    // last, and takes the second: no file the agent writes has them). A quote is closed by the next one, lines
    // later if need be, as compose v1 closes it.
    const text = ['A=1', 'JUNK="x" y', 'B=2', 'COLON: colon', 'C=3', 'OPEN="never closed', 'D=4'].join('\n');
    expect(parseEnv(text)).toEqual({ A: '1', B: '2', C: '3', D: '4' });
    const flavour = await execa('docker-compose', ['version', '--short'], { reject: false });
    if (flavour.exitCode === 0 && flavour.stdout.startsWith('1.')) expect(await composeReads(text)).toEqual({ A: '1', B: '2', C: '3', D: '4' });
  });

  it('writes values that compose and parseEnv read back unchanged', async () => {
    const values: Record<string, string> = {
      PLAIN: 'plain',
      SPACES: ' leading and trailing ',
      QUOTES: `it's "quoted"`,
      // Not a backslash right before the closing quote: compose v1 takes `\\"` there for an escaped quote and
      // reads on to the next `"` of the file (serializeEnv and the docker guard's copy write such values so).
      BACKSLASHES: 'C:\\dir\\new\\table \\"x\\" \\\\ end',
      LINES: 'first\nsecond\n',
      TAB: 'a\tb',
      HASH: 'value # not a comment',
      EQUALS: '=a=b=',
      EMPTY: '',
      TICKS: '`cmd`',
      UNICODE: 'ünï €',
    };
    const text = serializeEnv(values);
    expect(parseEnv(text)).toEqual(values);
    expect(await composeReads(text)).toEqual(values);
  });

  it('is not read by the dotenv package the way compose reads it (why the agent keeps its reader)', () => {
    const read = dotenv.parse(CASES);
    // Backslash escapes kept as written: `serializeEnv` output would not read back.
    expect(read.DQ_ESC).toBe('a\\"b\\\\c\nd');
    expect(read.DQ_BACKSLASH_N).toBe('a\\\nb');
    expect(read.DQ_TAB).toBe('a\\tb');
    // A `#` right after the value starts a comment; backticks are quotes.
    expect(read.HASH_NOSPACE).toBe('value');
    expect(read.BACKTICK).toBe('tick');
    // YAML's `KEY: value` is a binding.
    expect(dotenv.parse('COLON: colon').COLON).toBe('colon');
    for (const key of ['DQ_ESC', 'DQ_BACKSLASH_N', 'DQ_TAB', 'HASH_NOSPACE', 'BACKTICK']) expect(read[key], key).not.toBe(COMPOSE_READS[key]);
  });
});

/**
 * The description is true to the wire: every answer a test receives from the agent is checked against the agent's own
 * `/api/openapi.json` — the status must be documented for that operation, and the body must match the schema
 * documented for that status (error codes included where they are an enum). `AGENT_TEST_DESCRIPTION` says what a
 * mismatch does: `strict` (the default: every plugin declares its answers) fails the call that received it, `report`
 * appends it to `.test-env/description-violations.jsonl`, `off` skips the check; an agent may set its own
 * (`startAgent({ description: 'report' })`). The variable is read once, when this module is imported.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'vitest';

type Json = Record<string, any>;

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
export type DescriptionMode = 'strict' | 'report' | 'off';
export const MODE = (process.env.AGENT_TEST_DESCRIPTION ?? 'strict') as DescriptionMode;
const REPORT = resolve(import.meta.dirname, '../../.test-env/description-violations.jsonl');

interface Operation {
  method: string;
  template: string;
  regexp: RegExp;
  responses: Json;
  pointer: string;
  operationId: string;
  plugin: string;
}

/**
 * Plugins whose answers their engineers are still declaring: a mismatch of theirs is reported, also in strict mode,
 * so that a finished plugin's suite does not fail on the answer of a route of another plugin it calls (creating a
 * deployment, say). Empty: every plugin declares its answers, and `strict` covers every answer. A new plugin may be
 * listed here while its routes are being declared, never for long.
 */
export const PENDING_PLUGINS: ReadonlySet<string> = new Set<string>();
export const isPending = (op: { plugin: string; operationId: string } | null): boolean => !op || PENDING_PLUGINS.has(op.plugin);

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class DescriptionCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
  private readonly operations: Operation[] = [];
  private readonly compiled = new Map<string, ValidateFunction | null>();

  constructor(doc: Json) {
    addFormats(this.ajv);
    this.ajv.addSchema(doc, 'doc');
    for (const [template, item] of Object.entries(doc.paths as Json)) {
      const source = template
        .split('/')
        .map((part) => (/^\{.+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      for (const [method, op] of Object.entries(item as Json)) {
        if (!op || typeof op !== 'object' || !('responses' in op)) continue;
        this.operations.push({
          method: method.toUpperCase(),
          template,
          // Paths are matched case-insensitively, with an optional trailing slash, as the agent routes them.
          regexp: new RegExp(`^${source}/?$`, 'i'),
          responses: (op as Json).responses,
          operationId: String((op as Json).operationId),
          plugin: String((op as Json)['x-plugin']),
          pointer: `doc#/paths/${escapePointer(template)}/${method}/responses`,
        });
      }
    }
  }

  /** The operation a request is answered by (a literal path before one with params), or null. */
  operation(method: string, path: string): Operation | null {
    const m = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
    return (
      this.operations.find((o) => o.method === m && o.regexp.test(path) && !o.template.includes('{')) ??
      this.operations.find((o) => o.method === m && o.regexp.test(path)) ??
      null
    );
  }

  /** The mismatch of one answer, or null. Paths no operation has (404s of unknown routes) are not checked. */
  check(method: string, path: string, status: number, contentType: string | null, text: string): string | null {
    const m = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
    const op = this.operation(method, path);
    if (!op) return null;
    const documented = op.responses[String(status)];
    if (!documented)
      return `${m} ${op.template}: status ${status} is not documented (documented: ${Object.keys(op.responses).join(', ')}): ${text.slice(0, 200)}`;
    if (!contentType?.includes('application/json') || method.toUpperCase() === 'HEAD' || status === 204) return null;
    const key = `${op.pointer}/${status}`;
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      validate = documented.content?.['application/json']?.schema ? this.ajv.compile({ $ref: `${key}/content/application~1json/schema` }) : null;
      this.compiled.set(key, validate);
    }
    if (!validate) return `${m} ${op.template}: status ${status} answered JSON, documented without a JSON body: ${text.slice(0, 200)}`;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return `${m} ${op.template}: status ${status} answered a body that is not JSON`;
    }
    if (validate(body)) return null;
    const e = validate.errors![0]!;
    return `${m} ${op.template} ${status}: ${e.instancePath || '(body)'} ${e.message} ${JSON.stringify(e.params)}: ${text.slice(0, 300)}`;
  }
}

/**
 * What a mismatch does (see the top); `mode`: the agent's own, else the variable's. `pending`: the answer of a route
 * of a plugin still declaring its answers (PENDING_PLUGINS), reported whatever the mode.
 */
export function reportViolation(violation: string, mode: DescriptionMode = MODE, pending = false): void {
  if (mode === 'strict' && !pending) throw new Error(`answer outside the live description: ${violation}`);
  if (mode === 'off') return;
  mkdirSync(join(REPORT, '..'), { recursive: true });
  // Several suites (and engineers) append to one report: the file and the test say whose answer it was.
  const { testPath, currentTestName } = expect.getState();
  const file = testPath ? relative(resolve(import.meta.dirname, '../..'), testPath) : null;
  appendFileSync(REPORT, JSON.stringify({ file, test: currentTestName ?? null, violation }) + '\n');
}

/**
 * Fillable request bodies: every field of the schema, defaults filled in, everything else a placeholder that
 * says whether it is required, its type and choices (`"<required: string — deployment name>"`). A placeholder
 * left in a body is refused before sending. The YAML form also carries a comment per field.
 */
import type { Node, Pair } from 'yaml';
import { loadYaml } from './lazy.js';
import { constraints, enumValues, isObjectSchema, nonNull, typeLabel, type JsonSchema } from './json-schema.js';

const MAX_DEPTH = 8;

/** `<required: string (1-200 chars) — who to greet>`; `brief` leaves the details to a comment (YAML). */
function placeholder(schema: JsonSchema, required: boolean, brief: boolean): string {
  const choices = enumValues(nonNull(schema));
  const what = choices ? `one of ${choices.map((c) => (typeof c === 'string' ? c : JSON.stringify(c))).join(' | ')}` : typeLabel(schema);
  if (brief) return `<${required ? 'required' : 'optional'}: ${what}>`;
  const hints = constraints(schema).filter((c) => !c.startsWith('pattern'));
  const description = typeof schema.description === 'string' ? ` — ${schema.description}` : '';
  return `<${required ? 'required' : 'optional'}: ${what}${hints.length ? ` (${hints.join(', ')})` : ''}${description}>`;
}

/** The skeleton value of one schema. */
export function skeletonValue(schema: JsonSchema, required = true, depth = 0, brief = false): unknown {
  if ('default' in schema) return structuredClone(schema.default);
  if ('const' in schema) return schema.const;
  const s = nonNull(schema);
  if ('default' in s) return structuredClone(s.default);
  if (depth > MAX_DEPTH) return required ? placeholder(schema, true, brief) : undefined;
  if (isObjectSchema(s)) {
    const req = new Set(s.required ?? []);
    const out: Record<string, unknown> = {};
    for (const [name, field] of Object.entries(s.properties ?? {})) out[name] = skeletonValue(field, req.has(name), depth + 1, brief);
    return out;
  }
  if (s.type === 'object') return {};
  if (s.type === 'array' && s.items) {
    const item = nonNull(s.items);
    return [skeletonValue(item, true, depth + 1, brief)];
  }
  return placeholder(schema, required, brief);
}

/** The skeleton as pretty JSON. */
export function skeletonJson(schema: JsonSchema): string {
  return JSON.stringify(skeletonValue(schema), null, 2);
}

function comment(schema: JsonSchema, required: boolean): string {
  const s = nonNull(schema);
  const parts = [required ? 'required' : 'optional', typeLabel(schema)];
  const choices = enumValues(s);
  if (choices) parts.push(`one of: ${choices.map((c) => JSON.stringify(c)).join(', ')}`);
  if ('default' in schema || 'default' in s) parts.push(`default ${JSON.stringify('default' in schema ? schema.default : s.default)}`);
  parts.push(...constraints(schema));
  if (typeof schema.description === 'string') parts.push(schema.description.replace(/\s+/g, ' '));
  return ` ${parts.join(' · ')}`;
}

/** Attaches a comment per field to the YAML nodes, walking the schema alongside. */
function annotate(node: Node | null | undefined, schema: JsonSchema, depth: number): void {
  if (!node || depth > MAX_DEPTH) return;
  const { isMap, isPair, isScalar, isSeq } = loadYaml();
  const s = nonNull(schema);
  if (isMap(node) && isObjectSchema(s)) {
    const req = new Set(s.required ?? []);
    for (const pair of node.items as Pair<Node, Node>[]) {
      if (!isPair(pair) || !isScalar(pair.key)) continue;
      const name = String(pair.key.value);
      const field = s.properties?.[name];
      if (!field) continue;
      const text = comment(field, req.has(name));
      const value = pair.value;
      if (isScalar(value)) value.comment = text;
      else if (value) {
        // Nested blocks: the comment goes above the key.
        pair.key.commentBefore = text;
        annotate(value, field, depth + 1);
      }
    }
  } else if (isSeq(node) && s.type === 'array' && s.items) {
    for (const item of node.items as Node[]) annotate(item, s.items, depth + 1);
  }
}

/** The skeleton as YAML with one comment per field (`# required · string · …`). */
export function skeletonYaml(schema: JsonSchema, title?: string): string {
  const doc = new (loadYaml().Document)(skeletonValue(schema, true, 0, true));
  annotate(doc.contents as Node, schema, 0);
  if (title) doc.commentBefore = ` ${title}\n Fill in the values; remove optional fields you do not need.`;
  return doc.toString({ lineWidth: 0 });
}

/**
 * A plain read of a compose file's structure: its services (for state and listing, and the template catalogue).
 * Checking a file before it runs is the compose guard's job (`docker.compose.check`).
 */
import { parseDocument } from 'yaml';

/** The parsed file and its service names; throws with a message when the YAML or the `services` mapping is broken. */
export function readCompose(text: string): { parsed: Record<string, any>; services: string[] } {
  const doc = parseDocument(text, { merge: true, uniqueKeys: true });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw new Error(`invalid YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${e.message.split('\n')[0]}`);
  }
  const parsed = doc.toJS({ maxAliasCount: 100 }) as Record<string, any> | null;
  const services = parsed?.services;
  if (!services || typeof services !== 'object' || Array.isArray(services) || !Object.keys(services).length) {
    throw new Error("'services' must be a mapping with at least one service");
  }
  return { parsed: parsed!, services: Object.keys(services) };
}

/** The service names of a compose file, or none when it does not parse. */
export function serviceNames(text: string): string[] {
  try {
    return readCompose(text).services;
  } catch {
    return [];
  }
}

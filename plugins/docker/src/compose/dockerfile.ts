/**
 * What a Dockerfile makes the engine do outside the build container: `ADD <url>` (and `ADD <git repo>`) is fetched
 * by the engine itself, from the host's network, where loopback and private addresses are the agent's and the
 * host's own services; an `ONBUILD` trigger does the same later, in someone else's build; `FROM` and `COPY --from`
 * read other images. The file is read with a maintained parser (dockerfile-ast: line continuations, the escape
 * directive, JSON and shell forms), never with ad hoc regular expressions.
 */
import { DockerfileParser, type Instruction } from 'dockerfile-ast';
import type { Violation } from './policy.js';

/** A source `ADD` fetches over the network rather than from the build context. */
const REMOTE_SOURCE = /^[a-z][a-z0-9+.-]*:\/\/|^git@|^[a-z0-9.-]+\.git(#|$)/i;

export interface DockerfileFacts {
  /** Images the build reads (`FROM`, `COPY --from`, `RUN --mount=from=`), stage names excluded. */
  images: string[];
  violations: Violation[];
}

/** The arguments of an instruction: the JSON form as JSON, else the parser's words (flags excluded). */
function argumentsOf(instruction: Instruction): string[] {
  const content = instruction.getArgumentsContent()?.trim() ?? '';
  if (content.startsWith('[')) {
    try {
      const list = JSON.parse(content) as unknown;
      if (Array.isArray(list) && list.every((v) => typeof v === 'string')) return list;
    } catch {
      /* not JSON: the shell form */
    }
  }
  return instruction.getArguments().map((a) => a.getValue());
}

/**
 * Substitutes `$NAME`, `${NAME}` and `${NAME:-default}`/`${NAME:+alt}` from the build args and the file's own
 * `ARG`/`ENV` values. Returns null when a variable stays unknown: the agent cannot tell what the engine will see.
 */
function substitute(text: string, lookup: (name: string) => string | undefined): string | null {
  let unknown = false;
  const out = text.replace(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_m, braced, op, word, bare) => {
    const name = (braced ?? bare) as string;
    const value = lookup(name);
    if (op === '-') return value === undefined || value === '' ? (word as string) : value;
    if (op === '+') return value === undefined || value === '' ? '' : (word as string);
    if (value === undefined) {
      unknown = true;
      return '';
    }
    return value;
  });
  return unknown ? null : out;
}

/**
 * Checks a Dockerfile's text. `service` and `key` name the place in the compose file; `args` are the build args of
 * the model (they override the file's `ARG` defaults, as the engine does).
 */
export function checkDockerfile(text: string, service: string, key: string, args: Record<string, string>): DockerfileFacts {
  const file = DockerfileParser.parse(text);
  const violations: Violation[] = [];
  const images: string[] = [];
  const stages = new Set<string>();
  const lookup = (line: number) => (name: string) => args[name] ?? file.resolveVariable(name, line) ?? undefined;

  for (const from of file.getFROMs()) {
    const line = from.getRange().start.line;
    const image = from.getImage();
    if (image) {
      const resolved = substitute(image, lookup(line));
      if (resolved === null)
        violations.push({
          service,
          key: `${key}.dockerfile`,
          value: image,
          exception: 'build.dockerfile-variables',
          why: `FROM '${image}' (line ${line + 1}) depends on a variable the agent cannot resolve`,
        });
      else if (resolved.toLowerCase() !== 'scratch' && !stages.has(resolved.toLowerCase())) images.push(resolved);
    }
    const stage = from.getBuildStage();
    if (stage) stages.add(stage.toLowerCase());
  }

  for (const instruction of file.getInstructions()) {
    const keyword = instruction.getKeyword();
    const line = instruction.getRange().start.line;
    if (keyword === 'ONBUILD') {
      violations.push({
        service,
        key: `${key}.dockerfile`,
        value: instruction.getArgumentsContent() ?? '',
        exception: 'build.onbuild',
        why: `ONBUILD (line ${line + 1}) runs instructions in later builds the agent does not see`,
      });
      continue;
    }
    const flags = 'getFlags' in instruction ? (instruction as unknown as { getFlags(): { getName(): string; getValue(): string | null }[] }).getFlags() : [];
    for (const flag of flags) {
      const from = flag.getName().toLowerCase() === 'from' ? flag.getValue() : null;
      if (from && !stages.has(from.toLowerCase()) && !/^\d+$/.test(from)) images.push(from);
    }
    if (keyword !== 'ADD') continue;
    const words = argumentsOf(instruction);
    // The last word is the destination; heredoc bodies (`<<EOF`) are inline content.
    for (const source of words.slice(0, -1)) {
      if (source.startsWith('<<')) continue;
      const resolved = substitute(source, lookup(line));
      if (resolved === null) {
        violations.push({
          service,
          key: `${key}.dockerfile`,
          value: source,
          exception: 'build.dockerfile-variables',
          why: `ADD '${source}' (line ${line + 1}) depends on a variable the agent cannot resolve (use COPY for files of the context)`,
        });
      } else if (REMOTE_SOURCE.test(resolved)) {
        violations.push({
          service,
          key: `${key}.dockerfile`,
          value: resolved,
          exception: 'build.add-url',
          why: `ADD '${resolved}' (line ${line + 1}) makes the engine fetch it from the host's network, where the agent's and the host's own services answer`,
        });
      }
    }
  }
  return { images, violations };
}

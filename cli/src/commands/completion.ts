/**
 * Shell completion. `agentctl completion bash|zsh|fish` prints a script; the script calls the hidden
 * `agentctl __complete <shell> <words…> <current>` which answers from the cached description only (no network),
 * so completing is instant and works offline.
 */
import {
  ApiDescription,
  DescriptionCache,
  ProfileStore,
  enumValues,
  isJobReader,
  kebab,
  listFields,
  nonNull,
  resolveConnection,
  startsJob,
  type Operation,
} from '@agent/client';
import type { CliIO } from '../io.js';
import { RESERVED, isBooleanParam } from '../operation-options.js';

export const STATIC_COMMANDS: [string, string][] = [
  ['login', 'log in and save a profile'],
  ['logout', 'forget a saved login'],
  ['profiles', 'list, switch and remove profiles'],
  ['doctor', 'check the parts the agent uses'],
  ['completion', 'print a shell completion script'],
  ['help', 'show help'],
];

const GLOBAL_VALUE_OPTIONS = new Set(['--profile', '--url', '--token', '-o', '--output']);
const GLOBAL_FLAGS = ['--json', '--refresh', '--no-color', '--help'];
const FORMATS: [string, string][] = [
  ['table', 'for people (default)'],
  ['json', 'the answer as JSON'],
  ['yaml', 'the answer as YAML'],
  ['jsonpath=', 'values picked by a JSONPath'],
];

export const SHELLS = ['bash', 'zsh', 'fish'] as const;

export function completionScript(shell: string): string | undefined {
  if (shell === 'bash') return bashScript();
  if (shell === 'zsh') return zshScript();
  if (shell === 'fish') return fishScript();
  return undefined;
}

export function bashScript(): string {
  return `# agentctl completion for bash. Load it with:  source <(agentctl completion bash)
# or save it:  agentctl completion bash > ~/.local/share/bash-completion/completions/agentctl
_agentctl_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\\n'
  COMPREPLY=($(agentctl __complete bash "\${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null))
}
complete -o default -F _agentctl_complete agentctl
`;
}

export function zshScript(): string {
  return `#compdef agentctl
# agentctl completion for zsh. Load it with:  source <(agentctl completion zsh)   (after compinit)
# or save it as _agentctl in a folder of your $fpath.
_agentctl() {
  local -a candidates
  candidates=("\${(@f)$(agentctl __complete zsh "\${(@)words[2,CURRENT-1]}" "\${words[CURRENT]}" 2>/dev/null)}")
  candidates=(\${candidates:#})
  if (( \${#candidates} )); then
    _describe -t commands 'agentctl' candidates
  else
    _files
  fi
}
compdef _agentctl agentctl
`;
}

export function fishScript(): string {
  return `# agentctl completion for fish. Load it with:  agentctl completion fish | source
# or save it:  agentctl completion fish > ~/.config/fish/completions/agentctl.fish
function __agentctl_complete
    set -l words (commandline -opc)
    set -l current (commandline -ct)
    set -l candidates (agentctl __complete fish $words[2..-1] "$current" 2>/dev/null)
    if test (count $candidates) -gt 0
        printf '%s\\n' $candidates
    else if string match -q -- '@*' "$current"
        # --data @file: the path after the @.
        __fish_complete_path (string sub -s 2 -- "$current") | string replace -r '^' '@'
    else
        # Nothing from the agent's description (a value, a file for --output-file): paths, as fish offers them.
        __fish_complete_path "$current"
    end
end
complete -c agentctl -f -a '(__agentctl_complete)'
`;
}

function operationFlags(op: Operation, description: ApiDescription): [string, string][] {
  const out: [string, string][] = [];
  for (const p of op.queryParams) {
    const name = kebab(p.name);
    if (!RESERVED.has(name) && /^[a-z][a-z0-9-]*$/.test(name))
      out.push([`--${name}`, p.description ?? `query parameter${isBooleanParam(p) ? ' (boolean)' : ''}`]);
  }
  if (op.body)
    out.push(
      ['--data', 'body from @file, - or JSON'],
      ['--field', 'set a body field key=value'],
      ['--skeleton', 'print a fillable body'],
      ['--yaml', 'skeleton as YAML'],
    );
  if (op.plan) out.push(['--plan', 'preview as a plan']);
  if (description.followStreamOf(op)) out.push(['--follow', 'follow new entries']);
  if (op.produces) out.push(['--output-file', 'write the answer to a file']);
  if (startsJob(op)) out.push(['--detach', 'do not follow the job it starts']);
  if (isJobReader(op)) out.push(['--follow', 'follow the job until it ends']);
  out.push(['--query', 'query parameter key=value'], ['--dry-run', 'check without sending'], ['--help', 'help of this operation']);
  return out;
}

/** Candidates for the word being typed, given the words before it. */
export function completionCandidates(io: CliIO, before: string[], current: string): [string, string][] {
  const words: string[] = [];
  let profile: string | undefined;
  let url: string | undefined;
  for (let i = 0; i < before.length; i++) {
    const w = before[i]!;
    const [flag, inline] = w.split(/=(.*)/s, 2) as [string, string | undefined];
    if (GLOBAL_VALUE_OPTIONS.has(flag)) {
      const value = inline ?? before[++i];
      if (flag === '--profile') profile = value;
      if (flag === '--url') url = value;
      continue;
    }
    if (!w.startsWith('-')) words.push(w);
  }
  const previous = before[before.length - 1];
  if (previous && GLOBAL_VALUE_OPTIONS.has(previous)) {
    if (previous === '--profile') return Object.keys(new ProfileStore(io.env).read().profiles).map((n) => [n, 'profile']);
    if (previous === '-o' || previous === '--output') return FORMATS.filter(([name]) => name.startsWith(current));
    return [];
  }

  let description: ApiDescription | undefined;
  try {
    const conn = resolveConnection({ profile, url, env: io.env });
    const cached = conn.url ? new DescriptionCache(io.env).latest(conn.url) : undefined;
    if (cached) description = new ApiDescription(cached.document);
  } catch {
    // no profile or no cache: static commands only
  }

  let candidates: [string, string][] = [];
  const [first, second] = words;
  const op = first && second && description ? description.find(first, second) : undefined;
  if (op && previous && (previous === '-f' || previous === '--field') && op.body) {
    // Body fields, for -f key=value (array items are set with an index, so they are left out).
    candidates = listFields(op.body)
      .filter((f) => !f.path.includes('[]'))
      .map((f) => [`${f.path}=`, `${f.type}${f.required ? ', required' : ''}`]);
    return candidates.filter(([name]) => name.startsWith(current));
  }
  const param = op && previous?.startsWith('--') ? op.queryParams.find((p) => `--${kebab(p.name)}` === previous) : undefined;
  if (param) {
    const choices = enumValues(nonNull(param.schema)) ?? (isBooleanParam(param) ? [true, false] : []);
    return choices.map((c): [string, string] => [String(c), param.name]).filter(([name]) => name.startsWith(current));
  }
  if (current.startsWith('-')) {
    candidates = op ? operationFlags(op, description!) : [];
    candidates.push(
      ...GLOBAL_FLAGS.map((f): [string, string] => [f, 'global option']),
      ['--output', 'output format: table, json, yaml, jsonpath=…'],
      ['--profile', 'use a saved profile'],
      ['--url', 'agent URL'],
      ['--token', 'token'],
    );
  } else if (!first) {
    candidates = [
      ...(description?.groups().map((g): [string, string] => [g.name, g.description ?? `${g.operations.length} operations`]) ?? []),
      ...STATIC_COMMANDS,
    ];
  } else if (first === 'completion' && words.length === 1) {
    candidates = SHELLS.map((s): [string, string] => [s, `${s} script`]);
  } else if (first === 'profiles') {
    if (words.length === 1)
      candidates = [
        ['list', 'list profiles'],
        ['use', 'switch profile'],
        ['remove', 'delete a profile'],
      ];
    else if (words.length === 2 && (second === 'use' || second === 'remove'))
      candidates = Object.keys(new ProfileStore(io.env).read().profiles).map((n) => [n, 'profile']);
  } else if (first === 'help' && description) {
    if (words.length === 1) candidates = description.groups().map((g) => [g.name, g.description ?? '']);
    else if (words.length === 2) candidates = description.group(second!)?.operations.map((o) => [o.name, o.summary]) ?? [];
  } else if (description && words.length === 1) {
    candidates = description.group(first)?.operations.map((o) => [o.name, o.summary]) ?? [];
  }
  return candidates.filter(([name]) => name.startsWith(current));
}

export function printCandidates(io: CliIO, shell: string, candidates: [string, string][]): void {
  const short = (desc: string) => desc.replace(/\s+/g, ' ').slice(0, 80);
  const lines =
    shell === 'zsh'
      ? candidates.map(([name, desc]) => `${name.replace(/:/g, '\\:')}:${short(desc)}`)
      : shell === 'fish'
        ? // fish shows what follows a tab as the candidate's description.
          candidates.map(([name, desc]) => (desc ? `${name}\t${short(desc)}` : name))
        : candidates.map(([name]) => name);
  if (lines.length) io.stdout.write(lines.join('\n') + '\n');
}

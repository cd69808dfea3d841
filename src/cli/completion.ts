// Shell completion for `capi-upgrades` and `kubectl capi-upgrades`.
// Both shells and kubectl ask the same question: `capi-upgrades __complete
// <words…> <partial>` prints one candidate per line and a last line
// `:<directive>` (Cobra's protocol, which kubectl uses for a plugin's
// `kubectl_complete-<plugin>` executable). Cluster and rollout names come from
// Temporal when it answers within a moment; otherwise only the fixed words.
import { UsageError } from './operations.ts';
import { ROLLOUT_COMMANDS } from './rollouts.ts';

/** Cobra's ShellCompDirectiveNoFileComp: never offer file names. */
const NO_FILE_COMPLETION = 4;

export const COMMANDS = [
  'list',
  'status',
  'abort',
  'resume',
  'retry',
  'history',
  'readiness',
  'rollout',
  'completion',
  'demo',
] as const;

const OPTIONS: Record<string, string[]> = {
  list: ['--phase', '--namespace', '--all', '-o'],
  status: ['--watch', '--interval', '--timeout', '-o'],
  abort: ['--reason'],
  history: ['-o'],
  readiness: ['--to', '--setting', '--all', '--namespace', '--max-concurrent', '-o'],
  'rollout start': [
    '--selector',
    '--version',
    '--waves',
    '--namespaces',
    '--cluster-class',
    '--soak',
    '--max-concurrent',
    '--failure-budget',
    '--cluster-deadline',
    '--approve-before',
    '--approve-after',
  ],
  'rollout status': ['--watch', '--interval', '--timeout', '-o'],
  'rollout approve': ['--wave', '--by'],
  'rollout abort': ['--reason', '--abort-in-flight'],
};

const VALUES: Record<string, string[]> = {
  '--phase': ['Pending', 'Upgrading', 'Upgraded', 'Failed', 'Aborted'],
  '-o': ['json'],
};

/** Names Temporal knows (running upgrades as `<ns>/<cluster>`, rollouts), or [] when it does not answer. */
export interface CompletionLookup {
  clusters(): Promise<string[]>;
  rollouts(): Promise<string[]>;
}

/** The candidates for the last word of `words` (the word being typed, possibly empty). */
export async function complete(words: readonly string[], lookup: CompletionLookup): Promise<string> {
  const partial = words.at(-1) ?? '';
  const before = words.slice(0, -1);
  const positionals = before.filter((w, i) => !w.startsWith('-') && !(before[i - 1] ?? '').startsWith('-'));
  const [command, sub] = positionals;
  const key = command === 'rollout' && sub ? `rollout ${sub}` : (command ?? '');
  const previous = before.at(-1) ?? '';
  let candidates: string[];
  if (VALUES[previous]) candidates = VALUES[previous];
  else if (partial.startsWith('-')) candidates = OPTIONS[key] ?? [];
  else if (!command) candidates = [...COMMANDS];
  else if (command === 'completion') candidates = positionals.length === 1 ? ['bash', 'zsh'] : [];
  else if (command === 'rollout' && !sub) candidates = [...ROLLOUT_COMMANDS];
  else if (command === 'rollout')
    candidates = sub !== 'list' && positionals.length === 2 ? await lookup.rollouts() : [];
  else if (command !== 'list' && positionals.length === 1) candidates = await lookup.clusters();
  else candidates = [];
  const shown = candidates.filter((c) => c.startsWith(partial));
  return `${[...shown, `:${NO_FILE_COMPLETION}`].join('\n')}\n`;
}

/** The script a shell sources: `source <(capi-upgrades completion bash)`. */
export function completionScript(shell: string, program: string): string {
  const fn = `_${program.replace(/[^A-Za-z0-9]/g, '_')}`;
  const bash = `# ${program} completion (bash): source <(${program} completion bash)
${fn}() {
  local out directive
  out=$("\${COMP_WORDS[0]}" __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
  directive=\${out##*:}
  out=\${out%:*}
  COMPREPLY=()
  local IFS=$'\\n'
  for c in $out; do [ -n "$c" ] && COMPREPLY+=("$c"); done
  [ $((directive & ${NO_FILE_COMPLETION})) -ne 0 ] && compopt +o default 2>/dev/null
  return 0
}
complete -o default -F ${fn} ${program}
`;
  if (shell === 'bash') return bash;
  if (shell === 'zsh') return `#compdef ${program}\nautoload -U +X bashcompinit && bashcompinit\n${bash}`;
  throw new UsageError(`completion ${shell}: expected bash or zsh`);
}

// Reads docker-compose.yml for the compose-topology test: the subset of YAML the
// file keeps to (nested block maps, flow lists of double-quoted strings, scalars,
// comments) and compose's ${VAR}, ${VAR:-default} and ${VAR:?error} substitution.
import { readFileSync } from 'node:fs';

export type YamlValue = string | string[] | { [k: string]: YamlValue };

export function parseComposeYaml(text: string): { [k: string]: YamlValue } {
  const root: { [k: string]: YamlValue } = {};
  const stack: { indent: number; map: { [k: string]: YamlValue } }[] = [{ indent: -1, map: root }];
  text.split('\n').forEach((raw, n) => {
    const line = raw.replace(/\s+#.*$/, '').replace(/^\s*#.*$/, '');
    if (line.trim() === '') return;
    const indent = line.length - line.trimStart().length;
    const m = /^([A-Za-z0-9_.-]+):(?:\s+(.*))?$/.exec(line.trim());
    if (m === null) throw new Error(`docker-compose.yml line ${n + 1}: outside the YAML subset the test reads: ${raw}`);
    while (stack.at(-1)!.indent >= indent) stack.pop();
    const parent = stack.at(-1)!.map;
    const value = m[2];
    if (value === undefined || value === '') {
      const child: { [k: string]: YamlValue } = {};
      parent[m[1]] = child;
      stack.push({ indent, map: child });
    } else if (value.startsWith('[')) parent[m[1]] = JSON.parse(value) as string[];
    else parent[m[1]] = value.startsWith('"') ? (JSON.parse(value) as string) : value;
  });
  return root;
}

/** Compose's variable substitution against `env`. */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}/g, (_, name: string, op: string | undefined, arg: string | undefined) => {
    const v = env[name];
    if (v !== undefined && v !== '') return v;
    if (op === ':?') throw new Error(`docker-compose.yml needs ${name}: ${arg}`);
    return op === ':-' ? (arg ?? '') : '';
  });
}

export function readCompose(path: string): { [k: string]: YamlValue } {
  return parseComposeYaml(readFileSync(path, 'utf8'));
}

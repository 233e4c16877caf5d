// Reads docker-compose.yml for the compose-topology test with a real YAML parser
// (the `yaml` package, with YAML 1.1 merge keys `<<: *anchor` as compose reads
// them), and applies compose's ${VAR}, ${VAR:-default} and ${VAR:?error}
// substitution. Extension fields (x-...) are left to the file's own anchors.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export interface Healthcheck {
  test: string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}

export interface Service {
  build?: string;
  image?: string;
  command: string[];
  environment: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: Healthcheck;
  depends_on?: Record<string, { condition: string }>;
  scale?: number;
  restart?: string;
}

export interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
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

export function readCompose(path: string): ComposeFile {
  return parse(readFileSync(path, 'utf8'), { merge: true }) as ComposeFile;
}

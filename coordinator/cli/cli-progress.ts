// Progress for long CLI commands (drain, import, export): a bar redrawn in
// place on a terminal, plain lines every few seconds otherwise (a log file, CI).
import { performance } from 'node:perf_hooks';
import { PROGRESS_LINE_INTERVAL_MS } from '../../shared/limits.js';

export function size(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

export function bar(done: number, total: number, width = 24): string {
  const f = total <= 0 ? 1 : Math.max(0, Math.min(1, done / total));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${Math.floor(f * 100)
    .toString()
    .padStart(3)}%`;
}

export const count = (n: number) => Math.round(n).toLocaleString('en-US');

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** What a progress line shows: items done, and the fraction done when it is known. */
export interface ProgressState {
  items: number;
  /** 0..1, or null when the total is unknown. */
  fraction: number | null;
  extra?: string;
}

/** Redraws `what` with a rate and an ETA on stderr until stop(). */
export class Progress {
  private readonly tty = process.stderr.isTTY === true;
  /** The rate's and the ETA's clock, monotonic (a stepped wall clock would skew both). */
  private readonly started = performance.now();
  private readonly timer: NodeJS.Timeout;
  private lastPlain = -Infinity;

  constructor(
    private readonly what: string,
    private readonly state: () => ProgressState,
  ) {
    this.timer = setInterval(() => this.draw(false), this.tty ? 200 : 1000);
    this.timer.unref();
  }

  private line(): string {
    const s = this.state();
    const seconds = (performance.now() - this.started) / 1000;
    const rate = seconds > 0 ? s.items / seconds : 0;
    const eta = s.fraction !== null && s.fraction > 0 ? (seconds * (1 - s.fraction)) / s.fraction : Infinity;
    const head = s.fraction === null ? `${count(s.items)} items` : `${bar(s.fraction, 1)} ${count(s.items)} items`;
    return `${this.what} ${head}  ${count(rate)} items/s${s.fraction === null ? '' : `  ETA ${duration(eta)}`}${s.extra ? `  ${s.extra}` : ''}`;
  }

  private draw(final: boolean): void {
    if (this.tty) {
      const width = (process.stderr.columns ?? 120) - 1;
      process.stderr.write(`\r${this.line().slice(0, width).padEnd(width)}${final ? '\n' : ''}`);
    } else if (final || performance.now() - this.lastPlain >= PROGRESS_LINE_INTERVAL_MS) {
      process.stderr.write(`${this.line()}\n`);
      this.lastPlain = performance.now();
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.draw(true);
  }
}

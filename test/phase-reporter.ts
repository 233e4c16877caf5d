// A vitest reporter that splits each file's time outside its tests: where a full run's time between files goes.
// vitest's json reporter times a file from its first test's start to its last test's end, so the time before the first
// test (the worker's start, the file's imports, its beforeAll hooks: the cluster starts) and after the last (afterAll:
// the clusters stopped) shows there only as gaps between files. This prints each file's phases and their sums:
//
//   npx vitest run test/a.test.ts test/b.test.ts --reporter=./test/phase-reporter.ts --reporter=default
//
// prepare: vitest's worker set up for the file; collect: the file's imports and its describe bodies; beforeAll: from
// the file's run start to its first test's start; tests: first test's start to last test's end; afterAll: last test's
// end to the file's end. What is left of the wall time is vitest's own (the start, a fork per file, the reports).
import type { Reporter } from 'vitest/reporters';
import type { RunnerTask, RunnerTestCase, RunnerTestFile } from 'vitest';

const testsOf = (t: RunnerTask): RunnerTestCase[] => (t.type === 'test' ? [t] : t.type === 'suite' ? t.tasks.flatMap(testsOf) : []);
const s = (ms: number) => (ms / 1000).toFixed(2).padStart(7);

export default class PhaseReporter implements Reporter {
  private readonly started = Date.now();

  onFinished(files: RunnerTestFile[] = []): void {
    const phases = ['prepare', 'collect', 'beforeAll', 'tests', 'afterAll'] as const;
    const sum = { prepare: 0, collect: 0, beforeAll: 0, tests: 0, afterAll: 0 };
    const rows: string[] = [];
    for (const f of files) {
      const start = f.result?.startTime;
      const ran = testsOf(f).flatMap((t) => (t.result?.startTime === undefined ? [] : [{ start: t.result.startTime, end: t.result.startTime + (t.result.duration ?? 0) }]));
      if (start === undefined || ran.length === 0) continue;
      const end = start + (f.result?.duration ?? 0);
      const first = Math.min(...ran.map((r) => r.start));
      const last = Math.max(...ran.map((r) => r.end));
      const p = { prepare: f.prepareDuration ?? 0, collect: f.collectDuration ?? 0, beforeAll: first - start, tests: last - first, afterAll: end - last };
      for (const k of phases) sum[k] += p[k];
      rows.push(`${phases.map((k) => s(p[k])).join(' ')}  ${f.name}`);
    }
    console.log(`\nphases of each file, seconds\n${phases.map((k) => k.padStart(7)).join(' ')}  file\n${rows.join('\n')}`);
    console.log(`${phases.map((k) => s(sum[k])).join(' ')}  sum of ${rows.length} files (wall ${s(Date.now() - this.started).trim()} s)`);
  }
}

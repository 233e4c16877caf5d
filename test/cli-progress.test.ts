// The CLI's progress bar: whatever the figures a running cluster reports (a drain
// whose node still receives slices reports more left than it started with), the
// bar stays within 0-100% and never throws.
import { describe, expect, it } from 'vitest';
import { bar } from '../coordinator/cli/cli-progress.js';

describe('progress bar', () => {
  it('clamps done below 0 and above total, and treats an empty total as done', () => {
    expect(bar(-5, 10, 10)).toBe('[..........]   0%');
    expect(bar(15, 10, 10)).toBe('[##########] 100%');
    expect(bar(5, 10, 10)).toBe('[#####.....]  50%');
    expect(bar(0, 0, 10)).toBe('[##########] 100%');
  });
});

import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the closing line CI reads ("N passed, N failed, N skipped"); Vitest's own summary
 * is not in a form the CI harness recognises.
 */
export default class PlainSummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed with no failed test (a beforeAll threw, so its tests were skipped, or
      // it has none) is one failure, so the closing line never reads "0 failed" for a red run.
      const anyFailed = [...mod.children.allTests()].some((t) => t.result().state === 'failed');
      if (mod.state() === 'failed' && !anyFailed) failed++;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}

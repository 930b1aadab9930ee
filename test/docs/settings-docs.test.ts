import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderSettingsMarkdown } from '../../packages/core/src/config/settings.js';
import { REPO } from '../support/processes.js';

// docs/configuration.md's table of every setting is generated from core's settings table
// (`npm run docs:settings`); prettier pads its cells, so compare the cells, not the spacing.
const cells = (table: string) =>
  table
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|[\s|:-]+\|$/.test(l))
    .map((l) =>
      l
        .split(/(?<!\\)\|/)
        .map((c) => c.trim())
        .join('|'),
    );

describe('docs/configuration.md', () => {
  it('lists every setting as the table defines it (run npm run docs:settings when red)', () => {
    const page = readFileSync(join(REPO, 'docs/configuration.md'), 'utf8');
    const a = page.indexOf('<!-- settings:begin');
    const b = page.indexOf('<!-- settings:end -->');
    expect(a).toBeGreaterThan(0);
    expect(cells(page.slice(a, b))).toEqual(cells(renderSettingsMarkdown()));
  });
});

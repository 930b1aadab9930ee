// Writes docs/errors.md from the error catalogue (packages/core/src/errors/catalogue.ts).
// Run `npm run docs:errors`; test/errors/error-catalogue.test.ts fails when the file is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderErrorCatalogueMarkdown } from '../packages/core/dist/index.js';

const target = fileURLToPath(new URL('../docs/errors.md', import.meta.url));
writeFileSync(target, renderErrorCatalogueMarkdown());
process.stdout.write(`wrote ${target}\n`);

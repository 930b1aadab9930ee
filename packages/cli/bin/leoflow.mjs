#!/usr/bin/env node
// Committed launcher, so `npm ci` can link the `leoflow` command before anything is built;
// the CLI itself is compiled to dist/ by `npm run build` (npm start and npm test run it).
import '../dist/main.js';

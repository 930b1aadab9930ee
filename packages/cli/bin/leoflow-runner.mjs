#!/usr/bin/env node
// `leoflow-runner`: the runner daemon, which is the agent bundle run with runner flags (the same
// file the door's bundle path serves; docs/runners.md). Build it with `npm run build`.
process.argv.splice(2, 0, '--runner');
await import('../../agent/dist/leoflow-agent.mjs');

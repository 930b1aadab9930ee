// The server's house, enforced (npm run lint → `depcruise`). docs/architecture.md draws it.
//
// packages/server/src is cut into layers. A folder may import its own layer's files and any
// lower layer, never a higher one; no file may take part in an import cycle; only the entry
// point (index.ts) imports boot/, where all composition lives.
//
// Top to bottom. Folders on one line are one layer (they may not import each other either way
// unless listed as allowed below).
const LAYERS = [
  ['boot'],
  ['api'],
  ['doctor'],
  ['runners'],
  ['rpc'],
  ['scheduler'],
  ['executor'],
  ['attempts'],
  ['vault'],
  ['auth'],
  ['config'],
  ['store'],
  ['util'],
];

const SRC = '^packages/server/src/';
const folder = (names) => `${SRC}(${names.join('|')})/`;

const layerRules = [];
LAYERS.forEach((layer, i) => {
  const higher = LAYERS.slice(0, i).flat();
  if (higher.length === 0) return;
  layerRules.push({
    name: `layer-${layer.join('-')}`,
    comment: `${layer.join(', ')} sits below ${higher.join(', ')}: it may not import them (pass what it needs in from boot/)`,
    severity: 'error',
    from: { path: folder(layer) },
    to: { path: folder(higher) },
  });
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'an import cycle: cut it by moving the shared piece down a layer, or by a port',
      severity: 'error',
      from: { path: SRC },
      to: { circular: true },
    },
    {
      name: 'boot-only-from-entry',
      comment: 'boot/ is composition: only the entry point (index.ts) starts it',
      severity: 'error',
      from: { path: SRC, pathNot: [`${SRC}index\\.ts$`, `${SRC}boot/`] },
      to: { path: `${SRC}boot/` },
    },
    {
      name: 'no-loose-files',
      comment: 'every file of the server has a folder; index.ts is the only loose one',
      severity: 'error',
      from: { path: `${SRC}[^/]+\\.ts$`, pathNot: `${SRC}index\\.ts$` },
      to: {},
    },
    {
      name: 'door-and-cells-apart',
      comment:
        'the door and a cell are separate processes: they meet through @leoflow/protocol (paths, headers, close codes) and the shared runners/ pieces, never through each other',
      severity: 'error',
      from: { path: `${SRC}runners/(door|cells)/` },
      to: { path: `${SRC}runners/(door|cells)/`, pathNot: `${SRC}runners/$1/` },
    },
    ...layerRules,
  ],
  options: {
    includeOnly: '^packages/server/src/',
    exclude: { path: '\\.d\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};

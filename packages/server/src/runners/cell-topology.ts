/** Where runner sessions are served: Lite's one implicit cell, or the directory's named cells. */
export type CellTopology =
  /** Lite: one implicit cell at this URL; nothing to add, drain or place */
  { kind: 'lite'; url: string } | { kind: 'directory' };

/** The name of Lite's one implicit cell. */
export const LITE_CELL_NAME = 'lite';

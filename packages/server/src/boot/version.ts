/** This build's version, as the REST API and the banner report it. */
export const LEOFLOW_VERSION = '0.1.0';

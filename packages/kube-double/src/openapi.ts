// The /openapi/v2 and /openapi/v3 documents, when the double has any to serve.
export interface OpenApiDocuments {
  /** The document at `path` (/openapi/v2, /openapi/v3, /openapi/v3/<group-version>), if served. */
  serve(path: string): unknown;
}

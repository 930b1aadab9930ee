/**
 * The error catalogue: every stable `LF_…` code a user, a script or an agent can see, with the
 * HTTP status the REST API answers it with, the gRPC/Connect code the agent port uses where the
 * code travels there, and one line on what to do next. docs/errors.md is generated from this
 * table (`node scripts/gen-error-docs.mjs`); a test fails when a thrown code is missing here.
 *
 * `http: null` marks a code that never travels over HTTP (CLI, SDK, agent-local). A REST reply
 * for a LeoflowError takes its status from here and nowhere else. `grpc` is the Connect status
 * the agent port (packages/server/src/rpc/agent-service/agent-service.ts) answers for the same refusal; its
 * replies carry that status and a message, not the LF code.
 */

/** Which part of the system a code belongs to; the named error classes follow the families. */
export type ErrorFamily =
  | 'config'
  | 'dag'
  | 'vault'
  | 'auth'
  | 'liveness'
  | 'store'
  | 'run'
  | 'request'
  | 'cli'
  | 'sdk'
  | 'internal';

/** gRPC/Connect status names (the Connect wire form); core stays free of the RPC library. */
export type GrpcCode =
  | 'invalid_argument'
  | 'not_found'
  | 'already_exists'
  | 'permission_denied'
  | 'failed_precondition'
  | 'unauthenticated'
  | 'unavailable'
  | 'internal';

export interface ErrorCodeSpec {
  family: ErrorFamily;
  /** the REST status; null when the code never travels over HTTP */
  http: number | null;
  /** the agent port's status, where the code reaches an agent */
  grpc?: GrpcCode;
  /** what to do next, in one line */
  fix: string;
}

const c = <F extends ErrorFamily>(
  family: F,
  http: number | null,
  fix: string,
  grpc?: GrpcCode,
): ErrorCodeSpec & { family: F } => (grpc ? { family, http, grpc, fix } : { family, http, fix });

export const ERROR_CATALOGUE = {
  // ── config ─────────────────────────────────────────────────────────────────────────────
  LF_CONFIG_INVALID: c(
    'config',
    400,
    'Fix the named setting (file, env var or flag) as the message lists; `leoflow doctor` checks the whole config.',
  ),
  LF_PORT_UNAVAILABLE: c(
    'config',
    null,
    'Pass another port to the flag the message names, or 0 for a free one; nothing was left running.',
  ),
  LF_CONFIG_ATTEMPT_UID_RANGE: c(
    'config',
    400,
    'Set execution.attempt_uid_range to FIRST-LAST (or FIRST+COUNT) of unused uids above 1000.',
  ),
  LF_CONFIG_ATTEMPT_NPROC_LIMIT: c(
    'config',
    400,
    'Set the process limit to a whole number (0 leaves RLIMIT_NPROC alone).',
  ),
  LF_CONFIG_RUN_AS_USER: c(
    'config',
    400,
    'Create the named account (useradd --system) or name an existing unprivileged user.',
  ),
  LF_CONFIG_PRO_NEEDS_POSTGRES: c(
    'config',
    400,
    'Pass --database-url postgres://… (or LEOFLOW_DATABASE_URL); for one process on SQLite run `leoflow standalone`.',
  ),
  LF_CONFIG_AGENT_TLS_REQUIRED: c(
    'config',
    400,
    'Give --agent-tls-cert and --agent-tls-key (a mounted Secret), or listen on loopback only (--agent-host 127.0.0.1).',
  ),
  LF_INSTALL_ID: c(
    'config',
    400,
    'Move the install-id file aside and restart; a new id is minted.',
  ),
  LF_WORK_ROOT: c(
    'config',
    400,
    'Remove or re-own the work root so it is a directory of the control-plane user, then restart.',
  ),
  LF_ATTEMPT_UID_LOCK_DIR: c(
    'config',
    null,
    'Make the attempt-uid lock directory a real directory owned by the agent user with mode 0700.',
  ),
  LF_SANDBOX_REQUIRED: c(
    'config',
    400,
    'Give the control plane what the sandbox needs (root, the built helper, CAP_SYS_ADMIN for namespaces), or set execution.isolation auto.',
  ),
  LF_CONFIG_SANDBOX: c(
    'config',
    400,
    'Fix the named execution.* sandbox setting (isolation, network, writable_paths, tmpfs_size) as the message says.',
  ),
  LF_ATTEMPT_UIDS_EXHAUSTED: c(
    'config',
    null,
    'Widen execution.attempt_uid_range or run fewer attempts at once; kill processes dead attempts left.',
  ),
  LF_AGENT_TLS_INVALID: c(
    'config',
    null,
    'Provide a matching PEM certificate and key for the agent port, replacing both at once; the serving pair stays until then.',
  ),
  // ── dag ───────────────────────────────────────────────────────────────────────────────
  LF_DAG_INVALID: c(
    'dag',
    400,
    'Run `leoflow dags validate <folder>` and fix each diagnostic it prints.',
  ),
  LF_DAG_SCHEMA: c(
    'dag',
    400,
    'Fix the key at the given path: its type, a missing required key, or an unknown key.',
  ),
  LF_DAG_NOT_FOUND: c('dag', 404, 'List the DAGs (`leoflow dags list`) and use one of their ids.'),
  LF_DAG_VERSION_NOT_FOUND: c(
    'dag',
    404,
    'Register the DAG again (`leoflow dags push <dir>`), or ask for a version it has.',
  ),
  LF_DAG_FILE_NOT_FOUND: c(
    'dag',
    null,
    'Pass a folder that holds a leoflow.yaml (or the file itself).',
  ),
  LF_DAG_ID_DUPLICATE: c(
    'dag',
    400,
    'Two files in the DAGs folder name the same dag_id; rename one (the first, in path order, is loaded).',
  ),
  LF_DAG_TOO_LARGE: c(
    'dag',
    null,
    'Shrink the DAG file below the per-file limit (docs/authoring.md).',
  ),
  LF_DAG_UNKNOWN_DECLARATION: c(
    'dag',
    400,
    'Declare only variables and connections that exist in the vault, or create them first.',
  ),
  LF_YAML_SYNTAX: c(
    'dag',
    400,
    'Fix the YAML at the given line: one document, no unknown aliases.',
  ),
  LF_YAML_DUPLICATE_KEY: c('dag', 400, 'Remove the repeated key from the mapping.'),
  LF_YAML_ALIAS_LIMIT: c('dag', 400, 'Expand fewer aliases, and none that refer to themselves.'),
  LF_YAML_WARNING: c(
    'dag',
    400,
    "Read the YAML parser's warning at the given line (for example an unknown !tag).",
  ),
  LF_DAG_BAD_ID: c('dag', 400, 'Use an id of letters, digits, `_`, `-` and `.` as the hint shows.'),
  LF_DAG_DUPLICATE_TASK: c('dag', 400, 'Give each task a unique task_id.'),
  LF_DAG_UNKNOWN_UPSTREAM: c(
    'dag',
    400,
    'Name an existing task in depends_on (the hint suggests the closest one).',
  ),
  LF_DAG_CYCLE: c('dag', 400, 'Break the dependency cycle the message lists.'),
  LF_DAG_BAD_CRON: c('dag', 400, 'Write a 5-field cron line or a preset such as @daily.'),
  LF_DAG_UNKNOWN_TIMEZONE: c('dag', 400, 'Use an IANA zone name such as Europe/Paris or UTC.'),
  LF_DAG_BAD_DATE: c('dag', 400, 'Write the date as ISO 8601, e.g. 2026-01-01.'),
  LF_DAG_RESERVED_ENV: c(
    'dag',
    400,
    'Rename the env key: the LEOFLOW_ prefix belongs to the agent.',
  ),
  LF_DAG_BAD_ENV: c(
    'dag',
    400,
    'Use a portable variable name (`[A-Za-z_][A-Za-z0-9_]*`) and a value without NUL bytes.',
  ),
  LF_DAG_SCRIPT_NOT_FOUND: c(
    'dag',
    400,
    'Create the script or fix its path, relative to the DAG folder.',
  ),
  LF_DAG_BAD_SCRIPT_PATH: c('dag', 400, 'Make `script:` a relative path inside the DAG folder.'),
  LF_DAG_FILE_OUTSIDE_FOLDER: c(
    'dag',
    400,
    'Copy the file into the DAG folder instead of linking to it.',
  ),
  LF_DAG_FILE_TOO_LARGE: c(
    'dag',
    400,
    'Shrink the file below the per-file limit (docs/authoring.md).',
  ),
  LF_DAG_FILE_NOT_REGULAR: c(
    'dag',
    400,
    'Make the path a regular file that does not change while it is read.',
  ),
  LF_DAG_COMMAND_AND_SCRIPT: c(
    'dag',
    400,
    'Give the task either `command:` or `script:`, not both.',
  ),
  LF_DAG_DUPLICATE_DECLARATION: c('dag', 400, 'List each name once.'),
  LF_DAG_ENV_COERCED: c('dag', 400, 'Quote the env value to keep it a string on purpose.'),
  LF_DAG_EMPTY_DECLARATION_INHERITS: c(
    'dag',
    400,
    'Drop the empty list, or list the names the task needs.',
  ),
  LF_DAG_KUBERNETES: c(
    'dag',
    400,
    "Set only image, service_account and resources (requests/limits of cpu, memory, ephemeral-storage as quoted quantities) under a task's kubernetes:.",
  ),
  LF_DAG_RUNNER_LABELS: c(
    'dag',
    400,
    'Give runner_labels as a mapping of label names to quoted values, on a task with executor: runner.',
  ),
  LF_DAG_KUBERNETES_NOT_ALLOWED: c(
    'dag',
    400,
    "Choose an image, service account and resources within the tenant's allowlist (executor.kubernetes.tenants), or ask the operator to extend it.",
  ),
  LF_DAG_CATCHUP_WITHOUT_START: c('dag', 400, 'Set start_date, or turn catchup off.'),
  LF_UNKNOWN_TRIGGER_RULE: c(
    'dag',
    400,
    'Use one of the trigger rules listed in docs/authoring.md.',
  ),
  LF_DAG_SETUP_TEARDOWN: c(
    'dag',
    400,
    "Mark a task setup: true or teardown: true (not both); list only setup tasks under a teardown's setups:, and leave a teardown's trigger_rule out.",
  ),
  LF_DAG_BRANCH: c(
    'dag',
    400,
    'Give branch: true (the return value names the tasks to follow) or branch: {exit_codes: {0: [task]}} with exit codes 0-255 and task or group ids of the DAG; a task is a branch or a short_circuit, not both.',
  ),
  LF_DAG_EXPAND: c(
    'dag',
    400,
    'Write expand: {NAME: [values]} or {NAME: {xcom: upstream_task}} with env names not also under env:, from an upstream with do_xcom_push: true; setups, teardowns and branches cannot be mapped.',
  ),
  LF_DAG_EXPAND_TOO_LONG: c(
    'dag',
    400,
    "Shorten the lists, or raise the task's max_map_length (at most 10000).",
  ),
  LF_DAG_TASK_GROUP: c(
    'dag',
    400,
    'Give every group a group_id (an id used by no other group or task) and a non-empty tasks: list; an item is a task (task_id) or a group (group_id), not both.',
  ),
  // templates in command: and env: (docs/authoring.md, "Templates"); at compile time, and as the
  // error of an attempt whose template fails when the agent renders it
  LF_TEMPLATE_SYNTAX: c(
    'dag',
    400,
    "Close the {{ … }} or the quote; for a literal {{ write {{ '{{' }} or wrap the text in {% raw %}…{% endraw %}.",
  ),
  LF_TEMPLATE_UNSUPPORTED: c(
    'dag',
    400,
    'Templates hold a name or literal and the filters ds_add, ds_format, default; compute anything else in the task.',
  ),
  LF_TEMPLATE_UNDEFINED: c(
    'dag',
    400,
    "Use a name of the template context, define the param, or give a fallback with | default('…').",
  ),
  LF_TEMPLATE_NOT_DECLARED: c(
    'dag',
    400,
    "Declare the variable or connection the template reads in the task's (or the DAG's) variables:/connections:.",
  ),
  LF_TEMPLATE_FILTER: c(
    'dag',
    400,
    "Give the filter the arguments and input it takes: ds | ds_add(7), ds | ds_format('%Y-%m-%d', '%d/%m/%Y').",
  ),
  LF_BRANCH_INVALID: c(
    'run',
    null,
    'Make the branch task print task or group ids of the DAG (its downstream tasks) as its last stdout line: one id, a JSON list of ids, or null.',
  ),
  LF_BRANCH_NO_RESULT: c(
    'run',
    null,
    'Make the branch (or short-circuit) task print its decision as its last stdout line.',
  ),
  LF_MAP_NOT_A_LIST: c(
    'run',
    null,
    'Make the upstream that a mapped task expands over print a JSON list as its last stdout line.',
  ),
  LF_MAP_TOO_LONG: c(
    'run',
    null,
    "Return a shorter list, or raise the mapped task's max_map_length (at most 10000).",
  ),
  LF_MAP_NO_VALUES: c(
    'run',
    null,
    'Make the upstream that a mapped task expands over push its return value (do_xcom_push: true and a last stdout line).',
  ),
  // ── run ───────────────────────────────────────────────────────────────────────────────
  LF_RUN_NOT_FOUND: c(
    'run',
    404,
    "List the DAG's runs (`leoflow runs list`) and use one of their ids.",
  ),
  LF_RUN_EXISTS: c('run', 409, 'Pick another run id, or omit it to get a fresh one.'),
  LF_RUN_BAD_CONF: c(
    'run',
    400,
    'Pass the run conf as a JSON object, e.g. --conf \'{"day":"2026-01-01"}\'.',
  ),
  LF_RUN_AMBIGUOUS: c('run', null, 'Pass the DAG id as well, or the full run id.'),
  LF_RUN_LATEST_NEEDS_DAG: c(
    'run',
    null,
    'Say which DAG `latest` is the newest run of: add --dag <dag_id>.',
  ),
  LF_RUN_ID_RESERVED: c(
    'run',
    400,
    'Pick another run id: `latest` names the newest run in every CLI command.',
  ),
  LF_DAG_TEST_FAILED: c(
    'run',
    null,
    "The test run did not succeed: read the failed task's log above, fix it, run `leoflow dags test` again.",
  ),
  LF_DATA_DIR_IN_USE: c(
    'cli',
    null,
    'Stop the Leoflow Lite that uses this data directory, or copy its database elsewhere and pass that.',
  ),
  LF_TASK_NOT_FOUND: c('run', 404, "List the run's tasks and use one of their ids.", 'not_found'),
  // Why an attempt's pod ended or never started (the Kubernetes executor), on the task's error.
  LF_POD_OOM_KILLED: c(
    'run',
    null,
    "Raise the task's kubernetes.resources.limits.memory within the tenant's ceiling, or use less memory.",
  ),
  LF_POD_IMAGE_PULL: c(
    'run',
    null,
    "Fix the image name/tag in the tenant's allowlist, or let the nodes pull it (imagePullSecrets on the service account).",
  ),
  // Lite's host agent (execution.host_agent on) died while it ran the attempt.
  LF_HOST_AGENT_LOST: c(
    'run',
    null,
    'Nothing to fix for the attempt: it is retried as its retries allow. If it recurs, read <data-dir>/agents/host-agent.log for why the host agent died.',
  ),
  LF_POD_UNSCHEDULABLE: c(
    'run',
    null,
    "Lower the task's resource requests, or add cluster capacity; the message quotes the scheduler.",
  ),
  LF_POD_DEADLINE_EXCEEDED: c(
    'run',
    null,
    "Raise the task's execution_timeout_seconds if it legitimately needs longer.",
  ),
  LF_POD_START_TIMEOUT: c(
    'run',
    null,
    'Raise executor.kubernetes.pod_start_timeout for slow image pulls, or pre-pull the image.',
  ),
  LF_POD_CONFIG: c(
    'run',
    null,
    'Check that the image runs as a non-root numeric user and that the agent CA ConfigMap exists.',
  ),
  LF_POD_EVICTED: c(
    'run',
    null,
    'Retries apply; request the resources the task really uses so the node does not evict it.',
  ),
  LF_EXCHANGE_NO_KUBERNETES: c(
    'config',
    null,
    'auth.agent_token_transport=exchange needs the Kubernetes executor: configure executor.kubernetes (its kubeconfig or in-cluster account), or set the transport to envvar.',
  ),
  LF_EXCHANGE_TOKENREVIEW_FORBIDDEN: c(
    'config',
    null,
    "Grant the control plane's ServiceAccount create on authentication.k8s.io/tokenreviews (apply deploy/components/exchange), or set auth.agent_token_transport=envvar.",
  ),
  LF_EXCHANGE_SECRET_RIGHTS_MISSING: c(
    'config',
    null,
    "Grant the control plane's ServiceAccount secrets create/get/patch/delete in every tenant namespace (apply deploy/components/exchange-secret-fallback), or set auth.exchange_bootstrap=projected_token.",
  ),
  LF_EXCHANGE_INSECURE_CHANNEL: c(
    'config',
    null,
    'The exchange hands out credentials: configure agent TLS (agent.tls) or bind the agent port to loopback, or set auth.agent_token_transport=envvar.',
  ),
  LF_WARM_POOL_POD_FAILED: c(
    'run',
    null,
    "Check the control plane's RBAC (create, delete and list pods in the pool's namespace) and that the pool's service account exists; the message gives the API status.",
  ),
  LF_WARM_POOL_UNUSED: c(
    'config',
    null,
    "A warning at start: the pool's tenant sets default_resources, so every attempt of it runs in a cold pod (a pool pod carries no resources) and the pool's pods idle. Remove the tenant's default_resources, or the pool.",
  ),
  LF_WARM_WORKER_NOT_SERVING: c(
    'auth',
    null,
    'The warm-pool pod was recycled or is unknown to this control plane: the pool replaces it; a worker exits and is not restarted in place.',
  ),
  LF_WARM_WORKER_NOT_LEADER: c(
    'run',
    null,
    'Nothing to fix: this replica does not hold the scheduling lease, so no assignment reaches a warm worker waiting here; the worker reconnects on a new connection (with jittered backoff) until it reaches the leader.',
    'unavailable',
  ),
  LF_POD_CREATE_FAILED: c(
    'run',
    null,
    "Check the control plane's RBAC (create pods in the tenant namespace) and that the namespace exists; the message gives the API status.",
  ),
  LF_EXECUTOR_NOT_CONFIGURED: c(
    'run',
    null,
    "Configure the executor the task names (e.g. an executor.kubernetes section), or change the task's executor:.",
  ),
  LF_MAP_INDEX_REQUIRED: c(
    'run',
    400,
    'The task is mapped: name one map index (--map-index N, or ?map_index=N); `leoflow tasks mapped <run> <task>` lists them.',
  ),
  LF_TASK_ACTIVE: c(
    'run',
    409,
    'Wait for the task to finish (or mark it failed) before clearing it.',
  ),
  LF_MARK_BAD_STATE: c(
    'run',
    400,
    'Mark a task instance or a run with --state success or --state failed; nothing else can be set by hand.',
  ),
  LF_ILLEGAL_TRANSITION: c(
    'run',
    400,
    'Re-read the task instance and decide again from its current state.',
  ),
  LF_TEST_FAULT_UNKNOWN: c(
    'run',
    null,
    'Name a fault the test-fault hook knows (packages/server/src/util/test-faults.ts).',
  ),
  // ── liveness ──────────────────────────────────────────────────────────────────────────
  LF_ATTEMPT_NOT_FOUND: c(
    'liveness',
    404,
    'No attempt with that try exists for the task: list its tries (`leoflow tasks delivery <run> <task>`) and name one of them, or omit --try for the current one.',
  ),
  LF_CREDENTIAL_UNBOUND: c(
    'auth',
    null,
    "An attempt's token works only with the session key its agent bound at Register: a request without it, or with another, is refused and audited (credential.unbound_use). If this is the attempt's own agent, let the attempt fail and clear the task for a fresh one; otherwise the token was copied — find where (under envvar it is on the pod spec) and prefer auth.agent_token_transport=exchange.",
    'unauthenticated',
  ),
  LF_CREDENTIAL_COPIED: c(
    'auth',
    null,
    "Two agent processes registered with one attempt's token, so it was copied: the attempt was failed (retries apply, each with a new token) and its credential revoked. Find who can read the token (under envvar: `get pods` in the task namespace) and prefer auth.agent_token_transport=exchange; the audit event credential.unbound_use names the attempt.",
    'permission_denied',
  ),
  LF_AGENT_SESSION_KEY_REQUIRED: c(
    'auth',
    null,
    "Register needs the agent's session key (RegisterRequest.session_key or the leoflow-session header); upgrade the agent to this control plane's version.",
    'failed_precondition',
  ),
  LF_SECRET_NOT_GRANTED: c(
    'auth',
    403,
    "The DAG declares a Variable or Connection whose grants do not name it: ask an admin to add a pattern matching the DAG id to the secret's grants (`leoflow variables set-grants` / `leoflow connections set-grants`), or remove it from the DAG's declaration.",
    'permission_denied',
  ),
  LF_SECRET_GRANT_INVALID: c(
    'vault',
    400,
    'Give grants as a list of DAG id patterns (letters, digits, _ . - and the wildcards * and ?; anchored, case-sensitive), [] for no DAG, or null for every DAG.',
  ),
  // ── vault ─────────────────────────────────────────────────────────────────────────────
  LF_VARIABLE_NOT_FOUND: c(
    'vault',
    404,
    'List the variables (`leoflow variables list`) and use one of their keys.',
  ),
  LF_CONNECTION_NOT_FOUND: c(
    'vault',
    404,
    'List the connections (`leoflow connections list`) and use one of their ids.',
  ),
  LF_CONN_URI_INVALID: c(
    'vault',
    400,
    'Write the connection as an Airflow URI: scheme://login:password@host:port/schema?extra.',
  ),
  LF_CONN_JSON_INVALID: c(
    'vault',
    400,
    'Write the connection as a JSON object with conn_type and the other Airflow fields.',
  ),
  LF_CONN_BODY_INVALID: c(
    'vault',
    400,
    'Send either a uri or the connection fields, as docs/connections.md shows.',
  ),
  LF_CONN_IMPORT_INVALID: c(
    'vault',
    400,
    'Fix the entries the message lists in the import file; nothing was imported.',
  ),
  LF_VAR_IMPORT_INVALID: c(
    'vault',
    400,
    'Fix the entries the message lists in the variables file; nothing was imported.',
  ),
  LF_ENV_IMPORT_INVALID: c(
    'vault',
    400,
    'Fix the AIRFLOW_CONN_/AIRFLOW_VAR_ variables the message lists.',
  ),
  LF_ENV_NAME_INVALID: c(
    'vault',
    400,
    'Use an id that maps to a portable environment variable name.',
  ),
  LF_GCP_CONN_INVALID: c(
    'vault',
    400,
    'Fix the google_cloud_platform extra as docs/cloud-credentials.md shows.',
  ),
  LF_SECRET_KEY_REQUIRED: c(
    'vault',
    400,
    'Set LEOFLOW_SECRET_KEY or LEOFLOW_SECRET_KEYRING_FILE (docs/configuration.md).',
  ),
  LF_SECRET_KEY_INVALID: c(
    'vault',
    400,
    'Set the secret key to 32 random bytes, hex or base64 (`openssl rand -base64 32`).',
  ),
  LF_SECRET_KEY_CONFLICT: c(
    'vault',
    400,
    'Set only one of LEOFLOW_SECRET_KEY and the keyring file.',
  ),
  LF_SECRET_KEY_MISSING: c(
    'vault',
    400,
    'Add the key the value was sealed with back to the keyring, then retry.',
  ),
  LF_SECRET_KEYRING_INVALID: c(
    'vault',
    400,
    'Fix the keyring file as the message says; it is never echoed.',
  ),
  LF_SECRET_KEYRING_PERMISSIONS: c(
    'vault',
    400,
    'chmod 0600 the keyring file and make the control-plane user its owner.',
  ),
  LF_SECRET_DECRYPT_FAILED: c(
    'vault',
    400,
    'The stored value does not open with the keyring: restore the right key or set the value again.',
  ),
  LF_SECRET_ROTATION_UNSUPPORTED: c(
    'vault',
    409,
    'Use a keyring file (not a single key) to rotate the secret key.',
  ),
  LF_SECRET_ROTATION_STALLED: c(
    'vault',
    400,
    'Run every control-plane process with the new keyring, then rotate again.',
  ),
  // ── auth ──────────────────────────────────────────────────────────────────────────────
  LF_UNAUTHENTICATED: c(
    'auth',
    401,
    'Pass --token or set LEOFLOW_TOKEN; mint a token with `leoflow auth create-token`.',
    'unauthenticated',
  ),
  LF_FORBIDDEN: c(
    'auth',
    403,
    'Use a token whose role holds the permission the message names.',
    'permission_denied',
  ),
  LF_TOKEN_NOT_FOUND: c(
    'auth',
    404,
    'List the tokens (`leoflow auth list-tokens`) and use one of their ids.',
  ),
  LF_TOKEN_NAME_INVALID: c('auth', 400, 'Name the token with letters, digits, `_`, `-` and `.`.'),
  LF_TOKEN_TTL_INVALID: c(
    'auth',
    400,
    'Give the token lifetime as a duration such as 30d or 12h, within the limit.',
  ),
  LF_TOKEN_AMBIGUOUS: c('auth', null, "Pass the token's id instead of its name."),
  LF_ROLE_UNKNOWN: c('auth', 400, 'Use one of the roles `leoflow auth roles` lists.'),
  LF_KEYRING_INVALID: c(
    'auth',
    400,
    'Move the damaged signing keyring aside and restart; agents re-authenticate.',
  ),
  LF_KEYRING_LOCKED: c(
    'auth',
    400,
    'Retry; remove the lock file only if no Leoflow process is running.',
  ),
  LF_CSRF: c('auth', 403, 'Use the web app itself; cross-site requests are refused.'),
  LF_SIGN_IN_THROTTLED: c(
    'auth',
    429,
    'Wait the Retry-After seconds, then sign in with a valid token or a fresh sign-in link.',
  ),
  LF_HOST_NOT_ALLOWED: c(
    'auth',
    403,
    'Open the web app on an allowed host name (the listen host, or one in LEOFLOW_UI_HOSTS).',
  ),
  LF_TENANT_NOT_FOUND: c(
    'auth',
    404,
    'List the tenants (`leoflow tenants list`) and use one of their ids.',
  ),
  LF_TENANT_EXISTS: c('auth', 409, 'Pick another tenant id.'),
  LF_TENANT_ID_INVALID: c(
    'auth',
    400,
    'Use 1-63 lowercase letters, digits and -, starting with a letter or digit.',
  ),
  LF_AGENT_PROTOCOL_INCOMPATIBLE: c(
    'auth',
    null,
    'Run agents of a protocol the control plane accepts: upgrade the control plane first, then the agents (docs/agent.md, "Compatibility").',
    'failed_precondition',
  ),
  LF_REGISTER_PREFETCH_SKIPPED: c(
    'run',
    null,
    'Nothing to fix for that attempt: its agent asked for the part with its own call. If it repeats, read the error logged just before it (a store or DAG-version read failed).',
  ),
  LF_HANDOFF_REGISTER_FAILED: c(
    'run',
    null,
    'Nothing to fix for that attempt: its standby agent registered itself with its own Register call. If it repeats, read the error logged just before it (a store read or write failed).',
  ),
  LF_RUNNER_NOT_FOUND: c(
    'auth',
    404,
    'List the runners (`leoflow runners list`) and use one of their names.',
  ),
  LF_RUNNER_EXISTS: c(
    'auth',
    409,
    'Pick another name, or delete the old runner first (`leoflow runners delete <name>`): there is no in-place rotation.',
  ),
  LF_RUNNER_INVALID: c(
    'auth',
    400,
    'Fix the named field of the runner as the message says (`leoflow runners register --help`).',
  ),
  LF_RUNNER_NO_TOKEN: c(
    'auth',
    409,
    'An ssh runner has no token: the cell dials it. Register an inbound runner to get a launch command.',
  ),
  LF_RUNNER_UNAUTHORIZED: c(
    'auth',
    401,
    "Register the runner again (`leoflow runners register`) and run the printed launch command; a deleted runner's token never works again.",
  ),
  LF_RUNNER_NOT_PLACED: c(
    'auth',
    503,
    "Retry after Retry-After; a platform admin places the runner's tenant on a cell (`leoflow tenants place`).",
  ),
  LF_RUNNER_CANCELLED: c(
    'auth',
    null,
    'The attempt was terminated while it waited for a runner; trigger it again, or clear the task, when you want it to run.',
  ),
  LF_RUNNER_BUNDLE_MISSING: c(
    'cli',
    null,
    'Build the runner bundle (`npm run build`, or `npm run bundle -w @leoflow/agent`); `leoflow runner start` runs that file.',
  ),
  LF_SSH_HOST_KEY_MISMATCH: c(
    'auth',
    null,
    "Nothing ran: the machine's host key is not the pinned one. If it was re-keyed on purpose, delete the runner and register it again with the new `ssh-keyscan` line; otherwise treat it as an interception.",
  ),
  LF_SSH_AUTH_REFUSED: c(
    'auth',
    null,
    "Add the public half of the runner's credential key to the ssh user's authorized_keys on the machine (`ssh-keygen -y -f key`), or point the runner at the right Connection.",
  ),
  LF_SSH_CREDENTIAL_INVALID: c(
    'auth',
    null,
    "Store the OpenSSH private key in the runner's credential Connection as extra.private_key (its passphrase, if any, as extra.private_key_passphrase).",
  ),
  LF_SSH_UNREACHABLE: c(
    'auth',
    null,
    "Check from the cell that the runner's host and port answer SSH (`ssh -p PORT USER@HOST true`); the cell dials again on the next assignment.",
  ),
  LF_SSH_COMMAND_FAILED: c(
    'auth',
    null,
    'Install Node 20 on the machine and let the ssh user write ~/.leoflow; the message carries the remote stderr.',
  ),
  LF_CELL_UNREACHABLE: c(
    'auth',
    503,
    "Retry after Retry-After; if it persists, check that the tenant's cell is up and reachable from the door.",
  ),
  LF_CELL_REFUSED: c(
    'auth',
    502,
    "Retry after Retry-After; if it persists, check that the cell trusts this door's public keys (door-public.jwks.json).",
  ),
  LF_CELL_NOT_FOUND: c(
    'auth',
    404,
    'List the cells (`leoflow cells list`) and use one of their names.',
  ),
  LF_CELL_EXISTS: c('auth', 409, 'Pick another cell name.'),
  LF_CELL_INVALID: c(
    'auth',
    400,
    'Name the cell with 1-63 lowercase letters, digits and -, and give its internal http(s) base URL.',
  ),
  LF_CELL_DRAINING: c(
    'auth',
    409,
    'The cell is draining and takes no new placements; place the tenant on an active cell.',
  ),
  LF_DIRECTORY_LITE: c(
    'auth',
    409,
    'Lite is one implicit cell: cells and placements are managed on a Pro installation with a directory schema.',
  ),
  // ── store ─────────────────────────────────────────────────────────────────────────────
  LF_STORE_MIGRATION_FAILED: c(
    'store',
    null,
    'Read the cause in the message, fix the database, and start again; the migration resumes.',
  ),
  LF_STORE_SCHEMA_NEWER: c(
    'store',
    null,
    'Upgrade this replica to the release that wrote the newest migration; never roll the schema back.',
  ),
  LF_STORE_SCHEMA_INVALID: c(
    'store',
    null,
    'Pass a schema name of 1-63 characters without NUL, or create the schema the search_path names.',
  ),
  LF_STORE_DISK_FULL: c(
    'store',
    507,
    "Free space on the database's filesystem (Lite: the data dir's) or grow it; the refused write changed nothing, and writes resume by themselves once there is room.",
  ),
  // ── request ───────────────────────────────────────────────────────────────────────────
  LF_BAD_REQUEST: c(
    'request',
    400,
    'Fix the request as the validation details say (docs/api.md lists each body).',
  ),
  LF_INVALID_ARGUMENT: c(
    'request',
    400,
    'Pass a value in the range the message gives.',
    'invalid_argument',
  ),
  LF_JSON_TOO_DEEP: c('request', 400, 'Flatten the JSON below the nesting limit.'),
  LF_PATH_PARAM_TOO_LONG: c(
    'request',
    414,
    'Shorten the id in the URL path: ids are at most 250 characters (the documented patterns).',
  ),
  LF_BODY_TOO_LARGE: c('request', 413, 'Send a body under the 8 MiB limit.'),
  LF_ROUTE_NOT_FOUND: c('request', 404, 'Use a route listed at /api/v1/docs.'),
  LF_HTTP: c('request', null, 'The server answered with an unexpected status; see its log.'),
  // ── cli ───────────────────────────────────────────────────────────────────────────────
  LF_CLI: c('cli', null, 'Read the message; `leoflow <command> --help` lists the options.'),
  LF_USAGE: c('cli', null, 'Fix the command line; `leoflow <command> --help` lists the options.'),
  LF_CLI_CONFIG_INVALID: c('cli', null, 'Fix or remove the CLI config file the message names.'),
  LF_CLI_CONFIG_UNWRITABLE: c(
    'cli',
    null,
    "Make the CLI config file's directory writable, or set LEOFLOW_CLI_CONFIG to another path.",
  ),
  LF_CLI_TOKEN_WITHHELD: c(
    'cli',
    null,
    'Pass --token for a remote server; the local admin token is never sent off this machine.',
  ),
  LF_PROFILE_NOT_FOUND: c(
    'cli',
    null,
    'List the profiles (`leoflow config get-profiles`) or create one with `leoflow config set-profile`.',
  ),
  LF_PROFILE_NOT_SET: c('cli', null, 'Select a profile with `leoflow config use-profile <name>`.'),
  LF_LOGIN_NO_TOKEN: c(
    'cli',
    null,
    'Pass --token-file <file> (or --token-file - and the token on standard input); a local standalone prints the line to use.',
  ),
  LF_UNREACHABLE: c(
    'cli',
    null,
    'Start the server, or point --url / LEOFLOW_URL at a running one.',
  ),
  LF_CONNECTION_CLOSED: c(
    'cli',
    null,
    'The server cut the request off; a body over its size limit is refused this way.',
  ),
  // ── sdk ───────────────────────────────────────────────────────────────────────────────
  LF_SDK_CONTEXT_INVALID: c(
    'sdk',
    null,
    'Run the task under the Leoflow agent, which writes the context.',
  ),
  LF_SDK_VARIABLE_MISSING: c('sdk', null, "Declare the variable in the task's `variables:` list."),
  LF_SDK_VARIABLE_NOT_JSON: c('sdk', null, 'Store the variable as JSON, or read it as text.'),
  LF_SDK_CONNECTION_MISSING: c(
    'sdk',
    null,
    "Declare the connection in the task's `connections:` list.",
  ),
  LF_SDK_CONN_TYPE_MISSING: c('sdk', null, 'Give the connection a conn_type.'),
  LF_SDK_XCOM_MISSING: c(
    'sdk',
    null,
    'Make the upstream task push that XCom key, or pass a default.',
  ),
  LF_SDK_XCOM_NOT_JSON: c('sdk', null, 'Push XCom values as JSON.'),
  LF_SDK_XCOM_NOT_SERIALIZABLE: c('sdk', null, 'Push only JSON-serializable values.'),
  LF_SDK_GCP_CONN_TYPE: c(
    'sdk',
    null,
    'Use a google_cloud_platform connection for Google clients.',
  ),
  LF_SDK_GCP_KEY_INVALID: c(
    'sdk',
    null,
    "Fix the service-account key in the connection's extra (docs/cloud-credentials.md).",
  ),
  LF_SDK_GCP_KEY_PATH_UNREADABLE: c(
    'sdk',
    null,
    'Make the key_path file readable by the task, or put the key in the extra.',
  ),
  LF_SDK_GCP_SECRET_FETCH_FAILED: c(
    'sdk',
    null,
    "Grant the task's identity access to the secret, or check its name.",
  ),
  LF_SDK_GCP_AUTH_MISSING: c(
    'sdk',
    null,
    "Install google-auth for the task's Python (pip install 'leoflow[google]', or Debian's python3-google-auth).",
  ),
  LF_SDK_GCP_SECRET_PROJECT_MISSING: c(
    'sdk',
    null,
    "Set the project in the connection's extra or pass it explicitly.",
  ),
  // ── internal ──────────────────────────────────────────────────────────────────────────
  LF_INTERNAL: c(
    'internal',
    500,
    'A bug or an outage: see the server log for the request.',
    'internal',
  ),
} as const satisfies Record<string, ErrorCodeSpec>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Codes of one family, for the named error classes. */
export type ErrorCodeOf<F extends ErrorFamily> = {
  [K in ErrorCode]: (typeof ERROR_CATALOGUE)[K]['family'] extends F ? K : never;
}[ErrorCode];

export function isRegisteredErrorCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CATALOGUE, code);
}

export function errorCodeSpec(code: string): ErrorCodeSpec | undefined {
  return isRegisteredErrorCode(code) ? ERROR_CATALOGUE[code] : undefined;
}

/**
 * The REST status of a code: the registry's, or 400 for a code that never travels over HTTP or
 * is not registered (a test keeps the latter from happening).
 */
export function httpStatusOf(code: string): number {
  return errorCodeSpec(code)?.http ?? 400;
}

// Lists the objects of a Cloud Storage bucket through the GCS JSON API, with the credentials
// the task resolves from the gcp_default connection (never a key in the control plane).
//
//   bucket:   params.bucket (LEOFLOW_PARAMS), else $GCS_BUCKET
//   endpoint: $STORAGE_EMULATOR_HOST (tests, emulators), else https://storage.googleapis.com
//
// Needs @leoflow/sdk (and google-auth-library) resolvable from where the script runs.
// Logs go to stderr; the object names are pushed as this task's XCom on the last stdout line.
import { googleAuth, pushXcom, taskContext } from '@leoflow/sdk';

const ctx = taskContext();
const bucket = ctx.params.bucket ?? process.env.GCS_BUCKET;
if (typeof bucket !== 'string' || bucket === '') {
  console.error('no bucket: set params.bucket in leoflow.yaml or GCS_BUCKET');
  process.exit(2);
}
const endpoint = (process.env.STORAGE_EMULATOR_HOST ?? 'https://storage.googleapis.com').replace(/\/+$/, '');

const auth = await googleAuth('gcp_default');
console.error(`project: ${(await auth.getProjectId().catch(() => null)) ?? '(unknown)'}`);

const names = [];
let pageToken;
do {
  const url = new URL(`${endpoint}/storage/v1/b/${encodeURIComponent(bucket)}/o`);
  url.searchParams.set('fields', 'items(name),nextPageToken');
  if (pageToken !== undefined) url.searchParams.set('pageToken', pageToken);
  const res = await auth.request({ url: url.href, method: 'GET' });
  for (const item of res.data.items ?? []) names.push(item.name);
  pageToken = res.data.nextPageToken;
} while (pageToken !== undefined);

console.error(`gs://${bucket}: ${names.length} object(s)`);
for (const n of names) console.error(`  ${n}`);
pushXcom({ bucket, count: names.length, objects: names });

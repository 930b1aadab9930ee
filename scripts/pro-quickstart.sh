#!/usr/bin/env bash
# Leoflow Pro on one machine, in one command: two `leoflow server --role all` replicas on one
# PostgreSQL database, one shared keys directory, one vault key, and one agent URL list that
# names both replicas' agent ports (no load balancer needed: an agent whose replica goes away
# carries on with the next URL of the list). docs/pro.md, "Quick start".
#
#   scripts/pro-quickstart.sh            # start both, print their banners, wait (Ctrl-C stops both)
#   scripts/pro-quickstart.sh --detach   # start both, print the banners, leave them running
#
# Settings (environment):
#   LEOFLOW_QUICKSTART_DATABASE_URL  an existing PostgreSQL database, or a server whose `postgres`
#                                    database lets us create one (default
#                                    postgres://postgres@127.0.0.1:5432/leoflow_quickstart)
#   LEOFLOW_QUICKSTART_DIR           where keys, data dirs and logs go (default ./.leoflow-pro)
#   LEOFLOW_QUICKSTART_PORT          the first replica's HTTP port (default 8080); the replicas use
#                                    PORT, PORT+1 (HTTP), PORT+10, PORT+11 (agent RPC) and
#                                    PORT+20, PORT+21 (Prometheus metrics)
# Needs the build: `npm ci && npm run build` in the clone.
set -euo pipefail
cd "$(dirname "$0")/.."

DB_URL=${LEOFLOW_QUICKSTART_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/leoflow_quickstart}
DIR=${LEOFLOW_QUICKSTART_DIR:-$PWD/.leoflow-pro}
PORT=${LEOFLOW_QUICKSTART_PORT:-8080}
DETACH=0
[ "${1:-}" = "--detach" ] && DETACH=1

CLI=packages/cli/dist/main.js
if [ ! -f "$CLI" ] || [ ! -f packages/agent/dist/main.js ]; then
  echo "pro-quickstart: the build is missing; run: npm ci && npm run build" >&2
  exit 1
fi

mkdir -p "$DIR/keys" "$DIR/a" "$DIR/b" "$DIR/dags"
chmod 700 "$DIR" "$DIR/keys"

# The database: created when it does not exist yet (needs CREATEDB on the server's `postgres`).
node --input-type=module - "$DB_URL" <<'EOF'
import pg from 'pg';
const url = new URL(process.argv[2]);
const name = decodeURIComponent(url.pathname.slice(1));
const admin = new URL(url);
admin.pathname = '/postgres';
const c = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
try {
  await c.connect();
} catch (err) {
  console.error(`pro-quickstart: cannot reach PostgreSQL at ${admin.host} (${err.message}); set LEOFLOW_QUICKSTART_DATABASE_URL`);
  process.exit(1);
}
const { rowCount } = await c.query('select 1 from pg_database where datname = $1', [name]);
if (rowCount === 0) {
  await c.query(`create database "${name.replaceAll('"', '""')}"`);
  console.log(`pro-quickstart: created database ${name}`);
}
await c.end();
EOF

# One vault key for both replicas (Pro never generates one: every replica must open one vault).
if [ ! -s "$DIR/secret.key" ]; then
  (umask 077 && node -e "process.stdout.write(require('node:crypto').randomBytes(32).toString('base64'))" > "$DIR/secret.key")
fi
export LEOFLOW_SECRET_KEY
LEOFLOW_SECRET_KEY=$(cat "$DIR/secret.key")

# A first DAG, so there is something to run.
if [ ! -f "$DIR/dags/hello_pro/leoflow.yaml" ]; then
  mkdir -p "$DIR/dags/hello_pro"
  cat > "$DIR/dags/hello_pro/leoflow.yaml" <<'EOF'
dag_id: hello_pro
tasks:
  - task_id: hello
    command: echo "hello from $(hostname), try ${AIRFLOW_CTX_TRY_NUMBER}"
  - task_id: wait
    depends_on: [hello]
    command: sleep 5
EOF
fi

HTTP_A=$PORT
HTTP_B=$((PORT + 1))
AGENT_A=$((PORT + 10))
AGENT_B=$((PORT + 11))
AGENT_URLS="http://127.0.0.1:$AGENT_A,http://127.0.0.1:$AGENT_B"

pids=()
start() {
  local name=$1 http=$2 agent=$3 metrics=$4
  : > "$DIR/$name.log"
  node "$CLI" server --role all \
    --database-url "$DB_URL" \
    --keys-dir "$DIR/keys" \
    --data-dir "$DIR/$name" \
    --dags-folder "$DIR/dags" \
    --http-port "$http" \
    --agent-port "$agent" \
    --metrics-port "$metrics" \
    --agent-advertise-url "$AGENT_URLS" \
    >> "$DIR/$name.log" 2>&1 &
  pids+=($!)
  echo $! > "$DIR/$name.pid"
}

stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

wait_banner() {
  local name=$1 pid=$2
  for _ in $(seq 1 120); do
    if grep -q 'Leoflow Pro replica (role all) is running.' "$DIR/$name.log"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "pro-quickstart: replica $name exited; its log ($DIR/$name.log):" >&2
      tail -n 30 "$DIR/$name.log" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "pro-quickstart: replica $name did not start within 60 s ($DIR/$name.log)" >&2
  return 1
}

# The first replica migrates the schema and mints the signing keys and the admin token; the
# second adopts them.
start a "$HTTP_A" "$AGENT_A" $((PORT + 20))
wait_banner a "${pids[0]}" || { stop_all; exit 1; }
start b "$HTTP_B" "$AGENT_B" $((PORT + 21))
wait_banner b "${pids[1]}" || { stop_all; exit 1; }

for name in a b; do
  echo "--- replica $name (log: $DIR/$name.log)"
  sed -n '/Leoflow Pro replica/,/^  admin token/p' "$DIR/$name.log"
done
cat <<EOF

Two replicas share PostgreSQL ($DB_URL), the keys in $DIR/keys and one agent URL list
($AGENT_URLS). Try it:

  export LEOFLOW_URL=http://127.0.0.1:$HTTP_A LEOFLOW_TOKEN=\$(cat $DIR/keys/admin.token)
  node $CLI runs trigger hello_pro --wait

and a failover: trigger a run, kill the replica that leads while its \`wait\` task sleeps, and
read the run on the other (the lease's ttl is 15 s; the agent moves to the other URL at once):

  node $CLI runs trigger hello_pro --run-id failover-1 && sleep 3 && kill -9 \$(cat $DIR/a.pid)
  sleep 25; LEOFLOW_URL=http://127.0.0.1:$HTTP_B node $CLI runs show failover-1
EOF

if [ "$DETACH" = 1 ]; then
  echo "Detached: stop them with: kill \$(cat $DIR/a.pid) \$(cat $DIR/b.pid)"
  exit 0
fi
echo "Ctrl-C stops both replicas."
trap 'echo; echo "stopping both replicas (SIGTERM: they drain)"; stop_all; exit 0' INT TERM
wait

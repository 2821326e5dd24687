#!/usr/bin/env bash
# `make host`: one of a school's hosts (issue 84): WORKERS app processes on BIND (this host's address, which the
# school's front HAProxy reaches: deploy/hosts.py writes its config) from FIRST_WORKER_PORT + 1, each warmed before it
# says so. Every host reads the classes from one Redis (MHA_CLASS_STORE=redis://HOST:6379/0, required) and shares one
# STREAMLIT_SERVER_COOKIE_SECRET (a browser's XSRF cookie stays valid on whichever host serves it); each keeps its own
# cache folder (`make prepare` there first) and its own queue of heavy work. Stops everything on Ctrl+C or when any
# process exits.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-$(nproc)}
BIND=${BIND:-127.0.0.1}
FIRST_WORKER_PORT=${FIRST_WORKER_PORT:-8600}
BIN=${BIN:-.venv/bin}
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || { echo "WORKERS must be a positive number, not '$WORKERS'" >&2; exit 2; }
[[ "${MHA_CLASS_STORE:-}" == redis://* || "${MHA_CLASS_STORE:-}" == rediss://* ]] || {
    echo "MHA_CLASS_STORE must name the school's Redis (redis://HOST:6379/0): a class is followed across hosts" >&2
    exit 2; }
[[ -n "${STREAMLIT_SERVER_COOKIE_SECRET:-}" ]] || {
    echo "STREAMLIT_SERVER_COOKIE_SECRET must be the same on every host (e.g. openssl rand -hex 32, once)" >&2; exit 2; }

run_dir=$(mktemp -d)
pids=()
stop() { trap - EXIT INT TERM; kill "${pids[@]}" 2>/dev/null || true; wait || true; rm -rf "$run_dir"; }
trap stop EXIT INT TERM

export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}  # see benchmarks/serving.py: SERVER_ENV
export MHA_QUEUE_DIR=${MHA_QUEUE_DIR:-$run_dir/queue}  # heavy work queued per host (mha_core/serving/heavy.py)
export MHA_HEAVY_SLOTS=${MHA_HEAVY_SLOTS:-$(nproc)}
urls=()
for i in $(seq 1 "$WORKERS"); do
    port=$((FIRST_WORKER_PORT + i))
    MHA_PROXY_BIND=${MHA_PROXY_BIND:-0.0.0.0} "$BIN/streamlit" run app.py --server.port "$port" \
        --server.address "$BIND" --server.headless true &
    pids+=($!)
    urls+=("http://$BIND:$port")
done
"$BIN/python" deploy/warm.py "${urls[@]}" >&2
echo "Host ready: $WORKERS process(es) on $BIND:$((FIRST_WORKER_PORT + 1))-$((FIRST_WORKER_PORT + WORKERS)); the proxy's lines: python deploy/hosts.py $BIND:$((FIRST_WORKER_PORT + 1))-$((FIRST_WORKER_PORT + WORKERS))" >&2
wait -n

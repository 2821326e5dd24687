#!/usr/bin/env bash
# `make serve WORKERS=N`: N app processes on loopback ports behind HAProxy (deploy/haproxy.cfg) on $PORT.
# WORKERS defaults to the number of cores; BIND to 0.0.0.0 (a classroom reaches the teacher's machine).
# Stops everything on Ctrl+C or when any process exits.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-$(nproc)}
PORT=${PORT:-8501}
BIND=${BIND:-0.0.0.0}
FIRST_WORKER_PORT=${FIRST_WORKER_PORT:-$((PORT + 100))}
BIN=${BIN:-.venv/bin}
command -v haproxy >/dev/null || { echo "haproxy is not installed: run 'make serve' (it installs it)" >&2; exit 2; }
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || { echo "WORKERS must be a positive number, not '$WORKERS'" >&2; exit 2; }

run_dir=$(mktemp -d)
pids=()
stop() { trap - EXIT INT TERM; kill "${pids[@]}" 2>/dev/null || true; wait || true; rm -rf "$run_dir"; }
trap stop EXIT INT TERM

export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}  # see benchmarks/serving.py: SERVER_ENV
# One queue for heavy analyses across all processes (mha_core/serving/heavy.py): at most one per core at once.
export MHA_QUEUE_DIR=${MHA_QUEUE_DIR:-$run_dir/queue}
export MHA_HEAVY_SLOTS=${MHA_HEAVY_SLOTS:-$(nproc)}
# One secret for all processes, so a browser's XSRF cookie stays valid on whichever process serves it.
export STREAMLIT_SERVER_COOKIE_SECRET=${STREAMLIT_SERVER_COOKIE_SECRET:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
# The proxy's config: deploy/haproxy.cfg and a server line per process (deploy/hosts.py, as for several hosts).
"$BIN/python" deploy/hosts.py "127.0.0.1:$((FIRST_WORKER_PORT + 1))-$((FIRST_WORKER_PORT + WORKERS))" \
    > "$run_dir/haproxy.cfg"
for i in $(seq 1 "$WORKERS"); do
    port=$((FIRST_WORKER_PORT + i))
    # MHA_PROXY_BIND: where the class's phones reach this process, for the lesson's warning (mha_core/serving/reach.py)
    MHA_PROXY_BIND=$BIND "$BIN/streamlit" run app.py --server.port "$port" --server.address 127.0.0.1 \
        --server.headless true &
    pids+=($!)
done
# Every process loads its model before HAProxy sends it anyone: the first students wait no longer than the rest.
urls=()
for i in $(seq 1 "$WORKERS"); do urls+=("http://127.0.0.1:$((FIRST_WORKER_PORT + i))"); done
"$BIN/python" deploy/warm.py "${urls[@]}" >&2
MHA_BIND=$BIND MHA_PORT=$PORT haproxy -db -f "$run_dir/haproxy.cfg" &
pids+=($!)
echo "Attention explorer: $WORKERS process(es) behind HAProxy on http://$BIND:$PORT" >&2
wait -n

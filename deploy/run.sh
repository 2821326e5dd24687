#!/usr/bin/env bash
# `make run`: one app process on $PORT; it opens itself once (deploy/warm.py) and says when it is ready, so the
# first visitor does not wait for the model to load. Stops on Ctrl+C.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8501}
BIN=${BIN:-.venv/bin}
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}  # see benchmarks/serving.py: SERVER_ENV
"$BIN/streamlit" run app.py --server.port "$PORT" "$@" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait || true' EXIT INT TERM
if "$BIN/python" deploy/warm.py "http://127.0.0.1:$PORT" >&2; then
    echo "Ready: http://localhost:$PORT (the model is loaded)" >&2
else
    echo "The app started, but its first page did not run: see the messages above." >&2
fi
wait "$server"

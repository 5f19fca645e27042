#!/usr/bin/env bash
# Load test of privrec serve on loopback: HDPMF on ML-1M at K=10, two
# vendor processes that each take part as ML-1M's 6,040 users (12,080
# clients in all), with the server pinned to one core and then to both.
# Prints each run's ledger summary (rounds/min, uploads/s) and the top of
# the server's CPU profile. Needs ml-1m under $PRIVREC_DATA.
#
#   PRIVREC_DATA=/path/to/datasets scripts/loadtest.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
port=${PORT:-7191}
out=${OUT:-/tmp/privrec-loadtest}
rm -rf "$out" && mkdir -p "$out"
bin=$out/privrec
go build -o "$bin" ./cmd/privrec
for cores in 0 0,1; do
  tag=cores-${cores/,/+}
  state=$out/$tag
  taskset -c "$cores" "$bin" serve --method hdpmf --epochs "$rounds" --secagg ideal --items ml-1m --dev-tls \
    --state "$state" --listen 127.0.0.1:$port --min-clients 12080 --enroll-quiet 1s --linger 2s \
    --cpuprofile "$out/$tag.prof" 2> "$out/$tag.serve.log" &
  server=$!
  for _ in $(seq 100); do [ -s "$state/tls/cert.pem" ] && break; sleep 0.1; done
  common=(--server https://127.0.0.1:$port --ca "$state/tls/cert.pem" --token-file "$state/enroll-token"
          --simulate all --data ml-1m --split random:0.9 --json)
  "$bin" client "${common[@]}" > "$out/$tag.a.json" &
  a=$!
  "$bin" client "${common[@]}" > "$out/$tag.b.json" &
  b=$!
  wait $a $b $server
  echo "== server on core(s) $cores: 12,080 clients, HDPMF, ML-1M, K=10, $rounds training rounds"
  "$bin" ledger --state "$state" | tail -n 1
done
echo "== where the server's time goes (both cores)"
go tool pprof -top -nodecount=25 "$bin" "$out/cores-0+1.prof" 2>/dev/null | sed -n '1,32p'

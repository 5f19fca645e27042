#!/usr/bin/env bash
# Crash test of privrec serve: an HDPMF run on ML-100K in test mode, the
# server killed with SIGKILL at KILLS random moments (0.05 to 0.5 s apart)
# and restarted on the same state each time. The client's test RMSE must
# equal the uninterrupted in-process run's to the last digit, and the
# ledger must hold every round exactly once. Needs ml-100k under
# $PRIVREC_DATA. SECAGG=masked runs the rounds under SecAgg+ (default:
# ideal, the in-process sum, which serve and client accept over the
# network only with --insecure). Under SecAgg+ a kill between a round's
# masked step and its release skips that round for good (a client never
# sends its masked vector of a round twice), so the RMSE equals the
# uninterrupted run's only when no round was skipped; the kills start once
# the setup round is folded (a lost setup round ends the run).
#
#   PRIVREC_DATA=/path/to/datasets scripts/crashtest.sh [KILLS]
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-100}
epochs=${EPOCHS:-100}
port=${PORT:-7192}
out=${OUT:-/tmp/privrec-crashtest}
rm -rf "$out" && mkdir -p "$out"
bin=$out/privrec
go build -o "$bin" ./cmd/privrec
secagg=${SECAGG:-ideal}
run=(--method hdpmf --epochs "$epochs" --secagg "$secagg")
insecure=()
[ "$secagg" = ideal ] && insecure=(--insecure)
want=$("$bin" evaluate "${run[@]}" --data ml-100k --split random:0.9 --seed 7 --json | grep -m1 '"rmse"')
state=$out/state
serve() {
  "$bin" serve "${run[@]}" "${insecure[@]}" --items ml-100k --seed 7 --dev-tls --state "$state" \
    --listen 127.0.0.1:$port --enroll-quiet 500ms --linger 10s 2>> "$out/serve.log" &
  server=$!
}
serve
for _ in $(seq 100); do [ -s "$state/tls/cert.pem" ] && break; sleep 0.1; done
"$bin" client "${insecure[@]}" --server https://127.0.0.1:$port --ca "$state/tls/cert.pem" --token-file "$state/enroll-token" \
  --simulate all --data ml-100k --split random:0.9 --seed 7 --json > "$out/client.json" &
client=$!
if [ "$secagg" = masked ]; then # kill only after the setup round
  for _ in $(seq 600); do
    curl -sk https://127.0.0.1:$port/healthz | grep -qE 'round ([2-9]|[1-9][0-9]+)' && break
    sleep 0.1
  done
fi
done_kills=0
while [ $done_kills -lt "$kills" ] && kill -0 $client 2>/dev/null; do
  sleep "0.$(( RANDOM % 46 + 5 ))"
  kill -9 $server 2>/dev/null || true
  wait $server 2>/dev/null || true
  done_kills=$((done_kills + 1))
  serve
done
wait $client
kill $server 2>/dev/null || true
wait $server 2>/dev/null || true
got=$(grep -m1 '"rmse"' "$out/client.json")
rounds=$("$bin" ledger --state "$state" --json | grep -c '"round"')
skipped=$("$bin" ledger --state "$state" --json | grep -c '"skipped"' || true)
echo "kills: $done_kills"
echo "in process:  $want"
echo "over the network, killed $done_kills times: $got"
echo "ledger: $rounds rounds (want $((epochs + 2)): setup, $epochs training, final), $skipped skipped"
[ "$rounds" -eq $((epochs + 2)) ] || { echo "crash test failed: rounds"; exit 1; }
if [ "$skipped" -eq 0 ]; then
  [ "$want" = "$got" ] || { echo "crash test failed: RMSE differs with no round skipped"; exit 1; }
fi
echo "crash test passed"

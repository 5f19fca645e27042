#!/usr/bin/env bash
# Continual release over the network (issue 45): dp-als on ML-1M at
# ε = 1 over cohorts of 1,000 of the 6,040 users, each device answering
# at most 2 training rounds at least 6 apart, served masked (SecAgg+,
# honest-but-curious protocol, as the in-process reference) on loopback.
# The server publishes an interim model after every released training
# round (privrec serve --releases); each is then evaluated on the same
# split as the devices' (privrec evaluate --model: every training user
# folded in against it), with the users it covers and the ε spent so
# far, beside the final model, the devices' own report and the
# in-process run of the same configuration and seed.
#
#   PRIVREC_DATA=/path/to/datasets scripts/continual.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PRIVREC_DATA:?set PRIVREC_DATA to the directory holding ml-1m}"
port=${PORT:-7293}
out=${OUT:-/tmp/privrec-continual}
rm -rf "$out" && mkdir -p "$out"
bin=$out/privrec
go build -o "$bin" ./cmd/privrec
method=(--method dp-als --eps 1 --delta 1e-6 --cohort 1000 --rounds-per-user 2 --min-gap 6 --bias-rounds 10 --secagg masked)
split=(--data ml-1m --split random:0.8 --seed 1)
state=$out/state
/usr/bin/time -v "$bin" serve "${method[@]}" --secagg-active=false --insecure --seed 1 --items ml-1m \
  --dev-tls --state "$state" --listen 127.0.0.1:$port --min-clients 6040 --enroll-quiet 2s --min-participants 1 \
  --round-timeout 5m --linger 2s --max-streams 10000 --out "$out/final.model" --releases "$out/releases" 2> "$out/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ -s "$state/tls/cert.pem" ] && break; sleep 0.1; done
start=$(date +%s)
"$bin" client --server https://127.0.0.1:$port --ca "$state/tls/cert.pem" --token-file "$state/enroll-token" \
  --simulate all "${split[@]}" --insecure --json > "$out/client.json" 2> "$out/client.log"
wait $server
echo "== served: $(( $(date +%s) - start )) s; $(grep -E 'Maximum resident|Elapsed' "$out/serve.log" | sed 's/^\s*//' | tr '\n' ';')"
"$bin" ledger --state "$state"
echo "== each release, evaluated on the devices' split (evaluate --model)"
printf '%-20s %6s %8s %8s %10s\n' release users eps rmse recall@10
for f in "$out"/releases/*.model "$out/final.model"; do
  "$bin" evaluate --model "$f" "${split[@]}" --rank 10 --json > "$out/eval.json"
  jq -r --arg f "$(basename "$f")" '[$f, (.privacy.eps_total|tostring), (.rmse|tostring), (.runs[0].recall|tostring)] | @tsv' "$out/eval.json" |
    while IFS=$'\t' read -r name eps rmse recall; do
      users=$("$bin" ledger --state "$state" --json | jq -r --arg r "$(echo "$name" | sed -n 's/round-0*\([0-9]*\)\.model/\1/p')" \
        'if $r == "" then (last|.users) else (.[] | select(.round == ($r|tonumber)) | .users) end')
      printf '%-20s %6s %8.4f %8.4f %10.4f\n' "$name" "$users" "$eps" "$rmse" "$recall"
    done
done
echo "== the devices' report (their own user vectors against the final model)"
jq -r '"rmse \(.rmse)  recall@10 \(.runs[0].recall // "-")  eps \(.privacy.eps_total)"' "$out/client.json"
echo "== in process, the same configuration, split and seed"
"$bin" evaluate "${method[@]}" "${split[@]}" --rank 10 --json > "$out/inprocess.json"
jq -r '"rmse \(.rmse)  recall@10 \(.runs[0].recall)  eps \(.privacy.eps_total)"' "$out/inprocess.json"

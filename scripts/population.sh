#!/usr/bin/env bash
# Load test of a population (issue 45): USERS simulated devices (ML-1M's
# users repeated under new IDs, scripts/population) enrol with privrec
# serve on loopback and train dp-ease at ε = 1 over cohorts of COHORT:
# each statistic is released over USERS/COHORT disjoint cohorts, each
# one a masked round (SecAgg+, distributed Skellam noise), and every
# device answers one round of each. The server and the process that
# simulates the devices run apart, each under /usr/bin/time -v, so their
# CPU and peak RSS are their own. DROPOUT of the devices taken into a
# cohort go offline before sending anything (set MINP, the fraction of a
# cohort a round releases with, below 1 - DROPOUT). It prints the ledger, the two processes' figures
# and the served model's Recall@20 beside the in-process run on the same
# users and split.
#
#   PRIVREC_DATA=/path/to/datasets USERS=100000 COHORT=2000 scripts/population.sh
set -euo pipefail
cd "$(dirname "$0")/.."
users=${USERS:-20000}
cohort=${COHORT:-2000}
dropout=${DROPOUT:-0}
minp=${MINP:-1} # the fraction of a cohort a round releases with (--min-participants)
port=${PORT:-7192}
out=${OUT:-/tmp/privrec-population}
rounds=$(( (users + cohort - 1) / cohort ))
rm -rf "$out" && mkdir -p "$out"
bin=$out/privrec
go build -o "$bin" ./cmd/privrec
go run ./scripts/population -data ml-1m -users "$users" -out "$out/population.csv"
state=$out/state
method=(--method dp-ease --eps 1 --delta 1e-6 --cohort "$cohort" --cohort-rounds "$rounds" --roster "$users")
/usr/bin/time -v "$bin" serve "${method[@]}" --secagg masked --secagg-active=false --insecure --seed 1 \
  --items "$out/population.csv" --dev-tls --state "$state" --listen 127.0.0.1:$port --min-clients "$users" --enroll-quiet 2s --min-participants "$minp" \
  --round-timeout 5m --linger 2s 2> "$out/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ -s "$state/tls/cert.pem" ] && break; sleep 0.1; done
start=$(date +%s)
/usr/bin/time -v "$bin" client --server https://127.0.0.1:$port --ca "$state/tls/cert.pem" --token-file "$state/enroll-token" \
  --simulate all --data "$out/population.csv" --split random:0.9 --seed 1 --insecure --dropout "$dropout" --json \
  > "$out/client.json" 2> "$out/client.log"
wait $server
end=$(date +%s)
echo "== $users devices, cohorts of $cohort ($rounds a statistic), dp-ease at ε = 1, dropout $dropout: $((end - start)) s"
"$bin" ledger --state "$state" | tail -n 5
for p in serve client; do
  echo "== $p: $(grep -E 'Maximum resident|User time|System time|Elapsed' "$out/$p.log" | sed 's/^\s*//' | tr '\n' ';')"
done
echo "== in process, the same users and split"
"$bin" evaluate "${method[@]}" --secagg masked --seed 1 --data "$out/population.csv" --split random:0.9 --json > "$out/inprocess.json"
for f in client inprocess; do
  printf '%-10s recall %s  ndcg %s (evaluate'"'"'s cut-off)\n' "$f" \
    "$(grep -A1 '"recall": {' "$out/$f.json" | grep -o '[0-9.]*' | head -1)" \
    "$(grep -A1 '"ndcg": {' "$out/$f.json" | grep -o '[0-9.]*' | head -1)"
done

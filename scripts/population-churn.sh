#!/usr/bin/env bash
# Load test of a population whose devices come and go (issue 45):
# scripts/population.sh's dp-ease at ε = 1 over cohorts of COHORT, with
# USERS simulated devices (ML-1M's users repeated, scripts/population)
# that follow privrec client --population POP: online by a diurnal curve
# of their time zone, leaving for good (churn), enrolling late, and
# going offline after their encrypted shares (so the server reconstructs
# their pairwise masks). ROUNDS cohorts per statistic (default: half the
# population's worth, which churn and night hours still fill). Each round
# releases with MINP of its cohort; a step waits until TIMEOUT for the
# devices that left.
#
# It prints the ledger, the server's CPU seconds and resident set per
# round (the ledger's), rounds per hour, the bytes per device the
# simulator counted, the two processes' totals (/usr/bin/time -v), the
# unmasking floor of a round on this machine (scripts/unmaskfloor), the
# served model's Recall@20, and — with a privrec that has serve
# --releases and evaluate --model — the accuracy of every interim model
# the run published (after each wave of cohorts).
#
#   PRIVREC_DATA=/path/to/datasets USERS=20000 COHORT=2000 scripts/population-churn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
users=${USERS:-20000}
cohort=${COHORT:-2000}
rounds=${ROUNDS:-$(( users / cohort / 2 ))}
pop=${POP:-diurnal:0.3-0.9,start:17,zones:3,churn:0.01,late:0.2@3,drop-after-shares:0.1}
minp=${MINP:-0.85}
timeout=${TIMEOUT:-20s}
port=${PORT:-7193}
out=${OUT:-/tmp/privrec-population-churn}
rm -rf "$out" && mkdir -p "$out"
bin=$out/privrec
go build -o "$bin" ./cmd/privrec
go run ./scripts/population -data ml-1m -users "$users" -out "$out/population.csv"
state=$out/state
method=(--method dp-ease --eps 1 --delta 1e-6 --cohort "$cohort" --cohort-rounds "$rounds" --roster "$users")
releases=()
if "$bin" serve --help 2>&1 | grep -q -- '--releases'; then
  releases=(--releases "$out/releases")
fi
# The late devices enrol during the run: the first round waits for a
# cohort and a quiet enrolment (the early devices, in chunks of 10,000).
/usr/bin/time -v "$bin" serve "${method[@]}" --secagg masked --secagg-active=false --insecure --seed 1 \
  --items "$out/population.csv" --dev-tls --state "$state" --listen 127.0.0.1:$port --min-clients "$cohort" --enroll-quiet 5s \
  --min-participants "$minp" --round-timeout "$timeout" --linger 2s "${releases[@]}" 2> "$out/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ -s "$state/tls/cert.pem" ] && break; sleep 0.1; done
start=$(date +%s)
/usr/bin/time -v "$bin" client --server https://127.0.0.1:$port --ca "$state/tls/cert.pem" --token-file "$state/enroll-token" \
  --simulate all --data "$out/population.csv" --split random:0.9 --seed 1 --insecure --population "$pop" --json \
  > "$out/client.json" 2> "$out/client.log"
wait $server
end=$(date +%s)
echo "== $users devices ($pop), cohorts of $cohort ($rounds a statistic), dp-ease at ε = 1, floor $minp: $((end - start)) s"
"$bin" ledger --state "$state"
echo "== per round: the server's CPU seconds since the previous fold, its resident set at the fold and its peak so far"
"$bin" ledger --state "$state" --json > "$out/ledger.json"
python3 - "$out/ledger.json" <<'EOF'
import json, sys
from datetime import datetime
led = json.load(open(sys.argv[1]))
def t(e):
    s = e["time"].rstrip("Z")
    if "." in s:
        s, frac = s.split(".")
        s += "." + frac[:6]
    return datetime.fromisoformat(s)
prev = 0.0
print("round  phase  cohort  inputs  released  wall s  cpu s  rss MB  peak MB")
train = []
for e in led:
    cpu = e.get("cpu_seconds", 0) - prev
    prev = e.get("cpu_seconds", 0)
    rel = "no" if e.get("skipped") or e.get("refused") else "yes"
    print(f'{e["round"]:5d}  {e["phase"]:5s}  {e.get("cohort", 0):6d}  {e["uploads"]:6d}  {rel:8s}  {e["seconds"]:6.1f}  {cpu:5.1f}  {e.get("rss_bytes", 0) / 2**20:6.0f}  {e.get("peak_rss_bytes", 0) / 2**20:7.0f}')
    if e["phase"] == "train":
        train.append((e, cpu))
if train:
    released = [x for x in train if not (x[0].get("skipped") or x[0].get("refused"))]
    span = (t(led[-1]) - t(led[0])).total_seconds()
    cpus = sorted(c for _, c in released)
    print(f"training rounds: {len(released)} released of {len(train)}; from the setup's fold to the last: {span:.0f} s, {3600 * len(train) / max(span, 1):.0f} rounds an hour")
    if cpus:
        print(f"server CPU per released training round: median {cpus[len(cpus) // 2]:.1f} s, most {cpus[-1]:.1f} s; peak RSS {max(e.get('peak_rss_bytes', 0) for e in led) / 2**20:.0f} MB")
print(f'ε in total: {led[-1].get("eps_total", 0):.4g} at δ = {led[-1].get("delta", 0):g}')
EOF
grep '^traffic' "$out/client.log" || true
for p in serve client; do
  echo "== $p: $(grep -E 'Maximum resident|User time|System time|Elapsed' "$out/$p.log" | sed 's/^\s*//' | tr '\n' ';')"
done
echo "== the unmasking floor of a round on this machine"
drop=$(sed -n 's/.*drop-after-shares:\([0-9.]*\).*/\1/p' <<< "$pop")
go run ./scripts/unmaskfloor -n "$cohort" -drop "${drop:-0}" -minp "$minp"
printf 'served    recall %s  ndcg %s (evaluate'"'"'s cut-off)\n' \
  "$(grep -A1 '"recall": {' "$out/client.json" | grep -o '[0-9.]*' | head -1)" \
  "$(grep -A1 '"ndcg": {' "$out/client.json" | grep -o '[0-9.]*' | head -1)"
echo "== the accuracy after each wave of cohorts (the run's interim releases)"
if [ ${#releases[@]} -eq 0 ] || ! "$bin" evaluate --help 2>&1 | grep -q -- '--model'; then
  echo "skipped: this privrec has no serve --releases or no evaluate --model (they come with the continual-release change on main)"
  exit 0
fi
"$bin" ledger --state "$state" --json > "$out/ledger.json"
for f in $(ls "$out/releases" | sort -V); do
  "$bin" evaluate --model "$out/releases/$f" --data "$out/population.csv" --split random:0.9 --seed 1 --json > "$out/release-$f.json"
  # The users a release reads are its round's in the ledger (the
  # evaluation's own "users" counts the dataset's).
  r=$(echo "$f" | sed -n 's/^round-0*\([0-9][0-9]*\)\.model$/\1/p')
  printf '%-24s users %s  recall %s  ndcg %s\n' "$f" \
    "$(grep -A12 "\"round\": $r," "$out/ledger.json" | grep -o '"users": *[0-9]*' | head -1 | grep -o '[0-9]*$')" \
    "$(grep -A1 '"recall": {' "$out/release-$f.json" | grep -o '[0-9.]*' | head -1)" \
    "$(grep -A1 '"ndcg": {' "$out/release-$f.json" | grep -o '[0-9.]*' | head -1)"
done

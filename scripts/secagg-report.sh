#!/usr/bin/env bash
# The integer path's cost: HDPMF and PDPMF test RMSE with masked secure
# aggregation (quantized uploads, distributed Skellam noise, Rényi DP) and
# with the ideal functionality (float gamma shares, pure ε), at equal total
# ε, on ML-100K and ML-1M (random 90/10, seed 1), and at ε = 10^4 a round,
# where the noise is negligible and what remains is quantization; then
# LDP-OP (V learned: every position each round, 20 rounds, lr 1, no decay,
# refit 5; random 80/20 as its Fig. 2-3 report) with Laplace shares and
# with Skellam at equal total ε. Needs $PRIVREC_DATA. Prints markdown
# tables; ONLY=ldp-op prints the second alone.
#
#   PRIVREC_DATA=/path/to/datasets scripts/secagg-report.sh > docs/results/secagg/table.md
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-/tmp/privrec-secagg}
go build -o "$bin" ./cmd/privrec
val() { grep -m1 "\"$1\"" | sed 's/.*: //; s/,$//'; }
if [ "${ONLY:-}" != ldp-op ]; then
echo "| data | method | ε a round | ε total | ideal: gamma shares (pure ε) | masked: Skellam (ε, δ = 1e-6) | difference |"
echo "|---|---|---|---|---|---|---|"
for data in ml-100k ml-1m; do
  for m in hdpmf pdpmf; do
    for eps in 1 10000; do
      a=$("$bin" evaluate --data $data --method $m --eps $eps --split random:0.9 --seed 1 --secagg ideal --json | val rmse)
      b=$("$bin" evaluate --data $data --method $m --eps $eps --split random:0.9 --seed 1 --secagg masked --json | val rmse)
      d=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%+.4f", b-a}')
      printf "| %s | %s | %s | %s | %.4f | %.4f | %s |\n" $data $m $eps $((eps * 100)) "$a" "$b" "$d"
    done
  done
done
echo
fi
echo "| data | ε a position | ε total | ideal: Laplace shares (pure ε) | masked: Skellam (ε, δ = 1e-6) | difference |"
echo "|---|---|---|---|---|---|"
learned=(--method ldp-op --epochs 20 --per-round 100000000 --decay 1 --refit 5 --lr 1 --split random:0.8 --seed 1 --json)
for data in ml-100k ml-1m; do
  for eps in 1 0.1; do
    a=$("$bin" evaluate --data $data --eps $eps --secagg ideal "${learned[@]}" | val rmse)
    j=$("$bin" evaluate --data $data --eps $eps --secagg masked "${learned[@]}")
    b=$(val rmse <<<"$j")
    t=$(val eps_total <<<"$j")
    d=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%+.4f", b-a}')
    printf "| %s | %s | %.3g | %.4f | %.4f | %s |\n" $data $eps "$t" "$a" "$b" "$d"
  done
done

#!/usr/bin/env bash
# Plain SGD matrix factorization on all of ML-1M, privrec against LIBMF,
# side by side in one run: rating updates per second of one epoch at
# K = 10, 32, 50 and 128 on all cores. LIBMF is not part of privrec: build
# it yourself from its public source (https://github.com/cjlin1/libmf,
# `make`, or `make DFLAG="-DUSEAVX -DUSEOMP"` for AVX) and pass its
# mf-train. Needs ml-1m under $PRIVREC_DATA.
#
# privrec's seconds per epoch are `privrec bench`'s (the median epoch,
# loading excluded); LIBMF's are (time of -t 21 − time of -t 1) / 20, so
# that its loading cancels.
#
#   PRIVREC_DATA=/path/to/datasets scripts/libmf-compare.sh /path/to/mf-train
set -euo pipefail
cd "$(dirname "$0")/.."
libmf=${1:?usage: scripts/libmf-compare.sh /path/to/libmf/mf-train}
data=$PRIVREC_DATA/ml-1m/ratings_uir_dense.tsv
ratings=$(wc -l < "$data")
threads=$(nproc)
bin=${BIN:-/tmp/privrec-libmf}
go build -o "$bin" ./cmd/privrec
val() { grep -m1 "\"$1\"" | sed 's/.*: //; s/,$//'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
echo "ML-1M, all $ratings ratings, $threads threads; rating updates per second of one epoch"
echo
echo "| K | privrec mf, unbiased | privrec mf, biased | LIBMF | privrec unbiased / LIBMF |"
echo "|---|---|---|---|---|"
for k in 10 32 50 128; do
  pu=$("$bin" bench --data ml-1m --method mf --dim $k --epochs 6 --biased=false --json | val updates_per_second)
  pb=$("$bin" bench --data ml-1m --method mf --dim $k --epochs 6 --biased=true --json | val updates_per_second)
  t1=$(secs "$libmf" -k $k -t 1 -s "$threads" --quiet "$data" /tmp/libmf-model)
  t21=$(secs "$libmf" -k $k -t 21 -s "$threads" --quiet "$data" /tmp/libmf-model)
  lm=$(echo "$ratings * 20 / ($t21 - $t1)" | bc -l)
  printf "| %d | %.3g | %.3g | %.3g | %.2f |\n" $k "$pu" "$pb" "$lm" "$(echo "$pu / $lm" | bc -l)"
done

#!/usr/bin/env bash
# Plain SGD matrix factorization on all of ML-1M, privrec against LIBMF,
# side by side in one run: rating updates per second of one epoch at
# K = 10, 32, 50 and 128 on all cores (THREADS=n: on n). LIBMF is not part of privrec: build
# it yourself from its public source (https://github.com/cjlin1/libmf,
# `make`, or `make DFLAG="-DUSEAVX -DUSEOMP"` for AVX) and pass its
# mf-train. Needs ml-1m under $PRIVREC_DATA.
#
# privrec's seconds per epoch are `privrec bench`'s (the median epoch,
# loading excluded), with the SIMD kernels this CPU has and with the pure
# Go kernels (PRIVREC_SIMD=off); LIBMF's are (time of -t 21 − time of
# -t 1) / 20, so that its loading cancels. LIBMF has no bias terms: the
# biased column is privrec's biased model against the same LIBMF run.
# The runs of the variants are interleaved, $REPEAT times (default 3), so
# that a busy machine slows them alike; privrec's figure is the best of
# its runs, LIBMF's uses the shortest -t 1 and the shortest -t 21 (the
# best of the differences would favour a slow -t 1).
#
#   PRIVREC_DATA=/path/to/datasets scripts/libmf-compare.sh /path/to/mf-train
set -euo pipefail
cd "$(dirname "$0")/.."
libmf=${1:?usage: scripts/libmf-compare.sh /path/to/libmf/mf-train}
data=$PRIVREC_DATA/ml-1m/ratings_uir_dense.tsv
ratings=$(wc -l < "$data")
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-3}
bin=${BIN:-/tmp/privrec-libmf}
model=$(mktemp)
trap 'rm -f "$model"' EXIT
go build -o "$bin" ./cmd/privrec
val() { grep -m1 "\"$1\"" | sed 's/.*: //; s/,$//'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }
least() { printf '%s\n' "$@" | sort -g | head -1; }
bench() { "$bin" bench --data ml-1m --method mf --dim "$1" --epochs 6 --biased="$2" --workers "$threads" --json | val updates_per_second; }
echo "ML-1M, all $ratings ratings, $threads threads, $repeat runs each; rating updates per second of one epoch"
echo
echo "| K | privrec, unbiased | privrec, biased | privrec pure Go, unbiased | LIBMF | privrec unbiased / LIBMF | privrec biased / LIBMF |"
echo "|---|---|---|---|---|---|---|"
for k in 10 32 50 128; do
  pu=() pb=() pg=() l1=() l21=()
  for _ in $(seq "$repeat"); do
    pu+=("$(bench $k false)")
    pb+=("$(bench $k true)")
    pg+=("$(PRIVREC_SIMD=off bench $k false)")
    l1+=("$(secs "$libmf" -k $k -t 1 -s "$threads" --quiet "$data" "$model")")
    l21+=("$(secs "$libmf" -k $k -t 21 -s "$threads" --quiet "$data" "$model")")
  done
  u=$(best "${pu[@]}") b=$(best "${pb[@]}") g=$(best "${pg[@]}")
  l=$(echo "$ratings * 20 / ($(least "${l21[@]}") - $(least "${l1[@]}"))" | bc -l)
  printf "| %d | %.3g | %.3g | %.3g | %.3g | %.2f | %.2f |\n" $k "$u" "$b" "$g" "$l" \
    "$(echo "$u / $l" | bc -l)" "$(echo "$b / $l" | bc -l)"
done

#!/usr/bin/env bash
# Regenerates the table of docs/results/public-features.md: each ranking
# method with and without --public-features items (genres and decades from
# the movie file, re-ranked on the device with the user's own history,
# weight fitted per user on the device), random 90/10 split, seeds 1-3
# (--repeats 3), Recall@20 and NDCG@20 (relevant: the top quarter of the
# scale). One run reports both lists: base_* is the method's own. The noise
# is the seeded test mode (--seeded, --reproducible) so that the figures
# regenerate exactly; its distribution is the private mode's.
#
#   PRIVREC_DATA=/path/to/datasets scripts/public-features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o /tmp/privrec-public ./cmd/privrec
P=/tmp/privrec-public
for ds in ${DATASETS:-ml-1m ml-latest-small}; do
  for m in "dp-pop --eps 0.5 --reproducible" "dp-pop --eps 1 --reproducible" "dp-pop --eps 10 --reproducible" "pop" \
           "dp-ease --eps 0.5 --seeded" "dp-ease --eps 1 --seeded" "dp-ease --eps 10 --seeded" "ease"; do
    # shellcheck disable=SC2086
    $P evaluate --data "$ds" --method $m --split random:0.9 --seed 1 --repeats 3 --rank 20 \
      --public-features items --json 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); s=r["summary"]; f=lambda k: "%.4f ± %.4f" % (s[k]["mean"], s[k]["std"]); print("| %s | %s | %s | %s | %+.1f%% | %s | %s | %+.1f%% |" % (sys.argv[1], sys.argv[2], f("base_recall@20"), f("recall@20"), 100*(s["recall@20"]["mean"]/s["base_recall@20"]["mean"]-1), f("base_ndcg@20"), f("ndcg@20"), 100*(s["ndcg@20"]["mean"]/s["base_ndcg@20"]["mean"]-1)))' "$ds" "$m"
  done
done

# dpease-any-data.jq: the table of docs/results/dpease-any-data.md from the cells of
# scripts/dpease-any-data.sh (jq -r -s -f scripts/dpease-any-data.jq cells.jsonl): one row per
# dataset, ε and method: R@20 ± sd, N@20 ± sd, coverage@20, rare@20, R and N over dp-pop's.
def r4: (. * 10000 | round / 10000 | tostring);
def r2: (. * 100 | round / 100 | tostring);
. as $all
| map(select(.method == "dp-pop")) as $pop
| $all[]
| . as $c
| ($pop[] | select(.dataset == $c.dataset and .eps == $c.eps)) as $p
| "| \(.dataset) | \(.eps) | \(if .method == "dp-ease" then "**dp-ease (after)**" else .method end) | \(.recall|r4) ± \(.recall_sd|r4) | \(.ndcg|r4) ± \(.ndcg_sd|r4) | \(.coverage|r4) | \(.rare|r4) | \(if .method == "dp-pop" then "1" else (.recall/$p.recall|r2) end) | \(if .method == "dp-pop" then "1" else (.ndcg/$p.ndcg|r2) end) |"

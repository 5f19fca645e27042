#!/usr/bin/env bash
# golden.sh — hashes of privrec's outputs, for refactors that must not change
# a bit: every served method trained in process (plain and with --secagg
# masked where it has the integer path), five methods served over loopback
# TLS with simulated clients (test mode, --seed), the quick audit's rows and
# the smoke experiment's cells. Run it on the commit before a refactor and on
# the one after; the two files must be equal:
#
#   scripts/golden.sh > before.txt   # on the old commit
#   scripts/golden.sh > after.txt    # on the new one
#   diff before.txt after.txt
#
# Timings, dates, ports and file paths are stripped before hashing. Floating
# point is the machine's: compare files made on one machine.
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/privrec" ./cmd/privrec || exit 1
p="$tmp/privrec"
# strip: JSON without its timing keys (anything naming seconds, time, rate,
# elapsed, date, commit or version); other text without the lines naming them.
strip() { python3 -c '
import json, re, sys
bad = re.compile(r"second|time|elapsed|duration|rate|date|commit|version|wall|took|/tmp/|127\.0\.0\.1")
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if not bad.search(k)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
text = sys.stdin.read()
try:
    dec = json.JSONDecoder(); i = 0; out = []
    while i < len(text):
        while i < len(text) and text[i].isspace(): i += 1
        if i >= len(text): break
        v, i = dec.raw_decode(text, i); out.append(json.dumps(clean(v), sort_keys=True))
    print("\n".join(out))
except ValueError:
    print("\n".join(l for l in text.splitlines() if not bad.search(l)))
'; }
h() { sha256sum | cut -c1-16; }
data="--data ml-latest-small --split random:0.9 --seed 3"
for m in $("$p" methods --json | python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin) if m.get("serve")))'); do
  ep="--epochs 2"; "$p" evaluate --method "$m" $data $ep --json 2>&1 | grep -q 'unknown flag: --epochs' && ep=""
  out=$("$p" evaluate --method "$m" $data $ep --rank 20 --json 2>&1 | strip | h)
  echo "evaluate $m: $out"
  if "$p" methods --json | python3 -c 'import json,sys; sys.exit(0 if any(m["name"]=="'"$m"'" and "secagg" in json.dumps(m["config"]) for m in json.load(sys.stdin)) else 1)'; then
    out=$("$p" evaluate --method "$m" $data $ep --secagg masked --json 2>&1 | strip | h)
    echo "evaluate $m --secagg masked: $out"
  fi
done
port=7391
for m in hdpmf dp-als dp-ease ldp-op sdmf; do
  port=$((port+1)); st="$tmp/serve-$m"
  ep="--epochs 2"; [ "$m" = dp-als ] || [ "$m" = dp-ease ] && ep=""
  "$p" serve --method "$m" $ep --seed 3 --dev-tls --state "$st" --listen 127.0.0.1:$port \
    --enroll-quiet 500ms --linger 1s --out "$st/model.prm" 2>"$tmp/serve-$m.log" &
  srv=$!
  for _ in $(seq 200); do [ -s "$st/tls/cert.pem" ] && break; sleep 0.1; done
  net=$("$p" client --server https://127.0.0.1:$port --ca "$st/tls/cert.pem" --token-file "$st/enroll-token" \
    --simulate all --data ml-latest-small --seed 3 --json 2>&1 | strip | h)
  wait $srv
  echo "serve $m: client $net model $(h < "$st/model.prm" 2>/dev/null)"
done
echo "audit --all --quick: $("$p" audit --all --quick --out "$tmp/audit.md" >/dev/null 2>&1; grep '|' "$tmp/audit.md" | strip | h)"
"$p" experiment run smoke --quick --out "$tmp/smoke" >/dev/null 2>&1
echo "experiment smoke --quick: $(grep '|' "$tmp/smoke/report.md" | strip | h)"

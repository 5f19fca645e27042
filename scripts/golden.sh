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
# elapsed, date, commit or version); other text with durations, temporary
# paths and ports blanked, and table columns whose header names a time dropped.
strip() { python3 -c '
import json, re, sys
bad = re.compile(r"second|time|elapsed|duration|rate|date|commit|version|wall|took", re.I)
dur = re.compile(r"\b\d+(\.\d+)?\s?(ns|µs|us|ms|s|m|h|min)\b|/tmp/\S*|127\.0\.0\.1:\d+")
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if not bad.search(k)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
def text(t):
    lines, out, drop = t.splitlines(), [], set()
    for i, l in enumerate(lines):
        if l.startswith("|"):
            cells = l.strip().strip("|").split("|")
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt.startswith("|") and set(nxt.replace("|", "").strip()) <= set("-: "):
                drop = {j for j, c in enumerate(cells) if bad.search(c)}
            l = "|".join(c for j, c in enumerate(cells) if j not in drop)
        else:
            drop = set()
        out.append(dur.sub("T", l))
    return "\n".join(out)
t = sys.stdin.read()
try:
    dec = json.JSONDecoder(); i = 0; out = []
    while i < len(t):
        while i < len(t) and t[i].isspace(): i += 1
        if i >= len(t): break
        v, i = dec.raw_decode(t, i); out.append(json.dumps(clean(v), sort_keys=True))
    print("\n".join(out))
except ValueError:
    print(text(t))
'; }
h() { if [ -n "${GOLDEN_KEEP:-}" ]; then mkdir -p "$GOLDEN_KEEP"; tee "$GOLDEN_KEEP/$1"; else cat; fi | sha256sum | cut -c1-16; }
data="--data ml-latest-small --split random:0.9 --seed 3"
for m in $("$p" methods --json | python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin) if m.get("serve")))'); do
  ep="--epochs 2"
  case $("$p" evaluate --method "$m" $data $ep --json 2>&1 >/dev/null) in *"unknown flag: --epochs"*) ep="";; esac
  out=$("$p" evaluate --method "$m" $data $ep --rank 20 --json 2>/dev/null | strip | h "eval-$m")
  echo "evaluate $m: $out"
  if "$p" methods --json | python3 -c 'import json,sys; sys.exit(0 if any(m["name"]=="'"$m"'" and "secagg" in json.dumps(m["config"]) for m in json.load(sys.stdin)) else 1)'; then
    out=$("$p" evaluate --method "$m" $data $ep --secagg masked --json 2>/dev/null | strip | h "eval-$m-masked")
    echo "evaluate $m --secagg masked: $out"
  fi
done
# A free port range per run, so that two runs side by side do not collide.
port=$(( 20000 + ($$ % 2000) * 10 ))
for m in hdpmf dp-als dp-ease ldp-op sdmf; do
  port=$((port+1)); st="$tmp/serve-$m"
  ep="--epochs 2"; [ "$m" = dp-als ] || [ "$m" = dp-ease ] && ep=""
  "$p" serve --method "$m" $ep --seed 3 --dev-tls --state "$st" --secagg-active=false --insecure --listen 127.0.0.1:$port \
    --enroll-quiet 500ms --linger 1s --out "$st/model.prm" 2>"$tmp/serve-$m.log" &
  srv=$!
  for _ in $(seq 200); do [ -s "$st/tls/cert.pem" ] && break; sleep 0.1; done
  net=$(timeout 300 "$p" client --server https://127.0.0.1:$port --ca "$st/tls/cert.pem" --insecure --token-file "$st/enroll-token" \
    --simulate all --data ml-latest-small --seed 3 --json 2>/dev/null | strip | h "serve-$m-client")
  ( sleep 120; kill $srv 2>/dev/null ) & wait $srv
  echo "serve $m: client $net model $(h "serve-$m-model" < "$st/model.prm" 2>/dev/null)"
done
echo "audit --all --quick: $("$p" audit --all --quick --out "$tmp/audit.md" >/dev/null 2>&1; grep '|' "$tmp/audit.md" | strip | h audit)"
"$p" experiment run smoke --quick --out "$tmp/smoke" >/dev/null 2>&1
echo "experiment smoke --quick: $(grep '|' "$tmp/smoke/report.md" | strip | h smoke)"

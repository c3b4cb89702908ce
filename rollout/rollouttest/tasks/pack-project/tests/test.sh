#!/bin/sh
# Unpack the archive somewhere fresh and check what is in it.
ok=1
d=/tmp/pack-check
rm -rf "$d" && mkdir -p "$d"
tar -xf /app/project.tar -C "$d" 2>/dev/null || ok=0
[ "$(cat "$d/project/README" 2>/dev/null)" = "berth project" ] || ok=0
[ -x "$d/project/src/main.sh" ] || ok=0
[ "$(sh "$d/project/src/main.sh" 2>/dev/null)" = hello ] || ok=0
[ -d "$d/project/logs" ] || ok=0
echo "checked $d"
echo $ok > /logs/verifier/reward.txt

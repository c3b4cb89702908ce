#!/bin/sh
# The script must exist, be executable, give 39 on the instruction's data and
# the right sum on rows it never saw.
ok=1
[ -x /app/total.sh ] || ok=0
[ "$(cat /app/total.txt 2>/dev/null)" = 39 ] || ok=0
got=$(printf 'a,100\nb,23\nc,0\nd,-3\n' | /app/total.sh 2>/dev/null)
[ "$got" = 120 ] || ok=0
echo "total.sh on hidden rows: $got"
echo $ok > /logs/verifier/reward.txt

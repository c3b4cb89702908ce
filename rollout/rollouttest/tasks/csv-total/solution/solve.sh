#!/bin/sh
set -e
mkdir -p /app
printf '%s\n' '#!/bin/sh' 'awk -F, '"'"'{ s += $2 } END { print s + 0 }'"'" > /app/total.sh
chmod +x /app/total.sh
printf 'ada,31\ngrace,12\nlinus,-4\n' | /app/total.sh > /app/total.txt
cat /app/total.txt

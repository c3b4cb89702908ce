#!/bin/sh
set -e
mkdir -p /app/project/src /app/project/logs
echo 'berth project' > /app/project/README
printf '#!/bin/sh\necho hello\n' > /app/project/src/main.sh
chmod +x /app/project/src/main.sh
cd /app && tar -cf project.tar project && cd /
tar -tf /app/project.tar

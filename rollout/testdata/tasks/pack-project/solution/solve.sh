#!/bin/sh
set -e
mkdir -p /app/project/src /app/project/logs
echo 'berth project' > /app/project/README
printf '#!/bin/sh\necho hello\n' > /app/project/src/main.sh
chmod +x /app/project/src/main.sh
cd /app && tar -czf project.tar.gz project && cd /
tar -tzf /app/project.tar.gz

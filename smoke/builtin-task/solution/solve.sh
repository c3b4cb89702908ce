#!/bin/sh
set -e
mkdir -p /tmp/berth-smoke
echo berth > /tmp/berth-smoke/answer.txt
echo "wrote /tmp/berth-smoke/answer.txt"

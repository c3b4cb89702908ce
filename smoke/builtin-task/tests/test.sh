#!/bin/sh
if [ "$(cat /tmp/berth-smoke/answer.txt 2>/dev/null)" = "berth" ]; then
	echo "answer is right"
	echo 1 > /logs/verifier/reward.txt
else
	echo "answer is missing or wrong"
	echo 0 > /logs/verifier/reward.txt
fi

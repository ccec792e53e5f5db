#!/bin/bash
# Container health check without curl: GET /v2/health/ready over bash's /dev/tcp; healthy on 200.
# The port is $TIDE_ADMIN_PORT when set (the admin listener), else $TIDE_PORT (default 8000),
# on loopback inside the container.
port=${TIDE_ADMIN_PORT:-0}; [ "$port" = 0 ] && port=${TIDE_PORT:-8000}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 3 status <&3 || exit 1
[[ $status == "HTTP/1.1 200"* ]]

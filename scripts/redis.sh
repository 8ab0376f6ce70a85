# scripts/redis.sh - sourced by test.sh and bench.sh: ensure_redis installs
# redis-server and redis-tools (redis-benchmark, redis-cli) when they are
# missing and this is root on a system with apt-get. The benchmark harness
# and its tests compare counterd with a real redis-server; without one
# their redis rows say why they are missing. A fresh install of the
# package may start Debian's own service on 127.0.0.1:6379; nothing of
# ours uses it: every run starts its own server on a private Unix socket.

ensure_redis() {
	if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
		return 0
	fi
	if [[ ${EUID:-$(id -u)} -ne 0 ]] || ! command -v apt-get >/dev/null; then
		echo "$1: redis-server or redis-benchmark is not installed and this is not root with apt-get; the redis rows will say so" >&2
		return 0
	fi
	echo "$1: installing redis-server and redis-tools for the comparison with Redis" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null; } ||
		echo "$1: could not install redis-server and redis-tools; the redis rows will say why they are missing" >&2
}

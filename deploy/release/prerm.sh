#!/bin/sh
# prerm of counterd's .deb: on removal, stop the units while their
# binaries are still there (counterd drains on SIGTERM: what it
# acknowledged is written to PostgreSQL, or stays in /var/lib/counterd,
# which removal keeps). An upgrade restarts them in postinst instead.
set -e

case "$1" in
remove)
	if [ -d "${DPKG_ROOT:-}/run/systemd/system" ]; then
		systemctl stop counterd.service rollup.service || true
	fi
	;;
esac
exit 0

#!/bin/sh
# postinst of counterd's .deb: create the system user the units run as,
# then tell a running systemd about the units. Nothing is enabled or
# started: counterd needs DATABASE_URL in /etc/counterd/counterd.env first.
# On an upgrade, units already running are restarted on the new binaries
# (counterd drains on SIGTERM first).
set -e

case "$1" in
configure)
	if ! getent passwd counterd >/dev/null; then
		if command -v adduser >/dev/null; then
			adduser --system --group --quiet --home /nonexistent --no-create-home counterd
		else
			useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin counterd
		fi
	fi
	# systemd is running (sd_booted): not in a container or a chroot.
	if [ -d "${DPKG_ROOT:-}/run/systemd/system" ]; then
		systemctl daemon-reload || true
		if [ -n "$2" ]; then
			systemctl try-restart counterd.service rollup.service || true
		fi
	fi
	;;
esac
exit 0

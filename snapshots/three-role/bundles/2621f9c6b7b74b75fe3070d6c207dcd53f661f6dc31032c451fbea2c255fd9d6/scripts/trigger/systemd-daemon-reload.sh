#!/bin/sh
# live only: offline (BELL_OFFLINE=1) this script does nothing, and bell-run does not start it
# trigger systemd-daemon-reload. Rendered by bellc from stdlib/systemd; bell-run runs it once,
# after switching files and before the applies, when a unit file bell manages changed, so that
# the applies start, enable and stop units as the new files describe them.
set -eu
BELL_OFFLINE=${BELL_OFFLINE:-0}
if [ "$BELL_OFFLINE" = 1 ]; then
    # Baking an image: no systemd runs; the next boot reads the unit files.
    exit 0
fi
systemctl daemon-reload || {
    printf 'bell: systemd-daemon-reload: systemctl daemon-reload failed\n' >&2
    exit 1
}

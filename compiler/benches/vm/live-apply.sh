#!/bin/bash
# Guest side of the live-apply benchmark (compiler/benches/fleet.rs, run in a booted Debian 12
# VM by ../shared/vmtest/run-in-vm.sh with the staging directory as cwd): applies bundle/ to
# this host's own root RUNS times (a first apply, a no-op re-apply, then empty/, a bundle of
# the same host with no resources but `users purge-expired`, which reverts everything and removes
# the accounts, for the next round) and prints
# one line per round: `round N first_us F noop_us N offline_first_us F noop_us N`, the last two
# the same bundle applied offline to an image root on this VM's disk, for comparison on the same
# (possibly emulated) machine. Times come from $EPOCHREALTIME, which costs no process.
set -euo pipefail
runs=$1
share=$PWD
work=/var/tmp/bell-bench
rm -rf "$work"
mkdir -p "$work"
# Off the shared folder: a host reads its bundle from its own disk.
cp -rL "$share/bundle" "$work/bundle"
cp -rL "$share/empty" "$work/empty"
install -m 755 "$share/bin/bell-run" /usr/local/sbin/bell-run
# The account files as booted, before any round: the image roots start from these.
mkdir "$work/etc"
cp -p /etc/passwd /etc/group /etc/shadow /etc/gshadow "$work/etc/"

apply() {
    if ! bell-run apply "$@" >"$work/log" 2>&1; then
        echo "bell-run apply $* failed:" >&2
        cat "$work/log" >&2
        exit 1
    fi
}
for ((round = 1; round <= runs; round++)); do
    # Microseconds, without a subshell (which would fork and be counted).
    t0=${EPOCHREALTIME/./}
    apply "$work/bundle"
    t1=${EPOCHREALTIME/./}
    apply "$work/bundle"
    t2=${EPOCHREALTIME/./}
    apply "$work/empty"
    if [ "$round" = "$runs" ]; then
        # Where a live apply's time goes, once more with --timings (not counted above).
        for what in first no-op; do
            apply "$work/bundle" --timings
            sed -n '/^timings:/,$s/^/live '"$what"': /p' "$work/log"
        done
        apply "$work/empty"
    fi

    rm -rf "$work/root"
    mkdir -p "$work/root/etc"
    cp -p "$work"/etc/* "$work/root/etc/"
    t3=${EPOCHREALTIME/./}
    apply "$work/bundle" --root "$work/root"
    t4=${EPOCHREALTIME/./}
    apply "$work/bundle" --root "$work/root"
    t5=${EPOCHREALTIME/./}
    echo "round $round first_us $((10#$t1 - 10#$t0)) noop_us $((10#$t2 - 10#$t1))" \
        "offline_first_us $((10#$t4 - 10#$t3)) noop_us $((10#$t5 - 10#$t4))"
done

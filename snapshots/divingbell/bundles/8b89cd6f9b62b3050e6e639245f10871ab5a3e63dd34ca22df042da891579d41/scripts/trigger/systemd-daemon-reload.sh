#!/bin/sh
# live only: offline (BELL_OFFLINE=1) this script does nothing, and bell-run does not start it
# trigger systemd-daemon-reload. Rendered by bellc from stdlib/systemd; bell-run runs it once,
# after switching files and before the applies, when a unit file bell manages changed, so that
# the applies start, enable and stop units as the new files describe them.
#
# A reload re-reads every unit and takes seconds on a busy host; it is needed only when
# systemd holds a unit from older files. bell-run passes the paths that fired this
# (created=PATH, changed=PATH or removed=PATH; none when it does not know them). When every
# one is a new unit file or drop-in, systemd (246 and later) reads it when the unit is first
# asked for: this asks, and reloads unless each unit is loaded from the new files and does not
# need a reload. Anything else (a changed or removed file, a template, a prefix drop-in, a
# name it cannot read for sure, an older systemd) reloads.
set -eu
BELL_OFFLINE=${BELL_OFFLINE:-0}
if [ "$BELL_OFFLINE" = 1 ]; then
    # Baking an image: no systemd runs; the next boot reads the unit files.
    exit 0
fi
unit_dir=/etc/systemd/system

reload() {
    systemctl daemon-reload || {
        printf 'bell: systemd-daemon-reload: systemctl daemon-reload failed\n' >&2
        exit 1
    }
    exit 0
}

[ "$#" -gt 0 ] || reload
set -f
units=
for arg do
    case $arg in
        created="$unit_dir"/*) file=${arg#created="$unit_dir"/} ;;
        *) reload ;;
    esac
    case $file in
        *[!A-Za-z0-9:_.@/\\-]* | */*/*) reload ;;
        *.d/*.conf) unit=${file%%.d/*} ;;
        */*) reload ;;
        *) unit=$file ;;
    esac
    case $unit in
        *@* | *-.*) reload ;;
        *.service | *.socket | *.mount | *.automount | *.swap | *.target | *.path | *.timer | *.slice) ;;
        *) reload ;;
    esac
    units="$units $unit"
done
# Loads each unit systemd does not hold yet, and prints a block per unit, in order.
# shellcheck disable=SC2086 # names checked above: no blanks, no glob characters
said=$(systemctl show -p LoadState,FragmentPath,DropInPaths,NeedDaemonReload -- $units) || reload

# One block per argument, in order: the file it created must be what systemd loaded.
load='' fragment='' dropins='' need=''
while IFS= read -r line; do
    case $line in
        LoadState=*) load=${line#*=} ;;
        FragmentPath=*) fragment=${line#*=} ;;
        DropInPaths=*) dropins=${line#*=} ;;
        NeedDaemonReload=*) need=${line#*=} ;;
        '')
            [ "$#" -gt 0 ] || reload
            file=${1#created=}
            shift
            if [ "$load" != loaded ] || [ "$need" != no ]; then reload; fi
            case " $dropins " in
                *" $file "*) ;;
                *) [ "$fragment" = "$file" ] || reload ;;
            esac
            load='' fragment='' dropins='' need=''
            ;;
    esac
done <<EOF
$said

EOF
[ "$#" -eq 0 ] || reload

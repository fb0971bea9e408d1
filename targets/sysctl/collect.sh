#!/bin/sh
# collect.sh OUT: writes the sysctl keys of the running kernel to OUT, one per line as
# `PATH<TAB>KIND`, sorted, for bellc's build-time check of sysctl keys and values.
#
# Run as root on a booted host of the target (the Debian 12 list is made in the vmtest VM:
# `targets/sysctl/refresh`). PATH is relative to /proc/sys, with the interface segment of
# per-interface keys (net/ipv4/conf/IFACE/..., neigh, mpls) written `*`. KIND says what the
# key takes: `number` (its value reads as whole numbers, e.g. `1` or `4096 131072 6291456`),
# `text` (anything else, or unreadable until set), `read-only` (no write permission).
# Modules that bring keys of their own are loaded first, so that their keys are known.
set -eu
out=$1
for module in br_netfilter nf_conntrack nf_log_syslog ip_vs sctp dccp_ipv4 md_mod raid456 \
    sunrpc lockd nfs nfsd xfs mpls_router vrf tipc rds; do
    modprobe -q "$module" 2>/dev/null || echo "collect: no module $module" >&2
done
case $out in
    /*) ;;
    *) out=$PWD/$out ;;
esac
tmp=$(mktemp)
cd /proc/sys
# Shell builtins only in the loop: a process per key takes minutes in an emulated VM.
find . -path ./fs/binfmt_misc -prune -o -type f -exec stat -c '%A %n' {} + | while read -r mode key; do
    key=${key#./}
    case $mode in
        # Root may write any file, so the mode says whether the kernel takes writes.
        *w*) ;;
        *) printf '%s\tread-only\n' "$key"; continue ;;
    esac
    value=
    { read -r value < "$key"; } 2>/dev/null || true
    kind=number
    [ -n "$value" ] || kind=text
    for word in $value; do
        word=${word#-}
        case $word in
            '' | *[!0-9]*) kind=text; break ;;
        esac
    done
    printf '%s\t%s\n' "$key" "$kind"
done > "$tmp"
{
    echo "# sysctl keys of $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"'), kernel $(uname -r),"
    echo "# collected by targets/sysctl/collect.sh; PATH<TAB>number|text|read-only"
    # A key of every interface is `*` once; where interfaces disagree the more lenient wins.
    awk -F'\t' '{
        n = split($1, p, "/")
        if ($1 ~ /^net\/(ipv4|ipv6)\/(conf|neigh)\// || $1 ~ /^net\/mpls\/conf\//) { p[4] = "*" }
        key = p[1]; for (i = 2; i <= n; i++) key = key "/" p[i]
        if (!(key in k) || $2 == "text") k[key] = $2
    } END { for (p2 in k) print p2 "\t" k[p2] }' "$tmp" | sort
} > "$out"
rm -f "$tmp"
echo "collect: $(grep -vc '^#' "$out") keys into $out" >&2

#!/bin/bash
# make-local-repo.sh [-D DEPENDS] [-f DEST=SRC]... [-q QUESTION]... REPO_DIR PACKAGE VERSION
#
# Builds a tiny Architecture: all package PACKAGE_VERSION_all.deb into REPO_DIR and rewrites
# REPO_DIR's flat apt index (Packages, Release) over every .deb there, so that calling it
# again adds packages or versions (for upgrade and downgrade tests). Package tests must not
# depend on a network mirror, and a flat repository on the local disk serves them in a second.
# Prints the line for sources.list; use it as
#     echo "$(make-local-repo.sh /srv/repo hello-bell 1.0)" >/etc/apt/sources.list.d/bell-test.list
#     apt-get update -o Dir::Etc::sourcelist=sources.list.d/bell-test.list -o Dir::Etc::sourceparts=- \
#         -o APT::Get::List-Cleanup=0
# (updates only that source, so the ~40 s mirror update under TCG is avoided).
#
# The package always holds /usr/share/PACKAGE/version (content: VERSION). Options:
#   -D DEPENDS     the Depends: field
#   -f DEST=SRC    also ship the file SRC at the absolute path DEST (repeatable)
#   -q QUESTION    a debconf string question PACKAGE/QUESTION (default "unset"); postinst
#                  writes its value to /var/lib/PACKAGE/QUESTION, to check preseeding
# Uses dpkg-scanpackages when dpkg-dev is installed, else writes Packages itself.
set -euo pipefail

usage() { sed -n '2p' "$0" | sed 's/^# /usage: /' >&2; exit 2; }
die() { echo "make-local-repo: $*" >&2; exit 1; }

depends='' files=() questions=()
while getopts D:f:q:h opt; do
    case $opt in
        D) depends=$OPTARG ;;
        f) [[ $OPTARG == /*=* ]] || die "-f wants DEST=SRC with an absolute DEST, got '$OPTARG'"; files+=("$OPTARG") ;;
        q) [[ $OPTARG =~ ^[a-z0-9][a-z0-9_-]*$ ]] || die "bad question name '$OPTARG'"; questions+=("$OPTARG") ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# = 3 ] || usage
repo=$1 pkg=$2 version=$3
[[ $pkg =~ ^[a-z0-9][a-z0-9.+-]+$ ]] || die "bad package name '$pkg'"
[[ $version =~ ^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$ ]] || die "bad version '$version'"
command -v dpkg-deb >/dev/null || die "dpkg-deb missing"

mkdir -p "$repo"
repo=$(realpath "$repo")
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
tree=$build/$pkg
mkdir -p "$tree/DEBIAN" "$tree/usr/share/$pkg"
printf '%s\n' "$version" >"$tree/usr/share/$pkg/version"
for f in "${files[@]}"; do
    dest=${f%%=*} src=${f#*=}
    [ -f "$src" ] || die "-f $f: no file $src"
    mkdir -p "$tree$(dirname "$dest")"
    cp "$src" "$tree$dest"
done
{
    echo "Package: $pkg"
    echo "Version: $version"
    echo "Architecture: all"
    echo "Maintainer: bell tests <root@localhost>"
    if [ -n "$depends" ]; then echo "Depends: $depends"; fi
    echo "Priority: optional"
    echo "Section: misc"
    echo "Description: test package $pkg $version"
    echo " Made by make-local-repo.sh for the bell end-to-end tests."
} >"$tree/DEBIAN/control"
if [ ${#questions[@]} -gt 0 ]; then
    : >"$tree/DEBIAN/templates"
    for q in "${questions[@]}"; do
        printf 'Template: %s/%s\nType: string\nDefault: unset\nDescription: test question %s\n\n' \
            "$pkg" "$q" "$q" >>"$tree/DEBIAN/templates"
    done
    {
        echo '#!/bin/sh'
        echo 'set -e'
        echo '. /usr/share/debconf/confmodule'
        for q in "${questions[@]}"; do echo "db_input low $pkg/$q || true"; done
        echo 'db_go || true'
    } >"$tree/DEBIAN/config"
    {
        echo '#!/bin/sh'
        echo 'set -e'
        echo '. /usr/share/debconf/confmodule'
        echo "mkdir -p /var/lib/$pkg"
        for q in "${questions[@]}"; do
            echo "db_get $pkg/$q"
            printf '%s\n' "printf '%s\\n' \"\$RET\" >/var/lib/$pkg/$q"
        done
    } >"$tree/DEBIAN/postinst"
    chmod 755 "$tree/DEBIAN/config" "$tree/DEBIAN/postinst"
fi
deb=$repo/${pkg}_${version#*:}_all.deb
dpkg-deb --root-owner-group --build "$tree" "$deb" >/dev/null

# The index covers every .deb in the directory, sorted so that it does not depend on readdir.
cd "$repo"
if command -v dpkg-scanpackages >/dev/null; then
    dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages
else
    : >Packages
    while IFS= read -r d; do
        {
            dpkg-deb -f "$d"
            echo "Filename: ./$d"
            echo "Size: $(stat -c %s "$d")"
            echo "MD5sum: $(md5sum "$d" | cut -d' ' -f1)"
            echo "SHA256: $(sha256sum "$d" | cut -d' ' -f1)"
            echo
        } >>Packages
    done < <(find . -maxdepth 1 -name '*.deb' -printf '%f\n' | LC_ALL=C sort)
fi
gzip -9n <Packages >Packages.gz
{
    echo "Date: $(LC_ALL=C date -Ru)"
    echo "SHA256:"
    for f in Packages Packages.gz; do
        echo " $(sha256sum "$f" | cut -d' ' -f1) $(stat -c %s "$f") $f"
    done
} >Release
echo "deb [trusted=yes] file:$repo ./"

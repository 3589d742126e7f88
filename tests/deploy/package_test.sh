#!/bin/sh
# deploy.package: the .deb that cpack builds from this build tree (cmake/package.cmake) holds what
# a GPU host needs, installs into a scratch root, and what it installed runs. Usage:
#   package_test.sh CPACK BUILD_DIR
# Exits 77 (skipped) where the Debian tools are missing (scripts/install-deps.sh installs them).
set -eu
cpack=$1
build=$2
for tool in dpkg dpkg-deb dpkg-shlibdeps man groff; do
    command -v "$tool" >/dev/null || { echo "skipped: no $tool (scripts/install-deps.sh)"; exit 77; }
done
# dpkg wants ldconfig and start-stop-daemon on PATH, and a user's PATH may lack the sbin folders.
PATH=$PATH:/usr/sbin:/sbin
export PATH

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. The package, from the installed tree of this build (programs, libraries, deploy/, man pages).
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
    { cat "$tmp/cpack.log"; fail "cpack"; }
set -- "$tmp"/out/gpusort_*.deb
[ -f "$1" ] || fail "no gpusort_*.deb in $tmp/out"
deb=$1
echo "package: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"

# 2. Control: the name, the dependencies from dpkg-shlibdeps, the maintainer scripts, conffiles.
dpkg-deb --info "$deb" >"$tmp/info"
for field in 'Package: gpusort' 'Maintainer: ' 'Section: ' 'Description: ' 'Depends: .*adduser' \
             'Depends: .*libc6' 'Depends: .*libprotobuf' 'Depends: .*libyaml-cpp'; do
    grep -q "^ $field" "$tmp/info" || { cat "$tmp/info"; fail "control lacks '$field'"; }
done
dpkg-deb --ctrl-tarfile "$deb" | tar -t -C "$tmp" >"$tmp/control.list"
for f in postinst prerm postrm conffiles; do
    grep -qx "\./$f" "$tmp/control.list" || fail "no $f in the control archive"
done
mkdir "$tmp/control"
dpkg-deb --control "$deb" "$tmp/control"
grep -qx /etc/gpusort/gpusort.yaml "$tmp/control/conffiles" || fail "the config is no conffile"
for f in postinst prerm postrm; do
    sh -n "$tmp/control/$f" || fail "$f: syntax"
    [ -x "$tmp/control/$f" ] || fail "$f: not executable"
done

# 3. Contents: at Debian's paths, for prefix /usr.
dpkg-deb --contents "$deb" | awk '{print $6}' >"$tmp/contents"
for f in ./usr/bin/gpusort ./usr/bin/gpusortd \
         ./usr/lib/systemd/system/gpusortd.service ./usr/lib/systemd/system/gpusortd.socket \
         ./usr/lib/tmpfiles.d/gpusort.conf ./etc/gpusort/gpusort.yaml \
         ./usr/share/man/man1/gpusort.1 ./usr/share/man/man8/gpusortd.8 \
         ./usr/share/man/man5/gpusort.yaml.5 ./usr/share/bash-completion/completions/gpusort \
         ./usr/include/gpusort/client.hpp ./usr/lib/cmake/gpusort/gpusortConfig.cmake; do
    grep -qxF "$f" "$tmp/contents" || fail "the package lacks $f"
done
! grep -q '^\./usr/local/\|^\./usr/etc/\|_CPack_Packages' "$tmp/contents" ||
    fail "files outside Debian's paths: $(grep '^\./usr/local/\|^\./usr/etc/\|_CPack' "$tmp/contents")"

# 4. dpkg installs it into a scratch root. The maintainer scripts run outside that root
# (--force-script-chrootless: no chroot, no root needed) with DPKG_ROOT set, and then leave this
# machine's users and services alone. --force-depends: the scratch root has no libc6 package.
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-not-root --force-depends --force-script-chrootless \
     --log=/dev/null -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
dpkg --root="$root" -s gpusort | grep -qx 'Status: install ok installed' || fail "not installed"

# The units name the installed daemon and config, not the README's /usr/local.
unit=$root/usr/lib/systemd/system/gpusortd.service
grep -qx 'ExecStart=/usr/bin/gpusortd --config /etc/gpusort/gpusort.yaml' "$unit" ||
    fail "ExecStart: $(grep ^ExecStart= "$unit")"
! grep -v '^#' "$unit" | grep -q /usr/local || fail "the installed unit names /usr/local"

# 5. What it installed runs: the daemon accepts the installed example config, the client starts.
"$root/usr/bin/gpusortd" --config "$root/etc/gpusort/gpusort.yaml" --check-config >"$tmp/check" ||
    fail "gpusortd --check-config on the installed config"
"$root/usr/bin/gpusort" --version | grep -q '^gpusort [0-9]' || fail "gpusort --version"
for page in man1/gpusort.1 man8/gpusortd.8 man5/gpusort.yaml.5; do
    f=$root/usr/share/man/$page
    warnings=$(MANWIDTH=80 man --warnings -l "$f" 2>&1 >"$tmp/page") || fail "man -l $page"
    [ -z "$warnings" ] || fail "man $page: $warnings"
    grep -q '^NAME' "$tmp/page" || fail "man $page: no NAME"
done

# 6. The completion loads and completes commands, options and values.
bash -c '
    . "$1"
    complete -p gpusort | grep -q -- "-F _gpusort" || exit 1
    c() { want=$1; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _gpusort
          [ "${COMPREPLY[*]}" = "$want" ] || { echo "[$*]: got \"${COMPREPLY[*]}\"" >&2; exit 1; }; }
    c "sort status" gpusort s
    c "--float-order" gpusort sort k.bin --fl
    c "total numpy" gpusort sort k.bin --float-order ""
    c "f32 f64" gpusort gen --dtype f
    c "--prometheus" gpusort status --p
' sh "$root/usr/share/bash-completion/completions/gpusort" || fail "bash completion"

# 7. The postinst outside a scratch root, with every command it runs replaced by a stub that
# logs its arguments: it makes the group and user, enables the socket unit, and succeeds.
mkdir "$tmp/stubs"
for c in getent addgroup adduser deb-systemd-helper deb-systemd-invoke systemctl \
         systemd-tmpfiles; do
    printf '#!/bin/sh\necho "%s $*" >>"%s"\n[ %s != getent ]\n' "$c" "$tmp/calls" "$c" \
        >"$tmp/stubs/$c"
    chmod +x "$tmp/stubs/$c"
done
env -u DPKG_ROOT PATH="$tmp/stubs:$PATH" sh "$tmp/control/postinst" configure ||
    fail "postinst configure"
for call in 'addgroup --system --quiet gpusort' 'adduser --system --ingroup gpusort' \
            'deb-systemd-helper enable gpusortd.socket'; do
    grep -q "^$call" "$tmp/calls" || { cat "$tmp/calls"; fail "postinst did not run: $call"; }
done
echo "ok: $(wc -l <"$tmp/contents") paths, installed and run from $root"

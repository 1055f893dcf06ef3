#!/bin/bash
# mkhostile.sh DIR ESCAPE: a hostile image for tests/it_image_attacks.c, made in DIR with
# umoci from a static busybox: DIR/oci, tag "evil", one layer (plus a tar added as is):
#   /proc /dev /tmp /run /sys /workspace   symlinks into /.sbx-oldroot (the host's tree
#                                          while a sandbox's view is being built)
#   /.sbx-oldroot                          a symlink to /
#   /var                                   a symlink to /.sbx-oldroot$ESCAPE: a writable
#                                          path /var/... climbs out of the image there
#                                          (ESCAPE "-": no /var, no /opt)
#   /opt                                   a relative symlink that climbs with .. into
#                                          /.sbx-oldroot$ESCAPE
#   /bin/busybox.suid                           busybox, setuid root
# and, as a raw tar (pax records that umoci would not write): /capfile with a
# security.capability xattr (cap_sys_admin), /redir a directory with
# trusted.overlay.redirect=/etc and trusted.overlay.opaque, /meta with
# trusted.overlay.metacopy and user.overlay.redirect, /null and /sda device nodes
# (1,3 and 8,0), /fifo.
# With a third argument "relative", /var is the relative symlink and /opt the absolute
# one; with "dangling:PATH", no /var nor /opt but PATH a symlink to
# /.sbx-oldroot$ESCAPE/created, which does not exist. With "bigpw", tag "bigpw" too: tag "evil" and a layer whose
# /etc/passwd and /etc/group are 64 MiB of comment lines before a user "big" (1000:1000)
# and a group "big" (1000).
#
# mkhostile.sh --entries DIR N: DIR/oci, tag "many", two layers of N empty files each
# (plus their directory): what costs inodes and no bytes (tests/it_images.c).
set -euo pipefail
if [ "$1" = --entries ]; then
        cd "$2"
        umoci init --layout oci
        umoci new --image oci:many
        umoci config --image oci:many --os linux --architecture amd64
        for l in a b; do
                umoci unpack --image oci:many u
                mkdir "u/rootfs/$l"
                (cd "u/rootfs/$l" && seq 1 "$3" | xargs touch)
                umoci repack --image oci:many u
                rm -rf u
        done
        umoci gc --layout oci
        chmod -R a+rX "$2"
        exit 0
fi
D=$1
ESCAPE=$2
BIGPW=${3:-}
cd "$D"
umoci init --layout oci
umoci new --image oci:evil
umoci config --image oci:evil --os linux --architecture amd64
umoci unpack --image oci:evil b
R=b/rootfs
mkdir -p $R/bin $R/etc
cp /bin/busybox $R/bin/busybox
ln -s busybox $R/bin/sh
cp /bin/busybox $R/bin/busybox.suid
chmod 4755 $R/bin/busybox.suid
for p in proc dev tmp run sys; do ln -s /.sbx-oldroot/$p $R/$p; done
ln -s /.sbx-oldroot/root $R/workspace
ln -s / $R/.sbx-oldroot
if [ "${BIGPW#dangling:}" != "$BIGPW" ]; then
        mkdir -p "$R$(dirname "${BIGPW#dangling:}")"
        ln -s "/.sbx-oldroot$ESCAPE/created" "$R${BIGPW#dangling:}"
elif [ "$ESCAPE" != - ] && [ "$BIGPW" = relative ]; then
        ln -s "../../../../.sbx-oldroot$ESCAPE" $R/var
        ln -s "/.sbx-oldroot$ESCAPE" $R/opt
elif [ "$ESCAPE" != - ]; then
        ln -s "/.sbx-oldroot$ESCAPE" $R/var
        ln -s "../../../../.sbx-oldroot$ESCAPE" $R/opt
fi
umoci repack --image oci:evil b
rm -rf b
python3 - <<'PY'
import io, tarfile
t = tarfile.open("raw.tar", "w", format=tarfile.PAX_FORMAT)
def add(name, kind, data=b"", pax=None, major=0, minor=0):
    i = tarfile.TarInfo(name)
    i.type, i.mode, i.uid, i.gid = kind, 0o755, 0, 0
    i.devmajor, i.devminor = major, minor
    i.size = len(data) if kind == tarfile.REGTYPE else 0
    if pax:
        i.pax_headers = pax
    t.addfile(i, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
cap = "\x01\x00\x00\x02\x00\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
add("capfile", tarfile.REGTYPE, b"#!/bin/sh\n", {"SCHILY.xattr.security.capability": cap})
add("redir", tarfile.DIRTYPE, pax={"SCHILY.xattr.trusted.overlay.redirect": "/etc",
                                   "SCHILY.xattr.trusted.overlay.opaque": "y"})
add("meta", tarfile.REGTYPE, b"m\n", {"SCHILY.xattr.trusted.overlay.metacopy": "",
                                      "SCHILY.xattr.user.overlay.redirect": "/etc/passwd"})
add("null", tarfile.CHRTYPE, major=1, minor=3)
add("sda", tarfile.BLKTYPE, major=8, minor=0)
add("fifo", tarfile.FIFOTYPE)
t.close()
PY
umoci raw add-layer --image oci:evil raw.tar
rm -f raw.tar
if [ "$BIGPW" = bigpw ]; then
        python3 - <<'PY'
import io, tarfile
t = tarfile.open("pw.tar", "w", format=tarfile.PAX_FORMAT)
for name, last in (("etc/passwd", b"big:x:1000:1000::/:/bin/sh\n"), ("etc/group", b"big:x:1000:\n")):
    data = (b"#" * 63 + b"\n") * (1 << 20) + last
    i = tarfile.TarInfo(name)
    i.size, i.mode = len(data), 0o644
    t.addfile(i, io.BytesIO(data))
t.close()
PY
        umoci tag --image oci:evil bigpw
        umoci raw add-layer --image oci:bigpw pw.tar
        rm -f pw.tar
fi
umoci gc --layout oci
chmod -R a+rX "$D"

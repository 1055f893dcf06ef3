#!/bin/bash
# mkdebian.sh DIR: a real Debian image for the tests and the benchmark: Debian 12
# (bookworm) minbase with python3 and pip, made by mmdebstrap from the Debian archive
# apt reaches, as DIR/oci (an OCI layout, tag "deb", one layer, PATH set), then kept:
# a DIR/oci that is complete is used as it is (the first run takes some 20 s and
# 250 MB). Also DIR/hello.deb (a package made here with dpkg-deb: /usr/bin/sbx-hello)
# DIR/suid.deb (one with a setuid program, as sudo has) and
# DIR/sbxhello-1.0-py3-none-any.whl (a wheel with module sbxhello), for what a sandbox
# installs.
set -euo pipefail
dir=$(realpath -m "$1")
mkdir -p "$dir"
cd "$dir"
if [ ! -s oci/index.json ] || ! grep -q '"deb"' oci/index.json; then
        rm -rf oci root.tar.part
        mmdebstrap --quiet --variant=minbase --include=python3,python3-pip --mode=root \
                --format=tar bookworm root.tar.part
        umoci init --layout oci.part
        umoci new --image oci.part:deb
        umoci raw add-layer --image oci.part:deb root.tar.part
        umoci config --image oci.part:deb --os linux --architecture amd64 --config.workingdir=/ \
                --config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        rm -f root.tar.part
        mv oci.part oci
fi
if [ ! -s hello.deb ]; then
        rm -rf pkg
        mkdir -p pkg/DEBIAN pkg/usr/bin
        printf 'Package: sbx-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: sbxd tests <tests@sbxd.invalid>\nDescription: a package the tests install in a sandbox\n' \
                >pkg/DEBIAN/control
        printf '#!/bin/sh\necho hello from a package\n' >pkg/usr/bin/sbx-hello
        chmod 0755 pkg/usr/bin/sbx-hello
        dpkg-deb --root-owner-group --build pkg hello.deb.part >/dev/null
        mv hello.deb.part hello.deb
        rm -rf pkg
fi
if [ ! -s suid.deb ]; then
        rm -rf pkg
        mkdir -p pkg/DEBIAN pkg/usr/bin
        printf 'Package: sbx-suid\nVersion: 1.0\nArchitecture: all\nMaintainer: sbxd tests <tests@sbxd.invalid>\nDescription: a package with a setuid program, as sudo has\n' \
                >pkg/DEBIAN/control
        printf '#!/bin/sh\necho setuid\n' >pkg/usr/bin/sbx-suid
        chmod 4755 pkg/usr/bin/sbx-suid
        dpkg-deb --root-owner-group --build pkg suid.deb.part >/dev/null
        mv suid.deb.part suid.deb
        rm -rf pkg
fi
if [ ! -s sbxhello-1.0-py3-none-any.whl ]; then
        python3 - <<'PY'
import base64, hashlib, zipfile
files = {
    "sbxhello/__init__.py": b"GREETING = 'hello from a wheel'\n",
    "sbxhello-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sbxhello\nVersion: 1.0\n",
    "sbxhello-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sbxd-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(data)}\n"
record += "sbxhello-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile("sbxhello-1.0-py3-none-any.whl.part", "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("sbxhello-1.0.dist-info/RECORD", record)
PY
        mv sbxhello-1.0-py3-none-any.whl.part sbxhello-1.0-py3-none-any.whl
fi
chmod -R a+rX "$dir"

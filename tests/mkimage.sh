#!/bin/bash
# mkimage.sh DIR: the test images of tests/check_imagestore.c, made in DIR with umoci and
# skopeo (Debian packages) from a static busybox:
#   DIR/oci                 an OCI layout; tag "img" has four layers: busybox and a few
#                           files with a hard link; a whiteout of a directory (umoci's);
#                           an opaque directory (a tar added verbatim); a file
#                           replaced. Tag "arm" is an arm64 image, "multi" an index of
#                           both (hand-made, as registries serve them), "armonly" an index
#                           with the arm64 one alone.
#   DIR/img.oci.tar         `skopeo copy` of oci:img to an oci-archive
#   DIR/img.docker.tar      and to a docker-archive tagged busybox:test
#
# mkimage.sh --lie KIND LAYOUT: rewrites tag "img" of LAYOUT (a copy) so that its
# manifest lies while every digest still holds: KIND "size" says its first layer is one
# byte longer than it is; "diff_id" gives the config another first diff_id; "layers"
# lists 257 layers (the first one again and again); "nest" puts tag "img" behind two
# more indexes; "env" makes the config's Env a string.
set -euo pipefail
if [ "$1" = --lie ]; then
        exec python3 - "$2" "$3" <<'PY'
import hashlib, json, sys
kind, lay = sys.argv[1], sys.argv[2]
def blob(d):
    return open(lay + "/blobs/sha256/" + d.split(":")[1], "rb").read()
def put(body):
    d = hashlib.sha256(body).hexdigest()
    open(lay + "/blobs/sha256/" + d, "wb").write(body)
    return {"digest": "sha256:" + d, "size": len(body)}
idx = json.load(open(lay + "/index.json"))
ent = [m for m in idx["manifests"]
       if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "img"][0]
man = json.loads(blob(ent["digest"]))
if kind == "nest":
    inner = {k: ent[k] for k in ("mediaType", "digest", "size")}
    for level in range(2):
        body = json.dumps({"schemaVersion": 2, "manifests": [inner],
                           "mediaType": "application/vnd.oci.image.index.v1+json"}).encode()
        inner = dict(put(body), mediaType="application/vnd.oci.image.index.v1+json")
    ent.update(inner)
    json.dump(idx, open(lay + "/index.json", "w"))
    sys.exit(0)
if kind == "size":
    man["layers"][0]["size"] += 1
elif kind == "layers":
    man["layers"] = [man["layers"][0]] * 257
else:
    cfg = json.loads(blob(man["config"]["digest"]))
    if kind == "env":
        cfg["config"]["Env"] = "PATH=/bin"
    else:
        cfg["rootfs"]["diff_ids"][0] = "sha256:" + "ab" * 32
    man["config"].update(put(json.dumps(cfg).encode()))
ent.update(put(json.dumps(man).encode()))
json.dump(idx, open(lay + "/index.json", "w"))
PY
fi
D=$1
cd "$D"
umoci init --layout oci
umoci new --image oci:img
umoci config --image oci:img --config.env=GREETING=hi --config.workingdir=/data \
  --config.user=1000:1000 --config.entrypoint=/bin/sh --config.cmd=-c --config.cmd='echo hi' \
  --os linux --architecture amd64

umoci unpack --image oci:img b1
mkdir -p b1/rootfs/bin b1/rootfs/etc b1/rootfs/data/old b1/rootfs/gone/sub
cp /bin/busybox b1/rootfs/bin/busybox
ln -s busybox b1/rootfs/bin/sh
echo hello > b1/rootfs/etc/greeting
ln b1/rootfs/etc/greeting b1/rootfs/etc/greeting.link
echo old > b1/rootfs/data/old/file
echo bye > b1/rootfs/gone/sub/file
chmod 4755 b1/rootfs/bin/busybox
umoci repack --image oci:img b1

umoci unpack --image oci:img b2
rm -rf b2/rootfs/gone
echo changed > b2/rootfs/etc/greeting.new
umoci repack --image oci:img b2

mkdir -p t/data
: > t/data/.wh..wh..opq
echo fresh > t/data/fresh
tar --numeric-owner --owner=0 --group=0 -C t -cf opq.tar data
umoci raw add-layer --image oci:img opq.tar

umoci unpack --image oci:img b3
echo second > b3/rootfs/etc/greeting
umoci repack --image oci:img b3
rm -rf b1 b2 b3 t opq.tar

umoci new --image oci:arm
umoci config --image oci:arm --os linux --architecture arm64

# The indexes, written as registries serve multi-architecture images.
python3 - <<'PY'
import hashlib, json, os
idx = json.load(open("oci/index.json"))
def desc(tag):
    for m in idx["manifests"]:
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return {k: m[k] for k in ("mediaType", "digest", "size")}
def add(tag, entries):
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                       "manifests": entries}).encode()
    d = hashlib.sha256(body).hexdigest()
    open("oci/blobs/sha256/" + d, "wb").write(body)
    idx["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json",
                             "digest": "sha256:" + d, "size": len(body),
                             "annotations": {"org.opencontainers.image.ref.name": tag}})
arm = dict(desc("arm"), platform={"os": "linux", "architecture": "arm64", "variant": "v8"})
amd = dict(desc("img"), platform={"os": "linux", "architecture": "amd64"})
add("multi", [arm, amd])
add("armonly", [arm])
json.dump(idx, open("oci/index.json", "w"))
PY
umoci gc --layout oci

skopeo --insecure-policy copy -q oci:oci:img oci-archive:img.oci.tar
skopeo --insecure-policy copy -q oci:oci:img docker-archive:img.docker.tar:busybox:test

#!/bin/sh
# registry_images.sh OUT: builds the test images of tests/check_registry.c with umoci,
# as one OCI image layout OUT/layout, from small trees made here:
#   single        three layers (a file, a directory, a second file)
#   big           one layer of 4 MiB of random bytes (a transfer long enough to cancel)
#   amd64, arm64, s390x   one layer each, their config naming that architecture
#   multi         an OCI index of arm64 and amd64 (the test pushes it with skopeo --all)
#   foreign       an OCI index of arm64 and s390x only
# and OUT/NAME.digest, the manifest digest of each tag.
set -eu
out=$1
l=$out/layout
mkdir -p "$out/src"
umoci init --layout "$l"

img() { # img TAG FILE...: a new image with one layer per file, at /FILE
        tag=$1; shift
        umoci new --image "$l:$tag"
        for f in "$@"; do
                umoci insert --image "$l:$tag" "$out/src/$f" "/$f"
        done
}

echo one > "$out/src/one"
mkdir -p "$out/src/etc-dir" && echo conf > "$out/src/etc-dir/conf"
echo two > "$out/src/two"
img single one etc-dir two
head -c 4194304 /dev/urandom > "$out/src/big"
img big big
for a in amd64 arm64 s390x; do
        echo "$a" > "$out/src/arch-$a"
        umoci new --image "$l:tmp-$a"
        umoci insert --image "$l:tmp-$a" "$out/src/arch-$a" /arch
        umoci config --image "$l:tmp-$a" --tag "$a" --architecture "$a" --os linux
        umoci rm --image "$l:tmp-$a"
done

# The manifest digests, and the two indexes, written into the layout by hand.
python3 - "$l" "$out" <<'EOF'
import hashlib, json, os, sys
layout, out = sys.argv[1], sys.argv[2]
with open(os.path.join(layout, "index.json")) as f:
    index = json.load(f)
by_tag = {m["annotations"]["org.opencontainers.image.ref.name"]: m for m in index["manifests"]}
for tag, m in by_tag.items():
    with open(os.path.join(out, tag + ".digest"), "w") as f:
        f.write(m["digest"])

def add_index(tag, archs):
    entries = []
    for a in archs:
        d = dict(by_tag[a])
        d.pop("annotations", None)
        d["platform"] = {"architecture": a, "os": "linux"}
        entries.append(d)
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                       "manifests": entries}).encode()
    hexd = hashlib.sha256(body).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", hexd), "wb") as f:
        f.write(body)
    index["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json",
                               "digest": "sha256:" + hexd, "size": len(body),
                               "annotations": {"org.opencontainers.image.ref.name": tag}})
    with open(os.path.join(out, tag + ".digest"), "w") as f:
        f.write("sha256:" + hexd)

add_index("multi", ["arm64", "amd64"])
add_index("foreign", ["arm64", "s390x"])
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump(index, f)
EOF

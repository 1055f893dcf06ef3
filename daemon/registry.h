/* registry.h: the registry client: pulls one image (a manifest, its config and its
 * layers) from a registry that speaks the HTTP API v2 of the Distribution project (the
 * OCI distribution specification: Docker Hub, quay.io, ghcr.io, docker-registry) into an
 * OCI image layout directory the caller gives, which the image store then imports.
 *
 * HTTP is libcurl's (Debian's libcurl4-openssl-dev): well kept and fuzzed, HTTP/1.1 and
 * HTTP/2, TLS with the system's certificate authorities, the proxies of the environment
 * (https_proxy, no_proxy); JSON is jansson's (already the sbx tool's). Each pull uses one
 * curl handle of its own and runs wholly on the thread that calls registry_pull (the
 * daemon runs it on its thread pool): no event loop, no state shared between pulls, no
 * global beyond curl_global_init, done once.
 *
 * What a pull guarantees:
 * - Transport: HTTPS, with the peer verified, except for a loopback registry
 *   (imageref_loopback: localhost, 127.0.0.0/8, ::1), reached over plain HTTP as Docker
 *   reaches it, never through a proxy. Redirects (registries send blobs to their storage)
 *   are followed, at most REGISTRY_MAX_REDIRECTS, only to https (or plain http on a
 *   loopback host), and the Authorization header is dropped as soon as one leaves the
 *   scheme, host and port it was made for.
 * - Authentication: anonymous first; on a 401, the challenge of WWW-Authenticate is
 *   answered: "Bearer realm=,service=,scope=" by getting a token from the realm (with the
 *   caller's user name and password as Basic credentials when given, anonymously
 *   otherwise), "Basic" with the caller's credentials. A bearer token the caller gives is
 *   sent from the first request on (a registry that refuses it is answered as above). Credentials live in the caller's
 *   memory for the pull only; nothing is written to disk.
 * - Content: the manifest is asked for with the Accept list of the OCI and Docker
 *   schema 2 manifests and indexes (manifest lists); a schema 1 manifest is refused. An
 *   index selects linux/ARCH[/VARIANT] of this machine (or the caller's). The manifest is
 *   at most REGISTRY_MANIFEST_MAX_BYTES and REGISTRY_MAX_LAYERS layers, its digest is the
 *   one asked for (or the one the registry names in Docker-Content-Digest), and the
 *   declared sizes of the manifest, config and layers together are at most the caller's
 *   max_total_bytes before a byte of a blob is fetched. Every blob is streamed to a file
 *   of the destination through SHA-256 (digest.h), refused as soon as the registry sends
 *   more bytes than its descriptor says, and given its name blobs/sha256/HEX only once
 *   its size and digest are those of its descriptor: a blob under its digest's name is
 *   always that blob; a failed, cancelled or killed pull leaves no file under any name
 *   (the partial blob is an O_TMPFILE, or a temporary name removed on failure where the
 *   file system has no O_TMPFILE).
 * - Reuse: a blob already in the destination, or in the caller's reuse_blobs directory,
 *   whose size and digest match is not downloaded again (the digest is checked again).
 *   A layer the caller's have_layer says it holds already (unpacked, say) is neither
 *   downloaded nor written to the destination: the layout then lacks that blob, which
 *   its reader must expect. The manifest and the config are always fetched and checked.
 * - Result: DEST/oci-layout, DEST/blobs/sha256/HEX for the manifest, config and layers,
 *   and DEST/index.json naming the manifest, annotated org.opencontainers.image.ref.name
 *   = the reference's tag (none when it was pulled by digest alone); index.json keeps the
 *   other images already in it (the entry of the same tag is replaced) and is replaced
 *   atomically under flock(2) of DEST. Manifests are kept byte for byte (their digest is
 *   their name, the one the registry and users know), so a Docker schema 2 image stays
 *   one: index.json then names it with Docker's media type, and its layers are Docker's
 *   (gzip tars, as OCI's) with a config of the same schema. The importer must accept
 *   those (umoci and skopeo read only the OCI-typed entries of a layout). */
#ifndef SBX_REGISTRY_H
#define SBX_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "imageref.h"

#define REGISTRY_MANIFEST_MAX_BYTES  (4u << 20) /* a manifest or an index */
#define REGISTRY_MAX_LAYERS          128        /* Docker stops at 127 on overlayfs */
#define REGISTRY_MAX_REDIRECTS       5
#define REGISTRY_TOKEN_MAX_BYTES     (64u << 10)  /* the token endpoint's answer */
#define REGISTRY_CONNECT_TIMEOUT_MS  30000        /* when the caller gives 0 */
#define REGISTRY_STALL_TIMEOUT_MS    60000        /* no byte for this long: given up */
#define REGISTRY_PROGRESS_STEP_BYTES (256u << 10) /* progress reported at least this often */

/* What the progress callback is told about one layer. */
struct registry_progress {
        const char *digest;   /* the layer's */
        unsigned index;       /* 0 .. count - 1, in the manifest's order */
        unsigned count;       /* layers of the image */
        uint64_t done_bytes;  /* so far */
        uint64_t total_bytes; /* its descriptor's size */
        int reused;           /* 1: found locally, not downloaded */
};

typedef void (*registry_progress_fn)(void *opaque, const struct registry_progress *p);

/* One pull's request; the caller owns every pointer, for the duration of the call. */
struct registry_pull {
        const struct imageref *ref;
        const char *dest_dir;    /* an existing directory: the OCI layout written there */
        const char *reuse_blobs; /* NULL, or a directory of blobs as DIR/sha256/HEX */
        const char *username;    /* NULL: anonymous */
        const char *password;
        const char *token;       /* NULL, or a bearer token sent as it is (not with username) */
        uint64_t max_total_bytes;      /* manifest + config + layers; 0 is refused */
        unsigned connect_timeout_ms;   /* 0: REGISTRY_CONNECT_TIMEOUT_MS */
        unsigned stall_timeout_ms;     /* 0: REGISTRY_STALL_TIMEOUT_MS (whole seconds, up) */
        const char *arch;              /* NULL: this machine's (GOARCH names: amd64, arm64) */
        const char *variant;           /* NULL: this machine's (arm: v7, ...) */
        const volatile int *cancel;    /* NULL, or non-zero to stop (polled during transfers) */
        registry_progress_fn progress; /* NULL, or called on this thread */
        void *progress_opaque;
        /* NULL, or asked on this thread before each layer's download, with the layer's
         * blob digest: 1 the caller has it (skipped, reported reused), 0 it has not,
         * -errno to end the pull with that error. */
        int (*have_layer)(void *opaque, const char *digest);
        void *have_layer_opaque;
};

struct registry_result {
        char manifest_digest[DIGEST_STR_BYTES]; /* of the platform's manifest */
        char config_digest[DIGEST_STR_BYTES];
        char media_type[128]; /* of that manifest */
        uint64_t manifest_bytes;
        uint64_t downloaded_bytes; /* blob bytes fetched by this pull */
        uint64_t reused_bytes;     /* blob bytes found locally */
        unsigned layers;
};

/* Pulls p->ref into p->dest_dir; see the guarantees above. May be called on any thread,
 * any number at once (each with its own request). 0 with *ret filled (may be NULL), or
 * one of these, with a sentence in err naming the reference, blob or host:
 *   -ENOENT          not found: the manifest (naming the reference) or a blob
 *   -EACCES          unauthorized: credentials needed, refused, or a token refused
 *   -EHOSTUNREACH    unreachable: the reason (connection refused, DNS, TLS, ...)
 *   -ETIMEDOUT       the connection or a transfer stalled past its timeout
 *   -EBADMSG         bad content: a digest or size that differs (naming the blob), JSON
 *                    that is no manifest, a redirect refused, a nested index
 *   -EFBIG           too large: the manifest, the layer count, or the image against
 *                    max_total_bytes
 *   -ENOEXEC         no image for this platform (naming the platforms the index has)
 *   -EPROTONOSUPPORT a schema 1 manifest, or an artifact that is no container image
 *   -EPROTO          another answer of the registry (its HTTP status and message)
 *   -ECANCELED       *p->cancel became non-zero
 *   -EINVAL          a bad request (no reference, no destination, max_total_bytes 0)
 *   other -errno     the destination's file system (ENOSPC, EACCES, ...) or -ENOMEM */
int registry_pull(const struct registry_pull *p, struct registry_result *ret, char *err,
                  size_t errlen);

/* This machine's platform in an OCI index's terms: "amd64", "arm64", "arm" with "v7",
 * ... (variant "" when it has none). Pure. */
void registry_machine_platform(const char **ret_arch, const char **ret_variant);

#endif

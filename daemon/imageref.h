/* imageref.h: container image references ("python:3.12-slim", "host:5000/team/app:v1",
 * "name@sha256:...") parsed and normalised as Docker and podman do (the grammar of the
 * Distribution project's reference package).
 *
 * A reference is [HOST[:PORT]/]PATH[:TAG][@DIGEST]. Its first '/'-separated component is
 * the registry host when it contains a '.' or a ':', is "localhost", or has an uppercase
 * letter; otherwise the registry is Docker Hub ("docker.io", whose API is served by
 * registry-1.docker.io), and a single-component path there gains "library/". PATH is one
 * or more lowercase components of [a-z0-9] runs joined by '.', '_', "__" or dashes; the
 * whole name (registry and path) is at most 255 bytes, a tag [A-Za-z0-9_][A-Za-z0-9_.-]*
 * of at most 128 bytes, the digest "sha256:" and 64 lowercase hex digits (digest.h; no
 * other algorithm). Without a tag or a digest the tag is "latest"; with both, the digest
 * decides what is pulled and the tag is kept as the name. Pure functions, any thread. */
#ifndef SBX_IMAGEREF_H
#define SBX_IMAGEREF_H

#include <stddef.h>

#include "digest.h"

#define IMAGEREF_NAME_MAX         255 /* registry + '/' + path, as Docker bounds it */
#define IMAGEREF_TAG_MAX          128
#define IMAGEREF_DEFAULT_REGISTRY "docker.io"
#define IMAGEREF_DOCKER_HUB_API   "registry-1.docker.io"

struct imageref {
        char registry[IMAGEREF_NAME_MAX + 1];   /* "docker.io", "localhost:5000", "[::1]:5000" */
        char api_host[IMAGEREF_NAME_MAX + 1];   /* host[:port] the API is reached at */
        char repository[IMAGEREF_NAME_MAX + 1]; /* "library/python" */
        char tag[IMAGEREF_TAG_MAX + 1];         /* "" only when a digest is given alone */
        char digest[DIGEST_STR_BYTES];          /* "" or "sha256:<hex>" */
};

/* Parses s into *ret (written only on success). 0, or -EINVAL with a sentence in err
 * saying what is wrong ("repository name must be lowercase", "tag longer than 128
 * bytes", ...). */
int imageref_parse(const char *s, struct imageref *ret, char *err, size_t errlen);

/* Writes the normalised reference: REGISTRY/REPOSITORY[:TAG][@DIGEST]. The number of
 * bytes it needs (as snprintf), so a result >= len means it was cut. */
int imageref_format(const struct imageref *r, char *buf, size_t len);

/* 1 when the registry's host is a loopback one (localhost, 127.0.0.0/8, ::1): the only
 * registries reached over plain HTTP, as Docker treats them. */
int imageref_loopback(const struct imageref *r);

/* The same for a bare host name or address ("localhost", "127.0.0.2", "::1", "[::1]"),
 * as a URL's host part is written. */
int imageref_host_loopback(const char *host);

#endif

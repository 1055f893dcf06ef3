/* egress.c: NETWORK_ALLOWLIST's filtering proxy of one sandbox (egress.h), on the
 * daemon's loop: accepts on the listener the sandbox's init handed over, reads one
 * bounded request head, judges it (egressrule.h), resolves names itself, connects to the
 * address it checked and relays bytes both ways with backpressure (relay.h). Records every
 * connection (store.h). Owns its listener, its connections and their handles; the
 * sandbox owns it (egress_start, egress_close).
 *
 * Why plain HTTP is relayed after the first request line: the proxy rewrites only the
 * first request's line (absolute form to origin form) and then relays bytes. A client
 * that keeps the connection alive and names another host in a later request still
 * reaches only the server the proxy connected to, at the address it checked: the rule
 * is enforced per connection, not per request, and nothing leaves for another place. */
#include "egress.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "egressrule.h"
#include "egressshare.h"
#include "hostsfile.h"
#include "log.h"
#include "relay.h"
#include "socks5.h"
#include "sbx_limits.h"
#include "sbxd.h"
#include "store.h"

/* Connections a sandbox's proxy takes per second, and at most in a burst: past them it
 * takes the next one only when the rate allows (the sandbox's connect waits in the
 * listening socket's backlog meanwhile; nothing is refused). Every connection is a
 * record on the daemon's disk, shared by every user: a sandbox that connects in a loop
 * must not grow the records faster than this. */
/* How often the records of open connections get their bytes so far: what a daemon
 * killed without a chance to finish them leaves on record. */
#define PROGRESS_MS 10000u
#define ACCEPTS_PER_SECOND 100u
#define ACCEPT_BURST       200u
#define REASON_BYTES        400u
#define METHOD_MAX_BYTES    16u

enum phase { PH_HEAD, PH_RESOLVE, PH_CONNECT, PH_RELAY, PH_ANSWER };

struct econn {
        struct egress *eg;
        struct econn *next, *prev;
        uv_tcp_t client, upstream;
        uv_timer_t timer;
        uv_getaddrinfo_t gai;
        uv_connect_t creq;
        struct relay *relay; /* once connected: the bytes both ways (relay.h) */
        int handles;         /* open handles and requests in flight: freed at 0 */
        int upstream_open, gai_active, closing;
        struct egressshare_lookup lookup; /* its turn on libuv's threads (egressshare.h) */
        uid_t uid;                        /* whose descriptors it holds (the owner's) */
        int fds_held;                     /* counted in the owner's descriptor budget */
        enum phase phase;
        char head[EGRESS_HEAD_MAX_BYTES];
        size_t head_len, head_end;
        char method[METHOD_MAX_BYTES], host[EGRESS_NAME_MAX_BYTES + 3], addr[64];
        unsigned port;
        int is_connect;
        int socks;         /* a SOCKS5 client (its first byte was 5) */
        int socks_stage;   /* 0: greeting, 1: request, 2: parsed */
        uint8_t socks_rep; /* the reply code of a refused request, or 0 */
        char *out;         /* the rewritten head of a plain HTTP request */
        size_t out_len;
        struct sockaddr_storage dest;
        uint64_t seq;
        int recorded; /* inserted open: finished at close */
        uint64_t rec_sent, rec_received; /* the bytes its open record says */
        int allowed;
        int64_t started_ms;
        uint64_t sent, received;
        uint64_t sent_head; /* of sent, the request head's bytes the proxy wrote upstream */
        char reason[REASON_BYTES]; /* why it was refused or failed, for its record */
};

struct egress {
        struct sbxd *d;
        char id[SBX_ID_MAX_BYTES + 1];
        char **hosts, **cidrs;
        size_t n_hosts, n_cidrs;
        uv_tcp_t listener;
        int listener_open;
        int closing;
        struct econn *conns;
        unsigned n_open;
        unsigned n_mem;            /* connections not yet freed */
        struct egressshare *share; /* the budgets all proxies share (a reference) */
        uid_t owner;               /* the sandbox's: whose budgets its connections use */
        uint64_t next_seq;
        /* Connections refused over the owner's descriptor budget since the proxy last
         * took one: recorded once (over_seq), with their count, not once each. */
        unsigned over_count, over_counted; /* refused; of them, what the record says */
        uint64_t over_seq;
        int64_t over_first_ms, over_last_ms;
        char over_why[REASON_BYTES];
        uv_timer_t pace;      /* takes a connection left waiting for the rate */
        uv_timer_t progress;  /* PROGRESS_MS: open records get their bytes */
        int timers_open;      /* pace and progress, until their close callbacks */
        double tokens;        /* connections it may take now (ACCEPTS_PER_SECOND) */
        uint64_t tokens_ms;   /* uv_now when tokens was counted */
};

/* A write of the proxy's own to the client (a SOCKS5 greeting's reply, an answer). */
struct wreq {
        uv_write_t req;
        struct econn *c;
        char *base;
};

static void conn_close(struct econn *c, const char *reason);
static void on_head_timeout(uv_timer_t *t);

/* ---- the rules ---------------------------------------------------------------------- */

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

static char **strv_copy(char *const *v, size_t n) {
        char **out = calloc(n + 1, sizeof(*out));

        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(v[i]))) {
                        strv_free(out, n);
                        return NULL;
                }
        return out;
}

int egress_set_policy(struct egress *eg, const char *id, uid_t owner, const Sbx__V1__Policy *pol) {
        char **h = strv_copy(pol ? pol->allowed_hosts : NULL, pol ? pol->n_allowed_hosts : 0);
        char **cd = strv_copy(pol ? pol->allowed_cidrs : NULL, pol ? pol->n_allowed_cidrs : 0);

        if (!h || !cd) {
                strv_free(h, pol ? pol->n_allowed_hosts : 0);
                strv_free(cd, pol ? pol->n_allowed_cidrs : 0);
                return -ENOMEM;
        }
        strv_free(eg->hosts, eg->n_hosts);
        strv_free(eg->cidrs, eg->n_cidrs);
        eg->hosts = h;
        eg->n_hosts = pol ? pol->n_allowed_hosts : 0;
        eg->cidrs = cd;
        eg->n_cidrs = pol ? pol->n_allowed_cidrs : 0;
        snprintf(eg->id, sizeof(eg->id), "%s", id);
        eg->owner = owner;
        return 0;
}

/* ---- records ------------------------------------------------------------------------ */

static void record_fill(const struct econn *c, struct store_connection *r, const char *reason) {
        memset(r, 0, sizeof(*r));
        r->sandbox_id = c->eg->id;
        r->seq = c->seq;
        r->started_ms = c->started_ms;
        r->host = c->host[0] ? c->host : NULL;
        r->port = c->port;
        r->address = c->addr[0] ? c->addr : NULL;
        r->allowed = c->allowed;
        r->reason = reason;
        r->method = c->method[0] ? c->method : NULL;
        r->bytes_sent = c->sent;
        r->bytes_received = c->received;
}

/* Records c as open (an allowed connection that is relaying). */
static void record_open(struct econn *c) {
        struct store_connection r;

        record_fill(c, &r, NULL);
        if (store_connection_insert(c->eg->d->store, &r) == 0)
                c->recorded = 1;
        else
                log_warning("sbx=%s: recording connection %llu: %s", c->eg->id,
                            (unsigned long long)c->seq, store_last_error(c->eg->d->store));
}

/* Records c's end: finishes its open record, or writes the whole record now. */
static void record_end(struct econn *c, const char *reason) {
        struct store_connection r;
        int rc;

        record_fill(c, &r, reason);
        r.ended_ms = sbxd_now_unix_ms();
        rc = c->recorded ? store_connection_finish(c->eg->d->store, &r)
                         : store_connection_insert(c->eg->d->store, &r);
        if (rc < 0)
                log_warning("sbx=%s: recording connection %llu: %s", c->eg->id,
                            (unsigned long long)c->seq, store_last_error(c->eg->d->store));
}

/* ---- memory and closing ------------------------------------------------------------- */

static void egress_free(struct egress *eg) {
        strv_free(eg->hosts, eg->n_hosts);
        strv_free(eg->cidrs, eg->n_cidrs);
        if (eg->share)
                egressshare_unref(eg->d);
        free(eg);
}

static void egress_maybe_free(struct egress *eg) {
        if (eg->closing && !eg->listener_open && eg->timers_open == 0 && eg->n_mem == 0)
                egress_free(eg);
}

/* One of c's handles or requests is done; c goes with the last. */
static void conn_unref(struct econn *c) {
        struct egress *eg = c->eg;

        if (--c->handles > 0)
                return;
        free(c->out);
        free(c);
        eg->n_mem--;
        egress_maybe_free(eg);
}

static void on_handle_closed(uv_handle_t *h) {
        conn_unref(h->data);
}

/* Ends c: its record, its handles (the memory goes after their close callbacks). */
static void conn_close(struct econn *c, const char *reason) {
        struct egress *eg = c->eg;

        if (c->closing)
                return;
        c->closing = 1;
        record_end(c, reason ? reason : c->reason[0] ? c->reason : NULL);
        if (c->prev)
                c->prev->next = c->next;
        else
                eg->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        eg->n_open--;
        /* Its descriptors close now (uv_close closes them at once). */
        if (c->fds_held)
                egressshare_drop_fds(eg->share, c->uid);
        c->fds_held = 0;
        egressshare_lookup_cancel(eg->share, &c->lookup);
        if (c->gai_active)
                uv_cancel((uv_req_t *)&c->gai);
        c->relay = relay_free(c->relay); /* before the streams close: their data is c's again */
        uv_close((uv_handle_t *)&c->client, on_handle_closed);
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
        if (c->upstream_open)
                uv_close((uv_handle_t *)&c->upstream, on_handle_closed);
}

/* ---- writing ------------------------------------------------------------------------ */

static void on_written(uv_write_t *req, int status) {
        struct wreq *w = (struct wreq *)req;
        struct econn *c = w->c;

        free(w->base);
        free(w);
        if (c->closing)
                return;
        if (status < 0) {
                conn_close(c, "write to the sandbox failed");
                return;
        }
        if (c->phase == PH_ANSWER)
                conn_close(c, NULL);
}

/* Writes len bytes of data (copied) to the client, before any relay. 0 or -errno (then
 * c is closed). */
static int send_copy(struct econn *c, const char *data, size_t len) {
        struct wreq *w = malloc(sizeof(*w));
        char *b = malloc(len ? len : 1);
        uv_buf_t buf = uv_buf_init(b, (unsigned)len);
        int r;

        if (!w || !b) {
                free(w);
                free(b);
                conn_close(c, "daemon out of memory");
                return -ENOMEM;
        }
        memcpy(b, data, len);
        w->c = c;
        w->base = b;
        r = uv_write(&w->req, (uv_stream_t *)&c->client, &buf, 1, on_written);
        if (r < 0) {
                free(b);
                free(w);
                conn_close(c, "write failed");
        }
        return r;
}

/* Answers the client with an HTTP status and a one-line reason, records c (refused
 * unless allowed says it was a failure after an allowed verdict) and closes it once the
 * answer is written. */
/* The SOCKS5 answer for what would be HTTP status code (a refusal or a failure). */
static size_t socks_answer(const struct econn *c, int code, char *buf) {
        uint8_t rep = c->socks_rep                                  ? c->socks_rep
                      : code == 403                                 ? SOCKS5_NOT_ALLOWED
                      : code == 504                                 ? SOCKS5_TTL_EXPIRED
                      : code == 502 && strstr(c->reason, "refused") ? SOCKS5_REFUSED
                      : code == 502                                 ? SOCKS5_HOST_UNREACH
                                                                    : SOCKS5_FAILURE;

        if (c->socks_stage == 0) {
                /* No method we take: "no acceptable methods". */
                buf[0] = SOCKS5_VERSION;
                buf[1] = (char)0xff;
                return 2;
        }
        socks5_reply(rep, (uint8_t *)buf);
        return SOCKS5_REPLY_BYTES;
}

static void answer(struct econn *c, int code, const char *status, const char *reason) {
        char buf[512];
        int n;

        if (c->socks) {
                snprintf(c->reason, sizeof(c->reason), "%s", reason);
                c->phase = PH_ANSWER;
                uv_read_stop((uv_stream_t *)&c->client);
                uv_timer_start(&c->timer, on_head_timeout, EGRESS_HEAD_TIMEOUT_MS, 0);
                n = (int)socks_answer(c, code, buf);
                (void)send_copy(c, buf, (size_t)n);
                return;
        }
        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\nX-Sbx-Egress: %s\r\n\r\n%s\n",
                     code, status, strlen(reason) + 1, code == 403 ? "refused" : "failed", reason);
        log_debug("sbx=%s: egress %s %s:%u: %d %s", c->eg->id, c->method, c->host, c->port, code,
                  reason);
        /* The record is written at close (on_written) with this reason. */
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
        c->phase = PH_ANSWER;
        uv_read_stop((uv_stream_t *)&c->client);
        /* A client that does not take the answer is closed by the timer. */
        uv_timer_start(&c->timer, on_head_timeout, EGRESS_HEAD_TIMEOUT_MS, 0);
        (void)send_copy(c, buf, n > 0 && (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* ---- relaying ----------------------------------------------------------------------- */

/* The relay read bytes: the record's counts follow (the head the proxy wrote is sent too). */
static void on_relay_progress(struct relay *r, int from, const uint64_t bytes[2], void *ud) {
        struct econn *c = ud;

        c->sent = c->sent_head + bytes[0];
        c->received = bytes[1];
}

/* Why the relay's end closes a connection, for its record (NULL: it ended well). */
static const char *relay_reason(const struct relay_result *res) {
        switch (res->how) {
        case RELAY_ENDED:
        case RELAY_SHUTDOWN_FAILED:
                return NULL;
        case RELAY_IDLE:
                return "idle";
        case RELAY_READ_FAILED:
                return res->side == 0 ? "the sandbox's side failed" : "the host's side failed";
        case RELAY_WRITE_FAILED:
                return res->side == 0 ? "write to the sandbox failed" : "write to the host failed";
        case RELAY_NO_MEMORY:
                return "daemon out of memory";
        case RELAY_GONE:
                return res->side == 0 ? "the sandbox's side went away after its end"
                                      : "the host's side went away after its end";
        }
        return NULL;
}

static void on_relay_ended(struct relay *r, const struct relay_result *res, void *ud) {
        conn_close(ud, relay_reason(res));
}

static const struct relay_ops relay_ops = {.ended = on_relay_ended, .progress = on_relay_progress};
static const struct relay_bounds relay_bounds = {.high_bytes = EGRESS_QUEUE_HIGH_BYTES,
                                                 .idle_ms = EGRESS_IDLE_TIMEOUT_MS};

/* Queues len bytes of data to side to (0 the client, 1 upstream) of c's relay. 0 or
 * -errno (then c is closed). */
static int relay_queue(struct econn *c, int to, const void *data, size_t len) {
        int r = relay_send(c->relay, to, data, len);

        if (r < 0)
                conn_close(c, r == -ENOMEM ? "daemon out of memory" : "write failed");
        return r;
}

/* Connected: the answer the client waits for (or the rewritten request head, upstream),
 * what the client sent after its head, then the bytes both ways. */
static void start_relay(struct econn *c) {
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        size_t extra = c->head_len - c->head_end;
        uint8_t ok[SOCKS5_REPLY_BYTES];
        int r;

        c->phase = PH_RELAY;
        record_open(c);
        r = relay_start((uv_stream_t *)&c->client, (uv_stream_t *)&c->upstream, &relay_bounds,
                        &relay_ops, c, &c->relay);
        if (r < 0) {
                conn_close(c, r == -ENOMEM ? "daemon out of memory" : "starting the relay failed");
                return;
        }
        if (c->socks) {
                socks5_reply(SOCKS5_OK, ok);
                r = relay_queue(c, 0, ok, sizeof(ok));
        } else if (c->is_connect) {
                r = relay_queue(c, 0, established, sizeof(established) - 1);
        } else {
                c->sent_head = c->sent = c->out_len;
                r = relay_queue(c, 1, c->out, c->out_len);
                free(c->out);
                c->out = NULL;
        }
        if (r == 0 && extra) {
                c->sent_head += extra;
                c->sent = c->sent_head;
                (void)relay_queue(c, 1, c->head + c->head_end, extra);
        }
}

/* ---- connecting --------------------------------------------------------------------- */

static void on_connected(uv_connect_t *req, int status) {
        struct econn *c = req->data;
        char why[REASON_BYTES];

        if (c->closing || status == UV_ECANCELED)
                return;
        uv_timer_stop(&c->timer);
        if (status < 0) {
                snprintf(why, sizeof(why), "connect to %s port %u: %s", c->addr, c->port,
                         uv_strerror(status));
                answer(c, 502, "Bad Gateway", why);
                return;
        }
        start_relay(c);
}

static void on_connect_timeout(uv_timer_t *t) {
        struct econn *c = t->data;
        char why[REASON_BYTES];

        snprintf(why, sizeof(why), "connect to %s port %u timed out after %u ms", c->addr, c->port,
                 EGRESS_CONNECT_TIMEOUT_MS);
        /* Closing the upstream handle cancels the connect. */
        uv_close((uv_handle_t *)&c->upstream, on_handle_closed);
        c->upstream_open = 0;
        answer(c, 504, "Gateway Timeout", why);
}

/* Connects to c->dest, the address that was checked (no second resolution). */
static void connect_dest(struct econn *c) {
        int r;

        c->allowed = 1;
        egressrule_addr_text((struct sockaddr *)&c->dest, c->addr, sizeof(c->addr));
        r = uv_tcp_init(c->eg->d->loop, &c->upstream);
        if (r < 0) {
                answer(c, 502, "Bad Gateway", "daemon out of sockets");
                return;
        }
        c->upstream.data = c;
        c->upstream_open = 1;
        c->handles++;
        c->phase = PH_CONNECT;
        c->creq.data = c;
        r = uv_tcp_connect(&c->creq, &c->upstream, (struct sockaddr *)&c->dest, on_connected);
        if (r < 0) {
                char why[REASON_BYTES];
                snprintf(why, sizeof(why), "connect to %s port %u: %s", c->addr, c->port,
                         uv_strerror(r));
                answer(c, 502, "Bad Gateway", why);
                return;
        }
        uv_timer_start(&c->timer, on_connect_timeout, EGRESS_CONNECT_TIMEOUT_MS, 0);
}

/* Whether the proxy may connect to sa: an allowed_cidrs entry covers it, or it is a
 * public address. NULL when it may, else why not (into why). */
static const char *address_refusal(struct econn *c, const struct sockaddr *sa, char *why,
                                   size_t len) {
        enum egressrule_class k;
        char a[64];

        if (egressrule_cidrs_cover(c->eg->cidrs, c->eg->n_cidrs, sa))
                return NULL;
        k = egressrule_classify(sa);
        if (k == EGRESS_PUBLIC)
                return NULL;
        egressrule_addr_text(sa, a, sizeof(a));
        snprintf(why, len, "%s resolves to %s, a %s address no allowed_cidrs entry covers", c->host,
                 a, egressrule_class_name(k));
        return why;
}

/* One address c's name has, in the order the resolver (or the hosts file) gave them:
 * when c may connect to it, it becomes c->dest (with c's port) and 1 is returned; else
 * the first refusal is kept in why (its address in c->addr) and 0 returned. */
static int consider(struct econn *c, const struct sockaddr *sa, size_t salen, char *why,
                    size_t len) {
        char w[REASON_BYTES];

        if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) || salen > sizeof(c->dest))
                return 0;
        if (!address_refusal(c, sa, w, sizeof(w))) {
                memcpy(&c->dest, sa, salen);
                ((struct sockaddr_in *)&c->dest)->sin_port = htons((uint16_t)c->port);
                return 1;
        }
        if (!why[0]) {
                snprintf(why, len, "%s", w);
                egressrule_addr_text(sa, c->addr, sizeof(c->addr));
        }
        return 0;
}

/* The addresses were considered: connects to the one chosen, or refuses. */
static void connect_chosen(struct econn *c, int chosen, const char *why) {
        if (!chosen) {
                answer(c, 403, "Forbidden", why[0] ? why : "no address to connect to");
                return;
        }
        connect_dest(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
        struct econn *c = req->data;
        char why[REASON_BYTES] = "";
        const struct addrinfo *ai;
        int chosen = 0;

        c->gai_active = 0;
        /* Its turn goes to the next lookup of any sandbox (c's egress, holding the share,
         * stays until c goes). */
        egressshare_lookup_done(c->eg->share, c->lookup.uid);
        if (c->closing || c->phase != PH_RESOLVE) {
                /* Closed, or answered already (the lookup timed out). */
                uv_freeaddrinfo(res);
                conn_unref(c);
                return;
        }
        conn_unref(c); /* the request's reference; c's handles keep it */
        uv_timer_stop(&c->timer);
        if (status < 0) {
                snprintf(why, sizeof(why), "cannot resolve %s: %s", c->host, uv_strerror(status));
                answer(c, 502, "Bad Gateway", why);
                return;
        }
        for (ai = res; ai && !chosen; ai = ai->ai_next)
                chosen = consider(c, ai->ai_addr, ai->ai_addrlen, why, sizeof(why));
        uv_freeaddrinfo(res);
        connect_chosen(c, chosen, why);
}

/* Answers c from /etc/hosts when it names c's host (no thread, no wait): 1; else 0. */
static int from_hosts_file(struct econn *c) {
        struct sockaddr_storage a[HOSTSFILE_MAX_ADDRS];
        char why[REASON_BYTES] = "";
        size_t n = egressshare_hosts(c->eg->share, c->host, c->port, a, HOSTSFILE_MAX_ADDRS);
        int chosen = 0;

        if (n == 0)
                return 0;
        log_debug("sbx=%s: egress %s from /etc/hosts", c->eg->id, c->host);
        for (size_t i = 0; i < n && !chosen; i++)
                chosen =
                        consider(c, (const struct sockaddr *)&a[i], sizeof(a[i]), why, sizeof(why));
        connect_chosen(c, chosen, why);
        return 1;
}

/* ---- the request head ---------------------------------------------------------------- */

/* The rewritten head of a plain HTTP request: the first line in origin form (path),
 * without the hop-by-hop Proxy-Connection and Proxy-Authorization headers. 0 or -ENOMEM. */
static int rewrite_head(struct econn *c, const char *path, size_t path_len, const char *version,
                        size_t vlen, const char *rest, size_t rest_len) {
        char *o = malloc(strlen(c->method) + path_len + vlen + rest_len + 8);
        size_t n = 0;
        const char *p = rest, *end = rest + rest_len;

        if (!o)
                return -ENOMEM;
        n += (size_t)sprintf(o, "%s ", c->method);
        memcpy(o + n, path, path_len);
        n += path_len;
        o[n++] = ' ';
        memcpy(o + n, version, vlen);
        n += vlen;
        o[n++] = '\r';
        o[n++] = '\n';
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                size_t l = eol ? (size_t)(eol - p) + 1 : (size_t)(end - p);
                if (strncasecmp(p, "Proxy-Connection:", 17) != 0 &&
                    strncasecmp(p, "Proxy-Authorization:", 20) != 0) {
                        memcpy(o + n, p, l);
                        n += l;
                }
                p += l;
        }
        c->out = o;
        c->out_len = n;
        return 0;
}

/* Parses the request line of c's head into method, host, port and (plain HTTP) the
 * rewritten head. NULL when good, else the 400 reason. */
static const char *parse_head(struct econn *c) {
        const char *h = c->head, *eol = strstr(h, "\r\n"), *sp1, *sp2;
        const char *target, *auth, *auth_end, *path;
        size_t mlen;

        if (!eol)
                return "malformed request";
        sp1 = memchr(h, ' ', (size_t)(eol - h));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2 || sp2 + 6 > eol || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
                return "malformed request line (expected METHOD TARGET HTTP/1.x)";
        mlen = (size_t)(sp1 - h);
        if (mlen == 0 || mlen >= METHOD_MAX_BYTES)
                return "malformed method";
        for (size_t i = 0; i < mlen; i++)
                if (h[i] < 'A' || h[i] > 'Z')
                        return "malformed method";
        memcpy(c->method, h, mlen);
        c->method[mlen] = '\0';
        target = sp1 + 1;
        if (strcmp(c->method, "CONNECT") == 0) {
                c->is_connect = 1;
                if (egressrule_split_authority(target, (size_t)(sp2 - target), c->host,
                                               sizeof(c->host), &c->port, 443) < 0)
                        return "malformed CONNECT target (expected host:port)";
                return NULL;
        }
        if ((size_t)(sp2 - target) < 8 || strncasecmp(target, "http://", 7) != 0)
                return strncasecmp(target, "https://", 8) == 0
                               ? "https:// URLs go through CONNECT"
                               : "not a proxy request (expected an absolute http:// URL)";
        auth = target + 7;
        for (auth_end = auth; auth_end < sp2 && *auth_end != '/' && *auth_end != '?'; auth_end++)
                ;
        if (memchr(auth, '@', (size_t)(auth_end - auth)))
                return "user information in the URL is not supported";
        if (egressrule_split_authority(auth, (size_t)(auth_end - auth), c->host, sizeof(c->host),
                                       &c->port, 80) < 0)
                return "malformed URL host";
        path = auth_end < sp2 ? auth_end : "/";
        if (rewrite_head(c, path, auth_end < sp2 ? (size_t)(sp2 - auth_end) : 1, sp2 + 1,
                         (size_t)(eol - sp2 - 1), eol + 2, c->head_end - (size_t)(eol + 2 - h)) < 0)
                return "daemon out of memory";
        return NULL;
}

/* A lookup that takes longer than a connect may (waiting for its turn included): 504.
 * The lookup itself cannot be stopped once a thread runs it; its answer is then dropped
 * (on_resolved). */
static void on_resolve_timeout(uv_timer_t *t) {
        struct econn *c = t->data;
        char why[REASON_BYTES];

        if (c->gai_active)
                uv_cancel((uv_req_t *)&c->gai);
        egressshare_lookup_cancel(c->eg->share, &c->lookup);
        snprintf(why, sizeof(why), "resolving %s timed out after %u ms", c->host,
                 EGRESS_CONNECT_TIMEOUT_MS);
        answer(c, 504, "Gateway Timeout", why);
}

/* Its turn came: starts resolving c's host (off the loop, on one of libuv's threads,
 * which the turn holds until on_resolved). 0, or -errno when it could not (answered). */
static int lookup_start(struct egressshare_lookup *l) {
        struct econn *c = (struct econn *)(void *)((char *)l - offsetof(struct econn, lookup));
        struct addrinfo hints;
        char why[REASON_BYTES];
        char port[8];
        int r;

        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        snprintf(port, sizeof(port), "%u", c->port);
        c->gai.data = c;
        r = uv_getaddrinfo(c->eg->d->loop, &c->gai, on_resolved, c->host, port, &hints);
        if (r < 0) {
                snprintf(why, sizeof(why), "cannot resolve %s: %s", c->host, uv_strerror(r));
                answer(c, 502, "Bad Gateway", why);
                return r;
        }
        c->gai_active = 1;
        c->handles++;
        return 0;
}

/* Judges the parsed request: a literal inside allowed_cidrs is connected to; a name in
 * allowed_hosts is resolved; anything else is refused. */
static void judge(struct econn *c) {
        struct egress *eg = c->eg;
        char why[REASON_BYTES];

        if (egressrule_literal(c->host, c->port, &c->dest)) {
                egressrule_addr_text((struct sockaddr *)&c->dest, c->addr, sizeof(c->addr));
                if (!egressrule_cidrs_cover(eg->cidrs, eg->n_cidrs, (struct sockaddr *)&c->dest)) {
                        snprintf(why, sizeof(why), "address %s is not in allowed_cidrs", c->addr);
                        answer(c, 403, "Forbidden", why);
                        return;
                }
                connect_dest(c);
                return;
        }
        if (egressrule_name_check(c->host) < 0) {
                answer(c, 403, "Forbidden", "not a valid host name");
                return;
        }
        if (!egressrule_hosts_allow(eg->hosts, eg->n_hosts, c->host, c->port)) {
                snprintf(why, sizeof(why), "%s port %u is not in allowed_hosts", c->host, c->port);
                answer(c, 403, "Forbidden", why);
                return;
        }
        c->phase = PH_RESOLVE;
        if (from_hosts_file(c))
                return;
        /* The timeout runs while the lookup waits for its turn too. */
        uv_timer_start(&c->timer, on_resolve_timeout, EGRESS_CONNECT_TIMEOUT_MS, 0);
        c->lookup.uid = c->uid;
        c->lookup.start = lookup_start;
        if (egressshare_lookup(eg->share, &c->lookup) < 0)
                answer(c, 502, "Bad Gateway", "daemon out of memory");
}

static void head_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        struct econn *c = h->data;

        *buf = uv_buf_init(c->head + c->head_len, (unsigned)(sizeof(c->head) - 1 - c->head_len));
}

/* A SOCKS5 client's greeting and CONNECT request, as far as they have come: the greeting
 * is answered ("no authentication"), the request judged like CONNECT. */
static void socks_head(struct econn *c) {
        static const char no_auth[] = {SOCKS5_VERSION, 0};
        int ok = 0, r;

        snprintf(c->method, sizeof(c->method), "SOCKS5");
        if (c->socks_stage == 0) {
                r = socks5_greeting((const uint8_t *)c->head, c->head_len, &ok);
                if (r == 0)
                        return;
                if (r < 0 || !ok) {
                        answer(c, 400, "",
                               r < 0 ? "malformed SOCKS5 greeting"
                                     : "SOCKS5 without \"no authentication\"");
                        return;
                }
                if (send_copy(c, no_auth, sizeof(no_auth)) < 0)
                        return;
                memmove(c->head, c->head + r, c->head_len - (size_t)r);
                c->head_len -= (size_t)r;
                c->socks_stage = 1;
        }
        r = socks5_request((const uint8_t *)c->head, c->head_len, c->host, sizeof(c->host),
                           &c->port, &c->socks_rep);
        if (r == 0)
                return;
        if (r < 0) {
                answer(c, 400, "", "malformed or unsupported SOCKS5 request (CONNECT only)");
                return;
        }
        c->socks_stage = 2;
        c->is_connect = 1;
        c->head_end = (size_t)r;
        uv_read_stop((uv_stream_t *)&c->client);
        uv_timer_stop(&c->timer);
        judge(c);
}

static void on_head(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
        struct econn *c = s->data;
        const char *end;
        const char *bad;

        if (c->closing || nread == 0)
                return;
        if (nread < 0) {
                snprintf(c->head, sizeof(c->head), "the sandbox closed before a request");
                conn_close(c, nread == UV_EOF ? "the sandbox closed before a request"
                                              : "the sandbox's side failed");
                return;
        }
        c->head_len += (size_t)nread;
        c->head[c->head_len] = '\0';
        /* SOCKS5 (version byte 5) on the same port: no HTTP method starts so. */
        if (c->socks || c->head[0] == SOCKS5_VERSION) {
                c->socks = 1;
                socks_head(c);
                return;
        }
        end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
        if (!end) {
                if (c->head_len >= sizeof(c->head) - 1)
                        answer(c, 431, "Request Header Fields Too Large",
                               "request head longer than 16 KiB");
                return;
        }
        uv_read_stop(s);
        c->head_end = (size_t)(end - c->head) + 4;
        bad = parse_head(c);
        if (bad) {
                answer(c, 400, "Bad Request", bad);
                return;
        }
        uv_timer_stop(&c->timer);
        judge(c);
}

static void on_head_timeout(uv_timer_t *t) {
        struct econn *c = t->data;

        if (c->phase == PH_HEAD) {
                answer(c, 408, "Request Timeout", "no complete request within 10 s");
                return;
        }
        conn_close(c, NULL); /* the answer not taken in time: its reason stays */
}

/* ---- accepting ---------------------------------------------------------------------- */

static void free_handle(uv_handle_t *h) {
        free(h);
}

/* The connection waiting on the listener is answered 503 at once with why, without a
 * connection object (its descriptor is closed before this returns). 0 or -ENOMEM (it
 * is left waiting). */
static int refuse_now(struct egress *eg, const char *why) {
        char msg[REASON_BYTES + 256];
        int n = snprintf(msg, sizeof(msg),
                         "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\nX-Sbx-Egress: refused\r\n"
                         "\r\n%s\n",
                         strlen(why) + 1, why);
        uv_buf_t b = uv_buf_init(msg, n > 0 && (size_t)n < sizeof(msg) ? (unsigned)n : 0);
        uv_tcp_t *t = malloc(sizeof(*t));

        if (!t || uv_tcp_init(eg->d->loop, t) < 0) {
                free(t);
                return -ENOMEM;
        }
        if (uv_accept((uv_stream_t *)&eg->listener, (uv_stream_t *)t) == 0)
                (void)uv_try_write((uv_stream_t *)t, &b, 1);
        uv_close((uv_handle_t *)t, free_handle);
        return 0;
}

/* Records a refused connection as seq, from started_ms to ended_ms: inserted, or (update)
 * the record of seq brought up to date. */
static void record_refused(struct egress *eg, uint64_t seq, int64_t started_ms, int64_t ended_ms,
                           const char *reason, int update) {
        struct store_connection r;
        int rc;

        memset(&r, 0, sizeof(r));
        r.sandbox_id = eg->id;
        r.seq = seq;
        r.started_ms = started_ms;
        r.ended_ms = ended_ms;
        r.reason = reason;
        rc = update ? store_connection_finish(eg->d->store, &r)
                    : store_connection_insert(eg->d->store, &r);
        if (rc < 0)
                log_warning("sbx=%s: recording a refused connection: %s", eg->id,
                            store_last_error(eg->d->store));
}

/* Over the sandbox's cap: refused and recorded, each. */
static int refuse_over_cap(struct egress *eg) {
        static const char why[] = "too many open proxy connections";
        int64_t now = sbxd_now_unix_ms();

        if (refuse_now(eg, why) < 0)
                return -ENOMEM;
        record_refused(eg, eg->next_seq++, now, now, why, 0);
        return 0;
}

/* The record of the current run of refusals over the budget, with their count so far
 * (written again only when the count moved). */
static void over_record(struct egress *eg) {
        char reason[REASON_BYTES + 64];

        if (eg->over_count == eg->over_counted)
                return;
        snprintf(reason, sizeof(reason), "%s (%u connections refused)", eg->over_why,
                 eg->over_count);
        record_refused(eg, eg->over_seq, eg->over_first_ms, eg->over_last_ms, reason,
                       eg->over_counted > 0);
        eg->over_counted = eg->over_count;
}

/* Over the owner's descriptor budget (why names it): refused; a run of such refusals is
 * one record, which counts them, not one record each (a sandbox that connects in a loop
 * meanwhile must not grow the records). */
static int refuse_over_budget(struct egress *eg, const char *why) {
        int64_t now = sbxd_now_unix_ms();

        if (refuse_now(eg, why) < 0)
                return -ENOMEM;
        if (eg->over_count == 0) {
                eg->over_seq = eg->next_seq++;
                eg->over_first_ms = now;
                snprintf(eg->over_why, sizeof(eg->over_why), "%s", why);
        }
        eg->over_count++;
        eg->over_last_ms = now;
        if (eg->over_count == 1)
                over_record(eg);
        return 0;
}

/* The proxy takes connections again: the run of refusals (if any) has its last count. */
static void over_end(struct egress *eg) {
        over_record(eg);
        eg->over_count = 0;
        eg->over_counted = 0;
}

/* Whether the rate allows eg to take a connection now (then counted). */
static int take_token(struct egress *eg) {
        uint64_t now = uv_now(eg->d->loop);

        eg->tokens += (double)(now - eg->tokens_ms) * ACCEPTS_PER_SECOND / 1000.0;
        if (eg->tokens > ACCEPT_BURST)
                eg->tokens = ACCEPT_BURST;
        eg->tokens_ms = now;
        if (eg->tokens < 1.0)
                return 0;
        eg->tokens -= 1.0;
        return 1;
}

static void accept_one(struct egress *eg);

/* A connection waited for the rate. */
static void on_pace(uv_timer_t *t) {
        struct egress *eg = t->data;

        if (eg->closing)
                return;
        if (!take_token(eg)) {
                uv_timer_start(&eg->pace, on_pace, 1000 / ACCEPTS_PER_SECOND, 0);
                return;
        }
        accept_one(eg);
}

/* A connection came. Left unaccepted, libuv holds it and stops watching the listener
 * until uv_accept: the rate holds back the sandbox's next connects too. */
static void on_accept(uv_stream_t *s, int status) {
        struct egress *eg = s->data;

        if (status < 0 || eg->closing)
                return;
        if (!take_token(eg)) {
                uv_timer_start(&eg->pace, on_pace, 1000 / ACCEPTS_PER_SECOND, 0);
                return;
        }
        accept_one(eg);
}

static void on_timer_closed(uv_handle_t *h) {
        struct egress *eg = h->data;

        eg->timers_open--;
        egress_maybe_free(eg);
}

/* PROGRESS_MS: the open records whose bytes moved are brought up to date (ended_ms 0:
 * still open), in the batch of records. */
static void on_progress(uv_timer_t *t) {
        struct egress *eg = t->data;
        struct store_connection r;

        over_record(eg);
        for (struct econn *c = eg->conns; c; c = c->next) {
                if (!c->recorded || (c->sent == c->rec_sent && c->received == c->rec_received))
                        continue;
                record_fill(c, &r, NULL);
                if (store_connection_finish(eg->d->store, &r) == 0) {
                        c->rec_sent = c->sent;
                        c->rec_received = c->received;
                }
        }
}

static void accept_one(struct egress *eg) {
        uv_stream_t *s = (uv_stream_t *)&eg->listener;
        char why[REASON_BYTES];
        struct econn *c;
        int r;

        if (eg->n_open >= EGRESS_MAX_OPEN) {
                if (refuse_over_cap(eg) < 0)
                        goto retry;
                return;
        }
        /* Answered at once rather than left waiting in the backlog: the agent learns which
         * bound it met (and that closing its idle connections helps) instead of a connect
         * that hangs without a word until its own timeout. */
        r = egressshare_take_fds(eg->share, eg->owner, eg->id, why, sizeof(why));
        if (r == -ENOMEM)
                goto retry;
        if (r < 0) {
                if (refuse_over_budget(eg, why) < 0)
                        goto retry;
                return;
        }
        over_end(eg);
        c = calloc(1, sizeof(*c));
        if (!c || uv_tcp_init(eg->d->loop, &c->client) < 0) {
                egressshare_drop_fds(eg->share, eg->owner);
                free(c);
                goto retry;
        }
        c->eg = eg;
        c->client.data = c;
        c->handles = 1;
        c->uid = eg->owner;
        eg->n_mem++;
        if (uv_accept(s, (uv_stream_t *)&c->client) < 0) {
                egressshare_drop_fds(eg->share, c->uid);
                uv_close((uv_handle_t *)&c->client, on_handle_closed);
                return;
        }
        c->fds_held = 1;
        uv_timer_init(eg->d->loop, &c->timer);
        c->timer.data = c;
        c->handles++;
        c->seq = eg->next_seq++;
        c->started_ms = sbxd_now_unix_ms();
        c->next = eg->conns;
        if (eg->conns)
                eg->conns->prev = c;
        eg->conns = c;
        eg->n_open++;
        uv_tcp_nodelay(&c->client, 1);
        uv_timer_start(&c->timer, on_head_timeout, EGRESS_HEAD_TIMEOUT_MS, 0);
        uv_read_start((uv_stream_t *)&c->client, head_alloc, on_head);
        return;
retry:
        /* Out of memory: libuv holds the connection (and watches the listener no more)
         * until uv_accept, so it is taken again soon rather than never. */
        uv_timer_start(&eg->pace, on_pace, 100, 0);
}

/* ---- the proxy ---------------------------------------------------------------------- */

/* 0 when fd is a listening TCP socket, else -ENOTSOCK. */
static int check_listener(int fd) {
        int type = 0, listening = 0, proto = 0, domain = 0;
        socklen_t l1 = sizeof(type), l2 = sizeof(listening), l3 = sizeof(proto),
                  l4 = sizeof(domain);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l2) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l3) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l4) < 0)
                return -ENOTSOCK;
        if (type != SOCK_STREAM || !listening || proto != IPPROTO_TCP ||
            (domain != AF_INET && domain != AF_INET6))
                return -ENOTSOCK;
        return 0;
}

static void on_listener_closed(uv_handle_t *h) {
        struct egress *eg = h->data;

        eg->listener_open = 0;
        egress_maybe_free(eg);
}

int egress_start(struct sbxd *d, const char *id, uid_t owner, const Sbx__V1__Policy *pol, int fd,
                 struct egress **ret) {
        struct egress *eg;
        uint64_t last = 0;
        int r = check_listener(fd);

        if (r < 0) {
                close(fd);
                return r;
        }
        eg = calloc(1, sizeof(*eg));
        if (!eg || egress_set_policy(eg, id, owner, pol) < 0 || !(eg->share = egressshare_ref(d))) {
                if (eg)
                        egress_free(eg);
                close(fd);
                return -ENOMEM;
        }
        eg->d = d;
        if (store_connections_reset(d->store, id, sbxd_now_unix_ms(), "the daemon restarted",
                                    &last) < 0)
                log_warning("sbx=%s: reading connection records: %s", id,
                            store_last_error(d->store));
        eg->next_seq = last + 1;
        r = uv_tcp_init(d->loop, &eg->listener);
        if (r < 0) {
                egress_free(eg);
                close(fd);
                return r;
        }
        eg->listener.data = eg;
        eg->listener_open = 1;
        r = uv_tcp_open(&eg->listener, fd);
        if (r < 0)
                close(fd); /* not the handle's: uv_close will not close it */
        else
                r = uv_listen((uv_stream_t *)&eg->listener, 128, on_accept);
        if (r < 0) {
                eg->closing = 1;
                uv_close((uv_handle_t *)&eg->listener, on_listener_closed);
                return r;
        }
        uv_timer_init(d->loop, &eg->pace);
        eg->pace.data = eg;
        uv_timer_init(d->loop, &eg->progress);
        eg->progress.data = eg;
        eg->timers_open = 2;
        uv_timer_start(&eg->progress, on_progress, PROGRESS_MS, PROGRESS_MS);
        eg->tokens = ACCEPT_BURST;
        eg->tokens_ms = uv_now(d->loop);
        *ret = eg;
        return 0;
}

void egress_close(struct egress *eg, const char *reason) {
        if (!eg || eg->closing)
                return;
        eg->closing = 1;
        over_record(eg);
        while (eg->conns)
                conn_close(eg->conns, reason);
        uv_close((uv_handle_t *)&eg->pace, on_timer_closed);
        uv_close((uv_handle_t *)&eg->progress, on_timer_closed);
        uv_close((uv_handle_t *)&eg->listener, on_listener_closed);
}

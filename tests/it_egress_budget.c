/* it_egress_budget.c: one user's allowlist proxies at their budgets leave the other
 * users their proxies, creates and commands.
 *
 * The program lives in a network and mount namespace of its own (networld.h): its own
 * /etc/hosts (hosts.test, web.test), its own /etc/resolv.conf naming a nameserver on
 * 127.0.0.1:53 that the test runs: it answers dns.test and never answers a name under
 * never.test (each query it sees is written to a file), an HTTP server on
 * 203.0.113.10:80. A root daemon is shared by the socket group 3100; BOB (asbob.h) acts
 * in a forked child, root is the other user.
 *  - descriptors: with the daemon's open-file limit at 256 (128 for the proxies, 32 for
 *    one uid), BOB's three sandboxes try 64 idle tunnels each: 16 are held, the others
 *    answered 503 naming the bound, each sandbox keeps one record of its refusals and
 *    the daemon logs them once; meanwhile root creates a sandbox, runs a command and
 *    goes through its proxy, and the daemon's descriptors stay far from its limit; once
 *    BOB's tunnels close his budget is his again, and the record of a run of refusals
 *    counts them all. --max-proxy-fds-per-uid sets the
 *    budget, --max-lookups-per-uid the turns;
 *  - lookups: with libuv's pool at 4 threads (2 for lookups, 1 per uid), BOB's three
 *    sandboxes look up names that never answer; root's request for a name of
 *    /etc/hosts is answered within 1 s and his name from the nameserver within 5 s,
 *    while each of BOB's requests still ends 504 after its own 10 s timeout, waiting
 *    for its turn or not;
 *  - one user at every budget (the bar): BOB holds all his sandboxes, commands,
 *    buffered memory (kept output and a request stalled in the middle), connections,
 *    proxy descriptors and lookup threads at once, and one more of each is refused
 *    naming its bound, while root's create, exec, read, exec -t and allowlisted HTTP
 *    requests (a name of /etc/hosts, a name from the nameserver) stay within twice their
 *    medians on the idle daemon.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "asbob.h"
#include "frame.h"
#include "itutil.h"
#include "networld.h"
#include "sbx.h"
#include "testutil.h"

#define CMD_MS 60000u
#define MIB    (1024u * 1024u)
/* A call that takes longer fails the test (a daemon out of descriptors may never answer). */
#define CALL_MS 30000u

static struct networld W;

static const char http_server[] =
        "import http.server\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "  def do_GET(self):\n"
        "    b=('hello-egress '+self.path+'\\n').encode()\n"
        "    "
        "self.send_response(200);self.send_header('Content-Length',str(len(b)));self.end_headers();"
        "self.wfile.write(b)\n"
        "  def log_message(self,*a):pass\n"
        "http.server.ThreadingHTTPServer(('203.0.113.10',80),H).serve_forever()\n";

/* A nameserver on 127.0.0.1:53: dns.test has 203.0.113.10 (and no IPv6 address); any
 * other name is never answered. Every query's name and type goes to the file queries. */
static const char dns_server[] =
        "import socket,struct\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('127.0.0.1',53))\n"
        "log=open('queries','a')\n"
        "while True:\n"
        "  q,a=s.recvfrom(1500);i=12;n=[]\n"
        "  while i<len(q) and q[i]:\n"
        "    n.append(q[i+1:i+1+q[i]].decode(errors='replace'));i+=1+q[i]\n"
        "  name='.'.join(n).lower();t=struct.unpack('>H',q[i+1:i+3])[0];end=i+5\n"
        "  log.write(name+' '+str(t)+'\\n');log.flush()\n"
        "  if name!='dns.test': continue\n"
        "  an=b'\\xc0\\x0c\\x00\\x01\\x00\\x01\\x00\\x00\\x00\\x3c\\x00\\x04'+socket.inet_aton("
        "'203.0.113.10') if t==1 else b''\n"
        "  h=q[:2]+b'\\x81\\x80'+q[4:6]+struct.pack('>HHH',1 if an else 0,0,0)\n"
        "  s.sendto(h+q[12:end]+an,a)\n";

/* The namespace of the whole program, before any test forks; waits for its servers. */
static void make_world(void) {
        struct addrinfo *ai = NULL;
        int i;

        networld_make(&W, "it_egress_budget",
                      "127.0.0.1 localhost\n# the test's names\n"
                      "203.0.113.10\thosts.test  web.test # both served\n",
                      /* A name never answered holds a thread 15 s: past the proxy's 10 s. */
                      "nameserver 127.0.0.1\noptions timeout:15 attempts:1\n", NULL);
        networld_server(&W, http_server);
        networld_server(&W, dns_server);
        networld_wait(&W, 80);
        for (i = 0; i < 100 && getaddrinfo("dns.test", "80", NULL, &ai) != 0; i++)
                usleep(100 * 1000);
        if (!ai) {
                fprintf(stderr, "it_egress_budget: the test's nameserver did not come up\n");
                exit(2);
        }
        freeaddrinfo(ai);
}

/* BOB's client, with CALL_MS per call. */
static sbx_client *bob_client(struct it_daemon *d, struct report *r) {
        sbx_client *c = bob_connect(d, r);

        if (c)
                sbx_set_call_timeout_ms(c, CALL_MS);
        return c;
}

/* Creates allowlist sandbox id allowing hosts (NULL-terminated) for c's user; 0 or the
 * error, said into r when r is not NULL. */
static int create_as(sbx_client *c, struct report *r, const char *id, const char **hosts) {
        struct sbx_create_opts o;
        struct sbx_sandbox *s = NULL;
        size_t nh = 0;

        while (hosts[nh])
                nh++;
        sbx_create_opts_init(&o);
        o.id = id;
        o.policy.network = SBX_NETWORK_ALLOWLIST;
        o.policy.allowed_hosts = (struct sbx_strv){(char **)(uintptr_t)hosts, nh};
        if (sbx_create(c, &o, &s) != SBX_OK) {
                if (r)
                        say(r, "create-failed %s %s\n", id, sbx_error_message(c));
                return -1;
        }
        sbx_sandbox_free(s);
        return 0;
}

/* Starts shell in the background in sandbox id and reports "cid ID COMMAND" (or why
 * not) into r. */
static void start_bg(sbx_client *c, struct report *r, const char *id, const char *shell) {
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;

        sbx_exec_opts_init(&o);
        o.shell = shell;
        o.timeout_ms = 10 * CMD_MS;
        if (sbx_exec_background(c, id, &o, &b) != SBX_OK || b->result)
                say(r, "bg-failed %s %s\n", id, b ? "(ended at once)" : sbx_error_message(c));
        else
                say(r, "cid %s %s\n", id, b->command_id);
        sbx_background_free(b);
}

/* The command ids a report gives (start_bg's lines) for sandboxes PREFIX0.. into ids
 * (n of them; freed by the caller, NULL when missing). */
static void take_ids(const char *rep, const char *prefix, char **ids, int n) {
        char id[64], cid[128], want[64];

        for (const char *p = rep; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                for (int i = 0; i < n; i++) {
                        snprintf(want, sizeof(want), "%s%d", prefix, i);
                        if (sscanf(p, "cid %63s %127s", id, cid) == 2 && strcmp(id, want) == 0) {
                                free(ids[i]);
                                ids[i] = strdup(cid);
                        }
                }
}

/* The output so far of command cid of sandbox id (freed by the caller), and whether it
 * ended in *ret_ended. */
static char *output_of(sbx_client *c, const char *id, const char *cid, int *ret_ended) {
        struct sbx_attach_opts a = {.command_id = cid, .max_output_bytes = 65536};
        struct sbx_result *res = NULL;
        char *out;

        *ret_ended = 0;
        if (sbx_attach(c, id, &a, &res) != SBX_OK)
                return strdup("");
        out = strdup(res->stdout_data ? (const char *)res->stdout_data : "");
        *ret_ended = res->outcome != SBX_OUTCOME_RUNNING;
        sbx_result_free(res);
        return out;
}

/* ---- descriptors ------------------------------------------------------------------------ */

#define HOLD_SANDBOXES 3
#define HOLD_TRIES     64  /* each: the per-sandbox cap */
#define NOFILE         256 /* the daemon's */
#define FDS_ALL        128 /* the proxies': all less a reserve of half (a small limit) */
#define FDS_PER_UID    32  /* a quarter of them: 16 tunnels */

static const char *const fds_flags[] = {"--socket-group", "3100", "--warm", "0",
                                        "--spares",       "0",    NULL};

/* Inside: 64 tunnels to hosts.test through the proxy, one after the other, each kept
 * when it is up; then "held N refused M | the body of a refusal", and it waits. */
static const char holder[] =
        "/usr/bin/python3 -c \"\nimport socket,time,sys\nss=[];ok=0;no=0;body=''\n"
        "for i in range(64):\n"
        " s=socket.create_connection(('127.0.0.1',3128));s.settimeout(20);d=b''\n"
        " s.sendall(b'CONNECT hosts.test:80 HTTP/1.1\\r\\nHost: hosts.test:80\\r\\n\\r\\n')\n"
        " try:\n"
        "  while b'\\r\\n\\r\\n' not in d:\n"
        "   x=s.recv(4096)\n"
        "   if not x: break\n"
        "   d+=x\n"
        "  if d.startswith(b'HTTP/1.1 200'):\n"
        "   ok+=1;ss.append(s);continue\n"
        "  while True:\n"
        "   x=s.recv(4096)\n"
        "   if not x: break\n"
        "   d+=x\n"
        " except Exception: pass\n"
        " no+=1;s.close()\n"
        " if not body: body=d.decode(errors='replace').split('\\r\\n\\r\\n',1)[-1].strip()\n"
        "print('held',ok,'refused',no,'|',body);sys.stdout.flush();time.sleep(600)\"";

static char *hold_ids[HOLD_SANDBOXES];

static void bob_create_holders(struct it_daemon *d, const char *arg, struct report *r) {
        const char *hosts[] = {"hosts.test", NULL};
        sbx_client *c = bob_client(d, r);
        char id[32];

        for (int i = 0; c && i < HOLD_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-h%d", i);
                (void)create_as(c, r, id, hosts);
        }
        if (c)
                sbx_close(c);
}

/* Starts the holders, waits until each has said what it holds, and reports it with the
 * records of each sandbox's refusals over the budget. */
static void bob_hold(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_client(d, r);
        char id[32], *out[HOLD_SANDBOXES] = {0};
        int done = 0, ended;
        double t0 = it_now_ms();

        if (!c)
                return;
        for (int i = 0; i < HOLD_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-h%d", i);
                start_bg(c, r, id, holder);
        }
        take_ids(r->text, "bob-h", hold_ids, HOLD_SANDBOXES);
        while (done < HOLD_SANDBOXES && it_now_ms() - t0 < 60000) {
                done = 0;
                for (int i = 0; i < HOLD_SANDBOXES; i++) {
                        snprintf(id, sizeof(id), "bob-h%d", i);
                        free(out[i]);
                        out[i] = hold_ids[i] ? output_of(c, id, hold_ids[i], &ended) : strdup("");
                        done += strstr(out[i], "held") != NULL || ended || !hold_ids[i];
                }
                usleep(100 * 1000);
        }
        for (int i = 0; i < HOLD_SANDBOXES; i++) {
                struct sbx_connections *h = NULL;
                int records = 0;
                snprintf(id, sizeof(id), "bob-h%d", i);
                say(r, "sandbox %s %s", id, out[i][0] ? out[i] : "(nothing)\n");
                if (sbx_connections(c, id, 0, 1000, &h) == SBX_OK) {
                        for (size_t k = 0; k < h->n; k++)
                                if (h->v[k].reason && strstr(h->v[k].reason, "--max-proxy-fds")) {
                                        records++;
                                        say(r, "record %s %s\n", id, h->v[k].reason);
                                }
                        say(r, "records %s %d of %zu\n", id, records, h->n);
                }
                sbx_connections_free(h);
                free(out[i]);
        }
        sbx_close(c);
}

/* The holders end (their tunnels close); then one sandbox goes through its proxy again. */
static void bob_release(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_client(d, r);
        struct sbx_connections *h = NULL;
        struct sbx_result *res = NULL;
        char id[32];

        if (!c)
                return;
        for (int i = 0; i < HOLD_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-h%d", i);
                if (hold_ids[i] && sbx_cancel(c, id, hold_ids[i]) != SBX_OK)
                        say(r, "cancel-failed %s %s\n", id, sbx_error_message(c));
        }
        /* The proxy sees each tunnel end a moment after its holder is gone. */
        res = it_sh(c, "bob-h0", CMD_MS,
                    "for i in $(seq 50); do curl -sS -m 10 http://hosts.test/bob-again && "
                    "exit 0; sleep 0.2; done; exit 1");
        say(r, "again %s\n", res->stdout_data ? (const char *)res->stdout_data : "");
        sbx_result_free(res);
        /* The run of refusals ended with that connection: its record has their count. */
        if (sbx_connections(c, "bob-h0", 0, 1000, &h) == SBX_OK)
                for (size_t k = 0; k < h->n; k++)
                        if (h->v[k].reason && strstr(h->v[k].reason, "--max-proxy-fds"))
                                say(r, "record-after %s\n", h->v[k].reason);
        sbx_connections_free(h);
        sbx_close(c);
}

START_TEST(descriptors_per_uid) {
        struct rlimit rl = {NOFILE, NOFILE};
        const char *hosts[] = {"hosts.test", NULL};
        struct it_daemon d;
        struct sbx_result *res;
        int held = 0, refused = 0, fds_before, fds_held, fds_root, named = 0, refused_h0 = -1;
        char *rep, *line, *root_out, counted[64];
        sbx_client *c;

        /* The daemon inherits it (and raises its soft limit to it): 128 for the proxies. */
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        it_daemon_start(&d, fds_flags);
        c = it_connect(&d);
        sbx_set_call_timeout_ms(c, CALL_MS);
        rep = as_bob(bob_create_holders, &d, NULL);
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        fds_before = it_open_fds(d.pid);
        rep = as_bob(bob_hold, &d, NULL);
        fds_held = it_open_fds(d.pid);
        take_ids(rep, "bob-h", hold_ids, HOLD_SANDBOXES);

        /* Root meanwhile: a sandbox, a command, a request through its proxy. */
        ck_assert_msg(create_as(c, NULL, "root-a", hosts) == 0, "root's create: %s (BOB: %s)",
                      sbx_error_message(c), rep);
        res = it_sh(c, "root-a", CMD_MS, "echo made; curl -sS -m 10 http://hosts.test/root");
        root_out = strdup((char *)res->stdout_data);
        ck_assert_msg(strstr(root_out, "made\nhello-egress /root"), "root: %s %s (BOB: %s)",
                      root_out, (char *)res->stderr_data, rep);
        sbx_result_free(res);
        free(root_out);
        fds_root = it_open_fds(d.pid);

        for (line = rep; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                int h, n;
                if (sscanf(line, "sandbox %*s held %d refused %d", &h, &n) == 2) {
                        held += h;
                        refused += n;
                        if (strncmp(line, "sandbox bob-h0 ", 15) == 0)
                                refused_h0 = n;
                        named += strstr(line, "--max-proxy-fds-per-uid 32") != NULL;
                }
        }
        /* His budget, exactly: 32 descriptors, 16 tunnels; each refusal says why. */
        ck_assert_msg(held == FDS_PER_UID / 2 && refused == HOLD_SANDBOXES * HOLD_TRIES - held,
                      "held %d refused %d: %s", held, refused, rep);
        ck_assert_msg(named == HOLD_SANDBOXES, "503 names the bound: %s", rep);
        /* One record per sandbox for its run of refusals, not one per connection; one log
         * line for them all. */
        ck_assert_msg(count_lines(rep, "records bob-h0 1 ") == 1 &&
                              count_lines(rep, "records bob-h1 1 ") == 1 &&
                              count_lines(rep, "records bob-h2 1 ") == 1,
                      "%s", rep);
        ck_assert_int_eq(it_log_count(&d, "refuse new connections of uid 3202"), 1);
        ck_assert_int_eq(it_log_count(&d, "at most 128 descriptors (open-file limit 256, 128 "
                                          "kept for the rest), 32 per uid"),
                         1);
        /* BOB's tunnels hold his budget, his commands their pipes: no more; the daemon
         * stays far from its limit. */
        printf("it_egress_budget: the daemon's descriptors: %d, with BOB's tunnels %d, and "
               "root's sandbox %d (limit %d)\n",
               fds_before, fds_held, fds_root, NOFILE);
        ck_assert_msg(fds_held - fds_before <= FDS_PER_UID + 8 * HOLD_SANDBOXES,
                      "the daemon went from %d to %d descriptors: %s", fds_before, fds_held, rep);
        ck_assert_msg(fds_root < FDS_ALL, "the daemon holds %d descriptors", fds_root);
        free(rep);

        /* BOB's tunnels end: his budget is his again, and the log says so once. */
        rep = as_bob(bob_release, &d, NULL);
        ck_assert_msg(strstr(rep, "again hello-egress /bob-again"), "%s", rep);
        snprintf(counted, sizeof(counted), "(%d connections refused)", refused_h0);
        ck_assert_msg(count_lines(rep, "record-after ") == 1 && strstr(rep, counted),
                      "one record counts bob-h0's %d refusals: %s", refused_h0, rep);
        free(rep);
        ck_assert_int_eq(it_log_count(&d, "connections of uid 3202 again"), 1);
        for (int i = 0; i < HOLD_SANDBOXES; i++)
                free(hold_ids[i]);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* The flags: BOB's budget is --max-proxy-fds-per-uid (4 tunnels of 8 descriptors) and
 * his turns --max-lookups-per-uid, whatever the shares would be. */
START_TEST(budget_flags) {
        static const char *const flags[] = {"--socket-group",
                                            "3100",
                                            "--warm",
                                            "0",
                                            "--spares",
                                            "0",
                                            "--max-proxy-fds-per-uid",
                                            "8",
                                            "--max-lookups-per-uid",
                                            "3",
                                            NULL};
        struct it_daemon d;
        char *rep;

        it_daemon_start(&d, flags);
        rep = as_bob(bob_create_holders, &d, NULL);
        ck_assert_msg(rep[0] == '\0', "%s", rep);
        free(rep);
        rep = as_bob(bob_hold, &d, NULL);
        take_ids(rep, "bob-h", hold_ids, HOLD_SANDBOXES);
        ck_assert_msg(strstr(rep, "--max-proxy-fds-per-uid 8)"), "%s", rep);
        {
                int held = 0, h;
                for (const char *p = rep; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                        if (sscanf(p, "sandbox %*s held %d", &h) == 1)
                                held += h;
                ck_assert_msg(held == 4, "held %d: %s", held, rep);
        }
        free(rep);
        ck_assert_int_eq(it_log_count(&d, "descriptors (open-file limit"), 1);
        ck_assert_int_eq(it_log_count(&d, "), 8 per uid; 8 name lookups under way, 3 per uid"), 1);
        for (int i = 0; i < HOLD_SANDBOXES; i++)
                free(hold_ids[i]);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- lookups ---------------------------------------------------------------------------- */

#define LOOKUP_SANDBOXES 3

static const char *const lookup_flags[] = {"--socket-group", "3100", "--warm", "0",
                                           "--spares",       "0",    NULL};

static char *never_ids[LOOKUP_SANDBOXES];

/* Three requests at once for names that are never answered: "CODE SECONDS" each. */
static const char never[] =
        "for i in 1 2 3; do curl -s -o /dev/null -m 40 -w '%{http_code} %{time_total}\\n' "
        "http://n$i-$RANDOM.never.test/ & done; wait";

static void bob_never(struct it_daemon *d, const char *arg, struct report *r) {
        const char *hosts[] = {"*.never.test", NULL};
        sbx_client *c = bob_client(d, r);
        char id[32];

        for (int i = 0; c && i < LOOKUP_SANDBOXES; i++) {
                snprintf(id, sizeof(id), "bob-n%d", i);
                if (create_as(c, r, id, hosts) == 0)
                        start_bg(c, r, id, never);
        }
        if (c)
                sbx_close(c);
}

/* Waits for BOB's commands, and reports what each request got. */
static void bob_never_results(struct it_daemon *d, const char *arg, struct report *r) {
        sbx_client *c = bob_client(d, r);
        char id[32], *out;
        int ended = 0;

        for (int i = 0; c && i < LOOKUP_SANDBOXES; i++) {
                double t0 = it_now_ms();
                snprintf(id, sizeof(id), "bob-n%d", i);
                do {
                        usleep(200 * 1000);
                        out = never_ids[i] ? output_of(c, id, never_ids[i], &ended) : NULL;
                        if (!ended)
                                free(out);
                } while (never_ids[i] && !ended && it_now_ms() - t0 < 60000);
                say(r, "%s", ended ? out : "not-ended\n");
                if (ended)
                        free(out);
        }
        if (c)
                sbx_close(c);
}

/* Names under never.test the nameserver was asked, over all types. */
static int never_queries(void) {
        char path[128], line[512];
        int n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/queries", W.dir);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f))
                n += strstr(line, ".never.test ") != NULL;
        if (f)
                fclose(f);
        return n;
}

/* Root's request for url in sandbox id: "CODE SECONDS". */
static char *root_request(sbx_client *c, const char *id, const char *url) {
        char cmd[512];
        struct sbx_result *res;
        char *out;

        snprintf(cmd, sizeof(cmd),
                 "curl -s -o /dev/null -m 30 -w '%%{http_code} %%{time_total}' %s", url);
        res = it_sh(c, id, CMD_MS, cmd);
        out = strdup((char *)res->stdout_data);
        sbx_result_free(res);
        return out;
}

START_TEST(lookups_per_uid) {
        const char *hosts[] = {"hosts.test", "dns.test", NULL};
        struct it_daemon d;
        double t_hosts = 99, t_dns = 99, t;
        int code, lines = 0, timed_out = 0;
        char *rep, *out, *line;
        sbx_client *c;

        /* libuv's default pool: 2 threads for lookups, 1 per uid. */
        setenv("UV_THREADPOOL_SIZE", "4", 1);
        it_daemon_start(&d, lookup_flags);
        unsetenv("UV_THREADPOOL_SIZE");
        c = it_connect(&d);
        sbx_set_call_timeout_ms(c, CALL_MS);
        create_allowlist(c, "root-l", hosts, NULL);
        rep = as_bob(bob_never, &d, NULL);
        ck_assert_msg(count_lines(rep, "cid bob-n") == LOOKUP_SANDBOXES, "%s", rep);
        take_ids(rep, "bob-n", never_ids, LOOKUP_SANDBOXES);
        free(rep);
        /* BOB's lookups are on the nameserver (a thread waits for each). */
        for (int i = 0; i < 200 && never_queries() == 0; i++)
                usleep(50 * 1000);
        ck_assert_int_gt(never_queries(), 0);
        usleep(1000 * 1000); /* and the lookups of BOB's other sandboxes asked for theirs */

        /* Root's name of /etc/hosts: no thread, no wait (the best of three tries: the
         * machine is shared). */
        for (int i = 0; i < 3 && t_hosts >= 1.0; i++) {
                out = root_request(c, "root-l", "http://hosts.test/h");
                ck_assert_msg(sscanf(out, "%d %lf", &code, &t) == 2 && code == 200,
                              "hosts.test: %s", out);
                t_hosts = t < t_hosts ? t : t_hosts;
                free(out);
        }
        /* Root's name from the nameserver: a thread BOB's do not hold. */
        out = root_request(c, "root-l", "http://dns.test/d");
        ck_assert_msg(sscanf(out, "%d %lf", &code, &t_dns) == 2 && code == 200, "dns.test: %s",
                      out);
        free(out);
        printf("it_egress_budget: root's requests while BOB's lookups hang: /etc/hosts %.3f s, "
               "the nameserver %.3f s\n",
               t_hosts, t_dns);
        ck_assert_msg(t_hosts < 1.0, "hosts.test took %.3f s", t_hosts);
        ck_assert_msg(t_dns < 5.0, "dns.test took %.3f s", t_dns);

        /* BOB's requests each end 504 on their own timeout, waiting for a turn or not. */
        rep = as_bob(bob_never_results, &d, NULL);
        for (line = rep; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (sscanf(line, "%d %lf", &code, &t) == 2) {
                        lines++;
                        timed_out += code == 504 && t >= 9.0 && t < 20.0;
                }
        ck_assert_msg(lines == 3 * LOOKUP_SANDBOXES && timed_out == lines, "BOB's: %s", rep);
        ck_assert_int_eq(it_log_count(&d, "2 name lookups under way, 1 per uid"), 1);
        free(rep);
        for (int i = 0; i < LOOKUP_SANDBOXES; i++)
                free(never_ids[i]);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- names that are never answered, from many sandboxes ------------------------------------ */

/* A request through the proxy of sandbox "victim" for a name of /etc/hosts: its output
 * (freed by the caller). */
static char *victim_request(sbx_client *c) {
        struct sbx_result *r = it_sh(c, "victim", CMD_MS, "curl -sS -m 30 http://hosts.test/ 2>&1");
        char *out = strdup((char *)r->stdout_data);

        sbx_result_free(r);
        return out;
}

/* Names that never resolve (a wildcard lets the sandbox pick any number of them), 60
 * lookups kept under way: each holds a libuv worker thread for the resolver's whole
 * wait (the 10 s timeout answers the client, the thread stays). Held: libuv runs at
 * most half its threads on such slow work, so ListDirectory of another sandbox
 * (the same thread pool) is not delayed, and a name of /etc/hosts needs no thread.
 * (Lookups of the same uid's other sandboxes wait their turn behind these:
 * --max-lookups-per-uid, lookups_per_uid above.) */
static const char deaf_names[] =
        "/usr/bin/python3 -c \"\n"
        "import socket,time,selectors\n"
        "sel=selectors.DefaultSelector();n=0\n"
        "def one():\n"
        "  global n\n"
        "  s=socket.create_connection(('127.0.0.1',3128));n+=1\n"
        "  s.sendall(('CONNECT n%d.slow.test:443 HTTP/1.1\\r\\n\\r\\n'%n).encode())\n"
        "  sel.register(s,selectors.EVENT_READ)\n"
        "for i in range(60): one()\n"
        "print('sent',flush=True);t=time.time()\n"
        "while time.time()-t<40:\n"
        "  for k,e in sel.select(1):\n"
        "    sel.unregister(k.fileobj);k.fileobj.close();one()\n"
        "\"";

/* Sandbox id of c, allowed *.slow.test, runs deaf_names in the background. */
static void start_deaf_names(sbx_client *c, const char *id) {
        const char *hosts[] = {"*.slow.test", NULL};
        struct sbx_exec_opts o;
        struct sbx_background *b = NULL;

        create_allowlist(c, id, hosts, NULL);
        sbx_exec_opts_init(&o);
        o.shell = deaf_names;
        o.timeout_ms = 60000;
        ck_assert_int_eq(sbx_exec_background(c, id, &o, &b), SBX_OK);
        sbx_background_free(b);
}

START_TEST(lookups_that_never_answer) {
        struct it_daemon d;
        sbx_client *c, *c2;
        const char *victim_hosts[] = {"hosts.test", NULL};
        struct sbx_dir_list *l = NULL;
        double t0, worst = 0, worst_proxy = 0;
        char *out;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        start_deaf_names(c, "dn");
        /* Another sandbox, whose files are listed and whose proxy is used meanwhile. */
        create_allowlist(c2, "victim", victim_hosts, NULL);
        usleep(1500 * 1000); /* the lookups are under way */
        for (int i = 0; i < 4; i++) {
                t0 = it_now_ms();
                ck_assert_int_eq(sbx_list_dir(c2, "victim", "/", 0, &l), SBX_OK);
                sbx_dir_list_free(l);
                if (it_now_ms() - t0 > worst)
                        worst = it_now_ms() - t0;
                t0 = it_now_ms();
                out = victim_request(c2);
                ck_assert_str_eq(out, "hello-egress /\n");
                free(out);
                if (it_now_ms() - t0 > worst_proxy)
                        worst_proxy = it_now_ms() - t0;
                usleep(300 * 1000);
        }
        fprintf(stderr,
                "lookups_that_never_answer: the slowest ListDirectory took %.0f ms, request "
                "through the other proxy %.0f ms\n",
                worst, worst_proxy);
        ck_assert_msg(worst < 2000, "ListDirectory waited %.0f ms for the lookups", worst);
        ck_assert_msg(worst_proxy < 3000, "the other sandbox's request waited %.0f ms",
                      worst_proxy);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* Four sandboxes (of one user or several) looking up names that never answer hold one
 * of libuv's lookup threads each: sbxd has enough (UV_THREADPOOL_SIZE 16 gives lookups
 * 8) that another sandbox's proxy still answers at once. */
START_TEST(deaf_lookups_of_four_sandboxes) {
        struct it_daemon d;
        sbx_client *c, *c2;
        const char *victim_hosts[] = {"hosts.test", NULL};
        double t0, worst = 0;
        char id[16], *out;

        it_daemon_start(&d, NULL);
        c = it_connect(&d);
        c2 = it_connect(&d);
        create_allowlist(c2, "victim", victim_hosts, NULL);
        for (int i = 0; i < 4; i++) {
                snprintf(id, sizeof(id), "deaf%d", i);
                start_deaf_names(c, id);
        }
        usleep(1500 * 1000); /* their lookups are under way */
        for (int i = 0; i < 3; i++) {
                t0 = it_now_ms();
                out = victim_request(c2);
                ck_assert_str_eq(out, "hello-egress /\n");
                free(out);
                if (it_now_ms() - t0 > worst)
                        worst = it_now_ms() - t0;
                usleep(300 * 1000);
        }
        fprintf(stderr, "deaf_lookups_of_four_sandboxes: the slowest request took %.0f ms\n",
                worst);
        ck_assert_msg(worst < 3000, "the other sandbox's request waited %.0f ms", worst);
        sbx_close(c2);
        sbx_close(c);
        ck_assert_int_eq(it_daemon_stop(&d), 0);
}
END_TEST

/* ---- one user at every budget ------------------------------------------------------------ */

#define BAR_CONNS 8 /* --max-connections-per-uid in the bar's daemon */
#define BAR_CMDS  6 /* --max-commands-per-uid */
#define BAR_TRIES 7

/* A Hello on c: its connection is made (libsbx connects at the first request). */
static enum sbx_code hello(sbx_client *c) {
        struct sbx_hello *h = NULL;
        enum sbx_code code = sbx_hello(c, &h);

        sbx_hello_free(h);
        return code;
}

/* BOB's child says which step failed, and ends. */
static void bar_fail(int ready, const char *step, sbx_client *c) {
        char msg[600];
        int n = snprintf(msg, sizeof(msg), "%s failed: %s", step, c ? sbx_error_message(c) : "-");
        (void)!write(ready, msg, (size_t)n);
        _exit(1);
}

/* Waits for the holder's word on the tunnels it holds: at his descriptor budget (his
 * lookups' connections take some of the same budget), else BOB's child fails. */
static void holder_said(sbx_client *c, const char *holder_id, int ready) {
        double t0 = it_now_ms();
        int ended = 0, held = 0, refused = 0;
        char *out = NULL;

        while (it_now_ms() - t0 < 120000) {
                free(out);
                out = output_of(c, "bob-a", holder_id, &ended);
                if (strstr(out, "held") || ended)
                        break;
                usleep(100000);
        }
        if (sscanf(out, "held %d refused %d", &held, &refused) != 2 || held > 16 || refused == 0 ||
            !strstr(out, "--max-proxy-fds-per-uid 32"))
                bar_fail(ready, out[0] ? out : "the holder said nothing", NULL);
        free(out);
}

/* BOB at every budget at once, held until the test writes a byte on stop: his share of
 * sandboxes (both allowlist sandboxes), commands running (one holding proxy tunnels up
 * to his descriptor budget, one looking up names that are never answered with all his
 * lookup threads, the others each keeping output up to his buffered share), a request
 * stalled in the middle, and his connections. On ready: "ok" once he is there and one
 * more of each was refused naming its bound, else what went wrong. */
static void bob_at_every_budget(struct it_daemon *d, int ready, int stop) {
        const gid_t groups[1] = {SOCK_GRP};
        static uint8_t body[3 * MIB];
        const char *hosts[] = {"hosts.test", "*.never.test", NULL};
        sbx_client *c[BAR_CONNS] = {0};
        char lookups[512], *holder_id = NULL;
        struct sbx_create_opts co;
        struct sbx_sandbox *sb = NULL;
        uint8_t hdr[4];
        int i, raw = -1, n_conn = 0;
        char byte;

        if (setgroups(1, groups) < 0 || setresgid(BOB, BOB, BOB) < 0 || setresuid(BOB, BOB, BOB) < 0)
                _exit(120);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        snprintf(lookups, sizeof(lookups), "while :; do %s; done", never);
        if (sbx_connect(d->sock, "bob", &c[0]) != SBX_OK)
                bar_fail(ready, "connect", NULL);
        n_conn = 1;
        /* His sandboxes: all of his share (2 of 8), allowlist ones. */
        for (i = 0; i < 2; i++)
                if (create_as(c[0], NULL, i ? "bob-b" : "bob-a", hosts) < 0)
                        bar_fail(ready, "create", c[0]);
        /* A request stalled in the middle. */
        frame_header_put(hdr, 4 * MIB - 8);
        raw = bob_raw_connect(d->sock);
        if (raw < 0 || send(raw, hdr, 4, MSG_NOSIGNAL) != 4 ||
            send(raw, body, sizeof(body), MSG_NOSIGNAL) != (ssize_t)sizeof(body))
                bar_fail(ready, "stalled request", NULL);
        n_conn++;
        /* His commands: all of his share. First the tunnels' holder and the lookups,
         * and the holder's word on what it holds (read before his output fills his
         * buffered share: past it, nothing more of his output is kept); then the others,
         * each printing into what it keeps, then waiting. */
        for (i = 0; i < BAR_CMDS; i++) {
                struct sbx_exec_opts o;
                struct sbx_background *b = NULL;
                sbx_exec_opts_init(&o);
                o.shell = i == 0 ? holder : i == 1 ? lookups : "head -c 8388608 /dev/zero; sleep 600";
                o.max_stdout_bytes = 8 * MIB;
                o.no_timeout = 1;
                if (sbx_exec_background(c[0], i % 2 ? "bob-b" : "bob-a", &o, &b) != SBX_OK)
                        bar_fail(ready, "command", c[0]);
                if (i == 0)
                        holder_id = strdup(b->command_id);
                sbx_background_free(b);
                if (i == 1)
                        holder_said(c[0], holder_id, ready);
        }
        /* The rest of his connections but one (taken after the checks below). */
        for (i = 1; n_conn < BAR_CONNS - 1 && i < BAR_CONNS - 1; i++, n_conn++)
                if (sbx_connect(d->sock, "bob", &c[i]) != SBX_OK || hello(c[i]) != SBX_OK)
                        bar_fail(ready, "connections", c[i]);
        usleep(500000); /* his output reaches his share */
        /* One more of each is refused, naming its bound. */
        {
                char rep[2048] = "";
                size_t len = 0;
                struct sbx_exec_opts o;
                struct sbx_background *b = NULL;
                sbx_client *extra = NULL;
                enum sbx_code code;

                sbx_create_opts_init(&co);
                code = sbx_create(c[0], &co, &sb);
                sbx_sandbox_free(sb);
                if (code != SBX_RESOURCE_EXHAUSTED ||
                    !strstr(sbx_error_message(c[0]), "--max-sandboxes-per-uid"))
                        len += (size_t)snprintf(rep + len, sizeof(rep) - len, "create: %s; ",
                                                sbx_error_message(c[0]));
                sbx_exec_opts_init(&o);
                o.shell = "true";
                o.has_queue_timeout = 1;
                o.queue_timeout_ms = 0;
                code = sbx_exec_background(c[0], "bob-a", &o, &b);
                sbx_background_free(b);
                if (code != SBX_RESOURCE_EXHAUSTED)
                        len += (size_t)snprintf(rep + len, sizeof(rep) - len, "command: %s; ",
                                                sbx_error_message(c[0]));
                sbx_exec_opts_init(&o);
                o.shell = "wc -c";
                o.stdin_data = body;
                o.stdin_len = MIB;
                b = NULL;
                code = sbx_exec_background(c[0], "bob-a", &o, &b);
                sbx_background_free(b);
                if (code != SBX_RESOURCE_EXHAUSTED ||
                    !strstr(sbx_error_message(c[0]), "--max-buffered"))
                        len += (size_t)snprintf(rep + len, sizeof(rep) - len, "stdin: %s; ",
                                                sbx_error_message(c[0]));
                if (sbx_connect(d->sock, "bob", &c[BAR_CONNS - 1]) != SBX_OK ||
                    hello(c[BAR_CONNS - 1]) != SBX_OK)
                        len += (size_t)snprintf(rep + len, sizeof(rep) - len, "last connection; ");
                code = sbx_connect(d->sock, "bob", &extra);
                if (code == SBX_OK)
                        code = hello(extra);
                if (code == SBX_OK || !extra ||
                    !strstr(sbx_error_message(extra), "--max-connections-per-uid"))
                        len += (size_t)snprintf(rep + len, sizeof(rep) - len, "connection: %s %s; ",
                                                sbx_code_name(code),
                                                extra ? sbx_error_message(extra) : "-");
                sbx_close(extra);
                if (write(ready, len ? rep : "ok", len ? len : 2) <= 0)
                        _exit(126);
        }
        (void)!read(stop, &byte, 1);
        for (i = 0; i < BAR_CONNS; i++)
                sbx_close(c[i]);
        close(raw);
        _exit(0);
}

/* The median of root's latency, in ms, over BAR_TRIES tries of each: a create (and its
 * terminate), a command, a file read, and a command on a terminal. */
struct bar_times {
        double create, exec, read, tty, http, dns;
};

static double median(double *v, int n) {
        for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        double t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        return v[n / 2];
}

static void root_times(struct it_daemon *d, struct bar_times *bt) {
        double create[BAR_TRIES], exec[BAR_TRIES], rd[BAR_TRIES], tty[BAR_TRIES],
                http[BAR_TRIES], dns[BAR_TRIES], t0;
        const char *hosts[] = {"hosts.test", "dns.test", NULL};
        sbx_client *c = it_connect(d);
        char *out;
        int i;

        static int round;
        char web[32];

        snprintf(web, sizeof(web), "root-web-%d", ++round);
        if (create_as(c, NULL, web, hosts) < 0)
                ck_abort_msg("%s: %s", web, sbx_error_message(c));

        for (i = 0; i < BAR_TRIES; i++) {
                struct sbx_exec_opts o;
                struct sbx_result *r = NULL;
                struct sbx_read_result *rr = NULL;
                char *id;

                t0 = it_now_ms();
                id = it_create(c, NULL);
                create[i] = it_now_ms() - t0;
                sbx_exec_opts_init(&o);
                o.shell = "true";
                o.timeout_ms = CMD_MS;
                t0 = it_now_ms();
                ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
                exec[i] = it_now_ms() - t0;
                ck_assert_int_eq(r->exit_code, 0);
                sbx_result_free(r);
                ck_assert_int_eq(sbx_write(c, id, "f", "hello", 5, 0, 0), SBX_OK);
                t0 = it_now_ms();
                ck_assert_int_eq(sbx_read(c, id, "f", 0, 0, &rr), SBX_OK);
                rd[i] = it_now_ms() - t0;
                ck_assert_uint_eq(rr->len, 5);
                sbx_read_result_free(rr);
                sbx_exec_opts_init(&o);
                o.shell = "tty >/dev/null";
                o.tty = 1;
                o.timeout_ms = CMD_MS;
                r = NULL;
                t0 = it_now_ms();
                ck_assert_int_eq(sbx_exec(c, id, &o, &r), SBX_OK);
                tty[i] = it_now_ms() - t0;
                ck_assert_msg(r->exit_code == 0, "tty: %s", r->stdout_data);
                sbx_result_free(r);
                ck_assert_int_eq(sbx_terminate(c, id, NULL), SBX_OK);
                free(id);
                /* Through the allowlist proxy: a name of /etc/hosts, and one the
                 * nameserver answers (a lookup thread). */
                t0 = it_now_ms();
                out = root_request(c, web, "http://hosts.test/bar");
                http[i] = it_now_ms() - t0;
                ck_assert_msg(strncmp(out, "200 ", 4) == 0, "hosts.test: %s", out);
                free(out);
                t0 = it_now_ms();
                out = root_request(c, web, "http://dns.test/bar");
                dns[i] = it_now_ms() - t0;
                ck_assert_msg(strncmp(out, "200 ", 4) == 0, "dns.test: %s", out);
                free(out);
        }
        ck_assert_int_eq(sbx_terminate(c, web, NULL), SBX_OK);
        sbx_close(c);
        bt->http = median(http, BAR_TRIES);
        bt->dns = median(dns, BAR_TRIES);
        bt->create = median(create, BAR_TRIES);
        bt->exec = median(exec, BAR_TRIES);
        bt->read = median(rd, BAR_TRIES);
        bt->tty = median(tty, BAR_TRIES);
}

static struct it_daemon d_bar;

/* The bar: while BOB sits at every budget at once, root's create, exec, read, exec -t and
 * allowlisted HTTP requests (a name of /etc/hosts, a name the nameserver answers) each
 * succeed within twice their median on the idle daemon (and 25 ms: one scheduling
 * hiccup of this 2-CPU machine is that long). */
START_TEST(test_one_user_at_every_budget) {
        struct rlimit rl = {NOFILE, NOFILE};
        const char *flags[] = {"--socket-group", "3100", "--max-frame-bytes", "4194304",
                               "--max-buffered", "64M", "--max-buffered-per-uid", "16M",
                               "--max-sandboxes", "8", "--max-commands-per-uid", "6",
                               "--max-connections-per-uid", "8", "--frame-timeout", "600",
                               NULL};
        struct bar_times idle, busy;
        int ready[2], stop[2];
        char said[2048];
        ssize_t n;
        pid_t bob;

        /* The daemon inherits it: 128 descriptors for the proxies, 32 of them BOB's. */
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        it_daemon_start(&d_bar, flags);
        root_times(&d_bar, &idle);
        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
        bob = fork();
        ck_assert_int_ge(bob, 0);
        if (bob == 0) {
                close(ready[0]);
                close(stop[1]);
                bob_at_every_budget(&d_bar, ready[1], stop[0]);
        }
        close(ready[1]);
        close(stop[0]);
        n = read(ready[0], said, sizeof(said) - 1);
        ck_assert_msg(n > 0, "BOB did not reach his budgets");
        said[n] = '\0';
        /* He is at them: one more of each was refused, naming its bound. */
        ck_assert_msg(strcmp(said, "ok") == 0, "BOB past a budget: %s", said);
        root_times(&d_bar, &busy);
        fprintf(stderr,
                "it_egress_budget bar: idle create %.1f exec %.1f read %.1f tty %.1f http %.1f "
                "dns %.1f ms; with BOB at every budget %.1f %.1f %.1f %.1f %.1f %.1f ms\n",
                idle.create, idle.exec, idle.read, idle.tty, idle.http, idle.dns, busy.create,
                busy.exec, busy.read, busy.tty, busy.http, busy.dns);
        ck_assert_msg(busy.create <= 2 * idle.create + 25, "create %.1f ms (idle %.1f)",
                      busy.create, idle.create);
        ck_assert_msg(busy.exec <= 2 * idle.exec + 25, "exec %.1f ms (idle %.1f)", busy.exec,
                      idle.exec);
        ck_assert_msg(busy.read <= 2 * idle.read + 25, "read %.1f ms (idle %.1f)", busy.read,
                      idle.read);
        ck_assert_msg(busy.tty <= 2 * idle.tty + 25, "exec -t %.1f ms (idle %.1f)", busy.tty,
                      idle.tty);
        ck_assert_msg(busy.http <= 2 * idle.http + 25, "http %.1f ms (idle %.1f)", busy.http,
                      idle.http);
        ck_assert_msg(busy.dns <= 2 * idle.dns + 25, "dns %.1f ms (idle %.1f)", busy.dns,
                      idle.dns);
        ck_assert_int_eq(write(stop[1], "s", 1), 1);
        ck_assert_int_eq(waitpid(bob, NULL, 0), bob);
        close(ready[0]);
        close(stop[1]);
        ck_assert_int_eq(it_daemon_stop(&d_bar), 0);
}
END_TEST

/* One case each, so that CK_RUN_CASE runs one alone. */
static void add_case(Suite *s, const char *name, const TTest *t) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, it_fixture_setup_var, it_fixture_teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, t);
        suite_add_tcase(s, tc);
}

static Suite *make_suite(void) {
        Suite *s = suite_create("egress_budget");

        add_case(s, "descriptors", descriptors_per_uid);
        add_case(s, "flags", budget_flags);
        add_case(s, "lookups", lookups_per_uid);
        add_case(s, "lookups_that_never_answer", lookups_that_never_answer);
        add_case(s, "deaf_lookups_of_four_sandboxes", deaf_lookups_of_four_sandboxes);
        add_case(s, "one_user_at_every_budget", test_one_user_at_every_budget);
        return s;
}

int main(void) {
        make_world();
        return networld_run(&W, make_suite());
}

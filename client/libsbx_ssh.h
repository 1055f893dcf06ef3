/* libsbx_ssh.h: the ssh:// transport of libsbx (libsbx_ssh.c), internal to the library.
 *
 * An ssh link is one `ssh [user@]host sbx dial-stdio [--socket PATH]` child of the
 * client: the client speaks the framed protocol over a socketpair that is the child's
 * stdin and stdout, and the child's stderr comes back on a pipe whose last bytes are kept
 * to explain a failure. The verbs: open, drain (read stderr while waiting), explain (why
 * the link ended), close (let ssh end, else end it, and reap it). */
#ifndef SBX_LIBSBX_SSH_H
#define SBX_LIBSBX_SSH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The prefix of a socket "path" that names a daemon on another machine. */
#define SSH_LINK_SCHEME "ssh://"
/* How much of the end of ssh's stderr is kept for the error message. */
#define SSH_LINK_TAIL_BYTES 2048u

struct ssh_link {
        pid_t pid;   /* the ssh child, 0 when there is none */
        int err_fd;  /* read end of its stderr (non-blocking), -1 once at its end */
        bool reaped; /* waited for: status is its wait status (-1: reaped by someone else) */
        int status;
        size_t tail_len;
        char tail[SSH_LINK_TAIL_BYTES];
};

/* An ssh link with nothing open. */
void ssh_link_init(struct ssh_link *l);

/* True when s is an ssh:// URL rather than a socket path. */
bool ssh_link_is_url(const char *s);

/* Starts ssh for url (ssh://[user@]host[:port][/path/to/socket]) as the environment
 * says (SBX_SSH, SBX_SSH_OPTS, SBX_SSH_REMOTE_SBX; see sbx.h). stream: the connection
 * will become a stream of OpenPort, and the remote `sbx dial-stdio --end-with-daemon`
 * ends with the daemon's side (ssh cannot pass on a half-close to one socket). Returns 0 with *ret_fd, the
 * client's end of the connection (close-on-exec, owned by the caller), or -EINVAL for a
 * bad URL, -ENOMEM, or the -errno of a failed start; then *ret_msg is a new message
 * (NULL when memory ran out) and nothing is left open. l must be closed (or just
 * initialised). */
int ssh_link_open(struct ssh_link *l, const char *url, bool stream, int *ret_fd, char **ret_msg);

/* Reads what ssh wrote on stderr so far, keeping the end of it. Call when l->err_fd
 * polls readable; never blocks. */
void ssh_link_drain(struct ssh_link *l);

/* After the connection to the daemon ended (or timed out): waits at most wait_ms for ssh
 * to exit, and returns a new message saying why the link failed, in ssh's own words
 * ("ssh exited with status 255: Host key verification failed. (...hint)"), or NULL when
 * ssh has nothing to add (it is still running and said nothing, or it exited 0 without
 * a word) or memory ran out. */
char *ssh_link_explain(struct ssh_link *l, int wait_ms);

/* True when the link has nothing open any more: ssh had exited and is now reaped (its
 * stderr read and closed), or there was none. Never blocks. */
bool ssh_link_reap(struct ssh_link *l);

/* Ends the link after the caller closed its end of the connection: gives ssh grace_ms to
 * exit by itself, then SIGTERM, then SIGKILL (to its pid only), and reaps it. Accepts a
 * link with nothing open. */
void ssh_link_close(struct ssh_link *l, int grace_ms);

#endif

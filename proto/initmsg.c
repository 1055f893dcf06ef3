/* initmsg.c: sendmsg/recvmsg of one init-channel packet with SCM_RIGHTS descriptors.
 *
 * Owns nothing. Called by the daemon's sandbox module and by the init helper. */
#include "initmsg.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx_limits.h"

int initmsg_send(int sock, const ProtobufCMessage *msg, const int *fds, size_t nfds) {
        uint8_t buf[SBX_INIT_MAX_MSG_BYTES];
        size_t len = protobuf_c_message_get_packed_size(msg);

        if (len > sizeof(buf))
                return -EMSGSIZE;
        protobuf_c_message_pack(msg, buf);
        return initmsg_send_packed(sock, buf, len, fds, nfds);
}

int initmsg_send_packed(int sock, const uint8_t *buf, size_t len, const int *fds, size_t nfds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_INIT_MAX_FDS)];
        } ctl;
        struct iovec iov;
        struct msghdr mh;
        ssize_t n;

        if (len > SBX_INIT_MAX_MSG_BYTES || nfds > SBX_INIT_MAX_FDS)
                return -EMSGSIZE;
        /* A zero-length packet reads as end of stream on SOCK_SEQPACKET. Every message
         * of init.proto has its oneof set, so an empty encoding is a caller bug. */
        if (len == 0)
                return -EINVAL;
        memset(&mh, 0, sizeof(mh));
        iov.iov_base = (void *)(uintptr_t)buf;
        iov.iov_len = len;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        if (nfds > 0) {
                struct cmsghdr *cm;
                memset(&ctl, 0, sizeof(ctl));
                mh.msg_control = ctl.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
                cm = CMSG_FIRSTHDR(&mh);
                if (!cm)
                        return -EINVAL;
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
        }
        do
                n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        return (size_t)n == len ? 0 : -EIO;
}

int initmsg_recv(int sock, uint8_t *buf, size_t cap, int *fds, size_t max_fds, size_t *ret_len,
                 size_t *ret_nfds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_INIT_MAX_FDS)];
        } ctl;
        struct iovec iov = {.iov_base = buf, .iov_len = cap};
        struct msghdr mh;
        struct cmsghdr *cm;
        size_t nfds = 0;
        int truncated;
        ssize_t n;

        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;

        truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
        for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                size_t i, k;
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (nfds < max_fds && !truncated)
                                fds[nfds++] = fd;
                        else {
                                close(fd);
                                truncated = 1;
                        }
                }
        }
        if (truncated) {
                while (nfds > 0)
                        close(fds[--nfds]);
                return -EMSGSIZE;
        }
        if (n == 0 && nfds == 0)
                return 0;
        *ret_len = (size_t)n;
        *ret_nfds = nfds;
        return 1;
}

# The one build of sbxd. `make` builds everything into $(BUILD); `make check` runs the
# whole test suite; `make run` starts the daemon in the foreground. See README.md.

BUILD ?= build
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec/sbxd
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system

CC ?= gcc
PROTOC_C ?= protoc-c
PKG_CONFIG ?= pkg-config

# Debian packages the build, the tests and `make run` need. libjansson-dev: the JSON of
# the sbx tool (--json and `sbx mcp`); why jansson is said in client/cli_json.c.
# libssl-dev: the daemon's SHA-256 (libcrypto), see daemon/digest.h.
# libarchive-dev: image layers (tar, gzip, zstd), see daemon/layer.h; the daemon reads
# image JSON with jansson too (daemon/imageimport.h).
DEPS_PKGS := gcc libc6-dev make pkg-config libuv1-dev libprotobuf-c-dev protobuf-c-compiler \
	libseccomp-dev libsqlite3-dev check util-linux procps iproute2 python3 git \
	bubblewrap libjansson-dev e2fsprogs libssl-dev libarchive-dev
# libcurl4-openssl-dev: the registry client's HTTP (daemon/registry.h says why curl).
DEPS_PKGS += libcurl4-openssl-dev

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
	-Wcast-qual -Wformat=2 -Wswitch-enum -Wundef -Wvla -Wno-unused-parameter
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC
WERROR ?=
OPT ?= -O2 -g
SANITIZE ?=
# The init helper runs under seccomp and in fresh namespaces: never sanitized.
INIT_SANITIZE :=

PKGS := libuv libprotobuf-c libseccomp sqlite3 libcrypto libarchive
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
# jansson: the sbx tool, the daemon's image store and the tests that read JSON link it.
JANSSON_CFLAGS = $(shell $(PKG_CONFIG) --cflags jansson 2>/dev/null)
JANSSON_LIBS = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null || echo -ljansson)

CPPFLAGS_ALL = -D_GNU_SOURCE -Iproto -I$(BUILD)/gen -Idaemon -Iclient \
	-DSBX_LIBEXECDIR='"$(LIBEXECDIR)"'
CFLAGS_ALL = -std=gnu11 $(OPT) $(WARN) $(WERROR) $(HARDEN) $(PKG_CFLAGS) $(JANSSON_CFLAGS) \
	$(CPPFLAGS_ALL)
LDFLAGS_ALL = -pie -Wl,-z,relro,-z,now
# Still position independent (ASLR) and fully read-only after relocation.
STATIC_LDFLAGS = -static-pie -Wl,-z,relro,-z,now

LIBS_DAEMON = -luv -lprotobuf-c -lsqlite3 -lseccomp -lcrypto -larchive $(JANSSON_LIBS) -lm
# The registry client (daemon/registry.c): curl for HTTP.
LIBS_DAEMON += -lcurl
LIBS_INIT = -lprotobuf-c -lseccomp

PROTO_GEN := $(BUILD)/gen/sbx.pb-c.c $(BUILD)/gen/init.pb-c.c
PROTO_HDRS := $(PROTO_GEN:.c=.h)

PROTO_SRCS := proto/frame.c proto/pathcheck.c
DAEMON_SRCS := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
INIT_SRCS := $(filter-out daemon/init/main.c,$(wildcard daemon/init/*.c))
LIBSBX_SRCS := $(wildcard client/libsbx*.c)
CLI_SRCS := $(wildcard client/cli*.c)
UNIT_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/check_*.c))
IT_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/it_*.c))
TEST_HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
GEN_OBJS := $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_GEN))
PROTO_OBJS := $(call obj,$(PROTO_SRCS)) $(BUILD)/obj/gen/sbx.pb-c.o
DAEMON_OBJS := $(call obj,$(DAEMON_SRCS)) $(PROTO_OBJS) $(BUILD)/obj/gen/init.pb-c.o \
	$(BUILD)/obj/proto/initmsg.o $(BUILD)/obj/proto/mountinfo.o
INIT_OBJS := $(call obj,$(INIT_SRCS)) $(BUILD)/obj/gen/init.pb-c.o $(BUILD)/obj/proto/initmsg.o \
	$(BUILD)/obj/proto/mountinfo.o
LIBSBX_OBJS := $(call obj,$(LIBSBX_SRCS)) $(PROTO_OBJS)

MANPAGES := man1/sbx.1 man3/libsbx.3 man8/sbxd.8
ALL_BINS := $(BUILD)/sbxd $(BUILD)/sbx-init $(BUILD)/sbx $(BUILD)/libsbx.so $(BUILD)/libsbx.a \
	$(BUILD)/libsbx.so.0 $(BUILD)/sbx.pc $(BUILD)/sbx-uninstalled.pc \
	$(addprefix $(BUILD)/man/,$(MANPAGES))

.PHONY: all deps run check unit integration asan valgrind format install uninstall clean analyze \
	bench fuzz load tests mcp-node mcp-node-pkgs check-mcp check-python test-pkgs
all: $(ALL_BINS)

# ---- dependencies -----------------------------------------------------------------
# Installs the Debian packages of $(1) that are missing (apt-get update first).
define install_pkgs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_pkgs,$(DEPS_PKGS))

# Extra tools some targets need: clang and its fuzzer runtime, the static analysers.
FUZZ_PKGS := clang libclang-rt-14-dev
ANALYZE_PKGS := cppcheck clang-tidy

# tests/it_ssh.c starts an OpenSSH server of its own (its own config, host key and port
# on 127.0.0.1) and reaches sbxd through it with the ssh client: the suites that run it
# install both. Debian's openssh-server package also enables its own ssh.service on a
# machine that runs systemd; the tests never use that one (`systemctl disable --now ssh`
# turns it off again).
SSH_TEST_PKGS := openssh-server openssh-client
# tests/it_egress.c: curl inside sandboxes, openssl for its TLS server's throwaway key;
# tests/it_rootless.c: newgidmap (uidmap), with which rootless sandboxes drop groups.
# tests/check_imagestore.c: test images made with umoci and skopeo from busybox-static.
TEST_PKGS := $(SSH_TEST_PKGS) curl openssl uidmap umoci skopeo busybox-static
# tests/check_registry.c: Distribution registries of its own on loopback ports, images
# built with umoci and pushed with skopeo. (On a machine that runs systemd, Debian's
# docker-registry package also enables its docker-registry.service; the test never uses
# it: `systemctl disable --now docker-registry` turns it off.)
TEST_PKGS += docker-registry
# tests/it_image_sandbox.c: a real Debian image made with mmdebstrap from the Debian
# archive apt reaches (tests/mkdebian.sh; cached in $(BUILD)/images).
TEST_PKGS += mmdebstrap
# tests/check_layerwrite.c and it_snapshot.c: an XFS loop filesystem that shares blocks.
TEST_PKGS += xfsprogs

test-pkgs:
	$(call install_pkgs,$(TEST_PKGS))

# ---- generated protobuf code --------------------------------------------------------
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) -Iproto --c_out=$(BUILD)/gen $<

# ---- objects ------------------------------------------------------------------------
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -Wno-cast-qual $(SANITIZE) -c $< -o $@

$(BUILD)/obj/daemon/init/%.o: daemon/init/%.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(INIT_SANITIZE) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANITIZE) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- programs and libraries ---------------------------------------------------------
$(BUILD)/sbxd: $(BUILD)/obj/daemon/main.o $(DAEMON_OBJS)
	$(CC) $(SANITIZE) $(LDFLAGS_ALL) -o $@ $^ $(LIBS_DAEMON)

# The init helper's objects (and the generated init.pb-c code it uses) are built
# without sanitizers, into their own directory.
$(BUILD)/obj-init/gen/init.pb-c.o: $(BUILD)/gen/init.pb-c.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -Wno-cast-qual -c $< -o $@

INIT_BIN_OBJS := $(patsubst $(BUILD)/obj/%,$(BUILD)/obj-init/%,$(call obj,daemon/init/main.c $(INIT_SRCS))) \
	$(BUILD)/obj-init/gen/init.pb-c.o $(BUILD)/obj-init/proto/initmsg.o \
	$(BUILD)/obj-init/proto/mountinfo.o

$(BUILD)/obj-init/proto/%.o: proto/%.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/obj-init/daemon/init/%.o: daemon/init/%.c $(PROTO_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

# sbx-init is linked statically (static-pie) for the reasons sbx is (below), and one
# more: each idle sandbox keeps two of it, and the pages a dynamic loader dirties
# (relocated tables of libc, libprotobuf-c, libseccomp) are private to each process.
$(BUILD)/sbx-init: $(INIT_BIN_OBJS)
	$(CC) $(STATIC_LDFLAGS) -o $@ $^ $(LIBS_INIT)

$(BUILD)/libsbx.so: $(LIBSBX_OBJS) client/libsbx.map
	$(CC) $(SANITIZE) -shared -Wl,-soname,libsbx.so.0 -Wl,--version-script=client/libsbx.map \
	  -Wl,-z,relro,-z,now -o $@ $(LIBSBX_OBJS) -lprotobuf-c

# The name the dynamic linker looks for (the soname), as in an install.
$(BUILD)/libsbx.so.0: $(BUILD)/libsbx.so
	ln -sfn libsbx.so $@

$(BUILD)/libsbx.a: $(LIBSBX_OBJS)
	rm -f $@ && ar rcs $@ $^

# The MCP server (cli_mcp.c) runs each command on a thread of its own: -pthread.
# sbx is a process per command, so it is linked statically (static-pie: still ASLR and
# full RELRO): no dynamic loader, no libraries to map and relocate at each start. That
# took `sbx exec ID -- true` from 2.11 to 1.85 ms (medians of 300, interleaved). It
# uses nothing of glibc that needs shared objects at run time (no NSS, no iconv, no
# locales). A sanitized or valgrind build links it dynamically (CLI_STATIC=).
CLI_STATIC ?= $(if $(SANITIZE),,yes)
CLI_LDFLAGS = $(if $(CLI_STATIC),$(STATIC_LDFLAGS),$(LDFLAGS_ALL))
$(BUILD)/sbx: $(call obj,$(CLI_SRCS)) $(BUILD)/libsbx.a
	$(CC) $(SANITIZE) $(CLI_LDFLAGS) -pthread -o $@ $(call obj,$(CLI_SRCS)) $(BUILD)/libsbx.a \
	  -lprotobuf-c $(JANSSON_LIBS) -lm

$(BUILD)/sbx.pc: client/sbx.pc.in
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	  -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|0.1.0|g' $< > $@

$(BUILD)/sbx-uninstalled.pc: client/sbx-uninstalled.pc.in $(BUILD)/sbx.pc
	sed -e 's|@SRCDIR@|$(CURDIR)|g' -e 's|@BUILDDIR@|$(abspath $(BUILD))|g' \
	  -e "s|@VERSION@|$$(sed -n 's/^Version: //p' $(BUILD)/sbx.pc)|g" $< > $@

# The man pages with this build's paths, to read from the tree: man -l build/man/man1/sbx.1
define man_rule
$(BUILD)/man/$(1)/%: man/% $(BUILD)/sbx.pc
	@mkdir -p $$(dir $$@)
	$$(SUBST) $$< > $$@
endef
$(foreach d,man1 man3 man8,$(eval $(call man_rule,$(d))))

# ---- tests --------------------------------------------------------------------------
# Unit tests link the module objects under test, never main.c. check_init_* tests the
# init helper's modules, check_client* the client library, the rest the daemon core.
# Static pattern rules: make must never fall back to the daemon rule for these.
INIT_UNIT_TESTS := $(filter $(BUILD)/tests/check_init_%,$(UNIT_TESTS))
CLIENT_UNIT_TESTS := $(filter $(BUILD)/tests/check_client%,$(UNIT_TESTS))
DAEMON_UNIT_TESTS := $(filter-out $(INIT_UNIT_TESTS) $(CLIENT_UNIT_TESTS),$(UNIT_TESTS))

$(INIT_UNIT_TESTS): $(BUILD)/tests/check_init_%: tests/check_init_%.c $(INIT_OBJS) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANITIZE) $(CHECK_CFLAGS) -Itests $(LDFLAGS_ALL) -o $@ $< \
	  $(INIT_OBJS) $(LIBS_INIT) $(CHECK_LIBS)

$(CLIENT_UNIT_TESTS): $(BUILD)/tests/check_client%: tests/check_client%.c $(LIBSBX_OBJS) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANITIZE) $(CHECK_CFLAGS) -Itests $(LDFLAGS_ALL) -o $@ $< \
	  $(LIBSBX_OBJS) $(CLIENT_TEST_EXTRA) -lprotobuf-c $(CHECK_LIBS)

# check_client_json tests the sbx tool's JSON writer: its object, and jansson.
$(BUILD)/tests/check_client_json: $(BUILD)/obj/client/cli_json.o
$(BUILD)/tests/check_client_json: CLIENT_TEST_EXTRA = $(BUILD)/obj/client/cli_json.o $(JANSSON_LIBS)

$(DAEMON_UNIT_TESTS): $(BUILD)/tests/check_%: tests/check_%.c $(DAEMON_OBJS) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANITIZE) $(CHECK_CFLAGS) -Itests $(LDFLAGS_ALL) -o $@ $< \
	  $(DAEMON_OBJS) $(LIBS_DAEMON) $(CHECK_LIBS)

$(BUILD)/tests/it_%: tests/it_%.c tests/itutil.c tests/itutil.h tests/asbob.h tests/networld.h tests/portserver.h tests/sshd.h tests/testutil.h \
  tests/imgtest.h tests/snaptest.h \
  $(BUILD)/libsbx.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(SANITIZE) $(CHECK_CFLAGS) -Itests $(LDFLAGS_ALL) -o $@ $< \
	  tests/itutil.c $(BUILD)/libsbx.a -lprotobuf-c -lsqlite3 $(IT_EXTRA_LIBS) $(CHECK_LIBS)

# ---- the MCP server's tests ---------------------------------------------------------------
# tests/it_mcp.c reads the server's answers with jansson, and drives the server with the
# official TypeScript SDK as well (tests/mcp/client.mjs). `make mcp-node` installs node and
# npm when there are none (Debian's nodejs and npm) and the SDK from the npm registry into
# $(BUILD)/mcp-node. When npm cannot reach the registry the step says so and goes on, and
# that test prints SKIPPED; with SBX_REQUIRE_NPM=1 it fails instead. The SDK is held to
# major version 1, whose Client and StdioClientTransport the test is written against.
# `make check-mcp` builds and runs it_mcp alone.
$(BUILD)/tests/it_mcp: IT_EXTRA_LIBS = $(JANSSON_LIBS)
MCP_NODE := $(BUILD)/mcp-node
MCP_SDK := @modelcontextprotocol/sdk@^1
MCP_NODE_PKGS := nodejs npm

mcp-node:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory mcp-node-pkgs || \
	    echo "make: WARNING: cannot install $(MCP_NODE_PKGS); the TypeScript SDK test will say SKIPPED"; \
	fi
	@if [ -f $(MCP_NODE)/node_modules/@modelcontextprotocol/sdk/package.json ]; then :; \
	elif ! command -v npm >/dev/null 2>&1; then :; \
	elif mkdir -p $(MCP_NODE) && npm install --prefix $(MCP_NODE) --no-audit --no-fund \
	    --loglevel=error '$(MCP_SDK)' > $(MCP_NODE)/npm.log 2>&1; then \
	  echo "make: installed $(MCP_SDK) into $(MCP_NODE)"; \
	else \
	  echo "make: WARNING: npm could not install $(MCP_SDK) (see $(MCP_NODE)/npm.log);" \
	    "the TypeScript SDK test will say SKIPPED"; \
	fi

mcp-node-pkgs:
	$(call install_pkgs,$(MCP_NODE_PKGS))

check-mcp: deps mcp-node
	$(MAKE) --no-print-directory WERROR=-Werror $(ALL_BINS) $(BUILD)/tests/it_mcp
	BUILD=$(BUILD) tests/run.sh $(BUILD)/tests/it_mcp

# Small programs the integration tests run inside sandboxes or beside the daemon.
$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -Wall -o $@ $< -lpthread

tests: $(ALL_BINS) $(UNIT_TESTS) $(IT_TESTS) $(TEST_HELPERS)

# `make check`: dependencies, a warnings-as-errors build, then every test.
check: deps mcp-node test-pkgs
	$(MAKE) --no-print-directory WERROR=-Werror tests
	BUILD=$(BUILD) tests/run.sh $(UNIT_TESTS) $(IT_TESTS) tests/python/run.py

# The Python binding's suite alone (client/python against build/libsbx.so and a real sbxd).
# It is left out of `make asan` and `make valgrind`: libsbx under the interpreter is the
# same code the C suites already run sanitized.
check-python: deps
	$(MAKE) --no-print-directory WERROR=-Werror $(ALL_BINS)
	BUILD=$(BUILD) tests/run.sh tests/python/run.py

unit: tests
	BUILD=$(BUILD) tests/run.sh $(UNIT_TESTS)

integration: tests test-pkgs
	BUILD=$(BUILD) tests/run.sh $(IT_TESTS)

# ASan + UBSan over the whole suite (leak checking on). The init helper stays unsanitized.
asan: deps test-pkgs
	$(MAKE) --no-print-directory BUILD=build/asan WERROR=-Werror OPT="-O1 -g -fno-omit-frame-pointer" \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all" tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  BUILD=build/asan tests/run.sh $(patsubst $(BUILD)/%,build/asan/%,$(UNIT_TESTS) $(IT_TESTS))

valgrind: deps test-pkgs
	$(MAKE) --no-print-directory BUILD=build/vg OPT="-O0 -g" CLI_STATIC= tests
	SBX_VALGRIND=1 BUILD=build/vg tests/run.sh $(patsubst $(BUILD)/%,build/vg/%,$(UNIT_TESTS) $(IT_TESTS))

# ---- benchmarks, fuzzing, load -------------------------------------------------------
# `make bench`: tests/bench/*.c is one program comparing sbxd against baselines measured
# in the same run; it prints a table and writes $(BUILD)/bench.json.
BENCH_SRCS := $(wildcard tests/bench/*.c)
$(BUILD)/tests/bench/sbx_bench: $(BENCH_SRCS) $(BUILD)/libsbx.a tests/itutil.c tests/itutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests $(LDFLAGS_ALL) -o $@ $(BENCH_SRCS) tests/itutil.c \
	  $(BUILD)/libsbx.a -lprotobuf-c -lsqlite3 -lpthread -lm $(CHECK_LIBS)

# The image case builds a Debian image with mmdebstrap and unpacks it with skopeo and
# umoci (test-pkgs), cached in $(BUILD)/images as the tests cache it.
bench: deps test-pkgs
	$(MAKE) --no-print-directory all $(BUILD)/tests/bench/sbx_bench
	BUILD=$(BUILD) $(BUILD)/tests/bench/sbx_bench --json $(BUILD)/bench.json $(BENCH_FLAGS)

# `make fuzz FUZZ_SECONDS=N`: each tests/fuzz/fuzz_NAME.c is a libFuzzer target built
# with clang (ASan+UBSan) against the daemon's modules, run for N seconds on the seed
# corpus tests/fuzz/corpus/NAME (new inputs go to $(BUILD)/fuzz/corpus/NAME).
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,$(FUZZ_BUILD)/fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined $(PKG_CFLAGS) \
	$(CPPFLAGS_ALL) -I$(FUZZ_BUILD)/gen -Itests
FUZZ_LIB_SRCS := $(DAEMON_SRCS) $(PROTO_SRCS) proto/initmsg.c proto/mountinfo.c

$(FUZZ_BUILD)/gen/%.pb-c.c $(FUZZ_BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(FUZZ_BUILD)/gen
	$(PROTOC_C) -Iproto --c_out=$(FUZZ_BUILD)/gen $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_SRCS) $(FUZZ_BUILD)/gen/sbx.pb-c.c $(FUZZ_BUILD)/gen/init.pb-c.c
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_SRCS) \
	  $(FUZZ_BUILD)/gen/sbx.pb-c.c $(FUZZ_BUILD)/gen/init.pb-c.c $(LIBS_DAEMON)

fuzz: deps
	$(call install_pkgs,$(FUZZ_PKGS))
	$(MAKE) --no-print-directory $(FUZZ_TARGETS)
	@set -e; for t in $(FUZZ_TARGETS); do n=$$(basename $$t | sed 's/^fuzz_//'); \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS) s"; \
	  $$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$n- $(FUZZ_BUILD)/corpus/$$n tests/fuzz/corpus/$$n; \
	done

# `make load`: the load test (tests/it_load.c, whose short version runs in `make check`)
# for LOAD_SECONDS with LOAD_CLIENTS clients.
LOAD_SECONDS ?= 60
LOAD_CLIENTS ?= 16
load: deps
	$(MAKE) --no-print-directory all $(BUILD)/tests/it_load
	SBX_LOAD_SECONDS=$(LOAD_SECONDS) SBX_LOAD_CLIENTS=$(LOAD_CLIENTS) \
	  BUILD=$(BUILD) tests/run.sh $(BUILD)/tests/it_load

# `make analyze`: cppcheck (findings fail), then gcc -fanalyzer and clang-tidy (reports
# to read: both still flag ownership hand-overs they cannot follow).
ANALYZE_SRCS := $(PROTO_SRCS) proto/initmsg.c proto/mountinfo.c daemon/main.c $(DAEMON_SRCS) daemon/init/main.c \
	$(INIT_SRCS) $(LIBSBX_SRCS) $(CLI_SRCS)
analyze: $(PROTO_HDRS)
	$(call install_pkgs,$(ANALYZE_PKGS))
	cppcheck --quiet --error-exitcode=1 --platform=unix64 --enable=warning,portability \
	  --inline-suppr -D_GNU_SOURCE -DPROTOBUF_C_VERSION_NUMBER=1004001 -Iproto -I$(BUILD)/gen \
	  -Idaemon -Iclient --suppress=missingIncludeSystem $(ANALYZE_SRCS)
	-for f in $(ANALYZE_SRCS); do $(CC) $(CFLAGS_ALL) -fanalyzer -c $$f -o /dev/null; done
	-clang-tidy --quiet $(ANALYZE_SRCS) -- $(CFLAGS_ALL)

run: deps
	$(MAKE) --no-print-directory all
	$(BUILD)/sbxd $(SBXD_FLAGS)

format:
	clang-format -i $(wildcard proto/*.[ch] daemon/*.[ch] daemon/init/*.[ch] client/*.[ch] \
	  tests/*.[ch] tests/helpers/*.c)

# ---- install ------------------------------------------------------------------------
# `make install PREFIX=/usr` for a system install; DESTDIR stages it for a package (every
# path written into a file names the final PREFIX, never DESTDIR). Paths are substituted
# into the units, the man pages and sbx.pc here, at install time, so they follow the
# PREFIX given to `make install` even when the build was made with another one. sbxd's
# compiled-in default for its helper (SBX_LIBEXECDIR) cannot follow: the unit passes
# --init explicitly, and install says so when the two differ.
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
UNITS := sbxd.service sbxd.socket
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@BINDIR@|$(BINDIR)|g' \
	-e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	-e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	-e 's|@UNITDIR@|$(UNITDIR)|g' -e 's|@SYSUSERSDIR@|$(SYSUSERSDIR)|g' \
	-e 's|@TMPFILESDIR@|$(TMPFILESDIR)|g' \
	-e "s|@VERSION@|$$(sed -n 's/^Version: //p' $(BUILD)/sbx.pc)|g"

# The Python package goes where Debian's python3 looks: /usr/lib/python3/dist-packages for
# PREFIX=/usr, $(PREFIX)/lib/python3.X/dist-packages otherwise (on sys.path for /usr/local).
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3)/dist-packages)
PY_FILES := $(wildcard client/python/sbx/*.py) client/python/sbx/py.typed

INSTALLED_FILES = $(SBINDIR)/sbxd $(LIBEXECDIR)/sbx-init $(BINDIR)/sbx \
	$(LIBDIR)/libsbx.so.0 $(LIBDIR)/libsbx.so $(LIBDIR)/libsbx.a $(INCLUDEDIR)/sbx.h \
	$(LIBDIR)/pkgconfig/sbx.pc $(addprefix $(UNITDIR)/,$(UNITS)) \
	$(SYSUSERSDIR)/sbxd.conf $(TMPFILESDIR)/sbxd.conf $(addprefix $(MANDIR)/,$(MANPAGES)) \
	$(addprefix $(PYTHONDIR)/sbx/,$(notdir $(PY_FILES)) _installed.py)

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	  $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(PYTHONDIR)/sbx
	install -m 0755 $(BUILD)/sbxd $(DESTDIR)$(SBINDIR)/sbxd
	install -m 0755 $(BUILD)/sbx-init $(DESTDIR)$(LIBEXECDIR)/sbx-init
	install -m 0755 $(BUILD)/sbx $(DESTDIR)$(BINDIR)/sbx
	install -m 0644 $(BUILD)/libsbx.so $(DESTDIR)$(LIBDIR)/libsbx.so.0
	ln -sfn libsbx.so.0 $(DESTDIR)$(LIBDIR)/libsbx.so
	install -m 0644 $(BUILD)/libsbx.a $(DESTDIR)$(LIBDIR)/libsbx.a
	install -m 0644 client/sbx.h $(DESTDIR)$(INCLUDEDIR)/sbx.h
	$(SUBST) client/sbx.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/sbx.pc
	chmod 0644 $(DESTDIR)$(LIBDIR)/pkgconfig/sbx.pc
	for u in $(UNITS); do \
	  $(SUBST) systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -m 0644 systemd/sbxd.sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/sbxd.conf
	install -m 0644 systemd/sbxd.tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/sbxd.conf
	for m in $(MANPAGES); do \
	  $(SUBST) man/$${m#*/} > $(DESTDIR)$(MANDIR)/$$m && chmod 0644 $(DESTDIR)$(MANDIR)/$$m || exit 1; \
	done
	install -m 0644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/sbx/
	printf '# Written by make install: where libsbx went.\nLIBDIR = "%s"\n' '$(LIBDIR)' \
	  > $(DESTDIR)$(PYTHONDIR)/sbx/_installed.py
	chmod 0644 $(DESTDIR)$(PYTHONDIR)/sbx/_installed.py
	@grep -qF '$(LIBEXECDIR)/sbx-init' $(BUILD)/sbxd || \
	  echo "make install: note: $(BUILD)/sbxd was built with another PREFIX; run by hand it" \
	    "looks for its helper elsewhere (pass --init $(LIBEXECDIR)/sbx-init, or rebuild" \
	    "with 'make clean && make PREFIX=$(PREFIX)'); sbxd.service passes --init itself."

# `make check-systemd` (never part of `make check`): the service tests of it_service.c
# plus booting a real systemd as PID 1 in a container (systemd-nspawn, from
# systemd-container, installed here when missing) that starts sbxd.socket and
# sbxd.service from a staged `make install` and drives them with sbx. Needs root.
.PHONY: check-systemd
check-systemd: deps
	@dpkg-query -W -f='$${Status}' systemd-container 2>/dev/null | grep -q "ok installed" || { \
	  echo "make check-systemd: installing systemd-container"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    systemd-container; }
	$(MAKE) --no-print-directory WERROR=-Werror all $(BUILD)/tests/it_service
	SBX_CHECK_SYSTEMD=1 BUILD=$(BUILD) tests/run.sh $(BUILD)/tests/it_service

# Removes exactly what install added (and the helper's own directory when empty).
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED_FILES))
	rm -rf $(DESTDIR)$(PYTHONDIR)/sbx/__pycache__
	rmdir $(DESTDIR)$(PYTHONDIR)/sbx $(DESTDIR)$(LIBEXECDIR) 2>/dev/null || true

clean:
	rm -rf build

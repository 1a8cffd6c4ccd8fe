# aas - one non-recursive Makefile. Objects and binaries go under $(B).
#   make            build aasd, aasctl, aas-mcp
#   make install    copy them to $(DESTDIR)$(PREFIX)/bin
#   make run        install packages, set up the private database, run aasd
#   make test       install packages, set up, run every test
#   make asan       the same tests against an AddressSanitizer/UBSan build
#   make variants   build, not run, what make asan and make fuzz run (make test too)
#   make bench      benchmarks (ratios against baselines run alongside)
#   make lint       layers, banned calls and format of every C file
#   make fuzz       every libFuzzer harness for FUZZ_SECONDS each (clang)
#   make clean

B       ?= build
CC      ?= gcc
PKGS    := libmicrohttpd jansson libpq libcrypto libvirt libvirt-qemu libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
CMOCKA_LIBS := $(shell pkg-config --libs cmocka)

# Quiet by default; V=1 shows whole command lines.
Q       := $(if $(V),,@)

OPT     ?= -O2
SAN     ?=
CFLAGS  := -std=c17 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla \
	-D_GNU_SOURCE -g $(OPT) $(SAN) -MMD -MP \
	-I. $(PKG_CFLAGS)
LDFLAGS := $(SAN) -pthread
# argon2id for passwords (base/passwd.c); plain -largon2 without pkg-config.
ARGON2_LIBS := $(shell pkg-config --libs libargon2 2>/dev/null || echo -largon2)
LDLIBS  := $(PKG_LIBS) $(ARGON2_LIBS) -lm

# One static library per layer, each built only from its own folder
# (docs in README.md, "Layers"); a program links the layers it uses.
BASE_SRC := \
	base/log.c base/err.c base/config.c base/config_table.c base/keys.c base/db.c base/migrate.c \
	base/jsonrpc.c base/jsonschema.c base/work.c base/ttlmap.c base/notify.c \
	base/utf8.c base/metrics.c base/mcpver.c base/mcpmeth.c base/buf.c base/num.c base/toolres.c base/b64.c \
	base/tally.c base/bq.c base/tar.c base/tar_rules.c base/tar_write.c base/tar_seen.c base/passwd.c base/passwd_gate.c base/html.c base/smtp.c base/gzip.c base/fetch.c base/fcopy.c base/fmt.c
VMM_SRC := vmm/vm_xml.c vmm/conlog.c vmm/uidpool.c vmm/oomwatch.c vmm/cgcaps.c \
	vmm/vm.c vmm/vm_console.c vmm/vm_domain.c vmm/vm_migrate.c vmm/vm_agent.c vmm/vpool.c \
	vmm/orch.c vmm/orch_host.c vmm/orch_files.c vmm/orch_vm.c vmm/orch_save.c vmm/orch_xml.c \
	vmm/guest.c vmm/guest_file.c vmm/guest_list.c vmm/guest_pty.c vmm/guest_listen.c vmm/guest_tree.c vmm/saveimg.c \
	vmm/netguard.c vmm/netguard_status.c vmm/aread.c \
	vmm/achan.c vmm/achan_io.c vmm/achan_frame.c vmm/achan_chan.c vmm/achan_exec.c vmm/achan_file.c vmm/achan_bound.c \
	vmm/image/aproto.c vmm/image/agent_tree.c vmm/image/agent_tree_commit.c vmm/image/gsys.c
# The QEMU guest agent's client (vmm/agent*.c): aasd speaks to its own
# aas-agent (vmm/achan.c); only the raw benchmark and the reply parser's
# fuzz harness use it, so it stays out of libaas.a.
QGA_SRC := vmm/agent.c vmm/agent_reply.c
BILLING_SRC := billing/price.c billing/ledger.c billing/billing.c
ACCOUNT_SRC := \
	account/accounts.c account/session.c account/attempts.c account/mailq.c account/websess.c \
	account/users.c account/users_change.c account/users_check.c account/users_revoke.c account/pay.c \
	account/pay_stripe.c account/oauth_rules.c account/oauth.c account/oauth_client.c \
	account/oauth_code.c account/oauth_token.c account/purge.c account/users_guard.c \
	account/users_grant.c account/pay_back.c
# The sandbox service's own files (sandbox/sandbox*.c) in their layer order,
# lowest first (sandbox/sandbox_int.h).
SANDBOX_SRC := \
	sandbox/catalog.c sandbox/reaper.c sandbox/hosts.c sandbox/place.c sandbox/preview.c \
	sandbox/preview_cookie.c sandbox/usage.c sandbox/settle.c sandbox/store.c sandbox/store_cmd.c \
	sandbox/store_port.c sandbox/store_money.c sandbox/store_maint.c sandbox/store_move.c \
	sandbox/store_pause.c sandbox/store_snap.c \
	sandbox/sandbox_net.c sandbox/sandbox_hosts.c sandbox/sandbox_core.c sandbox/sandbox_ports.c \
	sandbox/sandbox_io.c sandbox/sandbox_cmd.c sandbox/sandbox_tree.c sandbox/sandbox_pty.c \
	sandbox/sandbox_pause.c sandbox/sandbox_snap.c sandbox/sandbox_move.c sandbox/sandbox_maint.c \
	sandbox/sandbox.c
SERVICE_SRC := \
	service/app.c service/tools.c service/tool_info.c service/tool_sandbox.c service/tool_args.c \
	service/tool_files.c service/tool_cmd.c service/tasks.c service/task_cut.c
SERVER_SRC := \
	server/auth.c server/http.c server/http_reply.c server/http_head.c server/http_defer.c server/sse.c server/mcp.c server/mcp_caller.c server/mcp_post.c server/mcp_stream.c server/mcp_cred.c server/mcp_rpc.c server/mcp_era.c server/http_limits.c server/hlim.c \
	server/proxy.c server/proxy_px.c server/proxy_up.c server/proxy_head.c server/proxy_parse.c server/scrape.c server/card.c \
	server/rest.c server/rest_ops.c server/rest_query.c server/rest_openapi.c \
	server/ws.c server/pty.c server/pty_sess.c server/pty_ticket.c server/web.c server/web_page.c server/web_dash.c server/web_sbx.c server/web_usage.c server/web_pay.c server/npx.c \
	server/authsrv.c server/web_oauth.c server/ngcli.c server/deploy_check.c
GEN_SRC := $(B)/gen/embed_migrations.c $(B)/gen/embed_tools.c $(B)/gen/embed_openapi.c $(B)/gen/embed_web.c $(B)/gen/embed_npx.c

BASE_OBJ := $(BASE_SRC:%.c=$(B)/%.o) $(B)/gen/embed_migrations.o
LIB_OBJ := $(BASE_OBJ) $(VMM_SRC:%.c=$(B)/%.o) $(BILLING_SRC:%.c=$(B)/%.o) \
	$(ACCOUNT_SRC:%.c=$(B)/%.o) $(SANDBOX_SRC:%.c=$(B)/%.o) \
	$(SERVICE_SRC:%.c=$(B)/%.o) $(SERVER_SRC:%.c=$(B)/%.o) \
	$(B)/gen/embed_tools.o $(B)/gen/embed_openapi.o $(B)/gen/embed_web.o $(B)/gen/embed_npx.o
AASD_OBJ   := $(B)/server/aasd.o
AASCTL_OBJ := $(B)/server/aasctl.o

# aas-mcp, the stdio bridge to the REST API: its own modules over the base
# layer alone, and the tool catalogue.
BRIDGE_SRC := \
	bridge/br_config.c bridge/br_url.c bridge/br_http.c bridge/br_api.c \
	bridge/br_catalog.c bridge/br_tools.c bridge/br_path.c bridge/br_tree.c \
	bridge/br_plan.c bridge/br_local.c bridge/br_pack.c bridge/br_pull.c bridge/br_remote.c bridge/br_sync.c bridge/br_io.c \
	bridge/br_rpc.c
BRIDGE_OBJ := $(BRIDGE_SRC:%.c=$(B)/%.o) $(B)/gen/embed_bridge.o
BRIDGE_LIBS := $(shell pkg-config --libs libcurl jansson)
PREFIX  ?= /usr/local

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

# libFuzzer harnesses (tests/fuzz/): make test builds them with a plain
# main that replays their corpus; make fuzz builds them with clang and
# libFuzzer under build/fuzz and runs each for FUZZ_SECONDS.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/tests/%)
FUZZ_SECONDS ?= 60
FUZZ_LIBFUZZER ?=
FUZZ_MAIN := $(if $(FUZZ_LIBFUZZER),,$(B)/tests/fuzz/replay.o)
.SECONDARY: $(B)/tests/fuzz/replay.o

MIGRATIONS := $(sort $(wildcard schema/[0-9]*.sql))

.PHONY: all run test unit e2e asan bench clean image install lint fuzz variants asan-build fuzz-build test-long
all: $(B)/aasd $(B)/aasctl $(B)/aas-mcp

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/gen/%.o: $(B)/gen/%.c
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -Wno-overlength-strings -c -o $@ $<

$(B)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -Wall -Wextra -Werror -O2 -o $@ $<

$(B)/gen/embed_migrations.c: $(B)/embed $(MIGRATIONS)
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_migrations $@ $(MIGRATIONS)

$(B)/gen/embed_tools.c: $(B)/embed service/tools.json
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_tools $@ service/tools.json

$(B)/gen/embed_bridge.c: $(B)/embed bridge/bridge_tools.json
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_bridge_tools $@ bridge/bridge_tools.json

$(B)/gen/embed_openapi.c: $(B)/embed server/openapi.json
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_openapi $@ server/openapi.json

$(B)/gen/embed_npx.c: $(B)/embed bridge/npx/aas-mcp-remote.js
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_npx $@ bridge/npx/aas-mcp-remote.js

WEB_ASSETS := server/web/app.css server/web/app.js server/web/icon.svg
$(B)/gen/embed_web.c: $(B)/embed $(WEB_ASSETS)
	@mkdir -p $(dir $@)
	$(Q)$(B)/embed embed_web $@ $(WEB_ASSETS)

$(B)/libaas.a: $(LIB_OBJ)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(B)/aasd: $(AASD_OBJ) $(B)/libaas.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/aasctl: $(AASCTL_OBJ) $(B)/libaas.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/libbridge.a: $(BRIDGE_OBJ)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(B)/libqga.a: $(QGA_SRC:%.c=$(B)/%.o)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(B)/libbase.a: $(BASE_OBJ)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(B)/aas-mcp: $(B)/bridge/bridge_main.o $(B)/libbridge.a $(B)/gen/embed_tools.o $(B)/libbase.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BRIDGE_LIBS)

# The bridge's unit tests link its library too (the shorter stem wins).
$(B)/tests/test_bridge_%: tests/unit/test_bridge_%.c $(B)/libbridge.a $(B)/libaas.a
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libbridge.a $(B)/libaas.a $(LDLIBS) \
	    $(CMOCKA_LIBS)

# The sandbox service's tests link the real service, billing and base code
# with a fake hypervisor and guest (tests/unit/fake_vmm.c) in place of every
# vmm/ function sandbox/*.c and service/*.c call. The list is read from the sources, so a
# new call without a stand-in fails to link instead of reaching libvirt.
SVC_TEST_OBJ := $(B)/tests/unit/fake_vmm.o $(B)/tests/unit/service_fixture.o
VMM_CALL_RE := \b(orch|guest|agent|vm|netguard)_[a-z0-9_]+ *[(]
SVC_VMM_CALLS := $(sort $(filter \
	$(shell grep -ohE '$(VMM_CALL_RE)' vmm/*.h | tr -d ' \050'), \
	$(shell grep -ohE '$(VMM_CALL_RE)' sandbox/*.c service/*.c | tr -d ' \050')))
SVC_WRAP := $(foreach f,$(SVC_VMM_CALLS),-Wl,--wrap=$(f))

# The agent protocol tests' shared set-up (tests/unit/achan_fixture.c).
ACHAN_TEST_OBJ := $(B)/tests/unit/achan_fixture.o

# Targets of their own: a pattern rule's prerequisite that does not exist
# yet would make the generic test rule below win.
$(SVC_TEST_OBJ) $(ACHAN_TEST_OBJ): $(B)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

# The revocation test runs code between a key lookup's query and its cache
# insert: it wraps db_query.
$(B)/tests/test_service_revoke: SVC_WRAP += -Wl,--wrap=db_query

$(B)/tests/test_service_%: tests/unit/test_service_%.c $(SVC_TEST_OBJ) $(B)/libaas.a
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(SVC_WRAP) -o $@ $< $(SVC_TEST_OBJ) $(B)/libaas.a \
	    $(LDLIBS) $(CMOCKA_LIBS)

# The guest agent reply parser's harness links the qemu-ga client too.
FUZZ_LIBS :=
$(B)/tests/fuzz_agent_reply: FUZZ_LIBS := $(B)/libqga.a
$(B)/tests/fuzz_agent_reply: $(B)/libqga.a

$(B)/tests/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_MAIN) $(B)/libbridge.a $(B)/libaas.a
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $(if $(FUZZ_LIBFUZZER),-fsanitize=fuzzer) -o $@ $< \
	    $(TEST_OBJ) $(FUZZ_MAIN) $(FUZZ_LIBS) $(B)/libbridge.a $(B)/libaas.a $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libaas.a
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_OBJ) $(B)/libaas.a $(LDLIBS) $(CMOCKA_LIBS)

# The agent protocol's tests and fuzz harness link their shared set-up
# (TEST_OBJ: what a test links besides its own file).
ACHAN_TESTS := $(B)/tests/test_achan $(B)/tests/test_achan_hostile $(B)/tests/fuzz_agent_frames
$(ACHAN_TESTS): TEST_OBJ := $(ACHAN_TEST_OBJ)
$(ACHAN_TESTS): $(ACHAN_TEST_OBJ)

# The guest agent built for the host and its test, which runs it on a
# socketpair (both take the protocol's one encoder and parser).
# Its sources are those vmm/image/build.sh compiles into the image.
AGENT_CFLAGS := $(filter-out -MMD -MP,$(CFLAGS))
AGENT_SRC := vmm/image/aas-agent.c vmm/image/agent_port.c vmm/image/agent_chan.c \
	vmm/image/agent_spawn.c vmm/image/agent_exec.c vmm/image/agent_files.c vmm/image/agent_test.c \
	vmm/image/aproto.c vmm/image/agent_tree.c vmm/image/agent_tree_commit.c \
	vmm/image/agent_linger.c vmm/image/gsys.c
AGENT_HDR := vmm/image/agent_int.h vmm/image/aproto.h vmm/image/agent_tree.h \
	vmm/image/agent_tree_int.h vmm/image/agent_linger.h vmm/image/gsys.h
$(B)/tests/aas-agent-host: $(AGENT_SRC) $(AGENT_HDR)
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(AGENT_CFLAGS) $(LDFLAGS) -o $@ $(AGENT_SRC)

# The hostile-guest test runs the host build of the agent beside its
# hostile peers.
$(B)/tests/test_achan_hostile: $(B)/tests/aas-agent-host

$(B)/tests/test_agent: tests/unit/test_agent.c vmm/image/aproto.c vmm/image/aproto.h \
    $(B)/tests/aas-agent-host
	@mkdir -p $(dir $@)
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(AGENT_CFLAGS) $(LDFLAGS) -o $@ tests/unit/test_agent.c vmm/image/aproto.c \
	    $(CMOCKA_LIBS) -lcrypto

$(B)/bench_vm_raw: bench/vm_raw.c $(B)/libqga.a $(B)/libaas.a
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libqga.a $(B)/libaas.a $(LDLIBS)

$(B)/bench_place: bench/place.c $(B)/libaas.a
	@echo "  CC+LD   $<"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libaas.a $(LDLIBS)

unit: $(UNIT_BIN) $(FUZZ_BIN)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(B)/aasd $(B)/aasctl $(B)/aas-mcp $(DESTDIR)$(PREFIX)/bin/

# The README's commands.
run:
	sh deploy/install-deps.sh
	$(MAKE) all image
	sh deploy/dev-run.sh

# make test builds with a job per core unless given -j; tests/run.sh also
# builds make variants (one test each, beside the other tests) so that
# neither the sanitizer nor the fuzz build breaks unseen.
test:
	@mkdir -p $(B) && date +%s >$(B)/.test-start
	sh deploy/install-deps.sh
	$(MAKE) $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) all unit image
	B=$(B) AAS_TEST_START_FILE=$(B)/.test-start AAS_VARIANTS="asan-build fuzz-build" sh tests/run.sh

# The AddressSanitizer/UBSan build (make asan runs the tests against it).
ASAN_MAKE = $(MAKE) B=build/asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
# The libFuzzer harnesses, with clang (make fuzz runs them).
FUZZ_MAKE = $(MAKE) B=build/fuzz CC=clang OPT=-O1 SAN="$(FUZZ_SAN) $(FUZZ_WARN)" FUZZ_LIBFUZZER=1
FUZZ_HARNESS := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/tests/%)

variants: asan-build fuzz-build

asan-build:
	$(ASAN_MAKE) all unit

fuzz-build:
	@command -v clang >/dev/null || { echo "the fuzz build needs clang (deploy/install-deps.sh)"; exit 1; }
	$(FUZZ_MAKE) $(FUZZ_HARNESS)

asan:
	sh deploy/install-deps.sh
	$(ASAN_MAKE) all unit image
	B=build/asan ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	    AAS_SANITIZED=1 sh tests/run.sh

# End-to-end files at the stress sizes make test keeps smaller (each says
# why where it reads AAS_TEST_LONG); make bench runs them too.
test-long:
	sh deploy/install-deps.sh
	$(MAKE) all image
	B=$(B) AAS_TEST_LONG=1 AAS_SKIP_UNIT=1 AAS_SKIP_LINT=1 \
	    AAS_E2E="$$(grep -l AAS_TEST_LONG tests/e2e/*.test.mjs | tr '\n' ' ')" sh tests/run.sh

bench:
	sh deploy/install-deps.sh
	$(MAKE) all $(B)/bench_vm_raw $(B)/bench_place image
	B=$(B) sh bench/run.sh; b=$$?; $(MAKE) test-long; t=$$?; [ $$b -eq 0 ] && [ $$t -eq 0 ]

# Every check on every project folder (tools/lint/), then the checks' own
# tests; all run, and any failure fails the target. make test runs them
# too, banned calls and format on the paths in tools/lint/format-paths and
# banned-paths.
lint:
	@rc=0; \
	for c in tools/lint/layers.sh tools/lint/banned.sh tools/lint/fmt.sh tools/lint/format.sh \
	    tools/lint/size.sh tools/lint/prefix.sh tools/lint/mustcheck.sh tests/lint/checkers.sh; do \
		echo "  LINT    $$c"; \
		sh $$c || rc=1; \
	done; \
	exit $$rc

# Each harness from its corpus for FUZZ_SECONDS (new inputs go to
# build/fuzz/corpus, crashes to build/fuzz/crash-*); fails on a crash.
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
# clang's -Wformat=2 also flags vsnprintf wrappers that gcc accepts.
FUZZ_WARN := -Wno-format-nonliteral
fuzz: fuzz-build
	sh tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

# The guest image, cached under var/images by a hash of vmm/image/.
image:
	sh vmm/image/build.sh $(CURDIR)/var

clean:
	rm -rf build

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# sbx: build, test and benchmark.
#
#   make              build/sbx (CLI), build/sbxd (daemon), build/sbx-init (embedded)
#   make test         unit tests (plain and ASan+UBSan), the integration suites, and
#                     beside them the kernel guests (test-kernels)
#   make test-kernels the namespace engine on Debian's 6.1 (+ systemd), 6.12, and 5.10's
#                     refusal, each in a QEMU guest (tests/kernel/run.py)
#   make test-kernels-full  the whole namespace suite on 6.1 (~70 min, not in `make test`)
#   make test-unit    C unit tests only
#   make test-asan    the integration suites again, against an ASan+UBSan daemon
#   make test-e2b     the official E2B SDKs, unchanged, against sbx (npm ci first)
#   make fuzz         libFuzzer harnesses (clang), FUZZ_SECONDS each (docs/fuzzing.md)
#   make fuzz-ci      replay the fuzz regressions and seeds, then 10 s per harness
#   make bench        side-by-side benchmark against bubblewrap
#   make soak         mixed load for SOAK_SECONDS with SOAK_CLIENTS clients, then a
#                     leak check of the daemon (not part of `make test`)
#   make valgrind     a smoke run of sbxd under valgrind memcheck (~30 s, in `make test`)
#   make install      install to $(PREFIX)
#
# BUILD selects the output directory; SAN=1 adds AddressSanitizer and UBSan.

BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= gcc
SAN     ?= 0
PYTHON  ?= /usr/bin/python3
SOAK_SECONDS ?= 300
SOAK_CLIENTS ?= 8

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wmissing-declarations -Wpointer-arith -Wformat=2 -Wformat-security \
        -Wformat-nonliteral -Wswitch-default -Wswitch-enum -Wmisleading-indentation \
        -Wundef -Wvla -Wcast-qual -Wwrite-strings -Wnull-dereference \
        -Wimplicit-fallthrough -Wno-missing-field-initializers
BASE_CFLAGS := -std=gnu11 -g -O2 -D_GNU_SOURCE -Isrc -fno-strict-aliasing \
        -fstack-protector-strong -fcf-protection $(WARN)
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
BASE_CFLAGS += $(SAN_FLAGS) -O1
LDSAN := $(SAN_FLAGS)
else
BASE_CFLAGS += -D_FORTIFY_SOURCE=2
LDSAN :=
endif
CFLAGS_ALL := $(BASE_CFLAGS) -fPIE $(CFLAGS)
LDFLAGS_ALL := -pie -Wl,-z,relro,-z,now -Wl,--as-needed $(LDSAN) $(LDFLAGS)

# The in-sandbox init is static and never sanitized: it runs inside the
# sandbox, under its seccomp filter, where sanitizer runtimes cannot work.
INIT_CFLAGS := -std=gnu11 -g -Os -D_GNU_SOURCE -Isrc -static -fno-strict-aliasing \
        -fstack-protector-strong $(WARN)

# `make V=1` shows the full commands.
Q := $(if $(V),,@)

UTIL_SRC   := $(wildcard src/util/*.c)
CLI_SRC    := src/sbx.c $(wildcard src/cli/*.c) src/util/error.c src/util/parse.c \
              src/util/buf.c src/util/base64.c src/util/id.c
DAEMON_LIB_SRC := $(wildcard src/server/*.c src/core/*.c src/iso/*.c src/priv/*.c src/egress/*.c) $(UTIL_SRC)
INIT_SRC   := $(wildcard src/iso/init/*.c) src/iso/init/sudo_client.S

CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
DAEMON_LIB_OBJ := $(DAEMON_LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/initblob.o $(BUILD)/obj/vmblob.o
CLI_LIB_OBJ := $(filter-out $(BUILD)/obj/src/sbx.o,$(CLI_OBJ))
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# Static jansson and http_parser: one fewer dynamic library to map at every
# `sbx run` (measured: 2.75 -> 2.36 ms of CPU per run on these machines).
CLI_LIBS    := -Wl,-Bstatic -ljansson -lhttp_parser -Wl,-Bdynamic -lpthread
DAEMON_LIBS := $(shell pkg-config --libs libmicrohttpd jansson libseccomp sqlite3 libssl libcrypto libarchive zlib) -lhttp_parser -lpthread -lm

.PHONY: all clean test test-unit test-integration test-asan test-e2b test-kernels test-kernels-full bench bench-e2b soak valgrind install lint
# failalloc.so (allocation failures on demand, for tests/integration/
# test_faults.py) is LD_PRELOADed into the daemon: plain builds only, as
# ASan brings an allocator of its own.
all: $(BUILD)/sbx $(BUILD)/sbxd $(BUILD)/probe $(if $(filter 1,$(SAN)),,$(BUILD)/failalloc.so)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/sbx: $(CLI_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) $^ -o $@ $(CLI_LIBS)

$(BUILD)/libsbxd.a: $(DAEMON_LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/sbxd: $(BUILD)/obj/src/sbxd.o $(BUILD)/libsbxd.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS_ALL) $^ -o $@ $(DAEMON_LIBS)

$(BUILD)/sbx-init: $(INIT_SRC) $(wildcard src/iso/init/*.h) src/iso/proto.h share/sbx/sudo
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) $(INIT_CFLAGS) $(INIT_SRC) -o $@

# The init binary is embedded into the daemon, which serves it to every
# sandbox from a sealed memfd (CVE-2019-5736: no host path to overwrite).
$(BUILD)/obj/initblob.o: src/iso/initblob.S $(BUILD)/sbx-init
	@mkdir -p $(dir $@)
	$(Q)$(CC) -c -DSBX_INIT_PATH='"$(BUILD)/sbx-init"' $< -o $@

# The microVM guest agent (docs/vm.md): static, packed by the daemon into
# the guest's initramfs (iso/vm.c), never run on the host.
# Its file operations are the namespace engine's iso/fs.c (vm/agent_fs.c).
VM_AGENT_SHARED := src/iso/fs.c src/util/error.c src/util/id.c src/iso/init/watch_run.c
$(BUILD)/sbx-vm-agent: $(wildcard src/vm/*.c) $(wildcard src/vm/*.h) src/iso/proto.h \
                       $(VM_AGENT_SHARED) src/iso/fs.h src/egress/tls.h src/iso/init/watch_run.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) $(INIT_CFLAGS) $(wildcard src/vm/*.c) $(VM_AGENT_SHARED) -o $@

$(BUILD)/obj/vmblob.o: src/vm/vmblob.S $(BUILD)/sbx-vm-agent
	@mkdir -p $(dir $@)
	$(Q)$(CC) -c -DSBX_VM_AGENT_PATH='"$(BUILD)/sbx-vm-agent"' $< -o $@

$(BUILD)/probe: tests/probe/probe.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) $(INIT_CFLAGS) $< -o $@

$(BUILD)/failalloc.so: tests/fault/failalloc.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (shared)"
	$(Q)$(CC) -std=gnu11 -g -O2 -D_GNU_SOURCE -shared -fPIC $(WARN) $< -o $@

# Unit tests of the CLI link its objects; the others the daemon library.
$(BUILD)/tests/test_cli_%: tests/unit/test_cli_%.c tests/unit/tap.h $(CLI_LIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS_ALL) -Itests/unit $(LDFLAGS_ALL) $< $(CLI_LIB_OBJ) -o $@ $(CLI_LIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/tap.h $(BUILD)/libsbxd.a
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS_ALL) -Itests/unit $(LDFLAGS_ALL) $< $(BUILD)/libsbxd.a -o $@ $(DAEMON_LIBS)

test-unit: $(UNIT_BIN)
	@fail=0; for t in $(UNIT_BIN); do echo "# $$t"; \
	  timeout -k 10 300 $$t || { echo "not ok - $$t failed or hung (exit $$?, 124: past 300 s)"; fail=1; }; \
	done; exit $$fail

test-integration: all
	SBX_BUILD=$(BUILD) $(PYTHON) tests/integration/run.py

# The official E2B SDKs (pinned in tests/e2b/package-lock.json) against a
# private daemon (docs/e2b.md).
test-e2b: all
	cd tests/e2b && npm ci --no-audit --no-fund --loglevel=error
	SBX_BUILD=$(BUILD) $(PYTHON) tests/e2b/run.py
	# the official E2B CLI, which npm ci just installed (docs/e2b.md), and
	# the README's E2B example with the SDK it installed
	SBX_BUILD=$(BUILD) $(PYTHON) tests/integration/run.py test_e2b_cli test_readme_e2b

# sandbox.commands.run('true') through the SDK, beside the native API and
# bubblewrap (docs/benchmarks.md).
bench-e2b: all
	cd tests/e2b && npm ci --no-audit --no-fund --loglevel=error
	SBX_BUILD=$(BUILD) $(PYTHON) tests/e2b/run.py --bench 300

# Everything (tests/run_all.py): the host's suites one after another, and
# beside them the kernel guests (test-kernels); a table of stage times at
# the end.
test: all lint
	$(PYTHON) tests/run_all.py --build $(BUILD)

# The namespace engine on the kernels users run, in QEMU guests: Debian
# 12's 6.1 with pure cgroup v2 (the modules whose code paths differ by
# kernel, and the systemd units under Debian's systemd), 6.12, and
# bullseye's 5.10 refused (tests/kernel/run.py, docs/architecture.md
# "Testing on other kernels"). test-kernels-full: the whole suite on 6.1.
test-kernels: all
	$(PYTHON) tests/kernel/run.py --build $(BUILD)

test-kernels-full: all
	$(PYTHON) tests/kernel/run.py --build $(BUILD) full

# The whole integration suite and the E2B SDK scenarios again, against an
# ASan+UBSan daemon and CLI.
test-asan:
	$(MAKE) BUILD=build-asan SAN=1 all
	SBX_BUILD=build-asan $(PYTHON) tests/integration/run.py
	cd tests/e2b && npm ci --no-audit --no-fund --loglevel=error
	SBX_BUILD=build-asan $(PYTHON) tests/e2b/run.py

bench: all
	$(PYTHON) bench/bench.py --build $(BUILD)

# Not in `make test`: it takes SOAK_SECONDS (5 minutes by default).
soak: all
	$(PYTHON) tests/soak/soak.py --build $(BUILD) --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS)

# The daemon's objects plus tests/valgrind/shim.c, which runs the system
# calls valgrind does not know natively (see there). Never installed.
$(BUILD)/sbxd-vg: tests/valgrind/shim.c $(BUILD)/obj/src/sbxd.o $(BUILD)/libsbxd.a
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $^ -o $@ $(DAEMON_LIBS)

# About 30 s (tests/valgrind/smoke.py). A plain build: valgrind and ASan do
# not mix.
valgrind:
	$(MAKE) SAN=0 all $(BUILD)/sbxd-vg
	$(PYTHON) tests/valgrind/smoke.py --build $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/sbx $(BUILD)/sbxd $(DESTDIR)$(PREFIX)/bin/
	# the manual page and the completions, made from `sbx help` (cli/manual.c)
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	$(BUILD)/sbx help --man > $(DESTDIR)$(PREFIX)/share/man/man1/sbx.1
	$(BUILD)/sbx completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sbx
	$(BUILD)/sbx completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sbx
	install -d $(DESTDIR)$(PREFIX)/share/sbx
	install -m 0644 share/sbx/code_server.py $(DESTDIR)$(PREFIX)/share/sbx/

lint:
	@! grep -nE '\b(sprintf|strcpy|strcat|system|popen|gets)\s*\(' $$(git ls-files 'src/*.c' 'src/*.h') || \
	  { echo "lint: banned function (use snprintf/sbx_buf, no shell)"; exit 1; }

clean:
	rm -rf build build-asan $(FUZZ_BUILD)

# ---- fuzzing (docs/fuzzing.md) ---------------------------------------------
# libFuzzer needs clang. The daemon's sources are compiled again with clang,
# instrumented for coverage, ASan and UBSan, into $(FUZZ_BUILD); each
# tests/fuzz/fuzz_<target>.c links them. The embedded sbx-init is the
# normal (gcc, never sanitized) one: it is data to the daemon.
FUZZ_CC         ?= clang-14
FUZZ_BUILD      := build-fuzz
FUZZ_SECONDS    ?= 60
FUZZ_CI_SECONDS ?= 10
FUZZ_TARGETS    ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -Isrc -fno-strict-aliasing $(WARN) $(FUZZ_SAN)
FUZZ_LIB_OBJ := $(DAEMON_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/initblob.o $(FUZZ_BUILD)/obj/vmblob.o
FUZZ_BIN    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-regress fuzz-ci
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CLANG   $<"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/obj/vmblob.o: src/vm/vmblob.S $(BUILD)/sbx-vm-agent
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) -c -DSBX_VM_AGENT_PATH='"$(BUILD)/sbx-vm-agent"' $< -o $@

$(FUZZ_BUILD)/obj/initblob.o: src/iso/initblob.S $(BUILD)/sbx-init
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) -c -DSBX_INIT_PATH='"$(BUILD)/sbx-init"' $< -o $@

$(FUZZ_BUILD)/libsbxd.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_BUILD)/libsbxd.a
	@echo "  FUZZ    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< $(FUZZ_BUILD)/libsbxd.a \
	  -o $@ $(DAEMON_LIBS)

fuzz-build: $(FUZZ_BIN)

# Each harness runs FUZZ_SECONDS on a scratch corpus under $(FUZZ_BUILD),
# seeded from tests/fuzz/corpus/<target> and tests/fuzz/regressions/<target>.
fuzz: fuzz-build
	scripts/fuzz.sh run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Every seed and every regression input, once through its harness.
fuzz-regress: fuzz-build
	scripts/fuzz.sh regress 0 $(FUZZ_TARGETS)

fuzz-ci: fuzz-build
	scripts/fuzz.sh regress 0 $(FUZZ_TARGETS)
	scripts/fuzz.sh run $(FUZZ_CI_SECONDS) $(FUZZ_TARGETS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)

# corral: see README.md. Every target installs what it needs first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
# Seconds each libFuzzer target runs in `make fuzz-smoke` (two at a time).
FUZZ_SECONDS ?= 25
JOBS       ?= $(shell nproc)
CTEST_ARGS ?=
# ccache (CMakeLists.txt) hits across clones and build dirs: paths are made
# relative to the checkout, and the build dir is not part of the hash.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all deps build test test-asan asan test-tsan tsan fuzz fuzz-smoke demo serve bench clean format

all: build

deps:
	@./scripts/install-deps

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

# Every suite (unit, integration, security, fuzz corpora), then the same
# suites again under ASan+UBSan with clang, then the unit suite and the
# daemon's integration tests under ThreadSanitizer, then every fuzzer for a
# while.
test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 $(CTEST_ARGS)
	$(MAKE) test-asan
	$(MAKE) test-tsan
	$(MAKE) fuzz-smoke

$(ASAN_BUILD)/build.ninja: | deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(ASAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Debug -DCORRAL_SANITIZE=ON

asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD) -j $(JOBS)

# ASAN_SKIP: tests left out of the ASan run (tests/README.md says why).
ASAN_SKIP ?=
test-asan: asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 2 -L 'unit|integration|security|fuzz' -LE slow \
	  $(if $(ASAN_SKIP),-E '$(ASAN_SKIP)') $(CTEST_ARGS)

# The libFuzzer binaries (clang, ASan+UBSan), and nothing else of the tree.
$(FUZZ_BUILD)/build.ninja: | deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORRAL_FUZZ=ON

fuzz: deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) -j $(JOBS) corral_fuzzers

# Every libFuzzer target for FUZZ_SECONDS from its seed corpus, two at a
# time; fails on a crash, leak, timeout or broken property
# (tests/fuzz/README.md). New inputs are not kept unless CORRAL_FUZZ_GROWN
# names a directory.
fuzz-smoke: fuzz
	cd $(FUZZ_BUILD) && CORRAL_FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  ctest --output-on-failure -j 2 -L fuzz-smoke $(CTEST_ARGS)

# ThreadSanitizer (clang-14) over the daemon's concurrent parts: the unit
# tests, and the daemon's integration tests with real sandboxes (the daemon
# itself, its SDK and CLI clients, and the SDK's LocalProvider, which runs the
# same engine inside the test process). Only the targets those need are built. TSAN_SKIP leaves out
# tests whose subject is not threads and whose timing a TSan build cannot
# keep (tests/README.md "ThreadSanitizer" says which and why). TSAN_TARGETS,
# TSAN_TESTS and TSAN_SKIP narrow or widen the run, e.g.
# TSAN_TARGETS=corral_unit_tests TSAN_TESTS='^unit\.' for the unit tests alone.
# clang-14's TSan wants the program below its shadow memory; on a kernel
# with more mmap randomization than it knows (vm.mmap_rnd_bits > 28) it
# stops with "unexpected memory mapping", and the tests then run under
# `setarch -R` (ASLR off for them and the sandboxes they start).
TSAN_TARGETS ?= corral corral_probe corral_unit_tests corral_integration_tests
TSAN_TESTS   ?= ^(unit\.|integration\.(Daemon|Providers/SdkProvider\.|CliClient|NonUtf8))
TSAN_SKIP    ?= StateStoreTest\.AcknowledgedWritesSurviveSigkill|DaemonCrash\.Kill9Loop|DaemonSetupTimeout|DaemonLifecycle\.RequestTimeoutHasItsOwnCode
$(TSAN_BUILD)/build.ninja: | deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(TSAN_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCORRAL_TSAN=ON

tsan: deps $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD) -j $(JOBS) $(TSAN_TARGETS)

test-tsan: tsan
	cd $(TSAN_BUILD) && \
	if ./tests/corral_unit_tests --gtest_list_tests >/dev/null 2>&1; then run=; else \
	  echo "test-tsan: TSan cannot map its shadow here; running under setarch -R"; \
	  run="setarch $$(uname -m) -R"; fi; \
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  $$run ctest --output-on-failure -j 2 -R '$(TSAN_TESTS)' $(if $(TSAN_SKIP),-E '$(TSAN_SKIP)') \
	  -LE slow $(CTEST_ARGS)

# A real sandboxed command, one-shot, without the daemon.
demo: build
	@echo '--- corral run: a sandboxed shell with 256Mi memory, 64 pids, 5s timeout ---'
	cd /tmp && $(CURDIR)/$(BUILD)/corral run --memory 256Mi --pids 64 --timeout 5s --json -- \
	  /bin/sh -c 'echo "hello from $$(hostname) as $$(id -un) in $$(pwd)"; \
	    echo "visible processes: $$(ls /proc | grep -c "^[0-9]")"; \
	    grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status; \
	    ls /home /root 2>&1; cat /etc/shadow 2>&1 | head -1; \
	    echo data > /workspace/out.txt && wc -c /workspace/out.txt'

# The daemon in the foreground with its embedded default configuration
# (docs/operations.md). Ctrl-C stops it; sandboxes are re-attached next time.
serve: build
	$(CURDIR)/$(BUILD)/corral serve $(SERVE_ARGS)

bench: build
	./bench/startup.sh
	./bench/daemon.sh
	$(BUILD)/bench/corral_bench_net_setup

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

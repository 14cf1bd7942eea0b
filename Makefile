# The front door. `make run` and `make test` set up everything they need on a fresh
# Debian 12 + Swift 6.3 machine (apt packages included).
SHELL := /bin/bash
# rclone: `publish --upload` runs it, and its tests upload to a local and a WebDAV remote.
APT_PACKAGES := libcurl4-openssl-dev libzip-dev zlib1g-dev libsqlite3-dev libvips-dev pkg-config python3 curl unzip zip rclone
# Only `make bench` installs these (the server and the peer tools it measures against).
BENCH_APT_PACKAGES := nginx-light time rclone aria2 wrk wget
SWIFT ?= swift
## See `test`: the most tests of one `swift test` run that go at once.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH ?= 16

.PHONY: fmt lint deps bench-deps build test run bench bench-cache bench-images bench-scale bench-publish bench-fleet roundtrips example-storage check-example-storage check-docs docs chaos chaos-short fuzz completions man install dist clean conformance-http

## Install missing Debian packages (apt-get update only when something is missing).
deps:
	@bash scripts/apt_install_missing.sh $(APT_PACKAGES)

build: deps
	$(SWIFT) build

## Build and run every test. Test suites carry time limits, so a hang fails instead of waiting.
## Three runs, not one: all 640-odd tests at once on 2 cores queued the timing-sensitive ones
## (loopback servers, curl's low-speed limit) behind the heavy ContentSync suites past their
## limits; one run per group is also faster (about 150 s against 175 s). The last run takes
## every test module the first two do not name, so a new module is never left out. A time
## limit is a hang detector, never a speed check: Swift Testing starts a run's tests together,
## so a limit also counts the time a test queues for a thread; none is under 3 minutes (a test of
## a thousand sequential awaits, HistoryTests, waited 127 s behind the rest of its group), and
## scripts/check_time_limits.sh fails `make lint` on one that is.
## At most 16 tests of a run go at once (Swift Testing's SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH,
## exported below; set it in the environment to change it). With no bound, all of a run's tests
## share the two threads of the cooperative pool, and every await waits behind the others'
## blocking slices: in the last run a loopback server took 36.7 s to say it listened and a hook
## of 0.3 s took 9.3 s to return (over 60 s on a slower CI machine, which failed two tests).
## With 16, those took 0.47 s and 0.34 s, and the run took 80 s instead of 88 s (8: 123 s).
## Each run has scripts/close_check preloaded: a program built here that closes a descriptor
## that is not open (a double close, which hits another thread's file) fails the run.
test: deps check-example-storage check-docs lint
	$(SWIFT) build --build-tests
	bash scripts/check_systemd_unit.sh "$$($(SWIFT) build --show-bin-path)/sync-agent"
	bash scripts/close_check/run.sh $(SWIFT) test --skip-build --filter 'ContentSyncTests\.'
	bash scripts/close_check/run.sh $(SWIFT) test --skip-build --filter 'SyncAgentTests\.|DocumentationExamples\.'
	bash scripts/close_check/run.sh $(SWIFT) test --skip-build --skip 'ContentSyncTests\.|SyncAgentTests\.|DocumentationExamples\.'
	$(MAKE) chaos-short

## Format Sources and Tests with the toolchain's `swift format` and the checked-in .swift-format
## (4 spaces, 120 columns); after formatting, the documents' examples are rewritten from their
## regions (check_snippets --write). `make test` runs `make lint`, which fails on any difference.
fmt:
	$(SWIFT) format format --in-place --recursive --parallel Sources Tests
	python3 scripts/docs/check_snippets.py --write

lint:
	@out="$$($(SWIFT) format lint --strict --recursive --parallel Sources Tests 2>&1)"; \
	if [ -n "$$out" ]; then echo "$$out" | head -40; echo "lint: run make fmt"; exit 1; fi; echo "lint: Sources and Tests are formatted"
	@bash scripts/check_time_limits.sh

## The layering (ContentSync links no publisher code, imports follow the layers, libraries log at
## debug) and the documents' promises: every Swift example in the README and the DocC catalogs is a region
## of compiled code (DocumentationExamples, run by `swift test`), the example app manifest loads
## and names real products, and every public symbol has a /// summary.
check-docs:
	SWIFT=$(SWIFT) python3 scripts/check_layering.py
	python3 scripts/docs/check_snippets.py
	SWIFT=$(SWIFT) bash scripts/docs/check_manifest.sh
	python3 scripts/docs/check_public_docs.py

## The DocC catalogs as static sites in .build/docs/<Target>/ (swift-docc-plugin); warnings fail.
DOC_TARGETS := ContentSync ContentPublishing StorageFormat FileKit Transport StorageServer ItemCache ImageCache
docs: deps
	@# The plugin moves each archive into .build/docs/<Target>, and fails when .build/docs is missing.
	@mkdir -p .build/docs
	@for target in $(DOC_TARGETS); do \
	  echo "documentation for $$target"; \
	  $(SWIFT) package --allow-writing-to-directory .build/docs generate-documentation --target $$target \
	    --output-path .build/docs/$$target --disable-indexing --warnings-as-errors || exit 1; \
	done

## The longer publish round-trip pass: 1,000 random seeds instead of make test's 200 (~7 min).
roundtrips: deps
	$(SWIFT) build --build-tests
	SEEDS=1000 $(SWIFT) test --skip-build --filter PublishRoundTrip

## Serve ExampleStorage on loopback and mirror it version by version, showing each step.
run: deps
	$(SWIFT) build --product sync-agent
	$(SWIFT) build --product sync-agent-image
	bash scripts/demo.sh "$$($(SWIFT) build --show-bin-path)/sync-agent"

## The benchmarks' extra packages (nginx, GNU time, the peer tools, wrk); only `make bench` needs them.
bench-deps: deps
	@bash scripts/apt_install_missing.sh $(BENCH_APT_PACKAGES)

## The release build: the Swift runtime linked in statically, so the binary needs only the C
## libraries (libcurl, libzip, SQLite) and starts in about 10 ms instead of 17 ms.
RELEASE = -c release --static-swift-stdlib

## Shell completions for sync-agent (bash, zsh, fish) in .build/completions/, written by the debug
## binary's own --generate-completion-script (swift-argument-parser).
COMPLETIONS_DIR := .build/completions
completions: deps
	$(SWIFT) build --product sync-agent
	@mkdir -p $(COMPLETIONS_DIR)
	@bin="$$($(SWIFT) build --show-bin-path)/sync-agent"; \
	"$$bin" --generate-completion-script bash > $(COMPLETIONS_DIR)/sync-agent.bash && \
	"$$bin" --generate-completion-script zsh > $(COMPLETIONS_DIR)/_sync-agent && \
	"$$bin" --generate-completion-script fish > $(COMPLETIONS_DIR)/sync-agent.fish
	@ls $(COMPLETIONS_DIR)

## Man pages in .build/man/: sync-agent.1 and one page per subcommand, from swift-argument-parser's
## generate-manual plugin on a debug build. The plugin picks its own output folder (its work
## directory under .build/plugins/) and refuses --output-directory, so the pages are copied from there.
MAN_DIR := .build/man
MAN_DATE ?= $(shell git log -1 --format=%cs 2>/dev/null || date +%F)
man: deps
	rm -rf .build/plugins/GenerateManual/outputs/SyncAgentMain
	$(SWIFT) package plugin generate-manual --configuration debug --multi-page --date $(MAN_DATE)
	rm -rf $(MAN_DIR) && mkdir -p $(MAN_DIR)
	cp .build/plugins/GenerateManual/outputs/SyncAgentMain/*.1 $(MAN_DIR)/
	@ls $(MAN_DIR)

## Install the release binary (stripped), completions, man pages and, when contrib/systemd/ exists,
## its units: `make install PREFIX=/usr/local DESTDIR=/tmp/root`. PREFIX defaults to /usr/local.
PREFIX ?= /usr/local
DESTDIR ?=
install: deps completions man
	$(SWIFT) build $(RELEASE) --product sync-agent
	$(SWIFT) build $(RELEASE) --product sync-agent-image
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 755 -s "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent" $(DESTDIR)$(PREFIX)/bin/sync-agent
	@# `sync-agent image` execs it from sync-agent's own folder: the one binary that loads libvips.
	install -m 755 -s "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent-image" $(DESTDIR)$(PREFIX)/bin/sync-agent-image
	install -m 644 $(COMPLETIONS_DIR)/sync-agent.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sync-agent
	install -m 644 $(COMPLETIONS_DIR)/_sync-agent $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sync-agent
	install -m 644 $(COMPLETIONS_DIR)/sync-agent.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/sync-agent.fish
	install -m 644 $(MAN_DIR)/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	@# The units name /usr/local/bin/sync-agent; another PREFIX is written into the installed copy.
	@if ls contrib/systemd/*.service >/dev/null 2>&1; then \
	  install -d $(DESTDIR)$(PREFIX)/lib/systemd/system && \
	  for unit in contrib/systemd/*.service; do \
	    sed 's|/usr/local/bin/sync-agent|$(PREFIX)/bin/sync-agent|g' "$$unit" > $(DESTDIR)$(PREFIX)/lib/systemd/system/$${unit##*/} && \
	    chmod 644 $(DESTDIR)$(PREFIX)/lib/systemd/system/$${unit##*/} && echo "installed $$unit" || exit 1; \
	  done; \
	else echo "no contrib/systemd/*.service: no systemd unit installed"; fi
	@# The example config the unit reads (/etc/sync-agent/agent.yaml); never over an operator's own.
	install -d $(DESTDIR)$(PREFIX)/share/doc/sync-agent
	install -m 644 contrib/systemd/agent.yaml $(DESTDIR)$(PREFIX)/share/doc/sync-agent/agent.yaml

## One tarball for a fleet: `make install` into a staging root (PREFIX=/usr/local), packed as
## .build/dist/sync-agent-<version>-linux-<arch>.tar.gz (the version `sync-agent --version` prints);
## an operator unpacks it with `tar -xzf … -C /`.
dist:
	rm -rf .build/dist/root
	$(MAKE) install DESTDIR=$(CURDIR)/.build/dist/root PREFIX=/usr/local
	@tarball=".build/dist/sync-agent-$$(.build/dist/root/usr/local/bin/sync-agent --version)-linux-$$(uname -m).tar.gz"; \
	tar -C .build/dist/root --owner=0 --group=0 --sort=name -czf "$$tarball" usr && ls -l "$$tarball"

## Benchmarks: S1 restore, then S2 replay, S3 jump, S4 poll and the wrk ceiling; peers measured
## in the same run, results written to docs/benchmarks.md (see bench/README.md).
bench: bench-deps
	$(SWIFT) build $(RELEASE) --product sync-agent
	bash bench/restore.sh "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent"
	bash bench/scenarios.sh "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent"

## Item cache benchmark (issues 11 and 20): ItemCache's disk and memory tiers and its fetching API, side by
## side with python-diskcache (from PyPI, in the venv $(BENCH_VENV)/), alternated, on ext4 and tmpfs, checked
## against issue 20's targets; then 8 `sync-agent cache get` processes on one failing URL (release sync-agent,
## the same -c release build). Writes the "Item cache (issue 11)" section of docs/benchmarks.md and
## docs/benchmarks-cache.svg. About 7 minutes after the build.
BENCH_VENV := .build-bench-venv
BENCH_CACHE_APT_PACKAGES := python3-venv e2fsprogs
bench-cache: deps
	@bash scripts/apt_install_missing.sh $(BENCH_CACHE_APT_PACKAGES)
	@[ -x $(BENCH_VENV)/bin/python ] || python3 -m venv $(BENCH_VENV)
	@$(BENCH_VENV)/bin/python -c 'import diskcache, requests_cache' 2>/dev/null || $(BENCH_VENV)/bin/pip install -q 'diskcache==5.6.3' 'requests-cache==1.3.3'
	$(SWIFT) build -c release --product cache-bench
	$(SWIFT) build -c release --product sync-agent
	SYNC_AGENT="$$($(SWIFT) build -c release --show-bin-path)/sync-agent" \
	  $(BENCH_VENV)/bin/python bench/cache_bench.py "$$($(SWIFT) build -c release --show-bin-path)/cache-bench"

## Image cache benchmark (issue 22): ImageCache (release `image-bench`, libvips) against vipsthumbnail (2 processes
## × 1 thread) and Pillow (2 processes, `draft()`), alternated: 100 camera-like 2725×2225 JPEGs and 4 RGBA PNGs
## to 720 px (made once with Pillow in .build-bench-images/work/), warm hits, and one 7360×4912 JPEG to 500 px.
## Writes the "Image cache (issue 22)" section of docs/benchmarks.md and docs/benchmarks-images.svg. Pillow
## comes from PyPI into $(BENCH_VENV)/. IMAGE_ROUNDS (3) and IMAGE_COUNT (100; 10 for a quick check).
BENCH_IMAGES_APT_PACKAGES := python3-venv libvips-tools time
bench-images: deps
	@bash scripts/apt_install_missing.sh $(BENCH_IMAGES_APT_PACKAGES)
	@[ -x $(BENCH_VENV)/bin/python ] || python3 -m venv $(BENCH_VENV)
	@$(BENCH_VENV)/bin/python -c 'import PIL' 2>/dev/null || $(BENCH_VENV)/bin/pip install -q 'Pillow==13.0.0'
	$(SWIFT) build -c release --product image-bench
	$(BENCH_VENV)/bin/python bench/images_bench.py "$$($(SWIFT) build -c release --show-bin-path)/image-bench"

## Scale benchmark (issue 23): trees of 10k and 100k files of 512 B (1M with SCALE_1M=1) published with the release
## sync-agent and served by nginx on loopback; per tree a restore, a no-change sync, and updates of 1, 100 and 10k
## changed files by sync-agent, `rsync -a --delete`, `rclone copy --files-from` and `cp -al` + swap on the same trees,
## alternated, every tree checked. Writes the "Scale (issue 23)" section of docs/benchmarks.md and
## docs/benchmarks-scale.svg (work folder .build-bench-scale/work/). About 20 minutes with today's code (at 100k:
## 1 min making the tree, 5 publishing 10 versions, 6 of rounds, 3.5 deleting the trees); SCALE_SIZES=2000
## checks the script in about a minute.
BENCH_SCALE_APT_PACKAGES := rsync strace time nginx-light rclone e2fsprogs
bench-scale: deps
	@bash scripts/apt_install_missing.sh $(BENCH_SCALE_APT_PACKAGES)
	$(SWIFT) build $(RELEASE) --product sync-agent
	python3 bench/scale_bench.py "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent"

## A 1-file publish over 100,000 files, by step (issue 23): bench/publish_bench.py (PUBLISH_FILES,
## PUBLISH_VERSIONS), content re-made by cp -al and edited in place, alternating.
bench-publish: deps
	$(SWIFT) build $(RELEASE) --product sync-agent
	python3 bench/publish_bench.py "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent"

## Fleet simulation (issue 12): 1,000 in-process agents (fleet-sim) against one nginx on loopback: restart
## herds with and without jitter and splay, a publish mid-run, a no-change period; requests per second and
## bytes per poll from nginx's access log. Writes the "Fleet simulation" section of docs/operations.md
## (raw results in /tmp/content-sync-fleet/results). About 12 minutes.
bench-fleet: bench-deps
	$(SWIFT) build $(RELEASE) --product sync-agent
	$(SWIFT) build $(RELEASE) --product fleet-sim
	python3 bench/fleet/fleet_sim.py --agent "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent" \
	  --sim "$$($(SWIFT) build $(RELEASE) --show-bin-path)/fleet-sim"

## Reliability: kill -9 at random moments of 200 updates, disk-full cases on a small tmpfs
## (needs root or sudo to mount; skipped otherwise), and kill -9 at random moments of 100
## publishes plus concurrent publishes, and kill -9 of item cache writers and readers 200 times.
## Writes docs/reliability.md. About an hour.
chaos: deps
	$(SWIFT) build $(RELEASE) --product sync-agent
	$(SWIFT) build $(RELEASE) --product cache-chaos
	bash scripts/chaos/run.sh full "$$($(SWIFT) build $(RELEASE) --show-bin-path)/sync-agent"
	$(SWIFT) build --build-tests
	CHAOS_RUNS=100 $(SWIFT) test --skip-build --filter FaultConvergence

## The short version for `make test`: 10 update kills, 6 publish kills and 30 item cache kills
## (fixed seeds), one disk-full round and one concurrent publish pair, about a minute and a half.
chaos-short: deps
	$(SWIFT) build --product sync-agent
	$(SWIFT) build --product cache-chaos
	bash scripts/chaos/run.sh short "$$($(SWIFT) build --show-bin-path)/sync-agent"

## Fuzz the storage documents' parsers and the path rules with libFuzzer for FUZZ_SECONDS (default
## 600), then merge what it found into Fuzz/corpus (which `make test` replays). Crashes are written
## to .build-fuzz/crash-* with the input that caused them.
## The HTTP caching conformance cases (RFC 9110, 9111, 5861; modelled on http-tests/cache-tests)
## against the built `sync-agent cache get` and a scripted loopback origin: 464 cases, ~40 s, exit 1
## on a broken MUST. Not in `make test`: its cases sleep through 1-3 s max-ages and judge by them.
conformance-http: build
	SYNC_AGENT="$$($(SWIFT) build --show-bin-path)/sync-agent" python3 scripts/conformance/http_cache/run.py

FUZZ_SECONDS ?= 600
fuzz: deps
	$(SWIFT) build --scratch-path .build-fuzz --product content-sync-fuzz \
	  -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING -Xswiftc -parse-as-library
	mkdir -p .build-fuzz/found
	SWIFT_BACKTRACE=enable=no "$$($(SWIFT) build --scratch-path .build-fuzz --show-bin-path)/content-sync-fuzz" \
	  -max_total_time=$(FUZZ_SECONDS) -dict=Fuzz/json.dict -max_len=4096 -artifact_prefix=.build-fuzz/ \
	  -print_final_stats=1 .build-fuzz/found Fuzz/corpus
	SWIFT_BACKTRACE=enable=no "$$($(SWIFT) build --scratch-path .build-fuzz --show-bin-path)/content-sync-fuzz" \
	  -merge=1 Fuzz/corpus .build-fuzz/found

## Regenerate ExampleStorage with `sync-agent publish` (deterministic: the same bytes every time).
example-storage: deps
	$(SWIFT) build --product sync-agent
	python3 scripts/make_example_storage.py --sync-agent "$$($(SWIFT) build --show-bin-path)/sync-agent"

check-example-storage: deps
	$(SWIFT) build --product sync-agent
	python3 scripts/make_example_storage.py --check --sync-agent "$$($(SWIFT) build --show-bin-path)/sync-agent"

clean:
	rm -rf .build

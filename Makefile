# The front door. `make run` and `make test` set up everything they need on a fresh
# Debian 12 + Swift 6.3 machine (apt packages included).
SHELL := /bin/bash
APT_PACKAGES := libcurl4-openssl-dev libzip-dev libsqlite3-dev pkg-config python3 curl unzip zip
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test run bench roundtrips example-storage check-example-storage clean

## Install missing Debian packages (apt-get update only when something is missing).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

## Build and run every test. Test suites carry time limits, so a hang fails instead of waiting.
test: deps check-example-storage
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

## The longer publish round-trip pass: 1,000 random seeds instead of make test's 200 (~7 min).
roundtrips: deps
	$(SWIFT) build --build-tests
	SEEDS=1000 $(SWIFT) test --skip-build --filter PublishRoundTrip

## Serve ExampleStorage on loopback and mirror it version by version, showing each step.
run: deps
	$(SWIFT) build --product sync-agent
	bash scripts/demo.sh "$$($(SWIFT) build --show-bin-path)/sync-agent"

## Benchmarks: peers measured in the same run; see bench/README.md.
bench: deps
	$(SWIFT) build -c release --product sync-agent
	bash bench/restore.sh "$$($(SWIFT) build -c release --show-bin-path)/sync-agent"

## Regenerate ExampleStorage with `sync-agent publish` (deterministic: the same bytes every time).
example-storage: deps
	$(SWIFT) build --product sync-agent
	python3 scripts/make_example_storage.py --sync-agent "$$($(SWIFT) build --show-bin-path)/sync-agent"

check-example-storage: deps
	$(SWIFT) build --product sync-agent
	python3 scripts/make_example_storage.py --check --sync-agent "$$($(SWIFT) build --show-bin-path)/sync-agent"

clean:
	rm -rf .build

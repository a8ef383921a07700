# hlscache — one entry point for people and CI.
#   make run    install missing Debian packages, build, and start the server
#   make test   install missing Debian packages, check the formatting, build, and run the whole test suite
#   make lint   the formatting check alone (swift-format, .swift-format; `make format` rewrites files to pass it) and
#               `node --check` on the console's script

SWIFT ?= swift
DEB_PACKAGES := libssl-dev zlib1g-dev libsqlite3-dev pkg-config ffmpeg
# Only for the test run: the status page test loads it in headless Chromium; the OpenAPI test validates with Python;
# the AES and HTTPS-origin tests use the openssl command (a cipher to compare with, a test CA); the fleet test runs
# HAProxy in front of three servers (scripts/fleet-check.sh, with curl); the real-player tests play through the proxy
# with VLC (cvlc: vlc-bin, and vlc-plugin-base for HLS, TS, MP4, avcodec and the dummy outputs) and mpv. Every test
# that needs one of them runs: a skip not listed in Tests/allowed-skips.txt fails `make test` (scripts/run-tests.sh).
# python3-pip installs what Debian does not package (scripts/install-python-deps.sh: openapi-spec-validator).
TEST_DEB_PACKAGES := chromium python3-yaml python3-jsonschema python3-cryptography python3-pip openssl haproxy curl vlc-bin vlc-plugin-base mpv
# Only for the lint: `node --check` parses the console's JavaScript.
LINT_DEB_PACKAGES := nodejs
LISTEN ?= 127.0.0.1:8080
CACHE_DIR ?=

.PHONY: deps test-deps lint-deps build release run test lint format bench fuzz clean

deps:
	@./scripts/install-deps.sh $(DEB_PACKAGES)

test-deps:
	@./scripts/install-deps.sh $(TEST_DEB_PACKAGES)
	@./scripts/install-python-deps.sh

lint-deps:
	@./scripts/install-deps.sh $(LINT_DEB_PACKAGES)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --static-swift-stdlib

run: build
	$(SWIFT) run hlscache serve --listen $(LISTEN) $(if $(CACHE_DIR),--cache-dir $(CACHE_DIR))

# The Swift sources the formatter owns.
SWIFT_SOURCES := Package.swift Sources Tests Benchmarks Fuzz
# The JavaScript built into the binary (embedded by SwiftPM, Package.swift).
JS_SOURCES := $(wildcard Sources/HLSAdmin/Console/Resources/*.js)

lint: lint-deps
	$(SWIFT) format lint --strict --recursive $(SWIFT_SOURCES)
	@for file in $(JS_SOURCES); do node --check "$$file" || exit 1; done

format:
	$(SWIFT) format format --in-place --recursive $(SWIFT_SOURCES)

test: deps test-deps lint
	$(SWIFT) build --build-tests
	@# Prints the skipped tests at the end; fails on a skip not listed in Tests/allowed-skips.txt.
	@SWIFT=$(SWIFT) ./scripts/run-tests.sh

bench: deps
	./Benchmarks/run-playlist-bench.sh

fuzz: deps
	./Fuzz/run.sh $(or $(SECONDS),60)

clean:
	rm -rf .build

# Sourced by the benchmark scripts: sets $bin, the hlscache binary to measure.
#
#   $HLSCACHE_BIN when set (an older build, for a before/after), else a release build made the way the Docker
#   image makes it: `--static-swift-stdlib`, the Swift runtime linked in (about 10 ms less start-up per process
#   than loading it from shared libraries: 15 against 25 ms for `hlscache --version` here, docs/benchmarks.md).
hlscache_release_binary() {
  if [ -n "${HLSCACHE_BIN:-}" ]; then
    bin=$HLSCACHE_BIN
    return
  fi
  swift build -c release --static-swift-stdlib --product hlscache 2>&1 | grep -E "error:|Build of product" | tail -1 || true
  bin=$PWD/.build/release/hlscache
}

#!/usr/bin/env bash
# The last word on whether the tests discriminate: applies deliberate bugs to the source one at a time, rebuilds,
# runs only the tests that should catch each, and reports which mutants survive. Every mutant must be killed.
# Not run by CI (each mutant is an incremental build): run it after changing the tests or the code below.
#
# usage: scripts/mutation-check.sh [NAME...]      (no name: every mutant)   env: SWIFT (default swift)
# Ends with PASS (every mutant killed, exit 0), FAIL (a mutant survived, a mutation no longer applies, or the
# unmutated tests fail: exit 1). The source is restored after each mutant, and on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import os, signal, subprocess, sys, time

# A stop (SIGTERM, SIGINT) unwinds through the `finally` that puts the mutated file back.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
SWIFT = os.environ.get("SWIFT", "swift")

# name, file, the exact text (found exactly once), its replacement, the tests that must catch it (swift test --filter).
MUTANTS = [
    ("range-end-off-by-one", "Sources/HLSProxy/Resources/RangeRequest.swift",
     "last = min(value, size - 1)", "last = min(value + 1, size - 1)", "HTTPPrimitivesTests"),
    ("suffix-range-off-by-one", "Sources/HLSProxy/Resources/RangeRequest.swift",
     "max(0, size - suffix)", "max(0, size - suffix + 1)", "HTTPPrimitivesTests"),
    ("key-uri-not-rewritten", "Sources/HLSPlaylist/Playlist+Rewrite.swift",
     "for slot in uriSlots where slot.rewritable {", "for slot in uriSlots where slot.rewritable && slot.role != .key {",
     "HLSPlaylistTests.RewriteTests"),
    ("head-timeout-ignored", "Sources/HLSProxy/HTTP1/ProxyServer.swift",
     "headTimeout: configuration.requestHeadTimeout,", "headTimeout: .seconds(10),", "ProtocolTests/slowlorisHeadIsCutOff"),
    ("idle-timeout-ignored", "Sources/HLSProxy/HTTP1/ProxyServer.swift",
     "idleTimeout: configuration.idleTimeout,", "idleTimeout: .seconds(60),",
     "ProtocolTests/idleKeepAliveConnectionIsClosedAfterTheIdleTimeout"),
    ("cache-key-forgets-query", "Sources/HLSCacheCore/CacheKey.swift",
     'if !kept.isEmpty { key += "?" + kept.joined(separator: "&") }', "_ = kept", "CacheKeyTests"),
    ("cache-key-keeps-tokens", "Sources/HLSCacheCore/CacheKey.swift",
     "return !volatile.contains(name.lowercased())", "return !volatile.contains(String(name))", "CacheKeyTests"),
    ("eviction-skips-the-index", "Sources/HLSCacheStore/CacheStore+Eviction.swift",
     "try IndexDatabase.delete(db, keyHashes: victims)", "_ = victims", "CacheStoreEvictionTests"),
    ("close-ignores-unlinking-eviction", "Sources/HLSCacheStore/CacheStore.swift",
     "if state.withLock({ $0.unlinking == 0 }) { FileSystem.remove(sessionPath) }", "FileSystem.remove(sessionPath)",
     "CacheStoreRecoveryTests/closingDuringAnEvictionsUnlinksLeavesTheFullPassToTheNextOpen"),
    ("live-ttl-factor-ignored", "Sources/HLSProxy/Playlists/PlaylistService.swift",
     "* configuration.liveTTLFactor)", "* 1.0)", "PlaylistServingTests/livePlaylistIsCachedForHalfItsTargetDurationOnly"),
    ("max-age-ignores-elapsed", "Sources/HLSProxy/Playlists/PlaylistService.swift",
     "Int((ttl - elapsed).rounded())", "Int(ttl.rounded())", "PlaylistServingTests/aLivePlaylistsMaxAgeIsWhatIsLeftOfItsTTL"),
    ("scheduler-over-capacity", "Sources/HLSDownloader/Engine/DownloadScheduler.swift",
     "let capacity = downloader.configuration.concurrentItems - running.count",
     "let capacity = downloader.configuration.concurrentItems + 1 - running.count",
     "FetchLifecycleTests/schedulerRunsQueuedItemsTwoAtATime"),
    ("scheduler-one-at-a-time", "Sources/HLSDownloader/Engine/DownloadScheduler.swift",
     "let capacity = downloader.configuration.concurrentItems - running.count",
     "let capacity = 1 - running.count",
     "FetchLifecycleTests/schedulerRunsQueuedItemsTwoAtATime"),
    ("events-sent-out-of-order", "Sources/HLSAdmin/EventHub.swift",
     "sending.withLock { publishInOrder(event) }", "publishInOrder(event)", "EventHubTests/eventsLeaveInTheOrderDecided"),
    ("default-iv-off-by-one", "Sources/HLSKeys/SegmentVerification.swift",
     "UInt8(truncatingIfNeeded: mediaSequence >> (56 - 8 * $0))",
     "UInt8(truncatingIfNeeded: (mediaSequence + 1) >> (56 - 8 * $0))", "KeyPrimitivesTests"),
    ("byterange-implicit-offset-from-zero", "Sources/HLSPlaylist/MediaPlaylist.swift",
     "} else if let last = lastRange, last.uri == uri {\n                            offset = last.end",
     "} else if let last = lastRange, last.uri == uri {\n                            offset = 0 * last.end",
     "HLSPlaylistTests"),
    ("accept-failure-not-counted", "Sources/HLSProxy/HTTP1/ProxyServer.swift",
     "metrics.acceptBackedOff()\n", "\n", "DescriptorLimitTests/theListenerBacksOffWhenAcceptFails"),
    ("inflight-peak-not-recorded", "Sources/HLSProxy/Fetch/InFlightMemory.swift",
     "state.peak = max(state.peak, state.used)", "state.peak = max(state.peak, 0)",
     "MemoryBoundTests/aStalledClientDoesNotPaceTheOriginWhenTheBodyIsStored"),
]

def run(args, log):
    with open(log, "w") as out:
        return subprocess.run(args, stdout=out, stderr=subprocess.STDOUT).returncode

def build(log):
    return run([SWIFT, "build", "--build-tests"], log)

def test(filter_, log):
    return run([SWIFT, "test", "--skip-build", "--parallel", "--num-workers", "2", "--filter", filter_], log)

wanted = set(sys.argv[1:])
unknown = wanted - {m[0] for m in MUTANTS}
if unknown:
    print(f"FAIL: no such mutant: {', '.join(sorted(unknown))}")
    sys.exit(1)
mutants = [m for m in MUTANTS if not wanted or m[0] in wanted]
logs = os.path.join(".build", "mutation-check")
os.makedirs(logs, exist_ok=True)

# Every mutation must still apply, exactly once: a mutant whose text moved would be "killed" by a build error.
for name, path, old, new, _ in mutants:
    count = open(path).read().count(old)
    if count != 1:
        print(f"FAIL: mutant {name}: the text to mutate occurs {count} times in {path}")
        sys.exit(1)

# The unmutated tests must pass, or every mutant would look killed.
if build(f"{logs}/build-clean.log") != 0:
    print(f"FAIL: the unmutated source does not build ({logs}/build-clean.log)")
    sys.exit(1)
filters = "|".join(sorted({m[4] for m in mutants}))
if test(filters, f"{logs}/tests-clean.log") != 0:
    print(f"FAIL: the unmutated tests fail ({logs}/tests-clean.log)")
    sys.exit(1)

results = []
for name, path, old, new, filter_ in mutants:
    original = open(path).read()
    started = time.time()
    try:
        with open(path, "w") as f:
            f.write(original.replace(old, new, 1))
        if build(f"{logs}/{name}.build.log") != 0:
            verdict = "no-build"  # a mutant that does not compile tells nothing: fix the mutation
        else:
            verdict = "killed" if test(filter_, f"{logs}/{name}.test.log") != 0 else "SURVIVED"
    finally:
        with open(path, "w") as f:
            f.write(original)
    results.append((name, verdict, filter_, time.time() - started))
    print(f"{name:40} {verdict:9} {time.time() - started:6.0f} s   ({filter_})", flush=True)

build(f"{logs}/build-restored.log")  # leave .build matching the source
killed = sum(1 for r in results if r[1] == "killed")
print(f"\n{killed}/{len(results)} mutants killed (logs in {logs}/)")
if killed != len(results):
    for name, verdict, filter_, _ in results:
        if verdict != "killed":
            print(f"  {name}: {verdict}")
    print("FAIL")
    sys.exit(1)
print("PASS")
PY

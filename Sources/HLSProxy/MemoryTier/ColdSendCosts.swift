#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// How a large body whose copy in the memory tier is *cold* is sent (`cache.memoryColdSends`) — a copy not sent
/// lately on an event loop other connections share, or any copy while ``MemoryTier/maxLargeSends`` other connections
/// hold a large body — where every connection on its loop holds a large body (elsewhere a cold copy takes its file:
/// ``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``).
package enum ColdSendMode: String, Sendable, CaseIterable {
    /// Whichever of the two costs this machine less CPU, as measured on the sends themselves (``ColdSendCosts``).
    case auto
    /// Always from memory.
    case memory
    /// Always from the file, with `sendfile`.
    case file
}

/// Which way a cold large body costs this machine less: written from memory (a copy out of memory into the socket,
/// then the receiver's copy) or sent from its file (`sendfile`: the receiver's copy out of the page cache), measured on
/// the sends that had the choice.
///
/// Neither wins everywhere. On one machine cold 2 MiB copies from memory took 406–496 µs of CPU per hit against 169
/// with `sendfile`; on another (a newer CPU and kernel) `sendfile` of the same hits took more CPU than the copies, for
/// the server and for the receiver alike, and Varnish, writing from memory, served a loop of segments 1.7 times as
/// fast as nginx's `sendfile` (docs/benchmarks.md, issue 39). So in `auto` each cold send is timed: the thread's CPU
/// time (`CLOCK_THREAD_CPUTIME_ID`, which a busy machine's waits do not inflate) across its system calls, per byte
/// the kernel took, kept as a moving average per way (``record(_:nanoseconds:bytes:)``). The receiver's CPU is not
/// seen: on the second machine, at 8 connections, copies served 10–18 % more hits while this clock put `sendfile` at
/// 93–246 µs per MiB against memory's 187–219, so there the way taken changes between runs. The first
/// ``samplesToStart`` cold sends of each way alternate; then the cheaper way is taken, and one cold send in
/// ``exploreEvery`` the other, so that a change of the machine's costs is noticed. Shared by every event loop, in
/// atomics: a sample lost to a race between two loops is only one sample.
package final class ColdSendCosts: Sendable {
    /// The two ways.
    package enum Way: Int, Sendable {
        case memory = 0
        case file = 1
    }

    let mode: ColdSendMode
    /// Samples of each way taken before either is preferred.
    static let samplesToStart = 8
    /// Once both are known, one cold send in this many takes the dearer way.
    static let exploreEvery = 64
    /// The moving average moves by 1/2^this of the difference per sample (1/8).
    static let averageShift = 3
    /// Sends of fewer bytes than this say too little of a way's cost per byte to be counted.
    static let minimumSampleBytes = 64 << 10

    /// Per way: the average CPU nanoseconds per MiB taken by the kernel, and the samples counted.
    private let memoryCost = Atomic<Int>(0)
    private let fileCost = Atomic<Int>(0)
    private let memorySamples = Atomic<Int>(0)
    private let fileSamples = Atomic<Int>(0)
    /// Cold sends decided so far (which of them alternate, or explore).
    private let decisions = Atomic<Int>(0)

    package init(mode: ColdSendMode) {
        self.mode = mode
    }

    /// The way to send the next cold body; in `auto` also counts the decision.
    package func choose() -> Way {
        switch mode {
        case .memory: return .memory
        case .file: return .file
        case .auto:
            let decision = decisions.wrappingAdd(1, ordering: .relaxed).oldValue
            guard let cheaper = preferred else { return decision & 1 == 0 ? .memory : .file }
            guard decision % Self.exploreEvery != Self.exploreEvery - 1 else { return cheaper == .memory ? .file : .memory }
            return cheaper
        }
    }

    /// The way taken when nothing is explored: the mode's, or in `auto` the cheaper once both ways have
    /// ``samplesToStart`` samples (nil before).
    package var preferred: Way? {
        switch mode {
        case .memory: return .memory
        case .file: return .file
        case .auto:
            guard memorySamples.load(ordering: .relaxed) >= Self.samplesToStart,
                fileSamples.load(ordering: .relaxed) >= Self.samplesToStart
            else { return nil }
            return memoryCost.load(ordering: .relaxed) <= fileCost.load(ordering: .relaxed) ? .memory : .file
        }
    }

    /// Whether cold sends are measured (`auto`).
    package var measures: Bool { mode == .auto }

    /// Counts one cold send of `way` that took `nanoseconds` of the thread's CPU for the `bytes` the kernel took.
    package func record(_ way: Way, nanoseconds: Int, bytes: Int) {
        guard mode == .auto, bytes >= Self.minimumSampleBytes, nanoseconds >= 0 else { return }
        let perMiB = Int((Double(nanoseconds) * Double(1 << 20) / Double(bytes)).rounded())
        // The first sample is the average; later ones move it by an eighth of the difference.
        func update(_ average: borrowing Atomic<Int>, _ counted: Int) {
            let old = average.load(ordering: .relaxed)
            average.store(counted == 0 ? perMiB : old + (perMiB - old) >> Self.averageShift, ordering: .relaxed)
        }
        switch way {
        case .memory: update(memoryCost, memorySamples.wrappingAdd(1, ordering: .relaxed).oldValue)
        case .file: update(fileCost, fileSamples.wrappingAdd(1, ordering: .relaxed).oldValue)
        }
    }

    /// What is known of each way: average CPU nanoseconds per MiB and samples (metrics, tests).
    package var snapshot: (memory: (nanosecondsPerMiB: Int, samples: Int), file: (nanosecondsPerMiB: Int, samples: Int)) {
        (
            (memoryCost.load(ordering: .relaxed), memorySamples.load(ordering: .relaxed)),
            (fileCost.load(ordering: .relaxed), fileSamples.load(ordering: .relaxed))
        )
    }

    /// The CPU time the calling thread has used, in nanoseconds.
    package static func threadCPUNanoseconds() -> Int {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
        return time.tv_sec * 1_000_000_000 + time.tv_nsec
    }
}

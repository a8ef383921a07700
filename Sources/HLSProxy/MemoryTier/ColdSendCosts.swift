#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// How a large body that is *cold* — not in the CPU's caches — is sent (`cache.memoryColdSends`): a copy in the
/// memory tier not sent lately on an event loop other connections share, or any copy while
/// ``MemoryTier/maxLargeSends`` other connections hold a large body, and a body over 64 KiB the tier does not hold —
/// where every connection on its loop holds a large body (elsewhere it takes its file with `sendfile`:
/// ``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``).
package enum ColdSendMode: String, Sendable, CaseIterable {
    /// Whichever way costs this machine least CPU, as measured on the sends themselves (``ColdSendCosts``).
    case auto
    /// A held copy from memory; a body the tier does not hold from its file, with `sendfile`.
    case memory
    /// Always from the file, with `sendfile`.
    case file
    /// Always from the file, written from a mapping of it (``ConnectionSocket/sendMapped(_:offset:length:)``).
    case mapped
}

/// Which way a cold large body costs this machine least: written from memory (a copy out of the tier's buffer into
/// the socket, then the receiver's copy), sent from its file with `sendfile` (the receiver's copy out of the page
/// cache), or written from a mapping of its file (a copy out of the page cache into the socket, then the receiver's).
/// Measured on the sends that had the choice.
///
/// None wins everywhere. On one machine cold 2 MiB copies from memory took 406–496 µs of CPU per hit against 169
/// with `sendfile`; on another (a newer CPU and kernel) `sendfile` of the same hits took more CPU than a copy, for the
/// server and for the receiver alike — the copy leaves the bytes in the CPU's caches for the receiver, `sendfile`
/// does not — and a write from a mapping of the file cost about what a copy from memory did (docs/benchmarks.md,
/// issue 39). So in `auto` each cold send is timed: the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, which a busy
/// machine's waits do not inflate) across its system calls, per byte the kernel took, kept as a moving average per
/// way (``record(_:nanoseconds:bytes:)``). Until every way open to a body has ``samplesToStart`` samples, its cold
/// sends take them in turn; then the cheapest is taken, and one cold send in ``exploreEvery`` another, so that a
/// change of the machine's costs is noticed. A held copy may take any of the three ways; a body the tier does not
/// hold, the two ways of its file. Shared by every event loop, in atomics: a sample lost to a race between two loops
/// is only one sample.
package final class ColdSendCosts: Sendable {
    /// The ways.
    package enum Way: Int, Sendable, CaseIterable {
        case memory = 0
        case file = 1
        case mapped = 2

        /// Its name in metrics.
        package var label: String {
            switch self {
            case .memory: return "memory"
            case .file: return "file"
            case .mapped: return "mapped"
            }
        }
    }

    /// What is known of one way: the average CPU nanoseconds per MiB, and the samples counted.
    package struct Measured: Sendable, Equatable {
        package var nanosecondsPerMiB: Int
        package var samples: Int
    }

    /// What is known of every way.
    package struct Snapshot: Sendable {
        /// Indexed by ``Way/rawValue``.
        package var ways: [Measured]
        package var memory: Measured { ways[Way.memory.rawValue] }
        package var file: Measured { ways[Way.file.rawValue] }
        package var mapped: Measured { ways[Way.mapped.rawValue] }
    }

    let mode: ColdSendMode
    /// Samples of each way taken before any is preferred.
    static let samplesToStart = 8
    /// Once all are known, one cold send in this many takes another way.
    static let exploreEvery = 64
    /// The moving average moves by 1/2^this of the difference per sample (1/8).
    static let averageShift = 3
    /// Sends of fewer bytes than this say too little of a way's cost per byte to be counted.
    static let minimumSampleBytes = 64 << 10

    /// Per way (by ``Way/rawValue``): the average CPU nanoseconds per MiB taken by the kernel, and the samples counted.
    private let memoryCost = Atomic<Int>(0)
    private let fileCost = Atomic<Int>(0)
    private let mappedCost = Atomic<Int>(0)
    private let memorySamples = Atomic<Int>(0)
    private let fileSamples = Atomic<Int>(0)
    private let mappedSamples = Atomic<Int>(0)
    /// Cold sends decided so far (which of them take turns, or explore).
    private let decisions = Atomic<Int>(0)

    package init(mode: ColdSendMode) {
        self.mode = mode
    }

    /// `body` given `way`'s average and its count of samples.
    private func withAtomics<R>(of way: Way, _ body: (borrowing Atomic<Int>, borrowing Atomic<Int>) -> R) -> R {
        switch way {
        case .memory: return body(memoryCost, memorySamples)
        case .file: return body(fileCost, fileSamples)
        case .mapped: return body(mappedCost, mappedSamples)
        }
    }

    private func measured(_ way: Way) -> Measured {
        withAtomics(of: way) { Measured(nanosecondsPerMiB: $0.load(ordering: .relaxed), samples: $1.load(ordering: .relaxed)) }
    }

    /// The ways open to a body: a copy the tier holds can go any way; a body it does not hold, from its file.
    static func ways(held: Bool) -> [Way] {
        held ? Way.allCases : [.file, .mapped]
    }

    /// The way to send the next cold body (`held`: the tier holds a copy of it); in `auto` also counts the decision.
    package func choose(held: Bool = true) -> Way {
        guard mode == .auto else { return fixedWay(held: held) }
        let decision = decisions.wrappingAdd(1, ordering: .relaxed).oldValue
        let ways = Self.ways(held: held)
        guard let cheapest = preferred(held: held) else { return ways[decision % ways.count] }
        guard decision % Self.exploreEvery == Self.exploreEvery - 1 else { return cheapest }
        let others = ways.filter { $0 != cheapest }
        return others[(decision / Self.exploreEvery) % others.count]
    }

    /// The way a fixed mode names (a held copy's, with `memory`; a body the tier does not hold takes `sendfile` then).
    private func fixedWay(held: Bool) -> Way {
        switch mode {
        case .memory: return held ? .memory : .file
        case .file, .auto: return .file
        case .mapped: return .mapped
        }
    }

    /// The way taken when nothing is explored: the mode's, or in `auto` the cheapest once every way open to the body
    /// has ``samplesToStart`` samples (nil before).
    package func preferred(held: Bool = true) -> Way? {
        guard mode == .auto else { return fixedWay(held: held) }
        let ways = Self.ways(held: held)
        let known = ways.map { measured($0) }
        guard known.allSatisfy({ $0.samples >= Self.samplesToStart }) else { return nil }
        // The first of the cheapest (ties: memory before the file, `sendfile` before a mapping).
        return zip(ways, known).min { $0.1.nanosecondsPerMiB < $1.1.nanosecondsPerMiB }?.0
    }

    /// Whether cold sends are measured (`auto`).
    package var measures: Bool { mode == .auto }

    /// Counts one cold send of `way` that took `nanoseconds` of the thread's CPU for the `bytes` the kernel took.
    package func record(_ way: Way, nanoseconds: Int, bytes: Int) {
        guard mode == .auto, bytes >= Self.minimumSampleBytes, nanoseconds >= 0 else { return }
        let perMiB = Int((Double(nanoseconds) * Double(1 << 20) / Double(bytes)).rounded())
        // The first sample is the average; later ones move it by an eighth of the difference.
        withAtomics(of: way) { average, samples in
            let counted = samples.wrappingAdd(1, ordering: .relaxed).oldValue
            let old = average.load(ordering: .relaxed)
            average.store(counted == 0 ? perMiB : old + (perMiB - old) >> Self.averageShift, ordering: .relaxed)
        }
    }

    /// What is known of each way (metrics, tests).
    package var snapshot: Snapshot {
        Snapshot(ways: Way.allCases.map { measured($0) })
    }

    /// The CPU time the calling thread has used, in nanoseconds.
    package static func threadCPUNanoseconds() -> Int {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
        return time.tv_sec * 1_000_000_000 + time.tv_nsec
    }
}

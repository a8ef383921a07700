/// How often each key was asked for lately, approximately, in a fixed amount of memory: a count-min sketch of
/// four rows of small saturating counters (at most 15), halved every ``sampleSize`` additions so that what was
/// popular an hour ago does not outweigh what is popular now — TinyLFU's frequency filter (Einziger, Friedman and
/// Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", 2017; Caffeine's `FrequencySketch`).
///
/// An estimate is never below the true count since the last halving (but for saturation) and is above it only when
/// other keys share all four of its counters. Pure and a value type: the memory tier keeps it under its lock.
struct FrequencySketch: Sendable {
    /// Counters saturate here (4 bits' worth, as in TinyLFU: enough to rank, small enough to age quickly).
    static let maxCount: UInt8 = 15
    private static let depth = 4

    private var counters: [UInt8]
    private let mask: Int
    /// Additions since the last halving.
    private(set) var additions = 0
    /// Additions between two halvings (ten per counter of a row, as TinyLFU's sample).
    let sampleSize: Int

    /// - Parameter width: counters per row, rounded up to a power of two (at least 64).
    init(width: Int) {
        var size = 64
        while size < width { size <<= 1 }
        mask = size - 1
        counters = [UInt8](repeating: 0, count: size * Self.depth)
        sampleSize = 10 * size
    }

    /// Counters per row.
    var width: Int { mask + 1 }

    /// The estimated count of `hash` (the smallest of its four counters).
    func frequency(_ hash: Int) -> Int {
        let slots = self.slots(of: hash)
        return Int(min(counters[slots.0], counters[slots.1], counters[slots.2], counters[slots.3]))
    }

    /// Counts one more request for `hash`: its smallest counters go up (the others already over-count it; raising
    /// only the smallest keeps the estimate tighter, "conservative update"). Every ``sampleSize`` additions all
    /// counters are halved.
    mutating func increment(_ hash: Int) {
        let slots = self.slots(of: hash)
        let current = min(counters[slots.0], counters[slots.1], counters[slots.2], counters[slots.3])
        guard current < Self.maxCount else { return }
        // One counter per row, so the four are distinct (and no array is made per request).
        if counters[slots.0] == current { counters[slots.0] = current + 1 }
        if counters[slots.1] == current { counters[slots.1] = current + 1 }
        if counters[slots.2] == current { counters[slots.2] = current + 1 }
        if counters[slots.3] == current { counters[slots.3] = current + 1 }
        additions += 1
        if additions >= sampleSize { halve() }
    }

    /// Halves every counter (the sketch's ageing).
    mutating func halve() {
        for index in counters.indices { counters[index] >>= 1 }
        additions /= 2
    }

    /// The four counters of `hash`, one per row: double hashing over a mixed hash (the key's own hash may be weak in
    /// its low bits).
    private func slots(of hash: Int) -> (Int, Int, Int, Int) {
        let first = Self.mix(UInt64(bitPattern: Int64(hash)))
        let step = Self.mix(first) | 1
        let width = mask + 1
        func column(_ row: UInt64) -> Int { Int(truncatingIfNeeded: first &+ row &* step) & mask }
        return (column(0), width + column(1), 2 * width + column(2), 3 * width + column(3))
    }

    /// SplitMix64's finaliser: every bit of the input moves every bit of the output.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

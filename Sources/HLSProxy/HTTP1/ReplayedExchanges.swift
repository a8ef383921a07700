#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import NIOCore

/// Requests answered again without being decoded (docs/architecture.md, "Replayed exchanges"): when a request's head
/// is byte for byte the head of an earlier request that was answered with a replayed hit (from the memory tier or
/// from its file), it is answered the same way again — with the same checks of the object, but without llhttp, the
/// header fields, the router and the target table. Players reload the same playlists and ask for the same segments
/// with the same bytes over and over; decoding them again was most of what such a hit cost in user space.
///
/// Only a whole head that NIO's decoder parsed before, at a message boundary, is remembered, so nothing is ever
/// parsed differently: the same bytes were a valid request with the same meaning (the Host check, the method,
/// no body, the page verdict, keep-alive). What can change between two identical requests is the server's state,
/// which ``ResourceService/replay(_:responder:)`` checks as the ordinary path would — each time, or for a small body
/// on the check of the one before while nothing it looked at changed (``ReplayCheck``).
///
/// One table per event loop, bound to it (no lock), bounded by the memory its entries take (``maxBytes``, an
/// estimate per entry: ``ReplayedExchange/estimatedBytes(headBytes:)``) and by a number of entries. A full table makes room only
/// for a head whose least recently used entry has gone unused for ``idleLookups`` (twice the entries held) lookups:
/// players walking more segments than the table holds (a library, a long VOD) would otherwise push each head out
/// just before it is asked for again and replay nothing; so the heads in use stay, and new ones come in as old ones
/// fall idle.
final class ReplayedExchanges: Sendable {
    /// Heads longer than this are not remembered (players send a few hundred bytes).
    static let maxHeadBytes = 2048
    /// The memory all the event loops' tables may take together (``bytesPerLoop(loops:)``): 4 MiB, about 3,400
    /// remembered heads of a player's size (256 bytes), 4,800 of a benchmark client's (80 bytes).
    static let defaultTotalBytes = 4 << 20
    /// The least one loop's table may take, however many loops share ``defaultTotalBytes``.
    static let minimumBytesPerLoop = 512 << 10
    /// Entries per table at most, whatever their size (``ProxyConfiguration/replayedHeadsPerLoop``; tests make it small).
    static let defaultMaxEntries = 16_384
    /// Each loop's share of ``defaultTotalBytes``, at least ``minimumBytesPerLoop``: with 2 loops 2 MiB each (a
    /// library of 2,400 segments asked for by a benchmark client's 80-byte heads stays whole in each), with 16 loops
    /// 512 KiB each (8 MiB in all).
    static func bytesPerLoop(loops: Int) -> Int { max(minimumBytesPerLoop, defaultTotalBytes / max(1, loops)) }
    /// Heads remembered here at most.
    let maxEntries: Int
    /// The estimated memory of the heads remembered here at most.
    let maxBytes: Int
    /// Lookups after which an entry not used since counts as idle: it may give way to a new head.
    var idleLookups: Int { 2 * max(1, state.value.table.count) }

    private struct State {
        var table: BoundedLRU<Int, ReplayedExchange>
        /// Heads looked up so far: the clock entries' use is timed by (``ReplayedExchange/lastUsed``).
        var lookups = 0
        /// Requests answered from the table (tests).
        var replayed = 0
        /// Of those, answered on an earlier check alone (``ReplayCheck``; tests).
        var replayedOnCheck = 0
    }

    private let state: NIOLoopBoundBox<State>

    init(
        eventLoop: any EventLoop, maxEntries: Int = ReplayedExchanges.defaultMaxEntries, maxBytes: Int = ReplayedExchanges.defaultTotalBytes
    ) {
        self.maxEntries = maxEntries
        self.maxBytes = maxBytes
        state = NIOLoopBoundBox.makeBoxSendingValue(
            State(table: BoundedLRU(maxCount: maxEntries, maxCost: maxBytes)), eventLoop: eventLoop)
    }

    /// The estimated memory of the heads remembered (tests).
    var bytes: Int { state.value.table.totalCost }

    /// Requests answered from the table (tests).
    var replayed: Int {
        get { state.value.replayed }
        set { state.value.replayed = newValue }
    }

    /// Requests answered on an earlier check alone (tests).
    var replayedOnCheck: Int {
        get { state.value.replayedOnCheck }
        set { state.value.replayedOnCheck = newValue }
    }

    /// The exchange remembered for exactly these head bytes.
    func exchange(for head: ByteBufferView, hash: Int) -> ReplayedExchange? {
        state.value.lookups &+= 1
        guard let found = state.value.table.value(forKey: hash) else { return nil }
        guard found.head.count == head.count else { return nil }
        let same =
            head.withContiguousStorageIfAvailable { received in
                found.head.withUnsafeBufferPointer { memcmp($0.baseAddress!, received.baseAddress!, received.count) == 0 }
            } ?? found.head.elementsEqual(head)
        guard same else { return nil }
        found.lastUsed = state.value.lookups
        return found
    }

    /// Remembers the exchange `make` builds for the head hashed `hash` (`headBytes` long), if it has room: it is
    /// remembered already (replaced), the table has room, or its least recently used entry has been idle for
    /// ``idleLookups`` lookups — then the least recently used entries make way. Nothing is built otherwise, so a
    /// full table of heads in use costs a request nothing more.
    func remember(hash: Int, headBytes: Int, _ make: () -> ReplayedExchange) {
        let cost = ReplayedExchange.estimatedBytes(headBytes: headBytes)
        let now = state.value.lookups
        if state.value.table.count >= maxEntries || state.value.table.totalCost + cost > maxBytes, !state.value.table.contains(hash) {
            let idleAfter = idleLookups
            var idle = false
            state.value.table.forEachLeastRecentFirst { _, oldest, _ in
                idle = now &- oldest.lastUsed >= idleAfter
                return false
            }
            guard idle else { return }
        }
        let exchange = make()
        exchange.lastUsed = now
        state.value.table.setValue(exchange, forKey: hash, cost: cost)
    }

    func forget(_ exchange: ReplayedExchange) {
        if state.value.table.peekValue(forKey: exchange.hash) === exchange { state.value.table.removeValue(forKey: exchange.hash) }
    }

    var count: Int { state.value.table.count }

    /// The length of the request head at the start of `bytes` (through its blank line) when it is a complete `GET`
    /// head of at most ``maxHeadBytes``; nil otherwise (another method, more bytes to come, too long).
    static func getHeadLength(_ bytes: ByteBufferView) -> Int? {
        // On the bytes in place: indexing the view byte by byte was 1 % of a replayed hit's CPU.
        let found = bytes.withContiguousStorageIfAvailable { buffer -> Int? in
            guard buffer.count >= 20 else { return nil }
            // "GET /"
            guard buffer[0] == 0x47, buffer[1] == 0x45, buffer[2] == 0x54, buffer[3] == 0x20, buffer[4] == 0x2F else { return nil }
            let end = min(buffer.count, maxHeadBytes)
            var index = 5
            // A CR LF CR LF ends the head; anything else (a bare LF line end) is left to the decoder. Looking at the
            // fourth byte first skips ahead by four where it is neither CR nor LF.
            while index + 3 < end {
                let fourth = buffer[index + 3]
                if fourth != 10 {
                    index += fourth == 13 ? 1 : 4
                    continue
                }
                if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13 { return index + 4 }
                index += 1
            }
            return nil
        }
        return found ?? nil
    }

    /// A seeded multiply-and-shift hash of a head, 8 bytes a step: SipHash (`Hasher`) took ~5 instructions a byte
    /// (measured on 80-byte heads; a player's 300-byte head would be ~1,500 of a replayed hit's ~27,000). It needs no more: the table's dictionary hashes
    /// the result again with the process's seeded `Hasher`, and a remembered head is compared byte for byte before it
    /// is replayed, so two heads that hash alike only share a place in the table. Each step is a bijection of the
    /// state for a given word, so two heads of one length that differ in one 8-byte word never hash alike.
    static func hash(_ head: ByteBufferView) -> Int {
        head.withContiguousStorageIfAvailable { mix(UnsafeRawBufferPointer($0)) } ?? Array(head).withUnsafeBytes { mix($0) }
    }

    /// Chosen once per process: which heads share a place in the table cannot be worked out in advance.
    private static let seed = UInt64.random(in: .min ... .max)

    private static func mix(_ bytes: UnsafeRawBufferPointer) -> Int {
        let multiplier: UInt64 = 0x9FB2_1C65_1E98_DF25
        var state = seed ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            state = (state ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* multiplier
            state ^= state >> 29
            offset += 8
        }
        if offset < bytes.count {
            var last: UInt64 = 0
            for index in offset..<bytes.count { last = last << 8 | UInt64(bytes[index]) }
            state = (state ^ last) &* multiplier
            state ^= state >> 29
        }
        state = (state ^ (state >> 32)) &* multiplier
        return Int(bitPattern: UInt(state ^ (state >> 29)))
    }
}

/// A request head and how it was answered: a replayed hit of a stored object or of a stored playlist's rewritten
/// copy, from the memory tier or from its file.
///
/// `@unchecked Sendable`: ``check`` changes, on the exchange's event loop only (its ``ReplayedExchanges`` table is
/// bound to that loop, and only requests read there reach it).
final class ReplayedExchange: @unchecked Sendable {
    /// The head's bytes, exactly as received.
    let head: [UInt8]
    let hash: Int
    /// The request as decoded from them (its peer address is replaced by each connection's own).
    let request: ProxyRequest
    let route: RequestRoute
    let routeObserver: (any ProxyRouteExtension)?
    let answer: ReplayedAnswer
    /// The version of `http.allowedWebOrigins` its page was judged by (``LiveWebOrigins``): after a reload the same
    /// bytes may come from a page judged otherwise, with other CORS headers — decoded again.
    let webOriginsVersion: Int
    /// What the answer was last checked against, when a small body can be sent again on it alone (``ReplayCheck``).
    var check: ReplayCheck?
    /// When it was last remembered or answered, on its table's clock (``ReplayedExchanges``).
    var lastUsed = 0

    /// The memory an exchange takes besides its head (the exchange, the decoded request's storage, the table's
    /// slot), measured: 6,144 more entries with 80-byte heads took 5 MB (~850 bytes each).
    static let fixedBytes = 704

    /// The memory an entry with a head of `headBytes` is counted for: its head twice (the bytes, and the decoded
    /// request's strings) and the rest (``fixedBytes``).
    static func estimatedBytes(headBytes: Int) -> Int { fixedBytes + 2 * headBytes }

    init(
        head: [UInt8], hash: Int, request: ProxyRequest, route: RequestRoute, routeObserver: (any ProxyRouteExtension)?,
        answer: ReplayedAnswer, webOriginsVersion: Int = 0
    ) {
        self.webOriginsVersion = webOriginsVersion
        self.head = head
        self.hash = hash
        self.request = request
        self.route = route
        self.routeObserver = routeObserver
        self.answer = answer
    }
}

/// What a replayed exchange answered with, and what ``ResourceService/replay(_:responder:)`` checks again.
enum ReplayedAnswer: Sendable {
    /// A stored object's replayed hit.
    case object(HitReplay, target: ResolvedTarget)
    /// A stored playlist's copy (`copy`, of `playlist`) for the target.
    case playlist(PlaylistReplay, copy: HitReplay, target: ResolvedTarget)
    /// The live playlist held in memory for the target, whichever version it is when asked again.
    case live(target: ResolvedTarget)

    var target: ResolvedTarget {
        switch self {
        case .object(_, let target), .playlist(_, _, let target), .live(let target): return target
        }
    }
}

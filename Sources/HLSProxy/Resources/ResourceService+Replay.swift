import Foundation
import HLSCacheCore
import HLSCacheStore
import NIOCore
import NIOHTTP1

/// Replayed hits (docs/architecture.md, "A request for a segment", step 3): a target served whole before is answered
/// with the head rendered then, from the memory tier when it holds the object, else from its file.
extension ResourceService {
    /// Where a ``HitReplay`` rendered for a whole-object hit is remembered.
    enum ReplayTarget {
        /// A segment or other media object: the target's ``TargetMemo/replay``; `current` is the one remembered now.
        case object(String, current: HitReplay?)
        /// A copy of a stored playlist (rewritten, or rewritten and gzipped) served for the target's raw playlist
        /// `raw` to a client that does (`forGzipClients`) or does not accept gzip: the target's
        /// ``TargetMemo/playlistReplay``.
        case playlist(String, raw: CachedObject, forGzipClients: Bool, current: PlaylistReplay?)

        var current: HitReplay? {
            switch self {
            case .object(_, let current): return current
            case .playlist(_, let raw, let forGzipClients, let current):
                guard let current, current.raw == raw else { return nil }
                return forGzipClients ? current.forGzipClients : current.identity
            }
        }
    }

    func remember(_ replay: HitReplay, as place: ReplayTarget) {
        switch place {
        case .object(let target, _):
            targets.withLockedValue { $0.modifyValue(forKey: target) { $0.replay = replay } }
        case .playlist(let target, let raw, let forGzipClients, _):
            targets.withLockedValue { table in
                table.modifyValue(forKey: target) { memo in
                    // A new raw version starts afresh: the other encoding's replay belongs to the old one.
                    let kept = memo.playlistReplay.flatMap { $0.raw == raw ? $0 : nil }
                    memo.playlistReplay = PlaylistReplay(
                        raw: raw, identity: forGzipClients ? kept?.identity : replay,
                        forGzipClients: forGzipClients ? replay : kept?.forGzipClients)
                }
            }
        }
    }

    /// Sends the live playlist `live` (held in memory) with its prepared head (``PlaylistService/preparedAnswer(for:to:)``).
    /// False, having sent nothing: the request is not one a prepared head fits.
    func sendPreparedLive(_ live: RewrittenPlaylist, responder: Responder) -> Bool {
        guard let prepared = services.playlists.preparedAnswer(for: live, to: responder) else { return false }
        responder.route = .playlist
        responder.cacheResult = .live
        responder.sendPrepared(prepared.head, headers: prepared.headers, body: .bytes(prepared.body))
        return true
    }

    /// Sends `replay`'s object from the memory tier if it holds the current version (and, for a large body, fewer
    /// than the tier's limit of connections hold one). The store records the access as for any hit; no pin is
    /// needed, as no file is read.
    /// `alsoUnchanged`: another stored object the answer holds only while it is unchanged too (a playlist's raw
    /// copy, for its rewritten copy), checked and touched under the same store lock.
    func sendFromMemory(_ replay: HitReplay, responder: Responder, alsoUnchanged other: CachedObject? = nil) -> Bool {
        guard services.memory.admits(replay.object),
            let body = services.memory.bodyToSend(
                of: replay.object, on: responder.largeSendHold, alone: responder.aloneOnLoop,
                headOnly: responder.request.isHead, counted: &responder.memoryTierCounted),
            services.store.touchIfUnchanged(replay.object, and: other)
        else { return false }
        responder.cacheResult = .hit
        responder.sendPrepared(replay.head, headers: replay.headers, body: .bytes(body))
        return true
    }

    /// ``sendFromMemory(_:responder:alsoUnchanged:)`` for a replayed exchange: for a small body, what it was checked
    /// against is kept on the exchange, so the same answer can be sent again on that check alone (``ReplayCheck``).
    /// False: nothing was sent.
    private func sendFromMemory(
        _ replay: HitReplay, for exchange: ReplayedExchange, responder: Responder, alsoUnchanged other: CachedObject?,
        tokens: UInt64
    ) -> Bool {
        guard services.memory.admits(replay.object) else { return false }
        // A large body (its sends are counted per connection): checked each time.
        guard replay.object.size <= Int64(MemoryTier.alwaysFromMemoryBytes) else {
            return sendFromMemory(replay, responder: responder, alsoUnchanged: other)
        }
        // Not held: false at once (the tier was asked; the caller sends the file).
        guard let (entry, fileCheckedUntil) = services.memory.smallEntry(of: replay.object, counted: &responder.memoryTierCounted)
        else { return false }
        guard let current = services.store.currentCheck(replay.object, and: other) else { return false }
        exchange.check = ReplayCheck(store: current, tokens: tokens, fileCheckedUntil: fileCheckedUntil, entry: entry)
        responder.cacheResult = .hit
        responder.sendPrepared(replay.head, headers: replay.headers, body: .bytes(entry.body))
        return true
    }

    /// A stored playlist served whole to this target before: if its raw copy is unchanged and the request's tokens
    /// are the ones it was fetched for, the copy for the client's encoding is replayed. False: the ordinary path
    /// (which deals with other tokens, a new version, a missing copy).
    func replayPlaylistHit(_ playlist: PlaylistReplay, memo: TargetMemo, request: ProxyRequest, responder: Responder) -> Bool {
        guard request.isPlainFetch, responder.sendsPlainKeepAlive, !responder.echoesOrigin,
            let copy = request.acceptsGzip ? playlist.forGzipClients : playlist.identity,
            services.store.touchIfUnchanged(playlist.raw),
            !services.playlists.hasOtherTokens(than: memo.resolved.tokens, key: memo.key, stored: playlist.raw)
        else { return false }
        // Set before sending: a response written at once is recorded at once.
        let route = responder.route
        responder.route = .playlist
        guard sendReplayed(copy, responder: responder) else {
            responder.route = route
            return false
        }
        responder.replayedAnswer = .playlist(playlist, copy: copy, target: memo.resolved)
        return true
    }

    /// Answers a request whose head is byte for byte one answered before (``ReplayedExchanges``), if that answer
    /// still holds: checked as ``handle(_:responder:)`` checks a target it remembers (not a registered key now, no
    /// live playlist in memory for it, the same stored version, for a playlist the same tokens), and sent from the
    /// memory tier, else from its file. A small body checked so before is sent again on the exchange's
    /// ``ReplayCheck`` while it holds (nothing those checks look at changed since). A live playlist is sent as the
    /// version in memory now, if one is (``PlaylistService/preparedAnswer(for:to:)``). Nil, having sent nothing:
    /// decode the request and take the ordinary path.
    func replay(_ exchange: ReplayedExchange, responder: Responder) -> ReplayedHow? {
        let answer = exchange.answer
        let target = answer.target
        let key = target.key
        guard (keysShareCacheKeys ? services.keys.registeredID(for: key) : services.keys.registeredID(for: target.url)) == nil
        else { return nil }
        let live = services.playlists.livePlaylist(key)
        if case .live = answer {
            // None in memory now (expired): the ordinary path fetches the next version.
            guard let live, sendPreparedLive(live, responder: responder) else { return nil }
            readAhead(after: key)
            return .checked
        }
        guard live == nil else { return nil }
        // Read before the checks: a change during them moves it, and the next request checks again.
        let tokens = services.playlists.tokensVersion
        var how = ReplayedHow.onEarlierCheck
        switch answer {
        case .object(let replay, _):
            if let body = exchange.check?.body(store: services.store, memory: services.memory, tokens: nil) {
                responder.cacheResult = .hit
                responder.sendPrepared(replay.head, headers: replay.headers, body: .bytes(body))
            } else {
                exchange.check = nil
                guard
                    sendFromMemory(replay, for: exchange, responder: responder, alsoUnchanged: nil, tokens: tokens)
                        || sendReplayedFile(replay, responder: responder)
                else { return nil }
                how = .checked
            }
        case .live:
            return nil  // answered above
        case .playlist(let playlist, let copy, _):
            if let body = exchange.check?.body(store: services.store, memory: services.memory, tokens: tokens) {
                responder.route = .playlist
                responder.cacheResult = .hit
                responder.sendPrepared(copy.head, headers: copy.headers, body: .bytes(body))
            } else {
                exchange.check = nil
                guard !services.playlists.hasOtherTokens(than: target.tokens, key: key, stored: playlist.raw) else { return nil }
                responder.route = .playlist
                guard
                    sendFromMemory(copy, for: exchange, responder: responder, alsoUnchanged: playlist.raw, tokens: tokens)
                        || (services.store.touchIfUnchanged(playlist.raw) && sendReplayedFile(copy, responder: responder))
                else { return nil }
                how = .checked
            }
        }
        readAhead(after: key)
        return how
    }
}

/// How a replayed exchange was answered (``ResourceService/replay(_:responder:)``).
enum ReplayedHow {
    /// After the store, the tier and the tables were asked.
    case checked
    /// On the exchange's ``ReplayCheck`` alone.
    case onEarlierCheck
}

/// What a replayed exchange's small hit was last checked against (``ResourceService/replay(_:responder:)``): the
/// store's map and the playlists' tokens at the generations it was checked at (``CurrentCheck``,
/// ``PlaylistService/tokensVersion``), nothing checked expired, the memory tier's entry still held and its file not
/// yet due for a new look (``MemoryTier/recheckInterval``). While all of that holds nothing those checks look at has
/// changed, so the same head and bytes are sent without asking the store, the tier or the tables again — the
/// checks, with the accesses they record (the store's access time, the tier's request count), come back at least
/// once per ``MemoryTier/recheckInterval`` per exchange and with any change: a hot object's access time is that
/// coarse (as Varnish's `lru_interval`). The entry is held weakly: an evicted copy is not kept alive by an exchange
/// remembered on some event loop.
///
/// A class, so that reading it from its exchange is a retain: a struct holding a weak reference is copied with a
/// weak-reference copy, which cost more. Made on the exchange's event loop, read only there.
final class ReplayCheck {
    let store: CurrentCheck
    /// ``PlaylistService/tokensVersion`` read before the check (compared only for playlists).
    let tokens: UInt64
    /// ``MemoryTier/clock`` time until which the entry's file needs no new look.
    let fileCheckedUntil: UInt64
    private weak var entry: MemoryObject?

    init(store: CurrentCheck, tokens: UInt64, fileCheckedUntil: UInt64, entry: MemoryObject) {
        self.store = store
        self.tokens = tokens
        self.fileCheckedUntil = fileCheckedUntil
        self.entry = entry
    }

    /// The bytes to send again, if the check holds; `tokens`: the tokens generation now, for a playlist.
    func body(store current: CacheStore, memory: MemoryTier, tokens: UInt64?) -> ByteBuffer? {
        if let tokens, tokens != self.tokens { return nil }
        guard memory.clock < fileCheckedUntil, store.holds(in: current, now: Date().timeIntervalSince1970), let entry else { return nil }
        return entry.body
    }
}

/// The copies of a stored playlist last served whole for a target, as ``HitReplay``s: for clients that do not accept
/// gzip (the rewritten copy) and for those that do (the gzipped copy, or the rewritten one when the playlist is too
/// small to have a gzipped copy). Valid while the raw copy `raw` is the stored version.
final class PlaylistReplay: Sendable {
    let raw: CachedObject
    let identity: HitReplay?
    let forGzipClients: HitReplay?

    init(raw: CachedObject, identity: HitReplay?, forGzipClients: HitReplay?) {
        self.raw = raw
        self.identity = identity
        self.forGzipClients = forGzipClients
    }
}

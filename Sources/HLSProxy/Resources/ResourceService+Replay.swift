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
        if sendFromMemory(copy, responder: responder) {
            responder.replayedAnswer = .playlist(playlist, copy: copy, target: memo.resolved)
            return true
        }
        guard sendReplayed(copy, responder: responder) else {
            responder.route = route
            return false
        }
        return true
    }

    /// Answers a request whose head is byte for byte one answered before with `answer` (``ReplayedExchanges``), if
    /// that answer still holds: checked as ``handle(_:responder:)`` checks a target it remembers (not a registered
    /// key now, no live playlist in memory for it, the same stored version, for a playlist the same tokens), and sent
    /// only from the memory tier. False, having sent nothing: decode the request and take the ordinary path.
    func replay(_ answer: ReplayedAnswer, responder: Responder) -> Bool {
        let target = answer.target
        let key = target.key
        guard (keysShareCacheKeys ? services.keys.registeredID(for: key) : services.keys.registeredID(for: target.url)) == nil,
            services.playlists.livePlaylist(key) == nil
        else { return false }
        switch answer {
        case .object(let replay, _):
            guard sendFromMemory(replay, responder: responder) else { return false }
        case .playlist(let playlist, let copy, _):
            guard !services.playlists.hasOtherTokens(than: target.tokens, key: key, stored: playlist.raw) else { return false }
            responder.route = .playlist
            guard sendFromMemory(copy, responder: responder, alsoUnchanged: playlist.raw) else { return false }
        }
        readAhead(after: key)
        return true
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

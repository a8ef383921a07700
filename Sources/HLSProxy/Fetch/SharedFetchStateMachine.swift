import HLSCacheCore
import HLSOrigin
import NIOCore

/// The decisions of one shared origin download (``SharedFetch``), without I/O: what the head means (playlist or
/// media, sniffed from the first bytes when the type leaves it open), which bytes stay in memory, when the origin
/// must wait, when the download is worth finishing without a client, and what each client can read from where.
///
/// Phases: awaiting the head → sniffing (the first bytes decide) → streaming | collecting a playlist → (processing
/// it →) finished, or failed from any of them.
///
/// **Memory.** Of a streamed body, at most ``Limits/window`` bytes are held in memory: bytes a client still needs
/// or the cache file has not taken yet. Past the window, bytes on disk leave memory, and the origin waits
/// (``Effect/pauseOrigin``) for the cache file to take the rest — or, without a cache file, for the slowest client.
/// A client behind the window reads what it lacks from the growing cache file (everything before ``View/fileEnd`` is
/// on disk), then follows the live edge from memory, so a late joiner or a slow client costs no memory.
struct SharedFetchStateMachine {
    struct Limits: Sendable {
        /// Body bytes of one download held in memory at most (`limits.inFlightBuffer`).
        var window: Int64
        /// Larger playlists are refused (`playlists.maxSize`).
        var maxPlaylistBytes: Int64
        /// Larger objects are relayed but not stored, and not downloaded for nobody (`cache.maxObjectSize`).
        var maxObjectBytes: Int64
    }

    typealias SubscriberID = ObjectIdentifier

    /// The effects of one event, in order.
    typealias Action = [Effect]

    /// What one client can read, from its position on.
    struct View {
        var head: FetchHead?
        var failure: (any HTTPMappableError)?
        var playlist: RewrittenPlaylist?
        /// The whole body arrived.
        var ended = false
        /// Body bytes received so far.
        var received: Int64 = 0
        /// Bytes from the position on, in memory (the first chunk starts exactly at the position).
        var chunks: [ByteBuffer] = []
        /// When the position is behind the window: the bytes up to here are read from the cache file.
        var fileEnd: Int64?
    }

    private enum State {
        case awaitingHead
        /// The type leaves open whether this is a playlist; the first bytes (in `sniffer`) tell.
        case sniffing(OriginResponseHead)
        /// A playlist, collected whole in `collected`.
        case collectingPlaylist(FetchHead)
        case processingPlaylist(FetchHead)
        case playlistReady(FetchHead, RewrittenPlaylist)
        /// Media, relayed and stored as it arrives; `ended` once every byte is in.
        case streaming(FetchHead, ended: Bool)
        case failed(any HTTPMappableError)
    }

    /// The cache file of a streamed body.
    private enum File {
        /// Not stored (a playlist, a key-sized body, too large, not cacheable).
        case none
        /// Being created on the thread pool.
        case opening
        /// Accepting bytes; `written` of them are on disk (readable by clients).
        case open(written: Int64)
        /// No longer written (a write failed, or the object turned out not worth storing); the first `readable`
        /// bytes stay readable.
        case stopped(readable: Int64)
    }

    private struct Chunk {
        var offset: Int64
        var buffer: ByteBuffer
        var end: Int64 { offset + Int64(buffer.readableBytes) }
    }

    private let limits: Limits
    private let url: OriginURL
    private let cacheable: Bool
    private var state: State = .awaitingHead
    private var file: File = .none
    /// Body bytes `[windowStart, received)` of a streamed body.
    private var window = CircularBuffer<Chunk>()
    private var windowStart: Int64 = 0
    private var received: Int64 = 0
    /// The first bytes, while they decide whether this is a playlist.
    private var sniffer = PlaylistSniffer()
    /// The playlist being collected.
    private var collected: [ByteBuffer] = []
    private var collectedBytes: Int64 = 0
    /// Each client's position in the body.
    private var subscribers: [SubscriberID: Int64] = [:]
    private var originPaused = false
    /// No client wants the body (a read-ahead, a background fill, or every client left before the head): it is
    /// downloaded only when it is worth storing.
    private var unwatched: Bool
    /// A channel of an IPTV channel list: a body of unknown length is a live stream that never ends, relayed to its
    /// clients and never stored (its cache file would only grow to `cache.maxObjectSize` and be thrown away).
    private let isChannel: Bool
    /// Bytes held in memory (window, sniffed and collected).
    private var held: Int64 = 0

    /// - Parameters:
    ///   - cacheable: whether the body may be stored.
    ///   - unwatched: started for no client (read-ahead, the background fill of a Range miss).
    ///   - isChannel: the URL is a channel of an IPTV channel list (a body of unknown length is not stored).
    init(limits: Limits, url: OriginURL, cacheable: Bool, unwatched: Bool = false, isChannel: Bool = false) {
        self.limits = limits
        self.url = url
        self.cacheable = cacheable
        self.unwatched = unwatched
        self.isChannel = isChannel
    }

    // MARK: - Queries

    /// The download failed.
    var failure: (any HTTPMappableError)? {
        if case .failed(let error) = state { return error }
        return nil
    }

    /// The download failed because the origin did (unreachable, refused, an error status, a body cut short) — not
    /// because this server stopped it (no reader left, over a limit).
    private(set) var failedAtOrigin = false

    /// Whether the download still runs (no outcome yet).
    var isRunning: Bool {
        switch state {
        case .awaitingHead, .sniffing, .collectingPlaylist, .processingPlaylist: return true
        case .streaming(_, let ended): return !ended
        case .playlistReady, .failed: return false
        }
    }

    /// Body bytes held in memory now.
    var heldBytes: Int64 { held }

    /// The head (once known), the bytes received, and the first byte a new client can be served from.
    var progress: (head: FetchHead?, received: Int64, servableFrom: Int64, failed: Bool) {
        switch state {
        case .awaitingHead, .sniffing: return (nil, 0, 0, false)
        case .collectingPlaylist(let head), .processingPlaylist(let head), .playlistReady(let head, _): return (head, received, 0, false)
        case .streaming(let head, _): return (head, received, servableFrom, false)
        case .failed: return (nil, received, received, true)
        }
    }

    /// The first byte still readable: 0 when everything before the window is on disk.
    private var servableFrom: Int64 {
        fileReadable >= windowStart ? 0 : windowStart
    }

    /// Bytes readable from the cache file.
    private var fileReadable: Int64 {
        switch file {
        case .none, .opening: return 0
        case .open(let written): return written
        case .stopped(let readable): return readable
        }
    }

    /// What a client at `offset` can read now: at most `maxChunks` chunks from memory, or a span of the file.
    func view(from offset: Int64, maxChunks: Int = 64) -> View {
        switch state {
        case .awaitingHead, .sniffing:
            return View()
        case .collectingPlaylist(let head), .processingPlaylist(let head):
            return View(head: head)
        case .playlistReady(let head, let playlist):
            return View(head: head, playlist: playlist, ended: true)
        case .failed(let error):
            return View(failure: error)
        case .streaming(let head, let ended):
            var view = View(head: head, ended: ended, received: received)
            if offset < windowStart {
                view.fileEnd = windowStart
                return view
            }
            // The first chunk that ends after `offset` (chunks are contiguous and ordered).
            var low = window.startIndex
            var high = window.endIndex
            while low < high {
                let middle = window.index(low, offsetBy: window.distance(from: low, to: high) / 2)
                if window[middle].end <= offset { low = window.index(after: middle) } else { high = middle }
            }
            var index = low
            while index < window.endIndex && view.chunks.count < maxChunks {
                let chunk = window[index]
                if chunk.offset < offset {
                    let skip = Int(offset - chunk.offset)
                    view.chunks.append(
                        chunk.buffer.getSlice(at: chunk.buffer.readerIndex + skip, length: chunk.buffer.readableBytes - skip)!)
                } else {
                    view.chunks.append(chunk.buffer)
                }
                index = window.index(after: index)
            }
            return view
        }
    }

    // MARK: - Origin events

    mutating func headReceived(_ head: OriginResponseHead) -> Action {
        guard case .awaitingHead = state else { return [] }
        switch OriginHeadClassifier.whole(head, url: url) {
        case .failure(let error):
            return fail(error, origin: true)
        case .success(.sniff):
            state = .sniffing(head)
            return []
        case .success(let verdict):
            return begin(head, isPlaylist: verdict == .playlist)
        }
    }

    mutating func bodyReceived(_ buffer: ByteBuffer) -> Action {
        let count = Int64(buffer.readableBytes)
        switch state {
        case .sniffing(let head):
            held += count
            let action: Action = [.releaseMemory(-count)]
            guard let isPlaylist = sniffer.feed(buffer) else { return action }
            return action + endSniffing(head, isPlaylist: isPlaylist)
        case .collectingPlaylist:
            collected.append(buffer)
            collectedBytes += count
            held += count
            received += count
            var action: Action = [.releaseMemory(-count)]
            if received > limits.maxPlaylistBytes {
                action += (fail(ProxyError.corrupted("playlist is over the \(limits.maxPlaylistBytes)-byte limit"), origin: false))
            }
            return action
        case .streaming(let head, ended: false):
            return append(buffer, head: head)
        case .awaitingHead, .processingPlaylist, .playlistReady, .streaming(_, ended: true), .failed:
            return []
        }
    }

    mutating func originFinished(_ result: Result<Void, OriginError>) -> Action {
        switch result {
        case .failure(let error):
            guard isRunning else { return [] }
            return fail(error, origin: true)
        case .success:
            switch state {
            case .awaitingHead:
                return fail(ProxyError.corrupted("origin response ended without a head"), origin: false)
            case .sniffing(let head):
                // A body too short to tell (or empty) was held until now.
                var action = endSniffing(head, isPlaylist: sniffer.decisionAtEnd)
                if action.failure == nil { action += originFinished(.success(())) }
                return action
            case .collectingPlaylist(let head):
                let body = collected
                collected = []
                held -= collectedBytes
                let released = collectedBytes
                collectedBytes = 0
                state = .processingPlaylist(head)
                return [.releaseMemory(released), .processPlaylist(head, body)]
            case .streaming(let head, ended: false):
                state = .streaming(head, ended: true)
                var action: Action
                switch file {
                case .opening, .open:
                    if head.contentLength == nil && KeySizedBody.isKeySize(received) {
                        // A body of unknown length that turned out key-sized is not kept (KeySizedBody).
                        file = .stopped(readable: fileReadable)
                        action = [.abandonFile, .remove]
                    } else {
                        action = [.commit(head)]
                    }
                case .none, .stopped:
                    action = [.remove]
                }
                return action + settle() + [.notify]
            case .processingPlaylist, .playlistReady, .streaming(_, ended: true), .failed:
                return []
            }
        }
    }

    /// The collected playlist was rewritten.
    mutating func playlistRewritten(_ playlist: RewrittenPlaylist) -> Action {
        guard case .processingPlaylist(let head) = state else { return [] }
        state = .playlistReady(head, playlist)
        return [.remove, .notify]
    }

    /// The collected playlist could not be rewritten (not a playlist, too broken).
    mutating func playlistFailed(_ error: any HTTPMappableError) -> Action {
        guard case .processingPlaylist = state else { return [] }
        return fail(error, origin: false)
    }

    // MARK: - Cache file events

    mutating func fileOpened() -> Action {
        guard case .opening = file else { return [] }
        file = .open(written: 0)
        return []
    }

    /// `total` bytes of the body are on disk.
    mutating func fileWritten(_ total: Int64) -> Action {
        guard case .open = file else { return [] }
        file = .open(written: total)
        return settle()
    }

    /// The cache file takes no more bytes (creating or writing it failed); what it holds stays readable.
    mutating func fileStopped() -> Action {
        switch file {
        case .none, .stopped: return []
        case .opening, .open: file = .stopped(readable: fileReadable)
        }
        let action = subscribers.isEmpty ? dropIfNotWorthIt() : []
        return action + settle()
    }

    // MARK: - Clients

    /// Adds a client reading from `offset`. False when it cannot be served from there (the download failed, or
    /// the bytes before the window are not on disk): it should start a download of its own.
    mutating func subscribe(_ id: SubscriberID, from offset: Int64) -> Bool {
        subscribe(id, from: offset, joiningLive: false) != nil
    }

    /// Adds a client reading from `offset`, and returns where it reads from: `offset`, or — `joiningLive`, a client
    /// asking for the whole body of a stream that never ends (no length, its start no longer on disk or in memory)
    /// — at the start of what memory still holds (no later than the slowest client), at an MPEG-TS packet boundary
    /// (188 bytes from the start): it joins the broadcast, as a tuner does, instead of opening another origin
    /// connection. `nil` when it cannot be served (the download failed, or the bytes from `offset` are gone and it
    /// cannot join live).
    mutating func subscribe(_ id: SubscriberID, from offset: Int64, joiningLive: Bool) -> Int64? {
        var offset = offset
        switch state {
        case .failed: return nil
        case .streaming(let head, let ended):
            if offset < servableFrom || offset > received {
                guard joiningLive, offset == 0, head.contentLength == nil, !ended else { return nil }
                offset = min(received, (windowStart + 187) / 188 * 188)
            }
        case .awaitingHead, .sniffing, .collectingPlaylist, .processingPlaylist, .playlistReady: break
        }
        subscribers[id] = offset
        unwatched = false
        return offset
    }

    /// A client has taken the body up to `offset`.
    mutating func progress(_ id: SubscriberID, to offset: Int64) -> Action {
        guard subscribers[id] != nil else { return [] }
        subscribers[id] = offset
        return settle()
    }

    /// A client left (done, or gone). The last one to leave a download that is not worth finishing for nobody
    /// cancels it.
    mutating func unsubscribe(_ id: SubscriberID) -> Action {
        guard subscribers.removeValue(forKey: id) != nil else { return [] }
        var action: Action = []
        if subscribers.isEmpty {
            switch state {
            case .awaitingHead, .sniffing: unwatched = true
            default: action += dropIfNotWorthIt()
            }
        }
        return action + settle()
    }

    /// Cancels a download nobody reads (a read-ahead of a rendition the player left); nothing half-written is kept.
    mutating func cancelUnwatched(_ error: any HTTPMappableError) -> Action {
        guard subscribers.isEmpty, isRunning else { return [] }
        return fail(error, origin: false)
    }

    // MARK: - Internals

    /// With no client left: a body of known length being stored completes in the background (as Varnish does);
    /// anything else — unknown length, too large, not stored — is cancelled.
    private mutating func dropIfNotWorthIt() -> Action {
        guard case .streaming(let head, ended: false) = state else { return [] }
        if head.contentLength != nil, case .open = file { return [] }
        if head.contentLength != nil, case .opening = file { return [] }
        return fail(
            ProxyError.unavailable("download of \(url.redacted) cancelled: no client is reading it and it is not being stored"),
            origin: false)
    }

    private mutating func begin(_ head: OriginResponseHead, isPlaylist: Bool) -> Action {
        let contentLength = head.contentLength.map(Int64.init)
        if isPlaylist, let contentLength, contentLength > limits.maxPlaylistBytes {
            return fail(
                ProxyError.corrupted("playlist of \(contentLength) bytes is over the \(limits.maxPlaylistBytes)-byte limit"), origin: false)
        }
        let info = FetchHead(
            contentLength: contentLength,
            contentType: isPlaylist
                ? MediaTypes.playlist
                : OriginHeadClassifier.mediaType(origin: head.headers.first(name: "Content-Type"), pathExtension: url.pathExtension),
            isPlaylist: isPlaylist, etag: head.strongETag, lastModified: head.headers.first(name: "Last-Modified"), url: head.url,
            originContentType: isPlaylist ? head.headers.first(name: "Content-Type") : nil)
        if isPlaylist {
            state = .collectingPlaylist(info)
            return [.begin(info, store: false), .notify]
        }
        // A key-sized body is handled as a key: never stored in clear (KeySizedBody).
        let store =
            cacheable && !KeySizedBody.isKeySize(contentLength) && (contentLength ?? 0) <= limits.maxObjectBytes
            && !(isChannel && contentLength == nil)
        state = .streaming(info, ended: false)
        file = store ? .opening : .none
        if unwatched && subscribers.isEmpty && !(store && contentLength != nil) {
            return fail(
                ProxyError.unavailable("download of \(url.redacted) cancelled: no client is reading it and it is not being stored"),
                origin: false)
        }
        return [.begin(info, store: store), .notify]
    }

    /// Decides what the held head is and replays the bytes that arrived meanwhile.
    private mutating func endSniffing(_ head: OriginResponseHead, isPlaylist: Bool) -> Action {
        let released = sniffer.heldBytes
        let prefix = sniffer.take()
        held -= released
        var action: Action = [.releaseMemory(released)]
        action += begin(head, isPlaylist: isPlaylist)
        for chunk in prefix where action.failure == nil {
            action += bodyReceived(chunk)
        }
        return action
    }

    private mutating func append(_ buffer: ByteBuffer, head: FetchHead) -> Action {
        let count = Int64(buffer.readableBytes)
        guard count > 0 else { return [] }
        window.append(Chunk(offset: received, buffer: buffer))
        received += count
        held += count
        var action: Action = [.releaseMemory(-count)]
        switch file {
        case .opening, .open:
            if head.contentLength == nil && received > limits.maxObjectBytes {
                // Grew past what is stored: relayed to its clients, not cached.
                file = .stopped(readable: fileReadable)
                action.append(.abandonFile)
                if subscribers.isEmpty {
                    action += dropIfNotWorthIt()
                    if action.failure != nil { return action }
                }
            } else {
                action.append(.store(buffer))
            }
        case .none, .stopped:
            if subscribers.isEmpty {
                action += dropIfNotWorthIt()
                if action.failure != nil { return action }
            }
        }
        action += settle()
        action.append(.notify)
        if received - windowStart > limits.window && !originPaused {
            originPaused = true
            action.append(.pauseOrigin)
        }
        return action
    }

    /// Lets go of the chunks nobody needs from memory any more, and lets a paused origin go on when the window
    /// has room again. A chunk on disk stays while a client still needs it and the window has room (clients that keep
    /// up are sent it from memory); past the window it goes, and a client behind reads the file.
    private mutating func settle() -> Action {
        var action: Action = []
        let slowest = subscribers.values.min() ?? received
        var released: Int64 = 0
        while let first = window.first, droppable(first, slowest: slowest) {
            window.removeFirst()
            let count = Int64(first.buffer.readableBytes)
            held -= count
            released += count
            windowStart = first.end
        }
        if released > 0 { action.append(.releaseMemory(released)) }
        if originPaused && received - windowStart <= limits.window {
            originPaused = false
            action.append(.resumeOrigin)
        }
        return action
    }

    private func droppable(_ chunk: Chunk, slowest: Int64) -> Bool {
        let full = received - windowStart > limits.window
        switch file {
        // The cache file takes every byte: until it has, the chunk stays (the origin waits past the window).
        case .opening: return false
        case .open(let written): return chunk.end <= written && (chunk.end <= slowest || full)
        case .stopped(let readable): return chunk.end <= slowest || (chunk.end <= readable && full)
        // Only the slowest client can let go of it.
        case .none: return chunk.end <= slowest
        }
    }

    private mutating func fail(_ error: any HTTPMappableError, origin: Bool) -> Action {
        guard isRunning else { return [] }
        state = .failed(error)
        failedAtOrigin = origin
        var action: Action = [.fail(error, origin: origin), .releaseMemory(held)]
        window.removeAll()
        collected = []
        collectedBytes = 0
        _ = sniffer.take()
        windowStart = received
        held = 0
        if case .opening = file { file = .none }
        if case .open = file { file = .none }
        if originPaused {
            originPaused = false
            action.append(.resumeOrigin)
        }
        action.append(.notify)
        return action
    }
}

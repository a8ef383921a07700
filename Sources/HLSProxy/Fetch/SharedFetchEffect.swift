import HLSCacheCore
import NIOCore

extension SharedFetchStateMachine {
    /// One thing the fetch does after an event. An event returns its effects in the order they arise (a chunk is
    /// stored, then memory is let go, then the clients are told); ``SharedFetch`` runs them in that order, waking
    /// (``resumeOrigin``, ``notify``) last, once the rest is done.
    enum Effect {
        /// Fail the download: cancel the origin request, abort the cache file, answer or cut off the clients; `origin`
        /// when it is the origin's failure (counted in the metrics).
        case fail(any HTTPMappableError, origin: Bool)
        /// The head is known: make the cache file when `store`, then let the clients see the head.
        case begin(FetchHead, store: Bool)
        /// A chunk for the cache file.
        case store(ByteBuffer)
        /// Stop writing the cache file (the object is not stored); clients keep reading.
        case abandonFile
        /// The whole body arrived: commit the cache file.
        case commit(FetchHead)
        /// The whole playlist arrived: rewrite it, then report with ``SharedFetchStateMachine/playlistRewritten(_:)``.
        case processPlaylist(FetchHead, [ByteBuffer])
        /// The clients have something new.
        case notify
        /// The window is full: the origin waits until ``resumeOrigin``.
        case pauseOrigin
        case resumeOrigin
        /// Nothing more to share: forget the fetch (new clients start another).
        case remove
        /// Bytes let go from memory; negative when taken (for the global budget).
        case releaseMemory(Int64)
    }
}

extension [SharedFetchStateMachine.Effect] {
    /// The failure among the effects, if any.
    var failure: (any HTTPMappableError)? {
        for case .fail(let error, _) in self { return error }
        return nil
    }

    /// Whether the failure is the origin's (counted in the metrics).
    var failureIsOrigin: Bool {
        for case .fail(_, let origin) in self { return origin }
        return false
    }

    /// The head the effects begin with, and whether it is stored.
    var begun: (head: FetchHead, store: Bool)? {
        for case .begin(let head, let store) in self { return (head, store) }
        return nil
    }

    /// The chunks for the cache file, in order.
    var stored: [ByteBuffer] {
        compactMap { if case .store(let chunk) = $0 { chunk } else { nil } }
    }

    var committed: FetchHead? {
        for case .commit(let head) in self { return head }
        return nil
    }

    var playlist: (head: FetchHead, body: [ByteBuffer])? {
        for case .processPlaylist(let head, let body) in self { return (head, body) }
        return nil
    }

    /// Bytes let go from memory in all, negative when taken.
    var memoryReleased: Int64 {
        reduce(0) { if case .releaseMemory(let count) = $1 { $0 + count } else { $0 } }
    }

    var abandonsFile: Bool { contains { if case .abandonFile = $0 { true } else { false } } }
    var notifies: Bool { contains { if case .notify = $0 { true } else { false } } }
    var pausesOrigin: Bool { contains { if case .pauseOrigin = $0 { true } else { false } } }
    var resumesOrigin: Bool { contains { if case .resumeOrigin = $0 { true } else { false } } }
    var removes: Bool { contains { if case .remove = $0 { true } else { false } } }
}

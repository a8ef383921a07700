import HLSCacheCore
import NIOCore

/// The decisions of one client reading a shared download (``FetchSubscription``), without a channel: when the head
/// goes out, what is sent next and from where (the download's memory window, or its cache file when the client is
/// behind), when the response ends, and what a failure means to a client that has or has not been sent anything.
///
/// Phases: waiting for the head → idle | writing (one write in flight at a time) → done.
struct FetchSubscriptionStateMachine {
    /// What the subscription does next.
    enum Action {
        /// Nothing until the download has news (or the write in flight completes).
        case wait
        /// The download failed before anything was sent: the caller's fallback answers instead.
        case fallback(any HTTPMappableError)
        /// The download failed before anything was sent: answer with the error.
        case sendError(any HTTPMappableError)
        /// The download failed mid-body: close the connection so the client sees it incomplete.
        case abort
        /// A 16-byte body this client may not receive (``KeySizedBody``).
        case refuseKeySized
        /// The resource is a playlist: answer with the rewritten one.
        case respondPlaylist(RewrittenPlaylist)
        /// The resource turned out to be a playlist: mark the exchange so, and wait for the rewritten one.
        case markPlaylist
        /// Send the head (when given), then the body part, then end the response when `end`. After a body part that
        /// does not end the response, report ``writeCompleted(success:)``.
        case send(head: FetchHead?, body: Body, end: Bool)
    }

    enum Body {
        case none
        /// Bytes from the download's memory window.
        case chunks([ByteBuffer])
        /// `length` bytes of the cache file from `offset`.
        case file(offset: Int64, length: Int64)
    }

    private enum State {
        case waitingForHead
        /// The head was sent; the next byte to send is `position`.
        case idle(position: Int64)
        /// A write is in flight; `position` is where it ends.
        case writing(position: Int64)
        case done
    }

    /// The most sent from the cache file in one write, so the position (and the download's view of it) moves on.
    static let maxFileWrite: Int64 = 8 << 20

    private var state: State = .waitingForHead
    private var playlistMarked = false
    private let range: (first: Int64, last: Int64)?
    private let headOnly: Bool
    private let mayReceiveKeySized: Bool
    private let hasFallback: Bool

    /// - Parameters:
    ///   - range: the bytes wanted (a Range request joined to the download), or the whole body.
    ///   - headOnly: a HEAD request.
    ///   - mayReceiveKeySized: whether a 16-byte body may go to this client (``KeySizedBody``).
    ///   - hasFallback: a failure before anything was sent goes to the caller's fallback.
    init(range: (first: Int64, last: Int64)?, headOnly: Bool, mayReceiveKeySized: Bool, hasFallback: Bool) {
        self.range = range
        self.headOnly = headOnly
        self.mayReceiveKeySized = mayReceiveKeySized
        self.hasFallback = hasFallback
    }

    /// Where a client of the whole body joined a never-ending stream (``joined(at:)``); 0 otherwise.
    private var joinedAt: Int64 = 0

    /// The first body byte this client wants.
    var startOffset: Int64 { range?.first ?? joinedAt }

    /// The client of the whole body joins a never-ending stream at `offset` (before the head is sent).
    mutating func joined(at offset: Int64) {
        guard range == nil, case .waitingForHead = state else { return }
        joinedAt = offset
    }

    /// Where the client reads from now (for ``SharedFetch/view(from:)``).
    var position: Int64 {
        switch state {
        case .waitingForHead, .done: return startOffset
        case .idle(let position), .writing(let position): return position
        }
    }

    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// The download has news: decides what to do with what `view` shows from ``position`` on.
    mutating func pump(_ view: SharedFetchStateMachine.View) -> Action {
        let position: Int64
        var head: FetchHead?
        switch state {
        case .done, .writing:
            return .wait
        case .idle(let at):
            position = at
            if view.failure != nil {
                state = .done
                return .abort
            }
        case .waitingForHead:
            if let error = view.failure {
                state = .done
                return hasFallback ? .fallback(error) : .sendError(error)
            }
            guard let known = view.head else { return .wait }
            if known.isPlaylist {
                guard let playlist = view.playlist else {
                    if playlistMarked { return .wait }
                    playlistMarked = true
                    return .markPlaylist
                }
                state = .done
                return .respondPlaylist(playlist)
            }
            if !mayReceiveKeySized {
                // Known to be key-sized: refused. Of unknown length: held back until more than 32 bytes or the end came.
                if KeySizedBody.isKeySize(known.contentLength)
                    || (known.contentLength == nil && view.ended && KeySizedBody.isKeySize(view.received))
                {
                    state = .done
                    return .refuseKeySized
                }
                if known.contentLength == nil && !view.ended && view.received <= KeySizedBody.largest { return .wait }
            }
            head = known
            if headOnly {
                state = .done
                return .send(head: known, body: .none, end: true)
            }
            position = startOffset
        }
        let end = range.map { $0.last + 1 } ?? Int64.max
        var next = position
        let body: Body
        if let fileEnd = view.fileEnd {
            // Behind the memory window: what it lacks is on disk.
            next = min(fileEnd, end, position + Self.maxFileWrite)
            body = .file(offset: position, length: next - position)
        } else {
            var slices: [ByteBuffer] = []
            for chunk in view.chunks where next < end {
                let length = min(Int64(chunk.readableBytes), end - next)
                slices.append(length == Int64(chunk.readableBytes) ? chunk : chunk.getSlice(at: chunk.readerIndex, length: Int(length))!)
                next += length
            }
            body = slices.isEmpty ? .none : .chunks(slices)
        }
        if next >= end || (view.ended && next == view.received) {
            state = .done
            return .send(head: head, body: body, end: true)
        }
        if case .none = body {
            state = .idle(position: next)
            return head == nil ? .wait : .send(head: head, body: .none, end: false)
        }
        state = .writing(position: next)
        return .send(head: head, body: body, end: false)
    }

    /// The write in flight completed. Returns the position to report to the download, or nil when the client is
    /// gone (then ``isDone``: close the connection).
    mutating func writeCompleted(success: Bool) -> Int64? {
        guard case .writing(let position) = state else { return nil }
        guard success else {
            state = .done
            return nil
        }
        state = .idle(position: position)
        return position
    }

    /// The client went away.
    mutating func cancelled() {
        state = .done
    }
}

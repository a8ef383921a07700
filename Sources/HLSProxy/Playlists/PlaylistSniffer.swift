import NIOCore

/// The first bytes of a response whose head leaves open whether it is a playlist (a generic type on a path without a
/// media extension, or a media path its origin labels a playlist), held until they tell: `#EXTM3U` after an optional
/// byte-order mark (``MediaTypes/sniffPlaylist(_:complete:)``). One definition for the shared fetch
/// (``SharedFetchStateMachine``) and the Range pass-through (``PassthroughRelay``).
struct PlaylistSniffer {
    /// The chunks held so far, in order.
    private(set) var held: [ByteBuffer] = []
    private(set) var heldBytes: Int64 = 0

    /// Holds another chunk. Returns whether the body is a playlist, or nil while too few bytes arrived to tell.
    mutating func feed(_ buffer: ByteBuffer) -> Bool? {
        held.append(buffer)
        heldBytes += Int64(buffer.readableBytes)
        return MediaTypes.sniffPlaylist(held.lazy.flatMap { $0.readableBytesView }, complete: false)
    }

    /// The decision once the body ended before its first bytes could tell (a short or empty body).
    var decisionAtEnd: Bool {
        MediaTypes.sniffPlaylist(held.lazy.flatMap { $0.readableBytesView }, complete: true) ?? false
    }

    /// Hands the held chunks over (to be replayed) and forgets them.
    mutating func take() -> [ByteBuffer] {
        defer {
            held = []
            heldBytes = 0
        }
        return held
    }
}

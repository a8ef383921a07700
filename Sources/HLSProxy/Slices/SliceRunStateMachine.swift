import HLSCacheStore
import HLSOrigin
import NIOCore

/// The decisions of one origin `Range` request for a run of slices (``SliceRun``), without a channel or a disk: the
/// `Range` to ask for, where the answer starts (a suffix run learns it from `Content-Range`), and how each chunk of
/// the body is cut at slice boundaries into pieces to store and deliver; the outcome at the end (a body shorter or
/// longer than announced is truncated, a stopped run is cancelled).
struct SliceRunStateMachine {
    /// A part of the body within one slice: stored in that slice's file, and delivered to the client.
    struct Piece: Equatable {
        let bytes: ByteBuffer
        let slice: Int64
        /// The object offset of its first byte.
        let offset: Int64
        /// It begins the slice (the slice's writer is made), or ends it (the slice is committed).
        let startsSlice: Bool
        let endsSlice: Bool
    }

    enum State: Equatable {
        /// Asked; the answer's head not accepted yet.
        case requested
        /// The next byte expected, the last the origin announced, and the object's size.
        case streaming(offset: Int64, lastByte: Int64, objectSize: Int64)
        /// Turned down or no longer wanted: the rest of the answer is not read.
        case stopped
        case finished
    }

    private(set) var state = State.requested
    let layout: SliceLayout
    /// The slices asked for; nil for a suffix run.
    let indices: ClosedRange<Int64>?
    /// A suffix run: the client's suffix length.
    let suffix: Int64?
    /// The first byte asked for (a suffix run: the first the origin answered with, once it answered; -1 when its
    /// answer had no usable `Content-Range`).
    private(set) var firstByte: Int64

    /// A run of the slices `indices`, or — `indices` nil — a suffix run for the last `suffix` bytes.
    init(layout: SliceLayout, indices: ClosedRange<Int64>?, suffix: Int64?) {
        precondition((indices == nil) != (suffix == nil), "a run of slices, or of a suffix")
        self.layout = layout
        self.indices = indices
        self.suffix = suffix
        firstByte = (indices?.lowerBound ?? 0) * layout.sliceSize
    }

    /// The `Range` header of the origin request: the run's slices, or for a suffix run the last `suffix + sliceSize
    /// - 1` bytes, so that the answer starts at or before the first byte of the slice holding the client's first byte
    /// and every slice the client's range covers is stored whole.
    var rangeHeader: String {
        if let indices { return "bytes=\(firstByte)-\((indices.upperBound + 1) * layout.sliceSize - 1)" }
        return "bytes=-\((suffix ?? 0) + layout.sliceSize - 1)"
    }

    /// The origin's head arrived: returns the first byte its body starts at, for the stitcher to accept or turn down.
    mutating func answered(_ head: OriginResponseHead) -> Int64 {
        if suffix != nil {
            firstByte = head.status == 206 ? head.headers.first(name: "Content-Range").flatMap(SliceResponse.parse)?.first ?? -1 : -1
        }
        return firstByte
    }

    /// The stitcher accepted the answer as a version of `objectSize` bytes: its body is expected from ``firstByte``
    /// to the last byte its `Content-Range` announced.
    mutating func accepted(objectSize: Int64, contentRange: String?) {
        guard case .requested = state else { return }
        let lastByte = SliceResponse.parse(contentRange ?? "")?.last ?? -1
        state = .streaming(offset: firstByte, lastByte: lastByte, objectSize: objectSize)
    }

    /// The run is turned down, cancelled, or — relayed without storing — no longer needed by its client.
    mutating func stop() {
        if case .finished = state { return }
        state = .stopped
    }

    var isStopped: Bool { state == .stopped }

    /// Cuts a chunk of the body into pieces at slice boundaries; fails to stop reading (stopped, not accepted) or
    /// when the chunk goes past the last byte announced (truncated: the origin sent more than it said).
    mutating func received(_ buffer: ByteBuffer) -> Result<[Piece], OriginError> {
        guard case .streaming(var offset, let lastByte, let objectSize) = state else { return .failure(.cancelled) }
        guard offset + Int64(buffer.readableBytes) - 1 <= lastByte else { return .failure(.truncated) }
        var buffer = buffer
        var pieces: [Piece] = []
        while buffer.readableBytes > 0 {
            let index = layout.index(of: offset)
            let slice = layout.bytes(of: index, total: objectSize)
            let count = min(buffer.readableBytes, Int(slice.last - offset + 1))
            guard let bytes = buffer.readSlice(length: count) else { break }
            pieces.append(
                Piece(
                    bytes: bytes, slice: index, offset: offset, startsSlice: offset == slice.first,
                    endsSlice: offset + Int64(count) - 1 == slice.last))
            offset += Int64(count)
        }
        state = .streaming(offset: offset, lastByte: lastByte, objectSize: objectSize)
        return .success(pieces)
    }

    /// The origin's answer ended: a success only when every announced byte arrived and the run was not stopped.
    mutating func finished(_ result: Result<Void, OriginError>) -> Result<Void, OriginError> {
        defer { state = .finished }
        guard case .success = result else { return result }
        switch state {
        case .streaming(let offset, let lastByte, _):
            return offset == lastByte + 1 ? .success(()) : .failure(.truncated)
        case .stopped:
            return .failure(.cancelled)
        case .requested:
            return .failure(.truncated)
        case .finished:
            return .failure(.cancelled)
        }
    }
}

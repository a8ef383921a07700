import CZlib
import NIOCore
import NIOHTTP1

/// Undoes a `Content-Encoding` of `gzip`, `x-gzip` or `deflate` while the body streams, so the proxy, the cache
/// and the downloader only ever see a resource's own bytes.
///
/// An origin may compress without being asked: objects stored gzipped on S3 or GCS buckets with
/// `Content-Encoding: gzip` are sent that way to every client. Parsed as a playlist those bytes are garbage,
/// and cached as a subtitle or segment they reach the player without the header that says how to read them.
/// Used on one event loop only (by ``OriginAttemptDelegate``).
final class ContentDecoder {
    /// The content codings this decoder undoes.
    enum Coding: String {
        case gzip, deflate
    }

    /// The most a body may grow by decoding, after its first ``freeOutputBytes``: gzip of real playlists and
    /// subtitles is 3–30×; far beyond that is a decompression bomb.
    static let maxRatio = 200
    /// Output always allowed before the ratio applies.
    static let freeOutputBytes = 1 << 20
    /// Output is handed on in pieces of at most this size, so a small input cannot become one huge buffer.
    static let pieceBytes = 256 << 10

    /// The coding named by `headers`: `nil` for none or `identity`; an error for a coding this decoder does
    /// not know (`br`, `zstd`, `compress`) or for several codings stacked.
    static func coding(of headers: HTTPHeaders) throws(OriginError) -> Coding? {
        let codings = headers[canonicalForm: "content-encoding"]
            .map { String($0.filter { $0 != " " && $0 != "\t" }).lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        guard let first = codings.first else { return nil }
        guard codings.count == 1 else {
            throw OriginError.encoding.with(
                "the origin stacked content codings (\(codings.joined(separator: ", "))), which are not supported")
        }
        switch first {
        case "gzip", "x-gzip": return .gzip
        case "deflate": return .deflate
        default: throw OriginError.encoding.with("the origin sent Content-Encoding \(first), which is not supported (gzip and deflate are)")
        }
    }

    private let coding: Coding
    private var stream = z_stream()
    private var initialised = false
    private var ended = false
    /// A deflate body starts with a zlib header (RFC 1950) or, from some servers, with raw deflate data; the
    /// first byte tells, and one byte alone cannot, so it waits here for the second.
    private var pending: [UInt8] = []
    private(set) var inputBytes = 0
    private(set) var outputBytes = 0

    init(coding: Coding) {
        self.coding = coding
    }

    deinit {
        if initialised { inflateEnd(&stream) }
    }

    /// Decodes `input`; returns the decoded bytes in pieces of at most ``pieceBytes`` (none while a header is
    /// incomplete).
    func decode(_ input: ByteBuffer, allocator: ByteBufferAllocator) throws(OriginError) -> [ByteBuffer] {
        inputBytes += input.readableBytes
        let bytes = pending + Array(input.readableBytesView)
        pending = []
        if !initialised {
            if coding == .deflate && bytes.count < 2 {
                pending = bytes
                return []
            }
            try start(raw: coding == .deflate && !Self.hasZlibHeader(bytes))
        }
        var pieces: [ByteBuffer] = []
        var offset = 0
        while offset < bytes.count {
            if ended {
                // gzip allows several members back to back (RFC 1952 §2.2); anything else after the end is not a body.
                guard coding == .gzip, bytes[offset] == 0x1f else {
                    throw OriginError.encoding.with("\(bytes.count - offset) bytes follow the end of the \(coding.rawValue) data")
                }
                inflateReset(&stream)
                ended = false
            }
            let (consumed, produced) = try inflateSome(bytes, from: offset, allocator: allocator)
            offset += consumed
            pieces.append(contentsOf: produced)
            if consumed == 0 && produced.isEmpty && !ended {
                throw OriginError.encoding.with("the \(coding.rawValue) body does not decode (no progress)")
            }
        }
        return pieces
    }

    /// Checks that the body ended where the coded data ends.
    func finish() throws(OriginError) {
        guard ended else {
            throw OriginError.truncated.with("the \(coding.rawValue) body ends before its end marker (\(inputBytes) bytes received)")
        }
    }

    private func start(raw: Bool) throws(OriginError) {
        // windowBits 15 + 32: a gzip or zlib header, detected; -15: raw deflate.
        let bits: Int32 = raw ? -15 : 15 + 32
        guard inflateInit2_(&stream, bits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw OriginError.encoding.with("zlib could not start (out of memory)")
        }
        initialised = true
    }

    /// Whether `bytes` open with a zlib header: compression method 8 and a check value divisible by 31.
    static func hasZlibHeader(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2 else { return false }
        return bytes[0] & 0x0f == 8 && (UInt16(bytes[0]) << 8 | UInt16(bytes[1])) % 31 == 0
    }

    /// Inflates from `offset` until the input is used up or the coded data ends.
    private func inflateSome(_ bytes: [UInt8], from offset: Int, allocator: ByteBufferAllocator) throws(OriginError) -> (Int, [ByteBuffer])
    {
        var pieces: [ByteBuffer] = []
        var status: Int32 = Z_OK
        let available = bytes.count - offset
        var remaining = available
        // Room for a few times the input (text inflates 3–10×), so a small slice does not pin a large buffer
        // while the piece waits in a client's queue; a full piece is followed by another.
        let capacity = min(Self.pieceBytes, max(16 << 10, available * 8))
        repeat {
            var piece = allocator.buffer(capacity: capacity)
            let written = bytes.withUnsafeBufferPointer { source -> Int in
                piece.writeWithUnsafeMutableBytes(minimumWritableBytes: capacity) { target -> Int in
                    stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress! + (source.count - remaining))
                    stream.avail_in = uInt(remaining)
                    stream.next_out = target.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(capacity)
                    status = inflate(&stream, Z_NO_FLUSH)
                    remaining = Int(stream.avail_in)
                    return capacity - Int(stream.avail_out)
                }
            }
            outputBytes += written
            if written > 0 { pieces.append(piece) }
            switch status {
            case Z_STREAM_END:
                ended = true
            case Z_OK, Z_BUF_ERROR:
                break
            default:
                let reason = stream.msg.map { String(cString: $0) } ?? "error \(status)"
                throw OriginError.encoding.with("the \(coding.rawValue) body does not decode (\(reason))")
            }
            if outputBytes > Self.freeOutputBytes && outputBytes / Self.maxRatio > max(inputBytes, 1) {
                throw OriginError.encoding.with(
                    "the \(coding.rawValue) body grows more than \(Self.maxRatio) times when decoded (a decompression bomb?)")
            }
            // More output may be waiting while the piece came back full; otherwise the input is used up.
            if written < capacity && (remaining == 0 || status == Z_BUF_ERROR) { break }
        } while !ended
        return (available - remaining, pieces)
    }
}

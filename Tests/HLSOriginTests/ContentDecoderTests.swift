import HLSCacheCore
import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSOrigin

@Suite("Compressed origin bodies")
struct ContentDecoderTests {
    /// Text shaped like a real VOD playlist (repetitive, so it compresses well, as gzip on an origin would).
    static let playlist: [UInt8] = {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n"
        for index in 0..<2000 { text += "#EXTINF:6.006,\nsegment_\(index).ts?token=abcdef\n" }
        return Array((text + "#EXT-X-ENDLIST\n").utf8)
    }()

    /// Feeds `coded` in slices of `step` bytes and returns what came out, piece by piece.
    static func decode(_ coded: [UInt8], coding: ContentDecoder.Coding, step: Int) throws(OriginError) -> (
        bytes: [UInt8], pieces: [Int], decoder: ContentDecoder
    ) {
        let decoder = ContentDecoder(coding: coding)
        var out: [UInt8] = []
        var pieces: [Int] = []
        var offset = 0
        while offset < coded.count {
            let end = min(offset + step, coded.count)
            for piece in try decoder.decode(ByteBuffer(bytes: coded[offset..<end]), allocator: ByteBufferAllocator()) {
                out += piece.readableBytesView
                pieces.append(piece.readableBytes)
            }
            offset = end
        }
        try decoder.finish()
        return (out, pieces, decoder)
    }

    @Test(arguments: [1, 2, 7, 4096, 1 << 20])
    func gzipDecodesWhateverTheSlicing(step: Int) throws {
        let coded = TestZlib.compress(Self.playlist, format: .gzip)
        #expect(coded.count * 10 < Self.playlist.count)  // it really is compressed
        let result = try Self.decode(coded, coding: .gzip, step: step)
        #expect(result.bytes == Self.playlist)
        #expect(result.decoder.inputBytes == coded.count)
    }

    @Test(arguments: [TestZlib.Format.zlib, .raw], [1, 3, 65536])
    func deflateAcceptsBothTheRFCAndTheRawShape(format: TestZlib.Format, step: Int) throws {
        let coded = TestZlib.compress(Self.playlist, format: format)
        #expect(ContentDecoder.hasZlibHeader(coded) == (format == .zlib))
        #expect(try Self.decode(coded, coding: .deflate, step: step).bytes == Self.playlist)
    }

    @Test func concatenatedGzipMembersAreOneBody() throws {
        let first = Array(Self.playlist[0..<5000])
        let second = Array(Self.playlist[5000...])
        let coded = TestZlib.compress(first, format: .gzip) + TestZlib.compress(second, format: .gzip)
        #expect(try Self.decode(coded, coding: .gzip, step: 333).bytes == Self.playlist)
    }

    @Test func largeOutputComesInBoundedPieces() throws {
        // 3 MiB in one input slice would otherwise become one 3 MiB buffer.
        let plain = TestOrigin.textBytes(3 << 20)
        let coded = TestZlib.compress(plain, format: .gzip)
        let result = try Self.decode(coded, coding: .gzip, step: coded.count)
        #expect(result.bytes == plain)
        #expect(result.pieces.allSatisfy { $0 <= ContentDecoder.pieceBytes })
        #expect(result.pieces.count >= 12)
    }

    @Test func aBodyCutShortIsTruncated() throws {
        let coded = TestZlib.compress(Self.playlist, format: .gzip)
        let error = #expect(throws: OriginError.truncated) {
            _ = try Self.decode(Array(coded.dropLast(10)), coding: .gzip, step: 512)
        }
        #expect(error?.message.contains("end marker") == true)
        // A deflate body of one byte never even started.
        #expect(throws: OriginError.truncated) { _ = try Self.decode([0x78], coding: .deflate, step: 1) }
    }

    @Test func damagedOrTrailingDataIsAnEncodingError() throws {
        var coded = TestZlib.compress(Self.playlist, format: .gzip)
        coded[coded.count / 2] ^= 0xff
        coded[coded.count / 2 + 1] ^= 0xff
        #expect(throws: OriginError.encoding) { _ = try Self.decode(coded, coding: .gzip, step: 100) }
        #expect(throws: OriginError.encoding) { _ = try Self.decode(Array("not gzip at all".utf8), coding: .gzip, step: 4) }
        let trailing = TestZlib.compress(Self.playlist, format: .gzip) + Array("<html>".utf8)
        let error = #expect(throws: OriginError.encoding) { _ = try Self.decode(trailing, coding: .gzip, step: 100) }
        #expect(error?.message.contains("follow the end") == true)
    }

    @Test func aDecompressionBombIsRefused() throws {
        let bomb = TestZlib.compress([UInt8](repeating: 0, count: 64 << 20), format: .gzip, level: 9)
        #expect(bomb.count < 128 << 10)
        let error = #expect(throws: OriginError.encoding) { _ = try Self.decode(bomb, coding: .gzip, step: 16384) }
        #expect(error?.message.contains("\(ContentDecoder.maxRatio) times") == true)
    }

    @Test func codingsAreReadFromTheHeader() throws {
        func coding(_ values: String...) throws(OriginError) -> ContentDecoder.Coding? {
            var headers = HTTPHeaders()
            for value in values { headers.add(name: "Content-Encoding", value: value) }
            return try ContentDecoder.coding(of: headers)
        }
        #expect(try coding() == nil)
        #expect(try coding("identity") == nil)
        #expect(try coding("gzip") == .gzip)
        #expect(try coding(" GZip ") == .gzip)
        #expect(try coding("x-gzip") == .gzip)
        #expect(try coding("deflate") == .deflate)
        #expect(try coding("identity, gzip") == .gzip)
        let brotli = #expect(throws: OriginError.encoding) { _ = try coding("br") }
        #expect(brotli?.message.contains("Content-Encoding br") == true)
        #expect(throws: OriginError.encoding) { _ = try coding("gzip, br") }
        #expect(throws: OriginError.encoding) { _ = try coding("gzip", "gzip") }
    }
}

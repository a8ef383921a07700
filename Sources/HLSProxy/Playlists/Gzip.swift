import CZlib

/// One-shot gzip for rewritten playlists: compressed once when the playlist is stored, then served as a file.
/// (NIOHTTPCompression compresses per response and must never see a FileRegion; we need neither.)
package enum Gzip {
    /// Compresses `input` into a gzip member (RFC 1952).
    package static func compress(_ input: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        // windowBits 15 + 16 selects the gzip wrapper.
        guard
            deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
                == Z_OK
        else { fatalError("zlib deflateInit2 failed: out of memory") }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(input.count)))
        var output = [UInt8](repeating: 0, count: bound)
        var input = input
        let produced = input.withUnsafeMutableBufferPointer { src in
            output.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                let status = deflate(&stream, Z_FINISH)
                precondition(status == Z_STREAM_END, "deflate with a deflateBound-sized buffer must finish")
                return dst.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(produced...)
        return output
    }
}

import CZlib

/// Compresses test bodies with the system zlib, in the three shapes origins send.
package enum TestZlib {
    package enum Format: String, Sendable {
        /// RFC 1952 (`Content-Encoding: gzip`).
        case gzip
        /// RFC 1950 (`deflate` as the RFC means it).
        case zlib
        /// Bare RFC 1951 data (`deflate` as some servers send it).
        case raw
    }

    package static func compress(_ input: [UInt8], format: Format, level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        let bits: Int32 =
            switch format {
            case .gzip: 15 + 16
            case .zlib: 15
            case .raw: -15
            }
        precondition(
            deflateInit2_(&stream, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
        )
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 64)
        var input = input
        let produced = input.withUnsafeMutableBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.next_in = source.baseAddress
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                precondition(deflate(&stream, Z_FINISH) == Z_STREAM_END)
                return target.count - Int(stream.avail_out)
            }
        }
        return Array(output[0..<produced])
    }
}

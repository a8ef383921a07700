import CZlib

/// Compresses test bodies with the system zlib, in the three shapes origins send, and decompresses what the proxy
/// gzipped.
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

    /// Decompresses a gzip or zlib member (the proxy's own gzipped playlists; the server decodes origin bodies as they
    /// stream, in `HLSOrigin.ContentDecoder`). `nil` when it is not one, or is larger than `maxBytes`.
    package static func decompress(_ input: [UInt8], maxBytes: Int = 64 << 20) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var input = input
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        return input.withUnsafeMutableBufferPointer { src -> [UInt8]? in
            stream.next_in = src.baseAddress
            stream.avail_in = uInt(src.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { dst -> (Int32, Int) in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = uInt(dst.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, dst.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[0..<produced])
                if output.count > maxBytes { return nil }
                if status == Z_STREAM_END { return output }
                if status != Z_OK { return nil }
                if produced == 0 && stream.avail_in == 0 { return nil }
            }
        }
    }
}

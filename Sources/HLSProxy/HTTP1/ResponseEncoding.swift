import NIOCore
import NIOHTTP1

/// How a response body is delimited on the wire.
enum BodyFraming: Equatable {
    /// No body may follow (HEAD, 1xx, 204, 304).
    case none
    /// `Content-Length` says how many bytes follow.
    case length
    /// `Transfer-Encoding: chunked`: every body write is framed, the end is the zero-length chunk.
    case chunked
    /// Neither (an HTTP/1.0 client and no known length): the body ends when the connection closes.
    case untilClose
}

/// Renders HTTP/1.1 response heads and chunk framing straight into bytes — the work NIO's `HTTPResponseEncoder`
/// does, without a handler of its own and without wrapping every write in an `HTTPServerResponsePart` (together
/// with `HTTPServerPipelineHandler`, a tenth of a cache hit's CPU; docs/benchmarks.md). Pure: tests call it
/// directly.
enum ResponseEncoding {
    /// Writes the status line, the headers and the blank line, and returns how the body is framed.
    /// - Parameters:
    ///   - bodyLength: the length of a complete body, written as `Content-Length` when the caller set none
    ///     (a HEAD response carries the length of the GET's body, so callers set it themselves there).
    ///   - chunkedAllowed: the client speaks HTTP/1.1, so a body of unknown length can be chunked.
    ///   - headOnly: the request was HEAD: the head is what a GET would get, but nothing follows it.
    ///   - connection: the `Connection` value to send instead of any the caller set (`close`, `keep-alive`).
    ///   - date: the `Date` line (``DateLine``), written last; nil for none.
    ///   - terminated: end the head with its blank line (false: the caller adds the last lines, ``HitReplay``).
    static func writeHead(
        status: HTTPResponseStatus, headers: HTTPHeaders, bodyLength: Int64?, chunkedAllowed: Bool, headOnly: Bool, connection: String?,
        date: ByteBuffer? = nil, terminated: Bool = true, into buffer: inout ByteBuffer
    ) -> BodyFraming {
        writeStatusLine(status, into: &buffer)
        let framing: BodyFraming
        var skipLength = false
        var extra: StaticString? = nil
        var extraLength: Int64? = nil
        if !status.mayHaveResponseBody {
            framing = .none
            skipLength = true
        } else if headers.contains(name: "content-length") {
            framing = headOnly ? .none : .length
        } else if let bodyLength {
            framing = headOnly ? .none : .length
            extraLength = bodyLength
        } else if chunkedAllowed {
            framing = headOnly ? .none : .chunked
            extra = "Transfer-Encoding: chunked\r\n"
        } else {
            framing = headOnly ? .none : .untilClose
        }
        for (name, value) in headers {
            if skipLength && equalsIgnoringCase(name, "content-length") { continue }
            if equalsIgnoringCase(name, "transfer-encoding") { continue }
            if equalsIgnoringCase(name, "connection") { continue }
            buffer.writeString(name)
            buffer.writeStaticString(": ")
            buffer.writeString(value)
            buffer.writeStaticString("\r\n")
        }
        if let extraLength {
            buffer.writeStaticString("Content-Length: ")
            buffer.writeString(String(extraLength))
            buffer.writeStaticString("\r\n")
        }
        if let extra { buffer.writeStaticString(extra) }
        if let connection {
            buffer.writeStaticString("Connection: ")
            buffer.writeString(connection)
            buffer.writeStaticString("\r\n")
        }
        if let date { buffer.writeImmutableBuffer(date) }
        if terminated { buffer.writeStaticString("\r\n") }
        return framing
    }

    static func writeStatusLine(_ status: HTTPResponseStatus, into buffer: inout ByteBuffer) {
        switch status {
        case .ok: buffer.writeStaticString("HTTP/1.1 200 OK\r\n")
        case .partialContent: buffer.writeStaticString("HTTP/1.1 206 Partial Content\r\n")
        case .notModified: buffer.writeStaticString("HTTP/1.1 304 Not Modified\r\n")
        default:
            buffer.writeStaticString("HTTP/1.1 ")
            buffer.writeString(String(status.code))
            buffer.writeStaticString(" ")
            buffer.writeString(status.reasonPhrase)
            buffer.writeStaticString("\r\n")
        }
    }

    /// The line in front of a chunk of `count` bytes (`count` > 0: an empty chunk would end the body).
    static func writeChunkHeader(count: Int, into buffer: inout ByteBuffer) {
        buffer.writeString(String(count, radix: 16))
        buffer.writeStaticString("\r\n")
    }

    /// What follows every chunk.
    static let chunkTrailer: StaticString = "\r\n"
    /// The zero-length chunk that ends a chunked body (no trailers).
    static let lastChunk: StaticString = "0\r\n\r\n"

    /// ASCII case-insensitive comparison of a header name with a lower-case literal.
    static func equalsIgnoringCase(_ name: String, _ lower: StaticString) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            guard bytes.count == lower.utf8CodeUnitCount else { return false }
            let expected = lower.utf8Start
            for index in 0..<bytes.count {
                var byte = bytes[index]
                if byte >= 0x41 && byte <= 0x5A { byte |= 0x20 }
                if byte != expected[index] { return false }
            }
            return true
        }
    }
}

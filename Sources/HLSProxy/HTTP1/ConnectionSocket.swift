#if canImport(Glibc)
    import Glibc
#endif
import NIOCore

/// A client connection's socket, for sending a hit's response head and body (from memory, or its file) with `sendmsg`
/// and `sendfile` straight from ``ProxyHTTPHandler``, as nginx does, instead of through NIO's write path (its
/// pending-writes queue, promises and flush: about a fifth of the event loop's instructions for a 2 MiB hit, and two
/// `setsockopt` calls for `TCP_CORK` that `MSG_MORE` makes unnecessary). Used only while NIO holds none of the connection's bytes, so
/// nothing is sent out of order; what the kernel does not take at once is handed back to NIO.
///
/// NIO does not expose a channel's descriptor. It is read from the channel's description (`fd=N`, NIOPosix's
/// `BaseSocket`), and trusted only when that descriptor's socket has the channel's own local and remote addresses
/// (one connection per address pair); anything else — a NIO that words it differently, a channel that is not a
/// socket — and the connection is written the usual way.
struct ConnectionSocket {
    let descriptor: CInt

    /// What one send did.
    enum Sent: Equatable {
        /// Every byte was taken.
        case all
        /// The kernel took this many bytes and would block for the rest.
        case partly(Int64)
        /// The connection failed (`errno`).
        case failed(CInt)
    }

    /// `channel`'s socket, or nil if it cannot be known for sure. Called on the channel's event loop (the descriptor
    /// stays the channel's until NIO closes it, which it does on that loop).
    static func of(_ channel: any Channel) -> ConnectionSocket? {
        #if os(Linux)
            guard let local = channel.localAddress, let remote = channel.remoteAddress,
                let descriptor = descriptor(in: String(describing: channel))
            else { return nil }
            guard matches(remote, descriptor: descriptor, getpeername), matches(local, descriptor: descriptor, getsockname) else {
                return nil
            }
            return ConnectionSocket(descriptor: descriptor)
        #else
            return nil
        #endif
    }

    /// `sendfile` to a connection the peer closed raises `SIGPIPE` (it takes no `MSG_NOSIGNAL`), which would end the
    /// process: ignored, as nginx does, from the first file sent this way.
    private static let ignoreBrokenPipe: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    /// The number after the first `fd=` in `description`.
    static func descriptor(in description: String) -> CInt? {
        guard let range = description.utf8.firstRange(of: "fd=".utf8) else { return nil }
        let digits = description.utf8[range.upperBound...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard !digits.isEmpty, digits.count < 10 else { return nil }
        return digits.reduce(CInt(0)) { $0 * 10 + CInt($1 - UInt8(ascii: "0")) }
    }

    /// Whether the address `name` (getsockname or getpeername) reports for `descriptor` is `address`.
    private static func matches(
        _ address: SocketAddress, descriptor: CInt,
        _ name: (CInt, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?) -> CInt
    ) -> Bool {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(descriptor, $0, &length) }
        }
        guard result == 0 else { return false }
        return address.withSockAddr { pointer, size in
            size == Int(length) && memcmp(pointer, &storage, size) == 0
        }
    }

    /// Sends `first`, `second` and `third` in one `sendmsg`; `more`: more bytes follow at once (`MSG_MORE`: they share
    /// full segments with what comes next instead of leaving in a small one of their own).
    func send(_ first: ByteBuffer, _ second: ByteBuffer, _ third: ByteBuffer = ByteBuffer(), more: Bool) -> Sent {
        #if os(Linux)
            let total = first.readableBytes + second.readableBytes + third.readableBytes
            let (sent, code) = first.withUnsafeReadableBytes { a in
                second.withUnsafeReadableBytes { b in
                    third.withUnsafeReadableBytes { c in
                        var vectors = (
                            iovec(iov_base: UnsafeMutableRawPointer(mutating: a.baseAddress), iov_len: a.count),
                            iovec(iov_base: UnsafeMutableRawPointer(mutating: b.baseAddress), iov_len: b.count),
                            iovec(iov_base: UnsafeMutableRawPointer(mutating: c.baseAddress), iov_len: c.count)
                        )
                        return withUnsafeMutableBytes(of: &vectors) { raw in
                            var message = msghdr()
                            message.msg_iov = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
                            message.msg_iovlen = 3
                            let flags = CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT) | (more ? CInt(MSG_MORE) : 0)
                            while true {
                                let n = sendmsg(descriptor, &message, flags)
                                if n < 0 && errno == EINTR { continue }
                                return (n, n < 0 ? errno : 0)
                            }
                        }
                    }
                }
            }
            if sent < 0 { return code == EAGAIN || code == EWOULDBLOCK ? .partly(0) : .failed(code) }
            return sent == total ? .all : .partly(Int64(sent))
        #else
            return .partly(0)
        #endif
    }

    /// Sends `length` bytes of the file `file` from `offset`, until done or the socket would block.
    func sendFile(_ file: CInt, offset: Int64, length: Int64) -> Sent {
        #if os(Linux)
            _ = Self.ignoreBrokenPipe
            var position = off_t(offset)
            let end = offset + length
            while Int64(position) < end {
                let n = sendfile(descriptor, file, &position, Int(end - Int64(position)))
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    if code == EAGAIN || code == EWOULDBLOCK { break }
                    return .failed(code)
                }
                // The file is shorter than it was said to be: what NIO's FileRegion would report too.
                if n == 0 { return .failed(EIO) }
            }
            return Int64(position) == end ? .all : .partly(Int64(position) - offset)
        #else
            return .partly(0)
        #endif
    }
}

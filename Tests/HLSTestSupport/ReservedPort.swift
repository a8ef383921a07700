#if canImport(Glibc)
    import Glibc
#endif

/// A port on 127.0.0.1 that nothing answers on and nothing else can take: a TCP socket bound there that never
/// listens (connections are refused). A stopped server's port is no dead origin: in a parallel run the next test
/// to bind port 0 may be given it and answer. No `SO_REUSEADDR`, so even a server that sets it cannot bind here.
package final class ReservedPort: Sendable {
    package struct Unavailable: Error {}

    package let port: Int
    private let descriptor: Int32

    /// Binds an OS-chosen port; throws when the socket cannot be made.
    package init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Unavailable() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            throw Unavailable()
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// `http://127.0.0.1:PORT`, an origin that refuses every connection.
    package var baseURL: String { "http://127.0.0.1:\(port)" }

    deinit { close(descriptor) }
}
